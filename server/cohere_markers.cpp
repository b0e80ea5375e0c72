#include "server/cohere_markers.h"

#include <algorithm>

namespace brigade::server::cohere {

const std::vector<std::string_view>& dropped_markers() {
  static const std::vector<std::string_view> markers = {
      kStartThinking, kEndThinking, "<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>",
      "<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>",
      "<|START_TOOL_RESULT|>", "<|END_TOOL_RESULT|>", "<BOS_TOKEN>", "<EOS_TOKEN>"};
  return markers;
}

std::string MarkerFilter::feed(std::string_view text) {
  held_.append(text);
  std::string out;
  for (;;) {
    if (newlines_) {
      const size_t n = held_.find_first_not_of('\n');
      held_.erase(0, n);  // all of it when npos
      if (n == std::string::npos) return out;
      newlines_ = false;
    }
    size_t at = std::string::npos, len = 0;
    for (std::string_view m : markers_) {
      const size_t p = held_.find(m);
      if (p < at) {
        at = p;
        len = m.size();
      }
    }
    if (at == std::string::npos) break;
    out.append(held_, 0, at);
    const std::string_view marker = std::string_view(held_).substr(at, len);
    newlines_ = std::find(newlines_after_.begin(), newlines_after_.end(), marker) != newlines_after_.end();
    held_.erase(0, at + len);
  }
  size_t keep = 0;  // the longest end of held_ that is a proper beginning of a marker
  for (std::string_view m : markers_) {
    for (size_t n = std::min(held_.size(), m.size() - 1); n > keep; --n) {
      if (std::string_view(held_).substr(held_.size() - n) == m.substr(0, n)) {
        keep = n;
        break;
      }
    }
  }
  out.append(held_, 0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string MarkerFilter::flush() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace brigade::server::cohere
