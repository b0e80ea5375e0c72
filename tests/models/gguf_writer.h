// A GGUF v3 writer for tests, independent of the reader: converts a Hugging Face checkpoint into
// the file llama.cpp's converter would write (tensor names, metadata keys, the q/k row
// permutation of llama models, 1-D tensors kept F32), in F32, F16, BF16 or Q8_0, with any extra
// metadata (scalars, arrays of strings, f32 and i32: a vocabulary, see gguf_vocab.h); and writes
// raw GGUF bytes so tests can corrupt them.
#pragma once

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "models/checkpoint.h"
#include "models/make_model.h"

namespace brigade::testing {

class GgufBytes {
 public:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void pad(size_t align) {
    while (bytes_.size() % align) bytes_.push_back(0);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

enum class GgufOut { f32, f16, bf16, q8_0 };

// One metadata entry. Scalars: type 4 u32, 6 f32, 7 bool (u), 8 string. Arrays (type 9) hold elements of
// elem_type 8 (strs), 6 (f32s), 5 (i32s) or 7 (bools, from i32s); the count written is that vector's size.
struct GgufKv {
  std::string key;
  uint32_t type;
  uint32_t u = 0;
  float f = 0;
  std::string s;
  uint32_t elem_type = 0;
  std::vector<std::string> strs;
  std::vector<float> f32s;
  std::vector<int32_t> i32s;
};

inline GgufKv gguf_u32(const std::string& key, uint32_t v) { return {key, 4, v}; }
inline GgufKv gguf_bool(const std::string& key, bool v) { return {key, 7, v ? 1u : 0u}; }
inline GgufKv gguf_str(const std::string& key, const std::string& v) { return {key, 8, 0, 0, v}; }
inline GgufKv gguf_strs(const std::string& key, std::vector<std::string> v) {
  GgufKv kv{key, 9};
  kv.elem_type = 8;
  kv.strs = std::move(v);
  return kv;
}
inline GgufKv gguf_f32s(const std::string& key, std::vector<float> v) {
  GgufKv kv{key, 9};
  kv.elem_type = 6;
  kv.f32s = std::move(v);
  return kv;
}
inline GgufKv gguf_i32s(const std::string& key, std::vector<int32_t> v) {
  GgufKv kv{key, 9};
  kv.elem_type = 5;
  kv.i32s = std::move(v);
  return kv;
}

inline void put_kv(GgufBytes& b, const GgufKv& e) {
  b.put_string(e.key);
  b.put<uint32_t>(e.type);
  if (e.type == 4) {
    b.put<uint32_t>(e.u);
  } else if (e.type == 6) {
    b.put<float>(e.f);
  } else if (e.type == 7) {
    b.put<uint8_t>(e.u != 0 ? 1 : 0);
  } else if (e.type == 8) {
    b.put_string(e.s);
  } else {
    b.put<uint32_t>(e.elem_type);
    if (e.elem_type == 8) {
      b.put<uint64_t>(e.strs.size());
      for (const auto& x : e.strs) b.put_string(x);
    } else if (e.elem_type == 6) {
      b.put<uint64_t>(e.f32s.size());
      for (float x : e.f32s) b.put<float>(x);
    } else if (e.elem_type == 7) {  // bools, from i32s
      b.put<uint64_t>(e.i32s.size());
      for (int32_t x : e.i32s) b.put<uint8_t>(x != 0 ? 1 : 0);
    } else {
      b.put<uint64_t>(e.i32s.size());
      for (int32_t x : e.i32s) b.put<int32_t>(x);
    }
  }
}

// llama.cpp's tensor name for a Hugging Face one.
inline std::string hf_to_gguf_name(const std::string& hf) {
  static const std::vector<std::pair<std::string, std::string>> kLayer = {
      {"input_layernorm.weight", "attn_norm.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},   {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},   {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},       {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},       {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"}, {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},        {"mlp.down_proj.weight", "ffn_down.weight"},
      {"self_attn.qkv_proj.weight", "attn_qkv.weight"}, {"mlp.gate_up_proj.weight", "ffn_up.weight"}};
  // Mixtral's experts one tensor each, as llama.cpp's converter wrote them before it stacked them
  // (blk.N.ffn_gate.E.weight; w1 gate, w3 up, w2 down), and its router.
  static const std::vector<std::pair<std::string, std::string>> kExpert = {{"w1", "ffn_gate"}, {"w3", "ffn_up"},
                                                                          {"w2", "ffn_down"}};
  if (const size_t at = hf.find(".block_sparse_moe."); at != std::string::npos) {
    const std::string blk = "blk." + hf.substr(13, at - 13) + ".", rest = hf.substr(at + 18);
    if (rest == "gate.weight") return blk + "ffn_gate_inp.weight";
    const size_t e = rest.find('.', 8);  // experts.E.wN.weight
    for (const auto& [from, to] : kExpert)
      if (rest.substr(e + 1) == from + ".weight") return blk + to + "." + rest.substr(8, e - 8) + ".weight";
    return "";
  }
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  const size_t dot = hf.find('.', prefix.size());
  for (const auto& [from, to] : kLayer)
    if (hf.substr(dot + 1) == from) return "blk." + hf.substr(prefix.size(), dot - prefix.size()) + "." + to;
  return "";
}

// convert_hf_to_gguf.py's permute(): rows of each head reordered from halves to adjacent pairs.
inline std::vector<float> permute_rows(const std::vector<float>& w, int n_heads, int64_t cols) {
  const int64_t rows = static_cast<int64_t>(w.size()) / cols, hd = rows / n_heads;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t j = 0; j < hd / 2; ++j)
      for (int64_t t = 0; t < 2; ++t)
        std::memcpy(&out[static_cast<size_t>((h * hd + 2 * j + t) * cols)], &w[static_cast<size_t>((h * hd + t * hd / 2 + j) * cols)],
                    static_cast<size_t>(cols) * 4);
  return out;
}

inline void append_q8_0(std::vector<uint8_t>& out, const std::vector<float>& x) {
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + static_cast<size_t>(i)]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    out.push_back(static_cast<uint8_t>(h & 0xff));
    out.push_back(static_cast<uint8_t>(h >> 8));
    for (int i = 0; i < 32; ++i) out.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::lround(x[b * 32 + static_cast<size_t>(i)] * id))));
  }
}

// convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors for rope_type llama3: per frequency,
// 1 (wavelength below original_max / high_freq_factor), factor (above original_max /
// low_freq_factor), else 1 / ((1 - smooth) / factor + smooth); f32 arithmetic as in torch. The
// converter takes original_max from the config's top level with a fallback of 8192 (Llama 3.x's
// value); transformers >= 5 keeps it in rope_parameters, so it is taken from there.
inline std::vector<float> llama3_rope_freq_factors(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  const float old_len = static_cast<float>(s.original_max_position);
  const float low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < c.head_dim; i += 2) {
    const float freq = 1.0f / std::pow(c.rope_theta, static_cast<float>(i) / static_cast<float>(c.head_dim));
    const float wavelen = 2.0f * static_cast<float>(M_PI) / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(s.factor);
    } else {
      const float smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      out.push_back(1.0f / ((1.0f - smooth) / s.factor + smooth));
    }
  }
  return out;
}

// Writes `ck` (an f32 checkpoint) as GGUF at `path`. llama3 RoPE scaling becomes a
// rope_freqs.weight tensor, as llama.cpp's converter writes it. A sliding window becomes
// {arch}.attention.sliding_window when `sliding_window_key` (llama.cpp's converter does not
// write it for llama; tests turn it off to see that case). `extra` entries (a vocabulary) follow
// the model's.
inline void write_gguf_from_checkpoint(const Checkpoint& ck, const std::string& path, GgufOut out_type,
                                       bool sliding_window_key = true, const std::vector<GgufKv>& extra = {}) {
  const ModelConfig& c = ck.config();
  const bool llama = c.arch == "llama" || c.arch == "mixtral";  // llama.cpp writes Mixtral as llama
  const std::string arch = llama ? "llama" : c.arch, a = arch + ".";
  std::vector<GgufKv> kv = {{"general.architecture", 8, 0, 0, arch},
                            {a + "context_length", 4, static_cast<uint32_t>(c.max_position)},
                            {a + "embedding_length", 4, static_cast<uint32_t>(c.hidden_size)},
                            {a + "block_count", 4, static_cast<uint32_t>(c.n_layers)},
                            {a + "feed_forward_length", 4, static_cast<uint32_t>(c.intermediate_size)},
                            {a + "attention.head_count", 4, static_cast<uint32_t>(c.n_heads)},
                            {a + "attention.head_count_kv", 4, static_cast<uint32_t>(c.n_kv_heads)},
                            {a + "attention.key_length", 4, static_cast<uint32_t>(c.head_dim)},
                            {a + "rope.dimension_count", 4, static_cast<uint32_t>(c.rope_dims())},
                            {a + "attention.layer_norm_rms_epsilon", 6, 0, c.rms_eps},
                            {a + "rope.freq_base", 6, 0, c.rope_theta}};
  if (c.rope_scaling.type == RopeScalingType::linear) {
    kv.push_back({a + "rope.scaling.type", 8, 0, 0, "linear"});
    kv.push_back({a + "rope.scaling.factor", 6, 0, c.rope_scaling.factor});
  }
  if (c.sliding_window > 0 && sliding_window_key)
    kv.push_back({a + "attention.sliding_window", 4, static_cast<uint32_t>(c.sliding_window)});
  kv.insert(kv.end(), extra.begin(), extra.end());
  struct Out { std::string name; std::vector<int64_t> shape; uint32_t type; std::vector<uint8_t> data; };
  std::vector<Out> outs;
  auto factors = [&](const char* name, const std::vector<float>& f) {
    Out o{name, {static_cast<int64_t>(f.size())}, 0, std::vector<uint8_t>(f.size() * 4)};
    std::memcpy(o.data.data(), f.data(), o.data.size());
    outs.push_back(std::move(o));
  };
  if (c.rope_scaling.type == RopeScalingType::llama3) factors("rope_freqs.weight", llama3_rope_freq_factors(c));
  if (c.rope_scaling.type == RopeScalingType::longrope) {  // as llama.cpp's Phi3MiniModel writes them
    factors("rope_factors_long.weight", c.rope_scaling.long_factor);
    factors("rope_factors_short.weight", c.rope_scaling.short_factor);
  }
  for (const auto& [name, t] : ck.tensors()) {
    std::vector<float> x(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) x[static_cast<size_t>(i)] = static_cast<float>(t.at(i));
    const int64_t cols = t.shape.back();
    if (llama && name.ends_with("q_proj.weight")) x = permute_rows(x, c.n_heads, cols);
    if (llama && name.ends_with("k_proj.weight")) x = permute_rows(x, c.n_kv_heads, cols);
    Out o{hf_to_gguf_name(name), t.shape, 0, {}};
    if (t.shape.size() == 1 || out_type == GgufOut::f32) {
      o.data.resize(x.size() * 4);
      std::memcpy(o.data.data(), x.data(), o.data.size());
    } else if (out_type == GgufOut::bf16 || out_type == GgufOut::f16) {
      const bool bf = out_type == GgufOut::bf16;
      o.type = bf ? 30 : 1;
      for (float f : x) {
        const uint16_t h = bf ? f32_to_bf16(f) : f32_to_f16(f);
        o.data.push_back(static_cast<uint8_t>(h & 0xff));
        o.data.push_back(static_cast<uint8_t>(h >> 8));
      }
    } else {
      o.type = 8;
      append_q8_0(o.data, x);
    }
    outs.push_back(std::move(o));
  }
  GgufBytes b;
  b.put<uint32_t>(0x46554747);
  b.put<uint32_t>(3);
  b.put<uint64_t>(outs.size());
  b.put<uint64_t>(kv.size());
  for (const auto& e : kv) put_kv(b, e);
  uint64_t offset = 0;
  for (const auto& o : outs) {
    b.put_string(o.name);
    b.put<uint32_t>(static_cast<uint32_t>(o.shape.size()));
    for (auto it = o.shape.rbegin(); it != o.shape.rend(); ++it) b.put<uint64_t>(static_cast<uint64_t>(*it));
    b.put<uint32_t>(o.type);
    b.put<uint64_t>(offset);
    offset += (o.data.size() + 31) / 32 * 32;
  }
  b.pad(32);
  for (const auto& o : outs) {
    b.bytes().insert(b.bytes().end(), o.data.begin(), o.data.end());
    b.pad(32);
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.bytes().data()), static_cast<std::streamsize>(b.bytes().size()));
}

// A GGUF file at `path` of metadata `kv` and F32 tensors of ggml dims `tensors` (innermost first),
// all zeros: enough for Checkpoint::open's config and shape checks.
inline void write_gguf_zeros(const std::string& path, const std::vector<GgufKv>& kv,
                             const std::vector<std::pair<std::string, std::vector<uint64_t>>>& tensors) {
  GgufBytes b;
  b.put<uint32_t>(0x46554747);
  b.put<uint32_t>(3);
  b.put<uint64_t>(tensors.size());
  b.put<uint64_t>(kv.size());
  for (const auto& e : kv) put_kv(b, e);
  uint64_t offset = 0;
  for (const auto& [name, dims] : tensors) {
    b.put_string(name);
    b.put<uint32_t>(static_cast<uint32_t>(dims.size()));
    uint64_t n = 1;
    for (uint64_t d : dims) b.put<uint64_t>(d), n *= d;
    b.put<uint32_t>(0);  // F32
    b.put<uint64_t>(offset);
    offset += (n * 4 + 31) / 32 * 32;
  }
  b.pad(32);
  b.bytes().resize(b.bytes().size() + offset);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(b.bytes().data()), static_cast<std::streamsize>(b.bytes().size()));
}

// write_gguf_zeros at `path`, then Checkpoint::open of it: the status of reading it.
inline Status open_gguf_zeros(const std::string& path, const std::vector<GgufKv>& kv,
                              const std::vector<std::pair<std::string, std::vector<uint64_t>>>& tensors) {
  write_gguf_zeros(path, kv, tensors);
  auto ck = Checkpoint::open(path);
  return ck ? Status::ok() : ck.status();
}

// A tiny llama (make-model's weights: hidden 16, 1 layer, 2 heads, 1 KV head, F32; ~50 KB plus
// 64 bytes per vocabulary row) written as a Hugging Face directory `hf_dir` and as GGUF at
// `path` with `extra` metadata.
inline Status write_tiny_llama_gguf(const std::string& hf_dir, const std::string& path, int vocab_size,
                                    const std::vector<GgufKv>& extra = {}) {
  SyntheticModelSpec s;
  s.hidden_size = 16;
  s.n_layers = 1;
  s.n_heads = 2;
  s.n_kv_heads = 1;
  s.intermediate_size = 32;
  s.vocab_size = vocab_size;
  s.max_position = 256;
  s.dtype = DType::f32;
  BRIGADE_RETURN_IF_ERROR(write_synthetic_model(s, hf_dir));
  BRIGADE_ASSIGN_OR_RETURN(auto ck, Checkpoint::open(hf_dir));
  write_gguf_from_checkpoint(*ck, path, GgufOut::f32, true, extra);
  return Status::ok();
}

}  // namespace brigade::testing
