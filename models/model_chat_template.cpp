#include "models/model_chat_template.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "models/chat_template_jinja.h"
#include "models/jinja_ops.h"
#include "models/gguf.h"
#include "models/mapped_file.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

// tokenizer_config.json writes a special token as a string or as {"content": ...}.
std::string token_text(const nlohmann::json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return fallback;
}

Expected<std::shared_ptr<const JinjaChatTemplate>> jinja_of(const std::string& text, const std::string& origin,
                                                            const ChatSpecialTokens& tokens) {
  auto t = JinjaChatTemplate::create(text, tokens.bos, tokens.eos);
  if (!t) return Status(t.status().code(), origin + ": " + t.status().message());
  return std::make_shared<const JinjaChatTemplate>(std::move(*t));
}

Expected<nlohmann::json> read_tokenizer_config(const fs::path& dir) {
  const std::string path = (dir / "tokenizer_config.json").string();
  auto text = read_text_file(path);
  if (!text) return nlohmann::json::object();
  auto config = nlohmann::json::parse(*text, nullptr, false);
  if (config.is_discarded() || !config.is_object()) return corrupt(path + ": not a JSON object");
  return config;
}

// A directory's template: tokenizer_config.json's chat_template (string or list form), else
// chat_template.jinja.
Expected<ChatTemplate> load_from_directory(const fs::path& dir, const nlohmann::json& config,
                                           const ChatSpecialTokens& tokens) {
  const std::string path = (dir / "tokenizer_config.json").string();
  auto it = config.find("chat_template");
  if (it != config.end() && it->is_string()) return make_chat_template(it->get<std::string>(), "tokenizer_config.json", tokens);
  if (it != config.end() && it->is_array()) {
    std::string main, tool_use;
    for (const auto& entry : *it) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") || !entry["template"].is_string())
        return corrupt(path + ": chat_template entries must be {\"name\": ..., \"template\": ...}");
      if (entry["name"] == "default") main = entry["template"].get<std::string>();
      if (entry["name"] == "tool_use") tool_use = entry["template"].get<std::string>();
    }
    if (main.empty()) return corrupt(path + ": the chat_template list has no \"default\" entry");
    BRIGADE_ASSIGN_OR_RETURN(ChatTemplate t, make_chat_template(main, "tokenizer_config.json", tokens));
    if (!tool_use.empty()) {
      BRIGADE_ASSIGN_OR_RETURN(t.jinja_tool_use, jinja_of(tool_use, "tokenizer_config.json (tool_use)", tokens));
    }
    return t;
  }
  if (auto text = read_text_file((dir / "chat_template.jinja").string()))
    return make_chat_template(*text, "chat_template.jinja", tokens);
  // A processor's template: transformers' legacy chat_template.json ({"chat_template": "..."}),
  // which its processors wrote before chat_template.jinja and still read.
  if (auto text = read_text_file((dir / "chat_template.json").string())) {
    const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("chat_template") || !j["chat_template"].is_string())
      return corrupt((dir / "chat_template.json").string() + ": not an object with a chat_template string");
    return make_chat_template(j["chat_template"].get<std::string>(), "chat_template.json", tokens);
  }
  return not_found(path + ": no chat_template (and no chat_template.jinja or chat_template.json); pass one with "
                   "--chat-template FILE");
}

// The template variables a built-in family takes: `reasoning_effort` (harmony reads it, the
// others ignore it, as a Jinja template that never names it does); any other is refused.
Expected<ChatRenderOptions> built_in_options(ChatFamily family, const std::string& template_kwargs) {
  ChatRenderOptions options;
  if (template_kwargs.empty()) return options;
  const nlohmann::json kwargs = nlohmann::json::parse(template_kwargs, nullptr, /*allow_exceptions=*/false);
  if (!kwargs.is_object()) return invalid_argument("chat_template_kwargs must be a JSON object");
  for (const auto& [key, value] : kwargs.items()) {
    if (key == "documents") continue;  // no built-in family renders documents (as a template that never names them)
    if (key != "reasoning_effort")
      return invalid_argument(std::string("chat_template_kwargs need a Jinja template; the built-in ") +
                              chat_family_name(family) + " family takes only reasoning_effort (got '" + key + "')");
    if (!value.is_string()) return invalid_argument("reasoning_effort must be a string: low, medium or high");
    if (family == ChatFamily::harmony) options.reasoning_effort = value.get<std::string>();
  }
  return options;
}

}  // namespace

std::string ChatTemplate::describe() const {
  if (family) return std::string("built-in ") + chat_family_name(*family) + " (" + origin + ")";
  return "Jinja (" + origin + ")";
}

ChatToolSyntax ChatTemplate::tool_syntax() const {
  if (family) {
    if (!chat_family_has_tools(*family)) return ChatToolSyntax::none;
    if (*family == ChatFamily::harmony) return ChatToolSyntax::openai;
    return *family == ChatFamily::llama3 ? ChatToolSyntax::llama3_json : ChatToolSyntax::hermes;
  }
  return (jinja_tool_use ? jinja_tool_use : jinja)->tool_syntax();
}

Expected<std::string> ChatTemplate::apply(std::span<const ChatMessage> messages, std::span<const std::string> tools,
                                          bool add_generation_prompt, const std::string& template_kwargs) const {
  if (family) {
    BRIGADE_ASSIGN_OR_RETURN(ChatRenderOptions options, built_in_options(*family, template_kwargs));
    return apply_chat_template(*family, messages, tools, add_generation_prompt, options);
  }
  const auto& t = !tools.empty() && jinja_tool_use ? jinja_tool_use : jinja;
  return t->apply(messages, tools, add_generation_prompt, template_kwargs);
}

Expected<std::string> cut_after_final_message(std::string rendered, const ChatMessage& final_message) {
  const std::string* text = &final_message.content;
  if (!final_message.parts.empty()) {
    auto last = std::find_if(final_message.parts.rbegin(), final_message.parts.rend(),
                             [](const ChatPart& p) { return p.type == "text"; });
    if (last == final_message.parts.rend())
      return invalid_argument("continue_final_message: the final message has no text to continue");
    text = &last->text;
  }
  const std::string stripped = jinja::py_strip(*text, nullptr, true, true);
  const std::string lstripped = jinja::py_strip(*text, nullptr, true, false);
  const size_t at = rendered.rfind(stripped);
  if (at == std::string::npos)
    return invalid_argument("continue_final_message: the final message does not appear in the prompt the chat template "
                            "rendered (the template changes its text)");
  // Whether the template kept the message's trailing whitespace (then the cut keeps it too).
  const bool kept = rendered.compare(at, lstripped.size(), *text) == 0;
  rendered.resize(at + (kept ? lstripped.size() : stripped.size()));
  return rendered;
}

Expected<ChatTemplate> make_chat_template(const std::string& text, const std::string& origin,
                                          const ChatSpecialTokens& tokens) {
  ChatTemplate t;
  t.origin = origin;
  BRIGADE_ASSIGN_OR_RETURN(t.jinja, jinja_of(text, origin, tokens));
  return t;
}

Expected<ChatTemplate> load_chat_template(const std::string& model_path, const std::string& configured,
                                          const ChatSpecialTokens& tokens) {
  const bool dir = fs::is_directory(model_path);
  nlohmann::json config = nlohmann::json::object();
  if (dir) {
    BRIGADE_ASSIGN_OR_RETURN(config, read_tokenizer_config(model_path));
  }
  // The special tokens tokenizer_config.json names hold for a configured template too.
  const ChatSpecialTokens named{token_text(config, "bos_token", tokens.bos), token_text(config, "eos_token", tokens.eos)};
  if (!configured.empty()) {
    if (auto family = parse_chat_family(configured)) {
      ChatTemplate t;
      t.family = *family;
      t.origin = "--chat-template";
      return t;
    }
    if (configured.find("{{") != std::string::npos || configured.find("{%") != std::string::npos)
      return make_chat_template(configured, "the configured template", named);
    auto text = read_text_file(configured);
    if (!text)
      return not_found("chat template '" + configured + "': no such file (give a Jinja file, or one of llama-2, llama-3, chatml, deepseek, harmony)");
    return make_chat_template(*text, configured, named);
  }
  if (dir) return load_from_directory(model_path, config, named);
  if (fs::path(model_path).extension() == ".gguf") {
    BRIGADE_ASSIGN_OR_RETURN(auto file, GgufFile::open(model_path));
    auto jinja = file->get_string("tokenizer.chat_template");
    if (!jinja) return not_found(model_path + ": no tokenizer.chat_template; pass one with --chat-template FILE");
    return make_chat_template(*jinja, "GGUF tokenizer.chat_template", tokens);
  }
  return not_found(model_path + ": no chat template; pass one with --chat-template FILE");
}

}  // namespace brigade
