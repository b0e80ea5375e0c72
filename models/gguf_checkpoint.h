// GGUF weights as a Checkpoint: llama.cpp's metadata keys ({arch}.embedding_length, ...) become a
// ModelConfig and its tensor names (blk.N.attn_q.weight, ...) Hugging Face names, so one loader
// serves every format. Architectures: llama, qwen2, qwen3, phi3, gemma2 / gemma3 (their keys and
// rules: models/gguf_gemma.h), qwen3moe and qwen2moe (models/gguf_moe.h), gpt-oss (models/gguf_gpt_oss.h),
// deepseek2 (models/gguf_deepseek2.h) and the others gguf_checkpoint.cpp lists.
//
// Layout notes:
//   - GGUF dims are innermost first; RawTensor shapes are outermost first (HF order).
//   - llama.cpp's converter permutes the q/k rows of llama models so that RoPE rotates adjacent
//     pairs; brigade runs those with RopeStyle::interleaved instead of undoing the permutation.
//     qwen2/qwen3/phi3 are stored unpermuted and run with neox RoPE, as in llama.cpp.
//   - phi3: blk.N.attn_qkv.weight is qkv_proj and blk.N.ffn_up.weight gate_up_proj (gate rows,
//     then up), loaded fused (ModelConfig::fused_weights); rope.dimension_count below head_dim
//     is its partial rotary. LongRoPE factor tensors (rope_factors_long/short) are refused.
//   - Every tensor is a view of the mapping, block-quantized ones (Q4_K, ...) included
//     (RawTensor::ggml says how): whether a weight stays quantized or is dequantized is decided
//     by WeightLoader, which knows the backend and the weight type asked for.
//   - RoPE: {arch}.rope.freq_base, rope.scaling.type none or linear (+ rope.scaling.factor), and
//     rope_freqs.weight [head_dim / 2], the per-frequency divisors in which llama.cpp's converter
//     stores llama3 scaling (RopeScaling::freq_factors).
//   - llama.attention.sliding_window (Mistral) is honoured, 0 meaning none; without it attention
//     is full causal, as in llama.cpp. phi3.attention.sliding_window is honoured as transformers
//     does (llama.cpp turns Phi's window off). qwen2/qwen3 ignore the key, as llama.cpp does.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

// Fills config and tensors (views of gguf's mapping) from `gguf`. unsupported for other architectures (listed) or rope scaling types; corrupt for
// missing keys or tensors of the wrong size (rope_freqs.weight included), naming them.
Status read_gguf_checkpoint(const GgufFile& gguf, ModelConfig& config, std::map<std::string, RawTensor>& tensors);

// Hugging Face name of a llama.cpp tensor name in a GGUF of `arch` (general.architecture), or ""
// when it has none (phi3's ffn_up is gate_up_proj, elsewhere up_proj; gemma2/gemma3's ffn_norm
// is pre_feedforward_layernorm, elsewhere post_attention_layernorm).
std::string gguf_to_hf_name(const std::string& gguf_name, const std::string& arch);

}  // namespace brigade
