// PaliGemma 1 and 2 (PaliGemmaForConditionalGeneration; VisionKind::paligemma: Gemma3Vision's
// tower with PaliGemma's linear projector; ModelConfig::prefix_lm) against transformers 5.25
// (tests/fixtures/paligemma: a Gemma language model; paligemma2: Gemma 2 with a sliding window and
// softcaps; written by scripts/make_paligemma_fixtures.py): each image's features
// (get_image_features' pooler_output) from SiglipImageProcessor's pixel_values, alone and together;
// paligemma2's window (24) is shorter than three of its prompts, which a step runs unwindowed;
// the configs, real checkpoints' shapes and bad ones; then the language model with images: every
// position's logits (the first 32 ids') and the greedy tokens for PaliGemmaProcessor's prompts
// (the images' runs, <bos>, the text, "\n"), text-only too. The prompt attends to all of itself:
// the whole prompt in one prefill matches; the same prompt in chunks (each later chunk causal to
// the earlier) does not, by the margin the fixture records for a causal reading.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "hf_fixture.h"
#include "image_prompts.h"
#include "model_test_util.h"
#include "tests/vision_fixture.h"
#include "models/gemma3_vision.h"
#include "models/gemma_config.h"
#include "models/inspect.h"
#include "models/mapped_file.h"
#include "models/model_config.h"
#include "models/paligemma_config.h"
#include "models/step_check.h"

namespace brigade {
namespace {

using testing::encode_images;
using testing::fixture_dir;
using testing::fixture_json;
using testing::relative_error;

constexpr int kTextHidden = 32;
constexpr float kTol = 1e-5f;
constexpr float kLogitTol = 5e-4f;

struct Fixture {
  int image_size = 0, image_tokens = 0, image_token = -1, vocab = 0;
};

Fixture read_fixture(const std::string& name) {
  const nlohmann::json e = fixture_json(name, "expected.json");
  const nlohmann::json c = fixture_json(name, "config.json");
  return {e.at("image_size").get<int>(), e.at("image_tokens").get<int>(), e.at("image_token").get<int>(),
          c.at("text_config").at("vocab_size").get<int>()};
}

// pixel_values.f32: each image's [3, S, S] in order.
std::vector<StepImage> read_images(const std::string& name) {
  const Fixture f = read_fixture(name);
  const std::string raw = read_text_file(fixture_dir(name) + "/pixel_values.f32").value();
  const size_t per = size_t{3} * static_cast<size_t>(f.image_size) * static_cast<size_t>(f.image_size);
  std::vector<StepImage> out;
  for (size_t at = 0; (at + per) * sizeof(float) <= raw.size(); at += per) {
    auto px = std::make_shared<std::vector<float>>(per);
    std::memcpy(px->data(), raw.data() + at * sizeof(float), per * sizeof(float));
    out.push_back({0, std::move(px), 0, 0});
  }
  EXPECT_EQ(out.size() * per * sizeof(float), raw.size()) << name;
  return out;
}

using Tower = testing::LoadedTower<Gemma3Vision>;

std::unique_ptr<Tower> load_tower(const std::string& name) {
  const Fixture f = read_fixture(name);
  return testing::load_fixture_tower<Gemma3Vision>(
      fixture_dir(name), read_paligemma_vision(fixture_json(name, "config.json"), f.vocab, kTextHidden), kTextHidden,
      [](Tower&, std::map<std::string, RawTensor> m) { return gemma3_tensors(std::move(m)); });
}

class PaliGemma : public ::testing::TestWithParam<const char*> {};

TEST_P(PaliGemma, FeaturesMatchTransformersAloneAndTogether) {
  const std::vector<StepImage> images = read_images(GetParam());
  const auto want = testing::read_image_features(fixture_json(GetParam(), "expected.json"));
  ASSERT_EQ(images.size(), 3u);
  ASSERT_EQ(want.size(), images.size());
  auto tower = load_tower(GetParam());
  ASSERT_NE(tower, nullptr);
  const float worst = testing::expect_features_alone_and_together(*tower, images, want, {2, 0, 1}, kTol);
  std::printf("[ measured ] %s: largest relative feature difference from transformers: %.3g\n", GetParam(), worst);
}

TEST_P(PaliGemma, ConfigReadsAsGemmaWithThePrefixAttention) {
  const Fixture f = read_fixture(GetParam());
  auto c = parse_hf_config(read_text_file(fixture_dir(GetParam()) + "/config.json").value());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, std::string(GetParam()) == "paligemma" ? "gemma" : "gemma2");
  EXPECT_TRUE(c->prefix_lm);
  EXPECT_TRUE(c->multimodal_text);
  EXPECT_TRUE(c->tie_embeddings);
  EXPECT_EQ(c->vision.kind, VisionKind::paligemma);
  EXPECT_FALSE(c->vision.dynamic());
  EXPECT_TRUE(c->vision.whole_images());
  EXPECT_EQ(c->vision.tokens_per_image, f.image_tokens);
  EXPECT_EQ(c->vision.image_tokens(0, 0), f.image_tokens);
  EXPECT_EQ(c->vision.image_token, f.image_token);
  EXPECT_EQ(c->vision.pool_kernel(), 1);
  auto info = inspect_model(fixture_dir(GetParam()));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  const std::string text = format_model_info(*info);
  EXPECT_NE(text.find("(the language model of PaliGemmaForConditionalGeneration)"), std::string::npos) << text;
  EXPECT_NE(text.find("the prompt attends to all of itself"), std::string::npos) << text;
}

class PaliGemmaModel : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    prompts_.load({.fixture = GetParam(), .kind = VisionKind::paligemma,
                   .markers = {.image = read_fixture(GetParam()).image_token}, .max_batch_tokens = 256, .pages = 24},
                  read_images(GetParam()));
    ASSERT_TRUE(prompts_.loaded());
  }
  testing::ImagePrompts prompts_;
};

TEST_P(PaliGemmaModel, WholePromptsMatchTransformersLogitsAndGreedyTokens) {
  const float worst = prompts_.expect_prompts_match(kLogitTol);
  std::printf("[ measured ] %s: largest |logit difference| from transformers: %.3g\n", GetParam(), worst);
}

// A prompt in chunks reads it causally across the cut (a later chunk does not start at position
// 0): its first chunk's rows no longer see the rest, so the logits move, here by about what the
// fixture's causal reading moves them.
TEST_P(PaliGemmaModel, APromptCutInChunksIsNotTheModelsReading) {
  const nlohmann::json expected = fixture_json(GetParam(), "expected.json");
  for (size_t i = 0; i < prompts_.cases().size(); ++i) {
    const testing::ImageCase& c = prompts_.cases()[i];
    if (c.images.size() != 0) continue;  // chunks must not cut an image (whole_images): the text-only case
    auto kv = KvCache::allocate(prompts_.backend(),
                                prompts_.model().kv_layout(prompts_.pages(), prompts_.page_size(), DType::f32));
    ASSERT_TRUE(kv.has_value());
    const std::vector<float> logits = prompts_.prefill(c, 5, *kv);
    const float d = prompts_.logit_diff(logits, c);
    EXPECT_GT(d, 10 * kLogitTol) << "prompt of " << c.prompt.size();
    EXPECT_GT(expected.at("cases").at(i).at("causal_max_diff").get<float>(), 10 * kLogitTol);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PaliGemma, ::testing::Values("paligemma", "paligemma2"));
INSTANTIATE_TEST_SUITE_P(Fixtures, PaliGemmaModel, ::testing::Values("paligemma", "paligemma2"));

// PaliGemma 2's sliding layer (the fixture's window: 24): a prompt row sees the whole prompt there
// too, so a step holding a prompt longer than the window runs that layer unwindowed (the fixture's
// three longer prompts match transformers above that way). Any other row of such a step must then
// sit below the window, where dropping it changes nothing: one past it is refused by name (the
// scheduler runs such a prompt alone: SchedulerLimits::prompt_alone_beyond).
TEST(PaliGemma2Window, APromptPastTheWindowRunsOnlyBesideRowsBelowIt) {
  testing::ImagePrompts prompts;
  prompts.load({.fixture = "paligemma2", .kind = VisionKind::paligemma,
                .markers = {.image = read_fixture("paligemma2").image_token}, .max_batch_tokens = 256, .pages = 24},
               read_images("paligemma2"));
  ASSERT_TRUE(prompts.loaded());
  const int window = prompts.model().config().sliding_window;
  ASSERT_EQ(window, 24);
  const int per_seq = prompts.pages() / 2;
  ASSERT_GE(per_seq * prompts.page_size(), 32);
  auto kv = KvCache::allocate(prompts.backend(), prompts.model().kv_layout(prompts.pages(), prompts.page_size(), DType::f32));
  ASSERT_TRUE(kv.has_value());
  const std::vector<int32_t> long_prompt(30, 40);  // text tokens from position 0, past the window
  for (const int other_at : {window + 2, window - 4}) {
    const StepBatch b = testing::make_step({{.seq = 0, .tokens = long_prompt}, {.seq = 1, .tokens = {41}, .n_past = other_at}},
                                           prompts.page_size(), per_seq);
    auto opens = prefix_lm_opens_window(b, window);
    auto buf = prompts.backend().allocate(2 * prompts.vocab() * sizeof(float));
    ASSERT_TRUE(buf.has_value());
    const Status st = prompts.model().forward(b, *kv, buf->view(DType::f32, {2, static_cast<int64_t>(prompts.vocab())}));
    if (other_at >= window) {
      ASSERT_FALSE(opens.has_value());
      EXPECT_EQ(st.code(), StatusCode::invalid_argument);
      EXPECT_NE(st.message().find("runs alone in its step"), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("position " + std::to_string(other_at)), std::string::npos) << st.message();
    } else {
      ASSERT_TRUE(opens.has_value());
      EXPECT_TRUE(*opens);
      EXPECT_TRUE(st.is_ok()) << st.to_string();
    }
  }
  // Within the window nothing opens; a model without a window never does.
  const StepBatch within = testing::make_step({{.seq = 0, .tokens = std::vector<int32_t>(window, 40)},
                                               {.seq = 1, .tokens = {41}, .n_past = 30}},
                                              prompts.page_size(), per_seq);
  EXPECT_FALSE(prefix_lm_opens_window(within, window).value());
  EXPECT_FALSE(prefix_lm_opens_window(within, 0).value());
}

TEST(PaliGemmaConfig, ReadsTheCheckpointsShapes) {
  // google/paligemma-3b-pt-224's config.json (PaliGemma 1: Gemma 2B's text, SigLIP so400m/14).
  const nlohmann::json pg1 = {
      {"architectures", {"PaliGemmaForConditionalGeneration"}}, {"model_type", "paligemma"},
      {"bos_token_id", 2}, {"eos_token_id", 1}, {"hidden_size", 2048}, {"image_token_index", 257152},
      {"projection_dim", 2048},
      {"text_config", {{"hidden_size", 2048}, {"intermediate_size", 16384}, {"model_type", "gemma"},
                       {"num_attention_heads", 8}, {"num_hidden_layers", 18}, {"num_image_tokens", 256},
                       {"num_key_value_heads", 1}, {"torch_dtype", "float32"}, {"vocab_size", 257216}}},
      {"vision_config", {{"hidden_size", 1152}, {"intermediate_size", 4304}, {"model_type", "siglip_vision_model"},
                         {"num_attention_heads", 16}, {"num_hidden_layers", 27}, {"num_image_tokens", 256},
                         {"patch_size", 14}, {"projection_dim", 2048}, {"vision_use_head", false}}}};
  auto c = parse_hf_config(pg1.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "gemma");
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_EQ(c->n_kv_heads, 1);
  EXPECT_TRUE(c->prefix_lm);
  EXPECT_EQ(c->vision.image_size, 224);
  EXPECT_EQ(c->vision.tokens_per_image, 256);
  EXPECT_EQ(c->vision.intermediate_size, 4304);
  EXPECT_EQ(c->vision.image_token, 257152);
  // A PaliGemma 2 at 448 pixels: Gemma 2's text (its window, softcaps), 1024 tokens an image.
  nlohmann::json pg2 = pg1;
  pg2["hidden_size"] = pg2["projection_dim"] = 2304;
  pg2["text_config"] = {{"hidden_size", 2304}, {"intermediate_size", 9216}, {"model_type", "gemma2"},
                        {"num_attention_heads", 8}, {"num_hidden_layers", 26}, {"num_key_value_heads", 4},
                        {"query_pre_attn_scalar", 256}, {"sliding_window", 4096}, {"vocab_size", 257216}};
  pg2["vision_config"]["image_size"] = 448;
  pg2["vision_config"]["projection_dim"] = 2304;
  auto c2 = parse_hf_config(pg2.dump());
  ASSERT_TRUE(c2.has_value()) << c2.status().to_string();
  EXPECT_EQ(c2->arch, "gemma2");
  EXPECT_EQ(c2->sliding_window, 4096);
  EXPECT_TRUE(c2->prefix_lm);
  EXPECT_EQ(c2->vision.tokens_per_image, 1024);
  // PaliGemmaConfig's own defaults without sub-configs: the 3B's text and tower.
  auto d = parse_hf_config(nlohmann::json{{"model_type", "paligemma"}}.dump());  // image token 256000
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->hidden_size, 2048);
  EXPECT_EQ(d->vision.hidden_size, 1152);
  EXPECT_EQ(d->vision.tokens_per_image, 256);
}

TEST(PaliGemmaConfig, RefusesWhatItCannotRunByName) {
  const Fixture f = read_fixture("paligemma");
  testing::expect_refused_by_name(fixture_json("paligemma", "config.json"), {
      {[](nlohmann::json& j) { j["vision_config"]["hidden_act"] = "quick_gelu"; }, "hidden_act"},
      {[](nlohmann::json& j) { j["vision_config"]["image_size"] = 30; }, "image_size"},
      {[](nlohmann::json& j) { j["projection_dim"] = 16; }, "projection_dim"},
      {[](nlohmann::json& j) { j["image_token_index"] = 9999; }, "image_token_index"},
  }, [&](const nlohmann::json& j) { return read_paligemma_vision(j, f.vocab, kTextHidden); });
  nlohmann::json llama = fixture_json("paligemma", "config.json");
  llama["text_config"]["model_type"] = "llama";
  auto text = paligemma_text_config(llama);
  ASSERT_FALSE(text.has_value());
  EXPECT_NE(text.status().message().find("text_config.model_type"), std::string::npos) << text.status().message();
}

}  // namespace
}  // namespace brigade
