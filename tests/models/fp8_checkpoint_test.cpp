// FP8 checkpoints end to end (the fixtures of scripts/make_fp8_fixtures.py; their logits and greedy
// tokens against transformers run in hf_fixture_test.cpp): they load as f32 on the CPU unless bf16 is
// asked for; make-model writes them; missing, misshapen or corrupt scales and contradictory
// configs fail the load with a message naming the tensor. (Tensor-parallel slices of them:
// tensor_parallel_test.cpp; the decode and every slice path: weight_quant_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "model_test_util.h"
#include "models/checkpoint.h"
#include "models/inspect.h"
#include "models/load_progress.h"
#include "models/make_model.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::FixtureRun;
using testing::kLogitTol;
using testing::load_or_fail;
using testing::read_fixture_cases;
using testing::run_fixture_case;
using testing::StEntry;
using testing::TempDir;

// weights auto: fp8 matrices become f32 on the CPU (tensors stored bf16 stay bf16); weights bf16:
// bf16, and the model still follows transformers closely (bf16 weights, f32 activations).
TEST(Fp8Checkpoint, LoadsAsF32OnTheCpuUnlessBf16IsAsked) {
  auto ck = Checkpoint::open(fixture_dir("qwen3_fp8_block"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  auto backend = make_cpu_backend({.n_threads = 1});
  WeightLoader automatic(**ck, *backend, std::nullopt), bf16(**ck, *backend, DType::bf16);
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  EXPECT_EQ((*ck)->tensors().at(q).dtype, DType::f8e4m3);
  EXPECT_EQ(automatic.matrix(q, 128, 64)->tensor.dtype, DType::f32);
  EXPECT_EQ(automatic.table("model.embed_tokens.weight", 256, 64)->tensor.dtype, DType::bf16);
  EXPECT_EQ(bf16.matrix(q, 128, 64)->tensor.dtype, DType::bf16);

  LoadOptions o;
  o.max_batch_tokens = 64;
  o.progress = false;
  o.weight_dtype = DType::bf16;
  auto model = Model::load(fixture_dir("qwen3_fp8_block"), *backend, o);
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  const auto cases = read_fixture_cases("qwen3_fp8_block");
  const FixtureRun run = run_fixture_case(**model, *backend, cases.front());
  EXPECT_GT(run.max_abs_diff, kLogitTol);  // the weights were rounded to bf16 ...
  EXPECT_LT(run.max_abs_diff, 0.1f);       // ... and nothing else changed
}

TEST(Fp8Checkpoint, InspectAndLoadProgressNameTheFormat) {
  auto info = inspect_model(fixture_dir("deepseek_v3_fp8_block"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  const std::string text = format_model_info(*info);
  EXPECT_NE(text.find("quantization:  fp8 e4m3, 24x40 block scales (quant_method fp8), dequantized at load; "
                      "unquantized: lm_head"), std::string::npos) << text;
  EXPECT_GT(info->n_tensors_by_dtype.at("f8e4m3"), 0);
  auto whole = load_or_fail(fixture_dir("deepseek_v3_fp8_block"), *make_cpu_backend({.n_threads = 1}));
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(info->n_params, whole->n_params());  // the scales are not parameters
  auto ck = Checkpoint::open(fixture_dir("llama_ct_channel"));
  ASSERT_TRUE(ck.has_value());
  EXPECT_EQ(load_progress_name(**ck), fixture_dir("llama_ct_channel") +
                                          " (fp8 e4m3, per-channel scales (quant_method compressed-tensors))");
}

// make-model's fp8 checkpoints load and stay close to the same weights unquantized (the
// quantization error only), in both layouts.
TEST(Fp8Checkpoint, MakeModelWritesFp8BlockAndCompressedTensorsCheckpoints) {
  SyntheticModelSpec s;
  s.arch = "qwen3";
  s.hidden_size = 64;
  s.n_layers = 2;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 32;
  s.intermediate_size = 96;
  s.vocab_size = 300;
  s.tie_embeddings = false;
  s.dtype = DType::f32;
  const TempDir plain_dir("fp8_plain"), block_dir("fp8_block"), ct_dir("fp8_ct");
  ASSERT_TRUE(write_synthetic_model(s, plain_dir.str()).is_ok());
  SyntheticModelSpec b = s;
  b.fp8_block = 48;  // 96 and 64 columns: a partial block at the tail of each
  ASSERT_TRUE(write_synthetic_model(b, block_dir.str()).is_ok());
  SyntheticModelSpec c = s;
  c.fp8_compressed = "channel";
  ASSERT_TRUE(write_synthetic_model(c, ct_dir.str()).is_ok());

  SyntheticModelSpec both = b;
  both.fp8_compressed = "tensor";
  EXPECT_FALSE(write_synthetic_model(both, ct_dir.str()).is_ok());  // one scheme at a time
  SyntheticModelSpec group = s;
  group.fp8_compressed = "group";
  const Status st = write_synthetic_model(group, ct_dir.str());
  EXPECT_NE(st.message().find("is not one of: channel, tensor"), std::string::npos) << st.to_string();

  auto ck = Checkpoint::open(block_dir.str());
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const auto& t = (*ck)->tensors();
  EXPECT_EQ(t.at("model.layers.1.mlp.down_proj.weight").dtype, DType::f8e4m3);
  EXPECT_EQ(t.at("model.layers.1.mlp.down_proj.weight_scale_inv").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t.at("lm_head.weight").dtype, DType::f32);
  EXPECT_EQ((*ck)->config().quant.block_rows, 48);
  EXPECT_EQ(Checkpoint::open(ct_dir.str()).value()->tensors().at("model.layers.0.self_attn.k_proj.weight_scale").shape,
            (std::vector<int64_t>{64, 1}));

  auto backend = make_cpu_backend({.n_threads = 2});
  auto logits = [&](const std::string& dir) {
    auto m = load_or_fail(dir, *backend);
    EXPECT_NE(m, nullptr);
    if (!m) return std::vector<float>();
    auto kv = KvCache::allocate(*backend, m->kv_layout(4, 16, DType::f32));
    return testing::run_step(*m, *backend, *kv, testing::make_step({{0, {1, 40, 7, 99, 250}, 0, true}}, 16, 4));
  };
  const std::vector<float> want = logits(plain_dir.str());
  for (const std::string& dir : {block_dir.str(), ct_dir.str()}) {
    const std::vector<float> got = logits(dir);
    ASSERT_EQ(got.size(), want.size());
    float d = 0.0f, mag = 0.0f;
    for (size_t i = 0; i < got.size(); ++i) d = std::max(d, std::fabs(got[i] - want[i])), mag = std::max(mag, std::fabs(want[i]));
    EXPECT_GT(d, 0.0f) << dir;          // quantized ...
    EXPECT_LT(d, 0.1f * mag) << dir;   // ... by fp8's few percent per weight
  }
}

// The qwen3_fp8_block fixture edited; the load's error message.
std::string load_error(const std::function<void(std::vector<StEntry>&)>& edit,
                       const std::function<void(nlohmann::json&)>& edit_config = {}) {
  return testing::edited_fixture_load_error("qwen3_fp8_block", edit, edit_config);
}

StEntry& entry(std::vector<StEntry>& es, const std::string& name) { return testing::st_entry(es, name); }

void set_scale(std::vector<StEntry>& es, const std::string& name, float v) {
  std::memcpy(entry(es, name).bytes.data() + 4, &v, 4);  // the second block's scale
}

TEST(Fp8Checkpoint, MissingOrCorruptScalesFailNamingTheTensor) {
  const std::string q = "model.layers.1.self_attn.o_proj.weight", s = q + "_scale_inv";
  auto has = [](const std::string& msg, const std::string& what) {
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  };
  has(load_error([&](auto& es) { std::erase_if(es, [&](const StEntry& e) { return e.name == s; }); }),
      "scale tensor '" + s + "' is missing");
  has(load_error([&](auto& es) {
        StEntry& e = entry(es, s);
        e.shape = {4, 1};  // [2, 4] is right for [64, 128] in 32x32 blocks
        e.bytes.resize(16);
      }),
      "has shape [4, 1] but weight [64, 128]");
  has(load_error([&](auto& es) { set_scale(es, s, std::numeric_limits<float>::quiet_NaN()); }),
      "scales must be finite and >= 0");
  has(load_error([&](auto& es) { set_scale(es, s, -1.0f); }), "'" + s + "' holds -1");
  has(load_error([&](auto& es) {
        StEntry& e = entry(es, s);
        e.dtype = "F8_E4M3";
        e.bytes.resize(8);
      }),
      "scales must be F32, BF16 or F16");
  has(load_error([&](auto& es) { entry(es, "model.norm.weight").dtype = "F8_E4M3", entry(es, "model.norm.weight").bytes.resize(64); }),
      "only linear weights may be fp8");
  has(load_error([](auto& es) { entry(es, "model.layers.0.mlp.up_proj.weight").dtype = "F8_E5M2"; }),
      "F8_E5M2 (fp8 e5m2) is not supported");
}

TEST(Fp8Checkpoint, ConfigsThatContradictTheTensorsAreRefused) {
  auto none = load_error([](auto&) {}, [](nlohmann::json& j) { j.erase("quantization_config"); });
  EXPECT_NE(none.find("is stored F8_E4M3 but config.json has no quantization_config"), std::string::npos) << none;
  auto ignored = load_error([](auto&) {}, [](nlohmann::json& j) {
    j["quantization_config"]["modules_to_not_convert"] = {"lm_head", "model.layers.0.self_attn"};
  });
  EXPECT_NE(ignored.find("lists its module as not quantized"), std::string::npos) << ignored;
  auto blocks = load_error([](auto&) {}, [](nlohmann::json& j) { j["quantization_config"]["weight_block_size"] = {128, 128}; });
  EXPECT_NE(blocks.find("the scales do not belong to this weight"), std::string::npos) << blocks;
  auto method = load_error([](auto&) {}, [](nlohmann::json& j) { j["quantization_config"]["quant_method"] = "fbgemm_fp8"; });
  EXPECT_NE(method.find("quant_method 'fbgemm_fp8' is not supported; supported:"), std::string::npos) << method;
}

}  // namespace
}  // namespace brigade
