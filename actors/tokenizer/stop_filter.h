// StopFilter: cuts a streamed text at the first stop string, never streaming any part of one.
//
// Text arrives in pieces; push() returns what is safe to show now. A tail that could still
// grow into a stop string is held back until it either completes one (stopped() becomes true
// and the text before it is returned) or cannot (it is released).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace brigade {

class StopFilter {
 public:
  // include: the stop string that ends the text is returned with it (vLLM's include_stop_str_in_output).
  explicit StopFilter(std::vector<std::string> stops, bool include = false);

  std::string push(std::string_view text);
  // Text that no stop string may match (the output before min_tokens): returned as it is, after
  // any held-back tail; matching starts again with the next push().
  std::string pass(std::string_view text);
  // End of stream without a stop: releases the held-back tail.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  // Length of the longest suffix of pending_ that is a proper prefix of some stop string.
  size_t held_back() const;

  std::vector<std::string> stops_;
  bool include_ = false;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace brigade
