#include "server/responses_request.h"

#include <algorithm>
#include <optional>
#include <string>

namespace brigade::server {

namespace {

// ordered: the template prints tools, and the schema orders the output, as the client sent them.
using json = nlohmann::ordered_json;

// Sampling and chat fields a Responses body may carry as they are (the Responses API's own
// temperature/top_p/parallel_tool_calls/user, and the extra sampling fields vLLM takes in both).
constexpr const char* kPassThrough[] = {"model", "temperature", "top_p", "top_k", "min_p", "seed",
                                        "repetition_penalty", "presence_penalty", "frequency_penalty",
                                        "stop", "logit_bias", "min_tokens", "ignore_eos", "skip_special_tokens", "parallel_tool_calls",
                                        "user", "chat_template_kwargs", "include_reasoning", "thinking_token_budget", "stream"};

// Fields that need state brigade does not keep, or features it does not have.
struct Refused {
  const char* field;
  const char* why;
};
constexpr Refused kRefused[] = {
    {"previous_response_id", "brigade keeps no responses: send the conversation in `input` (the earlier "
                             "responses' output items included)"},
    {"conversation", "brigade keeps no conversations: send the conversation in `input`"},
    {"prompt", "stored prompt templates are not supported: send the prompt in `input`"},
    {"background", "background responses are not supported (they need stored responses)"},
};

Status bad(const std::string& field, const std::string& what) { return invalid_argument("'" + field + "': " + what); }

// A message's content: a string, or parts of type input_text / output_text (and refusal, kept as
// text); other part types (files, audio; images outside message_content) are unsupported.
Expected<std::string> content_text(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return bad(where, "must be a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return bad(at, "must be an object with a 'type'");
    const std::string type = part["type"];
    if (type == "input_text" || type == "output_text" || type == "text") {
      if (!part.contains("text") || !part["text"].is_string()) return bad(at + ".text", "must be a string");
      text += part["text"].get<std::string>();
    } else if (type == "refusal") {
      if (!part.contains("refusal") || !part["refusal"].is_string()) return bad(at + ".refusal", "must be a string");
      text += part["refusal"].get<std::string>();
    } else {
      return unsupported("'" + at + "': content of type '" + type +
                         "' is not supported (input_text, output_text and, in messages, input_image only)");
    }
  }
  return text;
}

// A message's content as chat takes it: its text (content_text) when it holds no image, else chat
// parts, each input_image ({"type": "input_image", "image_url": URL}) an image_url part (the chat
// path loads it: data: URLs only) and the text parts as text parts.
Expected<json> message_content(const json& content, const std::string& where) {
  const auto is_image = [](const json& p) { return p.is_object() && p.value("type", json()) == "input_image"; };
  if (!content.is_array() || std::none_of(content.begin(), content.end(), is_image)) {
    BRIGADE_ASSIGN_OR_RETURN(std::string text, content_text(content, where));
    return json(std::move(text));
  }
  json parts = json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!is_image(part)) {
      BRIGADE_ASSIGN_OR_RETURN(std::string text, content_text(json::array({part}), where));
      parts.push_back({{"type", "text"}, {"text", std::move(text)}});
      continue;
    }
    if (part.contains("file_id") && !part["file_id"].is_null())
      return unsupported("'" + at + ".file_id': brigade keeps no files: send the image as image_url (a data: URL)");
    auto url = part.find("image_url");
    if (url == part.end() || !url->is_string()) return bad(at + ".image_url", "must be a string (a data: URL)");
    parts.push_back({{"type", "image_url"}, {"image_url", {{"url", url->get<std::string>()}}}});
  }
  return parts;
}

Expected<std::string> string_field(const json& item, const char* key, const std::string& where) {
  auto it = item.find(key);
  if (it == item.end() || !it->is_string()) return bad(where + "." + key, "must be a string");
  return it->get<std::string>();
}

// A reasoning item's text: its content's reasoning_text parts (what brigade's own output items
// hold), else its summary's summary_text parts, joined; encrypted_content cannot be read.
Expected<std::string> reasoning_item_text(const json& item, const std::string& where) {
  if (auto e = item.find("encrypted_content"); e != item.end() && !e->is_null())
    return unsupported("'" + where + ".encrypted_content': brigade encrypts no reasoning; send it as content");
  for (const char* key : {"content", "summary"}) {
    auto parts = item.find(key);
    if (parts == item.end() || parts->is_null()) continue;
    if (!parts->is_array()) return bad(where + "." + key, "must be an array of text parts");
    std::string text;
    for (size_t i = 0; i < parts->size(); ++i) {
      const json& part = (*parts)[i];
      const std::string at = where + "." + key + "[" + std::to_string(i) + "]";
      auto t = part.is_object() ? part.find("text") : part.end();
      if (t == part.end() || !t->is_string()) return bad(at + ".text", "must be a string");
      if (!text.empty()) text += '\n';
      text += t->get_ref<const std::string&>();
    }
    if (!parts->empty()) return text;
  }
  return std::string();
}

// input (a string, or items) → chat messages, after the instructions' system message. A reasoning
// item becomes the `reasoning` of the assistant turn it precedes (its message or calls; alone, an
// assistant turn of its own), which the chat template may render.
Status add_input(const json& input, json& messages) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return Status::ok();
  }
  if (!input.is_array() || input.empty()) return bad("input", "must be a string or a non-empty array of items");
  std::optional<std::string> reasoning;  // a reasoning item's text, for the assistant turn after it
  const auto flush = [&](json* turn) {
    if (!reasoning) return;
    if (turn == nullptr) {
      messages.push_back({{"role", "assistant"}, {"content", ""}, {"reasoning", *reasoning}});
    } else {
      std::string joined = turn->contains("reasoning") ? (*turn)["reasoning"].get<std::string>() : "";
      if (!joined.empty()) joined += '\n';
      (*turn)["reasoning"] = joined.append(*reasoning);
    }
    reasoning.reset();
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) return bad(where, "must be an object");
    std::string type = "message";  // OpenAI's EasyInputMessage has no type
    if (auto t = item.find("type"); t != item.end()) {
      if (!t->is_string()) return bad(where + ".type", "must be a string");
      type = t->get<std::string>();
    }
    if (type == "message") {
      BRIGADE_ASSIGN_OR_RETURN(std::string role, string_field(item, "role", where));
      if (role != "user" && role != "system" && role != "developer" && role != "assistant")
        return bad(where + ".role", "must be user, system, developer or assistant (got '" + role + "')");
      if (!item.contains("content")) return bad(where + ".content", "is missing");
      BRIGADE_ASSIGN_OR_RETURN(json content, message_content(item["content"], where + ".content"));
      if (role != "assistant") flush(nullptr);
      messages.push_back({{"role", role == "developer" ? "system" : role}, {"content", std::move(content)}});
      if (role == "assistant") flush(&messages.back());
    } else if (type == "function_call") {
      BRIGADE_ASSIGN_OR_RETURN(std::string call_id, string_field(item, "call_id", where));
      BRIGADE_ASSIGN_OR_RETURN(std::string name, string_field(item, "name", where));
      BRIGADE_ASSIGN_OR_RETURN(std::string arguments, string_field(item, "arguments", where));
      json call = {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}};
      // Calls after an assistant turn (its text, or other calls) belong to that turn.
      if (messages.empty() || messages.back()["role"] != "assistant") {
        messages.push_back({{"role", "assistant"}, {"content", nullptr}});
      }
      json& turn = messages.back();
      flush(&turn);
      if (!turn.contains("tool_calls")) turn["tool_calls"] = json::array();
      turn["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      BRIGADE_ASSIGN_OR_RETURN(std::string call_id, string_field(item, "call_id", where));
      if (!item.contains("output")) return bad(where + ".output", "is missing");
      BRIGADE_ASSIGN_OR_RETURN(std::string output, content_text(item["output"], where + ".output"));
      flush(nullptr);
      messages.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", output}});
    } else if (type == "reasoning") {
      BRIGADE_ASSIGN_OR_RETURN(std::string text, reasoning_item_text(item, where));
      if (!text.empty()) {  // an empty one adds nothing
        if (reasoning) reasoning->append("\n").append(text);
        else reasoning = std::move(text);
      }
    } else if (type == "item_reference") {
      return unsupported("'" + where + "': an item_reference needs stored responses, which brigade does not keep; "
                                       "send the item itself");
    } else {
      return unsupported("'" + where + "': items of type '" + type +
                         "' are not supported (message, function_call, function_call_output and reasoning are)");
    }
  }
  flush(nullptr);
  return Status::ok();
}

// Flat function tools ({type, name, description, parameters, strict}) → chat tools.
Expected<json> chat_tools(const json& tools) {
  if (!tools.is_array()) return bad("tools", "must be an array");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("type") || !t["type"].is_string()) return bad(where, "must be an object with a 'type'");
    if (t["type"] != "function")
      return unsupported("'" + where + "': tools of type '" + t["type"].get<std::string>() +
                         "' are not supported (brigade runs no built-in tools: give function tools)");
    json fn = json::object();
    for (const char* key : {"name", "description", "parameters", "strict"}) {
      if (auto it = t.find(key); it != t.end() && !it->is_null()) fn[key] = *it;
    }
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

Expected<json> chat_tool_choice(const json& choice) {
  if (choice.is_string()) return choice;
  if (choice.is_object() && choice.contains("type") && choice["type"] == "function") {
    if (!choice.contains("name") || !choice["name"].is_string()) return bad("tool_choice.name", "must be a string");
    return json{{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  }
  if (choice.is_object() && choice.contains("type") && choice["type"].is_string())
    return unsupported("'tool_choice': type '" + choice["type"].get<std::string>() +
                       "' is not supported (auto, none, required, or {\"type\": \"function\", \"name\": ...})");
  return bad("tool_choice", "must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
}

// text.format → response_format: {type: text | json_object | json_schema (name, schema, strict)}.
Expected<json> chat_response_format(const json& text) {
  if (!text.is_object()) return bad("text", "must be an object");
  auto f = text.find("format");
  if (f == text.end() || f->is_null()) return json();
  if (!f->is_object() || !f->contains("type") || !(*f)["type"].is_string())
    return bad("text.format", "must be an object with a 'type'");
  const std::string type = (*f)["type"];
  if (type == "text") return json();
  if (type == "json_object") return json{{"type", type}};
  if (type != "json_schema") return bad("text.format.type", "must be text, json_object or json_schema (got '" + type + "')");
  json schema = json::object();
  for (const char* key : {"name", "schema", "strict", "description"}) {
    if (auto it = f->find(key); it != f->end()) schema[key] = *it;
  }
  return json{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

}  // namespace

Expected<json> responses_to_chat(const json& body) {
  if (!body.is_object()) return invalid_argument("the request body must be a JSON object");
  for (const Refused& r : kRefused) {
    auto it = body.find(r.field);
    if (it != body.end() && !it->is_null() && *it != false) return unsupported("'" + std::string(r.field) + "': " + r.why);
  }
  if (auto it = body.find("truncation"); it != body.end() && !it->is_null() && *it != "disabled")
    return unsupported("'truncation': only \"disabled\" (a prompt longer than the context is refused with a 400)");
  if (auto it = body.find("top_logprobs"); it != body.end() && !it->is_null() && *it != 0)
    return unsupported("'top_logprobs': logprobs are not returned by /v1/responses; use /v1/chat/completions");
  json chat = json::object();
  for (const char* key : kPassThrough) {
    if (auto it = body.find(key); it != body.end()) chat[key] = *it;
  }
  json messages = json::array();
  if (auto it = body.find("instructions"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return bad("instructions", "must be a string");
    messages.push_back({{"role", "system"}, {"content", *it}});
  }
  auto input = body.find("input");
  if (input == body.end()) return invalid_argument("'input' is missing: give the prompt as a string or a list of items");
  BRIGADE_RETURN_IF_ERROR(add_input(*input, messages));
  chat["messages"] = std::move(messages);
  if (auto it = body.find("max_output_tokens"); it != body.end() && !it->is_null()) chat["max_tokens"] = *it;
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    BRIGADE_ASSIGN_OR_RETURN(chat["tools"], chat_tools(*it));
  }
  if (auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    BRIGADE_ASSIGN_OR_RETURN(chat["tool_choice"], chat_tool_choice(*it));
  }
  if (auto it = body.find("text"); it != body.end() && !it->is_null()) {
    BRIGADE_ASSIGN_OR_RETURN(json format, chat_response_format(*it));
    if (!format.is_null()) chat["response_format"] = std::move(format);
  }
  if (auto it = body.find("metadata"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return bad("metadata", "must be an object of strings");
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) return bad("metadata." + k, "must be a string");
    }
  }
  if (auto it = body.find("reasoning"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return bad("reasoning", "must be an object");
    // The effort is chat's reasoning_effort (a template variable: gpt-oss's `Reasoning:` line).
    if (auto effort = it->find("effort"); effort != it->end() && !effort->is_null()) chat["reasoning_effort"] = *effort;
  }
  return chat;
}

json responses_echo(const json& body) {
  auto field = [&](const char* key, json fallback) {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? fallback : *it;
  };
  json text = field("text", json::object());
  if (!text.is_object()) text = json::object();  // refused by responses_to_chat
  if (!text.contains("format") || text["format"].is_null()) text["format"] = {{"type", "text"}};
  return {{"instructions", field("instructions", nullptr)},
          {"max_output_tokens", field("max_output_tokens", nullptr)},
          {"metadata", field("metadata", json::object())},
          {"parallel_tool_calls", field("parallel_tool_calls", true)},
          {"reasoning", field("reasoning", json{{"effort", nullptr}, {"summary", nullptr}})},
          {"temperature", field("temperature", 1.0)},
          {"text", std::move(text)},
          {"tool_choice", field("tool_choice", "auto")},
          {"tools", field("tools", json::array())},
          {"top_p", field("top_p", 1.0)},
          {"user", field("user", nullptr)}};
}

}  // namespace brigade::server
