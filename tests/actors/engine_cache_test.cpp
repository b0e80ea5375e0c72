// The engine with HiCache tiers configured: it spawns the tier actor, and a disk tier that cannot
// be opened degrades to a warning, never to an error for the engine or its clients.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "brigade/engine.h"
#include "models/make_model.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

class EngineCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("brigade_engine_cache_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    const SyntheticModelSpec spec{.hidden_size = 64, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                                  .intermediate_size = 128, .vocab_size = 300, .max_position = 128,
                                  .dtype = DType::f32, .seed = 3};
    ASSERT_TRUE(write_synthetic_model(spec, (dir_ / "model").string()).is_ok());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Starts an engine with the given cache block and runs one greedy request.
  std::vector<int32_t> generate_with(const CacheConfig& cache) {
    EngineOptions o;
    o.model_path = (dir_ / "model").string();
    o.progress = false;
    o.topology.instances.front().kv.memory_mb = 8;
    o.topology.instances.front().executors.front().threads = 1;
    o.topology.instances.front().cache = cache;
    auto engine = Engine::create(o);
    EXPECT_TRUE(engine.has_value()) << engine.status().to_string();
    if (!engine) return {};
    GenerateOptions r;
    r.prompt_ids = {5, 6, 7, 8, 9};
    r.max_tokens = 6;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    auto c = (*engine)->generate(r);
    EXPECT_TRUE(c.has_value()) << c.status().to_string();
    return c ? c->token_ids : std::vector<int32_t>{};
  }

  fs::path dir_;
};

TEST_F(EngineCache, TiersOnOrBrokenGiveTheSameOutputs) {
  const std::vector<int32_t> plain = generate_with(CacheConfig{});
  ASSERT_EQ(plain.size(), 6u);

  CacheConfig disk;
  disk.disk_path = (dir_ / "tier").string();
  disk.write_policy = "write_back";
  EXPECT_EQ(generate_with(disk), plain);
  EXPECT_TRUE(fs::exists(dir_ / "tier" / "CURRENT")) << "the engine opened the RocksDB disk tier";

  std::ofstream(dir_ / "a_file") << "not a directory";
  CacheConfig broken;
  broken.disk_path = (dir_ / "a_file" / "tier").string();  // cannot be created: degrades
  EXPECT_EQ(generate_with(broken), plain);
}

}  // namespace
}  // namespace brigade
