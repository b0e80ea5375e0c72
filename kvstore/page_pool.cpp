#include "kvstore/page_pool.h"

#include <algorithm>
#include <string>

namespace brigade {

PagePool::PagePool(int n_pages) : refs_(static_cast<size_t>(n_pages), 0) {
  BRIGADE_CHECK(n_pages >= 0, "page count is not negative");
  free_.reserve(static_cast<size_t>(n_pages));
  for (int i = n_pages - 1; i >= 0; --i) free_.push_back(i);
}

int PagePool::ref_count(int32_t page) const {
  BRIGADE_CHECK(page >= 0 && page < n_pages(), "page id inside the pool");
  return refs_[static_cast<size_t>(page)];
}

Expected<std::vector<int32_t>> PagePool::allocate(int n) {
  if (n < 0) return invalid_argument("cannot allocate a negative number of pages");
  if (!can_allocate(n)) {
    return out_of_resources("KV pool exhausted: " + std::to_string(n) + " pages requested, " +
                            std::to_string(n_free()) + " of " + std::to_string(n_pages()) + " free");
  }
  std::vector<int32_t> out(free_.end() - n, free_.end());
  free_.resize(free_.size() - static_cast<size_t>(n));
  for (int32_t p : out) refs_[static_cast<size_t>(p)] = 1;
  return out;
}

void PagePool::ref(std::span<const int32_t> pages) {
  for (int32_t p : pages) {
    BRIGADE_CHECK(ref_count(p) > 0, "only pages in use can be shared");
    ++refs_[static_cast<size_t>(p)];
  }
}

void PagePool::unref(std::span<const int32_t> pages) {
  for (int32_t p : pages) {
    BRIGADE_CHECK(ref_count(p) > 0, "a page is freed at most as often as it was referenced");
    if (--refs_[static_cast<size_t>(p)] == 0) free_.push_back(p);
  }
}

int BlockTable::pages_needed(int n_tokens) const {
  int need = (n_tokens + page_size_ - 1) / page_size_;
  return need > n_pages() ? need - n_pages() : 0;
}

int32_t BlockTable::slot(int pos) const {
  BRIGADE_CHECK(pos >= 0 && pos < capacity(), "position inside the sequence's pages");
  return pages_[static_cast<size_t>(pos / page_size_)] * page_size_ + pos % page_size_;
}

std::vector<int32_t> BlockTable::take_all() {
  std::vector<int32_t> out;
  out.swap(pages_);
  return out;
}

std::vector<int32_t> BlockTable::take_past(int n_tokens) {
  const size_t keep = static_cast<size_t>(std::max(0, (n_tokens + page_size_ - 1) / page_size_));
  if (keep >= pages_.size()) return {};
  std::vector<int32_t> out(pages_.begin() + static_cast<std::ptrdiff_t>(keep), pages_.end());
  pages_.resize(keep);
  return out;
}

}  // namespace brigade
