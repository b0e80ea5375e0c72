// A corrupt GGUF is an error that names the file, never a crash or a read outside the mapping:
// header fields that would overflow (tensor and key counts, string lengths, dims), tensor data
// past the end of the file, unknown ggml types; and a fuzz-style sweep of random byte flips,
// field overwrites and truncations of valid files (weights and a vocabulary-only GGUF), each of
// which must load or be refused. Run it under ASan/UBSan too:
//   BUILD_DIR=build-asan TARGETS=models_test bash scripts/build.sh -DBRIGADE_SANITIZE=address,undefined
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>

#include "cpu/cpu_backend.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "model_test_util.h"
#include "models/gguf.h"
#include "models/inspect.h"
#include "models/make_model.h"
#include "models/tokenizer.h"

namespace brigade {
namespace {

using testing::TempDir;

// A tiny llama GGUF (F32, ~50 KB) written from make-model's checkpoint.
std::vector<uint8_t> tiny_gguf(const TempDir& dir) {
  // 260: the synthetic byte-level tokenizer needs 256 bytes + specials.
  const Status st = testing::write_tiny_llama_gguf(dir.str(), dir.file("tiny.gguf"), 260);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return st.is_ok() ? testing::read_bytes(dir.file("tiny.gguf")) : std::vector<uint8_t>{};
}

// Byte offset just past the first occurrence of `name`: for a tensor, where its u32 n_dims is;
// for a metadata key, where its u32 value type is.
size_t after_name(const std::vector<uint8_t>& bytes, const std::string& name) {
  auto it = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  EXPECT_NE(it, bytes.end()) << name;
  return static_cast<size_t>(it - bytes.begin()) + name.size();
}

template <typename T>
std::vector<uint8_t> with(std::vector<uint8_t> bytes, size_t at, T value) {
  std::memcpy(&bytes[at], &value, sizeof(T));
  return bytes;
}

class GgufCorrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    good_ = tiny_gguf(dir_);
    ASSERT_FALSE(good_.empty());
    ASSERT_TRUE(Checkpoint::open(path()).has_value());
  }
  std::string path() const { return dir_.file("tiny.gguf"); }
  // Writes `bytes` and opens them; the error must have `code` and mention `needle` and the file.
  void expect_refused(const std::vector<uint8_t>& bytes, StatusCode code, const std::string& needle) {
    testing::write_bytes(dir_.file("bad.gguf"), bytes);
    auto ck = Checkpoint::open(dir_.file("bad.gguf"));
    ASSERT_FALSE(ck.has_value());
    EXPECT_EQ(ck.status().code(), code) << ck.status().to_string();
    EXPECT_NE(ck.status().message().find(needle), std::string::npos) << ck.status().to_string();
    EXPECT_NE(ck.status().message().find("bad.gguf"), std::string::npos) << ck.status().to_string();
  }
  TempDir dir_{"gguf_corrupt"};
  std::vector<uint8_t> good_;
};

// Header: "GGUF", u32 version, u64 n_tensors (offset 8), u64 n_kv (16), first key's u64 length (24).
TEST_F(GgufCorrupt, HugeCountsAndLengths) {
  expect_refused(with<uint64_t>(good_, 8, uint64_t{1} << 40), StatusCode::corrupt, "implausible");
  expect_refused(with<uint64_t>(good_, 16, ~uint64_t{0}), StatusCode::corrupt, "implausible");
  // Plausible counts that the file is too small to hold.
  expect_refused(with<uint64_t>(good_, 8, uint64_t{1} << 27), StatusCode::corrupt, "can hold");
  expect_refused(with<uint64_t>(good_, 16, uint64_t{1} << 20), StatusCode::corrupt, "can hold");
  expect_refused(with<uint64_t>(good_, 24, ~uint64_t{0}), StatusCode::corrupt, "metadata key #0");
  expect_refused(with<uint64_t>(good_, 24, uint64_t{1} << 62), StatusCode::corrupt, "metadata key #0");
}

TEST_F(GgufCorrupt, DimsThatOverflow) {
  const size_t at = after_name(good_, "token_embd.weight");
  ASSERT_EQ(good_[at], 2) << "n_dims of the embedding";
  // Each dim alone, and a product past 2^63 from two that are each plausible.
  expect_refused(with<uint64_t>(good_, at + 4, ~uint64_t{0}), StatusCode::corrupt, "implausible shape");
  auto both = with<uint64_t>(with<uint64_t>(good_, at + 4, uint64_t{1} << 32), at + 12, uint64_t{1} << 32);
  expect_refused(both, StatusCode::corrupt, "implausible shape");
  expect_refused(with<uint64_t>(good_, at + 4, 0), StatusCode::corrupt, "implausible shape");
  expect_refused(with<uint32_t>(good_, at, 5), StatusCode::corrupt, "dims (1..4)");
  // A plausible shape whose data does not fit the file.
  expect_refused(with<uint64_t>(good_, at + 4, uint64_t{1} << 20), StatusCode::corrupt, "truncated");
}

TEST_F(GgufCorrupt, TensorDataPastTheEnd) {
  const size_t at = after_name(good_, "output_norm.weight");
  ASSERT_EQ(good_[at], 1);
  const size_t offset_at = at + 4 + 8 + 4;  // n_dims, dims[0], type, then the u64 offset
  expect_refused(with<uint64_t>(good_, offset_at, good_.size()), StatusCode::corrupt, "output_norm.weight");
  // data_start + offset would wrap around to a small number inside the file.
  expect_refused(with<uint64_t>(good_, offset_at, ~uint64_t{0} - 31), StatusCode::corrupt, "past the end");
  expect_refused(with<uint64_t>(good_, offset_at, 3), StatusCode::corrupt, "not aligned");
}

TEST_F(GgufCorrupt, UnknownGgmlTypeAndValueType) {
  const size_t at = after_name(good_, "output_norm.weight");
  const size_t type_at = at + 4 + 8;
  expect_refused(with<uint32_t>(good_, type_at, 99), StatusCode::unsupported, "unknown ggml type 99");
  // ggml types brigade does not read are named, with the ones it does.
  expect_refused(with<uint32_t>(good_, type_at, 17), StatusCode::unsupported, "ggml type IQ2_XS");
  expect_refused(with<uint32_t>(good_, type_at, 15), StatusCode::unsupported,
                 "supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4");
  // The first key's value type follows "general.architecture" (u64 length, 20 bytes).
  expect_refused(with<uint32_t>(good_, 24 + 8 + 20, 77), StatusCode::corrupt, "unknown value type 77");
}

// output_norm.weight holds hidden_size (16) elements: no whole number of blocks of 32 or 256.
TEST_F(GgufCorrupt, ABlockTypeTheRowLengthCannotHoldIsCorrupt) {
  const size_t type_at = after_name(good_, "output_norm.weight") + 4 + 8;
  expect_refused(with<uint32_t>(good_, type_at, 12), StatusCode::corrupt, "Q4_K (blocks of 256) cannot hold");
  expect_refused(with<uint32_t>(good_, type_at, 2), StatusCode::corrupt, "rows of 16 elements, which Q4_0");
}

// A quantized fixture's output_norm.weight (256 elements) made Q4_0 fits the bytes (144 of the
// 1024 its F32 data spans) but is no norm weight's type: the load says so.
TEST_F(GgufCorrupt, ABlockQuantizedNormWeightIsRefusedAtLoad) {
  std::vector<uint8_t> bytes = testing::read_bytes(testing::fixture_dir("gguf_qwen2_q4_0") + "/model.gguf");
  ASSERT_FALSE(bytes.empty());
  const size_t type_at = after_name(bytes, "output_norm.weight") + 4 + 8;
  ASSERT_EQ(bytes[type_at], 0) << "stored F32";
  testing::write_bytes(dir_.file("q4_0_norm.gguf"), with<uint32_t>(bytes, type_at, 2));
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions opts;
  opts.progress = false;
  auto m = Model::load(dir_.file("q4_0_norm.gguf"), *backend, opts);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().code(), StatusCode::corrupt) << m.status().to_string();
  EXPECT_NE(m.status().message().find("model.norm.weight' is stored Q4_0"), std::string::npos) << m.status().to_string();
}

// Block data cut short: every quantized fixture, truncated anywhere in its tensor data, is refused
// naming a tensor.
TEST_F(GgufCorrupt, TruncatedBlockDataIsCorrupt) {
  for (const std::string fixture : {"gguf_llama_q4_k_m", "gguf_qwen2_q4_0", "gguf_qwen3_k"}) {
    const std::vector<uint8_t> whole = testing::read_bytes(testing::fixture_dir(fixture) + "/model.gguf");
    ASSERT_GT(whole.size(), 100000u);
    for (size_t cut : {size_t{1}, size_t{100}, size_t{20000}, whole.size() / 2}) {
      const std::vector<uint8_t> part(whole.begin(), whole.end() - static_cast<std::ptrdiff_t>(cut));
      expect_refused(part, StatusCode::corrupt, "data");
    }
  }
}

TEST_F(GgufCorrupt, PartialRotaryIsRefused) {
  const std::string key = "llama.rope.dimension_count";
  const size_t at = after_name(good_, key);  // a key is written like a tensor name: u64 length, bytes
  ASSERT_EQ(good_[at], 4) << "u32 value";
  expect_refused(with<uint32_t>(good_, at + 4, 4), StatusCode::unsupported, "rope.dimension_count 4");
}

// Mutations of a valid file. Most land in [0, header_end) (the metadata and tensor table), where
// they change structure; the rest anywhere.
std::vector<uint8_t> mutate(std::vector<uint8_t> b, size_t header_end, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % std::max<size_t>(n, 1)); };
  const size_t span = pick(10) < 8 ? std::min(header_end, b.size()) : b.size();
  switch (pick(4)) {
    case 0:  // flip 1..4 bytes
      for (size_t i = 0, n = 1 + pick(4); i < n; ++i) b[pick(span)] ^= static_cast<uint8_t>(1 + pick(255));
      break;
    case 1: {  // overwrite 8 bytes with a boundary value
      static constexpr uint64_t kValues[] = {0, 1, 0xffffffffull, 0x100000000ull, 1ull << 40, 1ull << 63, ~0ull};
      const uint64_t v = kValues[pick(std::size(kValues))];
      const size_t at = pick(span > 8 ? span - 8 : 1);
      std::memcpy(&b[at], &v, std::min<size_t>(8, b.size() - at));
      break;
    }
    case 2:  // truncate
      b.resize(pick(span));
      break;
    default:  // a random byte in the whole file (data and all)
      b[pick(b.size())] = static_cast<uint8_t>(rng());
      break;
  }
  return b;
}

// Where the tensor data starts (everything before is header, metadata and tensor table).
size_t header_end(const std::string& path) {
  auto g = GgufFile::open(path);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  if (!g) return 0;
  size_t end = (*g)->file()->size();
  for (const auto& t : (*g)->tensors()) end = std::min(end, static_cast<size_t>(t.bytes.data() - (*g)->file()->data()));
  return end;
}

// Opens `n` mutations of `good` (its header, tensor table and types; data from `end` on kept):
// each is refused with a message or loads / fails to load with one. Returns {loaded, refused}.
std::pair<int, int> fuzz(const std::vector<uint8_t>& good, size_t end, int n, const TempDir& dir) {
  auto backend = make_cpu_backend({.n_threads = 1});
  std::mt19937_64 rng(20261130);  // fixed: a failure reproduces
  int n_loaded = 0, n_refused = 0;
  for (int i = 0; i < n; ++i) {
    const std::string p = dir.file("fuzz.gguf");
    testing::write_bytes(p, mutate(good, end, rng));
    auto ck = Checkpoint::open(p);
    if (!ck) {
      EXPECT_FALSE(ck.status().message().empty()) << "iteration " << i;
      ++n_refused;
      continue;
    }
    // Opened: the model loader and inspect must cope with whatever it now says.
    LoadOptions opts;
    opts.max_batch_tokens = 4;
    opts.progress = false;
    auto model = Model::load(p, *backend, opts);
    if (!model) {
      EXPECT_FALSE(model.status().message().empty()) << "iteration " << i;
    }
    (void)inspect_model(p);
    ++n_loaded;
  }
  return {n_loaded, n_refused};
}

TEST_F(GgufCorrupt, RandomMutationsOfAModelLoadOrFail) {
  const size_t end = header_end(path());
  ASSERT_GT(end, 100u);
  const auto [n_loaded, n_refused] = fuzz(good_, end, 400, dir_);
  EXPECT_GT(n_refused, 100) << "the mutations reach the structure";
  RecordProperty("loaded", n_loaded);
  RecordProperty("refused", n_refused);
}

// The same over a file of block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): a mutated type id or row
// length must be refused or read with the blocks the file holds, never past them.
TEST_F(GgufCorrupt, RandomMutationsOfAQuantizedModelLoadOrFail) {
  const std::string src = testing::fixture_dir("gguf_qwen2_q4_0") + "/model.gguf";
  const std::vector<uint8_t> good = testing::read_bytes(src);
  const size_t end = header_end(src);
  ASSERT_GT(end, 100u);
  const auto [n_loaded, n_refused] = fuzz(good, end, 150, dir_);
  EXPECT_GT(n_refused, 30) << "the mutations reach the structure";
  EXPECT_GT(n_loaded, 10);
  RecordProperty("loaded", n_loaded);
  RecordProperty("refused", n_refused);
}

TEST(GgufVocabCorrupt, RandomMutationsOfAVocabularyLoadOrFail) {
  const std::string src = std::string(BRIGADE_TESTDATA) + "/tokenizers/ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(src)) GTEST_SKIP() << "test data absent: " << src;
  const auto good = testing::read_bytes(src);
  const TempDir dir("gguf_vocab_fuzz");
  std::mt19937_64 rng(7);
  int n_refused = 0;
  for (int i = 0; i < 60; ++i) {
    const std::string p = dir.file("vocab.gguf");
    testing::write_bytes(p, mutate(good, good.size(), rng));
    auto tok = Tokenizer::load(p);
    if (!tok) {
      EXPECT_FALSE(tok.status().message().empty()) << "iteration " << i;
      ++n_refused;
      continue;
    }
    // Loaded with changed token text or scores: encoding and decoding still only return.
    auto ids = (*tok)->encode("Hello world, \xc3\xa9t\xc3\xa9 123", true);
    if (ids) (void)(*tok)->decode(*ids);
  }
  EXPECT_GT(n_refused, 10);
}

}  // namespace
}  // namespace brigade
