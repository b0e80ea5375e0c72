// Phi-3 / Phi-4 (Phi3ForCausalLM) against transformers beyond one prefill (hf_fixture_test.cpp
// covers that for the phi3 fixture): every cached decode step's logits, the sliding window and
// longrope rules the fixtures pin, and which longrope factor list brigade runs where
// (rope_scaling.h: fixed per model by the served context; transformers picks per call).
//
// phi3_longrope (scripts/make_fixtures.py): original context 16 of 64, so transformers runs its
// prompts of 7 and 1 tokens (with their 8 greedy tokens) on the short factors and the 40-token
// prompt on the long ones.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/inspect.h"
#include "models/model_config.h"
#include "models/rope_scaling.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::FixtureCase;
using testing::kLogitTol;
using testing::load_or_fail;
using testing::make_step;
using testing::read_fixture_cases;
using testing::run_step;
using testing::decode_max_diff;

constexpr size_t kOriginalContext = 16;  // phi3_longrope's original_max_position_embeddings

// A fixture case's prefill logits (`run`), greedy tokens and cached decode steps equal
// transformers'; the differences are recorded as test properties.
void expect_matches_transformers(Model& model, Backend& backend, const FixtureCase& fc, const testing::FixtureRun& run) {
  const std::string n = std::to_string(fc.prompt.size());
  EXPECT_LE(run.max_abs_diff, kLogitTol) << "prompt of " << n << " tokens";
  EXPECT_EQ(run.greedy, fc.greedy) << "prompt of " << n << " tokens";
  const float d = decode_max_diff(model, backend, fc);
  EXPECT_LE(d, kLogitTol) << "prompt of " << n << " tokens";
  ::testing::Test::RecordProperty("max_abs_diff_" + n, std::to_string(run.max_abs_diff));
  ::testing::Test::RecordProperty("decode_max_abs_diff_" + n, std::to_string(d));
}

// phi3_longrope with config.json edited by `edit`, in a temporary directory.
template <typename Edit>
std::unique_ptr<Model> load_edited(const testing::TempDir& dir, Backend& backend, Edit edit) {
  const std::string src = fixture_dir("phi3_longrope");
  std::filesystem::copy_file(src + "/model.safetensors", dir.file("model.safetensors"));
  auto j = nlohmann::json::parse(read_text_file(src + "/config.json").value());
  edit(j);
  testing::write_text(dir.file("config.json"), j.dump());
  return load_or_fail(dir.str(), backend);
}

TEST(Phi3, DecodeStepsMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir("phi3"), *backend);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->config().arch, "phi3");
  EXPECT_TRUE(model->config().fused_weights);
  EXPECT_EQ(model->config().sliding_window, 8);
  for (const auto& fc : read_fixture_cases("phi3")) {
    const float d = decode_max_diff(*model, *backend, fc);
    EXPECT_LE(d, kLogitTol) << "prompt of " << fc.prompt.size() << " tokens";
    RecordProperty("decode_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(d));
  }
}

// transformers' Phi3 masks attention to the last sliding_window tokens (mistral_sliding's rule):
// without the window the 40-token prompt's logits move far past the tolerance.
TEST(Phi3, SlidingWindowIsApplied) {
  const float d = testing::max_diff_with_config("phi3", [](nlohmann::json& j) { j["sliding_window"] = nullptr; });
  EXPECT_GT(d, 100 * kLogitTol);
}

// The fixture as saved (context 64 > 16): the long factors, exact for the sequences transformers
// also runs long: the 40-token prompt's prefill, greedy tokens and decode steps.
TEST(Phi3Longrope, LongFactorsMatchTransformersPastTheOriginalContext) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir("phi3_longrope"), *backend);
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::longrope);
  EXPECT_TRUE(c.rope_scaling.longrope_long);
  EXPECT_EQ(c.rope_dims(), 12);  // partial_rotary_factor 0.75 of head_dim 16
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_FLOAT_EQ(rope_attention_factor(c.rope_scaling), std::sqrt(1.5f));  // sqrt(1 + ln 4 / ln 16)
  int n_long = 0;
  for (const auto& fc : read_fixture_cases("phi3_longrope")) {
    const testing::FixtureRun run = testing::run_fixture_case(*model, *backend, fc);
    if (fc.prompt.size() <= kOriginalContext) {
      // transformers ran this one on the short factors: the choice shows in the logits of a prompt
      // of more than one token (position 0 rotates by nothing).
      if (fc.prompt.size() > 1) {
        EXPECT_GT(run.max_abs_diff, 100 * kLogitTol) << "prompt of " << fc.prompt.size();
      }
      continue;
    }
    ++n_long;
    expect_matches_transformers(*model, *backend, fc, run);
  }
  EXPECT_GT(n_long, 0);
}

// Served context cut to the original 16 (factor kept at 4, so the attention factor is the same):
// the short factors, exact for the sequences that stay within it, as transformers runs them.
TEST(Phi3Longrope, ShortFactorsMatchTransformersWithinTheOriginalContext) {
  auto backend = make_cpu_backend({.n_threads = 2});
  const testing::TempDir dir("phi3_short");
  auto model = load_edited(dir, *backend, [](nlohmann::json& j) {
    j["max_position_embeddings"] = kOriginalContext;
    for (const char* key : {"rope_scaling", "rope_parameters"})
      if (j.contains(key) && j[key].is_object()) j[key]["factor"] = 4.0;
  });
  ASSERT_NE(model, nullptr);
  EXPECT_FALSE(model->config().rope_scaling.longrope_long);
  EXPECT_FLOAT_EQ(rope_attention_factor(model->config().rope_scaling), std::sqrt(1.5f));
  int n_short = 0;
  for (const auto& fc : read_fixture_cases("phi3_longrope")) {
    if (fc.prompt.size() + fc.greedy.size() > kOriginalContext) continue;
    ++n_short;
    expect_matches_transformers(*model, *backend, fc, testing::run_fixture_case(*model, *backend, fc));
  }
  EXPECT_GT(n_short, 0);
}

// `brigade inspect` names the architecture and says which longrope list the model runs.
TEST(Phi3Longrope, InspectNamesTheArchitectureAndTheFactorList) {
  auto info = inspect_model(fixture_dir("phi3_longrope"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  const std::string text = format_model_info(*info);
  EXPECT_NE(text.find("architecture:  phi3"), std::string::npos) << text;
  EXPECT_NE(text.find("scaling longrope x4 (long factors, original context 16)"), std::string::npos) << text;
  EXPECT_NE(text.find("rotary dims 12 of 16"), std::string::npos) << text;
  EXPECT_NE(text.find("stored fused"), std::string::npos) << text;
}

}  // namespace
}  // namespace brigade
