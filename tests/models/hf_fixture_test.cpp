// brigade against transformers: tiny random checkpoints of each architecture, saved by
// transformers' save_pretrained, with its fp32 logits and greedy continuations
// (scripts/make_fixtures.py). The fixtures are committed, so this needs no network or Python.
//
// Tolerance: fp32 on both sides, but a different summation order (blocked SIMD GEMM, fused
// norms, online-softmax attention) than PyTorch's, and expected.json keeps 7 significant digits.
// Logits here reach |45|; the measured worst difference over all fixtures is 6.1e-5 (gemma3;
// qwen2's 1.9e-5 before it), so kLogitTol = 2e-4 absolute leaves 3x headroom, while a wrong RoPE
// band, bias or norm moves logits by whole units (RopeScalingChangesTheResult).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "cpu/cpu_backend.h"
#include "models/checkpoint.h"
#include "models/inspect.h"
#include "hf_fixture.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::FixtureRun;
using testing::kLogitTol;
using testing::load_or_fail;
using testing::max_diff_with_config;
using testing::max_diff_with_rules;
using testing::read_fixture_cases;
using testing::run_fixture_case;

class HfFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFixture, LogitsAndGreedyMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir(GetParam()), *backend);
  ASSERT_NE(model, nullptr);
  const auto cases = read_fixture_cases(GetParam());
  ASSERT_FALSE(cases.empty());
  for (const auto& fc : cases) {
    const FixtureRun run = run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kLogitTol) << "prompt of " << fc.prompt.size() << " tokens";
    EXPECT_EQ(run.greedy, fc.greedy) << "prompt of " << fc.prompt.size() << " tokens";
    RecordProperty("max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(run.max_abs_diff));
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfFixture,
                         ::testing::Values("llama", "llama_rope_llama3", "llama_rope_linear", "mistral_sliding",
                                           "qwen2", "qwen3", "tinyllama", "smollm2", "qwen3_moe",
                                           "qwen3_moe_step", "deepseek_v3", "deepseek_v2", "deepseek_v3_step",
                                           "phi3", "gemma2", "gemma3", "gemma3_mm", "mixtral", "gpt_oss",
                                           "qwen2_moe", "glm4_moe", "glm4_moe_step", "qwen3_yarn", "smollm3",
                                           "granite", "olmo2", "olmo3", "exaone4", "glm4", "glm", "helium", "seed_oss", "ernie4_5",
                                           "hunyuan_v1_dense", "olmoe", "olmoe_clip", "olmo", "dbrx", "apertus", "mistral3", "ernie4_5_moe",
                                           "llama4", "llama4_text", "minimax_m2", "cohere", "cohere2", "granitemoe",
                                           "granitemoeshared", "granite4_rope", "hunyuan_v1_moe", "dots1", "ministral3",
                                           "ministral3_text", "phimoe", "mistral4", "glm4_moe_lite", "afmoe", "arcee", "mimo_v2_flash", "exaone_moe", "kimi_linear", "longcat_flash",
                                           "deepseek_v32", "glm_moe_dsa", "minimax",
                                           "gemma", "starcoder2", "phi", "stablelm", "stablelm_parallel", "jais2", "nemotron", "exaone", "flex_olmo", "gemma3n",
                                           "gemma3n_mm", "gemma4_dense", "gemma4_e2b", "gemma4_moe", "gemma4_mm",
                                           "gpt_neox", "gpt_neox_sequential", "gptj", "gpt2", "gpt_bigcode",
                                           "gpt_bigcode_mha", "internlm2", "internlm2_bias", "internlm3",
                                           "chatglm", "minicpm", "minicpm_longrope", "cwm", "iquestcoder",
                                           "solar_open", "minicpm5_moe", "youtu", "minicpm3", "nanochat",
                                           "ministral", "vaultgemma", "hyperclovax", "hyperclovax_no_post_norm", "kolibri1", "kolibri1_norm", "axk1", "axk1_hub", "flint", "flint_sparse", "bitnet", "bitnet_auto", "bitnet_online", "bitnet_plain", "mellum", "mellum_sparse", "param2moe", "sarvam_moe", "sarvam_mla",
                                           "granite_swa", "granitemoe_swa", "cohere2_moe", "cohere2_moe_sigmoid",
                                           "hy_v3", "falcon", "falcon_new", "falcon_one_norm",
                                           "falcon_sequential", "bloom", "mpt", "mpt_clip", "opt",
                                           "gpt_neo", "codegen"));

// FP8 checkpoints in the Hub's layouts, dequantized at load (scripts/make_fp8_fixtures.py): quant_method
// fp8 with 32x32 blocks (Qwen3-FP8; GLM-4.5-FP8's experts too) and with 24x40 blocks partial at the tail (DeepSeek-V3),
// compressed-tensors with channel and tensor scales (RedHat *-FP8).
INSTANTIATE_TEST_SUITE_P(Fp8Checkpoints, HfFixture,
                         ::testing::Values("qwen3_fp8_block", "deepseek_v3_fp8_block", "llama_ct_channel",
                                           "llama_ct_tensor", "glm4_moe_fp8_block"));

// gpt-oss as the Hub ships it (quant_method mxfp4: the experts as _blocks / _scales), made from the
// gpt_oss fixture with gguf-py's MXFP4 quantizer (scripts/make_fixtures.py gpt_oss_mxfp4); the
// reference is transformers dequantizing that checkpoint. Dequantized (weights: f32) brigade
// matches it as any fp32 checkpoint does.
TEST(GptOssMxfp4, DequantizedMatchesTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir("gpt_oss_mxfp4"), *backend, DType::f32);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->weight_bytes(), model->n_params() * 4) << "every weight f32";
  for (const auto& fc : read_fixture_cases("gpt_oss_mxfp4")) {
    const FixtureRun run = run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kLogitTol) << "prompt of " << fc.prompt.size();
    EXPECT_EQ(run.greedy, fc.greedy) << "prompt of " << fc.prompt.size();
  }
}

// As stored (weights auto) the CPU keeps the experts MXFP4 (17 bytes per 32 weights, repacked
// exactly from transformers' layout) and multiplies them with int8 activations: the logits stay
// within twice what Q8_0 expert inputs cost the reference (act_q8_max_diff, recorded by the
// script), and greedy decoding follows the reference or that run.
TEST(GptOssMxfp4, NativeExpertsMatchTransformersWithinTheActivationQuantizationError) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto native = load_or_fail(fixture_dir("gpt_oss_mxfp4"), *backend);
  auto f32 = load_or_fail(fixture_dir("gpt_oss_mxfp4"), *backend, DType::f32);
  ASSERT_TRUE(native && f32);
  const ModelConfig& c = native->config();
  const int64_t expert_weights = int64_t{c.n_layers} * c.n_experts * 3 * c.moe_intermediate_size * c.hidden_size;
  EXPECT_EQ(f32->weight_bytes() - native->weight_bytes(), expert_weights * 4 - expert_weights / 32 * 17)
      << "the experts' f32 bytes replaced by MXFP4 blocks";
  const auto text = read_text_file(fixture_dir("gpt_oss_mxfp4") + "/expected.json");
  ASSERT_TRUE(text.has_value());
  const auto doc = nlohmann::json::parse(*text);
  const auto cases = read_fixture_cases("gpt_oss_mxfp4");
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& fc = cases[i];
    const double act = doc.at("cases")[i].at("act_q8_max_diff").get<double>();
    const auto act_greedy = doc.at("cases")[i].at("act_q8_greedy").get<std::vector<int32_t>>();
    EXPECT_GT(act, 10 * kLogitTol) << "the activation error is visible";
    const double bound = 2.0 * act + kLogitTol;
    const FixtureRun run = run_fixture_case(*native, *backend, fc);
    EXPECT_LE(run.max_abs_diff, bound) << "prompt of " << fc.prompt.size();
    EXPECT_GT(run.max_abs_diff, kLogitTol) << "the native kernels ran (their int8 activations show)";
    EXPECT_TRUE(testing::greedy_follows(run, fc, {fc.greedy, act_greedy}, bound)) << "prompt of " << fc.prompt.size();
    RecordProperty("native_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(run.max_abs_diff));
  }
}

// An MXFP4 checkpoint missing an expert's scales, or with blocks of the wrong shape, is refused
// naming the tensor; quant_method mxfp4 on another architecture is refused by name.
TEST(HfFixtureConfig, BrokenMxfp4CheckpointsAreRefusedNamingTheTensor) {
  const std::string src = fixture_dir("gpt_oss_mxfp4");
  auto ck = Checkpoint::open(src);
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_EQ((*ck)->config().quant.describe(), "mxfp4 experts, 32-value blocks with E8M0 scales (quant_method mxfp4)");
  auto backend = make_cpu_backend({.n_threads = 1});
  auto rewrite = [&](const std::string& dir, const std::function<bool(const std::string&, testing::StEntry&)>& keep) {
    std::filesystem::copy_file(src + "/config.json", dir + "/config.json");
    std::vector<testing::StEntry> entries;
    for (const auto& [name, t] : (*ck)->tensors()) {
      testing::StEntry e{name, t.dtype == DType::u8 ? "U8" : "F32", t.shape,
                         std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())};
      if (keep(name, e)) entries.push_back(std::move(e));
    }
    testing::write_safetensors_file(dir + "/model.safetensors", entries);
    LoadOptions o;
    o.progress = false;
    auto m = Model::load(dir, *backend, o);
    return m ? std::string() : m.status().message();
  };
  const testing::TempDir a("mxfp4_no_scales"), b("mxfp4_bad_blocks");
  const std::string missing = rewrite(a.str(), [](const std::string& name, testing::StEntry&) {
    return name != "model.layers.1.mlp.experts.down_proj_scales";
  });
  EXPECT_NE(missing.find("model.layers.1.mlp.experts.down_proj_scales"), std::string::npos) << missing;
  const std::string bad = rewrite(b.str(), [](const std::string& name, testing::StEntry& e) {
    if (name == "model.layers.0.mlp.experts.gate_up_proj_blocks") {  // one group per row instead of two
      e.shape = {e.shape[0], e.shape[1], 1, 16};
      e.bytes.resize(static_cast<size_t>(e.shape[0] * e.shape[1] * 16));
    }
    return true;
  });
  EXPECT_NE(bad.find("model.layers.0.mlp.experts.gate_up_proj_blocks"), std::string::npos) << bad;
  auto text = read_text_file(fixture_dir("llama") + "/config.json");
  ASSERT_TRUE(text.has_value());
  auto j = nlohmann::json::parse(*text);
  j["quantization_config"] = {{"quant_method", "mxfp4"}};
  auto refused = parse_hf_config(j.dump());
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("mxfp4"), std::string::npos) << refused.status().message();
}

TEST(HfFixtureConfig, ArchitectureFlags) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto qwen2 = load_or_fail(fixture_dir("qwen2"), *backend);
  auto qwen3 = load_or_fail(fixture_dir("qwen3"), *backend);
  auto l3 = load_or_fail(fixture_dir("llama_rope_llama3"), *backend);
  auto mistral = load_or_fail(fixture_dir("mistral_sliding"), *backend);
  ASSERT_TRUE(qwen2 && qwen3 && l3 && mistral);
  EXPECT_EQ(qwen2->config().arch, "qwen2");
  EXPECT_TRUE(qwen2->config().qkv_bias);
  EXPECT_FALSE(qwen2->config().o_bias);
  EXPECT_TRUE(qwen2->config().tie_embeddings);
  EXPECT_EQ(qwen3->config().arch, "qwen3");
  EXPECT_TRUE(qwen3->config().qk_norm);
  EXPECT_EQ(qwen3->config().head_dim, 32);  // explicit, not hidden / heads = 16
  EXPECT_EQ(l3->config().rope_scaling.type, RopeScalingType::llama3);
  EXPECT_EQ(mistral->config().sliding_window, 8);
}

// TinyLlama's and SmolLM2's shapes as loaded: GQA groups of 8 and of 3, SmolLM2's tied
// embeddings and rope_theta 100000 (transformers 5 writes it in rope_parameters).
TEST(HfFixtureConfig, TinyLlamaAndSmolLm2Shapes) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto tiny = load_or_fail(fixture_dir("tinyllama"), *backend);
  auto smol = load_or_fail(fixture_dir("smollm2"), *backend);
  ASSERT_TRUE(tiny && smol);
  EXPECT_EQ(tiny->config().n_heads, 32);
  EXPECT_EQ(tiny->config().n_kv_heads, 4);
  EXPECT_FALSE(tiny->config().tie_embeddings);
  EXPECT_EQ(smol->config().n_heads, 9);
  EXPECT_EQ(smol->config().n_kv_heads, 3);
  EXPECT_TRUE(smol->config().tie_embeddings);
  EXPECT_EQ(smol->config().rope_theta, 100000.0f);
}

// Qwen3-MoE as loaded: which layers are sparse under mlp_only_layers and decoder_sparse_step
// (Qwen3MoeDecoderLayer's rule), the expert counts, and num_local_experts (what transformers 5
// writes) read as num_experts.
TEST(HfFixtureConfig, Qwen3MoeLayers) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto moe = load_or_fail(fixture_dir("qwen3_moe"), *backend);
  auto step = load_or_fail(fixture_dir("qwen3_moe_step"), *backend);
  ASSERT_TRUE(moe && step);
  const ModelConfig& c = moe->config();
  EXPECT_EQ(c.arch, "qwen3_moe");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.n_experts, 8);
  EXPECT_EQ(c.n_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 16);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.is_moe_layer(0));
  EXPECT_FALSE(c.is_moe_layer(1));  // mlp_only_layers [1]
  EXPECT_TRUE(c.is_moe_layer(2));
  EXPECT_FALSE(step->config().norm_topk_prob);
  EXPECT_FALSE(step->config().is_moe_layer(0));  // decoder_sparse_step 2: layer 1 only
  EXPECT_TRUE(step->config().is_moe_layer(1));
}

// Mixtral as loaded: llama attention with its window, every layer sparse, the experts
// intermediate_size wide, the k softmax weights renormalised (MixtralSparseMoeBlock always does).
TEST(HfFixtureConfig, MixtralLayers) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_or_fail(fixture_dir("mixtral"), *backend);
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "mixtral");
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.n_experts, 4);
  EXPECT_EQ(c.n_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 64);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.n_moe_layers(), c.n_layers);
}

// gpt-oss as loaded: q/k/v/o biases, attention sinks, alternating sliding layers, YaRN without
// truncation, every layer sparse with biased router and experts and the clamped SwiGLU.
TEST(HfFixtureConfig, GptOssLayers) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_or_fail(fixture_dir("gpt_oss"), *backend);
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "gpt_oss");
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.attn_sinks && c.moe_biases);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.layer_window(0), 8);
  EXPECT_EQ(c.layer_window(1), 0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::yarn);
  EXPECT_FALSE(c.rope_scaling.truncate);
  EXPECT_EQ(c.n_experts, 4);
  EXPECT_EQ(c.n_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 96);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.swiglu_limit, 1.0f);
  EXPECT_FLOAT_EQ(c.swiglu_alpha, 1.702f);
  EXPECT_EQ(c.n_moe_layers(), c.n_layers);
}

// Each of gpt-oss's parts shows in the logits: the sinks (left out), the experts' biases (left
// out), the clamp (the real models' limit 7, which these activations never reach), alpha, the
// window, and YaRN's truncation.
TEST(HfFixtureConfig, GptOssPartsChangeTheResult) {
  EXPECT_GT(testing::max_diff_with_rules("gpt_oss", [](ModelConfig& c) { c.attn_sinks = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("gpt_oss", [](nlohmann::json& j) { j["swiglu_limit"] = 7.0; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("gpt_oss", [](nlohmann::json& j) { j["swiglu_alpha"] = 1.0; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("gpt_oss", [](nlohmann::json& j) { j["sliding_window"] = 64; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("gpt_oss", [](nlohmann::json& j) { j["rope_parameters"]["truncate"] = true; }),
            100 * kLogitTol);
}

// transformers 5 keeps a layer's experts fused (mlp.experts.gate_up_proj [E, 2I, hidden],
// down_proj [E, hidden, I]); a checkpoint stored that way loads to the same model: the qwen3_moe
// fixture's (and deepseek_v3's, shared experts left as they are; Qwen3-Next's and Qwen3.5-MoE's,
// whose Hub checkpoints may come either way) experts rewritten fused match transformers as the
// per-expert original does.
class FusedExperts : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedExperts, FusedExpertLayoutLoads) {
  const testing::TempDir dir("moe_fused");
  const std::string src = fixture_dir(GetParam());
  std::filesystem::copy_file(src + "/config.json", dir.file("config.json"));
  auto ck = Checkpoint::open(src);
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  std::vector<testing::StEntry> entries;
  for (const auto& [name, t] : (*ck)->tensors())
    if (name.find(".mlp.experts.") == std::string::npos)
      entries.push_back({name, "F32", t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())});
  for (int l = 0; l < c.n_layers; ++l) {
    if (!c.is_moe_layer(l)) continue;
    const std::string pre = "model.layers." + std::to_string(l) + ".mlp.experts.";
    testing::StEntry gate_up{pre + "gate_up_proj", "F32", {c.n_experts, 2 * c.moe_intermediate_size, c.hidden_size}, {}};
    testing::StEntry down{pre + "down_proj", "F32", {c.n_experts, c.hidden_size, c.moe_intermediate_size}, {}};
    for (int e = 0; e < c.n_experts; ++e) {
      const std::string ex = pre + std::to_string(e) + ".";
      for (const char* part : {"gate_proj.weight", "up_proj.weight"}) {
        const auto& bytes = (*ck)->tensors().at(ex + part).bytes;
        gate_up.bytes.insert(gate_up.bytes.end(), bytes.begin(), bytes.end());
      }
      const auto& bytes = (*ck)->tensors().at(ex + "down_proj.weight").bytes;
      down.bytes.insert(down.bytes.end(), bytes.begin(), bytes.end());
    }
    entries.push_back(std::move(gate_up));
    entries.push_back(std::move(down));
  }
  testing::write_safetensors_file(dir.file("model.safetensors"), entries);
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(dir.str(), *backend);
  ASSERT_NE(model, nullptr);
  for (const auto& fc : read_fixture_cases(GetParam())) {
    const FixtureRun run = run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kLogitTol);
    EXPECT_EQ(run.greedy, fc.greedy);
  }
  if (GetParam() != "qwen3_moe") return;  // DeepSeek refuses weights: q8_0
  // Under weights: q8_0 the fused experts are quantized as the per-expert ones are: the same bytes.
  auto fused_q8 = load_or_fail(dir.str(), *backend, DType::q8_0);
  auto hub_q8 = load_or_fail(src, *backend, DType::q8_0);
  ASSERT_TRUE(fused_q8 && hub_q8);
  EXPECT_EQ(fused_q8->weight_bytes(), hub_q8->weight_bytes());
  EXPECT_LT(hub_q8->weight_bytes(), model->weight_bytes() * 6 / 10);
}

INSTANTIATE_TEST_SUITE_P(Moe, FusedExperts, ::testing::Values("qwen3_moe", "deepseek_v3", "qwen3_next", "qwen3_5_moe"));

// The fixtures are sensitive to what they test: dropping the llama3 scaling from the config (the
// weights unchanged), or SmolLM2's rope_theta, moves the long prompt's logits far outside the
// tolerance.
TEST(HfFixtureConfig, RopeScalingChangesTheResult) {
  EXPECT_GT(max_diff_with_config("llama_rope_llama3",
                                 [](nlohmann::json& j) {
                                   j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
                                 }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("smollm2", [](nlohmann::json& j) { j["rope_parameters"]["rope_theta"] = 10000.0; }),
            100 * kLogitTol);
  // YaRN: without it, or with transformers' attention factor dropped (1 instead of 0.1 ln 4 + 1).
  EXPECT_GT(max_diff_with_config("qwen3_yarn",
                                 [](nlohmann::json& j) {
                                   j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
                                 }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("qwen3_yarn", [](nlohmann::json& j) { j["rope_parameters"]["attention_factor"] = 1.0; }),
            100 * kLogitTol);
}

// SmolLM3's NoPE layers and Granite 3's multipliers each move the logits (so the fixtures check
// where each applies): RoPE in every layer; each multiplier 1.
TEST(HfFixtureConfig, SmolLM3sNopeAndGranitesMultipliersChangeTheResult) {
  EXPECT_GT(max_diff_with_config("smollm3", [](nlohmann::json& j) { j["no_rope_layers"] = {1, 1, 1, 1}; }),
            100 * kLogitTol);
  for (const char* key : {"embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling"})
    EXPECT_GT(max_diff_with_config("granite", [&](nlohmann::json& j) { j[key] = 1.0; }), 100 * kLogitTol) << key;
}

// What each of the Llama decoder's newer relatives adds moves the logits, so the fixtures check
// each piece where it applies: OLMo 3's window and its full layers' YaRN, EXAONE 4's window (and
// with it the full layers' NoPE) and its llama3 scaling, GLM-4's partial rotation, Hunyuan's
// NTK alpha and its norms after RoPE, the pair-wise RoPE of GLM-4 and ERNIE 4.5, OLMo's, OLMoE's
// and DBRX's clip_qkv, DBRX's renormalised routing and its attn_config.rope_theta, CWM's windows
// and layer types, Solar Open's whole-head RoPE.
TEST(HfFixtureConfig, LlamaVariantsPiecesMoveTheLogits) {
  EXPECT_GT(max_diff_with_config("olmo3", [](nlohmann::json& j) { j["sliding_window"] = 64; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("olmo3", [](nlohmann::json& j) { j["rope_parameters"]["full_attention"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}}; }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("olmo3", [](nlohmann::json& j) { j["rope_parameters"]["sliding_attention"]["rope_theta"] = 10000.0; }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("exaone4", [](nlohmann::json& j) { j["sliding_window"] = nullptr; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("exaone4", [](nlohmann::json& j) { j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}}; }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("glm4", [](nlohmann::json& j) { j["rope_parameters"]["partial_rotary_factor"] = 1.0; }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("hunyuan_v1_dense", [](nlohmann::json& j) {
              j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
            }),
            100 * kLogitTol);
  EXPECT_LT(max_diff_with_config("glm", [](nlohmann::json& j) { j["rope_parameters"].erase("partial_rotary_factor"); }),
            kLogitTol) << "GlmConfig's default partial_rotary_factor is 0.5, the fixture's own";
  EXPECT_GT(max_diff_with_config("glm", [](nlohmann::json& j) { j["rope_parameters"]["partial_rotary_factor"] = 1.0; }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("helium", [](ModelConfig& c) { c.mlp_bias = false; }), 100 * kLogitTol);
  for (const char* name : {"olmo", "olmoe_clip"})  // clip_qkv bites: about a third of q, k and v clip
    EXPECT_GT(max_diff_with_rules(name, [](ModelConfig& c) { c.clip_qkv = 0.0f; }), 100 * kLogitTol) << name;
  EXPECT_GT(max_diff_with_rules("olmoe_clip", [](ModelConfig& c) { c.clip_qkv = 2.0f; }), 100 * kLogitTol);
  // DBRX: its clamp, its routing's L1 renormalisation, and attn_config's theta (5e5) over the default.
  EXPECT_GT(max_diff_with_rules("dbrx", [](ModelConfig& c) { c.clip_qkv = 0.0f; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("dbrx", [](ModelConfig& c) { c.norm_topk_prob = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("dbrx", [](nlohmann::json& j) {
              j["attn_config"].erase("rope_theta");
              j.erase("rope_parameters");
            }),
            100 * kLogitTol);
  for (const char* name : {"glm4", "glm", "helium", "ernie4_5"})  // rotated as halves (Llama's rotate_half) instead
    EXPECT_GT(max_diff_with_rules(name, [](ModelConfig& c) { c.rope_style = RopeStyle::neox; }), 100 * kLogitTol) << name;
  EXPECT_GT(max_diff_with_rules("hunyuan_v1_dense", [](ModelConfig& c) { c.qk_norm_after_rope = false; }),
            100 * kLogitTol);
  // CWM: its window, and its default layer types (layer 0 full) over OLMo 3's (layer 3 full).
  EXPECT_GT(max_diff_with_config("cwm", [](nlohmann::json& j) { j["sliding_window"] = nullptr; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("cwm", [](nlohmann::json& j) {
              j["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"};
            }),
            100 * kLogitTol);
  EXPECT_LT(max_diff_with_config("cwm", [](nlohmann::json& j) { j.erase("layer_types"); }), kLogitTol)
      << "CwmConfig's default layer_types are the fixture's";
  // nanochat: its RoPE's direction, the norm over the embeddings and the soft cap each move the
  // logits; its q/k norms commute with RoPE (weightless over whole heads), so their order does not.
  EXPECT_GT(max_diff_with_rules("nanochat", [](ModelConfig& c) { c.rope_reversed = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("nanochat", [](ModelConfig& c) { c.embed_norm = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("nanochat", [](nlohmann::json& j) { j["final_logit_softcapping"] = nullptr; }),
            100 * kLogitTol);
  EXPECT_LT(max_diff_with_rules("nanochat", [](ModelConfig& c) { c.qk_norm_after_rope = false; }), kLogitTol);
  // MiniCPM 3: its muP scalings and its halves RoPE (not DeepSeek-V2's pairs) each move the logits.
  EXPECT_GT(max_diff_with_rules("minicpm3", [](ModelConfig& c) { c.embedding_multiplier = 1.0f; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("minicpm3", [](ModelConfig& c) { c.logits_scaling = 1.0f; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("minicpm3", [](ModelConfig& c) { c.rope_style = RopeStyle::interleaved; }), 100 * kLogitTol);
  // Ministral's windows (layers 0 and 2; none: every layer full, or all: every layer sliding) and
  // VaultGemma's missing post-norms (Gemma 2's four norms read its two as the post ones) each matter.
  EXPECT_GT(max_diff_with_config("ministral", [](nlohmann::json& j) { j["sliding_window"] = nullptr; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("ministral", [](nlohmann::json& j) { j.erase("layer_types"); }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("vaultgemma", [](ModelConfig& c) { c.attn_softcap = 0.0f; }), 100 * kLogitTol);
  // GraniteSWA: its sinks, its per-layer RoPE bases (NoPE on layer 1, 5e5 on the sliding layers) and
  // its windows each move the logits; GraniteMoeSWA's layer_types are its config class's default.
  EXPECT_GT(max_diff_with_rules("granite_swa", [](ModelConfig& c) { c.attn_sinks = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("granite_swa", [](nlohmann::json& j) { j.erase("layer_rope_theta"); }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("granite_swa", [](nlohmann::json& j) { j["sliding_window"] = nullptr; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("granite_swa", [](ModelConfig& c) { c.rope_local_theta = 0.0f; }), 100 * kLogitTol);
  EXPECT_LT(max_diff_with_config("granitemoe_swa", [](nlohmann::json& j) { j.erase("layer_types"); }), kLogitTol)
      << "GraniteMoeSWAConfig's default layer_types are the fixture's";
  // Cohere2 MoE: "average" halves both the routed and the shared experts ("sum" would not), the
  // dense prefix layer's RoPE (force_rope) and the default layer types from first_k_dense_replace.
  EXPECT_GT(max_diff_with_config("cohere2_moe", [](nlohmann::json& j) { j["shared_expert_combination_strategy"] = "sum"; }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("cohere2_moe", [](nlohmann::json& j) { j["prefix_dense_sliding_window_pattern"] = 2; }),
            100 * kLogitTol);
  EXPECT_LT(max_diff_with_config("cohere2_moe", [](nlohmann::json& j) {
              j.erase("layer_types");
              j.erase("mlp_layer_types");
              j["first_k_dense_replace"] = 1;
            }),
            kLogitTol)
      << "Cohere2MoeConfig's rule gives the fixture's layer types";
  EXPECT_GT(max_diff_with_config("cohere2_moe_sigmoid", [](nlohmann::json& j) { j["norm_topk_prob"] = false; }),
            100 * kLogitTol);
  // Param2 rotates whole heads and norms q and k by default: Glm4MoeConfig's defaults would move the logits.
  EXPECT_GT(max_diff_with_config("param2moe", [](nlohmann::json& j) { j["partial_rotary_factor"] = 0.5; }),
            100 * kLogitTol);
  // Solar Open rotates whole heads: Glm4MoeConfig's half would move the logits.
  EXPECT_GT(max_diff_with_config("solar_open", [](nlohmann::json& j) { j["partial_rotary_factor"] = 0.5; }),
            100 * kLogitTol);
}

// Each of Llama 4's pieces moves the logits, so the fixtures check each where it applies: the
// chunks (none), the NoPE layers' temperature (none), the weightless q/k norms (none), RoPE of
// adjacent pairs (halves instead), the routing weight on the experts' inputs (on their outputs
// instead), the shared expert, and the llama3 scaling.
TEST(HfFixtureConfig, Llama4PiecesMoveTheLogits) {
  EXPECT_GT(max_diff_with_config("llama4", [](nlohmann::json& j) { j["text_config"]["attention_chunk_size"] = 64; }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("llama4", [](nlohmann::json& j) { j["text_config"]["attn_temperature_tuning"] = false; }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("llama4", [](nlohmann::json& j) { j["text_config"]["use_qk_norm"] = false; }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("llama4", [](nlohmann::json& j) {
              j["text_config"]["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
            }),
            100 * kLogitTol);
  for (const char* name : {"llama4", "llama4_text"}) {
    EXPECT_GT(max_diff_with_rules(name, [](ModelConfig& c) { c.rope_style = RopeStyle::neox; }), 100 * kLogitTol) << name;
    EXPECT_GT(max_diff_with_rules(name, [](ModelConfig& c) { c.moe_weight_on_input = false; }), 100 * kLogitTol) << name;
  }
  EXPECT_GT(max_diff_with_config("llama4_text", [](nlohmann::json& j) { j["num_experts_per_tok"] = 1; }), 100 * kLogitTol);
}

// Each of Cohere's pieces moves the logits, so the fixtures check each: RMSNorms in place of the
// LayerNorms, Command R+'s q/k norms (none), RoPE as halves rather than adjacent pairs, Command
// R7B's windows (none) and its full layers' missing RoPE (rotated instead), logit_scale.
TEST(HfFixtureConfig, CoherePiecesMoveTheLogits) {
  EXPECT_GT(max_diff_with_rules("cohere2", [](ModelConfig& c) { c.layer_norms = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("cohere", [](nlohmann::json& j) { j["use_qk_norm"] = false; }), 100 * kLogitTol);
  for (const char* name : {"cohere", "cohere2"})
    EXPECT_GT(max_diff_with_rules(name, [](ModelConfig& c) { c.rope_style = RopeStyle::neox; }), 100 * kLogitTol) << name;
  EXPECT_GT(max_diff_with_config("cohere2", [](nlohmann::json& j) { j["sliding_window"] = 64; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("cohere2", [](ModelConfig& c) { c.nope_layers.assign(c.nope_layers.size(), false); }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("cohere", [](nlohmann::json& j) { j["logit_scale"] = 0.5; }), 100 * kLogitTol);
}

// Each of Phi-3.5-MoE's pieces moves the logits, so the fixture checks each: the norms' biases,
// the lm_head's bias, longrope's short_mscale (1 instead), the window (none), sparsemixer's jitter
// masks (a threshold that masks nothing), the second expert's own masked softmax (plain softmax
// top-2 renormalised instead, llama.cpp's rule; or not renormalised, Mixtral's without its norm).
TEST(HfFixtureConfig, PhimoePiecesMoveTheLogits) {
  EXPECT_GT(max_diff_with_rules("phimoe", [](ModelConfig& c) { c.norm_bias = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("phimoe", [](ModelConfig& c) { c.lm_head_bias = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("phimoe", [](ModelConfig& c) { c.rope_scaling.attention_factor = 1.0f; }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("phimoe", [](nlohmann::json& j) { j["sliding_window"] = nullptr; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("phimoe", [](nlohmann::json& j) { j["router_jitter_noise"] = 1000.0; }),
            100 * kLogitTol);
  for (const bool normalize : {true, false})
    EXPECT_GT(max_diff_with_rules("phimoe",
                                  [&](ModelConfig& c) {
                                    c.moe_scoring = MoeScoring::softmax;
                                    c.norm_topk_prob = normalize;
                                  }),
              100 * kLogitTol)
        << "softmax top-2, normalize " << normalize;
}

// Ministral 3's query temperature (every layer, positions + 0) and its window are what make the
// fixtures match: without the temperature, or with Llama 4's offset of 1, the logits move.
TEST(HfFixtureConfig, Ministral3TemperatureMovesTheLogits) {
  for (const char* name : {"ministral3", "ministral3_text"}) {
    EXPECT_GT(max_diff_with_rules(name, [](ModelConfig& c) { c.attn_temperature_floor = 0.0f; }), 100 * kLogitTol)
        << name;
    EXPECT_GT(max_diff_with_rules(name, [](ModelConfig& c) { c.attn_temperature_offset = 1.0f; }), 10 * kLogitTol)
        << name;
  }
  EXPECT_GT(max_diff_with_config("ministral3_text", [](nlohmann::json& j) { j["sliding_window"] = nullptr; }),
            100 * kLogitTol);
  auto info = inspect_model(fixture_dir("ministral3"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  const std::string text = format_model_info(*info);
  for (const char* piece : {"ministral3 (the language model of Mistral3ForConditionalGeneration)",
                            "query temperature on every layer (floor_scale 8, attn_scale 0.5, positions + 0)"})
    EXPECT_NE(text.find(piece), std::string::npos) << piece << "\n" << text;
}

// `inspect` names Llama 4's, MiniMax-M2's and Command R+'s pieces.
TEST(HfFixtureConfig, InspectShowsLlama4AndMiniMaxPieces) {
  auto llama4 = inspect_model(fixture_dir("llama4"));
  ASSERT_TRUE(llama4.has_value()) << llama4.status().to_string();
  const std::string l4 = format_model_info(*llama4);
  for (const char* piece : {"language model of Llama4ForConditionalGeneration", "chunks of 8 on 2 of 4 layers",
                            "query temperature on the NoPE layers", "sigmoid score on the expert's input",
                            "q/k norm without weights on the RoPE layers after RoPE"})
    EXPECT_NE(l4.find(piece), std::string::npos) << piece << "\n" << l4;
  auto minimax = inspect_model(fixture_dir("minimax_m2"));
  ASSERT_TRUE(minimax.has_value()) << minimax.status().to_string();
  const std::string mm = format_model_info(*minimax);
  for (const char* piece : {"q/k norm over all heads", "rotary dims 16 of 32", "routing:       sigmoid + e_score_correction_bias"})
    EXPECT_NE(mm.find(piece), std::string::npos) << piece << "\n" << mm;
  auto dots1 = inspect_model(fixture_dir("dots1"));
  ASSERT_TRUE(dots1.has_value()) << dots1.status().to_string();
  const std::string d1 = format_model_info(*dots1);
  for (const char* piece : {"sliding window 8 on 1 of 3 layers", "groups 1 of 2 by top-2 sum", "shared experts 2",
                            "sparse layers: 2 of 3 (dense: 0)"})
    EXPECT_NE(d1.find(piece), std::string::npos) << piece << "\n" << d1;
  for (const char* name : {"granitemoeshared", "hunyuan_v1_moe"}) {
    auto shared = inspect_model(fixture_dir(name));
    ASSERT_TRUE(shared.has_value()) << shared.status().to_string();
    const std::string text = format_model_info(*shared);
    const std::string piece = name == std::string("hunyuan_v1_moe") ? "an ungated shared SwiGLU of 32" : "an ungated shared SwiGLU of 48";
    EXPECT_NE(text.find(piece), std::string::npos) << piece << "\n" << text;
  }
  auto cohere = inspect_model(fixture_dir("cohere"));
  ASSERT_TRUE(cohere.has_value()) << cohere.status().to_string();
  const std::string co = format_model_info(*cohere);
  for (const char* piece : {"q/k LayerNorm per head (its own weights)", "LayerNorms without bias",
                            "attention and MLP side by side on one norm", "logits x 0.25", "interleaved"})
    EXPECT_NE(co.find(piece), std::string::npos) << piece << "\n" << co;
  auto olmo = inspect_model(fixture_dir("olmo"));
  ASSERT_TRUE(olmo.has_value()) << olmo.status().to_string();
  const std::string ol = format_model_info(*olmo);
  for (const char* piece : {"LayerNorms without weight or bias (eps 1e-05)", "q/k/v clamped to +-1"})
    EXPECT_NE(ol.find(piece), std::string::npos) << piece << "\n" << ol;
}

// The MoE fixtures test the routing: renormalising the top-k weights or not, or routing to one
// expert fewer, moves the logits far outside the tolerance.
TEST(HfFixtureConfig, MoeRoutingChangesTheResult) {
  EXPECT_GT(max_diff_with_config("qwen3_moe", [](nlohmann::json& j) { j["norm_topk_prob"] = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("qwen3_moe_step", [](nlohmann::json& j) { j["norm_topk_prob"] = true; }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("qwen3_moe", [](nlohmann::json& j) { j["num_experts_per_tok"] = 1; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("mixtral", [](nlohmann::json& j) { j["num_experts_per_tok"] = 1; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("mixtral", [](nlohmann::json& j) { j["num_experts_per_tok"] = 3; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("mixtral", [](nlohmann::json& j) { j["sliding_window"] = nullptr; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("qwen2_moe", [](nlohmann::json& j) { j["norm_topk_prob"] = true; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("olmoe", [](nlohmann::json& j) { j["norm_topk_prob"] = true; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("olmoe", [](nlohmann::json& j) { j["num_experts_per_tok"] = 1; }), 100 * kLogitTol);
  // Granite 3 MoE: the top-k softmax not renormalised (the softmax over all), one expert fewer, no
  // shared MLP.
  EXPECT_GT(max_diff_with_rules("granitemoe", [](ModelConfig& c) { c.norm_topk_prob = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("granitemoe", [](nlohmann::json& j) { j["num_experts_per_tok"] = 1; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("granitemoeshared", [](ModelConfig& c) { c.shared_expert_intermediate_size = 0; }),
            100 * kLogitTol);
  // Hunyuan MoE: not renormalised, one expert fewer, no shared MLP.
  EXPECT_GT(max_diff_with_rules("hunyuan_v1_moe", [](ModelConfig& c) { c.norm_topk_prob = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("hunyuan_v1_moe", [](nlohmann::json& j) { j["moe_topk"] = {1, 1}; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("hunyuan_v1_moe", [](ModelConfig& c) { c.shared_expert_intermediate_size = 0; }),
            100 * kLogitTol);
  // dots.llm1: no expert groups, the selection bias ignored, no shared experts, no window on layer 2.
  EXPECT_GT(max_diff_with_config("dots1", [](nlohmann::json& j) { j["n_group"] = 1; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("dots1", [](ModelConfig& c) { c.moe_score_bias = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("dots1", [](ModelConfig& c) { c.n_shared_experts = 0; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("dots1", [](nlohmann::json& j) { j["sliding_window"] = nullptr; }), 100 * kLogitTol);
  // ERNIE 4.5 MoE: one expert fewer, or layer 1 dense, or the selection bias ignored.
  EXPECT_GT(max_diff_with_config("ernie4_5_moe", [](nlohmann::json& j) { j["moe_k"] = 1; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("ernie4_5_moe", [](ModelConfig& c) { c.moe_score_bias = false; }), 100 * kLogitTol);
  // MiniMax-M2: the selection bias ignored (use_routing_bias false), not renormalised, one expert
  // fewer; and its RoPE over the whole head instead of rotary_dim's half.
  EXPECT_GT(max_diff_with_config("minimax_m2", [](nlohmann::json& j) { j["use_routing_bias"] = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("minimax_m2", [](ModelConfig& c) { c.norm_topk_prob = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("minimax_m2", [](nlohmann::json& j) { j["num_experts_per_tok"] = 1; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("minimax_m2", [](nlohmann::json& j) { j["rotary_dim"] = 32; }), 100 * kLogitTol);
}

// Qwen2-MoE as loaded (Qwen2MoeConfig): Qwen2's attention biases, the sparse layers, and the shared
// expert (its own width, not n_shared * moe_intermediate_size), without which the logits move far.
TEST(HfFixtureConfig, Qwen2MoeSharedExpert) {
  auto ck = Checkpoint::open(fixture_dir("qwen2_moe"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "qwen2_moe");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.n_experts, 8);
  EXPECT_EQ(c.n_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 32);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_TRUE(c.shared_gate);
  EXPECT_EQ(c.shared_width(), 64);
  EXPECT_EQ(c.n_moe_layers(), 3);
  EXPECT_GT(testing::max_diff_with_rules("qwen2_moe", [](ModelConfig& e) {
              e.shared_gate = false;
              e.shared_expert_intermediate_size = 0;
            }),
            100 * kLogitTol);
  auto info = inspect_model(fixture_dir("qwen2_moe"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  EXPECT_NE(format_model_info(*info).find("a shared expert of 64 gated by sigmoid(x · w)"), std::string::npos)
      << format_model_info(*info);
  // shared_expert_intermediate_size must be positive for qwen2_moe.
  testing::TempDir dir("qwen2_moe_bad");
  std::filesystem::copy_file(fixture_dir("qwen2_moe") + "/model.safetensors", dir.file("model.safetensors"));
  auto j = nlohmann::json::parse(*read_text_file(fixture_dir("qwen2_moe") + "/config.json"));
  j["shared_expert_intermediate_size"] = 0;
  testing::write_text(dir.file("config.json"), j.dump());
  auto bad = Checkpoint::open(dir.str());
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("shared_expert_intermediate_size"), std::string::npos) << bad.status().to_string();
}

}  // namespace
}  // namespace brigade
