#include "models/llama2c.h"

#include <cstring>

namespace brigade {
namespace {

struct Header {
  int32_t dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len;
};

Status check_header(const Header& h, const std::string& path) {
  // vocab_size may be negative (unshared classifier); its magnitude is checked.
  const int64_t v[] = {h.dim, h.hidden, h.n_layers, h.n_heads, h.n_kv_heads,
                       h.vocab < 0 ? -int64_t{h.vocab} : int64_t{h.vocab}, h.seq_len};
  const char* names[] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i)
    if (v[i] <= 0 || v[i] > (1 << 24))
      return corrupt(path + ": llama2.c header field " + names[i] + " = " + std::to_string(v[i]) +
                     " is out of range (corrupt or not a llama2.c checkpoint)");
  if (h.dim % h.n_heads != 0 || h.n_heads % h.n_kv_heads != 0)
    return corrupt(path + ": llama2.c header: dim must divide by n_heads and n_heads by n_kv_heads");
  return Status::ok();
}

}  // namespace

Status read_llama2c(const std::shared_ptr<MappedFile>& file, ModelConfig& c,
                    std::map<std::string, RawTensor>& out) {
  const std::string& path = file->path();
  Header h{};
  if (file->size() < sizeof(Header))
    return corrupt(path + ": too short for a llama2.c header (" + std::to_string(file->size()) + " bytes)");
  std::memcpy(&h, file->data(), sizeof(Header));
  BRIGADE_RETURN_IF_ERROR(check_header(h, path));
  const bool shared = h.vocab > 0;
  const int64_t dim = h.dim, hidden = h.hidden, n_layers = h.n_layers, vocab = shared ? h.vocab : -int64_t{h.vocab};
  const int64_t head = dim / h.n_heads, kv_dim = head * h.n_kv_heads;
  const int64_t per_layer = 2 * dim + 2 * dim * dim + 2 * dim * kv_dim + 3 * hidden * dim;
  const int64_t n_floats = vocab * dim + n_layers * per_layer + dim + int64_t{h.seq_len} * head +
                           (shared ? 0 : vocab * dim);
  const uint64_t want = sizeof(Header) + static_cast<uint64_t>(n_floats) * 4;
  if (want != file->size())
    return corrupt(path + ": llama2.c header describes " + std::to_string(want) + " bytes but the file has " +
                   std::to_string(file->size()) + " (truncated, or not a llama2.c checkpoint)");

  c = ModelConfig{};
  c.arch = "llama";
  c.hidden_size = h.dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.head_dim = static_cast<int>(head);
  c.intermediate_size = h.hidden;
  c.vocab_size = static_cast<int>(vocab);
  c.max_position = h.seq_len;
  c.rms_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.rope_style = RopeStyle::interleaved;
  c.tie_embeddings = shared;
  c.bos_id = 1;
  c.eos_ids = {2};
  c.dtype = DType::f32;
  BRIGADE_RETURN_IF_ERROR(c.validate());

  uint64_t offset = sizeof(Header);
  // Takes the next stacked array [n_layers, rows, cols] (or one [rows, cols] when per_layer is
  // false) and names slice l by `name(l)`.
  auto take = [&](const std::string& name, std::vector<int64_t> shape) -> Status {
    RawTensor t;
    t.name = name;
    t.file = path;
    t.dtype = DType::f32;
    t.shape = std::move(shape);
    const uint64_t n = static_cast<uint64_t>(t.numel()) * 4;
    BRIGADE_ASSIGN_OR_RETURN(t.bytes, file->bytes(offset, n, "tensor '" + name + "'"));
    offset += n;
    out[name] = std::move(t);
    return Status::ok();
  };
  auto layers = [&](const std::string& suffix, std::vector<int64_t> shape) -> Status {
    for (int64_t l = 0; l < n_layers; ++l)
      BRIGADE_RETURN_IF_ERROR(take("model.layers." + std::to_string(l) + "." + suffix, shape));
    return Status::ok();
  };
  BRIGADE_RETURN_IF_ERROR(take("model.embed_tokens.weight", {vocab, dim}));
  BRIGADE_RETURN_IF_ERROR(layers("input_layernorm.weight", {dim}));
  BRIGADE_RETURN_IF_ERROR(layers("self_attn.q_proj.weight", {dim, dim}));
  BRIGADE_RETURN_IF_ERROR(layers("self_attn.k_proj.weight", {kv_dim, dim}));
  BRIGADE_RETURN_IF_ERROR(layers("self_attn.v_proj.weight", {kv_dim, dim}));
  BRIGADE_RETURN_IF_ERROR(layers("self_attn.o_proj.weight", {dim, dim}));
  BRIGADE_RETURN_IF_ERROR(layers("post_attention_layernorm.weight", {dim}));
  BRIGADE_RETURN_IF_ERROR(layers("mlp.gate_proj.weight", {hidden, dim}));
  BRIGADE_RETURN_IF_ERROR(layers("mlp.down_proj.weight", {dim, hidden}));
  BRIGADE_RETURN_IF_ERROR(layers("mlp.up_proj.weight", {hidden, dim}));
  BRIGADE_RETURN_IF_ERROR(take("model.norm.weight", {dim}));
  offset += static_cast<uint64_t>(h.seq_len) * static_cast<uint64_t>(head) * 4;  // legacy freq_cis
  if (!shared) BRIGADE_RETURN_IF_ERROR(take("lm_head.weight", {vocab, dim}));
  BRIGADE_CHECK(offset == file->size(), "llama2.c layout consumed exactly the checked size");
  return Status::ok();
}

}  // namespace brigade
