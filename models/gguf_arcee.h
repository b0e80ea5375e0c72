// Internal to models/: llama.cpp's Arcee GGUF architectures, read into the ModelConfig of the
// safetensors afmoe / arcee (models/arcee_config.h) with llama.cpp's rules where its graphs
// (src/models/afmoe.cpp, arcee.cpp) differ from transformers':
//   afmoe  Arcee Trinity (conversion/afmoe.py: a LlamaModel whose tensors skip its q/k
//          permutation, so NEOX RoPE): attn_gate the output gate (self_attn.gate_proj),
//          attn_q_norm / attn_k_norm per head, post_attention_norm on the attention output,
//          ffn_norm before the MLP (pre_mlp_layernorm), post_ffw_norm after it; the embeddings
//          always times sqrt(embedding_length) (llama.cpp's graph scales whatever the source's
//          mup_enabled said); attention.sliding_window on the layers of
//          attention.sliding_window_pattern (absent: all but every 4th layer, load_swa_pattern's
//          4), and RoPE on all but every 4th layer whatever the pattern (n_no_rope_layer_step 4,
//          fixed); leading_dense_block_count dense layers, then expert_count experts of
//          expert_feed_forward_length beside expert_shared_count shared ones, routed by
//          expert_gating_func sigmoid (absent: sigmoid, as llama.cpp's loader) with exp_probs_b
//          for the choice, expert_weights_norm and expert_weights_scale as build_moe_ffn applies
//          them (read_gguf_deepseek_routing);
//   arcee  Arcee AFM (conversion/llama.py's ArceeModel: q/k permuted, NORM RoPE): Llama's layer
//          with the relu2 MLP (ffn_up, relu^2, ffn_down; no ffn_gate); rope.scaling.type none or
//          yarn (read_gguf_yarn).
#pragma once

#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"

namespace brigade {

bool is_gguf_arcee(const std::string& gguf_arch);

// The keys beyond those read_config reads (above); arch becomes afmoe or arcee.
Status read_gguf_arcee(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c);

// The checkpoint name (under model.layers.N.) of an afmoe block tensor's suffix that the shared
// GGUF tables do not name as AFMoE's checkpoints do: the gate, the norms, the router and experts; "".
std::string gguf_afmoe_layer_name(const std::string& suffix);

}  // namespace brigade
