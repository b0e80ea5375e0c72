// LongCat-Flash (longcat_flash) beyond hf_fixture_test.cpp's one prefill, against transformers'
// LongcatFlashForCausalLM (scripts/make_fixtures.py longcat_flash: two MLA blocks, two dense MLPs
// and the shortcut MoE per layer, whose routers send some picks to zero experts and some to real
// ones): transformers' cached decode steps, the prompt fed as a prefill then one token per step
// against transformers' one prefill, two sequences in one step, the KV pool's two latent layers
// per layer, and the config values refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::kLogitTol;
using testing::load_or_fail;
using testing::make_step;
using testing::read_fixture_cases;
using testing::run_step;

constexpr int kPageSize = 4, kPagesPerSeq = 16;
constexpr const char* kFixture = "longcat_flash";

float max_abs_diff(const float* got, const std::vector<float>& want) {
  float d = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) d = std::max(d, std::fabs(got[i] - want[i]));
  return d;
}

// Every prompt's logits and greedy tokens, and each decode step fed transformers' greedy tokens
// against its cached decode (pages of 4: the latent rows of both blocks cross pages).
TEST(LongcatFlash, PrefillGreedyAndDecodeStepsMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir(kFixture), *backend);
  ASSERT_NE(model, nullptr);
  for (const auto& fc : read_fixture_cases(kFixture)) {
    const testing::FixtureRun run = testing::run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kLogitTol) << "prompt of " << fc.prompt.size();
    EXPECT_EQ(run.greedy, fc.greedy) << "prompt of " << fc.prompt.size();
    ASSERT_FALSE(fc.decode_logits.empty());
    const float decode = testing::decode_max_diff(*model, *backend, fc);
    EXPECT_LE(decode, kLogitTol) << "prompt of " << fc.prompt.size();
    RecordProperty("decode_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(decode));
  }
}

// The longest prompt as a prefill of its first 5 tokens, then one decode step per remaining prompt
// token over the cached latents: each step's logits are transformers' one-prefill row.
TEST(LongcatFlash, PrefillThenDecodeEqualsOnePrefill) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir(kFixture), *backend);
  ASSERT_NE(model, nullptr);
  const auto fc = read_fixture_cases(kFixture).back();
  const int vocab = model->config().vocab_size;
  auto kv = KvCache::allocate(*backend, model->kv_layout(kPagesPerSeq, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  constexpr size_t kPrefill = 5;
  const std::vector<int32_t> head(fc.prompt.begin(), fc.prompt.begin() + kPrefill);
  const auto first = run_step(*model, *backend, *kv, make_step({{0, head, 0, true}}, kPageSize, kPagesPerSeq));
  float worst = 0.0f;
  for (size_t r = 0; r < kPrefill; ++r)
    worst = std::max(worst, max_abs_diff(first.data() + r * static_cast<size_t>(vocab), fc.logits[r]));
  for (size_t at = kPrefill; at < fc.prompt.size(); ++at) {
    const auto logits = run_step(*model, *backend, *kv,
                                 make_step({{0, {fc.prompt[at]}, static_cast<int>(at), false}}, kPageSize, kPagesPerSeq));
    worst = std::max(worst, max_abs_diff(logits.data(), fc.logits[at]));
  }
  EXPECT_LE(worst, kLogitTol);
  RecordProperty("max_abs_diff", std::to_string(worst));
}

// Two prompts in one step (each its own pages): every row as transformers computes it alone.
TEST(LongcatFlash, TwoSequencesInOneStep) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir(kFixture), *backend);
  ASSERT_NE(model, nullptr);
  const auto cases = read_fixture_cases(kFixture);
  const auto& a = cases.front();
  const auto& b = cases.back();
  const int vocab = model->config().vocab_size;
  auto kv = KvCache::allocate(*backend, model->kv_layout(2 * kPagesPerSeq, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  const auto logits =
      run_step(*model, *backend, *kv, make_step({{0, a.prompt, 0, true}, {1, b.prompt, 0, true}}, kPageSize, kPagesPerSeq));
  float worst = 0.0f;
  for (size_t r = 0; r < a.prompt.size(); ++r)
    worst = std::max(worst, max_abs_diff(logits.data() + r * static_cast<size_t>(vocab), a.logits[r]));
  for (size_t r = 0; r < b.prompt.size(); ++r)
    worst = std::max(worst, max_abs_diff(logits.data() + (a.prompt.size() + r) * static_cast<size_t>(vocab), b.logits[r]));
  EXPECT_LE(worst, kLogitTol);
}

// The pool holds both blocks' latents per layer: 2 num_layers latent layers of kv_lora_rank +
// qk_rope_head_dim (transformers' cache has 2 num_layers entries, layer_idx 2 l + b).
TEST(LongcatFlash, KvPoolHoldsBothBlocksLatents) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir(kFixture), *backend);
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "longcat_flash");
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_zero_experts, 4);
  const KvLayout l = model->kv_layout(kPagesPerSeq, kPageSize, DType::f32);
  EXPECT_TRUE(l.latent);
  EXPECT_EQ(l.n_layers, 2 * c.n_layers);
  EXPECT_EQ(l.n_kv_heads, 1);
  EXPECT_EQ(l.head_dim, c.kv_lora_rank + c.qk_rope_head_dim);
}

// config.json values transformers does not run, or runs otherwise than they say, are refused by name.
TEST(LongcatFlash, RefusesConfigValuesByName) {
  const auto text = read_text_file(fixture_dir(kFixture) + "/config.json");
  ASSERT_TRUE(text.has_value());
  const nlohmann::json base = nlohmann::json::parse(*text);
  ASSERT_TRUE(parse_hf_config(base.dump()).has_value());
  const std::pair<const char*, nlohmann::json> refused[] = {
      {"router_bias", true},           {"mla_scale_q_lora", false}, {"mla_scale_kv_lora", false},
      {"zero_expert_type", "linear"},  {"attention_method", "GQA"}, {"q_lora_rank", nullptr},
      {"head_dim", 16},                {"qk_head_dim", 20},         {"attention_bias", true},
      {"hidden_act", "gelu"},          {"num_nextn_predict_layers", 1}};
  for (const auto& [key, value] : refused) {
    nlohmann::json j = base;
    j[key] = value;
    const auto c = parse_hf_config(j.dump());
    ASSERT_FALSE(c.has_value()) << key;
    EXPECT_NE(c.status().to_string().find(key == std::string("hidden_act") ? "hidden_act" : key), std::string::npos)
        << c.status().to_string();
  }
}

}  // namespace
}  // namespace brigade
