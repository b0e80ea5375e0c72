// Internal to models/: MiMo-V2-Flash's attention weights in the Llama decoder's one layout
// (models/llama.cpp: every layer n_kv_heads KV heads of head_dim, k and v alike). Its full layers
// store fewer KV heads than its sliding ones and its v heads are narrower than its q/k heads
// (ModelConfig::n_kv_heads_full, v_head_width: models/mimo_exaone_config.h); loading widens them
// exactly:
//   - a full layer's stored KV head j serves the query heads of n_kv_heads / n_kv_heads_full
//     widened heads (repeat_kv's grouping: widened head h is stored head h / repeat), so its k
//     and v rows are repeated into each;
//   - each v head's v_head_width rows are followed by head_dim - v_head_width zero rows (v_proj's
//     first rows times 0), so the attention's output per head is its v_head_width values then
//     exact zeros, and o_proj's columns are laid out alike: each head's v_head_width columns then
//     head_dim - v_head_width others (that head's first ones again), which multiply those zeros;
//   - v_proj's rows are multiplied by attn_value_scale (MiMoV2FlashAttention's value scale).
// The price is KV memory: a full layer caches n_kv_heads heads where n_kv_heads_full would do,
// and every v head head_dim values where v_head_width would do (MiMo-V2-Flash: 8 KV heads of
// 192 + 192 per layer where the checkpoint's are 8 (sliding) or 4 (full) of 192 + 128).
#pragma once

#include "models/model_config.h"
#include "models/weight_loader.h"

namespace brigade {

// Whether layer weights need widening (n_kv_heads_full, v_head_width or attn_value_scale set).
bool widened_attention(const ModelConfig& c);

// Layer l's q|k|v [(H + 2 KV) * head_dim, hidden] of the widened layout: the query heads
// [rank * H, (rank + 1) * H) and widened KV heads [rank * KV, (rank + 1) * KV) of a tensor-parallel
// rank (`shard` its counts), staged as f32 (scaled rows).
Expected<LinearWeight> load_widened_qkv(WeightLoader& w, const ModelConfig& c, int l, const QkvLayout& shard, int rank);

// Layer l's o_proj [hidden, H * head_dim] for those query heads, its columns laid out as the
// widened v heads.
Expected<OwnedTensor> load_widened_o(WeightLoader& w, const ModelConfig& c, int l, const QkvLayout& shard, int rank);

}  // namespace brigade
