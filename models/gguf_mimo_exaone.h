// Internal to models/: llama.cpp's `mimo2` (Xiaomi MiMo-V2-Flash; conversion/mimo.py MimoV2Model)
// and `exaone-moe` (LG K-EXAONE; conversion/exaone.py ExaoneMoEModel) GGUF architectures, read
// into the ModelConfig the safetensors path builds for mimo_v2_flash / exaone_moe
// (models/mimo_exaone_config.h), as llama.cpp's loaders (src/models/mimo2.cpp,
// exaone-moe.cpp) read them:
//   - both: block_count less nextn_predict_layers decoder layers (the MTP blocks after them are
//     not loaded); attention.sliding_window (required, as llama.cpp's loaders require it) on the
//     layers attention.sliding_window_pattern marks (mimo2: required; exaone-moe: absent, every
//     4th layer full); NEOX RoPE; experts ffn_{gate,up,down}_exps, the router ffn_gate_inp, the
//     selection bias exp_probs_b.bias, sigmoid scores (expert_gating_func 2), expert groups
//     (expert_group_count / _used_count, which llama.cpp's generic loader reads);
//   - mimo2: head_count_kv one count per block, the sliding blocks' and the full blocks' (the
//     decoder runs the sliding count: ModelConfig::n_kv_heads_full), key_length the q/k heads,
//     value_length the v heads (ModelConfig::v_head_width), rope.dimension_count the rotated dims,
//     rope.freq_base the full layers' theta and rope.freq_base_swa the sliding layers' (absent:
//     freq_base), attention.value_scale (absent: 1; llama.cpp scales the attention's output, the
//     same product), attn_sinks.weight on the sliding layers; the dense layers are those without
//     ffn_gate_inp, the routing weights always renormalised and never scaled (mimo2's loader reads
//     no expert_weights_scale; build_moe_ffn's norm_w is true);
//   - exaone-moe: per-head q/k norms, RoPE on the sliding layers only; leading_dense_block_count
//     dense layers, expert_shared_count shared experts of expert_feed_forward_length each
//     (expert_shared_feed_forward_length must be their sum), expert_weights_scale,
//     expert_weights_norm.
#pragma once

#include <string>

#include "models/gguf.h"
#include "models/model_config.h"

namespace brigade {

bool is_gguf_mimo_exaone(const std::string& gguf_arch);

// Reads the keys above into c (the shared keys read by gguf_checkpoint.cpp, except mimo2's
// head_count_kv list), setting c.arch to mimo_v2_flash or exaone_moe. corrupt / unsupported
// naming the key that is missing, out of range or not run.
Status read_gguf_mimo_exaone(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c);

// A block tensor's suffix ("attn_sinks.weight") as the checkpoint name after "model.layers.N."
// ("self_attn.attention_sink_bias"), for what differs from the common names; "" otherwise.
std::string gguf_mimo_exaone_layer_name(const std::string& suffix);

}  // namespace brigade
