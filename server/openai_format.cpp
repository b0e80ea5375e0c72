#include "server/openai_format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <random>

namespace brigade::server {

namespace {

// Insertion order: the fields come as OpenAI and vLLM write them, and a prompt position's
// logprob dict starts with the prompt token itself, as vLLM's.
using json = nlohmann::ordered_json;

// Engine text is complete UTF-8, but a prompt or stop string echoed back might not be: replace
// rather than throw.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// -inf (a token the sampler could never pick) is not valid JSON; OpenAI-compatible servers send a
// large negative number instead.
double finite_logprob(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char ch : s) b.push_back(static_cast<int>(ch));
  return b;
}

const char* finish_name(FinishReason f) {
  switch (f) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::abort: return "abort";
    case FinishReason::error: return "error";
    case FinishReason::none: break;
  }
  return nullptr;
}

json finish_json(FinishReason f) {
  const char* n = finish_name(f);
  return n ? json(n) : json(nullptr);
}

// A new call's id: OpenAI's "call_" and 24 alphanumerics, or Mistral's 9 alphanumerics (its
// templates refuse other ids).
std::string new_call_id(ToolFormat format) {
  static constexpr char kAlnum[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const bool mistral = format == ToolFormat::mistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
  return id;
}

std::unique_ptr<ToolCallParser> tool_parser_for(const CompletionRequest& r) {
  if (r.endpoint != Endpoint::chat || r.tools.choice == ToolChoice::none) return nullptr;
  const int max_calls = r.tools.parallel ? INT_MAX : 1;
  switch (r.tools.choice) {
    case ToolChoice::named: return make_tool_call_parser(ToolParserKind::forced_named, max_calls, r.tools.named);
    case ToolChoice::required:
      return make_tool_call_parser(ToolParserKind::forced_array, max_calls, "", forced_arguments_key(r.tool_format));
    default:
      return make_tool_call_parser(tool_parser_kind(r.tool_format), max_calls, "", "arguments", r.tools.functions);
  }
}

}  // namespace

int http_status_for(StatusCode code) {
  switch (code) {
    case StatusCode::invalid_argument:
    case StatusCode::unsupported: return 400;
    case StatusCode::not_found: return 404;
    case StatusCode::out_of_resources: return 429;
    case StatusCode::cancelled: return 503;  // the server is shutting down
    default: return 500;
  }
}

std::string error_body(int http_status, const std::string& message, StatusCode code) {
  json e = {{"message", message},
            {"type", http_status >= 500 ? "server_error" : "invalid_request_error"},
            {"param", nullptr},
            {"code", status_code_name(code)}};
  return dump(json{{"error", e}});
}

std::string sse_data(const std::string& json_text) { return "data: " + json_text + "\n\n"; }
std::string sse_done() { return "data: [DONE]\n\n"; }

CompletionState::CompletionState(const CompletionRequest& request, std::string id, std::string model, int64_t created)
    : request_(request), id_(std::move(id)), model_(std::move(model)), created_(created),
      choices_(static_cast<size_t>(request.n_choices())) {
  const bool chat = request_.endpoint == Endpoint::chat;
  const bool harmony_calls = chat && request_.tools.choice == ToolChoice::automatic && !request_.tools.tools.empty() &&
                             request_.tool_format == ToolFormat::openai;
  for (Choice& c : choices_) {
    if (chat && request_.reasoning == ReasoningKind::openai_gptoss) {
      c.harmony = std::make_unique<HarmonyParser>(request_.gen.prompt, harmony_calls, request_.tools.parallel ? INT_MAX : 1);
      if (!harmony_calls) c.tool_parser = tool_parser_for(request_);  // another syntax reads the final channel
      continue;
    }
    c.tool_parser = tool_parser_for(request_);
    if (chat && request_.reasoning != ReasoningKind::none)
      c.reasoning_parser = std::make_unique<ReasoningSplitter>(request_.reasoning, request_.gen.prompt);
  }
}

CompletionState::Split CompletionState::split_harmony(const Event& ev, Choice& c) {
  HarmonyParse h = c.harmony->feed(ev.text);
  if (ev.finish != FinishReason::none) {
    HarmonyParse tail = c.harmony->finish();
    h.reasoning += tail.reasoning;
    h.content += tail.content;
    h.calls.insert(h.calls.end(), tail.calls.begin(), tail.calls.end());
  }
  if (!request_.include_reasoning) h.reasoning.clear();
  c.reasoning += h.reasoning;
  ToolParse tools = split_tools(h.content, ev.finish != FinishReason::none, c);
  record_calls(h.calls, c);
  tools.calls.insert(tools.calls.end(), h.calls.begin(), h.calls.end());
  return {std::move(h.reasoning), std::move(tools)};
}

void CompletionState::record_calls(const std::vector<ToolCallDelta>& calls, Choice& c) {
  for (const ToolCallDelta& d : calls) {
    if (!d.name.empty()) c.calls.push_back({d.id.empty() ? new_call_id(request_.tool_format) : d.id, d.name, ""});
    c.calls[static_cast<size_t>(d.index)].arguments += d.arguments;
  }
}

CompletionState::Split CompletionState::split_output(const Event& ev, Choice& c) {
  const bool last = ev.finish != FinishReason::none;
  if (c.harmony) return split_harmony(ev, c);
  if (!c.reasoning_parser) return {"", split_tools(ev.text, last, c)};
  ReasoningParse r = c.reasoning_parser->feed(ev.text);
  if (last) {
    ReasoningParse tail = c.reasoning_parser->finish();
    r.reasoning += tail.reasoning;
    r.content += tail.content;
  }
  if (!request_.include_reasoning) r.reasoning.clear();
  c.reasoning += r.reasoning;
  return {std::move(r.reasoning), split_tools(r.content, last, c)};
}

ToolParse CompletionState::split_tools(std::string_view text, bool last, Choice& c) {
  if (!c.tool_parser) {
    if (reasons(c)) c.content += text;
    return {std::string(text), {}};
  }
  ToolParse out = c.tool_parser->feed(text);
  if (last) {
    ToolParse tail = c.tool_parser->finish();
    out.content += tail.content;
    out.calls.insert(out.calls.end(), tail.calls.begin(), tail.calls.end());
  }
  c.content += out.content;
  record_calls(out.calls, c);
  return out;
}

std::string CompletionState::on_event(int choice, const Event& ev) {
  Choice& c = choices_[static_cast<size_t>(choice)];
  if (c.finish != FinishReason::none) return "";  // a late duplicate; the choice is closed
  const size_t from = c.token_ids.size();
  c.text += ev.text;
  c.token_ids.insert(c.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
  c.logprobs.insert(c.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
  c.top_logprobs.insert(c.top_logprobs.end(), ev.top_logprobs.begin(), ev.top_logprobs.end());
  // Per-token text: the event's text belongs to its first token (exact when an event carries one
  // token, the usual case; the detokenizer holds back partial UTF-8 and partial stop strings).
  for (size_t i = 0; i < ev.token_ids.size(); ++i) c.token_texts.push_back(i == 0 ? ev.text : std::string());
  if (!ev.prompt_logprobs.empty()) c.prompt_logprobs = ev.prompt_logprobs;
  if (!ev.prompt_token_ids.empty()) c.prompt_ids = ev.prompt_token_ids;
  c.completion_tokens = std::max(c.completion_tokens, ev.completion_tokens);
  if (ev.completion_tokens == 0) c.completion_tokens = static_cast<int>(c.token_ids.size());
  if (ev.prompt_tokens > 0) c.prompt_tokens = ev.prompt_tokens;
  if (ev.cached_tokens > 0) c.cached_tokens = ev.cached_tokens;
  if (ev.finish == FinishReason::error && error_.is_ok()) {
    error_ = Status(ev.error_code == StatusCode::ok ? StatusCode::internal : ev.error_code, ev.error);
  }
  if (ev.finish != FinishReason::none) {
    c.finish = ev.finish;
    ++n_done_;
  }
  const Split parsed = split_output(ev, c);
  if (!request_.stream || ev.finish == FinishReason::error) return "";
  if (ev.text.empty() && ev.finish == FinishReason::none && from == c.token_ids.size()) return "";
  return chunk(choice, ev, c, parsed);
}

std::vector<Event> beam_events(const BeamSearchResult& result, size_t k, bool with_prompt_ids) {
  const Beam& beam = result.beams.at(k);
  std::vector<Event> out(std::max<size_t>(1, beam.token_ids.size()));
  for (size_t i = 0; i < beam.token_ids.size(); ++i) {
    Event& ev = out[i];
    ev.token_ids = {beam.token_ids[i]};
    if (i < beam.token_texts.size()) ev.text = beam.token_texts[i];
    if (i < beam.logprobs.size()) ev.logprobs = {beam.logprobs[i]};
    if (i < beam.top_logprobs.size()) ev.top_logprobs = {beam.top_logprobs[i]};
  }
  for (Event& ev : out) ev.prompt_tokens = static_cast<int>(result.prompt_token_ids.size());
  out.front().cached_tokens = result.cached_tokens;
  if (with_prompt_ids) out.front().prompt_token_ids = result.prompt_token_ids;
  out.back().finish = beam.finish;
  out.back().completion_tokens = static_cast<int>(beam.token_ids.size());
  return out;
}

std::string CompletionState::logprobs_json(const Choice& c, size_t from, size_t to, size_t text_offset,
                                           bool with_prompt) const {
  if (request_.gen.logprobs < 0 || c.logprobs.size() < to) return "null";
  // vLLM's return_tokens_as_token_ids names every token by its id; an alternative other than the
  // sampled token is always named so (the server has the text of sampled tokens only).
  const bool as_ids = request_.return_tokens_as_token_ids.value_or(false);
  const auto id_name = [](int32_t id) { return "token_id:" + std::to_string(id); };
  auto token_text = [&](size_t i, int32_t id) {
    return id == c.token_ids[i] && !as_ids ? c.token_texts[i] : id_name(id);
  };
  auto prompt_text = [&](int32_t id, const std::string& text) { return as_ids ? id_name(id) : text; };
  if (request_.endpoint == Endpoint::chat) {
    json content = json::array();
    for (size_t i = from; i < to; ++i) {
      json top = json::array();
      if (i < c.top_logprobs.size()) {
        for (const auto& [id, lp] : c.top_logprobs[i]) {
          const std::string t = token_text(i, id);
          top.push_back({{"token", t}, {"logprob", finite_logprob(lp)}, {"bytes", bytes_of(t)}});
        }
      }
      const std::string t = token_text(i, c.token_ids[i]);
      content.push_back({{"token", t}, {"logprob", finite_logprob(c.logprobs[i])}, {"bytes", bytes_of(t)}, {"top_logprobs", top}});
    }
    return dump(json{{"content", content}});
  }
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  size_t offset = 0;
  if (with_prompt) {
    // vLLM's echo: the prompt token's own logprob first in its dict, then the k best (k + 1 at most).
    const size_t k = static_cast<size_t>(request_.gen.logprobs);
    for (const PromptLogprob& p : c.prompt_logprobs) {
      const std::string name = prompt_text(p.token, p.text);
      tokens.push_back(name);
      offsets.push_back(offset);
      offset += p.text.size();
      if (!p.logprob) {
        lps.push_back(nullptr);
        tops.push_back(nullptr);
        continue;
      }
      lps.push_back(finite_logprob(*p.logprob));
      json top = json::object();
      top[name] = finite_logprob(*p.logprob);
      for (size_t j = 0; j < p.top.size() && top.size() < k + 1; ++j) {
        const std::string alt = prompt_text(p.top[j].token, p.top[j].text);
        if (!top.contains(alt)) top[alt] = finite_logprob(p.top[j].logprob);
      }
      tops.push_back(top);
    }
  }
  offset = text_offset;
  for (size_t i = from; i < to; ++i) {
    tokens.push_back(token_text(i, c.token_ids[i]));
    lps.push_back(finite_logprob(c.logprobs[i]));
    json top = json::object();
    if (i < c.top_logprobs.size()) {
      for (const auto& [id, lp] : c.top_logprobs[i]) top[token_text(i, id)] = finite_logprob(lp);
    }
    tops.push_back(top);
    offsets.push_back(offset);
    offset += c.token_texts[i].size();
  }
  return dump(json{{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}});
}

std::string CompletionState::prompt_logprobs_json(const Choice& c) const {
  if (request_.prompt_logprobs < 0 || c.prompt_logprobs.empty()) return "null";
  json out = json::array();
  const auto entry = [](float lp, int rank, const std::string& text) {
    return json{{"logprob", finite_logprob(lp)}, {"rank", rank}, {"decoded_token", text}};
  };
  for (const PromptLogprob& p : c.prompt_logprobs) {
    if (!p.logprob) {
      out.push_back(nullptr);
      continue;
    }
    json pos = json::object();
    pos[std::to_string(p.token)] = entry(*p.logprob, p.rank, p.text);
    const size_t k = std::min(p.top.size(), static_cast<size_t>(request_.prompt_logprobs));
    for (size_t j = 0; j < k; ++j) {
      const std::string id = std::to_string(p.top[j].token);
      if (!pos.contains(id)) pos[id] = entry(p.top[j].logprob, static_cast<int>(j) + 1, p.top[j].text);
    }
    out.push_back(std::move(pos));
  }
  return dump(out);
}

std::string CompletionState::chunk(int choice, const Event& ev, Choice& c, const Split& parsed) const {
  const size_t to = c.token_ids.size(), from = to - ev.token_ids.size();
  json ch = {{"index", choice}};
  // echo: the choice's first chunk carries the prompt (and with logprobs its tokens' logprobs);
  // chat's echo is content (chat_chunks).
  const bool completions = request_.endpoint == Endpoint::completions;
  const bool echo_now = completions && request_.echo && !c.echoed;
  c.echoed = c.echoed || echo_now;
  static const std::string no_echo;
  const std::string& echo_text = completions ? request_.echo_of(choice) : no_echo;
  const size_t text_offset = c.text.size() - ev.text.size() + echo_text.size();
  ch["logprobs"] = json::parse(logprobs_json(c, from, to, text_offset, echo_now));
  ch["finish_reason"] = ev.finish == FinishReason::none ? json(nullptr) : choice_finish(c);
  if (!ev.prompt_logprobs.empty() && request_.prompt_logprobs >= 0) ch["prompt_logprobs"] = json::parse(prompt_logprobs_json(c));
  json body = {{"id", id_}, {"created", created_}, {"model", model_}};
  if (request_.return_token_ids) {  // vLLM's: the prompt's ids in the choice's first chunk, each chunk its new ids
    ch["token_ids"] = ev.token_ids;
    if (!c.sent_prompt_ids) (completions ? ch : body)["prompt_token_ids"] = c.prompt_ids;
    c.sent_prompt_ids = true;
  }
  if (request_.include_usage && request_.continuous_usage)  // vLLM's: the choice's tokens so far
    body["usage"] = {{"prompt_tokens", c.prompt_tokens},
                     {"completion_tokens", c.completion_tokens},
                     {"total_tokens", c.prompt_tokens + c.completion_tokens}};
  if (request_.endpoint == Endpoint::chat) return chat_chunks(ev, c, parsed, std::move(ch), std::move(body));
  ch["text"] = echo_now ? echo_text + ev.text : ev.text;
  body["object"] = "text_completion";
  body["choices"] = json::array({ch});
  return sse_data(dump(body));
}

// One chunk per delta: the reasoning, the content, then each tool call piece (vLLM's
// delta.tool_calls: index, id, type and name first, then arguments). Logprobs ride on the first,
// finish_reason on the last.
std::string CompletionState::chat_chunks(const Event& ev, Choice& c, const Split& parsed, json ch, json body) const {
  std::vector<json> deltas;
  // Chat's echo: the assistant message the request ended with, as the first content.
  if (const std::string& echo = request_.echo_of(static_cast<int>(ch["index"].get<int64_t>())); !c.echoed && !echo.empty())
    deltas.push_back({{"content", echo}});
  c.echoed = true;
  if (!splits(c)) {
    if (!ev.text.empty() || ev.finish == FinishReason::none) deltas.push_back({{"content", ev.text}});
  } else {
    if (!parsed.reasoning.empty())
      deltas.push_back({{"reasoning_content", parsed.reasoning}, {"reasoning", parsed.reasoning}});
    if (!parsed.tools.content.empty()) deltas.push_back({{"content", parsed.tools.content}});
    for (const ToolCallDelta& d : parsed.tools.calls) {
      json call = {{"index", d.index}};
      json fn = json::object();
      if (!d.name.empty()) {
        call["id"] = c.calls[static_cast<size_t>(d.index)].id;
        call["type"] = "function";
        fn["name"] = d.name;
      }
      fn["arguments"] = d.arguments;
      call["function"] = fn;
      deltas.push_back({{"tool_calls", json::array({call})}});
    }
    // Text held back (it may be a call): nothing to send unless the role, logprobs or the end is due.
    if (deltas.empty() && c.sent_role && ch["logprobs"].is_null() && ev.finish == FinishReason::none) return "";
  }
  if (deltas.empty()) deltas.push_back(json::object());
  body["object"] = "chat.completion.chunk";
  std::string out;
  for (size_t i = 0; i < deltas.size(); ++i) {
    json delta = json::object();
    if (!c.sent_role) delta["role"] = "assistant";
    c.sent_role = true;
    delta.update(deltas[i]);
    json piece = ch;
    if (i > 0) piece["logprobs"] = nullptr;
    if (i > 0 && piece.contains("token_ids")) piece["token_ids"] = json::array();
    if (i > 0) body.erase("prompt_token_ids");
    if (i + 1 < deltas.size()) piece["finish_reason"] = nullptr;
    piece["delta"] = std::move(delta);
    body["choices"] = json::array({std::move(piece)});
    out += sse_data(dump(body));
  }
  return out;
}

json CompletionState::chat_message(const Choice& c, const std::string& echo) const {
  json m = {{"role", "assistant"}};
  if (!splits(c)) {
    m["content"] = echo + c.text;
    return m;
  }
  if (reasons(c) && request_.include_reasoning) {
    const json reasoning = c.reasoning.empty() ? json(nullptr) : json(c.reasoning);
    m["reasoning_content"] = reasoning;
    m["reasoning"] = reasoning;
  }
  // No content: null after calls (OpenAI's form) or after reasoning alone (vLLM's).
  const bool none = echo.empty() && c.content.empty() && (!c.calls.empty() || reasons(c));
  m["content"] = none ? json(nullptr) : json(echo + c.content);
  if (c.calls.empty()) return m;
  json calls = json::array();
  for (const auto& call : c.calls) {
    calls.push_back({{"id", call.id},
                     {"type", "function"},
                     {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  m["tool_calls"] = std::move(calls);
  return m;
}

json CompletionState::choice_finish(const Choice& c) const {
  if (c.finish == FinishReason::stop && !c.calls.empty() && request_.tools.choice != ToolChoice::named) return "tool_calls";
  return finish_json(c.finish);
}

// Each prompt counts once, however many choices it has (as OpenAI and vLLM count); its cached
// tokens are its first choice's (the others run after it and may hit what it computed).
std::string CompletionState::usage_json() const {
  int completion = 0, prompt = 0, cached = 0;
  for (const auto& c : choices_) completion += c.completion_tokens;
  const size_t n = static_cast<size_t>(request_.n);
  for (size_t first = 0; first < choices_.size(); first += n) {
    int tokens = 0;
    for (size_t i = first; i < first + n && i < choices_.size(); ++i) tokens = std::max(tokens, choices_[i].prompt_tokens);
    prompt += tokens;
    cached += choices_[first].cached_tokens;
  }
  return dump(json{{"prompt_tokens", prompt},
                   {"completion_tokens", completion},
                   {"total_tokens", prompt + completion},
                   {"prompt_tokens_details", {{"cached_tokens", cached}}}});
}

std::string CompletionState::final_body() const {
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json ch = {{"index", i}};
    const std::string& echo = request_.echo_of(static_cast<int>(i));
    const bool chat = request_.endpoint == Endpoint::chat;
    if (chat) {
      ch["message"] = chat_message(c, echo);
    } else {
      ch["text"] = echo + c.text;
    }
    ch["logprobs"] = json::parse(logprobs_json(c, 0, c.token_ids.size(), chat ? 0 : echo.size(), request_.echo && !chat));
    ch["finish_reason"] = choice_finish(c);
    if (request_.endpoint == Endpoint::completions && request_.prompt_logprobs >= 0)
      ch["prompt_logprobs"] = json::parse(prompt_logprobs_json(c));
    if (request_.return_token_ids) {  // vLLM's: chat names the prompt once, beside the choices
      if (!chat) ch["prompt_token_ids"] = c.prompt_ids;
      ch["token_ids"] = c.token_ids;
    }
    choices.push_back(ch);
  }
  json body = {{"id", id_},
               {"object", request_.endpoint == Endpoint::chat ? "chat.completion" : "text_completion"},
               {"created", created_},
               {"model", model_},
               {"choices", choices},
               {"usage", json::parse(usage_json())}};
  // vLLM's chat puts the prompt's logprobs beside the choices (one prompt for all of them).
  if (request_.endpoint == Endpoint::chat && request_.prompt_logprobs >= 0 && !choices_.empty())
    body["prompt_logprobs"] = json::parse(prompt_logprobs_json(choices_[0]));
  if (request_.endpoint == Endpoint::chat && request_.return_token_ids && !choices_.empty())
    body["prompt_token_ids"] = choices_[0].prompt_ids;
  return dump(body);
}

std::string ResponseWriter::stream_error(const Event& ev) {
  return sse_data(error_body(http_status_for(ev.error_code), ev.error, ev.error_code));
}

std::string CompletionState::stream_tail() {
  std::string out;
  if (request_.include_usage) {
    json body = {{"id", id_},
                 {"object", request_.endpoint == Endpoint::chat ? "chat.completion.chunk" : "text_completion"},
                 {"created", created_},
                 {"model", model_},
                 {"choices", json::array()},
                 {"usage", json::parse(usage_json())}};
    out += sse_data(dump(body));
  }
  return out + sse_done();
}

std::string models_body(const std::string& model, int64_t created, int max_context) {
  json m = {{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "brigade"},
            {"max_model_len", max_context}};
  return dump(json{{"object", "list"}, {"data", json::array({m})}});
}

std::string tokenize_body(const std::vector<int32_t>& ids, int max_context, const std::vector<std::string>* strs) {
  json body{{"count", ids.size()}, {"max_model_len", max_context}, {"tokens", ids}};
  if (strs) body["token_strs"] = *strs;
  return dump(body);
}

std::string detokenize_body(const std::string& text) { return dump(json{{"prompt", text}}); }

}  // namespace brigade::server
