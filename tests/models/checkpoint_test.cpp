// Checkpoint reading: single-file and sharded safetensors give the same tensors and the same
// model output; raw access and inspect_model report what the files hold.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cpu/cpu_backend.h"
#include "model_test_util.h"
#include "models/checkpoint.h"
#include "models/inspect.h"
#include "models/make_model.h"

namespace brigade {
namespace {

using testing::TempDir;

SyntheticModelSpec small_spec() {
  SyntheticModelSpec s;
  s.hidden_size = 32;
  s.n_layers = 2;
  s.n_heads = 2;
  s.n_kv_heads = 1;
  s.intermediate_size = 48;
  s.vocab_size = 280;
  s.max_position = 32;
  s.tie_embeddings = false;
  s.dtype = DType::bf16;
  return s;
}

// Splits dir/model.safetensors into two shards plus an index, in out_dir.
void shard(const std::string& dir, const std::string& out_dir) {
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.has_value());
  std::vector<testing::StEntry> a, b;
  nlohmann::json weight_map = nlohmann::json::object();
  int i = 0;
  for (const auto& [name, t] : (*ck)->tensors()) {
    testing::StEntry e{name, "BF16", t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())};
    const bool first = (i++ % 2) == 0;
    (first ? a : b).push_back(std::move(e));
    weight_map[name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  testing::write_safetensors_file(out_dir + "/model-00001-of-00002.safetensors", a);
  testing::write_safetensors_file(out_dir + "/model-00002-of-00002.safetensors", b);
  testing::write_text(out_dir + "/model.safetensors.index.json",
                      nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());
  testing::write_bytes(out_dir + "/config.json", testing::read_bytes(dir + "/config.json"));
}

TEST(Checkpoint, ShardedEqualsSingleFile) {
  TempDir single("single"), sharded("sharded");
  ASSERT_TRUE(write_synthetic_model(small_spec(), single.str()).is_ok());
  shard(single.str(), sharded.str());
  auto a = Checkpoint::open(single.str());
  auto b = Checkpoint::open(sharded.str());
  ASSERT_TRUE(a.has_value() && b.has_value()) << b.status().to_string();
  ASSERT_EQ((*a)->tensors().size(), (*b)->tensors().size());
  for (const auto& [name, t] : (*a)->tensors()) {
    auto u = (*b)->tensor(name, t.shape);
    ASSERT_TRUE(u.has_value()) << u.status().to_string();
    EXPECT_TRUE(std::equal(t.bytes.begin(), t.bytes.end(), u->bytes.begin(), u->bytes.end())) << name;
    EXPECT_NE(u->file.find("-of-00002"), std::string::npos);
  }
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions opts;
  opts.max_batch_tokens = 8;
  opts.progress = false;
  std::vector<std::vector<float>> logits;
  for (const std::string& dir : {single.str(), sharded.str()}) {
    auto m = Model::load(dir, *backend, opts);
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    auto kv = KvCache::allocate(*backend, (*m)->kv_layout(2, 16, DType::bf16));
    ASSERT_TRUE(kv.has_value());
    logits.push_back(testing::run_step(**m, *backend, *kv, testing::make_step({{0, {1, 50, 60, 70}, 0, true}}, 16, 2)));
  }
  EXPECT_EQ(logits[0], logits[1]);
}

TEST(Checkpoint, RawTensorsAndInspect) {
  TempDir dir("inspect");
  ASSERT_TRUE(write_synthetic_model(small_spec(), dir.str()).is_ok());
  auto ck = Checkpoint::open(dir.str());
  ASSERT_TRUE(ck.has_value());
  EXPECT_EQ((*ck)->format(), "safetensors");
  auto norm = (*ck)->tensor("model.norm.weight", {32});
  ASSERT_TRUE(norm.has_value());
  EXPECT_EQ(norm->dtype, DType::bf16);
  for (int64_t i = 0; i < 32; ++i) EXPECT_NEAR(norm->at(i), 1.0, 0.15);  // 1 + N(0, 0.02^2)
  EXPECT_EQ((*ck)->tensor("model.norm.weight", {33}).status().code(), StatusCode::corrupt);

  auto info = inspect_model(dir.str());
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  const int64_t per_layer = 2 * 32 + 32 * 32 * 2 + 2 * 16 * 32 + 3 * 48 * 32;
  const int64_t n_params = 2 * 280 * 32 + 2 * per_layer + 32;
  EXPECT_EQ(info->n_params, n_params);
  EXPECT_EQ(info->n_bytes, 2 * n_params);
  EXPECT_EQ(info->n_tensors, 2 + 2 * 9 + 1);
  EXPECT_EQ(info->n_tensors_by_dtype.at("bf16"), info->n_tensors);
  EXPECT_EQ(info->config.n_kv_heads, 1);
  const std::string text = format_model_info(*info);
  EXPECT_NE(text.find("architecture:  llama"), std::string::npos) << text;
  EXPECT_NE(text.find("safetensors"), std::string::npos);
}

}  // namespace
}  // namespace brigade
