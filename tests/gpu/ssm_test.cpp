// The CUDA state-space ops (gpu/ssm.cu) against the CPU backend's (cpu/ssm_ops.cpp) on fresh
// random inputs, over two steps of several sequences: the first with prompts of different
// lengths, fresh states but one continued from a random state, and snapshots (SsmSeqs::save_rows)
// into spare slots; the second with decode rows and a short chunk, one sequence continuing from
// a snapshot's slot. Outputs within bf16 tolerance; the states in every slot (sequences', the
// snapshots', untouched ones) within f32 rounding of the scan's order of operations.
#include <numeric>

#include "tests/gpu/gpu_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

constexpr int64_t kSlots = 8;
constexpr double kStateTol = 1e-4;  // both scans in f32 from the same values; only exp and order differ

struct StepPlan {
  std::vector<int32_t> lens, slots, fresh, save_rows, save_slots;  // save_*: empty for none
  int64_t rows() const { return std::accumulate(lens.begin(), lens.end(), int64_t{0}); }
};

// Prompts of 5, 1, 17 and 3 rows into slots 2, 0, 5 and 3 (slot 3 continues a random state),
// snapshots after 3 rows of the first and 9 of the third into slots 6 and 7; then decode rows and
// a 4-row chunk, the third sequence continuing from slot 6 (the first's snapshot).
std::vector<StepPlan> two_steps() {
  return {StepPlan{{5, 1, 17, 3}, {2, 0, 5, 3}, {1, 1, 1, 0}, {3, 0, 9, 0}, {6, -1, 7, -1}},
          StepPlan{{1, 1, 4, 1}, {2, 0, 6, 3}, {0, 0, 0, 0}, {}, {}}};
}

// A step's SsmSeqs on one backend, with the tensors it points into.
struct Seqs {
  OwnedTensor q_start, slots, fresh, save_rows, save_slots;
  SsmSeqs view;
};

Seqs make_seqs(Backend& b, const StepPlan& p) {
  const int64_t n = static_cast<int64_t>(p.lens.size());
  std::vector<int32_t> q(p.lens.size() + 1, 0);
  std::partial_sum(p.lens.begin(), p.lens.end(), q.begin() + 1);
  Seqs s;
  s.q_start = put_i32(b, {n + 1}, q);
  s.slots = put_i32(b, {n}, p.slots);
  s.fresh = put_i32(b, {n}, p.fresh);
  s.view = SsmSeqs{s.q_start.tensor, s.slots.tensor, s.fresh.tensor, static_cast<int>(n)};
  if (!p.save_rows.empty()) {
    s.save_rows = put_i32(b, {n}, p.save_rows);
    s.save_slots = put_i32(b, {n}, p.save_slots);
    s.view.save_rows = s.save_rows.tensor;
    s.view.save_slots = s.save_slots.tensor;
  }
  return s;
}

// Activations on `b` (f32 on the CPU, bf16 on the GPU) from the same bf16-rounded values.
OwnedTensor act(Backend& b, int64_t n, int64_t d, const std::vector<float>& v) {
  return put(b, b.activation_dtype(), {n, d}, v);
}
OwnedTensor act_out(Backend& b, int64_t n, int64_t d) { return empty(b, b.activation_dtype(), {n, d}); }
OwnedTensor f32(Backend& b, int64_t n, const std::vector<float>& v) { return put(b, DType::f32, {n}, v); }

// A state tensor [kSlots, row] on each backend, every slot random (fresh sequences must ignore it).
std::pair<OwnedTensor, OwnedTensor> states(std::mt19937& rng, int64_t row) {
  const auto v = random_values(rng, kSlots * row);
  return {put(cpu(), DType::f32, {kSlots, row}, v), put(*gpu(), DType::f32, {kSlots, row}, v)};
}

// `c` on the CPU, `g` on the GPU.
template <class T>
const T& side(const Backend& b, const T& c, const T& g) {
  return &b == &cpu() ? c : g;
}
const Tensor& side(const Backend& b, const std::pair<OwnedTensor, OwnedTensor>& s) {
  return side(b, s.first, s.second).tensor;
}

// Runs `op(backend, seqs, n, out)` (out [n, out_width] activations) for each step of two_steps()
// on both backends; after each, out within bf16 tolerance and every slot of `st` within
// `state_tol` of the CPU's.
template <class Op>
void over_two_steps(int64_t out_width, const std::pair<OwnedTensor, OwnedTensor>& st, double state_tol, Op op) {
  int step = 0;
  for (const StepPlan& plan : two_steps()) {
    SCOPED_TRACE(testing::Message() << "step " << step++);
    const int64_t n = plan.rows();
    const Seqs sc = make_seqs(cpu(), plan), sg = make_seqs(*gpu(), plan);
    const OwnedTensor oc = act_out(cpu(), n, out_width), og = act_out(*gpu(), n, out_width);
    op(cpu(), sc.view, n, oc.tensor);
    op(*gpu(), sg.view, n, og.tensor);
    EXPECT_LT(rel_error(get(*gpu(), og.tensor), get(cpu(), oc.tensor)), kBf16Tol);
    EXPECT_LT(rel_error(get(*gpu(), st.second.tensor), get(cpu(), st.first.tensor)), state_tol);
  }
}

TEST(GpuSsm, ConvMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(41);
  for (const int64_t k : {4, 2}) {
    for (const bool with_bias : {true, false}) {
      SCOPED_TRACE(testing::Message() << "kernel " << k << " bias " << with_bias);
      const int64_t ch = 200, col = 24, width = col + ch + 10;  // channels not a multiple of the block
      const auto w = random_values(rng, ch * k), bias = random_values(rng, ch);
      const auto wc = put(cpu(), DType::f32, {ch, k}, w), wg = put(*gpu(), DType::f32, {ch, k}, w);
      const auto bc = f32(cpu(), ch, bias), bg = f32(*gpu(), ch, bias);
      const auto st = states(rng, (k - 1) * ch);
      std::vector<float> in;
      over_two_steps(ch, st, 1e-6, [&](Backend& b, const SsmSeqs& seqs, int64_t n, const Tensor& out) {
        if (&b == &cpu()) in = random_values(rng, n * width, -2, 2);  // the GPU takes the same
        b.ssm_conv(act(b, n, width, in).tensor, col, side(b, wc, wg).tensor,
                   with_bias ? side(b, bc, bg).tensor : Tensor(), seqs, side(b, st), out);
      });  // the state: the last inputs, copied
    }
  }
}

TEST(GpuSsm, ShortConvMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(42);
  const int64_t ch = 160, k = 3;
  const auto w = random_values(rng, ch * k), bias = random_values(rng, ch);
  const auto wc = put(cpu(), DType::f32, {ch, k}, w), wg = put(*gpu(), DType::f32, {ch, k}, w);
  const auto bc = f32(cpu(), ch, bias), bg = f32(*gpu(), ch, bias);
  const auto st = states(rng, (k - 1) * ch);
  std::vector<float> in;
  over_two_steps(ch, st, 1e-6, [&](Backend& b, const SsmSeqs& seqs, int64_t n, const Tensor& out) {
    if (&b == &cpu()) in = random_values(rng, n * 3 * ch, -2, 2);
    b.short_conv(act(b, n, 3 * ch, in).tensor, side(b, wc, wg).tensor, side(b, bc, bg).tensor, seqs, side(b, st), out);
  });  // the state: products of the same two values
}

// -exp of n values in [0, 1.5): a decay rate (A = -exp(A_log)).
std::vector<float> negative_rates(std::mt19937& rng, int64_t n) {
  std::vector<float> a = random_values(rng, n, 0.0f, 1.5f);
  for (float& v : a) v = -std::exp(v);
  return a;
}

struct ScanCase {
  SsmLayout l;
  bool norm;
  float dt_max;
};

TEST(GpuSsm, Mamba2ScanMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(43);
  // A small odd shape (state_size not a multiple of 32, two groups) and Mamba2-1.3b's head shape.
  for (const ScanCase c : {ScanCase{{4, 16, 2, 24, 4}, true, 0.0f}, ScanCase{{4, 16, 2, 24, 4}, false, 0.5f},
                           ScanCase{{8, 64, 1, 128, 4}, true, 0.0f}}) {
    const SsmLayout& l = c.l;
    SCOPED_TRACE(testing::Message() << "H " << l.n_heads << " P " << l.head_dim << " G " << l.n_groups << " N "
                                    << l.state_size << " norm " << c.norm << " dt_max " << c.dt_max);
    const int64_t h = l.n_heads, di = l.d_inner(), ch = l.conv_dim(), pw = l.proj_width();
    const auto a = negative_rates(rng, h);
    const auto d = random_values(rng, h), dt_bias = random_values(rng, h), nw = random_values(rng, di, 0.5f, 1.5f);
    OwnedTensor ac = f32(cpu(), h, a), ag = f32(*gpu(), h, a), dc = f32(cpu(), h, d), dg = f32(*gpu(), h, d);
    OwnedTensor tc = f32(cpu(), h, dt_bias), tg = f32(*gpu(), h, dt_bias), nc = f32(cpu(), di, nw), ng = f32(*gpu(), di, nw);
    const SsmParams pc{ac.tensor, dc.tensor, tc.tensor, 0.001f, c.dt_max, c.norm ? nc.tensor : Tensor(), 1e-5f};
    const SsmParams pg{ag.tensor, dg.tensor, tg.tensor, 0.001f, c.dt_max, c.norm ? ng.tensor : Tensor(), 1e-5f};
    const auto st = states(rng, di * l.state_size);
    std::vector<float> proj, xbc;
    over_two_steps(di, st, kStateTol, [&](Backend& b, const SsmSeqs& seqs, int64_t n, const Tensor& out) {
      if (&b == &cpu()) {
        proj = random_values(rng, n * pw, -2, 2);
        xbc = random_values(rng, n * ch);
      }
      b.ssm_scan(act(b, n, pw, proj).tensor, act(b, n, ch, xbc).tensor, l, side(b, pc, pg), seqs, side(b, st), out);
    });
  }
}

TEST(GpuSsm, Mamba1ScanMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(44);
  for (const int64_t ns : {16, 40}) {
    SCOPED_TRACE(testing::Message() << "N " << ns);
    const int64_t dim = 80, z_col = 80, zw = 2 * dim;  // channels not a multiple of the block's 32
    const auto a = negative_rates(rng, dim * ns), skip = random_values(rng, dim);
    const auto ac = put(cpu(), DType::f32, {dim, ns}, a), ag = put(*gpu(), DType::f32, {dim, ns}, a);
    const auto sc = f32(cpu(), dim, skip), sg = f32(*gpu(), dim, skip);
    const auto st = states(rng, dim * ns);
    std::vector<float> x, dt, bv, cv, z;
    over_two_steps(dim, st, kStateTol, [&](Backend& b, const SsmSeqs& seqs, int64_t n, const Tensor& out) {
      if (&b == &cpu()) {
        x = random_values(rng, n * dim);
        dt = random_values(rng, n * dim, -3, 1);
        bv = random_values(rng, n * ns);
        cv = random_values(rng, n * ns);
        z = random_values(rng, n * zw, -2, 2);
      }
      b.ssm_scan_diag(act(b, n, dim, x).tensor, act(b, n, dim, dt).tensor, act(b, n, ns, bv).tensor,
                      act(b, n, ns, cv).tensor, act(b, n, zw, z).tensor, z_col, side(b, ac, ag).tensor,
                      side(b, sc, sg).tensor, seqs, side(b, st), out);
    });
  }
}

struct DeltaCase {
  SsmLayout l;  // H value heads of P, G key heads of N
  int64_t z_col_pad;
};

TEST(GpuSsm, GatedDeltaMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(45);
  // Odd small shapes in both head orders, and Qwen3.5's head shape (value and key heads of 128).
  SsmLayout tiled{4, 32, 2, 48, 4};
  tiled.tiled_heads = true;
  for (const DeltaCase c : {DeltaCase{{4, 32, 2, 48, 4}, 0}, DeltaCase{tiled, 0}, DeltaCase{{8, 128, 2, 128, 4}, 16}}) {
    const SsmLayout& l = c.l;
    SCOPED_TRACE(testing::Message() << "H " << l.n_heads << " P " << l.head_dim << " G " << l.n_groups << " N "
                                    << l.state_size << " tiled " << l.tiled_heads);
    const int64_t h = l.n_heads, vd = l.d_inner(), ch = l.conv_dim();
    const int64_t z_col = ch + c.z_col_pad, width = z_col + vd + 2 * h;  // q|k|v|z|b|a as Qwen3-Next's in_proj
    const auto a = negative_rates(rng, h);
    const auto dt_bias = random_values(rng, h), nw = random_values(rng, l.head_dim, 0.5f, 1.5f);
    OwnedTensor ac = f32(cpu(), h, a), ag = f32(*gpu(), h, a), tc = f32(cpu(), h, dt_bias), tg = f32(*gpu(), h, dt_bias);
    OwnedTensor nc = f32(cpu(), l.head_dim, nw), ng = f32(*gpu(), l.head_dim, nw);
    const SsmParams pc{ac.tensor, Tensor(), tc.tensor, 0.0f, 0.0f, nc.tensor, 1e-6f};
    const SsmParams pg{ag.tensor, Tensor(), tg.tensor, 0.0f, 0.0f, ng.tensor, 1e-6f};
    const auto st = states(rng, vd * l.state_size);
    std::vector<float> qkv, proj;
    over_two_steps(vd, st, kStateTol, [&](Backend& b, const SsmSeqs& seqs, int64_t n, const Tensor& out) {
      if (&b == &cpu()) {
        qkv = random_values(rng, n * ch);
        proj = random_values(rng, n * width, -2, 2);
      }
      b.gated_delta(act(b, n, ch, qkv).tensor, act(b, n, width, proj).tensor, z_col, l, side(b, pc, pg), seqs,
                    side(b, st), out);
    });
  }
}

// Kimi's KDA (Backend::kda): a decay per key channel from f and dt_bias [H N]; a small odd shape
// (N not a multiple of 32, P != N) and Kimi-Linear-48B's (heads of 128).
TEST(GpuSsm, KdaMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(47);
  for (const SsmLayout l : {SsmLayout{3, 24, 3, 40, 4}, SsmLayout{4, 128, 4, 128, 4}}) {
    SCOPED_TRACE(testing::Message() << "H " << l.n_heads << " P " << l.head_dim << " N " << l.state_size);
    const int64_t h = l.n_heads, vd = l.d_inner(), kd = h * l.state_size, ch = 2 * kd + vd;
    const auto a = negative_rates(rng, h), dt_bias = random_values(rng, kd);
    OwnedTensor ac = f32(cpu(), h, a), ag = f32(*gpu(), h, a), tc = f32(cpu(), kd, dt_bias), tg = f32(*gpu(), kd, dt_bias);
    const SsmParams pc{ac.tensor, Tensor(), tc.tensor, 0.0f, 0.0f, Tensor(), 1e-5f};
    const SsmParams pg{ag.tensor, Tensor(), tg.tensor, 0.0f, 0.0f, Tensor(), 1e-5f};
    const auto st = states(rng, vd * l.state_size);
    std::vector<float> qkv, f, beta;
    over_two_steps(vd, st, kStateTol, [&](Backend& b, const SsmSeqs& seqs, int64_t n, const Tensor& out) {
      if (&b == &cpu()) {
        qkv = random_values(rng, n * ch);
        f = random_values(rng, n * kd, -3, 2);
        beta = random_values(rng, n * h, -2, 2);
      }
      b.kda(act(b, n, ch, qkv).tensor, act(b, n, kd, f).tensor, act(b, n, h, beta).tensor, l, side(b, pc, pg), seqs,
            side(b, st), out);
    });
  }
}

// MiniMax's lightning attention (Backend::lightning_attention): silu of the raw q|k|v per head, a
// fixed decay per head; a small odd shape (D not a multiple of 32) and MiniMax-Text-01's (64
// heads of 128: 8 of them here).
TEST(GpuSsm, LightningMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(48);
  for (const SsmLayout l : {SsmLayout{3, 24, 3, 24, 1}, SsmLayout{8, 128, 8, 128, 1}}) {
    SCOPED_TRACE(testing::Message() << "H " << l.n_heads << " D " << l.head_dim);
    const int64_t h = l.n_heads, vd = l.d_inner(), ch = 3 * vd;
    const auto decay = random_values(rng, h, 0.5f, 0.999f);
    OwnedTensor dc = f32(cpu(), h, decay), dg = f32(*gpu(), h, decay);
    const auto st = states(rng, vd * l.state_size);
    std::vector<float> qkv;
    over_two_steps(vd, st, kStateTol, [&](Backend& b, const SsmSeqs& seqs, int64_t n, const Tensor& out) {
      if (&b == &cpu()) qkv = random_values(rng, n * ch, -2, 2);
      b.lightning_attention(act(b, n, ch, qkv).tensor, (&b == &cpu() ? dc : dg).tensor, l, seqs, side(b, st), out);
    });
  }
}

TEST(GpuSsm, SigmoidMulAndReluSquared) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(46);
  const int64_t n = 9, d = 1000;
  const auto x = random_values(rng, n * d, -3, 3), gate = random_values(rng, n * d, -4, 4);
  const auto xc = act(cpu(), n, d, x), xg = act(*gpu(), n, d, x);
  const auto gc = act(cpu(), n, d, gate), gg = act(*gpu(), n, d, gate);
  cpu().sigmoid_mul(xc.tensor, gc.tensor);
  gpu()->sigmoid_mul(xg.tensor, gg.tensor);
  EXPECT_LT(rel_error(get(*gpu(), xg.tensor), get(cpu(), xc.tensor)), kBf16Tol);
  const auto rc = act(cpu(), n, d, x), rg = act(*gpu(), n, d, x);
  cpu().relu_squared(rc.tensor);
  gpu()->relu_squared(rg.tensor);
  const auto got = get(*gpu(), rg.tensor), want = get(cpu(), rc.tensor);
  EXPECT_LT(rel_error(got, want), kBf16Tol);
  for (size_t i = 0; i < got.size(); ++i)
    if (x[i] <= 0.0f) {
      EXPECT_EQ(got[i], 0.0f) << i;  // negatives clamp to exactly zero
    }
}

// BitNet's ops: the gated relu2 within bf16 tolerance; the int8 row quantization exactly the CPU's
// rounded to bf16 (the same bf16 inputs, the same IEEE f32 scale, rounding and division).
TEST(GpuSsm, Relu2MulAndQuantizeRowsInt8) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(47);
  const int64_t n = 7, inter = 300, d = 1000;
  const auto gu = random_values(rng, n * 2 * inter, -3, 3);
  const auto oc = act_out(cpu(), n, inter), og = act_out(*gpu(), n, inter);
  cpu().relu2_mul(act(cpu(), n, 2 * inter, gu).tensor, oc.tensor);
  gpu()->relu2_mul(act(*gpu(), n, 2 * inter, gu).tensor, og.tensor);
  EXPECT_LT(rel_error(get(*gpu(), og.tensor), get(cpu(), oc.tensor)), kBf16Tol);
  auto x = random_values(rng, n * d, -5, 5);
  for (int64_t j = 0; j < d; ++j) x[static_cast<size_t>(3 * d + j)] = 0.0f;  // an all-zero row stays zero
  const auto xc = act(cpu(), n, d, x), xg = act(*gpu(), n, d, x);
  cpu().quantize_rows_int8(xc.tensor);
  gpu()->quantize_rows_int8(xg.tensor);
  const auto got = get(*gpu(), xg.tensor), want = get(cpu(), xc.tensor);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], bf16_to_f32(f32_to_bf16(want[i]))) << i;
}

}  // namespace
}  // namespace brigade
