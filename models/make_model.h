// Synthetic checkpoints (`brigade make-model`, DESIGN.md §4): deterministic random weights in
// the exact Hugging Face layout, so the real loading code is what runs in tests and benchmarks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace brigade {

struct SyntheticModelSpec {
  // supported: llama, qwen2 (q/k/v biases), qwen3 (q/k norms), qwen3_moe (qwen3 + experts),
  // mixtral (llama + experts in every layer, each of intermediate_size; Llama 2's chat template),
  // phi3 (llama with qkv_proj and gate_up_proj stored fused),
  // gpt_oss (biased attention with sinks, alternating 128-token windows, YaRN; every layer sparse
  // with intermediate_size-wide biased experts stacked as the Hub's bf16 checkpoints store them;
  // Llama 2's chat template, since the synthetic vocabulary has no harmony tokens),
  // qwen2_moe (qwen2 + experts and a shared expert of n_shared_experts * moe_intermediate_size
  // scaled by its sigmoid gate; Qwen2.5's chat template),
  // glm4_moe (GLM-4.5: q/k/v biases, q/k norms, half of each head rotated, layers from
  // first_k_dense_replace sparse with sigmoid routing, the selection bias and shared experts;
  // GLM-4.6's chat template),
  // deepseek_v2, deepseek_v3 (MLA + experts with shared experts; n_kv_heads and head_dim unused),
  // mamba2 (Mamba2ForCausalLM: n_heads SSM heads of head_dim, n_heads * head_dim a multiple of
  // hidden_size (expand); ssm_* below; n_kv_heads, intermediate_size and max_position unused;
  // Llama 2's chat template, as Mamba-Codestral's [INST] format),
  // mamba (MambaForCausalLM: 2 * hidden_size channels, ssm_state, conv_kernel; heads unused),
  // nemotron_h (NemotronHForCausalLM: layer_pattern's blocks, M a Mamba2 mixer of ssm_heads
  // heads of ssm_head_dim in ssm_groups groups, * attention of n_heads / n_kv_heads / head_dim,
  // - a relu2 MLP of intermediate_size),
  // qwen3_5 (Qwen3_5ForCausalLM, Qwen3.5's language model: every fourth layer gated attention of
  // n_heads / n_kv_heads / head_dim with a quarter of each head rotated, the others Gated
  // DeltaNet of ssm_heads value heads (0: n_heads) of ssm_head_dim and ssm_groups key heads of
  // ssm_state, a conv of conv_kernel taps; a SwiGLU of intermediate_size in every layer;
  // zero-centred RMSNorms; Qwen3's chat template)
  std::string arch = "llama";
  // Defaults give a ~100M-parameter Llama (tied embeddings).
  int hidden_size = 768;
  int n_layers = 12;
  int n_heads = 12;
  int n_kv_heads = 4;
  int head_dim = 0;  // 0 = hidden_size / n_heads
  int intermediate_size = 2048;
  int vocab_size = 32000;  // >= 259 (the tokenizer's specials and bytes)
  int max_position = 2048;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  bool tie_embeddings = true;
  // qwen3_moe (Qwen3MoeConfig's fields): every layer sparse unless listed in mlp_only_layers
  // or skipped by decoder_sparse_step; dense layers use intermediate_size. The expert count, k,
  // width and norm_topk_prob apply to deepseek too (deepseek_v2 always writes norm_topk_prob
  // false: transformers' DeepseekV2 does not renormalise).
  int n_experts = 8;
  int n_experts_per_tok = 2;
  int moe_intermediate_size = 256;
  bool norm_topk_prob = true;
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;
  // deepseek_v2 / deepseek_v3 (DeepseekV3Config's fields; glm4_moe's too, but the MLA ones)
  int q_lora_rank = 0;  // 0 = null (q_proj, as DeepSeek-V2-Lite)
  int kv_lora_rank = 64;
  int qk_nope_head_dim = 32;
  int qk_rope_head_dim = 16;
  int v_head_dim = 32;
  int n_shared_experts = 1;
  int first_k_dense_replace = 1;
  int n_group = 1;  // > 1: group-limited routing (v3 noaux_tc; v2 group_limited_greedy)
  int topk_group = 1;
  float routed_scaling_factor = 1.0f;
  // deepseek_v3 and glm4_moe: DeepSeek-V3's / GLM-4.5's multi-token-prediction modules (num_nextn_predict_layers),
  // module j stored as the Hub's checkpoints store it under model.layers.{n_layers + j}.:
  // embed_tokens and shared_head.head (copies of the model's embedding and lm_head), enorm, hnorm,
  // eh_proj [hidden, 2 hidden] (never FP8, as on the Hub), a decoder layer written as layer
  // n_layers + j would be (sparse past first_k_dense_replace), shared_head.norm.
  int n_mtp_layers = 0;
  // mamba2, mamba, nemotron_h (n_groups, state_size, conv_kernel); qwen3_5 (key heads, key head dim, conv_kernel)
  int ssm_groups = 1;
  int ssm_state = 128;
  int conv_kernel = 4;
  // nemotron_h, qwen3_5: its mixers' (value) heads (0: n_heads) and head size; nemotron_h: one letter per layer (M, *, -;
  // empty: "M-M-M*-" repeated); layer_pattern's length is the layer count when set.
  int ssm_heads = 0;
  int ssm_head_dim = 64;
  std::string layer_pattern;
  DType dtype = DType::bf16;  // f32, f16 or bf16 (fp8 checkpoints: of the tensors left unquantized)
  // FP8 checkpoints in the Hub's layouts (models/quant_config.h): the linear weights (attention and
  // MLP/expert projections; not the embedding, lm_head or routers) stored F8_E4M3 with F32 scales.
  // fp8_block > 0: quant_method fp8 (DeepSeek-V3, Qwen3-FP8), weight_scale_inv per
  // fp8_block x fp8_block block, modules_to_not_convert [lm_head]. Or fp8_compressed "channel" /
  // "tensor": quant_method compressed-tensors with that weight strategy, ignore [lm_head].
  int fp8_block = 0;
  std::string fp8_compressed;
  uint64_t seed = 0;          // same spec and seed => byte-identical files
};

// Writes config.json, generation_config.json, model.safetensors, tokenizer.json and
// tokenizer_config.json into out_dir (created when missing; existing files are replaced).
// Weights stream to disk one chunk at a time; memory use does not grow with the model.
// Matrices ~ N(0, 1/fan_in) (o_proj and down_proj further scaled by 1/sqrt(2 n_layers)), the
// embedding ~ N(0, 0.02^2), norm weights 1 + N(0, 0.02^2). invalid_argument for a bad spec.
// FP8 weights are those values quantized (quantize_fp8), one tensor in f32 memory at a time.
Status write_synthetic_model(const SyntheticModelSpec& spec, const std::string& out_dir);

}  // namespace brigade
