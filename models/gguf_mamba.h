// Internal to models/: llama.cpp's GGUF files of the Mamba family, `mamba` (Mamba1, Falcon-Mamba
// with ssm.dt_b_c_rms), `mamba2`, `nemotron_h` (Nemotron-H: mixer, attention and relu2 MLP
// blocks), `nemotron_h_moe` (Nemotron 3 Nano: relu2 expert blocks), `granitehybrid` (Granite
// 4.0-H: a mixer or attention, then the shared MLP and experts, per layer) and `jamba` (Mamba1
// mixers with weighted dt/B/C norms, attention, SwiGLU and MoE layers), read into the ModelConfig
// the safetensors path builds for mamba / falcon_mamba, mamba2, nemotron_h, granitemoehybrid and
// jamba (models/state_space_config.h), as llama.cpp's loaders (src/models/mamba*.cpp,
// nemotron-h*.cpp, granite-hybrid.cpp, jamba.cpp) read them.
//
// What llama.cpp's converter (conversion/mamba.py and its subclasses) writes:
//   - {arch}.ssm.time_step_rank (the mixer's heads), ssm.inner_size, ssm.state_size,
//     ssm.group_count, ssm.conv_kernel; the layer kinds per block: head_count_kv 0 and (nemotron_h)
//     feed_forward_length 0 for a mixer, head_count_kv > 0 for attention, feed_forward_length > 0
//     for nemotron_h's MLP blocks; granitehybrid's embedding_scale, residual_scale, logit_scale and
//     attention.scale (Granite's multipliers), expert counts and widths;
//   - per mixer ssm_in, ssm_conv1d [channels, taps] (+ bias), ssm_dt.bias, ssm_a (-exp(A_log)) and
//     ssm_d as [heads, 1], ssm_norm [groups, inner / groups], ssm_out; attn_norm before each
//     block; attention's attn_q/k/v/output; nemotron_h's ffn_up / ffn_down (relu2);
//     granitehybrid's ffn_norm, the shared MLP's ffn_gate/up/down_shexp (or ffn_gate/up/down
//     without experts), the experts' ffn_gate_inp and ffn_{gate,up,down}_exps; output_norm.
// Tensors load under the checkpoint's names (backbone.layers.N.mixer.* for mamba2 and nemotron_h,
// model.layers.N.mamba.* ... for granitehybrid; ssm_a as A_log holding A, which StateSpaceModel
// takes as stored from a GGUF file).
#pragma once

#include <map>
#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

bool is_gguf_mamba(const std::string& gguf_arch);  // mamba, mamba2, nemotron_h(_moe), granitehybrid, jamba

// Fills the mixer, layer, MLP and attention fields of c (arch becomes mamba2, nemotron_h or
// granitemoehybrid), the common keys but head_count, head_count_kv and feed_forward_length read
// already. corrupt naming the key for values out of range, missing or inconsistent.
Status read_gguf_mamba(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c);

// The Hugging Face name of a file's tensor `name` (blk.N.suffix or top level); "" when it is one
// the generic names cover (granitehybrid's attention) or no layout uses.
std::string gguf_mamba_name(const std::string& gguf_arch, const std::string& name);

// The mixer-relative Hugging Face name (in_proj.weight, conv1d.weight, A_log, ...) of a Mamba2
// mixer tensor's block suffix (ssm_in.weight, ssm_conv1d.weight, ssm_a, ...), or "" (also
// Falcon-H1's, models/gguf_falcon_h1.h).
std::string gguf_mamba2_mixer_name(const std::string& suffix);

// The mixers' tensors (names with .mixer. or .mamba.) as the checkpoint's shapes: A_log (unless
// a_matrix: Mamba1's [channels, state]), D and the gated norm flattened, conv1d.weight [channels,
// taps] as [channels, 1, taps].
void reshape_gguf_mixer_tensors(std::map<std::string, RawTensor>& tensors, bool a_matrix);

// Granite's multipliers under `a` ("granite." / "granitehybrid."): embedding_scale, residual_scale,
// logit_scale (the logits divided by it) and attention.scale (the softmax scale) into c where the
// file has them; corrupt naming the key unless a positive number.
Status read_gguf_granite_scales(const GgufFile& g, const std::string& a, ModelConfig& c);

// The loaded tensors as the checkpoint's shapes (A_log, D and the gated norm flattened, conv1d
// [channels, 1, taps]) and which optional pieces the file has (the conv bias) into c.
Status finish_gguf_mamba(const GgufFile& g, std::map<std::string, RawTensor>& tensors, ModelConfig& c);

}  // namespace brigade
