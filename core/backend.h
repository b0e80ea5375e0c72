// Backend: the op interface every model is written against (DESIGN.md §4).
//
// A model calls these ops and never contains device code; cpu/ and gpu/ implement them. All
// tensors passed to an op live on this backend's device (for the CPU backend, host memory).
// Ops may run asynchronously with respect to the host; synchronize() waits for all of them.
// Ops do not validate shapes against user input: the model checks its own shapes at load time,
// and a mismatch here is a bug (BRIGADE_CHECK).
//
// Fused QKV: attention inputs are one tensor qkv [n_tokens, (n_heads + 2 * n_kv_heads) * head_dim]
// with the query heads first, then key heads, then value heads, as one fused projection writes it.
//
// fp8 weights: prepare_weight(host, DType::f8e4m3) on a backend whose supports_weight_dtype says
// yes (the CUDA backend on compute capability >= 8.9) quantizes a matrix w [m, k] to E4M3 codes
// q = e4m3(w / scale) with one f32 scale for the whole tensor, scale = absmax(w) / 448. The
// scale travels with the weight's allocation, not in a side table: the f32 sits at byte offset
// fp8_scale_offset(w) from w.data, so matmul(x, w, bias, out) finds it from the Tensor alone and a
// CUDA Graph that captured the matmul reads it from the same address on every replay. Hence an
// fp8 weight is used whole (no rows() views of it as a matmul operand). matmul quantizes x per
// call with its own dynamic per-tensor scale and computes out = (sx * sw) * (qx · qwᵀ) (+ bias).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/sample_params.h"
#include "core/status.h"
#include "core/tensor.h"

namespace brigade {

// Byte offset of an f8e4m3 weight's f32 scale from its data (the codes, padded to 256 bytes).
inline size_t fp8_scale_offset(const Tensor& w) { return (w.nbytes() + 255) / 256 * 256; }

// xIELU's parameters for one layer (Apertus's MLP activation, Backend::xielu): alpha_p and alpha_n
// as the activation uses them (softplus of the stored ones; alpha_n with beta added), beta, eps.
struct XieluParams {
  float alpha_p = 0.8f;
  float alpha_n = 0.8f;
  float beta = 0.5f;
  float eps = -1e-6f;
};

struct QkvLayout {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int q_width() const { return n_heads * head_dim; }
  int kv_width() const { return n_kv_heads * head_dim; }
  int row_width() const { return (n_heads + 2 * n_kv_heads) * head_dim; }
};

enum class RopeStyle : uint8_t {
  neox,         // rotate halves: (x[i], x[i + rotary_dim/2]); Hugging Face layout
  interleaved,  // rotate adjacent pairs: (x[2i], x[2i+1]); llama2.c and GGUF layout
};

// Rotary embedding of the first rotary_dim dims of each q and k head. inv_freq [rotary_dim/2]
// already includes any rope_scaling (llama3, linear, dynamic), computed by the model;
// angle(pos, i) = pos * inv_freq[i].
struct RopeConfig {
  RopeStyle style = RopeStyle::neox;
  int rotary_dim = 0;
  std::vector<float> inv_freq;
  float attention_factor = 1.0f;  // multiplies cos/sin (YaRN); 1 otherwise
  // Multimodal RoPE (Qwen2-VL's M-RoPE; the Qwen vision towers' 2D rotary): empty = one position
  // per row. Else positions holds sections.size() planes of n positions each ([k * n + row]), and
  // frequency pair f takes its position from the plane whose range of sections covers it:
  // pairs [0, sections[0]) plane 0, the next sections[1] pairs plane 1, ...; the sections sum to
  // rotary_dim / 2. With every plane equal it is the one-position rotation.
  std::vector<int> sections;
  // Qwen3-VL's interleaved M-RoPE (mrope_interleaved; 3 sections): pair f takes plane 1 when
  // f % 3 == 1 and f < 3 * sections[1], plane 2 when f % 3 == 2 and f < 3 * sections[2], else
  // plane 0 (transformers' Qwen3VLTextRotaryEmbedding.recomposition_frequencies).
  bool interleaved = false;
};

// One layer's paged KV memory: k and v [n_pages, page_size, n_kv_heads, head_dim] (DESIGN.md §5).
// int8 KV (dtype i8) adds one scale per (token, kv head) for K and for V, k_scale and v_scale
// [n_pages, page_size, n_kv_heads] f32 = the row's absmax / 127, and stores x as
// q = round(x / scale) in [-127, 127], read back as q * scale: each row is quantized alone when
// written, so nothing depends on how tokens were split into writes (cpu/kv_int8.h).
// Other dtypes leave the scale tensors empty.
struct KvLayer {
  Tensor k;
  Tensor v;
  Tensor k_scale;
  Tensor v_scale;
};

// Per-step attention metadata; i32 tensors on the device plus host-side bounds for launches.
// Sequence s owns flattened token rows [q_start[s], q_start[s+1]); those rows are the last
// n_q = q_start[s+1] - q_start[s] positions of its context, so row j (0-based within s) has
// position ctx_len[s] - n_q + j and attends causally to KV positions [0, that position].
// KV position p lives in page block_table[s][p / page_size], offset p % page_size.
struct AttentionMeta {
  Tensor q_start;      // [n_seqs + 1] i32
  Tensor ctx_len;      // [n_seqs] i32
  Tensor block_table;  // [n_seqs, max_blocks] i32
  int n_seqs = 0;
  int max_q_len = 0;
  int max_ctx_len = 0;
  int sliding_window = 0;  // attend to the last `sliding_window` positions only; 0 = unlimited
  int chunk = 0;           // > 0: a row at position p attends only to positions >= p - p % chunk, those of its
                           // own chunk (Llama 4's chunked attention, attention_chunk_size); with a window,
                           // both bound the range from below; 0 = none
  float softcap = 0.0f;    // > 0: each score s (after the scale) becomes tanh(s / softcap) * softcap
                           // before the softmax (Gemma 2's attn_logit_softcapping); 0 = none
  // [n_heads] f32 (the heads of the qkv passed to attention), or empty: a learned "attention
  // sink" logit per query head (gpt-oss) that joins each row's softmax as one more score with no
  // value: out = sum_p exp(s_p) v_p / (sum_p exp(s_p) + exp(sink)). Set per layer by the model.
  Tensor sinks;
  // [n_heads] f32 (the heads of the qkv passed to attention), or empty: ALiBi (BLOOM, MPT), the
  // score of a row at position i for the key at position j gains slope[h] * (j - i) after the
  // scale and before the softmax. Set by the model; implemented where supports_alibi is.
  Tensor alibi_slopes;
  // [n_tokens] i32, or empty (causal): row j attends to the KV positions up to
  // max(its position, attend_until[j]), which must be written by this step or before it; the
  // sliding window still bounds the range from below. Gemma 3's image tokens see their whole
  // image, a vision encoder's patches see each other (Backend::supports_vision).
  Tensor attend_until;
};

// How moe_route picks a token's experts (Qwen3-MoE: softmax top-k; DeepSeek-V2: softmax with
// optional group-limited greedy; DeepSeek-V3: sigmoid, score-correction bias, top-2-sum groups;
// Phi-3.5-MoE: sparsemixer, top-2 only, its own rule in moe_route).
enum class MoeScoring : uint8_t { softmax, sigmoid, sparsemixer };
enum class MoeGroupScore : uint8_t {
  none,      // no groups: top-k over all experts
  max,       // a group's score is its largest expert score (DeepSeek-V2 group_limited_greedy)
  top2_sum,  // the sum of its two largest (DeepSeek-V3 noaux_tc)
};
struct MoeRouting {
  int k = 1;                      // experts per token
  MoeScoring scoring = MoeScoring::softmax;
  bool normalize = false;         // renormalise the k weights to sum to 1 (norm_topk_prob)
  int n_group = 1;                // expert groups (n_group); 1 = none
  int topk_group = 1;             // groups a token may choose from
  MoeGroupScore group_score = MoeGroupScore::none;
  float scale = 1.0f;             // multiplies the weights (routed_scaling_factor)
  Tensor bias;                    // [E] f32 added to the scores for selection only; empty = none
  // The selection ranks the router logits (plus bias) rather than the scores; the weights stay
  // the chosen experts' scores (Kolibri-1: top-k of logits + e_score_correction_bias, weighted by
  // their sigmoid). Softmax ranks as its logits do, so only sigmoid with a bias differs.
  bool select_on_logits = false;
  float jitter_eps = 0.0f;         // sparsemixer's mask threshold (router_jitter_noise)
  // [E] f32: weights[t, j] is multiplied by expert_scale[chosen expert] after the normalisation and
  // `scale` (Gemma 4's per_expert_scale); empty = none.
  Tensor expert_scale;
  // Expert parallelism: the ids moe_route writes are relative to this rank's first expert
  // (id - first_expert), so the ids of the experts a rank holds fall in [0, its expert count) and
  // the others outside it, which moe_experts skips. 0 without expert parallelism.
  int first_expert = 0;
};

// What the routed experts compute beyond plain SwiGLU (gpt-oss's experts; the default is
// Qwen3-MoE's, Mixtral's and DeepSeek's): biases on the gate|up and down projections, and the
// clamped SwiGLU. With swiglu_limit > 0, per intermediate column, g and u the gate and up values
// (biases added):
//   g' = min(g, limit),  u' = clamp(u, -limit, limit),  act = (u' + 1) * g' * sigmoid(alpha * g')
// else act = silu(g) * u. relu2: Nemotron 3's experts have no gate: gate_up holds only each
// expert's I up rows ([E * I, d]) and act = max(u, 0)^2 (no biases; implemented where
// supports_relu2_experts is). gelu_tanh: act = gelu_tanh(g) * u (Gemma 4's gelu_pytorch_tanh
// experts; no biases or clamp; implemented where supports_gelu_experts is).
struct MoeExpertMlp {
  Tensor gate_up_bias;  // [E * 2I] f32, expert e's I gate biases then its I up biases (as gate_up's rows), or empty
  Tensor down_bias;     // [E * d] f32, or empty (added to each expert's output before its routing weight)
  float swiglu_limit = 0.0f;
  float swiglu_alpha = 1.0f;
  bool relu2 = false;
  bool gelu_tanh = false;
  // Llama 4: each pair's routing weight multiplies the expert's input instead of its output:
  //   out[t] = sum_j down_e · (silu(gate_e · (w x[t])) * (up_e · (w x[t]))),  w = weights[t, j].
  bool weight_on_input = false;
  bool plain() const {
    return gate_up_bias.empty() && down_bias.empty() && swiglu_limit <= 0.0f && !relu2 && !gelu_tanh && !weight_on_input;
  }
};

// MLA (DeepSeek multi-head latent attention) shapes: H query heads; each KV cache row (one per
// token, one "kv head") is the latent c [kv_lora_rank] followed by the rotated k_pe [rope_dim].
struct MlaLayout {
  int n_heads = 0;
  int kv_lora_rank = 0;  // R
  int rope_dim = 0;      // qk_rope_head_dim
  int row_width() const { return kv_lora_rank + rope_dim; }
};

// DeepSeek Sparse Attention's lightning indexer (deepseek_v32, glm_moe_dsa; models/dsa_indexer.h):
// H index heads of head_dim D score each visible key; a query keeps its topk best. The keys are
// columns [col, col + D) of latent-cache rows (KvLayout::latent).
struct DsaLayout {
  int n_heads = 0;     // H (index_n_heads)
  int head_dim = 0;    // D (index_head_dim)
  int col = 0;         // the keys' first column in the cache row
  int topk = 0;        // index_topk
  float scale = 1.0f;  // multiplies every score (D^-1/2 H^-1/2: transformers' softmax_scale and weights scale)
};

// Mamba2's mixer (state-space layers; models/state_space.h) over its in_proj output, one row per
// token: [z (d_inner) | x (d_inner) B (G N) C (G N) | dt (H)], d_inner = H * P. x, B and C (xBC,
// conv_dim() wide) go through a causal depthwise convolution of conv_kernel taps and SiLU; then
// per head h (group g = h / (H / G)) each token updates the head's state S [P, N]:
//   dt' = clamp(softplus(dt[h] + dt_bias[h]), dt_min, dt_max),  S = exp(dt' A[h]) S + dt' x_h B_g^T,
//   y_h = S C_g + D[h] x_h;
// and y * silu(z) is RMS-normalised in groups of d_inner / G (weight; transformers'
// Mamba2RMSNormGated), or only gated when there is no norm weight.
struct SsmLayout {
  int n_heads = 0;      // H
  int head_dim = 0;     // P
  int n_groups = 1;     // G (B and C are shared by H / G heads)
  int state_size = 0;   // N
  int conv_kernel = 4;  // taps of the causal convolution (its state keeps conv_kernel - 1 rows)
  // Gated DeltaNet: value head h takes key head h % G (llama.cpp's GGUF order of Qwen3.5's value
  // heads, tiled over the key heads) instead of h / (H / G) (the checkpoints' grouped order).
  bool tiled_heads = false;
  int64_t d_inner() const { return int64_t{n_heads} * head_dim; }
  int64_t conv_dim() const { return d_inner() + 2 * int64_t{n_groups} * state_size; }
  int64_t proj_width() const { return d_inner() + conv_dim() + n_heads; }
};

// The sequences of a state-space step: rows [q_start[s], q_start[s + 1]) are sequence s's tokens,
// in order, and continue the state in slot slots[s] of the state tensors, or start from zeros
// where fresh[s] != 0 (a sequence's first tokens). All i32 in device memory.
// Snapshots (the prefix cache of a recurrent model): where save_rows[s] > 0, the state after the
// sequence's first save_rows[s] rows is also copied into slot save_slots[s] (another slot than
// any sequence's of the step), as the op passes that row; empty tensors: no snapshot.
struct SsmSeqs {
  Tensor q_start;  // [n_seqs + 1]
  Tensor slots;    // [n_seqs]
  Tensor fresh;    // [n_seqs]
  int n_seqs = 0;
  Tensor save_rows;   // [n_seqs] or empty
  Tensor save_slots;  // [n_seqs] or empty
};

// A Mamba2 layer's scan parameters: A = -exp(A_log), D and dt_bias [H] f32, the dt clamp, the
// gated norm's weight [d_inner] f32 (empty: gate only) and epsilon.
struct SsmParams {
  Tensor a;
  Tensor d;
  Tensor dt_bias;
  float dt_min = 0.0f;
  float dt_max = 0.0f;  // <= 0: no upper bound
  Tensor norm_weight;
  float norm_eps = 1e-5f;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  // Element type of activations between ops (CPU: f32; GPU: bf16). Logits are always f32.
  virtual DType activation_dtype() const = 0;

  // Whether write_kv and attention accept a KV cache of element type `t`. KvCache::allocate
  // asks, so an unsupported kv dtype is refused when the engine starts, not at the first step.
  virtual bool supports_kv_dtype(DType t) const {
    return t == DType::f32 || t == DType::bf16 || t == DType::f16;
  }

  // Whether prepare_weight makes matmul weights of element type `t`. Float types always; the
  // model asks before loading so an unsupported type (f8e4m3 off a capable GPU) is refused at
  // once with the reason, not after the first layers were converted.
  virtual bool supports_weight_dtype(DType t) const {
    return t == DType::f32 || t == DType::bf16 || t == DType::f16;
  }

  // ---- memory ----
  // Device memory of at least `bytes`, aligned to 64 bytes; out_of_resources when it cannot.
  virtual Expected<Buffer> allocate(size_t bytes) = 0;
  virtual void upload(const Tensor& dst, const void* host_src) = 0;     // dst.nbytes() bytes
  virtual void download(void* host_dst, const Tensor& src) = 0;         // src.nbytes() bytes
  // Converts a host weight (f32/f16/bf16, row-major) into the backend's layout for matmul or
  // lookup. `want` overrides the stored element type (e.g. bf16 -> f32); nullopt keeps it.
  // want = f8e4m3 makes a matmul-only weight (see "fp8 weights" above; embedding() refuses it).
  virtual Expected<OwnedTensor> prepare_weight(const Tensor& host, std::optional<DType> want) = 0;
  virtual void synchronize() = 0;
  // dst = src within device memory (equal byte sizes; not overlapping), behind every op queued so
  // far: a KV page's leading rows into another page (kvstore/kv_layout.h KvCache::copy_rows).
  // Not inside a step. The default goes through the host.
  virtual void copy(const Tensor& dst, const Tensor& src) {
    BRIGADE_CHECK(dst.nbytes() == src.nbytes(), "copy() between tensors of one size");
    std::vector<std::byte> host(src.nbytes());
    download(host.data(), src);
    upload(dst, host.data());
  }

  // ---- downloads that do not wait (the executor's steps in flight) ----
  // Host memory a download_async may land in: page-locked where the device has its own memory
  // (the GPU; a copy into pageable memory would wait for the device), plain memory otherwise.
  virtual Expected<Buffer> allocate_host(size_t bytes) {
    void* p = std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
    if (p == nullptr) return out_of_resources("cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    return Buffer(p, bytes, [](void* q) { std::free(q); });
  }
  // Queues a copy of src into host_dst (allocate_host memory) behind every op queued so far and
  // returns a ticket without waiting; the bytes are there once download_done(ticket) is true or
  // wait_download(ticket) has returned. Every ticket goes to wait_download exactly once, which
  // retires it. Not inside a step. Backends whose ops complete at once copy here (the default).
  virtual uint64_t download_async(void* host_dst, const Tensor& src) {
    download(host_dst, src);
    return 0;
  }
  // Whether the ticket's copy has landed; never blocks.
  virtual bool download_done(uint64_t ticket) {
    (void)ticket;
    return true;
  }
  virtual void wait_download(uint64_t ticket) { (void)ticket; }

  // ---- ops ----
  // out [n, d] = table[ids[i]]; table [vocab, d] (a prepared weight), ids [n] i32.
  virtual void embedding(const Tensor& table, const Tensor& ids, const Tensor& out) = 0;
  // out [n, m] = x [n, k] · w[m, k]ᵀ (+ bias [m] when bias is not empty). w may be an f8e4m3
  // weight from prepare_weight (see "fp8 weights" above).
  virtual void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) = 0;
  // One projection whose weight rows come in groups of different block types, multiplied as one
  // matmul: out [n, m_1 + m_2 + ...] = x [n, k] · [w_1; w_2; ...]ᵀ (+ bias [m_1 + m_2 + ...]),
  // group i filling columns [m_1 + ... + m_(i-1), ... + m_i). A GGUF's fused q|k|v of Q4_K q|k
  // and Q6_K v stays as stored this way, x is quantized once and the threads split all rows.
  // Where supports_stacked_matmul() is false (and the loader then never asks), one group only.
  virtual bool supports_stacked_matmul() const { return false; }
  virtual void matmul_stacked(const Tensor& x, std::span<const Tensor> ws, const Tensor& bias, const Tensor& out) {
    BRIGADE_CHECK(ws.size() == 1, "matmul_stacked of several weights on a backend without it (supports_stacked_matmul)");
    matmul(x, ws[0], bias, out);
  }
  // out [n, d] = x / rms(x) * weight, rms over d with eps.
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) = 0;
  // residual [n, d] += x; out = rms_norm(residual). Fusing saves one pass over the activations.
  virtual void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight,
                            float eps, const Tensor& out) = 0;
  // a [n, d] += b [n, d].
  virtual void add(const Tensor& a, const Tensor& b) = 0;
  // x [n, d] += bias [d] f32 on every row (llama.cpp's RMSNorms with a bias: ModelConfig::norm_bias
  // in a GGUF phimoe file; the CPU and CUDA backends have it).
  virtual void add_row_bias(const Tensor& x, const Tensor& bias) {
    (void)x, (void)bias;
    BRIGADE_CHECK(false, "add_row_bias on a backend without it (the CPU and CUDA backends have it)");
  }
  // out [n, I] = silu(gate_up[:, :I]) * gate_up[:, I:]; gate_up [n, 2I].
  virtual void silu_mul(const Tensor& gate_up, const Tensor& out) = 0;
  // out [n, I] = gelu_tanh(gate_up[:, :I]) * gate_up[:, I:] (Gemma's gelu_pytorch_tanh:
  // gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3)))); gate_up [n, 2I].
  virtual void gelu_tanh_mul(const Tensor& gate_up, const Tensor& out) = 0;
  // out [n, I] = gelu(gate_up[:, :I]) * gate_up[:, I:] with the exact GELU, 0.5 g (1 + erf(g /
  // sqrt 2)) (ModernBERT's GeGLU, hidden_activation "gelu"); gate_up [n, 2I]. Implemented where
  // supports_gelu is (the CPU and CUDA backends).
  virtual void gelu_mul(const Tensor& gate_up, const Tensor& out) {
    (void)gate_up, (void)out;
    BRIGADE_CHECK(false, "gelu_mul on a backend without the exact GELU (supports_gelu() is false)");
  }
  // xIELU of x [n, d] in place (Apertus's ungated MLP; transformers' XIELUActivation):
  // x > 0: alpha_p x^2 + beta x; else (expm1(min(x, eps)) - x) alpha_n + beta x.
  virtual void xielu(const Tensor& x, const XieluParams& p) {
    (void)x, (void)p;
    BRIGADE_CHECK(false, "xielu on a backend without it (the CPU and CUDA backends have it)");
  }
  // x [n, d] *= s in place (activations; Gemma's embedding scale).
  virtual void scale(const Tensor& x, float s) = 0;
  // x = tanh(x / cap) * cap elementwise in place; x [n, m] f32 (Gemma 2's final_logit_softcapping).
  virtual void softcap(const Tensor& x, float cap) = 0;
  // x = min(max(x, lo), hi) elementwise in place (torch.clamp; NaN stays NaN); x [n, m] in the
  // activation dtype, lo <= hi, either infinite for no bound (OLMo's and DBRX's clip_qkv on q|k|v,
  // Gemma 4's clipped linears).
  virtual void clamp(const Tensor& x, float lo, float hi) {
    (void)x, (void)lo, (void)hi;
    BRIGADE_CHECK(false, "clamp on a backend without it (the CPU and CUDA backends have it)");
  }
  // RMSNorm of the q and k parts of qkv, in place. Weights [head_dim]: each head on its own
  // (Qwen3); weights [n_heads * head_dim] and [n_kv_heads * head_dim]: all of q's heads as one
  // vector and all of k's as another (OLMo 2's q_norm / k_norm over the whole projection).
  virtual void qk_head_norm(const Tensor& qkv, const QkvLayout& l, const Tensor& q_weight,
                            const Tensor& k_weight, float eps) = 0;
  // LayerNorm of each q and k head of qkv over its head_dim values, in place, each head with its
  // own weights: q_weight [n_heads * head_dim], k_weight [n_kv_heads * head_dim] (head h's at
  // [h * head_dim, (h + 1) * head_dim)), f32 or bf16; no bias (Command R+'s use_qk_norm).
  virtual void qk_head_layer_norm(const Tensor& qkv, const QkvLayout& l, const Tensor& q_weight,
                                  const Tensor& k_weight, float eps) {
    (void)qkv, (void)l, (void)q_weight, (void)k_weight, (void)eps;
    BRIGADE_CHECK(false, "qk_head_layer_norm on a backend without it (the CPU and CUDA backends have it)");
  }
  // Rotates the q and k heads of qkv in place; positions [n] i32 ([sections.size() * n] for a
  // sectioned rotation, RopeConfig::sections; only a backend with supports_vision takes one).
  virtual void rope(const Tensor& qkv, const QkvLayout& l, const Tensor& positions,
                    const RopeConfig& rope) = 0;
  // Whole-width q/k norms (qk_head_norm's OLMo 2 kind) split over tensor-parallel ranks, each
  // holding some of the heads: qk_sum_squares writes sums [n, 2] f32, per row the sum of squares
  // of this rank's q part and of its k part; the caller all-reduces them over the ranks; then
  // qk_norm_by_sums scales this rank's q by q_weight / sqrt(sums[t, 0] / q_total + eps) and its k
  // by k_weight / sqrt(sums[t, 1] / k_total + eps), q_total and k_total the whole widths
  // (n_heads * head_dim and n_kv_heads * head_dim of every rank together), the weights this
  // rank's slices ([q_width] and [kv_width], f32 or bf16). v is untouched.
  virtual void qk_sum_squares(const Tensor& qkv, const QkvLayout& l, const Tensor& sums) {
    (void)qkv, (void)l, (void)sums;
    BRIGADE_CHECK(false, "qk_sum_squares on a backend without it (the CPU and CUDA backends have it)");
  }
  virtual void qk_norm_by_sums(const Tensor& qkv, const QkvLayout& l, const Tensor& sums, int64_t q_total,
                               int64_t k_total, const Tensor& q_weight, const Tensor& k_weight, float eps) {
    (void)qkv, (void)l, (void)sums, (void)q_total, (void)k_total, (void)q_weight, (void)k_weight, (void)eps;
    BRIGADE_CHECK(false, "qk_norm_by_sums on a backend without it (the CPU and CUDA backends have it)");
  }
  // The query temperature of Llama 4 (its NoPE layers; offset 1) and Ministral 3 (every layer,
  // after RoPE; offset 0): each q head of row t, at position positions[t], times
  // log1p(floor((positions[t] + offset) / floor_scale)) * scale + 1, in place (rounded to the
  // activation dtype, as transformers rounds the scaled query); k and v untouched.
  virtual void attention_temperature(const Tensor& qkv, const QkvLayout& l, const Tensor& positions, float floor_scale,
                                     float scale, float offset) {
    (void)qkv, (void)l, (void)positions, (void)floor_scale, (void)scale, (void)offset;
    BRIGADE_CHECK(false, "attention_temperature on a backend without it (the CPU and CUDA backends have it)");
  }
  // Copies the k and v heads of qkv [n, ...] into the pages: row i goes to slot slots[i]
  // (page = slot / page_size, offset = slot % page_size); slots [n] i32, negative = skip.
  // int8 KV: a page's tokens are written in position order, so a write to offset 0 starts the
  // page afresh (its scales forget the page's previous owner); a write elsewhere keeps the
  // tokens already there, requantized when the page's scale grows.
  virtual void write_kv(const KvLayer& cache, const Tensor& qkv, const QkvLayout& l,
                        const Tensor& slots) = 0;
  // out [n, n_heads * head_dim] = softmax(q·Kᵀ · scale) · V over each row's causal context
  // (AttentionMeta; the scores soft-capped first where meta.softcap > 0; meta.sinks, when set,
  // one more term in each head's denominator). GQA: query head h
  // reads kv head h / (n_heads / n_kv_heads).
  virtual void attention(const Tensor& qkv, const QkvLayout& l, const KvLayer& cache,
                         const AttentionMeta& meta, float scale, const Tensor& out) = 0;
  // out [r, d] = x [n, d] rows listed in rows [r] i32.
  virtual void gather_rows(const Tensor& x, const Tensor& rows, const Tensor& out) = 0;

  // ---- vision encoders (Gemma 3's SigLIP tower, models/gemma3_vision.h; the Qwen2-VL family's
  // towers, models/qwen_vision.h) ----
  // Whether gelu_tanh, gelu, quick_gelu, scatter_rows, blend_rows, attention's AttentionMeta::attend_until
  // and rope's RopeConfig::sections are implemented; a model loads its vision tower only where
  // they are (else it serves text).
  virtual bool supports_vision() const { return false; }
  // out [n, d] = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias, over d; weight, bias [d] f32
  // or bf16, bias empty for none (Cohere's norms). The towers' and encoders' norms, and the
  // decoder's where ModelConfig::layer_norms (the CPU and CUDA backends have it).
  virtual void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out) {
    (void)x, (void)weight, (void)bias, (void)eps, (void)out;
    BRIGADE_CHECK(false, "layer_norm on a backend without it (the CPU and CUDA backends have it)");
  }
  // Whether gelu_tanh and gelu are implemented: every vision backend, and CUDA's (the ungated GELU
  // MLPs of StarCoder2, Phi, GPT-2, GPT-NeoX / Pythia, GPT-J, GPTBigCode, without the towers).
  virtual bool supports_gelu() const { return supports_vision(); }
  // x [n, d] = gelu_tanh(x) in place (gelu_tanh_mul's gelu, ungated).
  virtual void gelu_tanh(const Tensor& x) {
    (void)x;
    BRIGADE_CHECK(false, "gelu_tanh on a backend without vision ops (supports_vision)");
  }
  // x [n, d] = gelu(x) in place, the exact GELU 0.5 x (1 + erf(x / sqrt(2))) (torch's nn.GELU(),
  // the Qwen2-VL family's merger).
  virtual void gelu(const Tensor& x) {
    (void)x;
    BRIGADE_CHECK(false, "gelu on a backend without vision ops (supports_vision)");
  }
  // Whether attention applies AttentionMeta::alibi_slopes (the CPU and CUDA backends' attention).
  virtual bool supports_alibi() const { return false; }
  // x [n, d] = x * sigmoid(1.702 x) in place (transformers' quick_gelu, Qwen2-VL's tower MLP).
  virtual void quick_gelu(const Tensor& x) {
    (void)x;
    BRIGADE_CHECK(false, "quick_gelu on a backend without vision ops (supports_vision)");
  }
  // y[rows[i]] = src[i] for i < r: y [n, d] and src [r, d] activations, rows [r] i32 inside
  // [0, n) (an image's features replacing its tokens' embeddings).
  virtual void scatter_rows(const Tensor& y, const Tensor& rows, const Tensor& src) {
    (void)y, (void)rows, (void)src;
    BRIGADE_CHECK(false, "scatter_rows on a backend without vision ops (supports_vision)");
  }
  // out[i] = sum over k < K of weights[i, k] * x[rows[i, k]], summed in k order: x [n, d] and
  // out [r, d] f32, rows [r, K] i32 inside [0, n), weights [r, K] f32. LLaVA-OneVision's bilinear
  // resize of an image's feature grid (models/clip_vision.h; K = 4 taps).
  virtual void blend_rows(const Tensor& x, const Tensor& rows, const Tensor& weights, const Tensor& out) {
    (void)x, (void)rows, (void)weights, (void)out;
    BRIGADE_CHECK(false, "blend_rows on a backend without vision ops (supports_vision)");
  }
  // y[rows[i]] += src[i] for i < r: y [n, d] and src [r, d] activations, rows [r] i32 distinct,
  // inside [0, n). How a LoRA adapter's delta joins the rows of its sequences (models/lora.h).
  // Implemented by the CPU and CUDA backends; others fail the check.
  virtual void scatter_add_rows(const Tensor& y, const Tensor& rows, const Tensor& src) {
    (void)y, (void)rows, (void)src;
    BRIGADE_CHECK(false, "scatter_add_rows on a backend without it (LoRA adapters need the CPU or CUDA backend)");
  }

  // ---- mixture of experts (qwen3_moe, deepseek_v2/v3; docs/architecture.md "Mixture of experts") ----
  // Whether moe_route / moe_experts are implemented; a MoE model refuses to load otherwise.
  virtual bool supports_moe() const { return false; }
  // Top-k routing of each token t over E experts (MoeRouting above), all in f32:
  //   s = softmax(router_logits[t]) or sigmoid(router_logits[t]);  c = s + bias (bias empty: c = s);
  //   with groups (n_group > 1, group_score not none): the E experts form n_group groups of
  //   E / n_group consecutive ids, each scored by the max (max) or the sum of its two largest
  //   (top2_sum) c; only the experts of the topk_group best groups may be chosen;
  //   ids[t, 0..k) = the k allowed experts of largest c in descending order, the lowest index first
  //   among equal c (torch.topk's order); weights[t, j] = s[ids[t, j]] (the bias only selects),
  //   divided by the sum of the k when normalize, times scale;
  //   then ids[t, j] -= first_expert (expert parallelism; the choice is over all E experts).
  // sparsemixer (transformers' PhimoeTopKRouter in eval; k = 2, no bias, groups, normalize or
  // scale), l = router_logits[t]: ids[t, 0] = m1 = argmax l; weights[t, 0] = the softmax at m1 of
  // l with every i where (l[m1] - l[i]) / max(|l[i]|, l[m1]) > 2 jitter_eps masked to -inf;
  // ids[t, 1] = m2 = argmax of l without m1; weights[t, 1] = the softmax at m2 of l without m1
  // and with every i where (l[m2] - l[i]) / max(|l[i]|, l[m2]) > 2 jitter_eps masked.
  // router_logits [n, E] f32, ids [n, k] i32, weights [n, k] f32; r.k <= the allowed experts.
  virtual void moe_route(const Tensor& router_logits, const MoeRouting& r, const Tensor& ids,
                         const Tensor& weights) {
    (void)router_logits, (void)r, (void)ids, (void)weights;
    BRIGADE_CHECK(false, "moe_route on a backend without MoE ops (supports_moe() is false)");
  }
  // Bytes of `workspace` that moe_experts needs for n tokens of k experts each, hidden size d and
  // expert width I (the caller allocates it once for its largest n; no op allocates in a step).
  virtual size_t moe_workspace_bytes(int64_t n, int k, int64_t d, int64_t inter) const {
    (void)n, (void)k, (void)d, (void)inter;
    return 0;
  }
  // The routed SwiGLU experts, summed with their weights:
  //   out[t] = sum_j weights[t, j] * down_e · (silu(gate_e · x[t]) * (up_e · x[t])), e = ids[t, j].
  // x [n, d] and out [n, d] activations; gate_up [E * 2I, d] prepared (not fp8; block-quantized
  // where supports_weight_dtype says yes, on the CPU, multiplied as matmul multiplies it): expert e's rows
  // [2eI, 2eI + I) are its gate rows and [2eI + I, 2(e+1)I) its up rows; down [E * d, I]: expert
  // e's rows [e d, (e+1) d); ids and weights [n, k] as moe_route leaves them. An id outside
  // [0, E) names an expert another expert-parallel rank holds: its term is skipped (a token none
  // of whose experts are here gets out[t] = 0), and the ranks' outputs are summed by the
  // caller's all-reduce. `mlp` adds biases and the clamped SwiGLU (MoeExpertMlp; its tensors hold
  // the same E experts as gate_up and down). workspace of at least moe_workspace_bytes(n, k, d, I) bytes of this backend's memory. The
  // k terms of a token are added in slot order j = 0..k-1, whatever the grouping of the step's
  // tokens by expert (on the CPU an expert's matmul still takes the BLAS path from kBlasMinRows
  // rows, as any matmul does). No backend reads the routing back to the host inside the op on a
  // device of its own (the GPU's runs in captured step graphs).
  virtual void moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down, const Tensor& ids,
                           const Tensor& weights, const MoeExpertMlp& mlp, const Tensor& workspace, const Tensor& out) {
    (void)x, (void)gate_up, (void)down, (void)ids, (void)weights, (void)mlp, (void)workspace, (void)out;
    BRIGADE_CHECK(false, "moe_experts on a backend without MoE ops (supports_moe() is false)");
  }
  // moe_experts with each expert's gate and up rows in two tensors, as GGUF stores them
  // (ffn_gate_exps, ffn_up_exps: each may be its own block type, so they are not interleaved into
  // one gate_up at load): gate [E * I, d] and up [E * I, d], expert e's rows [eI, (e+1)I) of
  // each; everything else as moe_experts (mlp.gate_up_bias keeps its [E * 2I] layout). Where
  // supports_split_experts() is false, a model whose experts are stored so refuses to load.
  virtual bool supports_split_experts() const { return false; }
  // Whether moe_experts runs MoeExpertMlp::relu2 experts (Nemotron 3's).
  virtual bool supports_relu2_experts() const { return false; }
  // Whether moe_experts runs MoeExpertMlp::gelu_tanh experts and moe_route MoeRouting::expert_scale
  // (Gemma 4's; CPU and CUDA).
  virtual bool supports_gelu_experts() const { return false; }
  virtual void moe_experts_split(const Tensor& x, const Tensor& gate, const Tensor& up, const Tensor& down,
                                 const Tensor& ids, const Tensor& weights, const MoeExpertMlp& mlp,
                                 const Tensor& workspace, const Tensor& out) {
    (void)x, (void)gate, (void)up, (void)down, (void)ids, (void)weights, (void)mlp, (void)workspace, (void)out;
    BRIGADE_CHECK(false, "moe_experts_split on a backend without it (supports_split_experts() is false)");
  }
  // LongCat-Flash's zero-computation experts (models/longcat_flash.h): routed ids at or past
  // n_experts (moe_route over the E real and Z identity experts' logits; moe_experts skips
  // them) name experts that return their input:
  //   out[t] += (sum over j with ids[t, j] >= n_experts of weights[t, j]) * x[t].
  // x and out [n, d] activations, ids and weights [n, k] as moe_route leaves them. Implemented
  // where supports_moe() is (CPU and CUDA).
  virtual void moe_identity_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, int n_experts,
                                    const Tensor& out) {
    (void)x, (void)ids, (void)weights, (void)n_experts, (void)out;
    BRIGADE_CHECK(false, "moe_identity_experts on a backend without MoE ops (supports_moe() is false)");
  }

  // ---- multi-head latent attention (deepseek_v2/v3; docs/architecture.md "DeepSeek") ----
  // The cache is a KvLayout with `latent` set: per layer one tensor k [n_pages, page_size, 1,
  // R + rope_dim] (the latent, then the rotated k_pe), no V. Attention runs absorbed: the query
  // is mapped into latent space (q_lat = q_nope · W_UK per head, by head_matmul), scored against
  // the cached rows and the result (a latent per head) mapped out by W_UV (head_matmul again).
  // Whether head_matmul, write_mla_kv and mla_attention are implemented; MLA models refuse to
  // load otherwise.
  virtual bool supports_mla() const { return false; }
  // Per-head matmul: out[t, h*b .. (h+1)*b) = w_h · x[t, h*a .. (h+1)*a) for h < n_heads, where
  // w_h is rows [h b, (h+1) b) of w [n_heads * b, a] (prepared; not fp8); x [n, n_heads * a] and
  // out [n, n_heads * b] activations.
  virtual void head_matmul(const Tensor& x, const Tensor& w, int n_heads, const Tensor& out) {
    (void)x, (void)w, (void)n_heads, (void)out;
    BRIGADE_CHECK(false, "head_matmul on a backend without MLA ops (supports_mla() is false)");
  }
  // Row i of latent [n, R] and of k_pe [n, rope_dim] (activations; k_pe already rotated) goes
  // to cache row slots[i] (page = slot / page_size, offset = slot % page_size); negative = skip.
  virtual void write_mla_kv(const KvLayer& cache, const Tensor& latent, const Tensor& k_pe, const Tensor& slots) {
    (void)cache, (void)latent, (void)k_pe, (void)slots;
    BRIGADE_CHECK(false, "write_mla_kv on a backend without MLA ops (supports_mla() is false)");
  }
  // out [n, H * R] = per head h: softmax(scale * (q_lat[t, h] · c_p + q_pe[t, h] · k_pe_p)) · c_p
  // over the row's causal context p (AttentionMeta; sliding_window must be 0), where (c_p, k_pe_p)
  // is cache row p. q_lat [n, H * R], q_pe [n, H * rope_dim] activations (q_pe rotated).
  virtual void mla_attention(const Tensor& q_lat, const Tensor& q_pe, const MlaLayout& l, const KvLayer& cache,
                             const AttentionMeta& meta, float scale, const Tensor& out) {
    (void)q_lat, (void)q_pe, (void)l, (void)cache, (void)meta, (void)scale, (void)out;
    BRIGADE_CHECK(false, "mla_attention on a backend without MLA ops (supports_mla() is false)");
  }

  // ---- DeepSeek Sparse Attention (DsaLayout above; models/dsa_indexer.h) ----
  // Whether write_kv_columns, dsa_topk and mla_sparse_attention are implemented (with the MLA ops);
  // deepseek_v32 and glm_moe_dsa refuse to load otherwise.
  virtual bool supports_dsa() const { return false; }
  // Row i of x [n, d] (activations) goes to columns [col, col + d) of latent-cache row slots[i]
  // (page = slot / page_size, offset = slot % page_size); negative = skip; the other columns stay.
  virtual void write_kv_columns(const KvLayer& cache, const Tensor& x, int col, const Tensor& slots) {
    (void)cache, (void)x, (void)col, (void)slots;
    BRIGADE_CHECK(false, "write_kv_columns on a backend without DSA ops (supports_dsa() is false)");
  }
  // The indexer's choice: for each query row t at position pos (AttentionMeta's causal context)
  // the min(topk, pos + 1) positions p <= pos with the largest
  //   score(p) = l.scale * sum_h weights[t, h] * relu(q[t, h] · key_p),
  // key_p the columns [l.col, l.col + D) of the row's cache row p; ties go to the lower position.
  // out [n, topk] i32 lists them ascending, then -1. q [n, H D] (rotated), weights [n, H]
  // activations. workspace: f32 scratch of at least meta.max_ctx_len values (a backend scores as
  // many rows at a time as it holds; the CPU needs none and takes an empty one).
  virtual void dsa_topk(const Tensor& q, const Tensor& weights, const KvLayer& cache, const DsaLayout& l,
                        const AttentionMeta& meta, const Tensor& workspace, const Tensor& out) {
    (void)q, (void)weights, (void)cache, (void)l, (void)meta, (void)workspace, (void)out;
    BRIGADE_CHECK(false, "dsa_topk on a backend without DSA ops (supports_dsa() is false)");
  }
  // mla_attention with each row's softmax over the positions indices[t, :] lists (dsa_topk's
  // out: ascending, -1 = none) instead of its whole causal context.
  virtual void mla_sparse_attention(const Tensor& q_lat, const Tensor& q_pe, const MlaLayout& l, const KvLayer& cache,
                                    const AttentionMeta& meta, const Tensor& indices, float scale, const Tensor& out) {
    (void)q_lat, (void)q_pe, (void)l, (void)cache, (void)meta, (void)indices, (void)scale, (void)out;
    BRIGADE_CHECK(false, "mla_sparse_attention on a backend without DSA ops (supports_dsa() is false)");
  }

  // ---- state-space layers (Mamba2 mixers, SsmLayout above; models/state_space.h) ----
  // Whether ssm_conv and ssm_scan are implemented; a state-space model refuses to load otherwise.
  virtual bool supports_ssm() const { return false; }
  // out [n, C] = silu(causal depthwise conv of in's columns [col, col + C)) (Mamba2: proj's xBC
  // columns, col = d_inner, C = conv_dim; Mamba1: in_proj's x half, col 0, C = d_inner), each
  // sequence's convolution continuing from its slot of conv_state [slots, K - 1, C] f32 (the
  // last inputs before its first row; zeros when fresh), which then holds its last K - 1 inputs.
  // weight [C, K] f32, bias [C] f32 or empty. in [n, >= col + C] and out activations.
  virtual void ssm_conv(const Tensor& in, int64_t col, const Tensor& weight, const Tensor& bias, const SsmSeqs& seqs,
                        const Tensor& conv_state, const Tensor& out) {
    (void)in, (void)col, (void)weight, (void)bias, (void)seqs, (void)conv_state, (void)out;
    BRIGADE_CHECK(false, "ssm_conv on a backend without state-space ops (supports_ssm() is false)");
  }
  // LFM2's short convolution (models/state_space.h): in [n, 3 C] holds per row B | C | x (C
  // channels each, in_proj's output), and out [n, C] = C * (causal depthwise conv of B * x), no
  // activation; the conv's K taps, its state and snapshots as ssm_conv's (it keeps the last
  // K - 1 products B * x). weight [C, K] f32, bias [C] f32 or empty; in and out activations.
  // Implemented where supports_ssm is.
  virtual void short_conv(const Tensor& in, const Tensor& weight, const Tensor& bias, const SsmSeqs& seqs,
                          const Tensor& conv_state, const Tensor& out) {
    (void)in, (void)weight, (void)bias, (void)seqs, (void)conv_state, (void)out;
    BRIGADE_CHECK(false, "short_conv on a backend without state-space ops (supports_ssm() is false)");
  }
  // out [n, d_inner] = the gated, normalised scan output of each row (SsmLayout's rule) from
  // xbc [n, conv_dim] (ssm_conv's output), proj's z and dt columns, and each sequence's state in
  // its slot of state [slots, H, P, N] f32 (zeros when fresh), left as it stands after the
  // sequence's last row. Activations but the f32 state and parameters.
  virtual void ssm_scan(const Tensor& proj, const Tensor& xbc, const SsmLayout& l, const SsmParams& p,
                        const SsmSeqs& seqs, const Tensor& state, const Tensor& out) {
    (void)proj, (void)xbc, (void)l, (void)p, (void)seqs, (void)state, (void)out;
    BRIGADE_CHECK(false, "ssm_scan on a backend without state-space ops (supports_ssm() is false)");
  }

  // Mamba1's selective scan (MambaForCausalLM, FalconMamba; models/state_space.h), a state [D, N] per
  // sequence with a decay per channel and state element: for each row, channel d and n < N,
  //   dt = softplus(dt_in[d]),  S[d, n] = exp(dt a[d, n]) S[d, n] + dt b[n] x[d],
  //   y[d] = S[d, :] . c + skip[d] x[d],  out[d] = y[d] * silu(z[d]),
  // S in the sequence's slot of state [slots, D, N] f32 (zeros when fresh). x, dt_in [n, D] (the
  // conv's output; dt_proj's, its bias included), b and c [n, N], z columns [z_col, z_col + D) of
  // `z` [n, >= z_col + D], out [n, D] activations; a [D, N] (-exp(A_log)) and skip [D] f32.
  virtual void ssm_scan_diag(const Tensor& x, const Tensor& dt_in, const Tensor& b, const Tensor& c, const Tensor& z,
                             int64_t z_col, const Tensor& a, const Tensor& skip, const SsmSeqs& seqs,
                             const Tensor& state, const Tensor& out) {
    (void)x, (void)dt_in, (void)b, (void)c, (void)z, (void)z_col, (void)a, (void)skip, (void)seqs, (void)state,
        (void)out;
    BRIGADE_CHECK(false, "ssm_scan_diag on a backend without state-space ops (supports_ssm() is false)");
  }
  // Gated DeltaNet (Qwen3-Next's and Qwen3.5's linear attention; models/state_space.h), with
  // SsmLayout read as H value heads of P channels, G key heads of N (each key head serving H / G
  // consecutive value heads, or every G-th one with tiled_heads): qkv [n, conv_dim] is ssm_conv's
  // output, per row the G query heads, the G key heads, then the H value heads; proj's columns
  // from z_col hold per row z [H P], b [H] and a [H]. Per row and value head h (key head
  // g = h / (H / G), tiled h % G), with q and k L2-normalised
  // (x / sqrt(|x|^2 + 1e-6)) and q scaled by N^-1/2:
  //   decay = exp(p.a[h] softplus(a[h] + p.dt_bias[h])),  beta = sigmoid(b[h]),
  //   S = decay S,  S += (beta (v_h - S k_g)) k_g^T,  o_h = S q_g,
  // S [P, N] in the sequence's slot of state [slots, H, P, N] f32 (zeros when fresh), and out's
  // head h = RMSNorm(o_h) (weight p.norm_weight [P], p.norm_eps) * silu(z_h). p.a is -exp(A_log)
  // [H] and p.dt_bias [H], f32; p.d and the dt clamp are unused. out [n, H P] activations.
  // Snapshots as ssm_scan's (SsmSeqs::save_rows). Implemented where supports_ssm is.
  virtual void gated_delta(const Tensor& qkv, const Tensor& proj, int64_t z_col, const SsmLayout& l,
                           const SsmParams& p, const SsmSeqs& seqs, const Tensor& state, const Tensor& out) {
    (void)qkv, (void)proj, (void)z_col, (void)l, (void)p, (void)seqs, (void)state, (void)out;
    BRIGADE_CHECK(false, "gated_delta on a backend without state-space ops (supports_ssm() is false)");
  }
  // Kimi Delta Attention (KDA, Kimi Linear's linear attention; models/kimi_linear.h): the gated
  // delta rule with a decay per key channel. SsmLayout read as H heads of P value channels and N
  // key channels (n_groups = H: one key head per value head). qkv [n, 3 H N] is ssm_conv's
  // output, per row the H query heads, the H key heads, then the H value heads (of P); f [n, H N]
  // is the forget gate's f_b_proj output and beta [n, H] b_proj's. Per row and head h, with q and
  // k L2-normalised (x / sqrt(|x|^2 + 1e-6)) and q scaled by N^-1/2:
  //   decay_i = exp(p.a[h] softplus(f[h N + i] + p.dt_bias[h N + i])),  b = sigmoid(beta[h]),
  //   S = S diag(decay),  S += (b (v_h - S k)) k^T,  o_h = S q,
  // S [P, N] in the sequence's slot of state [slots, H, P, N] f32 (zeros when fresh); out [n, H P]
  // = o (the gated norm is the caller's). p.a is -exp(A_log) [H], p.dt_bias [H N], f32; the
  // rest of p unused. Activations but the f32 state and parameters. Snapshots as ssm_scan's.
  // Implemented where supports_ssm is.
  virtual void kda(const Tensor& qkv, const Tensor& f, const Tensor& beta, const SsmLayout& l, const SsmParams& p,
                   const SsmSeqs& seqs, const Tensor& state, const Tensor& out) {
    (void)qkv, (void)f, (void)beta, (void)l, (void)p, (void)seqs, (void)state, (void)out;
    BRIGADE_CHECK(false, "kda on a backend without state-space ops (supports_ssm() is false)");
  }
  // Lightning attention (MiniMax-Text-01 / M1's linear attention; models/minimax.h): a fixed
  // exponential decay per head. SsmLayout read as H heads of P = N = D channels (n_groups = H).
  // qkv [n, 3 H D] is qkv_proj's output before its SiLU, per row and head q | k | v (D each).
  // Per row and head h, with q, k, v = silu of the row's:
  //   S = decay[h] S + v k^T,  o_h = S q,
  // S [P, N] (value channel, key channel) in the sequence's slot of state [slots, H, P, N] f32
  // (zeros when fresh); out [n, H D] = o (the norm and gate are the caller's). decay [H] f32 is
  // exp(-slope_h). Activations but the f32 state and decay. Snapshots as ssm_scan's.
  // Implemented where supports_ssm is.
  virtual void lightning_attention(const Tensor& qkv, const Tensor& decay, const SsmLayout& l, const SsmSeqs& seqs,
                                   const Tensor& state, const Tensor& out) {
    (void)qkv, (void)decay, (void)l, (void)seqs, (void)state, (void)out;
    BRIGADE_CHECK(false, "lightning_attention on a backend without state-space ops (supports_ssm() is false)");
  }
  // x [n, d] *= sigmoid(gate [n, d]) elementwise, in place (Qwen3-Next's gated attention output);
  // implemented where supports_ssm is.
  virtual void sigmoid_mul(const Tensor& x, const Tensor& gate) {
    (void)x, (void)gate;
    BRIGADE_CHECK(false, "sigmoid_mul on a backend without state-space ops (supports_ssm() is false)");
  }
  // x [n, d] = relu(x)^2 in place (Nemotron-H's MLP, models/state_space.h); implemented where
  // supports_ssm is.
  virtual void relu_squared(const Tensor& x) {
    (void)x;
    BRIGADE_CHECK(false, "relu_squared on a backend without state-space ops (supports_ssm() is false)");
  }
  // out [n, I] = relu(gate_up[:, :I])^2 * gate_up[:, I:]; gate_up [n, 2I] (BitNet's gated relu2 MLP,
  // ModelConfig's MlpActivation::relu2_glu); implemented where supports_ssm is.
  virtual void relu2_mul(const Tensor& gate_up, const Tensor& out) {
    (void)gate_up, (void)out;
    BRIGADE_CHECK(false, "relu2_mul on a backend without state-space ops (supports_ssm() is false)");
  }
  // x [n, d] in place: each row quantized to int8 and back, symmetric per row (BitNet's activation
  // quantization before each ternary linear; transformers' BitLinear.activation_quant / ActQuant):
  // s = 127 / max(max_j |x_j|, 1e-5), x_j = min(max(round_half_even(x_j s), -128), 127) / s, in
  // f32, rounded once to x's dtype. Implemented where supports_ssm is.
  virtual void quantize_rows_int8(const Tensor& x) {
    (void)x;
    BRIGADE_CHECK(false, "quantize_rows_int8 on a backend without state-space ops (supports_ssm() is false)");
  }

  // ---- Gemma 3n (models/gemma3n.h): AltUp's streams, activation sparsity, the weightless v norm ----
  // Whether the six ops below are implemented (the CPU and CUDA backends); Gemma 3n refuses to
  // load otherwise. Activations are the backend's activation dtype; the small coefficient
  // matrices f32. Each works in f32 and rounds once when it stores.
  virtual bool supports_altup() const { return false; }
  // The widest head attention() takes (head_dim), 0 for no limit: a model with wider heads
  // refuses to load (CUDA's kernel takes 512, Gemma 4's full layers' width).
  virtual int max_attention_head_dim() const { return 0; }
  // AltUp's prediction (Gemma3nTextAltUp.predict). streams [N, n, d]: N streams of n rows; router
  // [n, N] the modality router's logits; coefs [N * N, N] f32 (prediction_coefs.weight). Row t:
  // m = tanh(router[t]), c = coefs · m; out[i][t] = streams[i][t] + sum_j c[i * N + j] streams[j][t].
  // out [N, n, d] does not overlap streams.
  virtual void altup_predict(const Tensor& streams, const Tensor& router, const Tensor& coefs, const Tensor& out) {
    (void)streams, (void)router, (void)coefs, (void)out;
    BRIGADE_CHECK(false, "altup_predict on a backend without the Gemma 3n ops (supports_altup)");
  }
  // AltUp's correction (Gemma3nTextAltUp.correct) in place on pred [N, n, d]: row t, m =
  // tanh(router[t]) (router [n, N]), c = coefs · m + 1 (coefs [N, N] f32); every stream i gains
  // c[i] * (activated[t] - pred[active][t]), the innovation taken before any stream changes.
  virtual void altup_correct(const Tensor& pred, const Tensor& activated, const Tensor& router, const Tensor& coefs,
                             int active) {
    (void)pred, (void)activated, (void)router, (void)coefs, (void)active;
    BRIGADE_CHECK(false, "altup_correct on a backend without the Gemma 3n ops (supports_altup)");
  }
  // x [n, d] row t times sqrt(mean(ref[t]^2)) / sqrt(max(mean(x[t]^2), eps)) (ref [n, d]): AltUp's
  // streams brought to the first stream's magnitude, in place.
  virtual void match_rms(const Tensor& x, const Tensor& ref, float eps) {
    (void)x, (void)ref, (void)eps;
    BRIGADE_CHECK(false, "match_rms on a backend without the Gemma 3n ops (supports_altup)");
  }
  // The first `cols` columns of each row of x [n, >= cols] become relu(x - (mean + std * k)),
  // mean and population std over those columns (Gemma3nTextMLP._gaussian_topk, k the normal
  // quantile of the sparsity), in place.
  virtual void gaussian_topk(const Tensor& x, int64_t cols, float k) {
    (void)x, (void)cols, (void)k;
    BRIGADE_CHECK(false, "gaussian_topk on a backend without the Gemma 3n ops (supports_altup)");
  }
  // The v heads of qkv [n, row_width] RMS-normed without a weight (Gemma 3n's v_norm), in place.
  virtual void v_head_norm(const Tensor& qkv, const QkvLayout& l, float eps) {
    (void)qkv, (void)l, (void)eps;
    BRIGADE_CHECK(false, "v_head_norm on a backend without the Gemma 3n ops (supports_altup)");
  }
  // x [n, d] = gelu_tanh(x) * y [n, d] elementwise, in place (the per-layer inputs' gate; the
  // GPU rounds the gelu to bf16 before the product, as gelu_tanh_mul does).
  virtual void gelu_tanh_gate(const Tensor& x, const Tensor& y) {
    (void)x, (void)y;
    BRIGADE_CHECK(false, "gelu_tanh_gate on a backend without the Gemma 3n ops (supports_altup)");
  }

  // ---- tokens on the device (the executor's device path, actors/executor/step_runner.h) ----
  // tokens [n] i32 = argmax over each row of logits [n, vocab] f32 (lowest index on ties).
  virtual void argmax(const Tensor& logits, const Tensor& tokens) = 0;
  // tokens [n] i32 drawn from softmax(logits[i] / temperature) cut to the top_k largest logits,
  // then to the smallest set of largest logits whose mass reaches top_p; params [n] SampleParams
  // (core/sample_params.h: the random stream, and how it differs from the host sampler's).
  virtual void sample(const Tensor& logits, const Tensor& params, const Tensor& tokens) = 0;
  // tokens[i] = table[index[i]] for every i with index[i] >= 0; other tokens are left as they
  // are. tokens [n], index [n], table [m] i32; index values < m.
  virtual void gather_tokens(const Tensor& table, const Tensor& index, const Tensor& tokens) = 0;
  // table[index[i]] = tokens[i] for every i with index[i] >= 0; index values < m and distinct.
  virtual void scatter_tokens(const Tensor& tokens, const Tensor& index, const Tensor& table) = 0;
  // Whether the executor should keep sampled tokens on the device (sample here, feed them to the
  // next step here, replay decode steps as graphs) rather than bring logits to the host: true
  // where the host is far from the device memory (GPU), false where they are the same memory.
  virtual bool prefers_device_steps() const { return false; }

  // ---- step graphs (optional; default: ops run eagerly) ----
  // The ops and uploads between begin_step(key) and end_step() form one step that a backend may
  // record and replay as one device graph (CUDA Graphs on the GPU) when the same key comes back.
  // Replaying is only valid when the step issues the same ops on the same tensors (pointers and
  // shapes) with the same scalars, only the uploaded bytes differing; a backend that replays
  // checks this and runs the ops eagerly whenever anything differs, so a bad key costs speed,
  // never correctness. Inside a step: no download(), synchronize() or prepare_weight(). The
  // step's results are there once end_step() has returned and the backend is synchronised.
  virtual void begin_step(uint64_t key) { (void)key; }
  virtual void end_step() {}
};

}  // namespace brigade
