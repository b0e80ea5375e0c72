#include "models/moe_block.h"

#include <numeric>
#include <string>
#include <vector>

#include "models/step_inputs.h"

namespace brigade {

MoeShard moe_shard(const ModelConfig& c, int rank, int size, bool expert_parallel) {
  MoeShard s;
  const int64_t inter = c.moe_intermediate_size, shared = c.shared_width();
  s.n_experts = expert_parallel ? c.n_experts / size : c.n_experts;
  s.first_expert = expert_parallel ? rank * s.n_experts : 0;
  s.inter = expert_parallel ? inter : inter / size;
  s.inter_begin = expert_parallel ? 0 : rank * s.inter;
  s.shared = shared / size;
  s.shared_begin = rank * s.shared;
  return s;
}

bool moe_splits(const ModelConfig& c, int size, bool expert_parallel) {
  if (c.n_moe_layers() == 0 || size == 1) return true;
  const int64_t shared = c.shared_width();
  return (expert_parallel ? c.n_experts % size == 0 : c.moe_intermediate_size % size == 0) && shared % size == 0;
}

std::string moe_split_fields(const ModelConfig& c, bool expert_parallel) {
  if (c.n_moe_layers() == 0) return "";
  std::string f = expert_parallel ? "the routed experts (" + std::to_string(c.n_experts) + ", expert_parallel)"
                                  : "moe_intermediate_size (" + std::to_string(c.moe_intermediate_size) + ")";
  if (c.shared_expert_intermediate_size > 0)
    f += ", the shared expert's shared_expert_intermediate_size (" + std::to_string(c.shared_width()) + ")";
  else if (c.n_shared_experts > 0)
    f += ", the shared experts' n_shared_experts * moe_intermediate_size (" + std::to_string(c.shared_width()) + ")";
  return f;
}

namespace {

// Where layer l's block and its experts' projections are named: Mixtral's Hub names
// (block_sparse_moe, experts' w1 / w3 / w2), LFM2-MoE's (feed_forward, w1 / w3 / w2, expert_bias),
// Granite 3 MoE's (block_sparse_moe.router.layer, the experts fused as input_linear and
// output_linear, shared_mlp's input_linear (gate|up) and output_linear beside the block) or
// everyone else's (mlp, gate/up/down_proj; GGUF's are renamed to these).
struct MoeNames {
  std::string pre;
  const char* router;
  const char* gate;
  const char* up;
  const char* down;
  const char* score_bias = "gate.e_score_correction_bias";  // the selection bias (moe_score_bias)
  // The shared experts' prefix; null: shared_expert. (gated: Qwen2-MoE's) or shared_experts.
  const char* shared = nullptr;
  // The experts fused, gate|up [E, 2 I, hidden] and down [E, hidden, I] (transformers 5's layout).
  const char* fused_gate_up = "experts.gate_up_proj";
  const char* fused_down = "experts.down_proj";
  // The shared experts' gate|up as one [2 S, hidden] tensor and their down, under `shared`
  // (Granite's input_linear / output_linear); null: gate_proj, up_proj, down_proj apart.
  const char* shared_fused_gate_up = nullptr;
  const char* shared_down = "down_proj.weight";
};

MoeNames moe_names(const WeightLoader& w, const ModelConfig& c, int l) {
  const std::string layer = "model.layers." + std::to_string(l) + ".";
  if ((c.arch == "mixtral" || c.arch == "phimoe" || c.arch == "kimi_linear" || c.arch == "minimax") &&
      w.has(layer + "block_sparse_moe.gate.weight"))
    return {layer + "block_sparse_moe.", "gate", "w1", "w3", "w2"};  // (Kimi Linear's: its selection bias, shared_experts.)
  if (c.arch == "phimoe" && w.has(layer + "mlp.router.weight"))  // transformers 5's (GGUF's: mlp.gate)
    return {layer + "mlp.", "router", "gate_proj", "up_proj", "down_proj"};
  if (c.arch == "minimax_m2" && w.has(layer + "block_sparse_moe.gate.weight"))  // Mixtral's names, its selection bias
    return {layer + "block_sparse_moe.", "gate", "w1", "w3", "w2", "e_score_correction_bias"};
  if (c.arch == "gpt_oss") return {layer + "mlp.", "router", "gate_proj", "up_proj", "down_proj"};
  if (c.arch == "longcat_flash")  // LongcatFlashTopkRouter's classifier and selection bias, over E + Z experts
    return {layer + "mlp.", "router.classifier", "gate_proj", "up_proj", "down_proj", "router.e_score_correction_bias"};
  if (c.arch == "gemma4_text") return {layer, "router.proj", "gate_proj", "up_proj", "down_proj"};  // beside mlp.
  if (c.arch == "jamba") return {layer + "feed_forward.", "router", "gate_proj", "up_proj", "down_proj"};
  if (c.arch == "llama4_text")  // its ungated shared expert under Qwen2-MoE's name
    return {layer + "feed_forward.", "router", "gate_proj", "up_proj", "down_proj", "gate.e_score_correction_bias",
            "shared_expert."};
  if (c.arch == "lfm2_moe") return {layer + "feed_forward.", "gate", "w1", "w3", "w2", "expert_bias"};
  if (c.arch == "afmoe" && !w.has(layer + "mlp.gate.weight"))  // AfmoeTokenChoiceRouter's (GGUF's: mlp.gate)
    return {layer + "mlp.", "router.gate", "gate_proj", "up_proj", "down_proj", "expert_bias"};
  if (c.arch == "hunyuan_v1_moe" && w.has(layer + "mlp.gate.wg.weight"))  // Hunyuan's router and shared MLP
    return {layer + "mlp.", "gate.wg", "gate_proj", "up_proj", "down_proj", "gate.e_score_correction_bias", "shared_mlp."};
  // The Hub's names (GGUF's are renamed to everyone else's); the prefix is the layer's: shared_mlp
  // is beside the block.
  if ((c.arch == "granitemoe" || c.arch == "granitemoeshared") && w.has(layer + "block_sparse_moe.router.layer.weight"))
    return {layer,
            "block_sparse_moe.router.layer",
            "gate_proj",
            "up_proj",
            "down_proj",
            "gate.e_score_correction_bias",
            "shared_mlp.",
            "block_sparse_moe.input_linear.weight",
            "block_sparse_moe.output_linear.weight",
            "input_linear.weight",
            "output_linear.weight"};
  // transformers 5's own names for them (GraniteMoeSWA's checkpoints, which have no others).
  if ((c.arch == "granitemoe" || c.arch == "granitemoeshared") && w.has(layer + "block_sparse_moe.router.weight"))
    return {layer,
            "block_sparse_moe.router",
            "gate_proj",
            "up_proj",
            "down_proj",
            "gate.e_score_correction_bias",
            "shared_mlp.",
            "block_sparse_moe.experts.gate_up_proj",
            "block_sparse_moe.experts.down_proj",
            "input_linear.weight",
            "output_linear.weight"};
  if (c.arch == "exaone_moe" && w.has(layer + "mlp.e_score_correction_bias"))  // the Hub's (GGUF's: under gate)
    return {layer + "mlp.", "gate", "gate_proj", "up_proj", "down_proj", "e_score_correction_bias"};
  if (c.arch == "flint")  // its ungated shared expert under Qwen2-MoE's name
    return {layer + "mlp.", "gate", "gate_proj", "up_proj", "down_proj", "gate.e_score_correction_bias", "shared_expert."};
  if (c.arch == "ernie4_5_moe")  // its selection bias [1, E] (read as [E]: Checkpoint::open)
    return {layer + "mlp.", "gate", "gate_proj", "up_proj", "down_proj", "moe_statics.e_score_correction_bias"};
  return {layer + "mlp.", "gate", "gate_proj", "up_proj", "down_proj"};
}

// gpt-oss's expert biases, of the rank's experts: gate_up_bias from the matrices `gate_up` [E,
// cols] (the Hub's one interleaved [E, 2I], or GGUF's gate and up [E, I]), of each the columns
// `kept` (moe_block.h's order: the rank's gate biases, then its up biases), and down_proj_bias
// [E, hidden]. Cut by columns, every rank holds a part of each expert and rank 0 adds the down
// bias (as the o_proj bias); cut by experts (first_expert > 0 or a rank's whole I), each rank its own.
Status load_expert_biases(WeightLoader& w, const ModelConfig& c, const std::string& pre, const MoeShard& sh,
                          const std::vector<std::string>& gate_up, int64_t cols, const std::vector<int64_t>& kept,
                          MoeBlock& b) {
  const int64_t hidden = c.hidden_size;
  const Slice experts{sh.first_expert, sh.n_experts};
  BRIGADE_ASSIGN_OR_RETURN(b.gate_up_bias, w.gathered_f32(gate_up, c.n_experts, cols, experts, kept));
  const bool adds_down_bias = sh.inter == c.moe_intermediate_size || sh.inter_begin == 0;
  if (!adds_down_bias) return w.skip(pre + "experts.down_proj_bias", {c.n_experts, hidden});
  std::vector<int64_t> all_hidden(static_cast<size_t>(hidden));
  std::iota(all_hidden.begin(), all_hidden.end(), 0);
  BRIGADE_ASSIGN_OR_RETURN(b.down_bias, w.gathered_f32({pre + "experts.down_proj_bias"}, c.n_experts, hidden, experts,
                                                       all_hidden));
  return Status::ok();
}

// gpt-oss's experts (moe_block.h): transposed and interleaved, with biases. The rank's experts,
// and of each its columns [inter_begin, + inter): gate rows 2j, then up rows 2j + 1.
Status load_gpt_oss_experts(WeightLoader& w, const ModelConfig& c, const std::string& pre, const MoeShard& sh,
                            bool quantize_gate_up, bool quantize_down, MoeBlock& b) {
  const int64_t hidden = c.hidden_size, inter = c.moe_intermediate_size;
  const Slice experts{sh.first_expert, sh.n_experts}, cols{sh.inter_begin, sh.inter};
  std::vector<int64_t> gate_up_rows;
  for (int part = 0; part < 2; ++part)
    for (int64_t j = 0; j < sh.inter; ++j) gate_up_rows.push_back(2 * (sh.inter_begin + j) + part);
  std::vector<int64_t> all_hidden(static_cast<size_t>(hidden));
  std::iota(all_hidden.begin(), all_hidden.end(), 0);
  const std::string gate_up = pre + "experts.gate_up_proj", down = pre + "experts.down_proj";
  // The Hub's MXFP4 checkpoints store the experts untransposed, [E, 2I, hidden] and [E, hidden, I].
  const bool mxfp4 = w.has(gate_up + "_blocks");
  w.quantize_linear(quantize_gate_up);
  BRIGADE_ASSIGN_OR_RETURN(b.gate_up, mxfp4 ? w.stacked_mxfp4(gate_up, c.n_experts, 2 * inter, hidden, experts, gate_up_rows)
                                            : w.stacked_transposed(gate_up, c.n_experts, 2 * inter, hidden, experts,
                                                                   gate_up_rows));
  w.quantize_linear(quantize_down);
  BRIGADE_ASSIGN_OR_RETURN(b.down, mxfp4 ? w.stacked_mxfp4(down, c.n_experts, hidden, inter, experts, all_hidden, cols)
                                         : w.stacked_transposed(down, c.n_experts, hidden, inter, experts, all_hidden,
                                                                cols));
  w.quantize_linear(true);
  return load_expert_biases(w, c, pre, sh, {pre + "experts.gate_up_proj_bias"}, 2 * inter, gate_up_rows, b);
}

// Whether rows of `cols` elements are quantized to `q` (whole blocks of it only).
bool quantizes(std::optional<DType> q, int64_t cols) { return q && cols % dtype_block_elems(*q) == 0; }

}  // namespace

Expected<MoeBlock> load_moe_block(WeightLoader& w, const ModelConfig& c, int l, const MoeShard& sh,
                                  std::optional<DType> quantize_experts) {
  const MoeNames names = moe_names(w, c, l);
  const std::string& pre = names.pre;
  const int64_t hidden = c.hidden_size, inter = c.moe_intermediate_size;
  MoeBlock b;
  w.quantize_linear(false);  // the router and shared experts stay float under weights: q8_0
  const int64_t routed = int64_t{c.n_experts} + c.n_zero_experts;  // the router's choices (zero experts: LongCat)
  BRIGADE_ASSIGN_OR_RETURN(b.router, w.matrix(pre + names.router + ".weight", routed, hidden));
  if (c.moe_biases) {
    BRIGADE_ASSIGN_OR_RETURN(b.router_bias, w.vector_f32({pre + names.router + ".bias"}, {routed}));
  }
  if (c.moe_score_bias) {
    BRIGADE_ASSIGN_OR_RETURN(b.bias, w.vector_f32({pre + names.score_bias}, {routed}));
  }
  if (const int64_t shared = c.shared_width(); shared > 0) {
    const Slice cols{sh.shared_begin, sh.shared};
    const char* shared_prefix = names.shared != nullptr ? names.shared
                                : c.shared_gate         ? "shared_expert."
                                                        : "shared_experts.";
    const std::string sp = pre + shared_prefix;
    if (c.arch == "cohere2_moe" && c.routed_scaling_factor != 1.0f) {
      // Cohere2 MoE's "average": (routed + shared) / 2; the shared half scales its up rows (exact for 1/2).
      BRIGADE_ASSIGN_OR_RETURN(b.shared_gate_up, w.scaled({sp + "gate_proj.weight", sp + "up_proj.weight"},
                                                          {shared, shared}, hidden, {cols, cols},
                                                          {1.0f, c.routed_scaling_factor}));
    } else if (names.shared_fused_gate_up != nullptr) {  // gate rows, then up rows: this rank's columns of each
      const std::string gate_up = sp + names.shared_fused_gate_up;
      BRIGADE_ASSIGN_OR_RETURN(b.shared_gate_up, w.fused({gate_up, gate_up}, {2 * shared, 2 * shared}, hidden,
                                                         {cols, {shared + cols.begin, cols.size}}));
    } else {
      BRIGADE_ASSIGN_OR_RETURN(b.shared_gate_up, w.fused({sp + "gate_proj.weight", sp + "up_proj.weight"},
                                                         {shared, shared}, hidden, {cols, cols}));
    }
    BRIGADE_ASSIGN_OR_RETURN(b.shared_down, w.matrix(sp + names.shared_down, hidden, shared, {}, cols));
    if (c.shared_gate) {
      BRIGADE_ASSIGN_OR_RETURN(b.shared_gate, w.matrix(pre + "shared_expert_gate.weight", 1, hidden));
    }
  }
  // Of each held expert, its gate rows then its up rows (this rank's columns of I), and its
  // down_proj's matching columns.
  const Slice experts{sh.first_expert, sh.n_experts}, cols{sh.inter_begin, sh.inter};
  if (w.has(pre + "experts.gate_proj")) {  // GGUF's: gate and up apart, in their stored block types
    const std::vector<Slice> rows{cols};
    const bool keep_blocks = true;
    BRIGADE_ASSIGN_OR_RETURN(b.gate, w.stacked(pre + "experts.gate_proj", c.n_experts, inter, hidden, experts, rows, {},
                                               keep_blocks));
    BRIGADE_ASSIGN_OR_RETURN(b.up, w.stacked(pre + "experts.up_proj", c.n_experts, inter, hidden, experts, rows, {},
                                             keep_blocks));
    BRIGADE_ASSIGN_OR_RETURN(b.down, w.stacked(pre + "experts.down_proj", c.n_experts, hidden, inter, experts, {}, cols,
                                               keep_blocks));
    w.quantize_linear(true);
    if (c.moe_biases) {  // gpt-oss's: gate and up biases joined per expert as gate_up's rows
      std::vector<int64_t> kept(static_cast<size_t>(sh.inter));
      std::iota(kept.begin(), kept.end(), sh.inter_begin);
      BRIGADE_RETURN_IF_ERROR(load_expert_biases(
          w, c, pre, sh, {pre + "experts.gate_proj_bias", pre + "experts.up_proj_bias"}, inter, kept, b));
    }
    return b;
  }
  const bool quantize_gate_up = quantizes(quantize_experts, hidden), quantize_down = quantizes(quantize_experts, sh.inter);
  if (c.arch == "gpt_oss") {
    BRIGADE_RETURN_IF_ERROR(load_gpt_oss_experts(w, c, pre, sh, quantize_gate_up, quantize_down, b));
    return b;
  }
  if (c.experts_transposed) {  // Qwen3-VL-MoE's Hub layout: [E, hidden, 2 I] (gate, then up) and [E, I, hidden]
    std::vector<int64_t> gate_up_rows, all_hidden(static_cast<size_t>(hidden));
    for (int64_t part = 0; part < 2; ++part)
      for (int64_t j = 0; j < sh.inter; ++j) gate_up_rows.push_back(part * inter + sh.inter_begin + j);
    std::iota(all_hidden.begin(), all_hidden.end(), 0);
    w.quantize_linear(quantize_gate_up);
    BRIGADE_ASSIGN_OR_RETURN(b.gate_up, w.stacked_transposed(pre + "experts.gate_up_proj", c.n_experts, 2 * inter, hidden,
                                                             experts, gate_up_rows));
    w.quantize_linear(quantize_down);
    BRIGADE_ASSIGN_OR_RETURN(b.down, w.stacked_transposed(pre + "experts.down_proj", c.n_experts, hidden, inter, experts,
                                                          all_hidden, cols));
    w.quantize_linear(true);
    return b;
  }
  if (w.has(pre + names.fused_gate_up)) {  // transformers 5's fused layout (Granite's Hub one): already ours
    w.quantize_linear(quantize_gate_up);
    BRIGADE_ASSIGN_OR_RETURN(b.gate_up, w.stacked(pre + names.fused_gate_up, c.n_experts, 2 * inter, hidden, experts,
                                                  {cols, {inter + sh.inter_begin, sh.inter}}));
    w.quantize_linear(quantize_down);
    BRIGADE_ASSIGN_OR_RETURN(b.down, w.stacked(pre + names.fused_down, c.n_experts, hidden, inter, experts, {}, cols));
    w.quantize_linear(true);
    return b;
  }
  // DBRX (models/dbrx_config.h): gate and up per expert, down one stack [E, I, hidden] (transposed).
  const bool down_stacked = c.arch == "dbrx";
  std::vector<std::string> gate_up_names, down_names;
  std::vector<int64_t> gate_up_rows, down_rows;
  for (int e = 0; e < c.n_experts; ++e) {
    const std::string ex = pre + "experts." + std::to_string(e) + ".";
    const std::string gate = ex + names.gate + ".weight", up = ex + names.up + ".weight", down = ex + names.down + ".weight";
    if (e < sh.first_expert || e >= sh.first_expert + sh.n_experts) {  // another expert-parallel rank's
      BRIGADE_RETURN_IF_ERROR(w.skip(gate, {inter, hidden}));
      BRIGADE_RETURN_IF_ERROR(w.skip(up, {inter, hidden}));
      if (!down_stacked) BRIGADE_RETURN_IF_ERROR(w.skip(down, {hidden, inter}));
      continue;
    }
    gate_up_names.insert(gate_up_names.end(), {gate, up});
    gate_up_rows.insert(gate_up_rows.end(), {inter, inter});
    down_names.push_back(down);
    down_rows.push_back(hidden);
  }
  const std::vector<Slice> gate_up_slices(gate_up_names.size(), cols);
  w.quantize_linear(quantize_gate_up);
  BRIGADE_ASSIGN_OR_RETURN(b.gate_up, w.fused(gate_up_names, gate_up_rows, hidden, gate_up_slices));
  w.quantize_linear(quantize_down);
  if (down_stacked) {
    std::vector<int64_t> all_hidden(static_cast<size_t>(hidden));
    std::iota(all_hidden.begin(), all_hidden.end(), 0);
    BRIGADE_ASSIGN_OR_RETURN(b.down, w.stacked_transposed(pre + names.fused_down, c.n_experts, hidden, inter, experts,
                                                          all_hidden, cols));
  } else {
    BRIGADE_ASSIGN_OR_RETURN(b.down, w.fused(down_names, down_rows, inter, {}, cols));
  }
  w.quantize_linear(true);
  return b;
}

Expected<MoeScratch> allocate_moe_scratch(Backend& backend, const ModelConfig& c, const MoeShard& sh, int64_t t) {
  const int k = c.n_experts_per_tok;
  const int64_t hidden = c.hidden_size, shared = sh.shared;
  const DType a = backend.activation_dtype();
  MoeScratch s;
  BRIGADE_ASSIGN_OR_RETURN(s.router_logits, alloc_tensor(backend, DType::f32, t, int64_t{c.n_experts} + c.n_zero_experts));
  BRIGADE_ASSIGN_OR_RETURN(s.ids, alloc_tensor(backend, DType::i32, t, k));
  BRIGADE_ASSIGN_OR_RETURN(s.weights, alloc_tensor(backend, DType::f32, t, k));
  const size_t ws = backend.moe_workspace_bytes(t, k, hidden, sh.inter);
  BRIGADE_ASSIGN_OR_RETURN(s.workspace, alloc_tensor(backend, DType::u8, 1, static_cast<int64_t>(ws)));
  if (shared > 0) {
    BRIGADE_ASSIGN_OR_RETURN(s.shared_gate_up, alloc_tensor(backend, a, t, 2 * shared));
    BRIGADE_ASSIGN_OR_RETURN(s.shared_act, alloc_tensor(backend, a, t, shared));
    BRIGADE_ASSIGN_OR_RETURN(s.shared_out, alloc_tensor(backend, a, t, hidden));
  }
  if (shared > 0 && c.shared_gate) {
    BRIGADE_ASSIGN_OR_RETURN(s.gate_logits, alloc_tensor(backend, DType::f32, t, 1));
    BRIGADE_ASSIGN_OR_RETURN(s.gate_ids, alloc_tensor(backend, DType::i32, t, 1));
    BRIGADE_ASSIGN_OR_RETURN(s.gate_weights, alloc_tensor(backend, DType::f32, t, 1));
    const size_t gws = backend.moe_workspace_bytes(t, 1, hidden, shared);
    BRIGADE_ASSIGN_OR_RETURN(s.gate_workspace, alloc_tensor(backend, DType::u8, 1, static_cast<int64_t>(gws)));
  }
  return s;
}

void run_moe_block(Backend& backend, const ModelConfig& c, const MoeShard& shard, const MoeBlock& block,
                   const MoeScratch& s, const Tensor& normed, const Tensor& delta) {
  const int64_t n = normed.dim(0);
  const Tensor logits = s.router_logits.tensor.rows(0, n);
  const Tensor ids = s.ids.tensor.rows(0, n);
  const Tensor weights = s.weights.tensor.rows(0, n);
  MoeRouting routing = c.moe_routing();
  routing.bias = block.bias.tensor;
  routing.first_expert = shard.first_expert;
  backend.matmul(normed, block.router.tensor, block.router_bias.tensor, logits);
  backend.moe_route(logits, routing, ids, weights);
  MoeExpertMlp mlp;
  mlp.gate_up_bias = block.gate_up_bias.tensor;
  mlp.down_bias = block.down_bias.tensor;
  mlp.swiglu_limit = c.swiglu_limit;
  mlp.swiglu_alpha = c.swiglu_alpha;
  mlp.relu2 = c.relu2_experts;
  mlp.weight_on_input = c.moe_weight_on_input;
  if (block.gate_up.tensor.empty())
    backend.moe_experts_split(normed, block.gate.tensor, block.up.tensor, block.down.tensor, ids, weights, mlp,
                              s.workspace.tensor, delta);
  else
    backend.moe_experts(normed, block.gate_up.tensor, block.down.tensor, ids, weights, mlp, s.workspace.tensor, delta);
  // LongcatFlashMoE: the ids past the real experts (moe_experts skipped them) return their input.
  if (c.n_zero_experts > 0) backend.moe_identity_experts(normed, ids, weights, c.n_experts, delta);
  if (block.shared_gate_up.tensor.empty()) return;
  const Tensor out = s.shared_out.tensor.rows(0, n);
  if (!block.shared_gate.tensor.empty()) {
    // Qwen2MoeSparseMoeBlock: + sigmoid(x · shared_expert_gate) * shared_expert(x), run as one
    // expert that every token takes with its sigmoid score as the weight (each rank its columns:
    // the all-reduce sums the weighted parts).
    const Tensor g_logits = s.gate_logits.tensor.rows(0, n), g_ids = s.gate_ids.tensor.rows(0, n);
    const Tensor g_weights = s.gate_weights.tensor.rows(0, n);
    MoeRouting one;
    one.k = 1;
    one.scoring = MoeScoring::sigmoid;
    backend.matmul(normed, block.shared_gate.tensor, Tensor(), g_logits);
    backend.moe_route(g_logits, one, g_ids, g_weights);
    backend.moe_experts(normed, block.shared_gate_up.tensor, block.shared_down.tensor, g_ids, g_weights, MoeExpertMlp{},
                        s.gate_workspace.tensor, out);
    backend.add(delta, out);
    return;
  }
  if (c.relu2_experts) {  // NemotronHMoE: experts(x) + shared_experts(x), relu2 MLPs (shared_gate_up holds up_proj)
    const Tensor act = s.shared_act.tensor.rows(0, n);
    backend.matmul(normed, block.shared_gate_up.tensor, Tensor(), act);
    backend.relu_squared(act);
    backend.matmul(act, block.shared_down.tensor, Tensor(), out);
    backend.add(delta, out);
    return;
  }
  // DeepseekV3MoE: experts(x) + shared_experts(x).
  const Tensor gate_up = s.shared_gate_up.tensor.rows(0, n), act = s.shared_act.tensor.rows(0, n);
  backend.matmul(normed, block.shared_gate_up.tensor, Tensor(), gate_up);
  backend.silu_mul(gate_up, act);
  backend.matmul(act, block.shared_down.tensor, Tensor(), out);
  backend.add(delta, out);
}

}  // namespace brigade
