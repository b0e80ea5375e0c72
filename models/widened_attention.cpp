#include "models/widened_attention.h"

#include <string>
#include <vector>

#include "models/mimo_exaone_config.h"

namespace brigade {
namespace {

std::string attn_name(int l, const char* proj) {
  return "model.layers." + std::to_string(l) + ".self_attn." + proj + ".weight";
}

int64_t v_width(const ModelConfig& c) { return c.v_head_width > 0 ? c.v_head_width : c.head_dim; }

}  // namespace

bool widened_attention(const ModelConfig& c) {
  return c.n_kv_heads_full > 0 || c.v_head_width > 0 || c.attn_value_scale != 1.0f;
}

Expected<LinearWeight> load_widened_qkv(WeightLoader& w, const ModelConfig& c, int l, const QkvLayout& shard, int rank) {
  const int64_t hd = c.head_dim, vw = v_width(c), pad = hd - vw;
  const int stored = stored_kv_heads(c, l), repeat = c.n_kv_heads / stored;
  if (pad > int64_t{stored} * vw)
    return unsupported(c.arch + ": head_dim - v_head_dim (" + std::to_string(pad) + ") exceeds v_proj's rows (" +
                       std::to_string(int64_t{stored} * vw) + "): the padding rows are v_proj rows times 0");
  const std::string q = attn_name(l, "q_proj"), k = attn_name(l, "k_proj"), v = attn_name(l, "v_proj");
  std::vector<std::string> names;
  std::vector<int64_t> rows;
  std::vector<Slice> slices;
  std::vector<float> scales;
  auto add = [&](const std::string& name, int64_t n_rows, Slice s, float scale) {
    names.push_back(name), rows.push_back(n_rows), slices.push_back(s), scales.push_back(scale);
  };
  add(q, int64_t{c.n_heads} * hd, {int64_t{rank} * shard.q_width(), shard.q_width()}, 1.0f);
  const int first = rank * shard.n_kv_heads;
  for (int h = first; h < first + shard.n_kv_heads; ++h) add(k, int64_t{stored} * hd, {(h / repeat) * hd, hd}, 1.0f);
  for (int h = first; h < first + shard.n_kv_heads; ++h) {
    add(v, int64_t{stored} * vw, {(h / repeat) * vw, vw}, c.attn_value_scale);
    if (pad > 0) add(v, int64_t{stored} * vw, {0, pad}, 0.0f);
  }
  BRIGADE_ASSIGN_OR_RETURN(OwnedTensor t, w.scaled(names, rows, c.hidden_size, slices, scales));
  LinearWeight out;
  out.groups.push_back(std::move(t));
  out.views.push_back(out.groups.back().tensor);
  return out;
}

Expected<OwnedTensor> load_widened_o(WeightLoader& w, const ModelConfig& c, int l, const QkvLayout& shard, int rank) {
  const int64_t hd = c.head_dim, vw = v_width(c);
  if (vw == hd)
    return w.matrix(attn_name(l, "o_proj"), c.hidden_size, int64_t{c.n_heads} * hd, {},
                    {int64_t{rank} * shard.q_width(), shard.q_width()});
  std::vector<int64_t> kept;
  for (int h = rank * shard.n_heads; h < (rank + 1) * shard.n_heads; ++h)
    for (int64_t d = 0; d < hd; ++d) kept.push_back(h * vw + (d < vw ? d : (d - vw) % vw));
  return w.matrix_columns(attn_name(l, "o_proj"), c.hidden_size, int64_t{c.n_heads} * vw, kept);
}

}  // namespace brigade
