// Internal to models/: llama.cpp's GGUF architectures of the classic GPT decoders, read into the
// ModelConfig of the safetensors gpt_neox / gpt2 / gpt_bigcode / falcon / bloom / mpt
// (models/gpt_decoders_config.h) as llama.cpp's loaders (src/models/gptneox.cpp, gpt2.cpp,
// starcoder.cpp, falcon.cpp, bloom.cpp, mpt.cpp) and converters (conversion/*.py) have them:
//   gptneox    biased LayerNorms (attention.layer_norm_epsilon), attn_qkv q|k|v (the converter
//              takes NeoX's per-head layout apart), biases by the tensors present, NEOX RoPE
//              over rope.dimension_count, use_parallel_residual (required, as llama.cpp requires
//              it), the exact-erf GELU of Pythia's hidden_act "gelu" (llama.cpp runs its tanh GELU:
//              the file does not say which), output.weight untied;
//   gpt2       learned positions (position_embd [context_length, hidden]), biased LayerNorms,
//              attn_qkv q|k|v (the converter transposes the Conv1D weights), the tanh GELU, tied
//              unless output.weight is present;
//   starcoder  gpt2's layer with head_count_kv k/v heads (the converter writes 1: MQA);
//   falcon     Falcon's parallel layer (the converter reorders query_key_value into q|k|v): on
//              attn_norm alone (Falcon-7B), or attn_norm_2 before the attention and attn_norm
//              before the MLP (Falcon-40B's ln_attn and ln_mlp, put in place by
//              finish_gguf_gpt_decoder), no biases, NEOX RoPE over whole heads, the exact GELU;
//   bloom      the embeddings' LayerNorm (token_embd_norm), biased LayerNorms and projections,
//              ALiBi with BLOOM's slopes, the tanh GELU;
//   mpt        ALiBi (attention.max_alibi_bias 8) with MPT's slopes, attention.clamp_kqv,
//              LayerNorms with a weight only, no biases, the exact GELU.
// A fused attn_qkv (weight and bias) is exposed as q_proj / k_proj / v_proj views of its rows
// (finish_gguf_gpt_decoder), whatever its block type.
#pragma once

#include <map>
#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

bool is_gguf_gpt_decoder(const std::string& gguf_arch);

// The keys beyond those read_config reads; arch becomes gpt_neox, gpt2, gpt_bigcode, falcon,
// bloom or mpt.
Status read_gguf_gpt_decoder(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c);

// The checkpoint name of a tensor the shared GGUF tables do not name (position_embd, attn_qkv.bias
// and the biases of models/gguf_classic_decoders.h); "" for any other.
std::string gguf_gpt_decoder_name(const std::string& n);

// Each layer's self_attn.qkv_proj weight and bias split into q_proj, k_proj and v_proj views
// (rows q, then k, then v); corrupt naming a fused tensor whose rows do not fit the heads.
Status finish_gguf_gpt_decoder(const GgufFile& g, std::map<std::string, RawTensor>& tensors, const ModelConfig& c);

}  // namespace brigade
