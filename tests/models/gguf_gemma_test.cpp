// Gemma 2 / Gemma 3 GGUF files (llama.cpp's gemma2 / gemma3) against transformers loading the same
// file: tests/fixtures/gguf_gemma2 and gguf_gemma3 (scripts/make_gguf_fixtures.py; the prefill of
// every prompt, dequantized and native, is gguf_quant_test.cpp's). Here: cached decode steps, the
// config as llama.cpp reads the keys, that each rule the fixtures pin (the norms stored + 1, the
// softmax scale, the window pattern, the two RoPEs, the soft-caps) moves the logits far when
// changed, refusals naming the key, and the vocabulary and chat template a Gemma GGUF carries
// (llama.cpp's own tokenization in llamacpp.json).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

std::string gguf_path(const std::string& fixture) { return fixture_dir(fixture) + "/model.gguf"; }

// gguf_quant_test.cpp's: fp32 summation order over rows of up to 512, plus 7 printed digits.
constexpr float kDequantizedTol = 5e-4f;

ModelConfig open_config(const std::string& path) {
  auto ck = Checkpoint::open(path);
  EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
  return ck ? (*ck)->config() : ModelConfig{};
}

TEST(GgufGemma, ConfigIsWhatLlamaCppReads) {
  const ModelConfig a = open_config(gguf_path("gguf_gemma2"));
  EXPECT_EQ(a.arch, "gemma2");
  EXPECT_EQ(a.norm_offset, 0.0f) << "the converter stored 1 + w";
  EXPECT_TRUE(a.sandwich_norms);
  EXPECT_EQ(a.mlp_activation, MlpActivation::gelu_tanh);
  EXPECT_FLOAT_EQ(a.embed_scale, std::sqrt(128.0f));
  EXPECT_FALSE(a.qk_norm);
  EXPECT_EQ(a.rope_style, RopeStyle::neox);
  EXPECT_FLOAT_EQ(a.attn_scale, 1.0f / 16.0f) << "1/sqrt(key_length 256)";
  EXPECT_FLOAT_EQ(a.attn_softcap, 5.0f);
  EXPECT_FLOAT_EQ(a.final_softcap, 3.0f);
  EXPECT_EQ(a.layer_window(0), 8);
  EXPECT_EQ(a.layer_window(1), 0) << "gemma2: the odd layers are global";
  EXPECT_EQ(a.rope_local_theta, 0.0f);
  EXPECT_FLOAT_EQ(a.rope_theta, 10000.0f) << "no rope.freq_base: llama.cpp's default";
  EXPECT_TRUE(a.tie_embeddings);
  EXPECT_EQ(a.bos_id, 2);
  EXPECT_EQ(a.eos_ids, (std::vector<int>{1, 5})) << "<eos>, and <end_of_turn> by its text";

  const ModelConfig b = open_config(gguf_path("gguf_gemma3"));
  EXPECT_EQ(b.arch, "gemma3_text");
  EXPECT_TRUE(b.qk_norm);
  EXPECT_FLOAT_EQ(b.attn_scale, 1.0f / std::sqrt(128.0f));
  EXPECT_EQ(b.attn_softcap, 0.0f);
  EXPECT_EQ(b.final_softcap, 0.0f);
  for (int l = 0; l < 5; ++l) EXPECT_EQ(b.layer_window(l), 8) << l;
  EXPECT_EQ(b.layer_window(5), 0) << "gemma3: every 6th layer global";
  EXPECT_FLOAT_EQ(b.rope_theta, 1e6f);
  EXPECT_EQ(b.rope_scaling.type, RopeScalingType::linear);
  EXPECT_FLOAT_EQ(b.rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(b.rope_local_theta, 10000.0f);
}

TEST(GgufGemma, DecodeStepsMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  for (const char* name : {"gguf_gemma2", "gguf_gemma3"}) {
    auto model = testing::load_or_fail(gguf_path(name), *backend, DType::f32);
    ASSERT_NE(model, nullptr) << name;
    for (const auto& fc : read_fixture_cases(name)) {
      ASSERT_FALSE(fc.decode_logits.empty()) << name;
      const float d = testing::decode_max_diff(*model, *backend, fc);
      EXPECT_LE(d, kDequantizedTol) << name << ", prompt of " << fc.prompt.size() << " tokens";
      RecordProperty(std::string(name) + "_decode_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(d));
    }
  }
}

// Each rule, changed, moves the long prompt's logits far past the tolerance.
TEST(GgufGemma, RulesChangeTheResult) {
  const float far = 100 * kDequantizedTol;
  const std::string g2 = gguf_path("gguf_gemma2"), g3 = gguf_path("gguf_gemma3");
  for (const auto& [fixture, path] : {std::pair{"gguf_gemma2", g2}, std::pair{"gguf_gemma3", g3}}) {
    // The safetensors path's + 1 applied again to norms stored as 1 + w.
    EXPECT_GT(max_diff_with_rules(fixture, [](ModelConfig& c) { c.norm_offset = 1.0f; }, path), far) << fixture;
    EXPECT_GT(max_diff_with_rules(fixture, [](ModelConfig& c) { c.sliding_layers.clear(); }, path), far) << fixture;
    EXPECT_GT(max_diff_with_rules(fixture, [](ModelConfig& c) { c.embed_scale = 0.0f; }, path), far) << fixture;
  }
  EXPECT_GT(max_diff_with_rules("gguf_gemma2", [](ModelConfig& c) { c.attn_softcap = 0.0f; }, g2), far);
  EXPECT_GT(max_diff_with_rules("gguf_gemma2", [](ModelConfig& c) { c.final_softcap = 0.0f; }, g2), far);
  // transformers' query_pre_attn_scalar default (256) where llama.cpp takes key_length (128).
  EXPECT_GT(max_diff_with_rules("gguf_gemma3", [](ModelConfig& c) { c.attn_scale = 1.0f / 16.0f; }, g3), far);
  EXPECT_GT(max_diff_with_rules("gguf_gemma3", [](ModelConfig& c) { c.rope_scaling = RopeScaling{}; }, g3), far);
  EXPECT_GT(max_diff_with_rules("gguf_gemma3", [](ModelConfig& c) { c.rope_local_theta = 0.0f; }, g3), far);
}

// A file whose norms hold Gemma's w rather than 1 + w (a converter that skipped the + 1) runs, and
// its logits are far from the fixture's: the test above cannot pass by accident.
TEST(GgufGemma, NormsWithoutTheOffsetDiffer) {
  const TempDir dir("gguf_gemma_norms");
  const std::string src = gguf_path("gguf_gemma3"), dst = dir.file("model.gguf");
  auto g = GgufFile::open(src);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  std::vector<uint8_t> bytes((*g)->file()->data(), (*g)->file()->data() + (*g)->file()->size());
  int n_norms = 0;
  for (const auto& t : (*g)->tensors()) {
    if (!t.name.ends_with("norm.weight")) continue;
    ASSERT_EQ(t.type->name, std::string("F32")) << t.name;
    uint8_t* p = bytes.data() + (t.bytes.data() - (*g)->file()->data());
    for (size_t i = 0; i < t.bytes.size(); i += 4) {
      float v;
      std::memcpy(&v, p + i, 4);
      v -= 1.0f;
      std::memcpy(p + i, &v, 4);
    }
    ++n_norms;
  }
  EXPECT_EQ(n_norms, 6 * 6 + 1);  // attn, q, k, post-attention, ffn, post-ffw per layer; output
  std::ofstream(dst, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(dst, *backend, DType::f32);
  ASSERT_NE(model, nullptr);
  const auto run = testing::run_fixture_case(*model, *backend, read_fixture_cases("gguf_gemma3").back());
  EXPECT_GT(run.max_abs_diff, 100 * kDequantizedTol);
}

// A gemma GGUF of metadata and a token table only (enough for Checkpoint::open's config).
std::string write_gemma_header(const TempDir& dir, const std::string& arch, int n_layers, std::vector<testing::GgufKv> extra) {
  using testing::gguf_u32;
  const std::string a = arch + ".";
  std::vector<testing::GgufKv> kv = {testing::gguf_str("general.architecture", arch),
                                     gguf_u32(a + "context_length", 256), gguf_u32(a + "embedding_length", 64),
                                     gguf_u32(a + "block_count", static_cast<uint32_t>(n_layers)),
                                     gguf_u32(a + "feed_forward_length", 128), gguf_u32(a + "attention.head_count", 4),
                                     gguf_u32(a + "attention.head_count_kv", 2), gguf_u32(a + "attention.key_length", 32),
                                     gguf_u32(a + "attention.value_length", 32)};
  kv.insert(kv.end(), extra.begin(), extra.end());
  testing::GgufBytes b;
  b.put<uint32_t>(0x46554747);
  b.put<uint32_t>(3);
  b.put<uint64_t>(1);
  b.put<uint64_t>(kv.size());
  for (const auto& e : kv) testing::put_kv(b, e);
  b.put_string("token_embd.weight");
  b.put<uint32_t>(2);
  b.put<uint64_t>(64);
  b.put<uint64_t>(8);
  b.put<uint32_t>(0);  // F32
  b.put<uint64_t>(0);
  b.pad(32);
  b.bytes().resize(b.bytes().size() + 64 * 8 * 4);
  const std::string path = dir.file(arch + "_" + std::to_string(n_layers) + ".gguf");
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.bytes().data()), static_cast<std::streamsize>(b.bytes().size()));
  return path;
}

TEST(GgufGemma, DefaultsAndDerivedRules) {
  const TempDir dir("gguf_gemma_rules");
  // gemma2 without the optional keys: llama.cpp's defaults (window 4096, soft-caps 50 and 30).
  ModelConfig c = open_config(write_gemma_header(dir, "gemma2", 4, {}));
  EXPECT_EQ(c.layer_window(0), 4096);
  EXPECT_EQ(c.layer_window(3), 0);
  EXPECT_FLOAT_EQ(c.attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 30.0f);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(32.0f));
  // The 27B models (46 / 62 layers): 1/sqrt(hidden / heads), their query_pre_attn_scalar.
  c = open_config(write_gemma_header(dir, "gemma2", 46, {}));
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / 4.0f);
  c = open_config(write_gemma_header(dir, "gemma3", 62, {testing::gguf_u32("gemma3.attention.sliding_window", 512)}));
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / 4.0f);
  EXPECT_EQ(c.layer_window(60), 512);
  EXPECT_EQ(c.layer_window(59), 0);
  // gemma3 without a window: every layer global on the one RoPE.
  c = open_config(write_gemma_header(dir, "gemma3", 6, {}));
  for (int l = 0; l < 6; ++l) EXPECT_EQ(c.layer_window(l), 0) << l;
  EXPECT_EQ(c.rope_local_theta, 0.0f);
  // An explicit pattern, and the local RoPE base, when the file has them.
  testing::GgufKv pattern{"gemma3.attention.sliding_window_pattern", 9};
  pattern.elem_type = 7;
  pattern.i32s = {0, 1, 1};
  c = open_config(write_gemma_header(dir, "gemma3", 3, {testing::gguf_u32("gemma3.attention.sliding_window", 16), pattern,
                                                        testing::GgufKv{"gemma3.rope.freq_base_swa", 6, 0, 20000.0f}}));
  EXPECT_EQ(c.layer_window(0), 0);
  EXPECT_EQ(c.layer_window(1), 16);
  EXPECT_FLOAT_EQ(c.rope_local_theta, 20000.0f);
}

TEST(GgufGemma, RefusesWhatItCannotRunNamingTheKey) {
  const TempDir dir("gguf_gemma_refuse");
  auto ck = Checkpoint::open(write_gemma_header(dir, "gemma3", 2, {testing::gguf_u32("gemma3.attention.value_length", 64)}));
  ASSERT_FALSE(ck.has_value());
  EXPECT_EQ(ck.status().code(), StatusCode::unsupported);
  EXPECT_NE(ck.status().message().find("gemma3.attention.value_length"), std::string::npos) << ck.status().to_string();
  testing::GgufKv pattern{"gemma2.attention.sliding_window_pattern", 9};
  pattern.elem_type = 7;
  pattern.i32s = {1, 0, 1};
  ck = Checkpoint::open(write_gemma_header(dir, "gemma2", 2, {pattern}));
  ASSERT_FALSE(ck.has_value());
  EXPECT_EQ(ck.status().code(), StatusCode::corrupt);
  EXPECT_NE(ck.status().message().find("gemma2.attention.sliding_window_pattern"), std::string::npos);
  ck = Checkpoint::open(write_gemma_header(dir, "gemma2", 2, {testing::GgufKv{"gemma2.attn_logit_softcapping", 6, 0, -1.0f}}));
  ASSERT_FALSE(ck.has_value());
  EXPECT_NE(ck.status().message().find("gemma2.attn_logit_softcapping"), std::string::npos);
}

// The fixtures' vocabulary is laid out as Gemma's (SentencePiece, control turn markers,
// add_space_prefix false): brigade tokenizes as llama.cpp does (llamacpp.json), the turn markers
// are single ids, BOS is added; the GGUF's chat template renders as transformers does.
TEST(GgufGemma, VocabularyAndChatTemplate) {
  testing::expect_tokenizes_as_llamacpp("gguf_gemma2", 4);
  auto g = GgufFile::open(gguf_path("gguf_gemma2"));
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto tok = load_gguf_tokenizer(**g);
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  auto ids = (*tok)->encode("<start_of_turn>user\nHi<end_of_turn>", true);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(ids->front(), 2) << "BOS added";
  EXPECT_EQ((*ids)[1], 4) << "<start_of_turn> is one id";
  EXPECT_EQ(ids->back(), 5) << "<end_of_turn> is one id";

  auto tmpl = load_chat_template(gguf_path("gguf_gemma2"), "", {"<bos>", "<eos>"});
  ASSERT_TRUE(tmpl.has_value()) << tmpl.status().to_string();
  EXPECT_EQ(tmpl->origin, "GGUF tokenizer.chat_template");
  const auto c = testing::chat_template_case("gemma-2", "one_user", true);
  ASSERT_FALSE(c.is_null());
  auto text = tmpl->apply(testing::case_messages(c), {}, true);
  ASSERT_TRUE(text.has_value()) << text.status().to_string();
  EXPECT_EQ(*text, c["expected"].get<std::string>());
}

TEST(GgufGemma, InspectNamesTheArchitectureAndItsRules) {
  auto info = inspect_model(gguf_path("gguf_gemma3"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  const std::string text = format_model_info(*info);
  EXPECT_NE(text.find("architecture:  gemma3_text"), std::string::npos) << text;
  EXPECT_NE(text.find("sliding layers theta 10000 unscaled"), std::string::npos) << text;
  EXPECT_NE(text.find("Q4_0"), std::string::npos) << text;
}

}  // namespace
}  // namespace brigade
