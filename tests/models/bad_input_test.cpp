// Every malformed input gives a clear non-OK Status naming what was wrong, never a crash.
#include <gtest/gtest.h>

#include "cpu/cpu_backend.h"
#include "model_test_util.h"
#include "models/checkpoint.h"
#include "models/inspect.h"
#include "models/make_model.h"

namespace brigade {
namespace {

using testing::TempDir;

SyntheticModelSpec spec() {
  SyntheticModelSpec s;
  s.hidden_size = 16;
  s.n_layers = 1;
  s.n_heads = 2;
  s.n_kv_heads = 1;
  s.intermediate_size = 24;
  s.vocab_size = 260;
  s.max_position = 16;
  s.dtype = DType::f32;
  return s;
}

Status load_status(const std::string& path) {
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions opts;
  opts.max_batch_tokens = 4;
  opts.progress = false;
  return Model::load(path, *backend, opts).status();
}

void expect_error(const Status& st, StatusCode code, const std::string& needle) {
  EXPECT_EQ(st.code(), code) << st.to_string();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.to_string();
}

// The synthetic model's tensors, to rewrite with one thing broken.
std::vector<testing::StEntry> entries(const std::string& dir) {
  auto ck = Checkpoint::open(dir);
  EXPECT_TRUE(ck.has_value());
  std::vector<testing::StEntry> out;
  for (const auto& [name, t] : (*ck)->tensors())
    out.push_back({name, "F32", t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())});
  return out;
}

class BadSafetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(write_synthetic_model(spec(), dir_.str()).is_ok());
    good_ = testing::read_bytes(file());
    ASSERT_TRUE(load_status(dir_.str()).is_ok());
  }
  std::string file() const { return dir_.file("model.safetensors"); }
  TempDir dir_{"bad"};
  std::vector<uint8_t> good_;
};

TEST_F(BadSafetensors, TruncatedAtSeveralPoints) {
  uint64_t header = 0;
  std::memcpy(&header, good_.data(), 8);
  for (size_t cut : {size_t{0}, size_t{5}, size_t{8}, static_cast<size_t>(8 + header / 2),
                     static_cast<size_t>(8 + header + 100), good_.size() / 2, good_.size() - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    testing::write_bytes(file(), std::vector<uint8_t>(good_.begin(), good_.begin() + static_cast<long>(cut)));
    const Status st = load_status(dir_.str());
    EXPECT_EQ(st.code(), StatusCode::corrupt) << st.to_string();
    EXPECT_NE(st.message().find("model.safetensors"), std::string::npos) << st.to_string();
  }
}

TEST_F(BadSafetensors, CorruptHeaderJson) {
  std::vector<uint8_t> bad = good_;
  bad[8] = '[';
  bad[9] = '"';
  testing::write_bytes(file(), bad);
  expect_error(load_status(dir_.str()), StatusCode::corrupt, "not a valid JSON");
}

TEST_F(BadSafetensors, HeaderLengthLargerThanFile) {
  std::vector<uint8_t> bad = good_;
  const uint64_t huge = good_.size();
  std::memcpy(bad.data(), &huge, 8);
  testing::write_bytes(file(), bad);
  expect_error(load_status(dir_.str()), StatusCode::corrupt, "larger than the file");
}

TEST_F(BadSafetensors, MissingTensor) {
  auto e = entries(dir_.str());
  e.erase(std::remove_if(e.begin(), e.end(), [](const auto& x) { return x.name == "model.norm.weight"; }), e.end());
  testing::write_safetensors_file(file(), e);
  expect_error(load_status(dir_.str()), StatusCode::not_found, "model.norm.weight");
}

TEST_F(BadSafetensors, WrongShape) {
  auto e = entries(dir_.str());
  for (auto& x : e)
    if (x.name == "model.layers.0.self_attn.k_proj.weight") x.shape = {16, 8};  // same bytes, transposed
  testing::write_safetensors_file(file(), e);
  expect_error(load_status(dir_.str()), StatusCode::corrupt, "model.layers.0.self_attn.k_proj.weight");
}

TEST_F(BadSafetensors, ShapeDisagreesWithByteRange) {
  auto e = entries(dir_.str());
  e[0].shape[0] += 1;
  testing::write_safetensors_file(file(), e);
  expect_error(load_status(dir_.str()), StatusCode::corrupt, e[0].name);
}

TEST_F(BadSafetensors, UnknownDtype) {
  auto e = entries(dir_.str());
  e.push_back({"model.extra", "F64", {2}, std::vector<uint8_t>(16, 0)});
  testing::write_safetensors_file(file(), e);
  expect_error(load_status(dir_.str()), StatusCode::unsupported, "'F64'");
}

TEST_F(BadSafetensors, UnknownArchitectureAndBadConfig) {
  testing::write_text(dir_.file("config.json"), R"({"architectures": ["RwkvForCausalLM"]})");
  expect_error(load_status(dir_.str()), StatusCode::unsupported, "supported: LlamaForCausalLM");
  testing::write_text(dir_.file("config.json"), "{\"architectures\": [");
  expect_error(load_status(dir_.str()), StatusCode::corrupt, "config.json");
}

TEST(BadInput, MissingFiles) {
  expect_error(load_status("/nonexistent/model.bin"), StatusCode::not_found, "/nonexistent/model.bin");
  TempDir empty("empty");
  expect_error(load_status(empty.str()), StatusCode::not_found, "config.json");
  TempDir no_weights("noweights");
  ASSERT_TRUE(write_synthetic_model(spec(), no_weights.str()).is_ok());
  std::filesystem::remove(no_weights.file("model.safetensors"));
  expect_error(load_status(no_weights.str()), StatusCode::not_found, "model.safetensors");
  testing::write_text(no_weights.file("model.safetensors.index.json"), R"({"weight_map": {"a": "gone.safetensors"}})");
  expect_error(load_status(no_weights.str()), StatusCode::not_found, "gone.safetensors");
}

// A tiny llama2.c file: dim 8, hidden 16, 1 layer, 2 heads, 1 kv head, vocab 10 (negative =
// unshared classifier), seq_len 4; weights all 0.01.
std::vector<uint8_t> tiny_llama2c(bool shared) {
  const int32_t header[7] = {8, 16, 1, 2, 1, shared ? 10 : -10, 4};
  const int64_t kv_dim = 4, head = 4;
  const int64_t n = 10 * 8 + (2 * 8 + 2 * 64 + 2 * 8 * kv_dim + 3 * 16 * 8) + 8 + 4 * head + (shared ? 0 : 80);
  std::vector<uint8_t> bytes(28 + static_cast<size_t>(n) * 4);
  std::memcpy(bytes.data(), header, 28);
  const float w = 0.01f;
  for (int64_t i = 0; i < n; ++i) std::memcpy(bytes.data() + 28 + i * 4, &w, 4);
  return bytes;
}

TEST(BadInput, Llama2cHeaderCheckedAgainstFileSize) {
  TempDir dir("l2c");
  for (bool shared : {true, false}) {
    const std::string path = dir.file(shared ? "shared.bin" : "unshared.bin");
    const auto good = tiny_llama2c(shared);
    testing::write_bytes(path, good);
    auto ck = Checkpoint::open(path);
    ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
    EXPECT_EQ((*ck)->format(), "llama2.c");
    EXPECT_EQ((*ck)->config().tie_embeddings, shared);
    EXPECT_EQ((*ck)->tensor("lm_head.weight").has_value(), !shared);
    EXPECT_TRUE(load_status(path).is_ok()) << load_status(path).to_string();
    auto info = inspect_model(path);
    ASSERT_TRUE(info.has_value()) << info.status().to_string();
    EXPECT_EQ(info->format, "llama2.c");
    EXPECT_EQ(info->config.n_kv_heads, 1);
    for (size_t cut : {size_t{10}, good.size() / 2, good.size() - 4}) {
      testing::write_bytes(path, std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(cut)));
      const Status st = load_status(path);
      EXPECT_EQ(st.code(), StatusCode::corrupt) << st.to_string();
      EXPECT_NE(st.message().find(path), std::string::npos);
    }
    std::vector<uint8_t> longer = good;
    longer.push_back(0);
    testing::write_bytes(path, longer);
    EXPECT_EQ(load_status(path).code(), StatusCode::corrupt);
  }
  std::vector<uint8_t> bad_header = tiny_llama2c(true);
  const int32_t zero_heads = 0;
  std::memcpy(bad_header.data() + 12, &zero_heads, 4);
  testing::write_bytes(dir.file("bad.bin"), bad_header);
  expect_error(load_status(dir.file("bad.bin")), StatusCode::corrupt, "n_heads");
}

}  // namespace
}  // namespace brigade
