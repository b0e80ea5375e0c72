#include "models/chat_template.h"

#include "models/chat_template_harmony.h"
#include "models/chat_template_tools.h"
#include "models/utf8.h"

namespace brigade {
namespace {

constexpr const char* kFamilies = "llama-2, llama-3, chatml (qwen), deepseek, harmony (gpt-oss)";

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string render_llama2(std::span<const ChatMessage> m, bool gen) {
  std::string out, system;
  size_t i = 0;
  if (!m.empty() && m[0].role == "system") system = m[i++].content;
  for (bool first = true; i < m.size(); ++i) {
    if (m[i].role == "user") {
      // As the Jinja template: the system block joins the first user turn, then the whole trims.
      std::string user;
      if (first && !system.empty()) user.append("<<SYS>>\n").append(system).append("\n<</SYS>>\n\n");
      user.append(m[i].content);
      out.append("<s>[INST] ").append(trim(user)).append(" [/INST]");
      first = false;
    } else {
      out.append(" ").append(trim(m[i].content)).append(" </s>");
    }
  }
  (void)gen;  // the assistant's turn opens right after [/INST]
  return out;
}

std::string render_llama3(std::span<const ChatMessage> m, bool gen) {
  std::string out = "<|begin_of_text|>";
  for (const auto& msg : m)
    out.append("<|start_header_id|>").append(msg.role).append("<|end_header_id|>\n\n").append(trim(msg.content)).append("<|eot_id|>");
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string render_chatml(std::span<const ChatMessage> m, bool gen) {
  std::string out;
  for (const auto& msg : m) out.append("<|im_start|>").append(msg.role).append("\n").append(msg.content).append("<|im_end|>\n");
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_deepseek(std::span<const ChatMessage> m, bool gen) {
  std::string out = "<｜begin▁of▁sentence｜>";
  for (const auto& msg : m) {
    if (msg.role == "system") out.append(msg.content).append("\n\n");
    else if (msg.role == "user") out.append("User: ").append(msg.content).append("\n\n");
    else out.append("Assistant: ").append(msg.content).append("<｜end▁of▁sentence｜>");
  }
  if (gen) out += "Assistant:";
  return out;
}

}  // namespace

Expected<ChatFamily> parse_chat_family(const std::string& name) {
  if (name == "llama-2" || name == "llama2") return ChatFamily::llama2;
  if (name == "llama-3" || name == "llama3") return ChatFamily::llama3;
  if (name == "chatml" || name == "qwen") return ChatFamily::chatml;
  if (name == "deepseek") return ChatFamily::deepseek;
  if (name == "harmony" || name == "gpt-oss") return ChatFamily::harmony;
  return unsupported("chat template '" + name + "' is not supported; supported: " + kFamilies);
}

const char* chat_family_name(ChatFamily family) {
  switch (family) {
    case ChatFamily::llama2: return "llama-2";
    case ChatFamily::llama3: return "llama-3";
    case ChatFamily::chatml: return "chatml";
    case ChatFamily::deepseek: return "deepseek";
    case ChatFamily::harmony: return "harmony";
  }
  return "?";
}

bool chat_family_has_tools(ChatFamily family) {
  return family == ChatFamily::chatml || family == ChatFamily::llama3 || family == ChatFamily::harmony;
}

namespace {
constexpr ChatToolSyntax kToolSyntaxes[] = {ChatToolSyntax::hermes,       ChatToolSyntax::llama3_json,
                                            ChatToolSyntax::mistral,      ChatToolSyntax::deepseek_v3,
                                            ChatToolSyntax::deepseek_v31, ChatToolSyntax::glm45,
                                            ChatToolSyntax::kimi_k2,      ChatToolSyntax::pythonic,
                                            ChatToolSyntax::openai,       ChatToolSyntax::qwen3_coder,
                                            ChatToolSyntax::seed_oss,     ChatToolSyntax::minimax_m2,
                                            ChatToolSyntax::cohere_command3, ChatToolSyntax::granite,
                                            ChatToolSyntax::lfm2,         ChatToolSyntax::jamba,
                                            ChatToolSyntax::hunyuan_a13b, ChatToolSyntax::olmo3,
                                            ChatToolSyntax::phi4_mini_json, ChatToolSyntax::nemotron_nano_v2,
                                            ChatToolSyntax::apertus,      ChatToolSyntax::ernie45,
                                            ChatToolSyntax::minimax,      ChatToolSyntax::gemma4};
}  // namespace

const char* tool_syntax_name(ChatToolSyntax syntax) {
  switch (syntax) {
    case ChatToolSyntax::none: return "none";
    case ChatToolSyntax::hermes: return "hermes";
    case ChatToolSyntax::llama3_json: return "llama3_json";
    case ChatToolSyntax::mistral: return "mistral";
    case ChatToolSyntax::deepseek_v3: return "deepseek_v3";
    case ChatToolSyntax::deepseek_v31: return "deepseek_v31";
    case ChatToolSyntax::glm45: return "glm45";
    case ChatToolSyntax::kimi_k2: return "kimi_k2";
    case ChatToolSyntax::pythonic: return "pythonic";
    case ChatToolSyntax::openai: return "openai";
    case ChatToolSyntax::qwen3_coder: return "qwen3_coder";
    case ChatToolSyntax::seed_oss: return "seed_oss";
    case ChatToolSyntax::minimax_m2: return "minimax_m2";
    case ChatToolSyntax::cohere_command3: return "cohere_command3";
    case ChatToolSyntax::granite: return "granite";
    case ChatToolSyntax::lfm2: return "lfm2";
    case ChatToolSyntax::jamba: return "jamba";
    case ChatToolSyntax::hunyuan_a13b: return "hunyuan_a13b";
    case ChatToolSyntax::olmo3: return "olmo3";
    case ChatToolSyntax::phi4_mini_json: return "phi4_mini_json";
    case ChatToolSyntax::nemotron_nano_v2: return "nemotron_nano_v2";
    case ChatToolSyntax::apertus: return "apertus";
    case ChatToolSyntax::ernie45: return "ernie45";
    case ChatToolSyntax::minimax: return "minimax";
    case ChatToolSyntax::gemma4: return "gemma4";
  }
  return "none";
}

Expected<ChatToolSyntax> parse_tool_syntax(const std::string& name) {
  if (name == "glm47") return ChatToolSyntax::glm45;
  if (name == "llama4_pythonic") return ChatToolSyntax::pythonic;
  if (name == "qwen3_xml") return ChatToolSyntax::qwen3_coder;
  if (name == "cohere_command4") return ChatToolSyntax::cohere_command3;
  if (name == "granite4") return ChatToolSyntax::hermes;
  if (name == "nemotron_json") return ChatToolSyntax::nemotron_nano_v2;  // vLLM's other name of the <TOOLCALL> parser
  std::string names;
  for (ChatToolSyntax s : kToolSyntaxes) {
    if (name == tool_syntax_name(s)) return s;
    names += std::string(names.empty() ? "" : ", ") + tool_syntax_name(s);
  }
  return unsupported("no tool-call parser '" + name + "' (brigade has: " + names + ", glm47, llama4_pythonic, qwen3_xml, cohere_command4, granite4)");
}

Expected<std::string> apply_chat_template(ChatFamily family, std::span<const ChatMessage> messages,
                                          std::span<const std::string> tools, bool add_generation_prompt,
                                          const ChatRenderOptions& options) {
  bool uses_tools = !tools.empty();
  const bool harmony = family == ChatFamily::harmony;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    const std::string at = "chat message " + std::to_string(i) + ": ";
    const bool developer = harmony && m.role == "developer";
    for (const ChatPart& p : m.parts)
      if (p.type != "text")
        return invalid_argument(at + "an image part: the built-in " + std::string(chat_family_name(family)) +
                                " rendering takes text only; images need the model's own (Jinja) chat template");
    if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool" && !developer)
      return invalid_argument(at + "role '" + m.role + "' is not one of system, user, assistant, tool" +
                              (harmony ? ", developer" : ""));
    if ((m.role == "system" || developer) && i != 0)
      return invalid_argument(at + "a " + m.role + " message must come first");
    if (!is_valid_utf8(m.content)) return invalid_argument(at + "content is not valid UTF-8");
    if (!m.tool_calls.empty() && m.role != "assistant") return invalid_argument(at + "only assistant messages carry tool calls");
    if (m.reasoning && m.role != "assistant") return invalid_argument(at + "only assistant messages carry reasoning");
    if (m.reasoning && !is_valid_utf8(*m.reasoning)) return invalid_argument(at + "reasoning is not valid UTF-8");
    for (const auto& call : m.tool_calls) {
      if (!is_valid_utf8(call.name) || !is_valid_utf8(call.arguments))
        return invalid_argument(at + "a tool call is not valid UTF-8");
    }
    uses_tools = uses_tools || m.role == "tool" || !m.tool_calls.empty();
  }
  if (harmony) return render_harmony(messages, tools, add_generation_prompt, options);
  if (!uses_tools) {
    switch (family) {
      case ChatFamily::llama2: return render_llama2(messages, add_generation_prompt);
      case ChatFamily::llama3: return render_llama3(messages, add_generation_prompt);
      case ChatFamily::chatml: return render_chatml(messages, add_generation_prompt);
      case ChatFamily::deepseek: return render_deepseek(messages, add_generation_prompt);
      case ChatFamily::harmony: break;
    }
    return invalid_argument("unknown chat family");
  }
  if (family == ChatFamily::chatml) return render_chatml_tools(messages, tools, add_generation_prompt);
  if (family == ChatFamily::llama3) return render_llama3_tools(messages, tools, add_generation_prompt);
  return unsupported(std::string("the ") + chat_family_name(family) +
                     " chat template has no tool-calling format (tools, tool calls and tool results work with "
                     "chatml (Qwen) and llama-3 models)");
}

Expected<std::string> apply_chat_template(ChatFamily family, std::span<const ChatMessage> messages,
                                          bool add_generation_prompt) {
  return apply_chat_template(family, messages, {}, add_generation_prompt);
}

}  // namespace brigade
