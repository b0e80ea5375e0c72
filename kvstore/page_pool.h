// PagePool: allocation and reference counts of the pages of one KV pool.
//
// Pages are identified by ids in [0, n_pages). A page is free when its count is 0. Allocation
// is all-or-nothing: when fewer than n pages are free, nothing is taken and the error says how
// many were asked and how many are free. Not thread-safe: one owner (the KV page manager).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace brigade {

class PagePool {
 public:
  explicit PagePool(int n_pages);

  int n_pages() const { return static_cast<int>(refs_.size()); }
  int n_free() const { return static_cast<int>(free_.size()); }
  int n_used() const { return n_pages() - n_free(); }
  int ref_count(int32_t page) const;

  bool can_allocate(int n) const { return n >= 0 && n <= n_free(); }
  // n pages with count 1 each, or out_of_resources.
  Expected<std::vector<int32_t>> allocate(int n);
  // Adds one reference to each page (sharing a prefix); every page must be in use.
  void ref(std::span<const int32_t> pages);
  // Drops one reference from each page; a page whose count reaches 0 is free again.
  void unref(std::span<const int32_t> pages);

 private:
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;  // stack of free page ids; lowest ids handed out first
};

// The pages of one sequence in order: page i holds KV positions [i*page_size, (i+1)*page_size).
class BlockTable {
 public:
  explicit BlockTable(int page_size) : page_size_(page_size) {}

  int page_size() const { return page_size_; }
  const std::vector<int32_t>& pages() const { return pages_; }
  int n_pages() const { return static_cast<int>(pages_.size()); }
  int capacity() const { return n_pages() * page_size_; }  // tokens that fit
  // Pages to add so that n_tokens fit.
  int pages_needed(int n_tokens) const;
  void append(std::span<const int32_t> pages) { pages_.insert(pages_.end(), pages.begin(), pages.end()); }
  // KV slot of position pos: page id * page_size + offset.
  int32_t slot(int pos) const;
  // Releases the pages; the caller returns them to their pool.
  std::vector<int32_t> take_all();
  // Releases the pages wholly past the first n_tokens positions (rejected speculative tokens'
  // slots); the caller returns them to their pool.
  std::vector<int32_t> take_past(int n_tokens);

 private:
  int page_size_;
  std::vector<int32_t> pages_;
};

}  // namespace brigade
