// Internal to models/: llama.cpp's Falcon-H1 GGUF architecture, `falcon-h1`, read into the
// ModelConfig the safetensors path builds for falcon_h1 (models/state_space_config.h), as
// llama.cpp's loader (src/models/falcon-h1.cpp) reads it.
//
// What llama.cpp's converter (conversion/falcon.py: FalconH1Model) writes:
//   - {arch}.ssm.time_step_rank (the mixer's heads), ssm.inner_size (mamba_d_ssm),
//     ssm.state_size, ssm.group_count, ssm.conv_kernel; attention.key_length (head_dim, which may
//     differ from hidden / heads), head_count_kv, feed_forward_length, rope.freq_base;
//   - every muP multiplier folded into the weights: token_embd times embedding_multiplier, output
//     times lm_head_multiplier, attn_q / attn_v times attention_in_multiplier, attn_k times that
//     and key_multiplier, attn_output times attention_out_multiplier, ssm_in times
//     ssm_in_multiplier with its z / x / B / C / dt rows times ssm_multipliers, ssm_out times
//     ssm_out_multiplier, ffn_gate and ffn_down times mlp_multipliers; so the file has none;
//   - ssm_a (-exp(A_log)) and ssm_d as [heads, 1], ssm_dt.bias, ssm_conv1d [channels, taps] and
//     its bias, ssm_norm [groups, d_ssm / groups] where mamba_rms_norm; attn_norm (the layer's
//     input norm), ffn_norm without a .weight suffix (pre_ff_layernorm), output_norm (the final
//     norm).
// Tensors load under the checkpoint's names (model.layers.N.mamba.in_proj.weight ...; ssm_a as
// mamba.A_log, holding A, which StateSpaceModel takes as stored from a GGUF file). llama.cpp's
// graph gates before the grouped norm and loads no projection biases, as brigade's falcon_h1
// without them.
#pragma once

#include <map>
#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

bool is_gguf_falcon_h1(const std::string& gguf_arch);  // falcon-h1

// Fills the mixer, layer and attention fields of c (arch becomes falcon_h1), the common keys read
// already. corrupt naming the key for values out of range, missing or inconsistent.
Status read_gguf_falcon_h1(const GgufFile& g, ModelConfig& c);

// The Hugging Face name of such a file's block tensor suffix (under model.layers.N.) or top-level
// name; "" for the names every architecture shares.
std::string gguf_falcon_h1_layer_name(const std::string& suffix);
std::string gguf_falcon_h1_top_name(const std::string& name);

// The loaded tensors as the checkpoint's shapes: A_log and D [heads], norm.weight [d_ssm]
// (flattened), conv1d.weight [channels, 1, taps]; and which optional pieces the file has (conv
// bias, the gated norm) into c.
Status finish_gguf_falcon_h1(const GgufFile& g, std::map<std::string, RawTensor>& tensors, ModelConfig& c);

}  // namespace brigade
