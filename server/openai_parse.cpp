#include "server/openai_parse.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "server/openai_guided.h"

namespace brigade::server {

namespace {

// Images in one chat request (vLLM's --limit-mm-per-prompt is per server; this bounds the
// pixels a request may make the server hold: 9.6 MB per 896x896 image).
constexpr int kMaxImagesPerRequest = 16;

using nlohmann::json;

// Joins message pieces by appending (GCC 12 warns falsely, -Wrestrict, on "'" + std::string chains).
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (auto p : parts) s.append(p);
  return s;
}

std::string type_name(const json& v) { return v.type_name(); }

Status wrong_type(const std::string& field, const char* want, const json& v) {
  return invalid_argument(cat({"'", field, "' must be ", want, " (got ", type_name(v), ")"}));
}

}  // namespace

// Reads an optional integer field into out; null or absent keeps out. Floats are refused (OpenAI
// rejects `max_tokens: 1.5` too), and values are range-checked before narrowing.
Status read_int(const json& body, const char* field, int64_t lo, int64_t hi, int64_t& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return Status::ok();
  int64_t v = 0;
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) {
      return invalid_argument(cat({"'", field, "' must be in [", std::to_string(lo), ", ", std::to_string(hi),
                                   "] (got ", std::to_string(u), ")"}));
    }
    v = static_cast<int64_t>(u);
  } else if (it->is_number_integer()) {
    v = it->get<int64_t>();
  } else {
    return wrong_type(field, "an integer", *it);
  }
  if (v < lo || v > hi) {
    return invalid_argument(cat({"'", field, "' must be in [", std::to_string(lo), ", ", std::to_string(hi),
                                 "] (got ", std::to_string(v), ")"}));
  }
  out = v;
  return Status::ok();
}

Status read_int(const json& body, const char* field, int64_t lo, int64_t hi, int& out) {
  int64_t v = out;
  BRIGADE_RETURN_IF_ERROR(read_int(body, field, lo, hi, v));
  out = static_cast<int>(v);
  return Status::ok();
}

// Optional number in [lo, hi] (NaN never passes); `lo_open` makes the lower bound exclusive.
Status read_float(const json& body, const char* field, double lo, double hi, bool lo_open, float& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return Status::ok();
  if (!it->is_number()) return wrong_type(field, "a number", *it);
  const double v = it->get<double>();
  const bool lo_ok = lo_open ? v > lo : v >= lo;
  if (!(lo_ok && v <= hi)) {
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "(" + std::string chains.
    std::string msg = "'";
    msg += field;
    msg += "' must be in ";
    msg += lo_open ? '(' : '[';
    msg += std::to_string(lo);
    msg += ", ";
    msg += std::isinf(hi) ? std::string("inf)") : std::to_string(hi) + "]";
    msg += " (got ";
    msg += std::to_string(v);
    msg += ')';
    return invalid_argument(msg);
  }
  out = static_cast<float>(v);
  return Status::ok();
}

Status read_bool(const json& body, const char* field, bool& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return Status::ok();
  if (!it->is_boolean()) return wrong_type(field, "a boolean", *it);
  out = it->get<bool>();
  return Status::ok();
}

Status read_truncate_prompt_tokens(const json& body, int& out) {
  BRIGADE_RETURN_IF_ERROR(read_int(body, "truncate_prompt_tokens", -1, std::numeric_limits<int32_t>::max(), out));
  if (body.contains("truncate_prompt_tokens") && out == 0)
    return invalid_argument("'truncate_prompt_tokens' must be >= 1, or -1 for the model's context (got 0)");
  return Status::ok();
}

Status read_priority(const json& body, int& out) {
  int priority = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(body, "priority", -(1 << 20), 1 << 20, priority));
  out = -priority;
  return Status::ok();
}

namespace {

Status read_token_ids(const json& arr, const std::string& field, std::vector<int32_t>& out) {
  out.clear();
  for (const auto& t : arr) {
    if (!t.is_number_integer()) return wrong_type(cat({field, "[]"}), "an integer token id", t);
    if (t.is_number_unsigned() ? t.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())
                               : (t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max())) {
      return invalid_argument(cat({"'", field, "' holds a token id outside [0, 2^31)"}));
    }
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return Status::ok();
}

// One prompt: a string, or an array of token ids; `at` names it in errors.
Status read_one_prompt(const json& p, const std::string& at, PromptInput& out) {
  if (p.is_string()) {
    out.text = p.get<std::string>();
    if (out.text.empty()) return invalid_argument("'" + at + "' is empty: give some text or token ids");
    return Status::ok();
  }
  if (p.is_array()) {
    if (p.empty()) return invalid_argument("'" + at + "' is an empty array: give some text or token ids");
    return read_token_ids(p, at, out.ids);
  }
  return wrong_type(at, "a string or an array of token ids", p);
}

}  // namespace

Status read_prompt_batch(const json& p, const std::string& field, int max_prompts, std::vector<PromptInput>& out) {
  out.clear();
  if (p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array())) {
    if (static_cast<int>(p.size()) > max_prompts) {
      return invalid_argument(cat({"'", field, "' holds ", std::to_string(p.size()), " prompts; at most ",
                                   std::to_string(max_prompts), " are allowed in one request"}));
    }
    out.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i].is_string() != p[0].is_string())
        return invalid_argument("'" + field + "' mixes strings and token id arrays: give one kind");
      BRIGADE_RETURN_IF_ERROR(read_one_prompt(p[i], field + "[" + std::to_string(i) + "]", out[i]));
    }
  } else {
    out.resize(1);
    BRIGADE_RETURN_IF_ERROR(read_one_prompt(p, field, out[0]));
  }
  return Status::ok();
}

namespace {

// prompt: a string, an array of token ids, or a batch of those (an array of strings, or of
// arrays of token ids): one prompt per element, each answered with n choices.
Status read_prompts(const json& body, const ParseLimits& limits, CompletionRequest& r) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return invalid_argument("'prompt' is required: a string or an array of token ids");
  BRIGADE_RETURN_IF_ERROR(read_prompt_batch(*it, "prompt", limits.max_prompts, r.prompts));
  r.gen.prompt = r.prompts[0].text;
  r.gen.prompt_ids = r.prompts[0].ids;
  return Status::ok();
}

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}],
// arguments being the JSON text of an object (OpenAI's form; the template renders it parsed).
Status read_tool_calls(const json& calls, const std::string& at, ChatMessage& msg) {
  if (!calls.is_array()) return wrong_type(at + ".tool_calls", "an array of {id, type, function}", calls);
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    const std::string here = cat({at, ".tool_calls[", std::to_string(i), "]"});
    if (!c.is_object()) return wrong_type(here, "an object {id, type, function}", c);
    auto type = c.find("type");
    if (type != c.end() && *type != "function") return invalid_argument("'" + here + ".type' must be \"function\"");
    auto id = c.find("id");
    if (id != c.end() && !id->is_string()) return wrong_type(here + ".id", "a string", *id);
    auto fn = c.find("function");
    if (fn == c.end() || !fn->is_object()) return invalid_argument("'" + here + ".function' is required: {name, arguments}");
    auto name = fn->find("name");
    auto args = fn->find("arguments");
    if (name == fn->end() || !name->is_string()) return invalid_argument("'" + here + ".function.name' must be a string");
    if (args == fn->end() || !args->is_string())
      return invalid_argument("'" + here + ".function.arguments' must be a string holding a JSON object");
    const json parsed = json::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_object())
      return invalid_argument("'" + here + ".function.arguments' is not a JSON object: " + args->get<std::string>());
    msg.tool_calls.push_back({id != c.end() ? id->get<std::string>() : "", name->get<std::string>(), args->get<std::string>()});
  }
  return Status::ok();
}

// An image part's URL: OpenAI's {"type": "image_url", "image_url": {"url": ...}} (also vLLM's
// plain-string image_url).
Expected<std::string> image_part_url(const json& part) {
  const json* url = nullptr;
  if (auto it = part.find("image_url"); it != part.end()) {
    url = &*it;
    if (url->is_object()) {
      auto inner = url->find("url");
      url = inner != url->end() ? &*inner : nullptr;
    }
  }
  if (url == nullptr || !url->is_string())
    return invalid_argument("'messages[].content' image parts must be {\"type\": \"image_url\", \"image_url\": {\"url\": string}}");
  return url->get<std::string>();
}

Status read_content(const json& m, ChatMessage& msg, std::vector<std::string>& image_urls) {
  auto content = m.find("content");
  if (content == m.end() || content->is_null()) {
    // An assistant turn with tool calls may have no content.
  } else if (content->is_string()) {
    msg.content = content->get<std::string>();
  } else if (content->is_array()) {
    for (const auto& part : *content) {
      auto type = part.is_object() ? part.find("type") : part.end();
      if (type != part.end() && *type == "image_url") {
        BRIGADE_ASSIGN_OR_RETURN(std::string url, image_part_url(part));
        image_urls.push_back(std::move(url));
        msg.parts.push_back({"image"});
        continue;
      }
      if (type != part.end() && (*type == "video_url" || *type == "video"))  // vLLM's video parts (GLM-4.1V, Qwen2-VL take them)
        return invalid_argument("'messages[].content' video parts are not supported; send frames as image_url parts");
      auto text = part.is_object() ? part.find("text") : part.end();
      if (!part.is_object() || type == part.end() || *type != "text" || text == part.end() || !text->is_string()) {
        return invalid_argument("'messages[].content' parts must be {\"type\": \"text\", \"text\": string} or "
                                "{\"type\": \"image_url\", \"image_url\": {\"url\": string}}");
      }
      if (std::any_of(msg.parts.begin(), msg.parts.end(), [](const ChatPart& p) { return p.type == "text"; }))
        msg.content += '\n';
      msg.content += text->get<std::string>();
      msg.parts.push_back({"text", text->get<std::string>()});
    }
    // Text only: the texts joined by newlines, the string vLLM renders for a template that takes
    // strings (templates that take a string keep working).
    const bool images = std::any_of(msg.parts.begin(), msg.parts.end(), [](const ChatPart& p) { return p.type == "image"; });
    if (!images) msg.parts.clear();
  } else {
    return wrong_type("messages[].content", "a string or an array of text and image_url parts", *content);
  }
  return Status::ok();
}

// An assistant message's reasoning sent back: `reasoning` (vLLM's name) or `reasoning_content`
// (its older one, DeepSeek's API's); a string or null. `reasoning` wins when both are given, as vLLM
// reads only it.
Status read_reasoning(const json& m, const std::string& at, ChatMessage& msg) {
  for (const char* key : {"reasoning_content", "reasoning"}) {
    auto it = m.find(key);
    if (it == m.end() || it->is_null()) continue;
    const std::string field = at + "." + key;
    if (!it->is_string()) return wrong_type(field, "a string (the turn's reasoning)", *it);
    if (msg.role != "assistant") return invalid_argument("'" + field + "' is only valid on assistant messages");
    msg.reasoning = it->get<std::string>();
  }
  return Status::ok();
}

Status read_messages(const json& body, std::vector<ChatMessage>& out, std::vector<std::string>& image_urls) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) return invalid_argument("'messages' is required: an array of {role, content}");
  if (!it->is_array()) return wrong_type("messages", "an array of {role, content}", *it);
  if (it->empty()) return invalid_argument("'messages' is empty: give at least one message");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string at = cat({"messages[", std::to_string(i), "]"});
    if (!m.is_object()) return wrong_type("messages[]", "an object {role, content}", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return invalid_argument("'messages[].role' must be a string");
    ChatMessage msg{role->get<std::string>(), ""};
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool" &&
        msg.role != "developer") {
      return invalid_argument(cat({"'messages[].role' '", msg.role, "' is not one of: system, user, assistant, tool, developer"}));
    }
    BRIGADE_RETURN_IF_ERROR(read_content(m, msg, image_urls));
    auto calls = m.find("tool_calls");
    if (calls != m.end() && !calls->is_null()) {
      if (msg.role != "assistant") return invalid_argument("'" + at + ".tool_calls' is only valid on assistant messages");
      BRIGADE_RETURN_IF_ERROR(read_tool_calls(*calls, at, msg));
    }
    BRIGADE_RETURN_IF_ERROR(read_reasoning(m, at, msg));
    if (msg.role == "tool") {
      auto id = m.find("tool_call_id");
      if (id == m.end() || !id->is_string())
        return invalid_argument("'" + at + ".tool_call_id' is required on a tool message: the id of the call it answers");
      msg.tool_call_id = id->get<std::string>();
    }
    out.push_back(std::move(msg));
  }
  return Status::ok();
}

Status read_stop(const json& body, const ParseLimits& limits, std::vector<std::string>& out) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return Status::ok();
  auto add = [&](const json& s) {
    if (!s.is_string()) return wrong_type("stop", "a string or an array of strings", s);
    if (s.get_ref<const std::string&>().empty()) return invalid_argument("'stop' strings must not be empty");
    out.push_back(s.get<std::string>());
    return Status::ok();
  };
  if (it->is_string()) return add(*it);
  if (!it->is_array()) return wrong_type("stop", "a string or an array of strings", *it);
  if (static_cast<int>(it->size()) > limits.max_stop) {
    return invalid_argument(cat({"'stop' holds ", std::to_string(it->size()), " strings; at most ",
                                 std::to_string(limits.max_stop), " are allowed"}));
  }
  for (const auto& s : *it) BRIGADE_RETURN_IF_ERROR(add(s));
  return Status::ok();
}

// vLLM's bad_words: an array of words (the engine bounds their count and size).
Status read_bad_words(const json& body, std::vector<std::string>& out) {
  auto it = body.find("bad_words");
  if (it == body.end() || it->is_null()) return Status::ok();
  if (!it->is_array()) return wrong_type("bad_words", "an array of strings", *it);
  for (const auto& w : *it) {
    if (!w.is_string()) return wrong_type("bad_words[]", "a string", w);
    out.push_back(w.get<std::string>());
  }
  return Status::ok();
}

Status read_sampling(const json& body, SamplingOptions& s) {
  const double inf = std::numeric_limits<double>::infinity();
  BRIGADE_RETURN_IF_ERROR(read_float(body, "temperature", 0.0, inf, false, s.temperature));
  BRIGADE_RETURN_IF_ERROR(read_float(body, "top_p", 0.0, 1.0, true, s.top_p));
  int top_k = s.top_k;
  BRIGADE_RETURN_IF_ERROR(read_int(body, "top_k", -1, std::numeric_limits<int32_t>::max(), top_k));
  s.top_k = top_k < 0 ? 0 : top_k;  // vLLM spells "off" as -1
  BRIGADE_RETURN_IF_ERROR(read_float(body, "min_p", 0.0, 1.0, false, s.min_p));
  if (s.min_p >= 1.0f) return invalid_argument("'min_p' must be in [0, 1) (got 1)");
  BRIGADE_RETURN_IF_ERROR(read_float(body, "presence_penalty", -2.0, 2.0, false, s.presence_penalty));
  BRIGADE_RETURN_IF_ERROR(read_float(body, "frequency_penalty", -2.0, 2.0, false, s.frequency_penalty));
  BRIGADE_RETURN_IF_ERROR(read_float(body, "repetition_penalty", 0.0, inf, true, s.repetition_penalty));
  auto seed = body.find("seed");
  if (seed != body.end() && !seed->is_null()) {
    if (!seed->is_number_integer()) return wrong_type("seed", "an integer", *seed);
    // Negative seeds (allowed by OpenAI) wrap to the same 64 bits every time.
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
  }
  return Status::ok();
}

Status read_logprobs(const json& body, Endpoint endpoint, const ParseLimits& limits, CompletionRequest& r) {
  if (endpoint == Endpoint::completions) {
    auto it = body.find("logprobs");
    if (it != body.end() && it->is_boolean()) return wrong_type("logprobs", "an integer (completions)", *it);
    int lp = -1;
    BRIGADE_RETURN_IF_ERROR(read_int(body, "logprobs", 0, limits.max_logprobs, lp));
    r.gen.logprobs = lp;
    return Status::ok();
  }
  BRIGADE_RETURN_IF_ERROR(read_bool(body, "logprobs", r.chat_logprobs));
  int top = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(body, "top_logprobs", 0, limits.max_logprobs, top));
  auto it = body.find("top_logprobs");
  if (it != body.end() && !it->is_null() && !r.chat_logprobs) {
    return invalid_argument("'top_logprobs' needs 'logprobs': true");
  }
  r.gen.logprobs = r.chat_logprobs ? top : -1;
  return Status::ok();
}

// `echo` and vLLM's `prompt_logprobs` (both endpoints), and `max_tokens` 0, which only the
// completions echo and prompt_logprobs make useful. Reads after read_logprobs.
Status read_prompt_scoring(const json& body, Endpoint endpoint, const ParseLimits& limits, CompletionRequest& r) {
  BRIGADE_RETURN_IF_ERROR(read_bool(body, "echo", r.echo));
  // Chat's echo (vLLM's) repeats the last message's text when it is the assistant's; only the
  // completions echo scores the prompt.
  const bool echo_prompt = r.echo && endpoint == Endpoint::completions;
  auto it = body.find("prompt_logprobs");
  if (it != body.end() && it->is_number_integer() && it->get<int64_t>() < 0)
    return invalid_argument("'prompt_logprobs' must be in [0, " + std::to_string(limits.max_logprobs) + "] (got " +
                            it->dump() + "; -1, the whole vocabulary, is not supported)");
  BRIGADE_RETURN_IF_ERROR(read_int(body, "prompt_logprobs", 0, limits.max_logprobs, r.prompt_logprobs));
  r.gen.prompt_logprobs = std::max(r.prompt_logprobs, echo_prompt ? r.gen.logprobs : -1);
  if (r.gen.max_tokens == 0 && !echo_prompt && r.prompt_logprobs < 0)
    return invalid_argument("'max_tokens' 0 generates nothing: it needs 'echo' or 'prompt_logprobs' (scoring the prompt)");
  // A prompt that is only scored runs once per choice; the engine needs prompt logprobs asked to
  // run a prompt without generating.
  if (r.gen.max_tokens == 0) r.gen.prompt_logprobs = std::max(r.gen.prompt_logprobs, 0);
  return Status::ok();
}

Status refuse_unsupported(const json& body) {
  auto best_of = body.find("best_of");
  if (best_of != body.end() && !best_of->is_null() && *best_of != 1) return unsupported("'best_of' other than 1 is not supported");
  return Status::ok();
}

// OpenAI's {"<token id>": bias, ...}; the engine checks the ids against the vocabulary.
Status read_logit_bias(const json& body, const ParseLimits& limits, SamplingOptions& s) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return Status::ok();
  if (!it->is_object()) return wrong_type("logit_bias", "an object of token id strings to numbers", *it);
  if (static_cast<int>(it->size()) > limits.max_logit_bias) {
    return invalid_argument(cat({"'logit_bias' holds ", std::to_string(it->size()), " entries; at most ",
                                 std::to_string(limits.max_logit_bias), " are allowed"}));
  }
  for (const auto& [key, value] : it->items()) {
    int32_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || key.empty())
      return invalid_argument("'logit_bias' keys must be token ids (got \"" + key + "\")");
    if (!value.is_number()) return wrong_type("logit_bias[\"" + key + "\"]", "a number", value);
    const double bias = value.get<double>();
    if (!(bias >= -100.0 && bias <= 100.0))
      return invalid_argument("'logit_bias' values must be in [-100, 100] (got " + value.dump() + ")");
    s.logit_bias.emplace_back(id, static_cast<float>(bias));
  }
  return Status::ok();
}

// A list of token ids (vLLM's stop_token_ids, allowed_token_ids): at most `max` of them; the
// engine checks them against the vocabulary.
Status read_token_id_list(const json& body, const char* field, int max, std::vector<int32_t>& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return Status::ok();
  if (!it->is_array()) return wrong_type(field, "an array of token ids", *it);
  if (static_cast<int>(it->size()) > max) {
    return invalid_argument(cat({"'", field, "' holds ", std::to_string(it->size()), " ids; at most ", std::to_string(max),
                                 " are allowed"}));
  }
  for (const auto& t : *it) {
    if (!t.is_number_integer()) return wrong_type(std::string(field) + "[]", "an integer", t);
    const int64_t v = t.get<int64_t>();
    if (v < 0 || v > std::numeric_limits<int32_t>::max())
      return invalid_argument(cat({"'", field, "' holds ", t.dump(), ", which is no token id"}));
    out.push_back(static_cast<int32_t>(v));
  }
  return Status::ok();
}

// vLLM's use_beam_search, length_penalty and early_stopping (true, false, or transformers'
// "never"). What a beam search cannot honour is refused by name; the sampling settings (temperature,
// top_p, top_k, min_p, seed) do not apply to it and are ignored, as in vLLM.
// The model's generation_config (ParseLimits::defaults) in the fields the body leaves out (or sends
// null), as vLLM's default_sampling_params; its max_new_tokens caps max_tokens whatever the body
// says (vLLM's get_max_tokens). A beam search takes none of the sampling ones (it ignores them, and
// a default repetition_penalty must not make it refuse).
void apply_generation_defaults(const json& body, const GenerationDefaults& d, CompletionRequest& r) {
  if (d.max_tokens) r.gen.max_tokens = std::min(r.gen.max_tokens, *d.max_tokens);
  if (r.use_beam_search) return;
  const auto absent = [&](const char* key) {
    auto it = body.find(key);
    return it == body.end() || it->is_null();
  };
  SamplingOptions& s = r.gen.sampling;
  if (d.temperature && absent("temperature")) s.temperature = *d.temperature;
  if (d.top_p && absent("top_p")) s.top_p = *d.top_p;
  if (d.top_k && absent("top_k")) s.top_k = *d.top_k;
  if (d.min_p && absent("min_p")) s.min_p = *d.min_p;
  if (d.repetition_penalty && absent("repetition_penalty")) s.repetition_penalty = *d.repetition_penalty;
}

Status read_beam_search(const json& body, CompletionRequest& r) {
  BRIGADE_RETURN_IF_ERROR(read_bool(body, "use_beam_search", r.use_beam_search));
  const double inf = std::numeric_limits<double>::infinity();
  BRIGADE_RETURN_IF_ERROR(read_float(body, "length_penalty", -inf, inf, true, r.length_penalty));
  if (!std::isfinite(r.length_penalty)) return invalid_argument("'length_penalty' must be a finite number");
  if (auto e = body.find("early_stopping"); e != body.end() && !e->is_null()) {
    if (e->is_boolean()) {
      r.early_stopping = e->get<bool>() ? EarlyStopping::on : EarlyStopping::heuristic;
    } else if (e->is_string() && e->get_ref<const std::string&>() == "never") {
      r.early_stopping = EarlyStopping::never;
    } else {
      return wrong_type("early_stopping", "true, false or \"never\"", *e);
    }
  }
  if (!r.use_beam_search) return Status::ok();
  const GenerateOptions& g = r.gen;
  const SamplingOptions& s = g.sampling;
  auto refuse = [](const char* what) {
    return invalid_argument(std::string(what) + " cannot be used with 'use_beam_search': a beam search ranks the "
                                                "model's own logprobs");
  };
  if (g.response_format != ResponseFormat::text) return refuse("structured output (response_format, guided_*, a forced tool call)");
  if (!g.stop.empty()) return refuse("'stop' strings (end beams with 'stop_token_ids')");
  if (!s.logit_bias.empty()) return refuse("'logit_bias'");
  if (!s.allowed_token_ids.empty()) return refuse("'allowed_token_ids'");
  if (!s.bad_words.empty()) return refuse("'bad_words'");
  if (g.min_tokens > 0) return refuse("'min_tokens'");
  if (g.thinking_token_budget >= 0) return refuse("'thinking_token_budget'");
  if (s.repetition_penalty != 1.0f || s.presence_penalty != 0.0f || s.frequency_penalty != 0.0f)
    return refuse("a repetition, presence or frequency penalty");
  if (r.prompt_logprobs >= 0 || g.prompt_logprobs >= 0) return refuse("'prompt_logprobs' (and echo with logprobs)");
  if (!r.image_urls.empty()) return unsupported("images (image_url parts) cannot be used with 'use_beam_search' yet");
  if (g.max_tokens < 1) return invalid_argument("'use_beam_search' needs max_tokens >= 1");
  return Status::ok();
}

}  // namespace

Status check_request_id(std::string_view id) {
  if (id.size() > 256) return invalid_argument("a request id holds at most 256 bytes (got " + std::to_string(id.size()) + ")");
  for (unsigned char c : id)
    if (c < 0x20 || c > 0x7e) return invalid_argument("a request id must be printable ASCII");
  return Status::ok();
}

Expected<CompletionRequest> parse_completion_request(const json& body, Endpoint endpoint, const ParseLimits& limits) {
  if (!body.is_object()) return wrong_type("the request body", "a JSON object", body);
  CompletionRequest r;
  r.endpoint = endpoint;
  auto model = body.find("model");
  if (model != body.end() && !model->is_null()) {
    if (!model->is_string()) return wrong_type("model", "a string", *model);
    r.model = model->get<std::string>();
  }
  if (endpoint == Endpoint::completions) {
    BRIGADE_RETURN_IF_ERROR(read_prompts(body, limits, r));
  } else {
    BRIGADE_RETURN_IF_ERROR(read_messages(body, r.messages, r.image_urls));
    if (static_cast<int>(r.image_urls.size()) > kMaxImagesPerRequest)
      return invalid_argument("the messages hold " + std::to_string(r.image_urls.size()) + " images; at most " +
                              std::to_string(kMaxImagesPerRequest) + " are allowed in one request");
  }
  r.gen.max_tokens = endpoint == Endpoint::chat ? limits.default_max_tokens_chat : limits.default_max_tokens_completions;
  const int64_t max_int = std::numeric_limits<int32_t>::max();
  BRIGADE_RETURN_IF_ERROR(read_int(body, "max_tokens", 0, max_int, r.gen.max_tokens));
  BRIGADE_RETURN_IF_ERROR(read_int(body, "max_completion_tokens", 0, max_int, r.gen.max_tokens));
  BRIGADE_RETURN_IF_ERROR(read_sampling(body, r.gen.sampling));
  BRIGADE_RETURN_IF_ERROR(read_int(body, "n", 1, limits.max_n, r.n));
  if (r.n_choices() > limits.max_choices) {
    return invalid_argument(cat({"'prompt' holds ", std::to_string(r.prompts.size()), " prompts and 'n' is ",
                                 std::to_string(r.n), ": at most ", std::to_string(limits.max_choices),
                                 " choices are allowed in one request"}));
  }
  BRIGADE_RETURN_IF_ERROR(read_bool(body, "stream", r.stream));
  auto opts = body.find("stream_options");
  if (opts != body.end() && !opts->is_null()) {
    if (!opts->is_object()) return wrong_type("stream_options", "an object", *opts);
    BRIGADE_RETURN_IF_ERROR(read_bool(*opts, "include_usage", r.include_usage));
    BRIGADE_RETURN_IF_ERROR(read_bool(*opts, "continuous_usage_stats", r.continuous_usage));
  }
  BRIGADE_RETURN_IF_ERROR(read_stop(body, limits, r.gen.stop));
  BRIGADE_RETURN_IF_ERROR(read_token_id_list(body, "stop_token_ids", limits.max_stop, r.gen.stop_ids));
  BRIGADE_RETURN_IF_ERROR(read_bool(body, "include_stop_str_in_output", r.gen.include_stop_str_in_output));
  // vLLM's allowed_token_ids: only these may be sampled; an empty list would allow nothing.
  BRIGADE_RETURN_IF_ERROR(read_token_id_list(body, "allowed_token_ids", 4096, r.gen.sampling.allowed_token_ids));
  if (auto a = body.find("allowed_token_ids"); a != body.end() && a->is_array() && a->empty())
    return invalid_argument("'allowed_token_ids' is empty: it would allow no token (leave it out to allow all)");
  BRIGADE_RETURN_IF_ERROR(read_bad_words(body, r.gen.sampling.bad_words));
  BRIGADE_RETURN_IF_ERROR(read_bool(body, "return_token_ids", r.return_token_ids));
  r.gen.return_prompt_ids = r.return_token_ids;
  if (auto t = body.find("return_tokens_as_token_ids"); t != body.end() && !t->is_null()) {
    bool as_ids = false;
    BRIGADE_RETURN_IF_ERROR(read_bool(body, "return_tokens_as_token_ids", as_ids));
    r.return_tokens_as_token_ids = as_ids;
  }
  BRIGADE_RETURN_IF_ERROR(read_truncate_prompt_tokens(body, r.gen.truncate_prompt_tokens));
  // vLLM's cache_salt: a non-empty string when given (the engine bounds its size).
  if (auto salt = body.find("cache_salt"); salt != body.end() && !salt->is_null()) {
    if (!salt->is_string() || salt->get_ref<const std::string&>().empty())
      return invalid_argument("'cache_salt' must be a non-empty string if provided");
    r.gen.cache_salt = salt->get<std::string>();
  }
  BRIGADE_RETURN_IF_ERROR(read_priority(body, r.gen.priority));
  if (auto id = body.find("request_id"); id != body.end() && !id->is_null()) {
    if (!id->is_string()) return wrong_type("request_id", "a string", *id);
    BRIGADE_RETURN_IF_ERROR(check_request_id(id->get<std::string>()));
    r.request_id = id->get<std::string>();
  }
  BRIGADE_RETURN_IF_ERROR(read_logit_bias(body, limits, r.gen.sampling));
  BRIGADE_RETURN_IF_ERROR(read_int(body, "min_tokens", 0, max_int, r.gen.min_tokens));
  BRIGADE_RETURN_IF_ERROR(read_guided_output(body, r.gen));
  if (endpoint == Endpoint::chat) BRIGADE_RETURN_IF_ERROR(read_tools(body, r.gen, r.tools));
  BRIGADE_RETURN_IF_ERROR(read_logprobs(body, endpoint, limits, r));
  BRIGADE_RETURN_IF_ERROR(read_bool(body, "ignore_eos", r.gen.ignore_eos));
  // vLLM's add_special_tokens: the tokenizer's BOS (and the like) on a text prompt; completions
  // add them by default, chat does not (the template writes its own).
  r.gen.add_bos = endpoint == Endpoint::completions;
  BRIGADE_RETURN_IF_ERROR(read_bool(body, "add_special_tokens", r.gen.add_bos));
  BRIGADE_RETURN_IF_ERROR(read_bool(body, "skip_special_tokens", r.gen.skip_special_tokens));
  BRIGADE_RETURN_IF_ERROR(read_prompt_scoring(body, endpoint, limits, r));
  if (endpoint == Endpoint::chat) {  // vLLM's and SGLang's switches for a server's reasoning parser
    // vLLM's thinking_token_budget: the server's reasoning parser says where the block is
    // (routes.cpp, limit_thinking).
    BRIGADE_RETURN_IF_ERROR(read_int(body, "thinking_token_budget", 0, max_int, r.gen.thinking_token_budget));
    BRIGADE_RETURN_IF_ERROR(read_bool(body, "include_reasoning", r.include_reasoning));
    BRIGADE_RETURN_IF_ERROR(read_bool(body, "separate_reasoning", r.separate_reasoning));
    // vLLM's values; the template says which its model takes (gpt-oss's harmony low, medium and
    // high; Mistral Small 4's none and high), and refuses the others.
    static constexpr std::string_view kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    auto effort = body.find("reasoning_effort");
    if (effort != body.end() && !effort->is_null()) {
      if (!effort->is_string()) return wrong_type("reasoning_effort", "one of none, minimal, low, medium, high, xhigh, max", *effort);
      r.reasoning_effort = effort->get<std::string>();
      if (std::find(std::begin(kEfforts), std::end(kEfforts), r.reasoning_effort) == std::end(kEfforts))
        return invalid_argument("'reasoning_effort' must be one of none, minimal, low, medium, high, xhigh, max (got '" +
                                r.reasoning_effort + "')");
    }
    // vLLM's switches for how the prompt ends: the assistant's turn opened (the default), or the
    // final message continued (an assistant reply the client began); vLLM refuses both at once.
    bool generation_prompt = true, continue_final = false;
    BRIGADE_RETURN_IF_ERROR(read_bool(body, "add_generation_prompt", generation_prompt));
    BRIGADE_RETURN_IF_ERROR(read_bool(body, "continue_final_message", continue_final));
    if (generation_prompt && continue_final)
      return invalid_argument("Cannot set both 'continue_final_message' and 'add_generation_prompt' to true: send "
                              "'add_generation_prompt': false to continue the final message");
    r.chat_ending = continue_final      ? Engine::ChatEnding::continue_final
                    : generation_prompt ? Engine::ChatEnding::generation_prompt
                                        : Engine::ChatEnding::none;
    auto kwargs = body.find("chat_template_kwargs");
    if (kwargs != body.end() && !kwargs->is_null()) {
      if (!kwargs->is_object()) return wrong_type("chat_template_kwargs", "an object of template variables", *kwargs);
      if (!kwargs->empty()) r.chat_template_kwargs = kwargs->dump();
    }
    // vLLM's chat_template: this request's Jinja template (route() checks the server trusts it).
    if (auto t = body.find("chat_template"); t != body.end() && !t->is_null()) {
      if (!t->is_string() || t->get_ref<const std::string&>().empty())
        return wrong_type("chat_template", "a non-empty string (a Jinja template)", *t);
      if (t->get_ref<const std::string&>().size() > (size_t{256} << 10))
        return invalid_argument("'chat_template' holds more than 256 KiB");
      r.chat_template = t->get<std::string>();
    }
    // vLLM's documents: objects of strings the template reads (Command R's, Granite's RAG turns).
    auto docs = body.find("documents");
    if (docs != body.end() && !docs->is_null()) {
      if (!docs->is_array()) return wrong_type("documents", "an array of objects", *docs);
      for (const auto& d : *docs) {
        if (!d.is_object()) return wrong_type("documents[]", "an object of strings", d);
        for (const auto& [k, v] : d.items())
          if (!v.is_string()) return wrong_type("documents[]." + k, "a string", v);
      }
      r.documents = docs->dump();
    }
  }
  auto user = body.find("user");
  if (user != body.end() && !user->is_null()) {
    if (!user->is_string()) return wrong_type("user", "a string", *user);
    // The client's identity for the topology's stations (a rate_limit keyed by user).
    std::string who = user->get<std::string>();
    if (who.size() > 256) return invalid_argument("user must be at most 256 bytes (got " + std::to_string(who.size()) + ")");
    r.gen.labels.emplace_back("user", std::move(who));
  }
  if (auto budget = body.find("thinking_token_budget");
      endpoint != Endpoint::chat && budget != body.end() && !budget->is_null())
    return invalid_argument("'thinking_token_budget' is read on /v1/chat/completions and /v1/responses, where the "
                            "server's reasoning parser finds the reasoning block in the chat's prompt");
  BRIGADE_RETURN_IF_ERROR(refuse_unsupported(body));
  BRIGADE_RETURN_IF_ERROR(read_beam_search(body, r));
  apply_generation_defaults(body, limits.defaults, r);
  return r;
}

GenerateOptions CompletionRequest::choice_request(int c) const {
  GenerateOptions g = gen;
  if (!prompts.empty()) {
    const PromptInput& p = prompts[static_cast<size_t>(c / n)];
    g.prompt = p.text;
    g.prompt_ids = p.ids;
  }
  if (g.sampling.seed) g.sampling.seed = *g.sampling.seed + static_cast<uint64_t>(c % n);
  return g;
}

BeamSearchOptions CompletionRequest::beam_request(int p) const {
  const GenerateOptions g = choice_request(p * n);
  BeamSearchOptions o;
  o.prompt = g.prompt;
  o.prompt_ids = g.prompt_ids;
  o.add_bos = g.add_bos;
  o.beam_width = n;
  o.max_tokens = g.max_tokens;
  o.length_penalty = length_penalty;
  o.early_stopping = early_stopping;
  o.ignore_eos = g.ignore_eos;
  o.stop_ids = g.stop_ids;
  o.include_stop_str_in_output = g.include_stop_str_in_output;
  o.skip_special_tokens = g.skip_special_tokens;
  o.truncate_prompt_tokens = g.truncate_prompt_tokens;
  o.logprobs = g.logprobs;
  o.priority = g.priority;
  o.cache_salt = g.cache_salt;
  o.labels = g.labels;
  o.lora = g.lora;
  return o;
}

const std::string& CompletionRequest::echo_of(int c) const {
  static const std::string none;
  const size_t p = static_cast<size_t>(c / n);
  return echo && p < echo_texts.size() ? echo_texts[p] : none;
}

Expected<CompletionRequest> parse_completion_body(std::string_view body, Endpoint endpoint, const ParseLimits& limits) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("the request body is not valid JSON");
  BRIGADE_ASSIGN_OR_RETURN(CompletionRequest r, parse_completion_request(j, endpoint, limits));
  // Again, keeping the body's key order: a schema's is its output's, and the template prints tools as sent.
  if (r.gen.response_format == ResponseFormat::json_schema || !r.tools.tools.empty()) {
    const auto ordered = nlohmann::ordered_json::parse(body.begin(), body.end(), nullptr, false);
    if (r.gen.response_format == ResponseFormat::json_schema) BRIGADE_RETURN_IF_ERROR(read_guided_output(ordered, r.gen));
    if (!r.tools.tools.empty()) BRIGADE_RETURN_IF_ERROR(read_tools(ordered, r.gen, r.tools));
  }
  return r;
}

namespace {

Expected<json> parse_object(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("the request body is not valid JSON");
  if (!j.is_object()) return wrong_type("the request body", "a JSON object", j);
  return j;
}

}  // namespace

Expected<TokenizeRequest> parse_tokenize_body(std::string_view body) {
  BRIGADE_ASSIGN_OR_RETURN(json j, parse_object(body));
  TokenizeRequest r;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "return_token_strs", r.return_token_strs));
  if (j.contains("messages")) {
    if (j.contains("prompt")) return invalid_argument("send 'prompt' or 'messages', not both");
    BRIGADE_ASSIGN_OR_RETURN(CompletionRequest chat, parse_completion_request(j, Endpoint::chat));
    if (!chat.image_urls.empty())
      return unsupported("/tokenize does not expand images: send the messages without image parts");
    r.chat = std::move(chat);
    r.add_special_tokens = false;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "add_special_tokens", r.add_special_tokens));
    return r;
  }
  auto prompt = j.find("prompt");
  if (prompt == j.end() || !prompt->is_string())
    return prompt == j.end() ? invalid_argument("'prompt' is required") : wrong_type("prompt", "a string", *prompt);
  r.prompt = prompt->get<std::string>();
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "add_special_tokens", r.add_special_tokens));
  return r;
}

Expected<CompletionRequest> parse_pooling_chat(const json& body) {
  if (body.contains("input")) return invalid_argument("send 'input' or 'messages', not both");
  json chat = body;
  if (!chat.contains("add_generation_prompt") || chat["add_generation_prompt"].is_null())
    chat["add_generation_prompt"] = false;
  BRIGADE_ASSIGN_OR_RETURN(CompletionRequest r, parse_completion_request(chat, Endpoint::chat));
  if (!r.image_urls.empty())
    return unsupported("images in the chat form of a pooling request are not supported: send the messages without "
                       "image parts");
  return r;
}

Status read_pooling_input(const json& body, int max_inputs, std::string& model, std::vector<PromptInput>& inputs,
                          std::optional<CompletionRequest>& chat, bool& add_special_tokens) {
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) return invalid_argument("'model' must be a string");
    model = m->get<std::string>();
  }
  add_special_tokens = true;
  if (body.contains("messages")) {
    BRIGADE_ASSIGN_OR_RETURN(CompletionRequest c, parse_pooling_chat(body));
    chat = std::move(c);
    add_special_tokens = false;
  } else {
    auto in = body.find("input");
    if (in == body.end() || in->is_null())
      return invalid_argument("'input' is required: a string, an array of strings, or token ids (or 'messages')");
    if (in->is_array() && in->empty()) return invalid_argument("'input' is an empty array: give at least one input");
    BRIGADE_RETURN_IF_ERROR(read_prompt_batch(*in, "input", max_inputs, inputs));
  }
  return read_bool(body, "add_special_tokens", add_special_tokens);
}

Expected<std::vector<int32_t>> parse_detokenize_body(std::string_view body) {
  BRIGADE_ASSIGN_OR_RETURN(json j, parse_object(body));
  auto tokens = j.find("tokens");
  if (tokens == j.end() || !tokens->is_array())
    return tokens == j.end() ? invalid_argument("'tokens' is required") : wrong_type("tokens", "an array of token ids", *tokens);
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  for (const json& t : *tokens) {
    const bool in_range = t.is_number_unsigned()  ? t.get<uint64_t>() <= INT32_MAX
                          : t.is_number_integer() ? t.get<int64_t>() >= 0 && t.get<int64_t>() <= INT32_MAX
                                                  : false;
    if (!in_range)
      return invalid_argument("'tokens' must hold integer token ids in [0, 2147483647] (got " + t.dump() + ")");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

}  // namespace brigade::server
