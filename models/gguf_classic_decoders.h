// Internal to models/: llama.cpp's GGUF architectures of older dense decoders, read into the
// ModelConfig of the safetensors gemma / starcoder2 / phi / stablelm / jais2 / nemotron / exaone
// (models/classic_decoders_config.h) as llama.cpp's loaders (src/models/gemma.cpp, starcoder2.cpp,
// phi2.cpp, stablelm.cpp) and converters (conversion/gemma.py, starcoder.py, phi.py, stablelm.py)
// have them, all with NEOX RoPE (no q/k permutation):
//   gemma       the norms' weights stored as 1 + w (the converter adds the 1: no norm_offset), the
//               embeddings times sqrt(embedding_length), the gelu-gated MLP, always tied (the
//               converter drops lm_head); attention.key_length the head width;
//   starcoder2  LayerNorms with biases (attention.layer_norm_epsilon), q/k/v/o and ffn_up / ffn_down
//               biases, the ungated gelu MLP; no window (llama.cpp's graph has none, whatever
//               the source's sliding_window); output.weight or tied;
//   phi2        one biased LayerNorm before the attention and the MLP side by side, biases
//               everywhere, rope.dimension_count of each head rotated, output.bias on the logits;
//   stablelm    LayerNorms with biases, optional q/k/v biases, optional per-head q/k LayerNorms
//               (attn_q_norm / attn_k_norm [heads, head_dim]), rope.dimension_count rotated, the
//               parallel residual where the blocks have no ffn_norm (StableLM 2 12B).
//   jais2       biased LayerNorms, q/k/v/o and ffn_up / ffn_down biases, the ungated relu2 MLP;
//   nemotron    the same (biases where present), the LayerNorm1P weights stored as 1 + w (the
//               converter adds the 1: no norm_offset), rope.dimension_count rotated;
//   exaone      Llama's layer (EXAONE 3.x), its llama3 scaling as rope_freqs (read_config).
// Files with a fused attn_qkv (old phi2 conversions) are refused by name.
#pragma once

#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"

namespace brigade {

bool is_gguf_classic_decoder(const std::string& gguf_arch);

// The keys and tensor-presence facts beyond those read_config reads; arch becomes gemma,
// starcoder2, phi, stablelm, jais2, nemotron or exaone.
Status read_gguf_classic_decoder(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c);

// The checkpoint name of a tensor the shared GGUF tables do not name: the norms' and the MLP's
// biases (attn_norm.bias, ffn_norm.bias, output_norm.bias, ffn_up.bias, ffn_down.bias) and
// output.bias; "" for any other.
std::string gguf_classic_decoder_name(const std::string& n);

}  // namespace brigade
