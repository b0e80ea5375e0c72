// Internal to models/: llama.cpp's Gated DeltaNet GGUF architectures, `qwen35` (Qwen3.5's
// language models, dense), `qwen35moe` (Qwen3.5-MoE) and `qwen3next` (Qwen3-Next), read into the
// ModelConfig the safetensors path builds for qwen3_5_text, qwen3_5_moe_text and qwen3_next
// (models/state_space_config.h), as llama.cpp's loader (src/models/qwen35.cpp, qwen35moe.cpp,
// qwen3next.cpp) reads them.
//
// What llama.cpp's converter (conversion/qwen.py: Qwen3NextModel, and for Qwen3.5 its
// _LinearAttentionVReorderBase) writes:
//   - {arch}.ssm.conv_kernel, state_size (linear_key_head_dim N), group_count (linear_num_key_heads
//     G), time_step_rank (linear_num_value_heads H), inner_size (H * linear_value_head_dim);
//     full_attention_interval, and attention.recurrent_layers (one bool per block) in newer files;
//     attention.key_length (head_dim), rope.dimension_count (head_dim * partial_rotary_factor),
//     rope.dimension_sections (Qwen3.5's M-RoPE, run here as one position per token: text only);
//     the experts' counts and widths as qwen2moe's; block_count counting the MTP blocks that
//     newer converters append (nextn_predict_layers of them, blk.{L..}.*: not loaded here);
//   - per linear-attention block: attn_qkv (q | k | v rows), attn_gate (z), ssm_beta / ssm_alpha
//     (b, a; qwen3next: ssm_ba, per key head its b then its a rows, as in_proj_ba), ssm_conv1d
//     [q|k|v channels, conv_kernel], ssm_dt.bias (dt_bias), ssm_a (-exp(A_log), the exponent taken
//     by the converter), ssm_norm (the gated norm), ssm_out; per attention block attn_q (each
//     head's query rows then its output gate's, as q_proj), attn_k, attn_v, attn_output,
//     attn_q_norm, attn_k_norm; attn_norm and post_attention_norm (the norm before the MLP);
//     every zero-centred RMSNorm weight (all but ssm_norm) with its 1 added: the file holds 1 + w;
//   - Qwen3.5 only: where linear_num_value_heads differs from linear_num_key_heads, the value
//     heads reordered from the checkpoint's grouped order (key head g's r = H / G heads
//     together) to a tiled one (head j * G + g is the checkpoint's g * r + j): v's rows of
//     attn_qkv and its conv channels, attn_gate, ssm_beta, ssm_alpha, ssm_a, ssm_dt and
//     ssm_out's columns. Rather than undo it, brigade runs the file's order:
//     SsmLayout::tiled_heads (value head h takes key head h % G, as llama.cpp's graph does).
// Tensors load under the checkpoint's names (model.layers.N.linear_attn.in_proj_qkv ...;
// ssm_a as linear_attn.A_log, holding A) and StateSpaceModel takes a GGUF file's ssm_a and norms
// as stored (Checkpoint::format() "gguf"). Refused by name: qwen3next's legacy ssm_in (the
// unsplit in_proj_qkvz), experts fused as ffn_gate_up_exps (--fuse-gate-up-exps).
#pragma once

#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"

namespace brigade {

bool is_gguf_qwen35(const std::string& gguf_arch);  // qwen35, qwen35moe, qwen3next

// Fills the Gated DeltaNet, layer and MoE fields of c (arch becomes qwen3_5_text,
// qwen3_5_moe_text or qwen3_next; n_layers loses the MTP blocks), the common keys read already.
// corrupt naming the key for values out of range, missing or inconsistent.
Status read_gguf_qwen35(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c);

// llama.cpp's ssm.* keys under `a` ("qwen35." ...) into l: time_step_rank heads (Gated DeltaNet's
// value heads) of inner_size / time_step_rank channels, group_count groups (key heads),
// state_size, conv_kernel; corrupt naming the key when one is missing or they do not fit.
// (Also Falcon-H1's, models/gguf_falcon_h1.h.)
Status read_gguf_ssm_layout(const GgufFile& g, const std::string& a, SsmLayout& l);

// The Hugging Face name (under model.layers.N.) of such a block tensor's suffix, or "" for the
// suffixes every architecture shares (and the MTP blocks' nextn.* tensors).
std::string gguf_qwen35_layer_name(const std::string& suffix);

// unsupported naming the tensor for layouts brigade does not read (see above).
Status check_gguf_qwen35_tensors(const GgufFile& g, const ModelConfig& c);

}  // namespace brigade
