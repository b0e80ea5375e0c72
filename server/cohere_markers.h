// Cohere Command R7B / Command A output, as their chat templates teach it: an optional plan or
// reasoning <|START_THINKING|>..<|END_THINKING|>, then calls <|START_ACTION|>[..]<|END_ACTION|>
// (server/tool_call_cohere.cpp) or an answer <|START_RESPONSE|>..<|END_RESPONSE|> (Command A
// Reasoning: <|START_TEXT|>..<|END_TEXT|>), then <|END_OF_TURN_TOKEN|> (the EOS, whose text the
// detokenizer never gives). Every marker is a special token of Cohere's tokenizer, so the server
// keeps special tokens' text while its parsers read this output (skip_special_tokens false, as
// vLLM's cohere parsers do), and removes the markers that are no part of the text (MarkerFilter).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace brigade::server::cohere {

inline constexpr std::string_view kStartThinking = "<|START_THINKING|>", kEndThinking = "<|END_THINKING|>",
                                  kStartAction = "<|START_ACTION|>", kEndAction = "<|END_ACTION|>";

// What is removed from content and reasoning: the thinking and answer markers, and the other chat
// markers of Cohere's tokenizer its templates write (turns, roles, tool results, BOS / EOS), which
// would show now that special tokens are kept. Not the action markers: the tool-call parser's.
const std::vector<std::string_view>& dropped_markers();

// Removes markers from text that comes in pieces, giving the same text however it is split. The
// markers must not be a beginning of one another. newlines_after: markers after which the newlines
// that follow are removed too (ERNIE 4.5's </response>); newlines_first: so are the text's leading
// newlines.
class MarkerFilter {
 public:
  explicit MarkerFilter(std::vector<std::string_view> markers, std::vector<std::string_view> newlines_after = {},
                        bool newlines_first = false)
      : markers_(std::move(markers)), newlines_after_(std::move(newlines_after)), newlines_(newlines_first) {}
  // The next piece; returns the text that may be released (an end that may begin a marker is held).
  std::string feed(std::string_view text);
  // Releases what is held: the text ended, or what follows it is no marker of this filter's.
  std::string flush();

 private:
  std::vector<std::string_view> markers_, newlines_after_;
  bool newlines_;  // newlines at the start of held_ are removed
  std::string held_;
};

}  // namespace brigade::server::cohere
