// Internal to models/: the Gemma 2 / Gemma 3 keys of a GGUF file (llama.cpp's `gemma2` and
// `gemma3` architectures), read into the ModelConfig the safetensors path builds for the same
// model (models/gemma_config.h), as llama.cpp's loader (src/llama-model.cpp) reads them.
//
// What llama.cpp's converter (convert_hf_to_gguf.py Gemma2Model / Gemma3Model) does to the file:
//   - every *norm.weight is stored with 1 added (Gemma's RMSNorm scales by 1 + w), so the GGUF
//     path loads them as they are (norm_offset 0) where the safetensors path adds 1;
//   - q/k rows are not permuted (neox RoPE, as transformers);
//   - lm_head is not written (tied); gemma3's token_embd drops the rows past the real vocabulary.
// What llama.cpp derives rather than reads (and brigade with it):
//   - the softmax scale: 1/sqrt(hidden / heads) for the 27B models (gemma2 of 46 layers, gemma3
//     of 62: their query_pre_attn_scalar), 1/sqrt(key_length) otherwise;
//   - which layers slide: gemma2 the even ones, gemma3 all but every 6th (set_swa_pattern 2 / 6);
//     {arch}.attention.sliding_window_pattern (an interval or one bool per layer), which the
//     converters write for other architectures, is honoured when present;
//   - gemma3's local RoPE base, 10000 unscaled ({arch}.rope.freq_base_swa when present), the
//     global layers taking rope.freq_base and rope.scaling (linear 8 for 4B and up);
//   - <end_of_turn>, found by its text in the vocabulary, ends generation besides eos;
//   - gemma2's window 4096 and soft-caps 50 / 30 when their keys are absent; gemma3 slides only
//     with attention.sliding_window > 0 and caps the logits only with final_logit_softcapping.
#pragma once

#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"

namespace brigade {

bool is_gguf_gemma(const std::string& gguf_arch);

// Fills the Gemma fields of c (arch becomes gemma2 / gemma3_text), the common keys (sizes, heads,
// key_length, rms eps, rope.freq_base and rope.scaling, bos / eos) read already. corrupt naming the key for
// values out of range; unsupported naming the key for what the decoder cannot run
// (attention.value_length other than key_length).
Status read_gguf_gemma(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c);

// The Hugging Face name of a Gemma block tensor's suffix (post_attention_norm.weight, ffn_norm.weight,
// post_ffw_norm.weight), or "" for the suffixes every architecture shares.
std::string gguf_gemma_layer_name(const std::string& suffix);

}  // namespace brigade
