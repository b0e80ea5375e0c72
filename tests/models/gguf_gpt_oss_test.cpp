// gpt-oss GGUF files (llama.cpp's gpt-oss architecture): tests/fixtures/gguf_gpt_oss
// (scripts/make_gguf_fixtures.py), gpt_oss_mxfp4's checkpoint as llama.cpp's converter writes it,
// against transformers running that checkpoint as llama.cpp reads the file (the prefill of every
// prompt, dequantized and native MXFP4, is gguf_quant_test.cpp's). Here: the config as llama.cpp
// reads the keys, cached decode steps, that each rule the fixture pins moves the logits far when
// changed, llama.cpp's own logits matched when its YaRN rounding is taken, refusals naming the
// key, and the o200k-style vocabulary and harmony chat template the file carries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>

#include "chat_test_util.h"
#include "cpu/cpu_backend.h"
#include "gguf_vocab.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/gguf.h"
#include "models/inspect.h"
#include "models/model_chat_template.h"
#include "models/tokenizer_gguf.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::max_diff_with_rules;
using testing::read_fixture_cases;
using testing::TempDir;

const std::string kFixture = "gguf_gpt_oss";
std::string gguf_path() { return fixture_dir(kFixture) + "/model.gguf"; }

// gguf_quant_test.cpp's: fp32 summation order, plus 7 printed digits.
constexpr float kDequantizedTol = 5e-4f;

ModelConfig open_config(const std::string& path) {
  auto ck = Checkpoint::open(path);
  EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
  return ck ? (*ck)->config() : ModelConfig{};
}

// The id of `text` in the fixture's vocabulary (scripts/make_gguf_fixtures.py gpt_oss_vocab).
int token_id(const std::string& text) {
  auto g = GgufFile::open(gguf_path());
  EXPECT_TRUE(g.has_value());
  if (!g) return -1;
  const auto& strs = (*g)->find("tokenizer.ggml.tokens")->strs;
  auto it = std::find(strs.begin(), strs.end(), text);
  return it == strs.end() ? -1 : static_cast<int>(it - strs.begin());
}

TEST(GgufGptOss, ConfigIsWhatLlamaCppReads) {
  const ModelConfig c = open_config(gguf_path());
  EXPECT_EQ(c.arch, "gpt_oss");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16) << "attention.key_length";
  EXPECT_EQ(c.rope_style, RopeStyle::neox) << "q/k rows are not permuted";
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.o_bias);
  EXPECT_TRUE(c.attn_sinks);
  EXPECT_EQ(c.layer_window(0), 8) << "the even layers slide";
  EXPECT_EQ(c.layer_window(1), 0);
  EXPECT_FLOAT_EQ(c.rope_theta, 150000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::yarn);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position, 64);
  EXPECT_FLOAT_EQ(c.rope_scaling.beta_fast, 32.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.beta_slow, 1.0f);
  EXPECT_FALSE(c.rope_scaling.truncate) << "the Hub's gpt-oss rope_scaling";
  EXPECT_EQ(c.n_experts, 4);
  EXPECT_EQ(c.n_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 96);
  EXPECT_TRUE(c.moe_biases);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FLOAT_EQ(c.swiglu_limit, 7.0f) << "llama.cpp's LLM_FFN_SWIGLU_OAI_MOE";
  EXPECT_FLOAT_EQ(c.swiglu_alpha, 1.702f);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.bos_id, token_id("<|startoftext|>"));
  EXPECT_EQ(c.eos_ids, (std::vector<int>{token_id("<|return|>"), token_id("<|endoftext|>"), token_id("<|call|>")}))
      << "eos, then <|endoftext|> and <|call|> by their text; not <|end|>";
}

TEST(GgufGptOss, DecodeStepsMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(gguf_path(), *backend, DType::f32);
  ASSERT_NE(model, nullptr);
  for (const auto& fc : read_fixture_cases(kFixture)) {
    ASSERT_FALSE(fc.decode_logits.empty());
    const float d = testing::decode_max_diff(*model, *backend, fc);
    EXPECT_LE(d, kDequantizedTol) << "prompt of " << fc.prompt.size() << " tokens";
    RecordProperty("decode_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(d));
  }
}

// Each rule, changed, moves the long prompt's logits far past the tolerance: the fixture pins them.
TEST(GgufGptOss, RulesChangeTheResult) {
  const float far = 100 * kDequantizedTol;
  const std::string path = gguf_path();
  // The checkpoint's own clamp (1.0) where llama.cpp runs every gpt-oss file at 7.
  EXPECT_GT(max_diff_with_rules(kFixture, [](ModelConfig& c) { c.swiglu_limit = 1.0f; }, path, DType::f32), far);
  EXPECT_GT(max_diff_with_rules(kFixture, [](ModelConfig& c) { c.attn_sinks = false; }, path, DType::f32), far);
  EXPECT_GT(max_diff_with_rules(kFixture, [](ModelConfig& c) { c.sliding_layers.clear(); }, path, DType::f32), far);
  EXPECT_GT(max_diff_with_rules(kFixture, [](ModelConfig& c) { c.rope_scaling = RopeScaling{}; }, path, DType::f32), far);
  EXPECT_GT(max_diff_with_rules(kFixture, [](ModelConfig& c) { c.rope_scaling.truncate = true; }, path, DType::f32),
            far);
}

// llama.cpp's logits for the same file (llamacpp.json, from llama-cpp-python): brigade, given
// llama.cpp's one difference of rule (YaRN's correction range rounded outward), matches them
// within what the MXFP4 kernels' int8 activations cost (both runtimes quantize the experts'
// inputs so); without it, by as far as llama.cpp is from transformers.
TEST(GgufGptOss, MatchesLlamaCppWithItsYarnRounding) {
  const auto ref = testing::load_fixture_json("gguf_gpt_oss/llamacpp.json");
  ASSERT_FALSE(ref.is_discarded()) << "run scripts/make_gguf_fixtures.py --llamacpp gguf_gpt_oss";
  auto cases = read_fixture_cases(kFixture);
  ASSERT_EQ(ref["logits"].size(), cases.size());
  auto ck = Checkpoint::open(gguf_path());
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  ModelConfig c = (*ck)->config();
  c.rope_scaling.truncate = true;
  auto rounded = Checkpoint::from_memory((*ck)->path(), c, (*ck)->tensors());
  auto backend = make_cpu_backend({.n_threads = 2});
  LoadOptions opts;
  opts.max_batch_tokens = 64;
  auto model = load_llama(*rounded, *backend, opts);
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  const auto expected = testing::load_fixture_json("gguf_gpt_oss/expected.json");
  for (size_t i = 0; i < cases.size(); ++i) {
    testing::FixtureCase fc = cases[i];
    fc.logits = ref["logits"][i].get<std::vector<std::vector<float>>>();
    const double act_q8 = expected["cases"][i]["act_q8_max_diff"].get<double>();
    const auto run = testing::run_fixture_case(**model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, 2.0 * act_q8 + kDequantizedTol) << "prompt of " << fc.prompt.size();
    RecordProperty("llamacpp_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(run.max_abs_diff));
  }
}

// A gpt-oss GGUF of 3 layers whose keys are those the converter writes less `drop`, plus `extra`,
// and whose tensors are zeros: the table and each layer's router and experts (enough for
// Checkpoint::open's config and its expert shape checks).
std::string write_header(const TempDir& dir, const std::string& file, const std::vector<std::string>& drop,
                         std::vector<testing::GgufKv> extra) {
  using testing::gguf_u32;
  constexpr int kLayers = 3;
  const std::string a = "gpt-oss.";
  std::vector<testing::GgufKv> kv = {
      testing::gguf_str("general.architecture", "gpt-oss"), gguf_u32(a + "block_count", kLayers),
      gguf_u32(a + "context_length", 256), gguf_u32(a + "embedding_length", 64), gguf_u32(a + "feed_forward_length", 32),
      gguf_u32(a + "attention.head_count", 4), gguf_u32(a + "attention.head_count_kv", 2),
      gguf_u32(a + "attention.key_length", 32), gguf_u32(a + "attention.value_length", 32),
      gguf_u32(a + "expert_count", 4), gguf_u32(a + "expert_used_count", 2),
      gguf_u32(a + "expert_feed_forward_length", 32), gguf_u32(a + "attention.sliding_window", 16)};
  std::erase_if(kv, [&](const testing::GgufKv& e) { return std::find(drop.begin(), drop.end(), e.key) != drop.end(); });
  kv.insert(kv.end(), extra.begin(), extra.end());
  std::vector<std::pair<std::string, std::vector<uint64_t>>> tensors = {{"token_embd.weight", {64, 8}}};  // ggml dims
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    tensors.push_back({p + "ffn_gate_inp.weight", {64, 4}});
    tensors.push_back({p + "ffn_gate_exps.weight", {64, 32, 4}});
    tensors.push_back({p + "ffn_up_exps.weight", {64, 32, 4}});
    tensors.push_back({p + "ffn_down_exps.weight", {32, 64, 4}});
  }
  const std::string path = dir.file(file);
  testing::write_gguf_zeros(path, kv, tensors);
  return path;
}

TEST(GgufGptOss, DefaultsOfTheKeysTheConverterMayLeaveOut) {
  const TempDir dir("gguf_gpt_oss_defaults");
  // Without rope.scaling: plain RoPE. An explicit window pattern overrides the even layers.
  testing::GgufKv pattern{"gpt-oss.attention.sliding_window_pattern", 9};
  pattern.elem_type = 7;
  pattern.i32s = {0, 1, 0};
  ModelConfig c = open_config(write_header(dir, "plain.gguf", {}, {pattern}));
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::none);
  EXPECT_EQ(c.layer_window(0), 0);
  EXPECT_EQ(c.layer_window(1), 16);
  EXPECT_EQ(c.layer_window(2), 0);
  // YaRN with only its factor: the original context is context_length, beta 32 / 1 (llama.cpp's).
  c = open_config(write_header(dir, "yarn.gguf", {},
                               {testing::gguf_str("gpt-oss.rope.scaling.type", "yarn"),
                                testing::GgufKv{"gpt-oss.rope.scaling.factor", 6, 0, 32.0f}}));
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::yarn);
  EXPECT_EQ(c.rope_scaling.original_max_position, 256);
  EXPECT_FLOAT_EQ(c.rope_scaling.beta_fast, 32.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.beta_slow, 1.0f);
  EXPECT_EQ(c.rope_scaling.attention_factor, 0.0f) << "inferred from the factor, as transformers does";
  EXPECT_EQ(c.layer_window(0), 16);
  EXPECT_EQ(c.layer_window(1), 0);
  EXPECT_EQ(c.layer_window(2), 16);
  // rope.scaling.attn_factor multiplies YaRN's magnitude correction (llama.cpp's rule).
  c = open_config(write_header(dir, "attn.gguf", {},
                               {testing::gguf_str("gpt-oss.rope.scaling.type", "yarn"),
                                testing::GgufKv{"gpt-oss.rope.scaling.factor", 6, 0, 32.0f},
                                testing::GgufKv{"gpt-oss.rope.scaling.attn_factor", 6, 0, 2.0f}}));
  EXPECT_FLOAT_EQ(c.rope_scaling.attention_factor, 2.0f * yarn_mscale(32.0f, 1.0f));
}

TEST(GgufGptOss, RefusesWhatItCannotRunNamingTheKey) {
  const TempDir dir("gguf_gpt_oss_refuse");
  struct Bad {
    std::vector<std::string> drop;
    std::vector<testing::GgufKv> extra;
    StatusCode code;
    std::string key;
  };
  const std::vector<Bad> bad = {
      {{"gpt-oss.expert_feed_forward_length"}, {}, StatusCode::corrupt, "gpt-oss.expert_feed_forward_length"},
      {{"gpt-oss.attention.sliding_window"}, {}, StatusCode::corrupt, "gpt-oss.attention.sliding_window"},
      {{"gpt-oss.expert_used_count"}, {testing::gguf_u32("gpt-oss.expert_used_count", 5)}, StatusCode::corrupt,
       "gpt-oss.expert_used_count"},
      {{}, {testing::gguf_str("gpt-oss.rope.scaling.type", "linear")}, StatusCode::unsupported,
       "gpt-oss.rope.scaling.type"},
      {{}, {testing::gguf_str("gpt-oss.rope.scaling.type", "yarn")}, StatusCode::corrupt, "gpt-oss.rope.scaling.factor"},
      {{"gpt-oss.attention.value_length"}, {testing::gguf_u32("gpt-oss.attention.value_length", 64)},
       StatusCode::unsupported, "gpt-oss.attention.value_length"},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    auto ck = Checkpoint::open(write_header(dir, std::to_string(i) + ".gguf", bad[i].drop, bad[i].extra));
    ASSERT_FALSE(ck.has_value()) << bad[i].key;
    EXPECT_EQ(ck.status().code(), bad[i].code) << ck.status().to_string();
    EXPECT_NE(ck.status().message().find(bad[i].key), std::string::npos) << ck.status().to_string();
  }
}

// The fixture's vocabulary is laid out as o200k_harmony's (byte-level BPE, pre-tokenizer gpt-4o,
// harmony's markers as control tokens): brigade tokenizes as llama.cpp does (llamacpp.json), each
// marker is one id, and no BOS is added; the file's chat template (gpt-oss's own) renders as
// transformers renders it.
TEST(GgufGptOss, VocabularyAndChatTemplate) {
  testing::expect_tokenizes_as_llamacpp("gguf_gpt_oss", 4);
  auto g = GgufFile::open(gguf_path());
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto tok = load_gguf_tokenizer(**g);
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  auto ids = (*tok)->encode("<|start|>user<|message|>Hi<|end|>", true);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(ids->front(), token_id("<|start|>")) << "no BOS: the file does not ask for one";
  EXPECT_EQ(ids->back(), token_id("<|end|>"));

  auto tmpl = load_chat_template(gguf_path(), "", {"<|startoftext|>", "<|return|>"});
  ASSERT_TRUE(tmpl.has_value()) << tmpl.status().to_string();
  EXPECT_EQ(tmpl->origin, "GGUF tokenizer.chat_template");
  EXPECT_EQ(tmpl->tool_syntax(), ChatToolSyntax::openai) << "harmony's tool calls";
  // The template writes strftime_now's date, which the fixtures pinned to 2024-07-26.
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char today[16];
  std::strftime(today, sizeof today, "%Y-%m-%d", &tm);
  for (const char* conversation : {"system_multi_turn", "tools_full_exchange"}) {
    const auto c = testing::chat_template_case("gpt-oss", conversation, true);
    ASSERT_FALSE(c.is_null()) << conversation;
    auto text = tmpl->apply(testing::case_messages(c), testing::case_tools(c), true);
    ASSERT_TRUE(text.has_value()) << text.status().to_string();
    std::string expected = c["expected"].get<std::string>();
    const std::string pinned = "Current date: 2024-07-26";
    ASSERT_NE(expected.find(pinned), std::string::npos);
    expected.replace(expected.find(pinned), pinned.size(), std::string("Current date: ") + today);
    EXPECT_EQ(*text, expected) << conversation;
  }
}

TEST(GgufGptOss, InspectNamesTheArchitectureAndItsRules) {
  auto info = inspect_model(gguf_path());
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  const std::string text = format_model_info(*info);
  EXPECT_NE(text.find("architecture:  gpt_oss"), std::string::npos) << text;
  EXPECT_NE(text.find("a sink logit per head"), std::string::npos) << text;
  EXPECT_NE(text.find("clamped SwiGLU (limit 7"), std::string::npos) << text;
  EXPECT_NE(text.find("MXFP4"), std::string::npos) << text;
}

}  // namespace
}  // namespace brigade
