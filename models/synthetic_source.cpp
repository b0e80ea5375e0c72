// Synthetic models (synthetic_source.h): a Checkpoint over in-memory random pools, loaded by the
// ordinary architecture code, so the same loading and forward paths run as for real files.
#include "models/synthetic_source.h"

#include <cmath>
#include <map>
#include <sstream>
#include <vector>

#include "models/checkpoint.h"
#include "models/llama.h"

namespace brigade {

// Defined here, declared in checkpoint.h: the synthetic source is its only user.
std::unique_ptr<Checkpoint> Checkpoint::from_memory(std::string path, ModelConfig config,
                                                    std::map<std::string, RawTensor> tensors) {
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  ck->path_ = std::move(path);
  ck->format_ = "memory";
  ck->config_ = std::move(config);
  ck->tensors_ = std::move(tensors);
  return ck;
}

namespace {

ModelConfig base_config(const std::string& shape, bool& ok) {
  ModelConfig c;
  c.arch = "llama";
  c.dtype = DType::bf16;
  c.rope_style = RopeStyle::neox;
  ok = true;
  if (shape == "llama3-8b") {
    c.hidden_size = 4096, c.n_layers = 32, c.n_heads = 32, c.n_kv_heads = 8, c.head_dim = 128;
    c.intermediate_size = 14336, c.vocab_size = 128256, c.max_position = 8192, c.rope_theta = 500000.0f;
  } else if (shape == "llama3-1b") {
    c.hidden_size = 2048, c.n_layers = 16, c.n_heads = 32, c.n_kv_heads = 8, c.head_dim = 64;
    c.intermediate_size = 8192, c.vocab_size = 128256, c.max_position = 8192, c.rope_theta = 500000.0f;
    c.tie_embeddings = true;
  } else if (shape == "tiny") {
    c.hidden_size = 256, c.n_layers = 4, c.n_heads = 8, c.n_kv_heads = 2, c.head_dim = 32;
    c.intermediate_size = 512, c.vocab_size = 1000, c.max_position = 4096, c.rope_theta = 10000.0f;
  } else {
    ok = false;
  }
  c.bos_id = 1;
  c.eos_ids = {2};
  return c;
}

// One pool of bf16 values, uniform on [mean - a, mean + a] with a = sqrt(3) * stddev.
struct Pool {
  std::vector<uint16_t> values;
  int64_t next_offset = 0;
};

void fill_pool(Pool& p, int64_t n, float mean, float stddev, uint64_t seed) {
  p.values.resize(static_cast<size_t>(n));
  const float a = std::sqrt(3.0f) * stddev;
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
  for (auto& v : p.values) {
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;  // xorshift64*
    const float u = static_cast<float>((s * 0x2545f4914f6cdd1dull) >> 40) * (1.0f / 16777216.0f);
    v = f32_to_bf16(mean + a * (2.0f * u - 1.0f));
  }
}

}  // namespace

bool is_synthetic_spec(const std::string& path) { return path.rfind(kSyntheticPrefix, 0) == 0; }

namespace {

// Parses "synthetic:<shape>[,key=value...]" into a config and the pool seed.
Status parse_spec(const std::string& spec, ModelConfig& c, uint64_t& seed) {
  std::stringstream parts(spec.substr(std::string(kSyntheticPrefix).size()));
  std::string shape, kv;
  std::getline(parts, shape, ',');
  bool ok = false;
  c = base_config(shape, ok);
  if (!ok) return invalid_argument(spec + ": unknown synthetic shape '" + shape + "'; known: llama3-8b, llama3-1b, tiny");
  seed = 0;
  while (std::getline(parts, kv, ',')) {
    const size_t eq = kv.find('=');
    const std::string key = kv.substr(0, eq);
    long value = -1;
    try {
      value = eq == std::string::npos ? -1 : std::stol(kv.substr(eq + 1));
    } catch (const std::exception&) {
      value = -1;
    }
    if (value < 0 || value > (1L << 30)) return invalid_argument(spec + ": '" + kv + "' needs a non-negative integer value");
    if (key == "layers") c.n_layers = static_cast<int>(value);
    else if (key == "vocab") c.vocab_size = static_cast<int>(value);
    else if (key == "seed") seed = static_cast<uint64_t>(value);
    else return invalid_argument(spec + ": unknown key '" + key + "'; known: layers, vocab, seed");
  }
  return c.validate();
}

}  // namespace

Expected<ModelConfig> synthetic_config(const std::string& spec) {
  ModelConfig c;
  uint64_t seed = 0;
  BRIGADE_RETURN_IF_ERROR(parse_spec(spec, c, seed));
  return c;
}

Expected<std::unique_ptr<Model>> load_synthetic(const std::string& spec, Backend& backend, const LoadOptions& options) {
  ModelConfig c;
  uint64_t seed = 0;
  BRIGADE_RETURN_IF_ERROR(parse_spec(spec, c, seed));
  const int64_t hidden = c.hidden_size, q = int64_t{c.n_heads} * c.head_dim, kv = int64_t{c.n_kv_heads} * c.head_dim;
  const int64_t inter = c.intermediate_size, vocab = c.vocab_size;
  const float down_scale = 1.0f / std::sqrt(2.0f * static_cast<float>(c.n_layers));
  // Variance classes: name -> (largest numel, mean, stddev).
  struct Class { int64_t numel; float mean, stddev; };
  std::map<std::string, Class> classes = {
      {"embed", {vocab * hidden, 0.0f, 0.02f}},
      {"in", {inter * hidden, 0.0f, 1.0f / std::sqrt(static_cast<float>(hidden))}},
      {"o", {hidden * q, 0.0f, down_scale / std::sqrt(static_cast<float>(q))}},
      {"down", {hidden * inter, 0.0f, down_scale / std::sqrt(static_cast<float>(inter))}},
      {"norm", {hidden, 1.0f, 0.02f}},
  };
  constexpr int64_t kSlack = 1 << 16;  // offsets vary within this many elements
  std::map<std::string, Pool> pools;
  uint64_t k = 0;
  for (const auto& [name, cl] : classes) fill_pool(pools[name], cl.numel + kSlack, cl.mean, cl.stddev, seed * 131 + ++k);

  std::map<std::string, RawTensor> tensors;
  auto add = [&](const std::string& name, const std::string& cls, std::vector<int64_t> shape) {
    Pool& p = pools[cls];
    RawTensor t;
    t.name = name;
    t.file = spec;
    t.dtype = DType::bf16;
    t.shape = std::move(shape);
    const int64_t off = p.next_offset;
    p.next_offset = (p.next_offset + 4099) % kSlack;
    t.bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(p.values.data() + off),
                                       static_cast<size_t>(t.numel()) * 2);
    tensors.emplace(name, std::move(t));
  };
  add("model.embed_tokens.weight", "embed", {vocab, hidden});
  if (!c.tie_embeddings) add("lm_head.weight", "embed", {vocab, hidden});
  add("model.norm.weight", "norm", {hidden});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", "norm", {hidden});
    add(p + "post_attention_layernorm.weight", "norm", {hidden});
    add(p + "self_attn.q_proj.weight", "in", {q, hidden});
    add(p + "self_attn.k_proj.weight", "in", {kv, hidden});
    add(p + "self_attn.v_proj.weight", "in", {kv, hidden});
    add(p + "self_attn.o_proj.weight", "o", {hidden, q});
    add(p + "mlp.gate_proj.weight", "in", {inter, hidden});
    add(p + "mlp.up_proj.weight", "in", {inter, hidden});
    add(p + "mlp.down_proj.weight", "down", {hidden, inter});
  }
  // The pools only need to outlive loading: every weight is copied to the backend by then.
  auto ck = Checkpoint::from_memory(spec, c, std::move(tensors));
  return load_llama(*ck, backend, options);
}

}  // namespace brigade
