// Internal to models/: llama.cpp's `phimoe` GGUF architecture (Phi-3.5-MoE), read into the
// ModelConfig of the safetensors phimoe (models/phimoe_config.h) with llama.cpp's rules where its
// graph differs from transformers' PhimoeForCausalLM (src/models/phimoe.cpp's tensors, run by
// phi3.cpp's graph), as the deepseek2 reader follows llama.cpp:
//   - every norm (attn_norm, ffn_norm, output_norm) an RMSNorm plus its bias (.bias), not
//     transformers' LayerNorm (ModelConfig::norm_bias without layer_norms);
//   - every layer expert_count experts of feed_forward_length (ffn_gate_inp the router, the
//     experts stacked as qwen3moe's: models/gguf_moe.h), the top expert_used_count of the router's
//     softmax renormalised (build_moe_ffn with softmax gating and norm_w), not sparsemixer;
//   - longrope's lists as the tensors rope_factors_long / rope_factors_short ([rotary dims / 2]),
//     rope.scaling.original_context_length, and cos/sin times rope.scaling.attn_factor (the
//     converter's sqrt(1 + ln(factor) / ln(original)), not short_mscale / long_mscale); the long
//     list where context_length exceeds the original one (llama.cpp: where its context does);
//   - no sliding window (llama.cpp's phimoe reads none; attention.sliding_window is ignored);
//   - q/k/v biases (attn_q/k/v.bias) where stored, attn_output.bias, the logits' output.bias.
// Refused by name: rope.scaling.attn_factor other than 1 without the longrope tensors (llama.cpp
// would scale plain RoPE by it), one longrope list without the other.
#pragma once

#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

bool is_gguf_phimoe(const std::string& gguf_arch);

// phimoe's keys beyond those read_config reads (above); arch becomes phimoe.
Status read_gguf_phimoe(const GgufFile& g, ModelConfig& c);

// The checkpoint name of a phimoe tensor that the shared GGUF tables do not name: the norms'
// biases (blk.N.attn_norm.bias, ffn_norm.bias, output_norm.bias) and output.bias; "" otherwise.
std::string gguf_phimoe_name(const std::string& gguf_name);

// Whether `gguf_name` is one of longrope's factor tensors (rope_factors_long / _short.weight).
bool is_gguf_longrope_factors(const std::string& gguf_name);
// Reads one of them (t, [rotary dims / 2] positive factors) into c's longrope lists; corrupt
// naming the tensor for another shape or a factor that is not a positive number.
Status read_gguf_longrope_factors(const GgufFile& g, const std::string& gguf_name, const RawTensor& t, ModelConfig& c);

// After the tensors: longrope where both lists were read (which list runs, its attention factor),
// the refusals above, and the experts' shapes (check_gguf_moe_tensors).
Status finish_gguf_phimoe(const GgufFile& g, ModelConfig& c);

}  // namespace brigade
