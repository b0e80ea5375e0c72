// The prefix cache's cost per page boundary a growing sequence crosses (SchedulerPolicy::
// cache_computed): the sequence's computed pages enter the RadixTree and its lock moves to their
// end. `FromRoot` inserts from the root and locks the new end then unlocks the old one (each
// crossing re-walks the whole path); `FromLockedNode` continues from the locked node
// (insert_from + move_lock), as the scheduler does. Args: sequence tokens, and 1 to also take
// the new pages' keys as write-through does. One iteration grows one sequence in a fresh tree;
// items are pages.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "kvstore/radix_tree.h"

namespace brigade {
namespace {

constexpr int kPageSize = 16;

template <bool kFromLockedNode>
void grow_sequence(benchmark::State& state) {
  const int n_pages = static_cast<int>(state.range(0)) / kPageSize;
  const bool write_through = state.range(1) != 0;
  std::vector<int32_t> tokens(static_cast<size_t>(n_pages) * kPageSize), pages(static_cast<size_t>(n_pages));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i * 7919 % 32000);
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<int32_t>(i);
  const std::span<const int32_t> all_tokens(tokens), all_pages(pages);
  for (auto _ : state) {
    RadixTree tree(kPageSize, EvictionPolicy::lru, root_key("bench"));
    RadixTree::NodeRef locked = nullptr;
    for (int n = 1; n <= n_pages; ++n) {
      const auto t = all_tokens.first(static_cast<size_t>(n) * kPageSize);
      const auto p = all_pages.first(static_cast<size_t>(n));
      RadixTree::NodeRef end = nullptr;
      if constexpr (kFromLockedNode) {
        benchmark::DoNotOptimize(tree.insert_from(locked, t, p, 0, &end));
        if (write_through) benchmark::DoNotOptimize(tree.path_keys(end, locked));
        tree.move_lock(locked, end);
      } else {
        benchmark::DoNotOptimize(tree.insert(t, p, 0, &end));
        if (write_through) benchmark::DoNotOptimize(tree.path_keys(end));
        tree.lock(end);
        tree.unlock(locked);
      }
      locked = end;
    }
    tree.unlock(locked);
  }
  state.SetItemsProcessed(state.iterations() * n_pages);
}

void BM_RadixGrowFromRoot(benchmark::State& state) { grow_sequence<false>(state); }
void BM_RadixGrowFromLockedNode(benchmark::State& state) { grow_sequence<true>(state); }

BENCHMARK(BM_RadixGrowFromRoot)->Args({2048, 0})->Args({2048, 1})->Args({8192, 0});
BENCHMARK(BM_RadixGrowFromLockedNode)->Args({2048, 0})->Args({2048, 1})->Args({8192, 0});

}  // namespace
}  // namespace brigade

BENCHMARK_MAIN();
