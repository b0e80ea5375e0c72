#include "server/harmony_parser.h"

#include <optional>

#include "server/tool_call_parser_base.h"

namespace brigade::server {

namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kConstrain = "<|constrain|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kFunctions = "functions.";

// What ends a header, and what ends a body.
const std::vector<std::string_view> kHeaderMarkers = {kMessage, kStart, kEnd, kReturn, kCall};
const std::vector<std::string_view> kBodyMarkers = {kEnd, kReturn, kCall, kStart};

// The word after `at` (up to a space or the next special token).
std::string_view word_at(std::string_view s, size_t at) {
  const size_t end = s.find_first_of(" <\n", at);
  return s.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
}

struct Header {
  std::string_view channel;    // empty: none written
  std::string_view recipient;  // empty: none (or "all")
};

// A header's text, the role (when there is one) included: `assistant to=functions.f<|channel|>commentary json`.
Header parse_header(std::string_view h) {
  Header out;
  if (const size_t c = h.find(kChannel); c != std::string_view::npos) out.channel = word_at(h, c + kChannel.size());
  for (size_t to = h.find("to="); to != std::string_view::npos; to = h.find("to=", to + 1)) {
    if (to == 0 || h[to - 1] == ' ' || h[to - 1] == '>') {
      out.recipient = word_at(h, to + 3);
      break;
    }
  }
  if (out.recipient == "all") out.recipient = {};
  return out;
}

// Whether text at the start of the output may still be the header the prompt opened (else the
// output is not harmony: a constrained answer). An end marker there ends a message without a body.
bool may_be_header(std::string_view s) {
  for (std::string_view p : {kChannel, std::string_view(" to="), kConstrain, kMessage, kStart, kEnd, kReturn, kCall}) {
    if (s.size() < p.size() ? p.starts_with(s) : s.starts_with(p)) return true;
  }
  return false;
}

bool has_end(std::string_view s) {
  return s.find(kEnd) != std::string_view::npos || s.find(kReturn) != std::string_view::npos ||
         s.find(kCall) != std::string_view::npos;
}

// The text after the prompt's last `<|start|>` when no end marker closed that message.
std::optional<std::string_view> open_message_of(std::string_view prompt) {
  const size_t start = prompt.rfind(kStart);
  if (start == std::string_view::npos) return std::nullopt;
  const std::string_view tail = prompt.substr(start + kStart.size());
  if (has_end(tail)) return std::nullopt;
  return tail;
}

}  // namespace

bool harmony_prompt_opens_final(std::string_view prompt) {
  const std::optional<std::string_view> tail = open_message_of(prompt);
  if (!tail) return false;
  const size_t message = tail->find(kMessage);
  if (message == std::string_view::npos) return false;
  const Header h = parse_header(tail->substr(0, message));
  return h.channel == "final" && h.recipient.empty();
}

HarmonyParser::HarmonyParser(std::string_view prompt, bool calls, int max_calls) : calls_(calls), max_calls_(max_calls) {
  const std::optional<std::string_view> open = open_message_of(prompt);
  if (!open) return;
  const std::string_view tail = *open;
  const size_t message = tail.find(kMessage);
  if (message == std::string_view::npos) {
    prompt_header_ = std::string(tail);
    return;
  }
  // The prompt began a message's body (a template that writes `<|channel|>final<|message|>`).
  HarmonyParse unused;
  open_message(tail.substr(0, message), unused);
  if (route_ == Route::call) {  // a call the prompt began is not the output's: its body is dropped
    route_ = Route::drop;
    n_calls_ = 0;
  }
  state_ = State::body;
  first_header_ = false;
}

void HarmonyParser::open_message(std::string_view header, HarmonyParse& out) {
  const Header h = parse_header(header);
  opened_ = false;
  if (h.recipient.empty()) {
    route_ = h.channel == "analysis" ? Route::reasoning : Route::content;
    return;
  }
  if (!h.recipient.starts_with(kFunctions)) {  // a built-in tool (browser, python): part of the reasoning
    route_ = Route::reasoning;
    return;
  }
  const std::string_view name = h.recipient.substr(kFunctions.size());
  if (!calls_ || !tool_parse::valid_function_name(name)) {
    route_ = Route::content;
    return;
  }
  if (n_calls_ >= max_calls_) {
    route_ = Route::drop;
    return;
  }
  out.calls.push_back({n_calls_++, std::string(name), "", ""});
  route_ = Route::call;
}

void HarmonyParser::emit(std::string_view text, HarmonyParse& out) {
  if (text.empty()) return;
  auto field = [&](std::string& to, bool& said) {
    if (!opened_ && said) to += '\n';
    to += text;
    said = true;
  };
  switch (route_) {
    case Route::reasoning: field(out.reasoning, said_reasoning_); break;
    case Route::content: field(out.content, said_content_); break;
    case Route::call: out.calls.push_back({n_calls_ - 1, "", std::string(text), ""}); break;
    case Route::drop: break;
  }
  opened_ = true;
}

bool HarmonyParser::step(HarmonyParse& out) {
  if (state_ == State::raw) {
    out.content += buf_;
    buf_.clear();
    return false;
  }
  if (state_ == State::header) {
    if (first_header_ && !may_be_header(buf_)) {
      state_ = State::raw;
      return true;
    }
    const auto [at, len] = tool_parse::find_first(buf_, kHeaderMarkers);
    if (at == std::string::npos) return false;
    const std::string_view marker = std::string_view(buf_).substr(at, len);
    if (marker == kMessage) {
      open_message((first_header_ ? prompt_header_ : std::string()) + buf_.substr(0, at), out);
      state_ = State::body;
    }
    // `<|start|>` opens the next header; an end marker ends a message that had no body.
    buf_.erase(0, at + len);
    first_header_ = false;
    return true;
  }
  const auto [at, len] = tool_parse::find_first(buf_, kBodyMarkers);
  if (at == std::string::npos) {
    const size_t keep = tool_parse::partial_marker(buf_, kBodyMarkers);
    emit(std::string_view(buf_).substr(0, buf_.size() - keep), out);
    buf_.erase(0, buf_.size() - keep);
    return false;
  }
  emit(std::string_view(buf_).substr(0, at), out);
  buf_.erase(0, at + len);
  state_ = State::header;
  return true;
}

HarmonyParse HarmonyParser::feed(std::string_view text) {
  HarmonyParse out;
  buf_ += text;
  while (step(out)) {
  }
  return out;
}

HarmonyParse HarmonyParser::finish() {
  HarmonyParse out;
  if (state_ == State::body) {
    emit(buf_, out);  // a possible marker's start that never completed is body text
  } else if (state_ == State::header && first_header_ && buf_.find("<|") == std::string::npos) {
    route_ = Route::content;  // plain text the length of a header's start (" t"): not harmony
    emit(buf_, out);
  }
  buf_.clear();
  return out;
}

}  // namespace brigade::server
