#include "models/chat_template_jinja.h"

#include <nlohmann/json.hpp>

#include "models/utf8.h"

namespace brigade {
namespace {

using json = nlohmann::ordered_json;
using jinja::Value;
using jinja::ValueList;

Expected<Value> from_json(const json& j, const std::string& what) {
  try {
    return Value::from_json(j);
  } catch (const jinja::Error& e) {
    return invalid_argument(what + ": " + e.what());
  }
}

Expected<Value> message_value(const ChatMessage& m, size_t index) {
  const std::string at = "chat message " + std::to_string(index) + ": ";
  if (!is_valid_utf8(m.role) || !is_valid_utf8(m.content) || !is_valid_utf8(m.tool_call_id))
    return invalid_argument(at + "not valid UTF-8");
  Value v = Value::new_dict();
  v.dict().set("role", Value(m.role));
  // transformers drops the keys whose value is None: a calls-only turn has no content key.
  if (!m.parts.empty()) {
    ValueList parts;
    for (const ChatPart& p : m.parts) {
      if (!is_valid_utf8(p.text)) return invalid_argument(at + "not valid UTF-8");
      Value part = Value::new_dict();
      part.dict().set("type", Value(p.type));
      if (p.type == "text") part.dict().set("text", Value(p.text));
      parts.push_back(std::move(part));
    }
    v.dict().set("content", Value(std::move(parts)));
  } else if (!m.content.empty() || m.tool_calls.empty()) {
    v.dict().set("content", Value(m.content));
  }
  if (!m.tool_calls.empty()) {
    ValueList calls;
    for (const ChatToolCall& c : m.tool_calls) {
      const json args = json::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
      if (args.is_discarded() || !is_valid_utf8(c.name))
        return invalid_argument(at + "tool call '" + c.name + "': 'arguments' is not valid JSON (give the arguments object as JSON text)");
      Value fn = Value::new_dict();
      fn.dict().set("name", Value(c.name));
      BRIGADE_ASSIGN_OR_RETURN(Value parsed, from_json(args, at + "tool call '" + c.name + "' arguments"));
      fn.dict().set("arguments", std::move(parsed));
      Value call = Value::new_dict();
      call.dict().set("id", Value(c.id));
      call.dict().set("type", Value("function"));
      call.dict().set("function", fn);
      calls.push_back(call);
    }
    v.dict().set("tool_calls", Value(std::move(calls)));
  }
  if (m.role == "tool" || !m.tool_call_id.empty()) v.dict().set("tool_call_id", Value(m.tool_call_id));
  if (m.reasoning) {
    // vLLM sets reasoning_content and reasoning (chat_utils' _parse_chat_message_content);
    // gpt-oss's template (and LFM2.5's) read the same text as `thinking`.
    if (!is_valid_utf8(*m.reasoning)) return invalid_argument(at + "reasoning is not valid UTF-8");
    for (const char* key : {"reasoning_content", "reasoning", "thinking"}) v.dict().set(key, Value(*m.reasoning));
  }
  return v;
}

}  // namespace

ChatToolSyntax detect_tool_syntax(std::string_view source) {
  auto has = [&](std::string_view marker) { return source.find(marker) != std::string_view::npos; };
  if (has("[TOOL_CALLS]")) return ChatToolSyntax::mistral;
  if (has("<|START_ACTION|>")) return ChatToolSyntax::cohere_command3;  // Command R7B / A: JSON arrays of actions
  if (has("<|tool_call>call:")) return ChatToolSyntax::gemma4;  // Gemma 4: call:NAME{key:<|"|>..<|"|>}
  // gpt-oss's harmony: calls are commentary messages to=functions.NAME (gpt-oss's own template
  // writes "to=" and "functions." + name apart).
  if (has("<|channel|>") && has("to=") && has("functions.")) return ChatToolSyntax::openai;
  if (has("<｜tool▁calls▁begin｜>")) return has("```json") ? ChatToolSyntax::deepseek_v3 : ChatToolSyntax::deepseek_v31;
  if (has("<|tool_calls_section_begin|>") || has("<|im_system|>tool_declare")) return ChatToolSyntax::kimi_k2;
  // GLM writes <tool_call>name<arg_key>..., Qwen3-Coder and Qwen3.5 <tool_call><function=name>
  // <parameter=k>...: not Hermes JSON.
  if (has("<arg_key>")) return ChatToolSyntax::glm45;
  if (has("<seed:tool_call>")) return ChatToolSyntax::seed_oss;  // Seed-OSS: qwen3_coder's calls in its own tags
  if (has("<minimax:tool_call>")) return ChatToolSyntax::minimax_m2;
  if (has("<function=") && has("<parameter=")) return ChatToolSyntax::qwen3_coder;
  // Granite 3.x: <|tool_call|> then a JSON list; Phi-4-mini's llama.cpp template writes
  // <|tool_call|>{..}<|/tool_call|>, without Granite's role markers.
  if (has("<|tool_call|>") && has("<|start_of_role|>")) return ChatToolSyntax::granite;
  if (has("<|tool_call|>") && has("<|/tool_call|>")) return ChatToolSyntax::phi4_mini_json;
  if (has("<TOOLCALL>")) return ChatToolSyntax::nemotron_nano_v2;     // Nemotron-Nano-v2: <TOOLCALL>[..]</TOOLCALL>
  if (has("<|tools_prefix|>")) return ChatToolSyntax::apertus;        // Apertus: <|tools_prefix|>[{NAME: {..}}]
  // LFM2 writes its tool list in <|tool_list_start|> (LFM2.5 in a bare "List of tools: [", as
  // llama.cpp tells them apart), its calls in <|tool_call_start|>.
  if (has("<|tool_call_start|>") || has("<|tool_list_start|>") || has("List of tools: [")) return ChatToolSyntax::lfm2;
  if (has("<tool_call>")) return ChatToolSyntax::hermes;
  // MiniMax-M1: <tool_calls> with one {"name", "arguments"} a line (it also names an ipython role).
  if (has("<tool_calls>") && has("<beginning_of_sentence>")) return ChatToolSyntax::minimax;
  if (has("functools[")) return ChatToolSyntax::phi4_mini_json;  // FireFunction v2: " functools[{..}, ..]"
  if (has("<|python_tag|>") || has("ipython")) return ChatToolSyntax::llama3_json;
  return ChatToolSyntax::none;
}

Expected<JinjaChatTemplate> JinjaChatTemplate::create(const std::string& source, std::string bos_token,
                                                      std::string eos_token) {
  BRIGADE_ASSIGN_OR_RETURN(jinja::JinjaTemplate parsed, jinja::JinjaTemplate::parse(source));
  JinjaChatTemplate t;
  t.template_ = std::move(parsed);
  t.bos_token_ = std::move(bos_token);
  t.eos_token_ = std::move(eos_token);
  t.tool_syntax_ = detect_tool_syntax(source);
  return t;
}

Expected<std::string> JinjaChatTemplate::apply(std::span<const ChatMessage> messages, std::span<const std::string> tools,
                                               bool add_generation_prompt, const std::string& template_kwargs,
                                               const jinja::RenderOptions& options) const {
  ValueList msgs;
  for (size_t i = 0; i < messages.size(); ++i) {
    BRIGADE_ASSIGN_OR_RETURN(Value m, message_value(messages[i], i));
    msgs.push_back(std::move(m));
  }
  Value tool_list = Value::none();
  if (!tools.empty()) {
    ValueList l;
    for (const std::string& t : tools) {
      const json j = json::parse(t, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) return invalid_argument("a tool definition is not a JSON object");
      BRIGADE_ASSIGN_OR_RETURN(Value tool, from_json(j, "a tool definition"));
      l.push_back(std::move(tool));
    }
    tool_list = Value(std::move(l));
  }
  Value ctx = Value::new_dict();
  ctx.dict().set("messages", Value(std::move(msgs)));
  ctx.dict().set("tools", tool_list);
  ctx.dict().set("documents", Value::none());
  ctx.dict().set("add_generation_prompt", Value(add_generation_prompt));
  ctx.dict().set("bos_token", Value(bos_token_));
  ctx.dict().set("eos_token", Value(eos_token_));
  if (!template_kwargs.empty()) {
    const json kwargs = json::parse(template_kwargs, nullptr, /*allow_exceptions=*/false);
    if (kwargs.is_discarded() || !kwargs.is_object()) return invalid_argument("chat_template_kwargs must be a JSON object");
    for (const auto& [key, value] : kwargs.items()) {
      // documents (none unless given) is transformers' apply_chat_template argument, which vLLM
      // fills from the request's `documents` and lets chat_template_kwargs override.
      if (key != "documents" && ctx.dict().find(key))
        return invalid_argument("chat_template_kwargs may not set '" + key + "': the request sets it");
      BRIGADE_ASSIGN_OR_RETURN(Value v, from_json(value, "chat_template_kwargs." + key));
      ctx.dict().set(key, std::move(v));
    }
  }
  return template_.render(ctx, options);
}

}  // namespace brigade
