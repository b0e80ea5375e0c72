// Internal to models/: the GGUF keys several architectures' readers share (llama.cpp's loader
// reads them the same way for each): YaRN's rope.scaling and which layers slide.
#pragma once

#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"

namespace brigade {

// {a}rope.scaling: none, or YaRN as llama.cpp's converter writes a Hub rope_scaling (factor,
// original_context_length, yarn_beta_fast / slow, attn_factor) with llama.cpp's defaults for the
// keys it leaves out (the original context is context_length, beta 32 / 1), into c.rope_scaling
// (truncate left as transformers' default; gpt-oss's Hub config turns it off). Another type is
// refused, naming it.
Status read_gguf_yarn(const GgufFile& g, const std::string& a, ModelConfig& c);

// c.sliding_layers from {a}attention.sliding_window_pattern when present (n: layer l slides when
// l % n < n - 1, 0 meaning all, as llama.cpp's set_swa_pattern; or one bool per layer), else
// from default_pattern, llama.cpp's fixed rule for the architecture (gemma2 and gpt-oss 2,
// gemma3 6). `a` is the architecture's key prefix ("gemma2.").
Status read_gguf_sliding_layers(const GgufFile& g, const std::string& a, int default_pattern, ModelConfig& c);

}  // namespace brigade
