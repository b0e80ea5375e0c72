// HiCache tier throughput: pages per second into and out of the host tier, the RocksDB disk
// tier, and KvCache::read_page/write_page on the CPU backend. Arg: page bytes (a 1B-class model
// with 16-token pages in bf16 has ~256-512 KiB pages). The disk tier writes under
// $BRIGADE_BENCH_DIR (default: the system temp dir), which decides what is measured.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "cpu/cpu_backend.h"
#include "kvstore/disk_tier.h"
#include "kvstore/host_tier.h"
#include "kvstore/kv_layout.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

constexpr int kPages = 256;  // distinct pages cycled through

PageBytes random_page(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  PageBytes b(n);
  for (auto& x : b) x = static_cast<std::byte>(rng());
  return b;
}

fs::path bench_dir() {
  const char* env = std::getenv("BRIGADE_BENCH_DIR");
  return fs::path(env ? env : fs::temp_directory_path().string()) / ("brigade_bench_tiers_" + std::to_string(::getpid()));
}

void set_page_counters(benchmark::State& state, size_t page_bytes) {
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(page_bytes));
}

void BM_HostTierPutGet(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  HostTier host(n * kPages / 2);  // half fit: every put also evicts
  const PageBytes page = random_page(n, 1);
  uint64_t i = 0;
  for (auto _ : state) {
    auto evicted = host.put(PageKey{1, i % kPages}, page);
    benchmark::DoNotOptimize(evicted);
    benchmark::DoNotOptimize(host.get(PageKey{1, (i + kPages / 4) % kPages}));
    ++i;
  }
  set_page_counters(state, n);
}

void BM_DiskTierPut(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const fs::path dir = bench_dir();
  {
    auto disk = DiskTier::open(dir.string(), (n + 64) * kPages / 2, "bench");  // half fit: puts evict
    if (!disk) {
      state.SkipWithError(disk.status().to_string().c_str());
      return;
    }
    const PageBytes page = random_page(n, 2);
    uint64_t i = 0;
    for (auto _ : state) {
      if (!(*disk)->put(PageKey{2, i++}, page).is_ok()) state.SkipWithError("put failed");
    }
  }
  fs::remove_all(dir);
  set_page_counters(state, n);
}

void BM_DiskTierGet(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const fs::path dir = bench_dir();
  {
    auto disk = DiskTier::open(dir.string(), size_t{1} << 34, "bench");
    if (!disk) {
      state.SkipWithError(disk.status().to_string().c_str());
      return;
    }
    for (uint64_t i = 0; i < kPages; ++i) (void)(*disk)->put(PageKey{3, i}, random_page(n, i));
    uint64_t i = 0;
    for (auto _ : state) {
      auto got = (*disk)->get(PageKey{3, i++ % kPages});
      if (!got) state.SkipWithError("miss");
      benchmark::DoNotOptimize(got);
    }
  }
  fs::remove_all(dir);
  set_page_counters(state, n);
}

// KvCache page copy on the CPU backend, for a layout whose page is state.range(0) bytes.
void BM_KvCacheReadWritePage(benchmark::State& state) {
  auto backend = make_cpu_backend({1});
  KvLayout l;
  l.n_layers = 16;
  l.n_pages = 64;
  l.page_size = 16;
  l.n_kv_heads = 8;
  l.dtype = DType::bf16;
  l.head_dim = static_cast<int>(state.range(0) / (2 * 16 * 16 * 8 * 2));
  auto kv = KvCache::allocate(*backend, l);
  if (!kv) {
    state.SkipWithError(kv.status().to_string().c_str());
    return;
  }
  PageBytes buf(l.page_bytes());
  int32_t p = 0;
  for (auto _ : state) {
    (void)kv->read_page(*backend, p, buf);
    (void)kv->write_page(*backend, (p + 1) % l.n_pages, buf);
    p = (p + 2) % l.n_pages;
  }
  set_page_counters(state, l.page_bytes());
}

BENCHMARK(BM_HostTierPutGet)->Arg(64 << 10)->Arg(512 << 10);
BENCHMARK(BM_DiskTierPut)->Arg(64 << 10)->Arg(512 << 10)->UseRealTime();
BENCHMARK(BM_DiskTierGet)->Arg(64 << 10)->Arg(512 << 10)->UseRealTime();
BENCHMARK(BM_KvCacheReadWritePage)->Arg(128 << 10)->Arg(512 << 10);

}  // namespace
}  // namespace brigade

BENCHMARK_MAIN();
