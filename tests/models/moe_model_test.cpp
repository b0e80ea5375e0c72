// qwen3_moe through config.json, make-model, Model::load and step_cost: impossible expert
// numbers are refused naming the field, make-model writes the Hub's layout (per-expert tensors,
// a dense layer where mlp_only_layers says), what cannot run (fp8 experts, a missing expert
// tensor) fails the load with the reason, the roofline counts only active experts, and inspect
// shows the MoE facts.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "cpu/cpu_backend.h"
#include "model_test_util.h"
#include "models/checkpoint.h"
#include "models/inspect.h"
#include "models/make_model.h"

namespace brigade {
namespace {

using testing::TempDir;

nlohmann::json moe_config() {
  return nlohmann::json::parse(R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "intermediate_size": 128, "vocab_size": 300, "num_experts": 8,
    "num_experts_per_tok": 2, "moe_intermediate_size": 32, "norm_topk_prob": true,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "use_sliding_window": false})");
}

TEST(MoeConfig, ParsesQwen3MoeAndItsSparseLayers) {
  auto c = parse_hf_config(moe_config().dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "qwen3_moe");
  EXPECT_TRUE(c->qk_norm);
  EXPECT_EQ(c->n_moe_layers(), 4);
  auto j = moe_config();
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  j.erase("num_experts");
  j["num_local_experts"] = 6;  // what transformers 5's save_pretrained writes
  c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->n_experts, 6);
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1));
  EXPECT_FALSE(c->is_moe_layer(2));
  EXPECT_FALSE(c->is_moe_layer(3));  // sparse by the step, dense by mlp_only_layers
  EXPECT_EQ(c->n_moe_layers(), 1);
  // A dense architecture never has sparse layers, whatever stray keys it carries.
  auto dense = parse_hf_config(R"({"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 10, "vocab_size": 300, "num_experts": 8})");
  ASSERT_TRUE(dense.has_value());
  EXPECT_EQ(dense->n_moe_layers(), 0);
}

// A config field set to a value parse_hf_config refuses, and what the refusal must say.
struct BadField {
  const char* key;
  nlohmann::json value;
  const char* says;
};

void expect_refused(const nlohmann::json& good, std::initializer_list<BadField> bad) {
  for (const BadField& b : bad) {
    auto j = good;
    j[b.key] = b.value;
    auto c = parse_hf_config(j.dump());
    ASSERT_FALSE(c.has_value()) << b.key;
    EXPECT_NE(c.status().message().find(b.says), std::string::npos) << c.status().message();
  }
}

TEST(MoeConfig, ImpossibleExpertNumbersAreRefusedNamingTheField) {
  expect_refused(moe_config(), {{"num_experts_per_tok", 9, "num_experts_per_tok must be in [1, num_experts = 8]"},
                                {"num_experts_per_tok", 0, "num_experts_per_tok"},
                                {"num_experts", 0, "num_experts must be >= 1"},
                                {"moe_intermediate_size", 0, "moe_intermediate_size must be > 0"},
                                {"decoder_sparse_step", 0, "decoder_sparse_step must be >= 1"},
                                {"mlp_only_layers", {4}, "mlp_only_layers entry 4"},
                                {"mlp_only_layers", "all", "mlp_only_layers must be a list"},
                                {"num_experts", nullptr, "num_local_experts"},
                                {"shared_expert_intermediate_size", 64, "shared expert"}});
}

// Mixtral-8x7B's config.json keys (MixtralConfig), at tiny size.
nlohmann::json mixtral_config() {
  return nlohmann::json::parse(R"({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
    "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 96, "vocab_size": 300, "num_local_experts": 8, "num_experts_per_tok": 2,
    "sliding_window": null, "router_jitter_noise": 0.01, "output_router_logits": true, "rope_theta": 1e6})");
}

TEST(MoeConfig, ParsesMixtral) {
  auto c = parse_hf_config(mixtral_config().dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "mixtral");
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->n_experts, 8);
  EXPECT_EQ(c->n_experts_per_tok, 2);
  EXPECT_EQ(c->moe_intermediate_size, 96) << "the experts are intermediate_size wide";
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_EQ(c->n_moe_layers(), 2);
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_EQ(c->bos_id, 1) << "MixtralConfig's defaults, as LlamaConfig's";
  EXPECT_EQ(c->eos_ids, std::vector<int>{2});
  auto j = mixtral_config();
  j.erase("architectures");  // model_type alone
  j.erase("num_local_experts");
  j["sliding_window"] = 4096;
  c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "mixtral");
  EXPECT_EQ(c->n_experts, 8) << "MixtralConfig's default";
  EXPECT_EQ(c->sliding_window, 4096);
}

TEST(MoeConfig, ImpossibleMixtralConfigsAreRefusedNamingTheField) {
  expect_refused(mixtral_config(),
                 {{"num_experts_per_tok", 9, "num_experts_per_tok must be in [1, num_local_experts = 8] (got 9)"},
                  {"num_local_experts", 0, "num_local_experts must be >= 1"},
                  {"intermediate_size", 0, "intermediate_size must be > 0"},
                  {"attention_bias", true, "attention_bias = true is not part of mixtral"}});
}

SyntheticModelSpec moe_spec() {
  SyntheticModelSpec s;
  s.arch = "qwen3_moe";
  s.hidden_size = 64;
  s.n_layers = 3;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.intermediate_size = 128;
  s.vocab_size = 300;
  s.max_position = 64;
  s.tie_embeddings = false;
  s.n_experts = 8;
  s.n_experts_per_tok = 2;
  s.moe_intermediate_size = 32;
  s.mlp_only_layers = {1};
  s.dtype = DType::f32;
  s.seed = 3;
  return s;
}

std::unique_ptr<Model> load(const std::string& dir, Backend& backend, std::optional<DType> want = std::nullopt) {
  LoadOptions o;
  o.max_batch_tokens = 32;
  o.progress = false;
  o.weight_dtype = want;
  auto m = Model::load(dir, backend, o);
  EXPECT_TRUE(m.has_value()) << m.status().to_string();
  return m ? std::move(*m) : nullptr;
}

// moe_spec's vocabulary (300): a 5-token prefill of the checkpoint in `dir` gives finite logits that
// differ per row (the tokens went through the blocks).
void expect_prefill_runs(const std::string& dir, Backend& backend) {
  auto model = load(dir, backend);
  ASSERT_NE(model, nullptr);
  auto kv = KvCache::allocate(backend, model->kv_layout(8, 16, DType::f32));
  ASSERT_TRUE(kv.has_value());
  const auto logits = testing::run_step(*model, backend, *kv, testing::make_step({{0, {1, 17, 250, 3, 99}, 0, true}}, 16, 4));
  ASSERT_EQ(logits.size(), 5u * 300u);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(logits[0], logits[300]);
}

TEST(MoeMakeModel, WritesTheHubLayoutAndLoads) {
  TempDir dir("moe_layout");
  ASSERT_TRUE(write_synthetic_model(moe_spec(), dir.str()).is_ok());
  const auto config = nlohmann::json::parse(testing::read_bytes(dir.file("config.json")));
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"Qwen3MoeForCausalLM"}));
  EXPECT_EQ(config["num_experts"], 8);
  EXPECT_EQ(config["num_experts_per_tok"], 2);
  EXPECT_EQ(config["moe_intermediate_size"], 32);
  EXPECT_EQ(config["norm_topk_prob"], true);
  EXPECT_EQ(config["mlp_only_layers"], nlohmann::json::array({1}));
  auto ck = Checkpoint::open(dir.str());
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const auto& t = (*ck)->tensors();
  EXPECT_EQ(t.at("model.layers.0.mlp.gate.weight").shape, (std::vector<int64_t>{8, 64}));
  EXPECT_EQ(t.at("model.layers.2.mlp.experts.7.gate_proj.weight").shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(t.at("model.layers.2.mlp.experts.7.down_proj.weight").shape, (std::vector<int64_t>{64, 32}));
  EXPECT_TRUE(t.count("model.layers.1.mlp.gate_proj.weight"));  // the dense layer
  EXPECT_FALSE(t.count("model.layers.1.mlp.gate.weight"));
  EXPECT_FALSE(t.count("model.layers.0.mlp.gate_proj.weight"));

  auto backend = make_cpu_backend({.n_threads = 2});
  expect_prefill_runs(dir.str(), *backend);

  const auto info = inspect_model(dir.str());
  ASSERT_TRUE(info.has_value());
  const std::string text = format_model_info(*info);
  EXPECT_NE(text.find("experts:       8 per sparse layer, top-2 renormalised, expert intermediate 32"), std::string::npos)
      << text;
  EXPECT_NE(text.find("sparse layers: 2 of 3 (dense: 1)"), std::string::npos) << text;
}

// Qwen2-MoE (its gated shared expert, n_shared_experts * moe_intermediate_size wide) and GLM-4.5
// (q/k/v biases and norms, half-rotated heads, a dense first layer, sigmoid routing with the
// selection bias and shared experts) as make-model writes them: the Hub's names and config keys,
// read back as the fixtures from transformers are read, and run.
TEST(MoeMakeModel, Qwen2MoeAndGlm4MoeInTheHubLayout) {
  auto backend = make_cpu_backend({.n_threads = 2});
  for (const char* arch : {"qwen2_moe", "glm4_moe"}) {
    SCOPED_TRACE(arch);
    const bool glm = std::string(arch) == "glm4_moe";
    TempDir dir(std::string("moe_layout_") + arch);
    SyntheticModelSpec s = moe_spec();
    s.arch = arch;
    s.mlp_only_layers.clear();
    s.n_shared_experts = 2;
    s.head_dim = 32;
    s.n_group = glm ? 2 : 1;
    s.routed_scaling_factor = glm ? 2.5f : 1.0f;
    ASSERT_TRUE(write_synthetic_model(s, dir.str()).is_ok());
    auto ck = Checkpoint::open(dir.str());
    ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
    const ModelConfig& c = (*ck)->config();
    EXPECT_EQ(c.arch, arch);
    EXPECT_TRUE(c.qkv_bias);
    EXPECT_EQ(c.qk_norm, glm);
    EXPECT_EQ(c.rope_dims(), glm ? 16 : 32);
    EXPECT_EQ(c.shared_width(), 64);
    EXPECT_EQ(c.shared_gate, !glm);
    EXPECT_EQ(c.n_moe_layers(), glm ? 2 : 3) << "glm4_moe: layer 0 dense (first_k_dense_replace 1)";
    EXPECT_EQ(c.moe_scoring, glm ? MoeScoring::sigmoid : MoeScoring::softmax);
    EXPECT_EQ(c.moe_group_score, glm ? MoeGroupScore::top2_sum : MoeGroupScore::none);
    const auto& t = (*ck)->tensors();
    const std::string shared = glm ? "model.layers.1.mlp.shared_experts." : "model.layers.1.mlp.shared_expert.";
    EXPECT_EQ(t.at(shared + "down_proj.weight").shape, (std::vector<int64_t>{64, 64}));
    EXPECT_EQ(t.count("model.layers.1.mlp.shared_expert_gate.weight"), glm ? 0u : 1u);
    EXPECT_EQ(t.count("model.layers.1.mlp.gate.e_score_correction_bias"), glm ? 1u : 0u);
    EXPECT_EQ(t.count("model.layers.0.mlp.gate_proj.weight"), glm ? 1u : 0u);
    expect_prefill_runs(dir.str(), *backend);
  }
}

// Qwen3-30B-A3B's shape: every layer sparse (the dense MLP scratch is then not allocated).
TEST(MoeMakeModel, AModelWithoutDenseLayersRuns) {
  TempDir dir("moe_all_sparse");
  SyntheticModelSpec s = moe_spec();
  s.mlp_only_layers.clear();
  ASSERT_TRUE(write_synthetic_model(s, dir.str()).is_ok());
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(dir.str(), *backend);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->config().n_moe_layers(), 3);
  auto kv = KvCache::allocate(*backend, model->kv_layout(8, 16, DType::f32));
  ASSERT_TRUE(kv.has_value());
  const auto logits = testing::run_step(*model, *backend, *kv, testing::make_step({{0, {1, 2, 3}, 0, false}}, 16, 4));
  ASSERT_EQ(logits.size(), 300u);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST(MoeMakeModel, BadSpecsAreRefused) {
  TempDir dir("moe_bad");
  SyntheticModelSpec s = moe_spec();
  s.n_experts_per_tok = 9;
  const Status st = write_synthetic_model(s, dir.str());
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("num_experts_per_tok"), std::string::npos) << st.message();
}

TEST(MoeModel, WhatCannotRunIsRefusedAtLoad) {
  TempDir dir("moe_refuse");
  ASSERT_TRUE(write_synthetic_model(moe_spec(), dir.str()).is_ok());
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions o;
  o.progress = false;
  o.weight_dtype = DType::f8e4m3;
  auto fp8 = Model::load(dir.str(), *backend, o);
  ASSERT_FALSE(fp8.has_value());
  EXPECT_EQ(fp8.status().code(), StatusCode::unsupported);
  EXPECT_NE(fp8.status().message().find("fp8 weights are not supported for mixture-of-experts"), std::string::npos)
      << fp8.status().message();

  // A checkpoint without one expert's tensor: not_found naming it.
  TempDir cut("moe_cut");
  std::filesystem::copy_file(dir.file("config.json"), cut.file("config.json"));
  auto ck = Checkpoint::open(dir.str());
  ASSERT_TRUE(ck.has_value());
  std::vector<testing::StEntry> entries;
  for (const auto& [name, t] : (*ck)->tensors()) {
    if (name == "model.layers.2.mlp.experts.5.up_proj.weight") continue;
    entries.push_back({name, "F32", t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())});
  }
  testing::write_safetensors_file(cut.file("model.safetensors"), entries);
  auto missing = Model::load(cut.str(), *backend, LoadOptions{.progress = false});
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.status().message().find("model.layers.2.mlp.experts.5.up_proj.weight"), std::string::npos)
      << missing.status().message();
}

// make-model's gpt_oss is the Hub's bf16 gpt-oss layout (GptOssConfig's fields, the router with
// its bias, experts stacked transposed with biases, sinks); it loads and runs, and without the
// sinks the load fails naming them.
TEST(MoeMakeModel, WritesGptOssInTheHubLayout) {
  TempDir dir("gpt_oss_layout");
  SyntheticModelSpec s = moe_spec();
  s.arch = "gpt_oss";
  s.n_layers = 2;
  s.intermediate_size = 96;
  s.n_experts = 4;
  s.mlp_only_layers.clear();
  ASSERT_TRUE(write_synthetic_model(s, dir.str()).is_ok());
  const auto config = nlohmann::json::parse(testing::read_bytes(dir.file("config.json")));
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"GptOssForCausalLM"}));
  EXPECT_EQ(config["num_local_experts"], 4);
  EXPECT_EQ(config["layer_types"], nlohmann::json::array({"sliding_attention", "full_attention"}));
  EXPECT_EQ(config["rope_scaling"]["rope_type"], "yarn");
  auto ck = Checkpoint::open(dir.str());
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const auto& t = (*ck)->tensors();
  const int64_t h = s.hidden_size;
  EXPECT_EQ(t.at("model.layers.1.mlp.router.weight").shape, (std::vector<int64_t>{4, h}));
  EXPECT_EQ(t.at("model.layers.1.mlp.experts.gate_up_proj").shape, (std::vector<int64_t>{4, h, 192}));
  EXPECT_EQ(t.at("model.layers.1.mlp.experts.down_proj").shape, (std::vector<int64_t>{4, 96, h}));
  EXPECT_EQ(t.at("model.layers.1.self_attn.sinks").shape, (std::vector<int64_t>{s.n_heads}));
  EXPECT_TRUE(t.count("model.layers.0.self_attn.o_proj.bias"));

  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(dir.str(), *backend);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->config().arch, "gpt_oss");
  EXPECT_EQ(model->config().n_moe_layers(), 2);
  auto kv = KvCache::allocate(*backend, model->kv_layout(8, 16, DType::f32));
  ASSERT_TRUE(kv.has_value());
  const auto logits = testing::run_step(*model, *backend, *kv, testing::make_step({{0, {1, 2, 3}, 0, false}}, 16, 4));
  ASSERT_EQ(logits.size(), static_cast<size_t>(s.vocab_size));
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));

  TempDir cut("gpt_oss_cut");
  std::filesystem::copy_file(dir.file("config.json"), cut.file("config.json"));
  std::vector<testing::StEntry> entries;
  for (const auto& [name, tensor] : t) {
    if (name == "model.layers.1.self_attn.sinks") continue;
    entries.push_back({name, "F32", tensor.shape, std::vector<uint8_t>(tensor.bytes.begin(), tensor.bytes.end())});
  }
  testing::write_safetensors_file(cut.file("model.safetensors"), entries);
  auto missing = Model::load(cut.str(), *backend, LoadOptions{.progress = false});
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.status().message().find("model.layers.1.self_attn.sinks"), std::string::npos)
      << missing.status().message();
}

// make-model's mixtral is the Hub's Mixtral layout (block_sparse_moe, experts' w1 / w3 / w2 of
// intermediate_size, no dense MLP); it loads and runs, and without one expert's tensor the load
// fails naming it.
TEST(MoeMakeModel, WritesMixtralInTheHubLayout) {
  TempDir dir("mixtral_layout");
  SyntheticModelSpec s = moe_spec();
  s.arch = "mixtral";
  s.n_layers = 2;
  s.intermediate_size = 64;
  s.n_experts = 4;
  s.mlp_only_layers.clear();
  ASSERT_TRUE(write_synthetic_model(s, dir.str()).is_ok());
  const auto config = nlohmann::json::parse(testing::read_bytes(dir.file("config.json")));
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"MixtralForCausalLM"}));
  EXPECT_EQ(config["model_type"], "mixtral");
  EXPECT_EQ(config["num_local_experts"], 4);
  EXPECT_EQ(config["num_experts_per_tok"], 2);
  EXPECT_FALSE(config.contains("moe_intermediate_size"));
  auto ck = Checkpoint::open(dir.str());
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const auto& t = (*ck)->tensors();
  EXPECT_EQ(t.at("model.layers.1.block_sparse_moe.gate.weight").shape, (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(t.at("model.layers.1.block_sparse_moe.experts.3.w1.weight").shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(t.at("model.layers.1.block_sparse_moe.experts.3.w2.weight").shape, (std::vector<int64_t>{64, 64}));
  EXPECT_FALSE(t.count("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_FALSE(t.count("model.layers.0.self_attn.q_norm.weight"));

  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(dir.str(), *backend);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->config().n_moe_layers(), 2);
  auto kv = KvCache::allocate(*backend, model->kv_layout(8, 16, DType::f32));
  ASSERT_TRUE(kv.has_value());
  const auto logits = testing::run_step(*model, *backend, *kv, testing::make_step({{0, {1, 2, 3}, 0, false}}, 16, 4));
  ASSERT_EQ(logits.size(), 300u);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));

  TempDir cut("mixtral_cut");
  std::filesystem::copy_file(dir.file("config.json"), cut.file("config.json"));
  std::vector<testing::StEntry> entries;
  for (const auto& [name, tensor] : t) {
    if (name == "model.layers.1.block_sparse_moe.experts.2.w3.weight") continue;
    entries.push_back({name, "F32", tensor.shape, std::vector<uint8_t>(tensor.bytes.begin(), tensor.bytes.end())});
  }
  testing::write_safetensors_file(cut.file("model.safetensors"), entries);
  auto missing = Model::load(cut.str(), *backend, LoadOptions{.progress = false});
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.status().message().find("model.layers.1.block_sparse_moe.experts.2.w3.weight"), std::string::npos)
      << missing.status().message();
}

// step_cost by hand: a token runs k = 2 of the 8 experts of each of the 2 sparse layers; the
// bytes are the experts min(E, n * k) tokens can touch.
TEST(MoeModel, StepCostCountsTheActiveExperts) {
  TempDir dir("moe_cost");
  ASSERT_TRUE(write_synthetic_model(moe_spec(), dir.str()).is_ok());
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load(dir.str(), *backend);
  ASSERT_NE(model, nullptr);
  const double h = 64, kv_w = 2 * 16, inter = 128, vocab = 300, e = 8, k = 2, mi = 32;
  const double attn = h * h + 2 * h * kv_w + h * h + 2 * h + 2 * 16;  // q k v o, two norms, q/k norms
  const double expert = 3 * h * mi;
  const double dense_layer = attn + 3 * h * inter, sparse_layer_fixed = attn + e * h;  // + router
  const double all = dense_layer + 2 * (sparse_layer_fixed + e * expert) + h;         // + final norm
  ASSERT_EQ(model->n_params(), static_cast<int64_t>(all + 2 * vocab * h));
  const double fixed = dense_layer + 2 * sparse_layer_fixed + h;
  auto cost = [&](int n_tokens) {
    std::vector<int32_t> tokens(static_cast<size_t>(n_tokens), 5);
    return model->step_cost(testing::make_step({{0, tokens, 0, false}}, 16, 4), 0.0);
  };
  const double attn_flops = [&] {
    double pairs = 0;
    for (int i = 1; i <= 3; ++i) pairs += i;
    return 4 * 16 * 4 * 3 * pairs;
  }();
  const StepCost three = cost(3);
  EXPECT_DOUBLE_EQ(three.flops, 2 * (fixed + 2 * k * expert) * 3 + 2 * vocab * h + attn_flops);
  // 3 tokens x 2 experts: at most 6 of the 8 experts per sparse layer are read.
  EXPECT_DOUBLE_EQ(three.bytes, 4 * (fixed + 2 * 6 * expert + 3 * h + vocab * h));
  // 5 tokens x 2 >= 8: every expert.
  EXPECT_DOUBLE_EQ(cost(5).bytes, 4 * (fixed + 2 * e * expert + 5 * h + vocab * h));
}

}  // namespace
}  // namespace brigade
