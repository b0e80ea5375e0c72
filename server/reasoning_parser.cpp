#include "server/reasoning_parser.h"

#include <algorithm>

#include "server/tool_call_parser_base.h"

namespace brigade::server {

namespace {


bool is_blank(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t leading_blanks(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_blank(s[i])) ++i;
  return i;
}

// Granite 3.2 (vLLM's granite): "Here is" or "Here's".
constexpr std::string_view kGraniteThink = "Here is my thought process:", kGraniteThink2 = "Here's my thought process:",
                           kGraniteResponse = "Here is my response:", kGraniteResponse2 = "Here's my response:";

// Gemma 4: the channel's label and its newline go with the tag (longest last: the splitter takes
// the last tag that matches).
constexpr std::string_view kGemmaChannel = "<|channel>", kGemmaThought = "<|channel>thought",
                           kGemmaThoughtLine = "<|channel>thought\n";

std::vector<std::string_view> open_tags(ReasoningKind kind) {
  if (kind == ReasoningKind::granite) return {kGraniteThink, kGraniteThink2};
  if (kind == ReasoningKind::gemma4) return {kGemmaChannel, kGemmaThought, kGemmaThoughtLine};
  return {reasoning_open_tag(kind)};
}
std::vector<std::string_view> close_tags(ReasoningKind kind) {
  if (kind == ReasoningKind::granite) return {kGraniteResponse, kGraniteResponse2};
  return {reasoning_close_tag(kind)};
}

}  // namespace

std::string_view reasoning_open_tag(ReasoningKind kind) {
  switch (kind) {
    case ReasoningKind::cohere_command: return cohere::kStartThinking;
    case ReasoningKind::mistral: return "[THINK]";
    case ReasoningKind::seed_oss: return "<seed:think>";
    case ReasoningKind::granite: return kGraniteThink;
    case ReasoningKind::hunyuan_a13b: return "<think>\n";
    case ReasoningKind::gemma4: return kGemmaChannel;
    default: return "<think>";
  }
}
std::string_view reasoning_close_tag(ReasoningKind kind) {
  switch (kind) {
    case ReasoningKind::cohere_command: return cohere::kEndThinking;
    case ReasoningKind::mistral: return "[/THINK]";
    case ReasoningKind::seed_oss: return "</seed:think>";
    case ReasoningKind::granite: return kGraniteResponse;
    case ReasoningKind::hunyuan_a13b: return "\n</think>\n<answer>\n";
    case ReasoningKind::gemma4: return "<channel|>";
    default: return "</think>";
  }
}

Expected<ReasoningKind> parse_reasoning_kind(std::string_view name, const ReasoningVocab& vocab) {
  std::string n(name);
  std::replace(n.begin(), n.end(), '-', '_');
  if (n == "none" || n.empty()) return ReasoningKind::none;
  if (n == "deepseek_r1" || n == "minimax_m2") return ReasoningKind::deepseek_r1;
  if (n == "minimax_m2_append_think") return ReasoningKind::minimax_append_think;
  if (n == "qwen3" || n == "deepseek_v3" || n == "glm45" || n == "glm47" || n == "mimo") return ReasoningKind::qwen3;
  if (n == "granite") return ReasoningKind::granite;
  if (n == "hunyuan_a13b") return ReasoningKind::hunyuan_a13b;
  if (n == "ernie45") return ReasoningKind::ernie45;
  if (n == "openai_gptoss") return ReasoningKind::openai_gptoss;
  if (n == "seed_oss") return ReasoningKind::seed_oss;
  if (n == "cohere_command3" || n == "cohere_command4") return ReasoningKind::cohere_command;
  if (n == "mistral") return ReasoningKind::mistral;
  if (n == "gemma4") return ReasoningKind::gemma4;
  if (n == "auto") {
    if (vocab.harmony_channel) return ReasoningKind::openai_gptoss;
    if (vocab.gemma_channel) return ReasoningKind::gemma4;
    if (vocab.think_close) return ReasoningKind::qwen3;
    if (vocab.seed_close) return ReasoningKind::seed_oss;
    if (vocab.cohere_close) return ReasoningKind::cohere_command;
    return vocab.mistral_close ? ReasoningKind::mistral : ReasoningKind::none;
  }
  return invalid_argument("unknown reasoning parser '" + std::string(name) +
                          "' (valid: deepseek_r1, qwen3, deepseek_v3, glm45, glm47, mimo, seed_oss, minimax_m2, "
                          "minimax_m2_append_think, cohere_command3, cohere_command4, mistral, granite, hunyuan_a13b, "
                          "ernie45, gemma4, openai_gptoss, auto, none)");
}

bool prompt_closes_reasoning(std::string_view prompt, ReasoningKind kind) {
  while (!prompt.empty() && is_blank(prompt.back())) prompt.remove_suffix(1);
  return prompt.ends_with(reasoning_close_tag(kind));
}

ReasoningStart reasoning_start(ReasoningKind kind, std::string_view prompt) {
  if (kind == ReasoningKind::granite) return ReasoningStart::maybe;  // plain text: the prompt may quote it
  const size_t open = prompt.rfind(reasoning_open_tag(kind));
  const bool open_in_prompt =
      open != std::string_view::npos && prompt.find(reasoning_close_tag(kind), open) == std::string_view::npos;
  if (open_in_prompt) return ReasoningStart::reasoning;
  if (kind == ReasoningKind::deepseek_r1 || kind == ReasoningKind::seed_oss ||
      kind == ReasoningKind::minimax_append_think || kind == ReasoningKind::ernie45)
    return prompt_closes_reasoning(prompt, kind) ? ReasoningStart::content : ReasoningStart::reasoning;
  return ReasoningStart::maybe;
}

ReasoningSplitter::ReasoningSplitter(ReasoningKind kind, std::string_view prompt)
    : opens_(open_tags(kind)), closes_(close_tags(kind)) {
  BRIGADE_CHECK(kind != ReasoningKind::none && kind != ReasoningKind::openai_gptoss,
                "harmony output is split by a HarmonyParser");
  if (kind == ReasoningKind::minimax_append_think) {  // all content, `<think>` first
    state_ = State::content;
    held_ = opens_[0];
    return;
  }
  if (kind == ReasoningKind::cohere_command) markers_.emplace(cohere::dropped_markers());
  if (kind == ReasoningKind::hunyuan_a13b) answer_markers_.emplace(std::vector<std::string_view>{"\n</answer>"});
  if (kind == ReasoningKind::ernie45)
    answer_markers_.emplace(std::vector<std::string_view>{"<response>", "</response>"},
                            std::vector<std::string_view>{"</response>"}, /*newlines_first=*/true);
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
      bool partial = false;
      std::string_view open;
      for (std::string_view tag : opens_) {
        if (rest.starts_with(tag)) open = tag;
        partial = partial || (rest.size() < tag.size() && tag.starts_with(rest));
      }
      if (partial && !ended_) return out;  // blanks or "<thi": wait
      if (!open.empty()) {
        held_.erase(0, blanks + open.size());
        state_ = State::reasoning;
        released_ = true;
        continue;
      }
      released_ = true;
      if (state_ == State::maybe) state_ = State::content;
      continue;
    }
    if (state_ == State::reasoning) {
      const auto [close, close_size] = tool_parse::find_first(held_, closes_);
      if (close != std::string::npos) {
        release(out, true, std::string_view(held_).substr(0, close), /*flush=*/true);
        held_.erase(0, close + close_size);
        state_ = State::content;
        continue;
      }
      const size_t keep = tool_parse::partial_marker(held_, closes_);
      release(out, true, std::string_view(held_).substr(0, held_.size() - keep));
      held_.erase(0, held_.size() - keep);
      return out;
    }
    release(out, false, held_);
    held_.clear();
    return out;
  }
}

ReasoningParse ReasoningSplitter::finish() {
  ended_ = true;  // a tag held as the beginning of a longer one (Gemma 4's) is read as it stands
  ReasoningParse out = feed("");
  release(out, state_ == State::reasoning, held_, /*flush=*/true);
  held_.clear();
  if (answer_markers_) out.content += answer_markers_->flush();
  return out;
}

void ReasoningSplitter::release(ReasoningParse& out, bool reasoning, std::string_view text, bool flush) {
  std::string& field = reasoning ? out.reasoning : out.content;
  if (!reasoning && answer_markers_) {
    field += answer_markers_->feed(text);
    return;
  }
  if (!markers_) {
    field.append(text);
    return;
  }
  field += markers_->feed(text);
  if (flush) field += markers_->flush();
}

}  // namespace brigade::server
