// Qwen3-MoE GGUF files (llama.cpp's qwen3moe) against transformers loading the same file:
// tests/fixtures/gguf_qwen3moe_q4_k_m (scripts/make_gguf_fixtures.py; 4 experts, top 2, Q4_K / Q6_K /
// Q8_0 experts; the prefill of every prompt, dequantized and native, is gguf_quant_test.cpp's).
// Here: the config as llama.cpp reads the keys, that the experts stay in their stored block types
// (bytes), cached decode steps, that the renormalised routing llama.cpp decides moves the logits
// far when changed, and refusals naming the key or tensor (corrupt counts and shapes, qwen2moe,
// llama with experts, a backend without split experts).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "block_weight_backend.h"
#include "cpu/cpu_backend.h"
#include "gguf_vocab.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/llama.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::read_fixture_cases;
using testing::TempDir;

const std::string kFixture = "gguf_qwen3moe_q4_k_m";

std::string gguf_path() { return fixture_dir(kFixture) + "/model.gguf"; }

// gguf_quant_test.cpp's: fp32 summation order over rows of 256, plus 7 printed digits.
constexpr float kDequantizedTol = 5e-4f;

TEST(GgufMoe, ConfigIsWhatLlamaCppReads) {
  auto ck = Checkpoint::open(gguf_path());
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "qwen3_moe");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.n_experts, 4);
  EXPECT_EQ(c.n_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 256) << "expert_feed_forward_length";
  EXPECT_EQ(c.intermediate_size, 512) << "feed_forward_length: the dense width, unused";
  EXPECT_TRUE(c.norm_topk_prob) << "llama.cpp renormalises qwen3moe's routing weights";
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 1.0f);
  EXPECT_EQ(c.n_moe_layers(), c.n_layers) << "every layer sparse";
  EXPECT_EQ(c.head_dim, 64) << "attention.key_length";
  const RawTensor& gate = (*ck)->tensors().at("model.layers.0.mlp.experts.gate_proj");
  EXPECT_EQ(gate.shape, (std::vector<int64_t>{4, 256, 256}));
  EXPECT_EQ(gate.type_name(), "Q4_K");
  EXPECT_EQ((*ck)->tensors().at("model.layers.0.mlp.experts.down_proj").type_name(), "Q6_K");
  EXPECT_EQ((*ck)->tensors().at("model.layers.1.mlp.experts.gate_proj").type_name(), "Q8_0");
  EXPECT_EQ((*ck)->tensors().at("model.layers.0.mlp.gate.weight").dtype, DType::f32);
}

// weights auto: every block type stays as stored (the experts' bytes are the file's), the router
// and the norms f32; weights f32: 4 bytes for every parameter.
TEST(GgufMoe, TheExpertsStayInTheirBlockTypes) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto automatic = testing::load_or_fail(gguf_path(), *backend, std::nullopt);
  auto f32 = testing::load_or_fail(gguf_path(), *backend, DType::f32);
  ASSERT_TRUE(automatic && f32);
  auto ck = Checkpoint::open(gguf_path());
  ASSERT_TRUE(ck.has_value());
  int64_t kept = 0, floats = 0, expert_bytes = 0;
  for (const auto& [name, t] : (*ck)->tensors()) {
    ASSERT_TRUE(!t.block_quantized() || backend->supports_weight_dtype(t.dtype)) << name;
    if (t.block_quantized()) kept += static_cast<int64_t>(t.bytes.size());
    else floats += t.numel();
    if (name.find("mlp.experts.") != std::string::npos) expert_bytes += static_cast<int64_t>(t.bytes.size());
  }
  EXPECT_EQ(automatic->n_params(), f32->n_params());
  EXPECT_EQ(automatic->weight_bytes(), kept + 4 * floats);
  EXPECT_GT(expert_bytes, kept / 2) << "the experts are most of the file";
  EXPECT_EQ(f32->weight_bytes(), 4 * f32->n_params());
}

// Cached decode steps (one token: the grouped decode path of moe_experts_split, here over the
// dequantized f32 experts) equal transformers' within fp32 noise. The native kernels' decode
// steps are gguf_quant_test.cpp's (greedy_follows over the continuation): transformers' Q8_0
// activation run measures the prompt's positions only, and a decode step's router may take
// another expert where the reference's own margin is within that noise (the fixture keeps its
// margins above 0.3 of logits of about 16; the rounding moves them by up to ~0.4).
TEST(GgufMoe, DecodeStepsMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto f32 = testing::load_or_fail(gguf_path(), *backend, DType::f32);
  ASSERT_NE(f32, nullptr);
  for (const auto& fc : read_fixture_cases(kFixture)) {
    ASSERT_FALSE(fc.decode_logits.empty());
    const float d = testing::decode_max_diff(*f32, *backend, fc);
    EXPECT_LE(d, kDequantizedTol) << "prompt of " << fc.prompt.size();
    RecordProperty("decode_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(d));
  }
}

// Max |Δlogit| on the longest prompt, weights f32, with the config changed by `edit`.
float f32_max_diff_with(const std::function<void(ModelConfig&)>& edit) {
  return testing::max_diff_with_rules(kFixture, edit, gguf_path(), DType::f32);
}

// What llama.cpp decides for qwen3moe (renormalised top-k) is what transformers was given, and the
// fixture tells it apart: without it, or with top-1 or top-3, the logits move far.
TEST(GgufMoe, TheRoutingRulesChangeTheResult) {
  EXPECT_LE(f32_max_diff_with([](ModelConfig&) {}), kDequantizedTol);
  const float far = 100 * kDequantizedTol;
  EXPECT_GT(f32_max_diff_with([](ModelConfig& c) { c.norm_topk_prob = false; }), far);
  EXPECT_GT(f32_max_diff_with([](ModelConfig& c) { c.n_experts_per_tok = 1; }), far);
  EXPECT_GT(f32_max_diff_with([](ModelConfig& c) { c.n_experts_per_tok = 3; }), far);
}

// Mixtral as llama.cpp writes it (tests/fixtures/gguf_mixtral_q8_0: arch llama with experts,
// from make_fixtures.py's mixtral checkpoint, Q8_0 / Q4_0 experts; its prefill, dequantized and
// native, is gguf_quant_test.cpp's): read as arch mixtral, llama's interleaved rope, experts
// feed_forward_length wide, no window (llama.cpp reads none), renormalised softmax top-k.
const std::string kMixtral = "gguf_mixtral_q8_0";

TEST(GgufMixtral, ConfigIsWhatLlamaCppReads) {
  auto ck = Checkpoint::open(fixture_dir(kMixtral) + "/model.gguf");
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "mixtral");
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.rope_style, RopeStyle::interleaved);
  EXPECT_EQ(c.n_experts, 4);
  EXPECT_EQ(c.n_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 64) << "feed_forward_length";
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.n_moe_layers(), c.n_layers);
  const auto& t = (*ck)->tensors();
  EXPECT_EQ(t.at("model.layers.0.mlp.experts.gate_proj").shape, (std::vector<int64_t>{4, 64, 64}));
  EXPECT_EQ(t.at("model.layers.0.mlp.experts.gate_proj").type_name(), "Q8_0");
  EXPECT_EQ(t.at("model.layers.0.mlp.experts.up_proj").type_name(), "Q4_0");
  EXPECT_EQ(t.at("model.layers.1.mlp.experts.down_proj").type_name(), "Q4_0");
  EXPECT_EQ(t.at("model.layers.1.mlp.gate.weight").dtype, DType::f32);
}

// Weights auto keeps the experts' blocks (the file's bytes); cached decode steps of the
// dequantized model equal transformers'.
TEST(GgufMixtral, ExpertsStayAsStoredAndDecodeStepsMatchTransformers) {
  const std::string path = fixture_dir(kMixtral) + "/model.gguf";
  auto backend = make_cpu_backend({.n_threads = 2});
  auto automatic = testing::load_or_fail(path, *backend, std::nullopt);
  auto f32 = testing::load_or_fail(path, *backend, DType::f32);
  ASSERT_TRUE(automatic && f32);
  auto ck = Checkpoint::open(path);
  ASSERT_TRUE(ck.has_value());
  int64_t kept = 0, floats = 0;
  for (const auto& [name, t] : (*ck)->tensors()) {
    if (t.block_quantized()) kept += static_cast<int64_t>(t.bytes.size());
    else floats += t.numel();
  }
  EXPECT_EQ(automatic->weight_bytes(), kept + 4 * floats);
  for (const auto& fc : read_fixture_cases(kMixtral)) {
    ASSERT_FALSE(fc.decode_logits.empty());
    EXPECT_LE(testing::decode_max_diff(*f32, *backend, fc), kDequantizedTol) << "prompt of " << fc.prompt.size();
  }
}

TEST(GgufMixtral, TheRoutingRulesChangeTheResult) {
  const std::string path = fixture_dir(kMixtral) + "/model.gguf";
  auto diff = [&](const std::function<void(ModelConfig&)>& edit) {
    return testing::max_diff_with_rules(kMixtral, edit, path, DType::f32);
  };
  EXPECT_LE(diff([](ModelConfig&) {}), kDequantizedTol);
  EXPECT_GT(diff([](ModelConfig& c) { c.norm_topk_prob = false; }), 100 * kDequantizedTol);
  EXPECT_GT(diff([](ModelConfig& c) { c.n_experts_per_tok = 1; }), 100 * kDequantizedTol);
}

// The fixture's bytes with edits: a metadata key's u32 value, a string's bytes, a tensor's name.
class GgufMoeRefusals : public ::testing::Test {
 protected:
  void SetUp() override {
    good_ = testing::read_bytes(gguf_path());
    ASSERT_FALSE(good_.empty());
  }
  // Offset just past the first occurrence of `text` in the file.
  size_t after(const std::string& text) const {
    auto it = std::search(good_.begin(), good_.end(), text.begin(), text.end());
    EXPECT_NE(it, good_.end()) << text;
    return static_cast<size_t>(it - good_.begin()) + text.size();
  }
  // The file with the u32 value of metadata key `key` set to v (after the key: u32 type, value).
  std::vector<uint8_t> with_u32(const std::string& key, uint32_t v) const {
    std::vector<uint8_t> b = good_;
    uint32_t type = 0;
    std::memcpy(&type, &b[after(key)], 4);
    EXPECT_EQ(type, 4u) << key << " is a u32";
    std::memcpy(&b[after(key) + 4], &v, 4);
    return b;
  }
  // The file with the first occurrence of `from` replaced by `to` (same length).
  std::vector<uint8_t> with_text(const std::string& from, const std::string& to) const {
    std::vector<uint8_t> b = good_;
    EXPECT_EQ(from.size(), to.size());
    std::memcpy(&b[after(from) - from.size()], to.data(), to.size());
    return b;
  }
  Status open(const std::vector<uint8_t>& bytes) {
    testing::write_bytes(dir_.file("bad.gguf"), bytes);
    auto ck = Checkpoint::open(dir_.file("bad.gguf"));
    return ck ? Status::ok() : ck.status();
  }
  void expect_refused(const std::vector<uint8_t>& bytes, StatusCode code, const std::string& needle) {
    const Status st = open(bytes);
    EXPECT_EQ(st.code(), code) << st.to_string();
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.to_string();
  }
  TempDir dir_{"gguf_moe"};
  std::vector<uint8_t> good_;
};

TEST_F(GgufMoeRefusals, CorruptCountsAndShapesNameTheKeyOrTensor) {
  EXPECT_TRUE(open(good_).is_ok());
  expect_refused(with_u32("qwen3moe.expert_used_count", 5), StatusCode::corrupt,
                 "'qwen3moe.expert_used_count' (5) exceeds 'qwen3moe.expert_count' (4)");
  expect_refused(with_u32("qwen3moe.expert_used_count", 0), StatusCode::corrupt, "'qwen3moe.expert_used_count'");
  expect_refused(with_u32("qwen3moe.expert_count", 3), StatusCode::corrupt,
                 "tensor 'blk.0.ffn_gate_inp.weight' has shape [4, 256]; expected [3, 256]");
  expect_refused(with_u32("qwen3moe.expert_feed_forward_length", 128), StatusCode::corrupt,
                 "tensor 'blk.0.ffn_gate_exps.weight' has shape [4, 256, 256]; expected [4, 128, 256]");
  expect_refused(with_text("blk.1.ffn_up_exps.weight", "blk.1.ffn_up_expx.weight"), StatusCode::corrupt,
                 "tensor 'blk.1.ffn_up_exps.weight' is missing");
  expect_refused(with_text("qwen3moe.expert_count", "qwen3moe.expert_cnunt"), StatusCode::corrupt,
                 "'qwen3moe.expert_count' is missing");
}

TEST_F(GgufMoeRefusals, OtherMixturesOfExpertsAreRefusedByName) {
  // general.architecture's value (the keys keep their qwen3moe. prefix: the refusal comes first).
  const std::string arch_value = std::string("\x08\x00\x00\x00\x00\x00\x00\x00", 8) + "qwen3moe";
  const std::vector<uint8_t> grovemoe = with_text(arch_value, std::string("\x08\x00\x00\x00\x00\x00\x00\x00", 8) + "grovemoe");
  expect_refused(grovemoe, StatusCode::unsupported, "general.architecture 'grovemoe' is not supported; supported: ");
  // The list is gguf_checkpoint.cpp's table of architectures, with its notes, in its order.
  expect_refused(grovemoe, StatusCode::unsupported, "supported: llama (Mixtral included), qwen2, qwen3, ");
  expect_refused(grovemoe, StatusCode::unsupported, "olmo2 (OLMo 2 and 3), ");
  expect_refused(grovemoe, StatusCode::unsupported, ", phimoe, afmoe, arcee");
  // Mixtral as llama.cpp's converter wrote it before it stacked the experts: one tensor each
  // (blk.N.ffn_gate.E.weight), from a make-model mixtral.
  SyntheticModelSpec s;
  s.arch = "mixtral";
  s.hidden_size = 32;
  s.n_layers = 1;
  s.n_heads = 2;
  s.n_kv_heads = 1;
  s.intermediate_size = 32;
  s.vocab_size = 260;
  s.n_experts = 2;
  s.n_experts_per_tok = 1;
  s.dtype = DType::f32;
  ASSERT_TRUE(write_synthetic_model(s, dir_.file("hf")).is_ok());
  auto hf = Checkpoint::open(dir_.file("hf"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  testing::write_gguf_from_checkpoint(**hf, dir_.file("mixtral.gguf"), testing::GgufOut::f32, true,
                                      {testing::gguf_u32("llama.expert_count", 2),
                                       testing::gguf_u32("llama.expert_used_count", 1)});
  auto ck = Checkpoint::open(dir_.file("mixtral.gguf"));
  ASSERT_FALSE(ck.has_value());
  EXPECT_EQ(ck.status().code(), StatusCode::unsupported);
  EXPECT_NE(ck.status().message().find("tensor 'blk.0.ffn_gate.0.weight': experts stored one tensor each"),
            std::string::npos) << ck.status().to_string();
}

// A backend without moe_experts_split (as the CUDA one) refuses the file at load, naming why,
// before it has prepared any weight.
TEST(GgufMoe, ABackendWithoutSplitExpertsRefusesIt) {
  auto ck = Checkpoint::open(gguf_path());
  ASSERT_TRUE(ck.has_value());
  testing::BlockWeightBackend blocks({DType::q4_k, DType::q6_k, DType::q8_0}, true);
  ASSERT_FALSE(blocks.supports_split_experts());
  auto model = load_llama(**ck, blocks, LoadOptions{});
  ASSERT_FALSE(model.has_value());
  EXPECT_EQ(model.status().code(), StatusCode::unsupported);
  EXPECT_NE(model.status().message().find("(ffn_gate_exps and ffn_up_exps apart) run on the CPU backend"),
            std::string::npos) << model.status().to_string();
  EXPECT_TRUE(blocks.prepared.empty());
  EXPECT_TRUE(make_cpu_backend({.n_threads = 1})->supports_split_experts());
}

// Qwen2-MoE as llama.cpp writes it (tests/fixtures/gguf_qwen2moe: the qwen2_moe checkpoint, F32,
// its shared expert as ffn_*_shexp and the gate as the vector ffn_gate_inp_shexp): the config as
// llama.cpp reads it (norm_w false, the shared width from its key), the logits and greedy tokens
// of transformers on the same weights (llama.cpp's own are within 1e-5 of them: llamacpp.json's
// check), the tokens of llama.cpp's tokenizer, and tp 2 by columns and by expert.
TEST(GgufQwen2Moe, MatchesTransformersAsLlamaCppReadsIt) {
  const std::string path = fixture_dir("gguf_qwen2moe") + "/model.gguf";
  auto ck = Checkpoint::open(path);
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "qwen2_moe");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.rope_style, RopeStyle::neox);
  EXPECT_FALSE(c.norm_topk_prob) << "build_moe_ffn's norm_w is false for qwen2moe";
  EXPECT_TRUE(c.shared_gate);
  EXPECT_EQ(c.shared_width(), 64);
  EXPECT_EQ(c.moe_intermediate_size, 32);
  EXPECT_EQ((*ck)->tensors().at("model.layers.0.mlp.shared_expert_gate.weight").shape, (std::vector<int64_t>{1, 64}));
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(path, *backend, std::nullopt);
  ASSERT_NE(model, nullptr);
  for (const auto& fc : read_fixture_cases("gguf_qwen2moe")) {
    const auto run = testing::run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kDequantizedTol) << "prompt of " << fc.prompt.size();
    EXPECT_EQ(run.greedy, fc.greedy) << "prompt of " << fc.prompt.size();
    RecordProperty("max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(run.max_abs_diff));
  }
  testing::expect_tokenizes_as_llamacpp("gguf_qwen2moe", 4);
  EXPECT_GT(testing::max_diff_with_rules("gguf_qwen2moe", [](ModelConfig& e) { e.norm_topk_prob = true; }, path),
            100 * kDequantizedTol);
}

}  // namespace
}  // namespace brigade
