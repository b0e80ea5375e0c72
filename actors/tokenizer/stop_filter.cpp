#include "actors/tokenizer/stop_filter.h"

#include <algorithm>

namespace brigade {

StopFilter::StopFilter(std::vector<std::string> stops, bool include) : stops_(std::move(stops)), include_(include) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

size_t StopFilter::held_back() const {
  size_t best = 0;
  for (const auto& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > best; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        best = len;
        break;
      }
    }
  }
  return best;
}

std::string StopFilter::push(std::string_view text) {
  if (stopped_) return {};
  pending_.append(text);
  size_t cut = std::string::npos, stop_len = 0;
  for (const auto& s : stops_) {
    if (const size_t at = pending_.find(s); at < cut) {
      cut = at;
      stop_len = s.size();
    }
  }
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, cut + (include_ ? stop_len : 0));
    pending_.clear();
    return out;
  }
  const size_t keep = held_back();
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StopFilter::pass(std::string_view text) {
  if (stopped_) return {};
  std::string out;
  out.swap(pending_);
  out.append(text);
  return out;
}

std::string StopFilter::flush() {
  if (stopped_) return {};
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace brigade
