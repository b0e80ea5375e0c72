// llama.cpp's GGUF files of the Gated DeltaNet hybrids (models/gguf_qwen35.h), written by
// llama.cpp's own converter from make_fixtures.py's checkpoints (scripts/make_gguf_qwen35_fixtures.py):
// gguf_qwen35 (Qwen3.5, 2 key heads for 4 value heads, so its value heads are in the converter's
// tiled order; tied embeddings; an MTP block appended), gguf_qwen35moe, gguf_qwen3next (experts
// in every layer) in F32, and gguf_qwen35_q8_0. The config as llama.cpp reads it, transformers'
// logits and greedy tokens on the same weights, and the layouts brigade does not read refused
// by name.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::read_fixture_cases;

// fp32 both sides; the converter's -exp(A_log) and 1 + w in f32, 7 printed digits.
constexpr float kTol = 5e-4f;
// brigade's Q8_0 kernels against llama.cpp's on gguf_qwen35_q8_0 (measured 1.9 to 2.0). Both are
// far from transformers' float run (brigade 5.1 to 7.1, llama.cpp 3.6 to 5.1): this tiny random
// model amplifies the Q8 rounding of its activations (act_q8_max_diff 4.7 to 6.3).
constexpr float kLlamaCppQ8Tol = 3.0f;

std::string gguf_path(const std::string& fixture) { return fixture_dir(fixture) + "/model.gguf"; }

std::unique_ptr<Model> load(const std::string& fixture, Backend& backend, std::optional<DType> weights = std::nullopt) {
  LoadOptions o = testing::test_load_options();
  o.state_slots = 1;
  o.weight_dtype = weights;
  return testing::load_or_fail(gguf_path(fixture), backend, o);
}

// Block count, layer kinds, the value heads' order, the rotary width, the experts, the MTP block
// left out, and the tensors under the checkpoint's names.
TEST(GgufQwen35, ReadsTheConfigAsLlamaCppDoes) {
  auto ck = Checkpoint::open(gguf_path("gguf_qwen35"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ((*ck)->format(), "gguf");
  EXPECT_EQ(c.arch, "qwen3_5_text");
  EXPECT_EQ(c.n_layers, 4) << "block_count 5 less nextn_predict_layers 1";
  EXPECT_EQ(c.ssm_layers, (std::vector<bool>{true, true, true, false}));
  const SsmLayout& l = c.ssm.layout;
  EXPECT_EQ(l.n_heads, 4);
  EXPECT_EQ(l.head_dim, 16) << "as state_size: llama.cpp's loader sizes the value heads so";
  EXPECT_EQ(l.n_groups, 2);
  EXPECT_EQ(l.state_size, 16);
  EXPECT_EQ(l.conv_kernel, 4);
  EXPECT_TRUE(l.tiled_heads);
  EXPECT_TRUE(c.ssm.gated_delta);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.rope_dims(), 8);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.n_experts, 0);
  const auto& t = (*ck)->tensors();
  EXPECT_EQ(t.count("model.layers.4.self_attn.q_proj.weight"), 0u) << "the MTP block is not loaded";
  EXPECT_EQ(t.at("model.layers.0.linear_attn.conv1d.weight").shape, (std::vector<int64_t>{128, 1, 4}));
  EXPECT_EQ(t.at("model.layers.0.linear_attn.A_log").shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(t.at("model.layers.0.linear_attn.in_proj_b.weight").shape, (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(t.at("model.layers.3.self_attn.q_proj.weight").shape, (std::vector<int64_t>{256, 64})) << "q and its gate";

  auto moe = Checkpoint::open(gguf_path("gguf_qwen35moe"));
  ASSERT_TRUE(moe.has_value()) << moe.status().to_string();
  const ModelConfig& m = (*moe)->config();
  EXPECT_EQ(m.arch, "qwen3_5_moe_text");
  EXPECT_TRUE(m.ssm.layout.tiled_heads);
  EXPECT_EQ(m.n_experts, 4);
  EXPECT_EQ(m.n_experts_per_tok, 2);
  EXPECT_EQ(m.n_moe_layers(), 4);
  EXPECT_TRUE(m.shared_gate);
  EXPECT_TRUE(m.norm_topk_prob);
  EXPECT_FALSE(m.tie_embeddings);

  auto next = Checkpoint::open(gguf_path("gguf_qwen3next"));
  ASSERT_TRUE(next.has_value()) << next.status().to_string();
  const ModelConfig& n = (*next)->config();
  EXPECT_EQ(n.arch, "qwen3_next");
  EXPECT_FALSE(n.ssm.layout.tiled_heads) << "Qwen3-Next's value heads keep the checkpoint's order";
  EXPECT_EQ(n.n_moe_layers(), 4);
  EXPECT_EQ((*next)->tensors().count("model.layers.0.linear_attn.in_proj_ba.weight"), 1u);
}

class GgufQwen35F32 : public ::testing::TestWithParam<std::string> {};

// Every prompt position's logits and the greedy continuation, and the decode steps fed
// transformers' tokens against its cached decode.
TEST_P(GgufQwen35F32, LogitsAndGreedyTokensMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(GetParam(), *backend);
  ASSERT_NE(model, nullptr);
  testing::expect_fixture_cases_match(*model, *backend, GetParam(), kTol);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufQwen35F32, ::testing::Values("gguf_qwen35", "gguf_qwen35moe", "gguf_qwen3next"),
                         [](const auto& p) { return p.param; });

// The converter's Q8_0 file of a checkpoint whose weights were rounded to Q8_0 first
// (expected.json is transformers on those weights): dequantized to f32, the logits of
// transformers' float run exactly (so every Q8_0 tensor is read where it belongs).
TEST(GgufQwen35, Q8_0WeightsDequantizedGiveTransformersLogits) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load("gguf_qwen35_q8_0", *backend, DType::f32);
  ASSERT_NE(model, nullptr);
  for (const auto& fc : read_fixture_cases("gguf_qwen35_q8_0")) {
    const auto run = testing::run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kTol) << "prompt of " << fc.prompt.size();
    EXPECT_EQ(run.greedy, fc.greedy) << "prompt of " << fc.prompt.size();
  }
}

// The same file kept Q8_0 (the CPU's int8 kernels, activations rounded to Q8_0 per block as
// llama.cpp rounds them): its logits within twice what Q8_0 activations cost transformers, greedy
// decoding following it, and within kLlamaCppQ8Tol of llama.cpp's own run of the file.
TEST(GgufQwen35, Q8_0WeightsFollowTransformersWithinTheActivationError) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load("gguf_qwen35_q8_0", *backend);
  ASSERT_NE(model, nullptr);
  EXPECT_LT(model->weight_bytes(), model->n_params() * 2) << "the linear layers stay Q8_0 (8.5 bits a weight)";
  const auto doc = nlohmann::json::parse(read_text_file(fixture_dir("gguf_qwen35_q8_0") + "/expected.json").value());
  const auto llamacpp = nlohmann::json::parse(read_text_file(fixture_dir("gguf_qwen35_q8_0") + "/llamacpp.json").value());
  const auto cases = read_fixture_cases("gguf_qwen35_q8_0");
  ASSERT_EQ(cases.size(), 3u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& fc = cases[i];
    const double act = doc.at("cases")[i].at("act_q8_max_diff").get<double>();
    const auto act_greedy = doc.at("cases")[i].at("act_q8_greedy").get<std::vector<int32_t>>();
    const auto run = testing::run_fixture_case(*model, *backend, fc);
    const double bound = 2.0 * act + kTol;
    EXPECT_LE(run.max_abs_diff, bound) << "prompt of " << fc.prompt.size();
    EXPECT_TRUE(testing::greedy_follows(run, fc, {fc.greedy, act_greedy}, bound));
    // llama.cpp's own run of the file (llamacpp.json): both round the activations to Q8_0 per
    // block of 32, so brigade follows it far closer than transformers' float run.
    const auto& want = llamacpp.at("logits")[i];
    float worst = 0.0f;
    for (size_t r = 0; r < want.size(); ++r)
      for (size_t v = 0; v < want[r].size(); ++v)
        worst = std::max(worst, std::fabs(run.logits[r * want[r].size() + v] - want[r][v].get<float>()));
    ::testing::Test::RecordProperty("vs_llamacpp_" + std::to_string(fc.prompt.size()), std::to_string(worst));
    ::testing::Test::RecordProperty("vs_transformers_" + std::to_string(fc.prompt.size()), std::to_string(run.max_abs_diff));
    EXPECT_LE(worst, kLlamaCppQ8Tol) << "prompt of " << fc.prompt.size();
  }
}

// A tiny qwen3next / qwen35 header (the keys llama.cpp's loader needs) and zero tensors.
std::vector<testing::GgufKv> header(const std::string& arch, uint32_t blocks) {
  using testing::gguf_u32;
  const std::string a = arch + ".";
  std::vector<testing::GgufKv> kv = {testing::gguf_str("general.architecture", arch),
                                     gguf_u32(a + "block_count", blocks),
                                     gguf_u32(a + "context_length", 64),
                                     gguf_u32(a + "embedding_length", 64),
                                     gguf_u32(a + "feed_forward_length", 96),
                                     gguf_u32(a + "attention.head_count", 4),
                                     gguf_u32(a + "attention.head_count_kv", 2),
                                     gguf_u32(a + "attention.key_length", 32),
                                     gguf_u32(a + "rope.dimension_count", 8),
                                     gguf_u32(a + "ssm.conv_kernel", 4),
                                     gguf_u32(a + "ssm.state_size", 16),
                                     gguf_u32(a + "ssm.group_count", 2),
                                     gguf_u32(a + "ssm.time_step_rank", 4),
                                     gguf_u32(a + "ssm.inner_size", 32)};
  if (arch != "qwen35")
    for (auto [key, v] : {std::pair{"expert_count", 4u}, {"expert_used_count", 2u}, {"expert_feed_forward_length", 32u},
                          {"expert_shared_feed_forward_length", 48u}})
      kv.push_back(gguf_u32(a + key, v));
  return kv;
}

Status open_status(const testing::TempDir& dir, const std::vector<testing::GgufKv>& kv,
                   const std::vector<std::pair<std::string, std::vector<uint64_t>>>& tensors) {
  return testing::open_gguf_zeros(dir.file("model.gguf"), kv, tensors);
}

// What brigade does not read is refused naming it: Qwen3-Next's legacy unsplit ssm_in, experts
// fused as ffn_gate_up_exps, more MTP blocks than blocks, a value width that is not whole heads,
// a missing ssm key.
TEST(GgufQwen35, RefusesWhatItDoesNotReadNamingIt) {
  const testing::TempDir dir("gguf_qwen35_refused");
  const std::pair<std::string, std::vector<uint64_t>> embed{"token_embd.weight", {64, 256}};
  Status s = open_status(dir, header("qwen3next", 1), {embed, {"blk.0.ssm_in.weight", {64, 128}}});
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
  EXPECT_NE(s.message().find("blk.0.ssm_in.weight"), std::string::npos) << s.message();
  s = open_status(dir, header("qwen35moe", 1), {embed, {"blk.0.ffn_gate_up_exps.weight", {64, 64, 4}}});
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
  EXPECT_NE(s.message().find("--fuse-gate-up-exps"), std::string::npos) << s.message();
  auto kv = header("qwen35", 2);
  kv.push_back(testing::gguf_u32("qwen35.nextn_predict_layers", 2));
  s = open_status(dir, kv, {embed});
  EXPECT_EQ(s.code(), StatusCode::corrupt) << s.to_string();
  EXPECT_NE(s.message().find("nextn_predict_layers"), std::string::npos) << s.message();
  kv = header("qwen35", 2);
  kv.back() = testing::gguf_u32("qwen35.ssm.inner_size", 30);
  s = open_status(dir, kv, {embed});
  EXPECT_EQ(s.code(), StatusCode::corrupt) << s.to_string();
  EXPECT_NE(s.message().find("ssm.inner_size"), std::string::npos) << s.message();
  kv = header("qwen35", 2);
  std::erase_if(kv, [](const testing::GgufKv& e) { return e.key == "qwen35.ssm.time_step_rank"; });
  s = open_status(dir, kv, {embed});
  EXPECT_EQ(s.code(), StatusCode::corrupt) << s.to_string();
  EXPECT_NE(s.message().find("qwen35.ssm.time_step_rank"), std::string::npos) << s.message();
  // A block number past any integer is no block of the model: passed over, not thrown on.
  s = open_status(dir, header("qwen35", 2), {embed, {"blk.99999999999999999999.attn_q.weight", {64, 64}}});
  EXPECT_TRUE(s.is_ok() || s.message().find("model.gguf") != std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace brigade
