// CPU kernel benchmarks: matmul (GEMV/GEMM, f32 and bf16 weights; q8_0/q4_0/q4_1/q4_k/q5_k/q6_k/mxfp4 block-
// quantized weights at Llama-3-8B's shapes, beside bf16 at the same shapes) and decode attention
// (bf16 and int8 KV), and the tanh GELU at the scalar level (std::tanh) and the CPU's SIMD level
// (BM_GeluTanh: one thread, elements per second, 64K-float rows in L2 as a tower's MLP rows are).
//
// Counters: bytes_per_second = weight (or KV) bytes read per second; `roofline` = that rate over
// the machine's measured read bandwidth (cpu/membw.h), so 1.0 means the kernel reads memory as
// fast as a pure sum reduction does (values above 1 mean the data sat in cache); GFLOPS and
// `of_sgemm` = GFLOPS over the measured f32 sgemm ceiling, for the compute-bound (large n) cases.
// Threads: BRIGADE_BENCH_THREADS (default all hardware threads), also used for the bandwidth.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "core/quant.h"
#include "bench/bench_ceilings.h"
#include "core/thread_pool.h"
#include "cpu/cpu_backend.h"
#include "cpu/kernels.h"
#include "cpu/membw.h"
#include "cpu/openblas_core.h"

namespace brigade {
namespace {

using bench::bench_threads;
using bench::sgemm_gflops;

// Measured once per process: the denominator of every `roofline` counter.
double read_bandwidth_gbps() {
  static const double bw = [] {
    ThreadPool pool(bench_threads());
    return measure_read_bandwidth_gbps(pool);
  }();
  return bw;
}

double int8_gops() {
  static const double g = [] {
    ThreadPool pool(bench_threads());
    return measure_int8_gops(pool, 20);
  }();
  return g;
}

Backend& backend() {
  static auto b = make_cpu_backend({bench_threads()});
  return *b;
}

OwnedTensor zeroed_tensor(DType t, std::initializer_list<int64_t> dims) {
  Tensor shape(nullptr, t, dims);
  auto buf = backend().allocate(shape.nbytes());
  OwnedTensor o{std::move(*buf), shape};
  o.tensor.data = o.buffer.data();
  std::memset(o.tensor.data, 0, o.tensor.nbytes());
  return o;
}

OwnedTensor random_tensor(DType t, std::initializer_list<int64_t> dims, uint32_t seed) {
  OwnedTensor o = zeroed_tensor(t, dims);
  std::mt19937 rng(seed);
  if (is_block_quantized(t)) {  // random codes; every block's f16 scales set to small values
    for (size_t i = 0; i < o.tensor.nbytes(); ++i) static_cast<uint8_t*>(o.tensor.data)[i] = static_cast<uint8_t>(rng());
    const size_t bb = dtype_block_bytes(t), at = t == DType::q6_k ? 208 : 0;
    const uint16_t h = f32_to_f16(0.01f), m = f32_to_f16(-0.08f);
    for (size_t off = 0; off < o.tensor.nbytes(); off += bb) {
      if (t == DType::mxfp4) {  // the E8M0 scale: 2^(121 - 127), values up to 0.09
        static_cast<uint8_t*>(o.tensor.data)[off] = 121;
        continue;
      }
      std::memcpy(static_cast<char*>(o.tensor.data) + off + at, &h, 2);
      if (t == DType::q4_k || t == DType::q5_k) std::memcpy(static_cast<char*>(o.tensor.data) + off + 2, &h, 2);
      if (t == DType::q4_1) std::memcpy(static_cast<char*>(o.tensor.data) + off + 2, &m, 2);  // m = -8 d
    }
    return o;
  }
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (int64_t i = 0; i < o.tensor.numel(); ++i) {
    const float v = d(rng);
    if (t == DType::f32) o.tensor.as<float>()[i] = v;
    else if (t == DType::bf16) o.tensor.as<uint16_t>()[i] = f32_to_bf16(v);
    else o.tensor.as<uint16_t>()[i] = f32_to_f16(v);
  }
  return o;
}

// Args: n, m, k. Weights w [m, k] of dtype T.
template <DType T>
void BM_Matmul(benchmark::State& state) {
  const int64_t n = state.range(0), m = state.range(1), k = state.range(2);
  const double bw = read_bandwidth_gbps();
  sgemm_gflops();
  auto x = random_tensor(DType::f32, {n, k}, 1);
  auto w = random_tensor(T, {m, k}, 2);
  auto out = random_tensor(DType::f32, {n, m}, 3);
  for (auto _ : state) {
    backend().matmul(x.tensor, w.tensor, Tensor(), out.tensor);
    benchmark::DoNotOptimize(out.tensor.data);
  }
  const double iters = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(iters * static_cast<double>(w.tensor.nbytes())));
  state.counters["roofline"] = benchmark::Counter(
      iters * static_cast<double>(w.tensor.nbytes()) / (bw * 1e9), benchmark::Counter::kIsRate);
  state.counters["GFLOPS"] = benchmark::Counter(iters * 2.0 * n * m * k / 1e9, benchmark::Counter::kIsRate);
  // Fraction of the compute ceiling: what matters once n is large enough to be compute bound.
  state.counters["of_sgemm"] = benchmark::Counter(iters * 2.0 * n * m * k / 1e9 / sgemm_gflops(),
                                                  benchmark::Counter::kIsRate);
  // Block-quantized weights multiply in int8: the fraction of the int8 dot ceiling.
  if (is_block_quantized(T) && int8_gops() > 0.0)
    state.counters["of_int8"] = benchmark::Counter(iters * 2.0 * n * m * k / 1e9 / int8_gops(), benchmark::Counter::kIsRate);
}

void matmul_args(benchmark::internal::Benchmark* b) {
  for (int64_t n : {1, 8, 32, 48, 64, 96, 128, 512})
    for (auto [m, k] : {std::pair<int64_t, int64_t>{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}})
      b->Args({n, m, k});
  b->ArgNames({"n", "m", "k"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Matmul<DType::bf16>)->Apply(matmul_args);
BENCHMARK(BM_Matmul<DType::f32>)->Apply(matmul_args);
// Large n, as a vision tower's passes (SigLIP's fc1 over 4096 positions) and a long prefill chunk
// (Llama-3-8B's o_proj over 2048 tokens) run them: activations far beyond L2.
BENCHMARK(BM_Matmul<DType::bf16>)
    ->Name("BM_MatmulLargeN<bf16>")
    ->Args({4096, 4304, 1152})
    ->Args({2048, 4096, 4096})
    ->ArgNames({"n", "m", "k"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Llama-3-8B's projections (o_proj [4096, 4096], gate|up [28672, 4096] halved, down [4096, 14336]):
// weights far beyond the caches, so decode (small n) reads them from DRAM each call.
void big_matmul_args(benchmark::internal::Benchmark* b) {
  for (int64_t n : {1, 4, 16, 64})
    for (auto [m, k] : {std::pair<int64_t, int64_t>{4096, 4096}, {14336, 4096}, {4096, 14336}})
      b->Args({n, m, k});
  b->Args({512, 4096, 4096});  // prefill
  b->ArgNames({"n", "m", "k"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}
// GLM-4.5-Air's experts: gate / up [1408, 4096] (Q4_K_M: Q4_K) and down [4096, 1408] (1408 is not
// whole K-quant blocks: Q8_0), at the rows a 512-token prefill gives an expert (8 of 128 per token:
// 32 on average).
void expert_args(benchmark::internal::Benchmark* b, int64_t m, int64_t k) {
  for (int64_t n : {2, 4, 8, 16, 24, 32, 47, 64}) b->Args({n, m, k});
  b->ArgNames({"n", "m", "k"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_Matmul<DType::q4_k>)->Name("BM_MatmulExpert<q4_k>")->Apply([](auto* b) { expert_args(b, 1408, 4096); });
BENCHMARK(BM_Matmul<DType::q8_0>)->Name("BM_MatmulExpert<q8_0>")->Apply([](auto* b) { expert_args(b, 4096, 1408); });
BENCHMARK(BM_Matmul<DType::q4_0>)->Name("BM_MatmulExpert<q4_0>")->Apply([](auto* b) { expert_args(b, 1408, 4096); });
BENCHMARK(BM_Matmul<DType::mxfp4>)->Name("BM_MatmulExpert<mxfp4>")->Apply([](auto* b) { expert_args(b, 1408, 4096); });
BENCHMARK(BM_Matmul<DType::q6_k>)->Name("BM_MatmulExpert<q6_k>")->Apply([](auto* b) { expert_args(b, 1408, 4096); });
BENCHMARK(BM_Matmul<DType::bf16>)->Name("BM_Matmul8B<bf16>")->Apply(big_matmul_args);
BENCHMARK(BM_Matmul<DType::q8_0>)->Name("BM_Matmul8B<q8_0>")->Apply(big_matmul_args);
BENCHMARK(BM_Matmul<DType::q4_0>)->Name("BM_Matmul8B<q4_0>")->Apply(big_matmul_args);
BENCHMARK(BM_Matmul<DType::q4_1>)->Name("BM_Matmul8B<q4_1>")->Apply(big_matmul_args);
BENCHMARK(BM_Matmul<DType::mxfp4>)->Name("BM_Matmul8B<mxfp4>")->Apply(big_matmul_args);
BENCHMARK(BM_Matmul<DType::q4_k>)->Name("BM_Matmul8B<q4_k>")->Apply(big_matmul_args);
BENCHMARK(BM_Matmul<DType::q5_k>)->Name("BM_Matmul8B<q5_k>")->Apply(big_matmul_args);
BENCHMARK(BM_Matmul<DType::q6_k>)->Name("BM_Matmul8B<q6_k>")->Apply(big_matmul_args);

// A Q4_K_M file's q|k|v at Llama-3-8B's shape ([4096 + 1024 + 1024, 4096]: q|k Q4_K, v Q6_K in the
// layers llama.cpp gives more bits): `stacked` multiplies the parts as stored (matmul_stacked's
// two row groups), `q8_0` the whole projection requantized to q8_0 (what a fused load of mixed
// types makes where the backend cannot stack). Each call takes the next of enough copies to
// fill 256 MB, so the weights come from DRAM as a model's layers do (one 14-27 MB projection
// alone would sit in a large L3). Same counters as BM_Matmul, bytes as loaded.
void BM_QkvQ4KM(benchmark::State& state) {
  const int64_t n = state.range(0), k = 4096, qk = 4096 + 1024, v = 1024;
  const bool stacked = state.range(1) != 0;
  const double bw = read_bandwidth_gbps();
  auto x = random_tensor(DType::f32, {n, k}, 1);
  auto out = random_tensor(DType::f32, {n, qk + v}, 3);
  const size_t bytes = stacked ? dtype_bytes(DType::q4_k, qk * k) + dtype_bytes(DType::q6_k, v * k)
                               : dtype_bytes(DType::q8_0, (qk + v) * k);
  const size_t copies = (size_t{256} << 20) / bytes + 1;
  std::vector<OwnedTensor> ws;
  std::vector<std::vector<Tensor>> views(copies);
  for (size_t c = 0; c < copies; ++c) {
    const auto seed = static_cast<uint32_t>(2 + 2 * c);
    if (stacked) {
      ws.push_back(random_tensor(DType::q4_k, {qk, k}, seed));
      ws.push_back(random_tensor(DType::q6_k, {v, k}, seed + 1));
      views[c] = {ws[ws.size() - 2].tensor, ws.back().tensor};
    } else {
      ws.push_back(random_tensor(DType::q8_0, {qk + v, k}, seed));
      views[c] = {ws.back().tensor};
    }
  }
  size_t next = 0;
  for (auto _ : state) {
    backend().matmul_stacked(x.tensor, views[next], Tensor(), out.tensor);
    next = (next + 1) % copies;
    benchmark::DoNotOptimize(out.tensor.data);
  }
  const double iters = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(iters * static_cast<double>(bytes)));
  state.counters["roofline"] = benchmark::Counter(iters * static_cast<double>(bytes) / (bw * 1e9), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_QkvQ4KM)->ArgsProduct({{1, 4, 64}, {0, 1}})->ArgNames({"n", "stacked"})->UseRealTime()->Unit(benchmark::kMicrosecond);

// ALiBi slopes for n heads, 2^(-8 (h + 1) / n) (BLOOM's and MPT's for a power of two).
std::vector<float> alibi_slopes(int n) {
  std::vector<float> slopes(static_cast<size_t>(n));
  for (int h = 0; h < n; ++h) slopes[static_cast<size_t>(h)] = std::pow(2.0f, -8.0f * static_cast<float>(h + 1) / static_cast<float>(n));
  return slopes;
}

// Decode attention: n_seqs sequences of one query each over ctx cached tokens; 12 query heads
// (groups of 3) or 32 (TinyLlama's groups of 8) over 4 kv heads, head_dim 64, KV of dtype T (bf16, or int8 with one scale per token and kv head) in
// 16-token pages laid out in order. Bytes counted are the KV bytes read, scales included.
// Alibi: BLOOM's / MPT's ALiBi slopes on every head (AttentionMeta::alibi_slopes), to compare with
// the same shape without them.
template <DType T, bool Alibi = false>
void BM_AttentionDecode(benchmark::State& state) {
  const int n_seqs = static_cast<int>(state.range(0)), ctx = static_cast<int>(state.range(1));
  const QkvLayout l{static_cast<int>(state.range(2)), 4, 64};
  const int page = 16, blocks = (ctx + page - 1) / page, n_pages = n_seqs * blocks;
  const double bw = read_bandwidth_gbps();
  auto qkv = random_tensor(DType::f32, {n_seqs, l.row_width()}, 1);
  auto out = random_tensor(DType::f32, {n_seqs, l.q_width()}, 4);
  OwnedTensor k, v, k_scale, v_scale;
  if constexpr (T == DType::i8) {
    // Random K/V rows quantized by write_kv itself, so the scales are what a model would store.
    auto rows = random_tensor(DType::f32, {n_pages * page, l.row_width()}, 2);
    k = zeroed_tensor(DType::i8, {n_pages, page, l.n_kv_heads, l.head_dim});
    v = zeroed_tensor(DType::i8, {n_pages, page, l.n_kv_heads, l.head_dim});
    k_scale = zeroed_tensor(DType::f32, {n_pages, page, l.n_kv_heads});
    v_scale = zeroed_tensor(DType::f32, {n_pages, page, l.n_kv_heads});
    std::vector<int32_t> slots(static_cast<size_t>(n_pages * page));
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int32_t>(i);
    backend().write_kv(KvLayer{k.tensor, v.tensor, k_scale.tensor, v_scale.tensor}, rows.tensor, l,
                       Tensor(slots.data(), DType::i32, {n_pages * page}));
  } else {
    k = random_tensor(T, {n_pages, page, l.n_kv_heads, l.head_dim}, 2);
    v = random_tensor(T, {n_pages, page, l.n_kv_heads, l.head_dim}, 3);
  }
  const KvLayer cache{k.tensor, v.tensor, k_scale.tensor, v_scale.tensor};
  std::vector<int32_t> q_start(static_cast<size_t>(n_seqs + 1)), ctx_len(static_cast<size_t>(n_seqs), ctx),
      table(static_cast<size_t>(n_pages));
  for (int s = 0; s <= n_seqs; ++s) q_start[static_cast<size_t>(s)] = s;
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  AttentionMeta meta;
  meta.q_start = Tensor(q_start.data(), DType::i32, {n_seqs + 1});
  meta.ctx_len = Tensor(ctx_len.data(), DType::i32, {n_seqs});
  meta.block_table = Tensor(table.data(), DType::i32, {n_seqs, blocks});
  meta.n_seqs = n_seqs;
  meta.max_q_len = 1;
  meta.max_ctx_len = ctx;
  std::vector<float> slopes = alibi_slopes(l.n_heads);  // (Tensor views mutable data)
  if (Alibi) meta.alibi_slopes = Tensor(slopes.data(), DType::f32, {l.n_heads});
  for (auto _ : state) {
    backend().attention(qkv.tensor, l, cache, meta, 0.125f, out.tensor);
    benchmark::DoNotOptimize(out.tensor.data);
  }
  const double scale_bytes = T == DType::i8 ? 2.0 * n_seqs * ctx / page * l.n_kv_heads * 4.0 : 0.0;
  const double kv_bytes = 2.0 * n_seqs * ctx * l.kv_width() * static_cast<double>(dtype_size(T)) + scale_bytes;
  const double iters = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(iters * kv_bytes));
  state.counters["roofline"] = benchmark::Counter(iters * kv_bytes / (bw * 1e9), benchmark::Counter::kIsRate);
}
void attention_decode_args(benchmark::internal::Benchmark* b) {
  for (auto [seqs, ctx] : {std::pair{1, 1024}, {8, 1024}, {8, 2048}, {8, 4096}, {32, 512}}) b->Args({seqs, ctx, 12});
  b->Args({8, 1024, 32})->Args({32, 512, 32});
  b->ArgNames({"seqs", "ctx", "heads"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_AttentionDecode<DType::bf16>)->Apply(attention_decode_args);
BENCHMARK(BM_AttentionDecode<DType::i8>)->Apply(attention_decode_args);
BENCHMARK(BM_AttentionDecode<DType::bf16, true>)
    ->Name("BM_AttentionDecodeAlibi<bf16>")
    ->Args({8, 1024, 12})
    ->Args({8, 4096, 12})
    ->Args({32, 512, 32})
    ->ArgNames({"seqs", "ctx", "heads"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Prefill attention: one sequence's n-token prompt over itself (causal), TinyLlama's heads (32
// query heads over 4 kv heads, head_dim 64) and Llama-3-8B's (32 over 8, head_dim 128), bf16 KV
// in 16-token pages, as the engine's first chunk of a prompt runs it. Compute bound: GFLOPS
// counts QK^T and PV (2 * 2 * head_dim per visible query-key pair and head), of_sgemm is the
// fraction of the f32 GEMM rate measured in the same run. Alibi as BM_AttentionDecode's.
template <bool Alibi = false>
void BM_AttentionPrefill(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const QkvLayout l{32, static_cast<int>(state.range(1)), static_cast<int>(state.range(2))};
  const int page = 16, blocks = (n + page - 1) / page;
  auto qkv = random_tensor(DType::f32, {n, l.row_width()}, 1);
  auto out = random_tensor(DType::f32, {n, l.q_width()}, 4);
  auto k = random_tensor(DType::bf16, {blocks, page, l.n_kv_heads, l.head_dim}, 2);
  auto v = random_tensor(DType::bf16, {blocks, page, l.n_kv_heads, l.head_dim}, 3);
  const KvLayer cache{k.tensor, v.tensor, Tensor(), Tensor()};
  std::vector<int32_t> q_start = {0, n}, ctx_len = {n}, table(static_cast<size_t>(blocks));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  AttentionMeta meta;
  meta.q_start = Tensor(q_start.data(), DType::i32, {2});
  meta.ctx_len = Tensor(ctx_len.data(), DType::i32, {1});
  meta.block_table = Tensor(table.data(), DType::i32, {1, blocks});
  meta.n_seqs = 1;
  meta.max_q_len = n;
  meta.max_ctx_len = n;
  std::vector<float> slopes = alibi_slopes(l.n_heads);  // (Tensor views mutable data)
  if (Alibi) meta.alibi_slopes = Tensor(slopes.data(), DType::f32, {l.n_heads});
  const double gflop = 4.0 * l.head_dim * l.n_heads * (static_cast<double>(n) * (n + 1) / 2.0) / 1e9;
  sgemm_gflops();
  for (auto _ : state) {
    backend().attention(qkv.tensor, l, cache, meta, 0.125f, out.tensor);
    benchmark::DoNotOptimize(out.tensor.data);
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOPS"] = benchmark::Counter(iters * gflop, benchmark::Counter::kIsRate);
  state.counters["of_sgemm"] = benchmark::Counter(iters * gflop / sgemm_gflops(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionPrefill<true>)->Name("BM_AttentionPrefillAlibi")->Args({512, 4, 64})->Args({2048, 4, 64})
    ->ArgNames({"n", "kv_heads", "head_dim"})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionPrefill<>)->Name("BM_AttentionPrefill")->Args({512, 4, 64})->Args({2048, 4, 64})->Args({512, 8, 128})
    ->ArgNames({"n", "kv_heads", "head_dim"})->UseRealTime()->Unit(benchmark::kMicrosecond);

// Cost of one parallel_for whose chunks do nothing: the per-op hand-off paid ~100 times per
// decoded token. Arg: pause between calls in microseconds (0 = back to back, workers spinning;
// 200 = past the spin window, workers asleep on the condition variable).
void BM_ParallelForOverhead(benchmark::State& state) {
  ThreadPool pool(bench_threads());
  if (pool.size() < 2) {
    state.SkipWithError("needs at least 2 threads (BRIGADE_BENCH_THREADS)");
    return;
  }
  const auto pause = std::chrono::microseconds(state.range(0));
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    const auto until = std::chrono::steady_clock::now() + pause;
    while (std::chrono::steady_clock::now() < until) {
    }
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(pool.size(), 1, [&](int64_t b, int64_t, int) { sink.fetch_add(b, std::memory_order_relaxed); });
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
}
// Fixed iteration counts: the timed part is microseconds, so the pauses would otherwise run for
// minutes before manual time reaches the minimum.
BENCHMARK(BM_ParallelForOverhead)->Arg(0)->Arg(200)->ArgName("pause_us")->UseManualTime()->Iterations(5000);

void BM_ReadBandwidth(benchmark::State& state) {
  double gbps = 0;
  for (auto _ : state) gbps = read_bandwidth_gbps();
  state.counters["GBps"] = gbps;
  state.counters["sgemm_GFLOPS"] = sgemm_gflops();
  state.counters["int8_GOPS"] = int8_gops();
}
BENCHMARK(BM_ReadBandwidth)->Iterations(1);

// Kernels::gelu_tanh_mul over a 64K-element gate row at the level range(0) (0: scalar, else the
// CPU's best), one thread.
void BM_GeluTanh(benchmark::State& state) {
  const cpu::Kernels& kn = cpu::kernels_for(state.range(0) == 0 ? cpu::SimdLevel::scalar : cpu::detect_simd_level());
  constexpr int64_t n = 65536;
  std::vector<float> gate(n), up(n, 1.0f), out(n);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-6.0f, 6.0f);
  for (float& g : gate) g = u(rng);
  for (auto _ : state) {
    kn.gelu_tanh_mul(gate.data(), up.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetLabel(cpu::simd_level_name(kn.level));
}
BENCHMARK(BM_GeluTanh)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace brigade

// BENCHMARK_MAIN, after re-running with OpenBLAS's kernels for this CPU where it did not know it
// (cpu/openblas_core.h): the sgemm ceiling is then OpenBLAS's best here, not its SSE3 fallback.
int main(int argc, char** argv) {
  brigade::cpu::reexec_for_openblas_core(argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
