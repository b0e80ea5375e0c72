#include "server/reasoning_parser.h"

#include <algorithm>

namespace brigade::server {

namespace {


bool is_blank(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t leading_blanks(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_blank(s[i])) ++i;
  return i;
}

// The length of the longest suffix of s that is a proper prefix of tag (text that may become it).
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

std::string_view reasoning_open_tag(ReasoningKind kind) {
  if (kind == ReasoningKind::cohere_command) return cohere::kStartThinking;
  if (kind == ReasoningKind::mistral) return "[THINK]";
  return kind == ReasoningKind::seed_oss ? "<seed:think>" : "<think>";
}
std::string_view reasoning_close_tag(ReasoningKind kind) {
  if (kind == ReasoningKind::cohere_command) return cohere::kEndThinking;
  if (kind == ReasoningKind::mistral) return "[/THINK]";
  return kind == ReasoningKind::seed_oss ? "</seed:think>" : "</think>";
}

Expected<ReasoningKind> parse_reasoning_kind(std::string_view name, bool vocab_has_close_tag, bool vocab_has_channel,
                                             bool vocab_has_seed_close, bool vocab_has_cohere_close,
                                             bool vocab_has_mistral_close) {
  std::string n(name);
  std::replace(n.begin(), n.end(), '-', '_');
  if (n == "none" || n.empty()) return ReasoningKind::none;
  if (n == "deepseek_r1" || n == "minimax_m2") return ReasoningKind::deepseek_r1;
  if (n == "minimax_m2_append_think") return ReasoningKind::minimax_append_think;
  if (n == "qwen3" || n == "deepseek_v3" || n == "glm45") return ReasoningKind::qwen3;
  if (n == "openai_gptoss") return ReasoningKind::openai_gptoss;
  if (n == "seed_oss") return ReasoningKind::seed_oss;
  if (n == "cohere_command3" || n == "cohere_command4") return ReasoningKind::cohere_command;
  if (n == "mistral") return ReasoningKind::mistral;
  if (n == "auto") {
    if (vocab_has_channel) return ReasoningKind::openai_gptoss;
    if (vocab_has_close_tag) return ReasoningKind::qwen3;
    if (vocab_has_seed_close) return ReasoningKind::seed_oss;
    if (vocab_has_cohere_close) return ReasoningKind::cohere_command;
    return vocab_has_mistral_close ? ReasoningKind::mistral : ReasoningKind::none;
  }
  return invalid_argument("unknown reasoning parser '" + std::string(name) +
                          "' (valid: deepseek_r1, qwen3, deepseek_v3, glm45, seed_oss, minimax_m2, minimax_m2_append_think, "
                          "cohere_command3, cohere_command4, mistral, openai_gptoss, auto, none)");
}

bool prompt_closes_reasoning(std::string_view prompt, ReasoningKind kind) {
  while (!prompt.empty() && is_blank(prompt.back())) prompt.remove_suffix(1);
  return prompt.ends_with(reasoning_close_tag(kind));
}

ReasoningStart reasoning_start(ReasoningKind kind, std::string_view prompt) {
  const size_t open = prompt.rfind(reasoning_open_tag(kind));
  const bool open_in_prompt =
      open != std::string_view::npos && prompt.find(reasoning_close_tag(kind), open) == std::string_view::npos;
  if (open_in_prompt) return ReasoningStart::reasoning;
  if (kind == ReasoningKind::deepseek_r1 || kind == ReasoningKind::seed_oss || kind == ReasoningKind::minimax_append_think)
    return prompt_closes_reasoning(prompt, kind) ? ReasoningStart::content : ReasoningStart::reasoning;
  return ReasoningStart::maybe;
}

ReasoningSplitter::ReasoningSplitter(ReasoningKind kind, std::string_view prompt)
    : open_(reasoning_open_tag(kind)), close_(reasoning_close_tag(kind)) {
  BRIGADE_CHECK(kind != ReasoningKind::none && kind != ReasoningKind::openai_gptoss,
                "harmony output is split by a HarmonyParser");
  if (kind == ReasoningKind::minimax_append_think) {  // all content, `<think>` first
    state_ = State::content;
    held_ = open_;
    return;
  }
  if (kind == ReasoningKind::cohere_command) markers_.emplace(cohere::dropped_markers());
  switch (reasoning_start(kind, prompt)) {
    case ReasoningStart::maybe: state_ = State::maybe; break;
    case ReasoningStart::reasoning: state_ = State::reasoning; break;
    case ReasoningStart::content: state_ = State::content; break;
  }
}

ReasoningParse ReasoningSplitter::feed(std::string_view text) {
  ReasoningParse out;
  held_ += text;
  for (;;) {
    if (state_ == State::maybe || (state_ == State::reasoning && !released_)) {
      // Before anything is released: blanks, then perhaps `<think>` (dropped with them when the
      // block is already open: R1-0528 repeats the tag the template wrote).
      const size_t blanks = leading_blanks(held_);
      const std::string_view rest = std::string_view(held_).substr(blanks);
      if (rest.size() < open_.size() && open_.starts_with(rest)) return out;  // blanks or "<thi": wait
      if (rest.starts_with(open_)) {
        held_.erase(0, blanks + open_.size());
        state_ = State::reasoning;
        released_ = true;
        continue;
      }
      released_ = true;
      if (state_ == State::maybe) state_ = State::content;
      continue;
    }
    if (state_ == State::reasoning) {
      const size_t close = held_.find(close_);
      if (close != std::string::npos) {
        release(out.reasoning, std::string_view(held_).substr(0, close), /*flush=*/true);
        held_.erase(0, close + close_.size());
        state_ = State::content;
        continue;
      }
      const size_t keep = partial_tag_suffix(held_, close_);
      release(out.reasoning, std::string_view(held_).substr(0, held_.size() - keep));
      held_.erase(0, held_.size() - keep);
      return out;
    }
    release(out.content, held_);
    held_.clear();
    return out;
  }
}

ReasoningParse ReasoningSplitter::finish() {
  ReasoningParse out;
  release(state_ == State::reasoning ? out.reasoning : out.content, held_, /*flush=*/true);
  held_.clear();
  return out;
}

void ReasoningSplitter::release(std::string& field, std::string_view text, bool flush) {
  if (!markers_) {
    field.append(text);
    return;
  }
  field += markers_->feed(text);
  if (flush) field += markers_->flush();
}

}  // namespace brigade::server
