// The MLA ops against plain references in double: head_matmul (decode rows and BLAS-sized
// prefills, f32 and bf16 weights), write_mla_kv (the latent then k_pe in each slot's row, skipped
// slots untouched) and mla_attention over shuffled pages (decode rows, a prefill chunk over a
// cached prefix, f32 and bf16 caches), at every SIMD level.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "cpu/ops.h"
#include "tests/cpu/cpu_test_util.h"

namespace brigade {
namespace {

using test::backend_at;
using test::fill_uniform;
using test::get;
using test::make;
using test::simd_levels;

TEST(CpuMla, HeadMatmulIsAMatmulPerHead) {
  std::mt19937 rng(3);
  const int heads = 3;
  const int64_t a = 20, b = 12;
  for (const std::string& level : simd_levels()) {
    auto be = backend_at(level);
    for (const DType wt : {DType::f32, DType::bf16}) {
      for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{60}}) {  // decode kernels and the BLAS path
        SCOPED_TRACE(testing::Message() << level << " " << dtype_name(wt) << " n=" << n);
        auto x = make(*be, DType::f32, {n, heads * a});
        auto w = make(*be, wt, {heads * b, a});
        auto out = make(*be, DType::f32, {n, heads * b});
        fill_uniform(x.tensor, rng);
        fill_uniform(w.tensor, rng);
        be->head_matmul(x.tensor, w.tensor, heads, out.tensor);
        for (int64_t t = 0; t < n; ++t)
          for (int h = 0; h < heads; ++h)
            for (int64_t j = 0; j < b; ++j) {
              double want = 0.0;
              for (int64_t i = 0; i < a; ++i) want += get(w.tensor, (h * b + j) * a + i) * get(x.tensor, t * heads * a + h * a + i);
              ASSERT_NEAR(get(out.tensor, t * heads * b + h * b + j), want, 1e-4) << "t " << t << " h " << h << " j " << j;
            }
      }
    }
  }
}

struct Seq {
  int n_q, ctx;
};

// One call of write_mla_kv + mla_attention for `seqs` with pages in a shuffled order, checked
// against softmax(scale (q_lat · c + q_pe · k_pe)) · c in double.
void check_attention(Backend& be, DType kv_t, const std::vector<Seq>& seqs, std::mt19937& rng) {
  const int heads = 4, r = 32, dr = 8, w = r + dr, page = 4;
  int n = 0, max_blocks = 0, n_pages = 0;
  for (const Seq& s : seqs) n += s.n_q, max_blocks = std::max(max_blocks, (s.ctx + page - 1) / page), n_pages += (s.ctx + page - 1) / page;
  auto cache = make(be, kv_t, {n_pages, page, 1, w});
  KvLayer layer{cache.tensor, Tensor(), Tensor(), Tensor()};
  std::vector<int32_t> pages(static_cast<size_t>(n_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  auto table = make(be, DType::i32, {static_cast<int64_t>(seqs.size()), max_blocks});
  auto q_start = make(be, DType::i32, {static_cast<int64_t>(seqs.size()) + 1});
  auto ctx_len = make(be, DType::i32, {static_cast<int64_t>(seqs.size())});
  int used = 0, row = 0;
  // Every context position gets a latent row: the cached prefix written first, then the step's.
  int total = 0;
  for (const Seq& s : seqs) total += s.ctx;
  auto latent = make(be, DType::f32, {total, r});
  auto k_pe = make(be, DType::f32, {total, dr});
  auto slots = make(be, DType::i32, {total});
  fill_uniform(latent.tensor, rng);
  fill_uniform(k_pe.tensor, rng);
  int at = 0;
  for (size_t si = 0; si < seqs.size(); ++si) {
    const Seq& s = seqs[si];
    q_start.tensor.as<int32_t>()[si] = row;
    ctx_len.tensor.as<int32_t>()[si] = s.ctx;
    for (int b = 0; b < (s.ctx + page - 1) / page; ++b) table.tensor.as<int32_t>()[si * static_cast<size_t>(max_blocks) + static_cast<size_t>(b)] = pages[static_cast<size_t>(used + b)];
    for (int p = 0; p < s.ctx; ++p) slots.tensor.as<int32_t>()[at++] = pages[static_cast<size_t>(used + p / page)] * page + p % page;
    used += (s.ctx + page - 1) / page;
    row += s.n_q;
  }
  q_start.tensor.as<int32_t>()[seqs.size()] = row;
  be.write_mla_kv(layer, latent.tensor, k_pe.tensor, slots.tensor);
  auto q_lat = make(be, DType::f32, {n, heads * r});
  auto q_pe = make(be, DType::f32, {n, heads * dr});
  auto out = make(be, DType::f32, {n, heads * r});
  fill_uniform(q_lat.tensor, rng);
  fill_uniform(q_pe.tensor, rng);
  AttentionMeta meta;
  meta.q_start = q_start.tensor;
  meta.ctx_len = ctx_len.tensor;
  meta.block_table = table.tensor;
  meta.n_seqs = static_cast<int>(seqs.size());
  for (const Seq& s : seqs) meta.max_q_len = std::max(meta.max_q_len, s.n_q), meta.max_ctx_len = std::max(meta.max_ctx_len, s.ctx);
  const float scale = 0.3f;
  be.mla_attention(q_lat.tensor, q_pe.tensor, MlaLayout{heads, r, dr}, layer, meta, scale, out.tensor);
  const double tol = kv_t == DType::f32 ? 2e-5 : 2e-2;  // bf16 rounds the cached latent
  int first = 0, base = 0;
  for (const Seq& s : seqs) {
    for (int j = 0; j < s.n_q; ++j) {
      const int t = first + j, pos = s.ctx - s.n_q + j;
      for (int h = 0; h < heads; ++h) {
        std::vector<double> score(static_cast<size_t>(pos + 1));
        for (int p = 0; p <= pos; ++p) {
          double d = 0.0;
          for (int i = 0; i < r; ++i) d += get(q_lat.tensor, (t * heads + h) * r + i) * get(latent.tensor, (base + p) * r + i);
          for (int i = 0; i < dr; ++i) d += get(q_pe.tensor, (t * heads + h) * dr + i) * get(k_pe.tensor, (base + p) * dr + i);
          score[static_cast<size_t>(p)] = scale * d;
        }
        const double mx = *std::max_element(score.begin(), score.end());
        double sum = 0.0;
        for (double& v : score) sum += (v = std::exp(v - mx));
        for (int i = 0; i < r; ++i) {
          double want = 0.0;
          for (int p = 0; p <= pos; ++p) want += score[static_cast<size_t>(p)] / sum * get(latent.tensor, (base + p) * r + i);
          ASSERT_NEAR(get(out.tensor, (t * heads + h) * r + i), want, tol) << "row " << t << " head " << h << " dim " << i;
        }
      }
    }
    first += s.n_q;
    base += s.ctx;
  }
}

TEST(CpuMla, AttentionOverTheLatentCache) {
  std::mt19937 rng(5);
  for (const std::string& level : simd_levels()) {
    auto be = backend_at(level);
    for (const DType kv_t : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(testing::Message() << level << " " << dtype_name(kv_t));
      check_attention(*be, kv_t, {{1, 9}, {1, 1}, {1, 16}}, rng);  // decode rows
      check_attention(*be, kv_t, {{5, 13}, {1, 7}, {20, 20}}, rng); // a chunk over a cached prefix, a decode, a prefill
    }
  }
}

TEST(CpuMla, WriteSkipsNegativeSlots) {
  auto be = backend_at("scalar", 1);
  const int r = 4, dr = 2;
  auto cache = make(*be, DType::f32, {2, 2, 1, r + dr});
  std::fill_n(cache.tensor.as<float>(), cache.tensor.numel(), -7.0f);
  auto latent = make(*be, DType::f32, {2, r});
  auto k_pe = make(*be, DType::f32, {2, dr});
  auto slots = make(*be, DType::i32, {2});
  for (int i = 0; i < 2 * r; ++i) latent.tensor.as<float>()[i] = static_cast<float>(i);
  for (int i = 0; i < 2 * dr; ++i) k_pe.tensor.as<float>()[i] = 100.0f + static_cast<float>(i);
  slots.tensor.as<int32_t>()[0] = 3;
  slots.tensor.as<int32_t>()[1] = -1;
  be->write_mla_kv(KvLayer{cache.tensor, Tensor(), Tensor(), Tensor()}, latent.tensor, k_pe.tensor, slots.tensor);
  const float* row = cache.tensor.as<float>() + 3 * (r + dr);
  EXPECT_EQ(std::vector<float>(row, row + r + dr), (std::vector<float>{0, 1, 2, 3, 100, 101}));
  for (int s = 0; s < 3; ++s) EXPECT_EQ(cache.tensor.as<float>()[s * (r + dr)], -7.0f) << "slot " << s << " untouched";
}

}  // namespace
}  // namespace brigade
