// Helpers for the model tests: temporary directories, building StepBatches over a paged KV
// cache, and running a forward pass to host logits.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/mapped_file.h"
#include "models/model.h"

namespace brigade::testing {

// A fixture's JSON (null, with a test failure, when the file cannot be read).
inline nlohmann::json read_json(const std::string& path) {
  auto text = read_text_file(path);
  EXPECT_TRUE(text.has_value()) << path << ": " << text.status().to_string();
  return text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
}

// A string as a JSON literal: control and non-ASCII bytes shown, so a failing case names its
// input legibly.
inline std::string escaped(const std::string& s) { return nlohmann::json(s).dump(); }

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("brigade_models_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::error_code ec; std::filesystem::remove_all(path_, ec); }
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static int& counter() { static int c = 0; return c; }
  std::filesystem::path path_;
};

// One sequence's part of a step: `tokens` continue a context that already holds n_past tokens.
struct SeqChunk {
  int seq = 0;  // sequence s owns pages [s * pages_per_seq, (s + 1) * pages_per_seq)
  std::vector<int32_t> tokens;
  int n_past = 0;
  bool all_logits = false;  // logits for every row, else only for the last
};

inline StepBatch make_step(const std::vector<SeqChunk>& chunks, int page_size, int pages_per_seq) {
  StepBatch b;
  b.max_blocks = pages_per_seq;
  b.q_start.push_back(0);
  for (const auto& c : chunks) {
    const int first_row = b.n_tokens();
    for (size_t j = 0; j < c.tokens.size(); ++j) {
      const int pos = c.n_past + static_cast<int>(j);
      b.tokens.push_back(c.tokens[j]);
      b.positions.push_back(pos);
      b.slots.push_back((c.seq * pages_per_seq + pos / page_size) * page_size + pos % page_size);
    }
    b.q_start.push_back(b.n_tokens());
    b.ctx_len.push_back(c.n_past + static_cast<int>(c.tokens.size()));
    for (int k = 0; k < pages_per_seq; ++k) b.block_table.push_back(c.seq * pages_per_seq + k);
    if (c.all_logits) {
      for (int r = first_row; r < b.n_tokens(); ++r) b.logit_rows.push_back(r);
    } else {
      b.logit_rows.push_back(b.n_tokens() - 1);
    }
  }
  return b;
}

// Runs one step and returns logits [logit_rows.size() * vocab] on the host.
inline std::vector<float> run_step(Model& model, Backend& backend, const KvCache& kv, const StepBatch& b) {
  const int64_t vocab = model.config().vocab_size, r = static_cast<int64_t>(b.logit_rows.size());
  auto buf = backend.allocate(static_cast<size_t>(r * vocab) * sizeof(float));
  EXPECT_TRUE(buf.has_value());
  const Tensor logits = buf->view(DType::f32, {r, vocab});
  const Status st = model.forward(b, kv, logits);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  std::vector<float> host(static_cast<size_t>(r * vocab));
  backend.synchronize();
  backend.download(host.data(), logits);
  return host;
}

inline int argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) if (v[i] > v[best]) best = i;
  return best;
}

// Greedy decoding of sequence 0 after a prefill of n_past tokens whose last logits row is `last`
// (vocab_size values): n tokens, each run as a one-token step into kv.
inline std::vector<int32_t> greedy_decode(Model& model, Backend& backend, const KvCache& kv, const float* last,
                                          int n_past, size_t n, int page_size, int pages) {
  const int vocab = model.config().vocab_size;
  int32_t next = argmax(last, vocab);
  std::vector<int32_t> out;
  while (out.size() < n) {
    out.push_back(next);
    const auto row = run_step(model, backend, kv, make_step({{0, {next}, n_past++, false}}, page_size, pages));
    next = argmax(row.data(), vocab);
  }
  return out;
}

// The logits of sequence 0's `prompt` at every row, prefilled into kv in chunks of `size` rows
// (0: whole); the chunk of rows [from, to) carries the StepImages images_of(from, to) gives.
template <typename ImagesOf>
std::vector<float> prefill_chunks(Model& model, Backend& backend, const KvCache& kv, const std::vector<int32_t>& prompt,
                                  size_t size, int page_size, int pages, ImagesOf images_of) {
  std::vector<float> all;
  const size_t n = prompt.size();
  for (size_t from = 0; from < n; from += size == 0 ? n : size) {
    const size_t to = size == 0 ? n : std::min(n, from + size);
    StepBatch step = make_step({{0, std::vector<int32_t>(prompt.begin() + static_cast<long>(from),
                                                         prompt.begin() + static_cast<long>(to)),
                                 static_cast<int>(from), true}},
                               page_size, pages);
    step.images = images_of(from, to);
    const std::vector<float> rows = run_step(model, backend, kv, step);
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return all;
}

// The largest |got - want| over want's rows and columns, got's rows `vocab` wide; infinite for a NaN.
inline float logit_diff(const std::vector<float>& got, size_t vocab, const std::vector<std::vector<float>>& want) {
  float worst = 0.0f;
  for (size_t r = 0; r < want.size(); ++r)
    for (size_t v = 0; v < want[r].size(); ++v) {
      const float d = std::fabs(got[r * vocab + v] - want[r][v]);
      worst = std::max(worst, std::isnan(d) ? INFINITY : d);
    }
  return worst;
}

// One tensor for write_safetensors_file: dtype is the file's string ("F32", "I64", ...).
struct StEntry {
  std::string name;
  std::string dtype = "F32";
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Writes a .safetensors file independently of the library's writer (to craft bad files too).
inline void write_safetensors_file(const std::string& path, const std::vector<StEntry>& entries) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t off = 0;
  for (const auto& e : entries) {
    header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {off, off + e.bytes.size()}}};
    off += e.bytes.size();
  }
  const std::string text = header.dump();
  const uint64_t n = text.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(text.data(), static_cast<std::streamsize>(n));
  for (const auto& e : entries) out.write(reinterpret_cast<const char*>(e.bytes.data()), static_cast<std::streamsize>(e.bytes.size()));
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace brigade::testing
