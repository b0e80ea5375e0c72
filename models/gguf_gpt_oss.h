// Internal to models/: llama.cpp's `gpt-oss` GGUF architecture (gpt-oss-20b, gpt-oss-120b), read
// into the ModelConfig the safetensors path builds for gpt_oss (models/model_config.cpp), as
// llama.cpp's loader (src/models/openai-moe.cpp) reads it.
//
// What llama.cpp's converter (conversion/gpt_oss.py GptOssModel) writes:
//   - gpt-oss.expert_count, expert_used_count, expert_feed_forward_length (intermediate_size),
//     attention.sliding_window, attention.key_length / value_length (head_dim: 64, while hidden
//     / heads is 45 on the 20B), rope.freq_base, rope.scaling.type yarn with its factor,
//     original_context_length and yarn_beta_fast / yarn_beta_slow;
//   - blk.N.attn_{q,k,v,output}.{weight,bias}, attn_sinks.weight [heads] (self_attn.sinks),
//     attn_norm and post_attention_norm, the router ffn_gate_inp.{weight,bias}, and the experts
//     split out of the Hub's interleaved gate_up_proj: ffn_gate_exps / ffn_up_exps [E, I,
//     hidden] and ffn_down_exps [E, hidden, I], each with a bias (.bias [E, I] / [E, hidden]).
//     The MXFP4 experts are repacked into ggml's MXFP4 blocks bit for bit; q/k rows are not
//     permuted (neox RoPE).
// What llama.cpp decides rather than reads (and brigade with it):
//   - the even layers slide (load_swa_pattern 2; attention.sliding_window_pattern when present);
//   - the experts' SwiGLU is clamped at 7 with alpha 1.702 (LLM_FFN_SWIGLU_OAI_MOE; the Hub's
//     swiglu_limit), routing is softmax over the top k of the biased router logits;
//   - <|return|>, <|call|> and <|endoftext|>, found by their text, end generation besides eos
//     (<|end|> does not: it closes the analysis message before the final one); models/gguf_eog.h
//     decides that for every vocabulary.
// Where brigade follows transformers instead: YaRN's correction range is not rounded (the Hub's
// rope_scaling says truncate: false, which the GGUF has no key for; llama.cpp always rounds it
// outward, which moves the few frequencies at the range's ends).
#pragma once

#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"

namespace brigade {

bool is_gguf_gpt_oss(const std::string& gguf_arch);
// Fills the gpt_oss fields of c (arch becomes gpt_oss), the common keys (sizes, heads, key_length,
// rms eps, rope.freq_base, bos / eos) read already. corrupt naming the key for values out of
// range or missing; unsupported naming it for what the decoder cannot run.
Status read_gguf_gpt_oss(const GgufFile& g, ModelConfig& c);

// The Hugging Face name (under model.layers.N.) of a gpt-oss block tensor's suffix, or "" for
// the suffixes every architecture shares. The experts keep GGUF's split form
// (mlp.experts.{gate,up,down}_proj and their _bias), which load_moe_block reads.
std::string gguf_gpt_oss_layer_name(const std::string& suffix);

}  // namespace brigade
