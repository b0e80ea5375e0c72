#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <tuple>

#include "models/llama.h"
#include "models/model_config.h"
#include "models/rope_scaling.h"

namespace brigade {
namespace {

const char* kLlama = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
  "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
  "intermediate_size": 5632, "vocab_size": 32000, "max_position_embeddings": 2048,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false,
  "attention_bias": false, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"})";

TEST(ModelConfig, ParsesLlama) {
  auto c = parse_hf_config(kLlama);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "llama");
  EXPECT_EQ(c->hidden_size, 2048);
  EXPECT_EQ(c->n_layers, 22);
  EXPECT_EQ(c->n_heads, 32);
  EXPECT_EQ(c->n_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->intermediate_size, 5632);
  EXPECT_EQ(c->vocab_size, 32000);
  EXPECT_EQ(c->max_position, 2048);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  EXPECT_EQ(c->rope_style, RopeStyle::neox);
  EXPECT_FALSE(c->tie_embeddings);
  EXPECT_EQ(c->bos_id, 1);
  EXPECT_EQ(c->eos_ids, std::vector<int>{2});
  EXPECT_EQ(c->dtype, DType::bf16);
}

TEST(ModelConfig, DefaultsAndVariants) {
  auto c = parse_hf_config(R"({"model_type": "llama", "hidden_size": 96, "num_hidden_layers": 1,
    "num_attention_heads": 4, "head_dim": 32, "intermediate_size": 10, "vocab_size": 300,
    "eos_token_id": [2, 7], "tie_word_embeddings": true})");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->n_kv_heads, 4);   // defaults to the head count
  EXPECT_EQ(c->head_dim, 32);    // explicit head_dim wins over hidden / heads
  EXPECT_EQ(c->eos_ids, (std::vector<int>{2, 7}));
  EXPECT_TRUE(c->tie_embeddings);
  EXPECT_EQ(c->dtype, DType::f32);

  auto m = parse_hf_config(R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral",
    "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 10, "vocab_size": 300, "sliding_window": 4096})");
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  EXPECT_EQ(m->arch, "llama");
  EXPECT_EQ(m->sliding_window, 4096);
}

TEST(ModelConfig, UnknownArchitectureListsSupported) {
  auto c = parse_hf_config(R"({"architectures": ["RwkvForCausalLM"], "hidden_size": 64})");
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.status().code(), StatusCode::unsupported);
  EXPECT_NE(c.status().message().find("RwkvForCausalLM"), std::string::npos);
  EXPECT_NE(c.status().message().find("LlamaForCausalLM"), std::string::npos);
}

TEST(ModelConfig, RopeScalingVariants) {
  auto with = [](const std::string& key, const std::string& obj) {
    std::string text = kLlama;
    text.insert(1, "\"" + key + "\": " + obj + ",");
    return parse_hf_config(text);
  };
  // transformers < 5 writes rope_scaling (with "type" in older files); >= 5 rope_parameters.
  auto linear = with("rope_scaling", R"({"type": "linear", "factor": 2.0})");
  ASSERT_TRUE(linear.has_value()) << linear.status().to_string();
  EXPECT_EQ(linear->rope_scaling.type, RopeScalingType::linear);
  EXPECT_FLOAT_EQ(linear->rope_scaling.factor, 2.0f);
  auto dynamic = with("rope_parameters", R"({"rope_type": "dynamic", "factor": 2.0, "rope_theta": 5e5})");
  ASSERT_TRUE(dynamic.has_value()) << dynamic.status().to_string();
  EXPECT_EQ(dynamic->rope_scaling.type, RopeScalingType::dynamic);
  EXPECT_FLOAT_EQ(dynamic->rope_theta, 5e5f);
  auto plain = with("rope_parameters", R"({"rope_type": "default", "rope_theta": 1e6})");
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->rope_scaling.type, RopeScalingType::none);
  EXPECT_FLOAT_EQ(plain->rope_theta, 1e6f);

  // Dynamic NTK only differs past max_position, which brigade refuses: frequencies unchanged.
  EXPECT_EQ(rope_inv_freq_scaled(1e4f, 16, dynamic->rope_scaling), rope_inv_freq(1e4f, 16));
  const auto lin = rope_inv_freq_scaled(1e4f, 16, linear->rope_scaling);
  EXPECT_FLOAT_EQ(lin[3], rope_inv_freq(1e4f, 16)[3] / 2.0f);
}

TEST(ModelConfig, RejectsRopeScalingMissingFieldsAndBadNumbers) {
  std::string scaled = kLlama;
  scaled.insert(1, R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0},)");
  auto c = parse_hf_config(scaled);
  EXPECT_EQ(c.status().code(), StatusCode::corrupt);
  EXPECT_NE(c.status().message().find("low_freq_factor"), std::string::npos);
  std::string yarn = kLlama;
  // yarn on a Llama (the Qwen model cards' context extension; tests/fixtures/qwen3_yarn checks
  // the result), refused for a decoder that does not apply it (Mixtral), naming what it supports.
  yarn.insert(1, R"("rope_scaling": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096},)");
  auto y = parse_hf_config(yarn);
  ASSERT_TRUE(y.has_value()) << y.status().to_string();
  EXPECT_EQ(y->rope_scaling.type, RopeScalingType::yarn);
  EXPECT_FLOAT_EQ(rope_attention_factor(y->rope_scaling), 0.1f * std::log(8.0f) + 1.0f);
  std::string mixtral = yarn;
  mixtral.replace(mixtral.find("LlamaForCausalLM"), std::string("LlamaForCausalLM").size(), "MixtralForCausalLM");
  auto m = parse_hf_config(mixtral);
  EXPECT_EQ(m.status().code(), StatusCode::unsupported);
  EXPECT_NE(m.status().message().find("llama3"), std::string::npos) << "lists the supported types";
  std::string sliding = R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": 4, "intermediate_size": 10, "vocab_size": 300, "use_sliding_window": true})";
  EXPECT_EQ(parse_hf_config(sliding).status().code(), StatusCode::unsupported);

  auto missing = parse_hf_config(R"({"model_type": "llama", "hidden_size": 64})");
  EXPECT_EQ(missing.status().code(), StatusCode::corrupt);
  EXPECT_NE(missing.status().message().find("num_hidden_layers"), std::string::npos);

  auto bad_heads = parse_hf_config(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": 4, "num_key_value_heads": 3, "intermediate_size": 10, "vocab_size": 300})");
  EXPECT_EQ(bad_heads.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(bad_heads.status().message().find("num_key_value_heads"), std::string::npos);

  EXPECT_EQ(parse_hf_config("{not json").status().code(), StatusCode::corrupt);
  EXPECT_EQ(parse_hf_config(R"({"model_type": "llama", "hidden_size": "64"})").status().code(), StatusCode::corrupt);
  std::string dtype = kLlama;
  dtype.replace(dtype.find("bfloat16"), 8, "float8");
  EXPECT_EQ(parse_hf_config(dtype).status().code(), StatusCode::unsupported);
}

// Phi-3-mini-128k-instruct's config.json shape (factor lists shortened to a pattern): longrope
// with original_max_position_embeddings at the top level, fused weights, its sliding_window.
std::string phi3_config(const std::string& extra, int n_factors = 48) {
  std::string shorts, longs;
  for (int i = 0; i < n_factors; ++i) {
    const std::string sep = i > 0 ? ", " : "";
    shorts.append(sep).append(std::to_string(1.0 + 0.01 * i));
    longs.append(sep).append(std::to_string(1.0 + 1.5 * i));
  }
  return R"({"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 3072,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 8192,
    "vocab_size": 32064, "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": false,
    "bos_token_id": 1, "eos_token_id": 32000, "pad_token_id": 32000, "torch_dtype": "bfloat16",
    "rope_scaling": {"type": "longrope", "short_factor": [)" + shorts + R"(], "long_factor": [)" + longs + "]}" +
         extra + "}";
}

TEST(ModelConfig, ParsesPhi3LongropeAndPartialRotary) {
  auto c = parse_hf_config(phi3_config(""));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "phi3");
  EXPECT_TRUE(c->fused_weights);
  EXPECT_FALSE(c->qkv_bias || c->o_bias || c->tie_embeddings);
  EXPECT_EQ(c->sliding_window, 262144);
  EXPECT_EQ(c->rope_dims(), 96);
  const RopeScaling& r = c->rope_scaling;
  EXPECT_EQ(r.type, RopeScalingType::longrope);
  EXPECT_EQ(r.original_max_position, 4096);
  EXPECT_TRUE(r.longrope_long);  // a 131072 context runs the long factors
  EXPECT_FLOAT_EQ(r.factor, 32.0f);
  // transformers' default: sqrt(1 + ln(131072 / 4096) / ln(4096)).
  EXPECT_FLOAT_EQ(rope_attention_factor(r), 1.1902380714238083f);
  const auto inv = rope_inv_freq_scaled(1e4f, 96, r);
  EXPECT_FLOAT_EQ(inv[2], 1.0f / (4.0f * powf(1e4f, 4.0f / 96.0f)));  // long_factor[2] = 1 + 1.5 * 2

  // A context within the original one runs the short factors; a given attention_factor wins.
  std::string within = phi3_config("");
  within.replace(within.find("131072"), 6, "4096");
  auto w = parse_hf_config(within);
  ASSERT_TRUE(w.has_value()) << w.status().to_string();
  EXPECT_FALSE(w->rope_scaling.longrope_long);
  EXPECT_FLOAT_EQ(rope_attention_factor(w->rope_scaling), 1.0f);  // factor 1
  EXPECT_FLOAT_EQ(rope_inv_freq_scaled(1e4f, 96, w->rope_scaling)[2], 1.0f / (1.02f * powf(1e4f, 4.0f / 96.0f)));

  // Phi-4-mini: head_dim 128, partial_rotary_factor 0.75: 96 rotated dims, 48 factors each.
  std::string mini = phi3_config(R"(, "partial_rotary_factor": 0.75, "head_dim": 128)");
  mini.replace(mini.find("\"num_attention_heads\": 32"), 25, "\"num_attention_heads\": 24");
  mini.replace(mini.find("\"num_key_value_heads\": 32"), 25, "\"num_key_value_heads\": 8");
  auto m = parse_hf_config(mini);
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  EXPECT_EQ(m->head_dim, 128);
  EXPECT_EQ(m->rope_dims(), 96);

  // Phi-3-mini-4k: no scaling, full rotary, the window from config.json.
  auto plain = parse_hf_config(R"({"architectures": ["Phi3ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": 4, "intermediate_size": 10, "vocab_size": 300, "sliding_window": 2047,
    "rope_scaling": null})");
  ASSERT_TRUE(plain.has_value()) << plain.status().to_string();
  EXPECT_EQ(plain->rope_scaling.type, RopeScalingType::none);
  EXPECT_EQ(plain->rope_dims(), 16);
  EXPECT_EQ(plain->sliding_window, 2047);
}

TEST(ModelConfig, RejectsBadPhi3Rope) {
  auto short_list = parse_hf_config(phi3_config("", 40));
  EXPECT_EQ(short_list.status().code(), StatusCode::corrupt);
  EXPECT_NE(short_list.status().message().find("rotary_dim / 2 = 48"), std::string::npos) << short_list.status().to_string();
  auto partial = parse_hf_config(phi3_config(R"(, "partial_rotary_factor": 0.0)"));
  EXPECT_EQ(partial.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(partial.status().message().find("partial_rotary_factor"), std::string::npos);
  std::string no_lists = phi3_config("");
  no_lists.replace(no_lists.find("\"long_factor\""), 13, "\"lung_factor\"");
  EXPECT_NE(parse_hf_config(no_lists).status().message().find("long_factor"), std::string::npos);
  std::string llama = kLlama;
  llama.insert(1, R"("rope_scaling": {"rope_type": "longrope", "short_factor": [1], "long_factor": [1]},)");
  auto l = parse_hf_config(llama);
  EXPECT_EQ(l.status().code(), StatusCode::unsupported);
  EXPECT_NE(l.status().message().find("phi3, phimoe, minicpm and minicpm3 only"), std::string::npos);
}

}  // namespace
}  // namespace brigade

namespace brigade {
namespace {

// SmolLM3: NoPE layers from no_rope_layers or every no_rope_layer_interval-th layer (4), tied by
// default; Granite 3: its multipliers. Bad values refused naming the field.
TEST(ModelConfig, ReadsSmolLM3AndGranite) {
  nlohmann::json j = {{"architectures", {"SmolLM3ForCausalLM"}}, {"hidden_size", 64}, {"num_hidden_layers", 8},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 128},
                      {"vocab_size", 256}};
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "smollm3");
  EXPECT_EQ(c->nope_layers, (std::vector<bool>{false, false, false, true, false, false, false, true}));
  EXPECT_TRUE(c->tie_embeddings);
  j["no_rope_layers"] = {1, 0, 1, 1, 1, 1, 0, 1};
  c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->nope_layers, (std::vector<bool>{false, true, false, false, false, false, true, false}));
  j["no_rope_layers"] = {1, 0};
  EXPECT_EQ(parse_hf_config(j.dump()).status().code(), StatusCode::corrupt);
  j.erase("no_rope_layers");
  j["use_sliding_window"] = true;
  EXPECT_EQ(parse_hf_config(j.dump()).status().code(), StatusCode::unsupported);

  nlohmann::json g = {{"architectures", {"GraniteForCausalLM"}}, {"hidden_size", 64}, {"num_hidden_layers", 2},
                      {"num_attention_heads", 4}, {"intermediate_size", 128}, {"vocab_size", 256},
                      {"embedding_multiplier", 12.0}, {"residual_multiplier", 0.22}, {"attention_multiplier", 0.0078125},
                      {"logits_scaling", 8.0}};
  auto granite = parse_hf_config(g.dump());
  ASSERT_TRUE(granite.has_value()) << granite.status().to_string();
  EXPECT_EQ(granite->arch, "granite");
  EXPECT_FLOAT_EQ(granite->embedding_multiplier, 12.0f);
  EXPECT_FLOAT_EQ(granite->residual_multiplier, 0.22f);
  EXPECT_FLOAT_EQ(granite->attn_scale, 0.0078125f);
  EXPECT_FLOAT_EQ(granite->logits_scaling, 8.0f);
  g["residual_multiplier"] = 0;
  const Status bad = parse_hf_config(g.dump()).status();
  EXPECT_EQ(bad.code(), StatusCode::invalid_argument);
  EXPECT_NE(bad.message().find("residual_multiplier"), std::string::npos) << bad.message();
}

// DBRX's config.json under its own names, DbrxConfig's defaults where absent, attn_config's
// rope_theta over rope_parameters', and its refusals by field.
TEST(ModelConfig, ReadsDbrx) {
  const nlohmann::json base = {{"architectures", {"DbrxForCausalLM"}}, {"d_model", 64}, {"n_heads", 4}, {"n_layers", 2},
                               {"vocab_size", 256}, {"max_seq_len", 128},
                               {"attn_config", {{"kv_n_heads", 2}, {"clip_qkv", 8}, {"rope_theta", 500000.0}}},
                               {"ffn_config", {{"ffn_hidden_size", 32}, {"moe_num_experts", 16}, {"moe_top_k", 4}}},
                               {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  auto parse = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = base;
    edit(j);
    return parse_hf_config(j.dump());
  };
  auto c = parse([](nlohmann::json&) {});
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "dbrx");
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->n_heads, 4);
  EXPECT_EQ(c->n_kv_heads, 2);
  EXPECT_EQ(c->n_layers, 2);
  EXPECT_EQ(c->max_position, 128);
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f) << "attn_config's, the trained base";
  EXPECT_EQ(c->clip_qkv, 8.0f);
  EXPECT_TRUE(c->layer_norms && !c->norm_bias && !c->qkv_bias && !c->o_bias && !c->tie_embeddings);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  EXPECT_EQ(c->n_experts, 16);
  EXPECT_EQ(c->n_experts_per_tok, 4);
  EXPECT_EQ(c->moe_intermediate_size, 32);
  EXPECT_TRUE(c->norm_topk_prob) << "moe_normalize_expert_weights 1 (the default)";
  EXPECT_EQ(c->n_moe_layers(), 2);

  auto defaults = parse([](nlohmann::json& j) {
    for (const char* k : {"d_model", "n_heads", "n_layers", "max_seq_len", "attn_config", "ffn_config"}) j.erase(k);
  });
  ASSERT_TRUE(defaults.has_value()) << defaults.status().to_string();
  EXPECT_EQ(defaults->hidden_size, 2048);
  EXPECT_EQ(defaults->n_heads, 16);
  EXPECT_EQ(defaults->n_kv_heads, 1);
  EXPECT_EQ(defaults->n_layers, 24);
  EXPECT_EQ(defaults->n_experts, 4);
  EXPECT_EQ(defaults->n_experts_per_tok, 1);
  EXPECT_EQ(defaults->moe_intermediate_size, 3584);
  EXPECT_EQ(defaults->clip_qkv, 0.0f);
  EXPECT_FLOAT_EQ(defaults->rope_theta, 10000.0f) << "rope_parameters' where attn_config has none";
  auto unnormalised = parse([](nlohmann::json& j) { j["ffn_config"]["moe_normalize_expert_weights"] = nullptr; });
  ASSERT_TRUE(unnormalised.has_value()) << unnormalised.status().to_string();
  EXPECT_FALSE(unnormalised->norm_topk_prob);

  const std::vector<std::pair<std::function<void(nlohmann::json&)>, const char*>> refused = {
      {[](nlohmann::json& j) { j["ffn_config"]["ffn_act_fn"] = {{"name", "gelu"}}; }, "ffn_act_fn"},
      {[](nlohmann::json& j) { j["ffn_config"]["moe_normalize_expert_weights"] = 2.0; }, "moe_normalize_expert_weights"},
      {[](nlohmann::json& j) { j["ffn_config"]["moe_top_k"] = 17; }, "moe_top_k"},
      {[](nlohmann::json& j) { j["attn_config"]["clip_qkv"] = -1; }, "clip_qkv"},
      {[](nlohmann::json& j) { j["attn_config"] = 3; }, "attn_config"},
      {[](nlohmann::json& j) { j["tie_word_embeddings"] = true; }, "tie_word_embeddings"},
      {[](nlohmann::json& j) { j["quantization_config"] = {{"quant_method", "fp8"}}; }, "quantization_config"}};
  for (const auto& [edit, field] : refused) {
    const Status st = parse(edit).status();
    EXPECT_FALSE(st.is_ok()) << field;
    EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
  }
}

// The Llama decoder's newer relatives: each one's pieces as its transformers class runs them.
TEST(ModelConfig, ReadsTheLlamaVariants) {
  const nlohmann::json base = {{"hidden_size", 64},  {"num_hidden_layers", 4}, {"num_attention_heads", 4},
                               {"num_key_value_heads", 2}, {"intermediate_size", 128}, {"vocab_size", 256},
                               {"head_dim", 32}};
  auto parse = [&](const char* arch, const nlohmann::json& more) {
    nlohmann::json j = base;
    j["architectures"] = {arch};
    if (more.is_object()) j.update(more);
    return parse_hf_config(j.dump());
  };
  auto olmo2 = parse("Olmo2ForCausalLM", {{"attention_bias", true}});
  ASSERT_TRUE(olmo2.has_value()) << olmo2.status().to_string();
  EXPECT_EQ(olmo2->arch, "olmo2");
  EXPECT_TRUE(olmo2->post_norms && olmo2->qk_norm && olmo2->qk_norm_whole && olmo2->qkv_bias && olmo2->o_bias);
  EXPECT_EQ(olmo2->sliding_window, 0);

  // OLMo 3: Olmo3Config's defaults (window 4096, every 4th layer full); a flat rope_scaling is the
  // full layers', the sliding ones rotate unscaled with the same base.
  auto olmo3 = parse("Olmo3ForCausalLM", {{"rope_theta", 500000.0},
                                          {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 8.0},
                                                            {"original_max_position_embeddings", 8192}}}});
  ASSERT_TRUE(olmo3.has_value()) << olmo3.status().to_string();
  EXPECT_EQ(olmo3->sliding_window, 4096);
  EXPECT_EQ(olmo3->sliding_layers, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(olmo3->rope_scaling.type, RopeScalingType::yarn);
  EXPECT_FLOAT_EQ(olmo3->rope_local_theta, 500000.0f);
  auto bad_local = parse("Olmo3ForCausalLM", {{"rope_parameters", {{"full_attention", {{"rope_type", "default"}}},
                                                                   {"sliding_attention", {{"rope_type", "linear"}, {"factor", 2.0}}}}}});
  EXPECT_EQ(bad_local.status().code(), StatusCode::unsupported);

  // EXAONE 4: the window's full layers have no RoPE; a string pattern as the original code reads it;
  // no window: every layer full and rotated.
  auto exaone = parse("Exaone4ForCausalLM", {{"sliding_window", 128}, {"sliding_window_pattern", "LLG"}});
  ASSERT_TRUE(exaone.has_value()) << exaone.status().to_string();
  EXPECT_EQ(exaone->sliding_layers, (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(exaone->nope_layers, (std::vector<bool>{false, false, true, false}));
  EXPECT_TRUE(exaone->post_norms && exaone->qk_norm && !exaone->qk_norm_whole);
  auto full = parse("Exaone4ForCausalLM", {{"sliding_window", nullptr}});
  ASSERT_TRUE(full.has_value()) << full.status().to_string();
  EXPECT_EQ(full->sliding_window, 0);
  EXPECT_TRUE(full->nope_layers.empty());
  EXPECT_EQ(parse("Exaone4ForCausalLM", {{"sliding_window_pattern", "LXG"}}).status().code(),
            StatusCode::invalid_argument);

  auto glm4 = parse("Glm4ForCausalLM", {});
  ASSERT_TRUE(glm4.has_value()) << glm4.status().to_string();
  EXPECT_TRUE(glm4->sandwich_norms && glm4->qkv_bias && !glm4->o_bias);
  EXPECT_EQ(glm4->rope_style, RopeStyle::interleaved);
  EXPECT_EQ(glm4->rope_dims(), 16);  // partial_rotary_factor 0.5 by default

  auto seed = parse("SeedOssForCausalLM", {{"attention_out_bias", true}, {"mlp_bias", true}});
  ASSERT_TRUE(seed.has_value()) << seed.status().to_string();
  EXPECT_TRUE(seed->qkv_bias && seed->o_bias && seed->mlp_bias);

  auto ernie = parse("Ernie4_5ForCausalLM", {{"use_bias", true}});
  ASSERT_TRUE(ernie.has_value()) << ernie.status().to_string();
  EXPECT_TRUE(ernie->qkv_bias && ernie->o_bias && ernie->mlp_bias && ernie->tie_embeddings);
  EXPECT_EQ(ernie->rope_style, RopeStyle::interleaved);

  // Hunyuan's NTK alpha: base * alpha^(d / (d - 2)), nothing scaled; its norms after RoPE.
  auto hunyuan = parse("HunYuanDenseV1ForCausalLM",
                       {{"rope_theta", 10000.0}, {"rope_scaling", {{"type", "dynamic"}, {"alpha", 1000.0}, {"factor", 1.0}}}});
  ASSERT_TRUE(hunyuan.has_value()) << hunyuan.status().to_string();
  EXPECT_NEAR(hunyuan->rope_theta, 10000.0 * std::pow(1000.0, 32.0 / 30.0), 1e-6 * 10000.0 * std::pow(1000.0, 32.0 / 30.0));
  EXPECT_EQ(hunyuan->rope_scaling.type, RopeScalingType::none);
  EXPECT_TRUE(hunyuan->qk_norm && hunyuan->qk_norm_after_rope);

  // OLMoE: OLMo 2's q/k norms in pre-norm layers, every MLP sparse with experts of
  // intermediate_size (OlmoeConfig's defaults 64, top 8, not renormalised); clip_qkv read (null:
  // none), a non-positive one refused.
  auto olmoe = parse("OlmoeForCausalLM", {});
  ASSERT_TRUE(olmoe.has_value()) << olmoe.status().to_string();
  EXPECT_TRUE(olmoe->qk_norm && olmoe->qk_norm_whole && !olmoe->post_norms);
  EXPECT_EQ(olmoe->n_experts, 64);
  EXPECT_EQ(olmoe->n_experts_per_tok, 8);
  EXPECT_EQ(olmoe->moe_intermediate_size, 128);
  EXPECT_FALSE(olmoe->norm_topk_prob);
  EXPECT_EQ(olmoe->n_moe_layers(), 4);
  EXPECT_EQ(olmoe->clip_qkv, 0.0f);
  auto olmoe_clip = parse("OlmoeForCausalLM", {{"clip_qkv", 8.0}});
  ASSERT_TRUE(olmoe_clip.has_value()) << olmoe_clip.status().to_string();
  EXPECT_EQ(olmoe_clip->clip_qkv, 8.0f);
  EXPECT_EQ(parse("OlmoeForCausalLM", {{"clip_qkv", nullptr}})->clip_qkv, 0.0f);
  for (const nlohmann::json& bad : {nlohmann::json(0.0), nlohmann::json(-1.0), nlohmann::json("8")}) {
    const Status clip = parse("OlmoeForCausalLM", {{"clip_qkv", bad}}).status();
    EXPECT_EQ(clip.code(), StatusCode::invalid_argument) << bad;
    EXPECT_NE(clip.message().find("clip_qkv"), std::string::npos) << clip.message();
  }

  // OLMo 1 (OlmoForCausalLM): Llama's layers under LayerNorms without weights (eps 1e-5, fixed),
  // attention_bias on q/k/v and o, clip_qkv.
  auto olmo = parse("OlmoForCausalLM", {{"clip_qkv", 8.0}, {"attention_bias", true}});
  ASSERT_TRUE(olmo.has_value()) << olmo.status().to_string();
  EXPECT_EQ(olmo->arch, "olmo");
  EXPECT_TRUE(olmo->layer_norms && olmo->norms_weightless && !olmo->norm_bias && !olmo->qk_norm);
  EXPECT_TRUE(olmo->qkv_bias && olmo->o_bias);
  EXPECT_FLOAT_EQ(olmo->rms_eps, 1e-5f);
  EXPECT_EQ(olmo->clip_qkv, 8.0f);
  EXPECT_EQ(parse("OlmoeForCausalLM", {{"num_experts_per_tok", 65}}).status().code(), StatusCode::invalid_argument);

  // Apertus: the xIELU MLP (another hidden_act refused by name), per-head q/k norms, and without
  // RoPE fields ApertusConfig's llama3 x8 over 8192 on base 1.2e7.
  auto apertus = parse("ApertusForCausalLM", {{"attention_bias", true}});
  ASSERT_TRUE(apertus.has_value()) << apertus.status().to_string();
  EXPECT_EQ(apertus->mlp_activation, MlpActivation::xielu);
  EXPECT_TRUE(apertus->qk_norm && !apertus->qk_norm_whole && apertus->qkv_bias && apertus->o_bias);
  EXPECT_FLOAT_EQ(apertus->rope_theta, 12000000.0f);
  EXPECT_EQ(apertus->rope_scaling.type, RopeScalingType::llama3);
  EXPECT_EQ(apertus->rope_scaling.original_max_position, 8192);
  auto apertus_theta = parse("ApertusForCausalLM", {{"rope_theta", 5e5}});
  ASSERT_TRUE(apertus_theta.has_value()) << apertus_theta.status().to_string();
  EXPECT_EQ(apertus_theta->rope_scaling.type, RopeScalingType::none) << "the config's own RoPE fields win";
  const Status silu = parse("ApertusForCausalLM", {{"hidden_act", "silu"}}).status();
  EXPECT_EQ(silu.code(), StatusCode::unsupported);
  EXPECT_NE(silu.message().find("hidden_act"), std::string::npos) << silu.message();

  // Mistral3ForConditionalGeneration: its language model, with Mistral3Config's defaults for
  // what text_config leaves out and the top level's tie_word_embeddings (true by default, as
  // transformers ties by it); another text model refused by name, none corrupt.
  nlohmann::json m3 = {{"architectures", {"Mistral3ForConditionalGeneration"}}, {"eos_token_id", 2},
                       {"text_config", {{"model_type", "mistral"}, {"num_hidden_layers", 2}, {"vocab_size", 256}}}};
  auto mistral3 = parse_hf_config(m3.dump());
  ASSERT_TRUE(mistral3.has_value()) << mistral3.status().to_string();
  EXPECT_EQ(mistral3->arch, "llama");
  EXPECT_TRUE(mistral3->multimodal_text && !mistral3->vision.present());
  EXPECT_EQ(mistral3->hidden_size, 5120);
  EXPECT_EQ(mistral3->head_dim, 128);
  EXPECT_FLOAT_EQ(mistral3->rope_theta, 1e9f);
  EXPECT_TRUE(mistral3->tie_embeddings);
  EXPECT_EQ(mistral3->eos_ids, std::vector<int>{2});
  m3["tie_word_embeddings"] = false;
  EXPECT_FALSE(parse_hf_config(m3.dump())->tie_embeddings);
  m3["text_config"]["model_type"] = "ministral3";
  EXPECT_EQ(parse_hf_config(m3.dump()).status().code(), StatusCode::unsupported);
  m3.erase("text_config");
  EXPECT_EQ(parse_hf_config(m3.dump()).status().code(), StatusCode::corrupt);

  // ERNIE 4.5 MoE: sparse from moe_layer_start_index every moe_layer_interval-th layer up to
  // moe_layer_end_index, softmax with the selection bias, renormalised, shared experts.
  auto ernie_moe = parse("Ernie4_5_MoeForCausalLM", {{"num_hidden_layers", 6}, {"moe_layer_start_index", 1},
                                                     {"moe_layer_end_index", 4}, {"moe_layer_interval", 2},
                                                     {"moe_num_experts", 16}, {"moe_k", 4}, {"moe_intermediate_size", 32}});
  ASSERT_TRUE(ernie_moe.has_value()) << ernie_moe.status().to_string();
  std::vector<bool> sparse;
  for (int l = 0; l < 6; ++l) sparse.push_back(ernie_moe->is_moe_layer(l));
  EXPECT_EQ(sparse, (std::vector<bool>{false, true, false, true, false, false}));
  EXPECT_EQ(ernie_moe->n_experts, 16);
  EXPECT_EQ(ernie_moe->n_experts_per_tok, 4);
  EXPECT_EQ(ernie_moe->shared_width(), 2 * 32) << "moe_num_shared_experts 2 by default";
  EXPECT_TRUE(ernie_moe->moe_score_bias && ernie_moe->norm_topk_prob && ernie_moe->tie_embeddings);
  EXPECT_EQ(ernie_moe->moe_scoring, MoeScoring::softmax);
  EXPECT_EQ(ernie_moe->rope_style, RopeStyle::interleaved);
  EXPECT_EQ(parse("Ernie4_5_MoeForCausalLM", {{"use_bias", true}}).status().code(), StatusCode::unsupported);

  // MiniMax-M2 as the Hub's config.json writes it (rotary_dim, MiniMax's own fields): whole-width
  // q/k norms, half the head rotated, 256 experts top 8 by biased sigmoid, renormalised; other
  // norm types or scoring refused by name.
  auto minimax = parse("MiniMaxM2ForCausalLM", {{"rotary_dim", 16}, {"qk_norm_type", "per_layer"},
                                               {"scoring_func", "sigmoid"}, {"use_routing_bias", true},
                                               {"num_mtp_modules", 3}});
  ASSERT_TRUE(minimax.has_value()) << minimax.status().to_string();
  EXPECT_EQ(minimax->arch, "minimax_m2");
  EXPECT_TRUE(minimax->qk_norm && minimax->qk_norm_whole && !minimax->qkv_bias);
  EXPECT_EQ(minimax->rope_dims(), 16);
  EXPECT_EQ(minimax->n_experts, 256);
  EXPECT_EQ(minimax->n_experts_per_tok, 8);
  EXPECT_EQ(minimax->moe_intermediate_size, 128);
  EXPECT_EQ(minimax->n_moe_layers(), 4);
  EXPECT_EQ(minimax->moe_scoring, MoeScoring::sigmoid);
  EXPECT_TRUE(minimax->moe_score_bias && minimax->norm_topk_prob);
  auto factor = parse("MiniMaxM2ForCausalLM", {{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 5e6},
                                                                    {"partial_rotary_factor", 0.25}}}});
  ASSERT_TRUE(factor.has_value()) << factor.status().to_string();
  EXPECT_EQ(factor->rope_dims(), 8) << "transformers 5's partial_rotary_factor";
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"qk_norm_type", "per_head"}, {"scoring_func", "softmax"}, {"shared_intermediate_size", 256},
           {"attn_type_list", {1, 0, 1, 1}}}) {
    const Status s = parse("MiniMaxM2ForCausalLM", {{key, value}}).status();
    EXPECT_EQ(s.code(), StatusCode::unsupported) << key;
    EXPECT_NE(s.message().find(key), std::string::npos) << s.message();
  }
  auto m2_hub = parse("MiniMaxM2ForCausalLM", {{"attn_type_list", {1, 1, 1, 1}}, {"shared_intermediate_size", 0}});
  EXPECT_TRUE(m2_hub.has_value()) << m2_hub.status().to_string();

  // MLP biases are LlamaMLP's (and Seed-OSS's, ERNIE's); another family's are refused by name.
  auto llama = parse("LlamaForCausalLM", {{"mlp_bias", true}});
  ASSERT_TRUE(llama.has_value()) << llama.status().to_string();
  EXPECT_TRUE(llama->mlp_bias);
  const Status qwen = parse("Qwen3ForCausalLM", {{"mlp_bias", true}}).status();
  EXPECT_EQ(qwen.code(), StatusCode::unsupported);
  EXPECT_NE(qwen.message().find("mlp_bias"), std::string::npos) << qwen.message();
}

// Llama 4: Llama4TextConfig's defaults where the config leaves a field out (Scout's: every 4th
// layer NoPE, the others chunked by 8192 with weightless q/k norms, the NoPE layers' temperature,
// every layer sparse with 16 experts of intermediate_size, top 1, sigmoid, the score on the input,
// a shared expert), Maverick's interleaving by step or by moe_layers, and the wrapper's text_config.
TEST(ModelConfig, ReadsLlama4) {
  const nlohmann::json text = {{"hidden_size", 64},  {"num_hidden_layers", 8}, {"num_attention_heads", 4},
                               {"num_key_value_heads", 2}, {"intermediate_size", 32}, {"vocab_size", 256},
                               {"head_dim", 16}};
  auto parse = [&](const nlohmann::json& more) {
    nlohmann::json j = text;
    j["architectures"] = {"Llama4ForCausalLM"};
    if (more.is_object()) j.update(more);
    return parse_hf_config(j.dump());
  };
  auto scout = parse(nullptr);
  ASSERT_TRUE(scout.has_value()) << scout.status().to_string();
  const ModelConfig& c = *scout;
  EXPECT_EQ(c.arch, "llama4_text");
  EXPECT_EQ(c.rope_style, RopeStyle::interleaved);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  std::vector<bool> nope, chunked, sparse;
  for (int l = 0; l < 8; ++l) {
    nope.push_back(c.nope_layers[static_cast<size_t>(l)]);
    chunked.push_back(c.layer_chunk(l) == 8192);
    sparse.push_back(c.is_moe_layer(l));
  }
  EXPECT_EQ(nope, (std::vector<bool>{false, false, false, true, false, false, false, true}));
  EXPECT_EQ(chunked, (std::vector<bool>{true, true, true, false, true, true, true, false}));
  EXPECT_EQ(sparse, std::vector<bool>(8, true));
  EXPECT_TRUE(c.qk_norm && c.qk_norm_weightless && c.qk_norm_after_rope && !c.qk_norm_whole);
  EXPECT_FLOAT_EQ(c.attn_temperature_floor, 8192.0f);
  EXPECT_FLOAT_EQ(c.attn_temperature_scale, 0.1f);
  EXPECT_EQ(c.n_experts, 16);
  EXPECT_EQ(c.n_experts_per_tok, 1);
  EXPECT_EQ(c.moe_intermediate_size, 32);
  EXPECT_EQ(c.shared_width(), 32);
  EXPECT_EQ(c.intermediate_size, 16384) << "intermediate_size_mlp's default: the dense layers' width";
  EXPECT_EQ(c.moe_scoring, MoeScoring::sigmoid);
  EXPECT_TRUE(c.moe_weight_on_input && c.experts_transposed && !c.norm_topk_prob && !c.tie_embeddings);

  // Maverick: every other layer sparse, no q/k norms; moe_layers overrides the step.
  auto maverick = parse({{"interleave_moe_layer_step", 2}, {"use_qk_norm", false}, {"intermediate_size_mlp", 96}});
  ASSERT_TRUE(maverick.has_value()) << maverick.status().to_string();
  EXPECT_TRUE(!maverick->is_moe_layer(0) && maverick->is_moe_layer(1) && !maverick->is_moe_layer(2));
  EXPECT_EQ(maverick->intermediate_size, 96);
  EXPECT_FALSE(maverick->qk_norm);
  auto listed = parse({{"moe_layers", {0, 5}}});
  ASSERT_TRUE(listed.has_value()) << listed.status().to_string();
  for (int l = 0; l < 8; ++l) EXPECT_EQ(listed->is_moe_layer(l), l == 0 || l == 5) << l;
  // Explicit layers: no_rope_layers (1 = RoPE), layer_types, no chunk, no temperature.
  auto explicit_layers = parse({{"no_rope_layers", {1, 0, 1, 1, 1, 1, 1, 0}},
                                {"layer_types", {"full_attention", "full_attention", "chunked_attention", "full_attention",
                                                 "full_attention", "full_attention", "full_attention", "full_attention"}},
                                {"attention_chunk_size", 16}, {"attn_temperature_tuning", false}});
  ASSERT_TRUE(explicit_layers.has_value()) << explicit_layers.status().to_string();
  EXPECT_TRUE(explicit_layers->nope_layers[1] && !explicit_layers->nope_layers[3]);
  for (int l = 0; l < 8; ++l) EXPECT_EQ(explicit_layers->layer_chunk(l), l == 2 ? 16 : 0) << l;
  EXPECT_EQ(explicit_layers->attn_temperature_floor, 0.0f);
  // The Hub's configs: attn_temperature_tuning a number (4), no_rope_layers an empty list.
  auto hub = parse({{"attn_temperature_tuning", 4}, {"no_rope_layers", nlohmann::json::array()}});
  ASSERT_TRUE(hub.has_value()) << hub.status().to_string();
  EXPECT_FLOAT_EQ(hub->attn_temperature_floor, 8192.0f);
  EXPECT_TRUE(hub->nope_layers[3] && !hub->nope_layers[2]);
  auto untuned = parse({{"attn_temperature_tuning", 0}});
  ASSERT_TRUE(untuned.has_value()) << untuned.status().to_string();
  EXPECT_EQ(untuned->attn_temperature_floor, 0.0f);
  auto no_chunk = parse({{"attention_chunk_size", nullptr}});
  ASSERT_TRUE(no_chunk.has_value()) << no_chunk.status().to_string();
  for (int l = 0; l < 8; ++l) EXPECT_EQ(no_chunk->layer_chunk(l), 0);
  // Refused by name: another activation, a short layer list, a moe layer past the end.
  for (const auto& [more, field] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"hidden_act", "gelu"}}, "hidden_act"},
           {{{"no_rope_layers", {1, 1}}}, "no_rope_layers"},
           {{{"moe_layers", {9}}}, "moe_layers"},
           {{{"layer_types", {"sliding_attention"}}}, "layer_types"}}) {
    const Status s = parse(more).status();
    EXPECT_FALSE(s.is_ok()) << field;
    EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
  }

  // Llama4ForConditionalGeneration: its text_config, the top level's ids and tie; another text
  // model refused by name, none corrupt.
  nlohmann::json wrapper = {{"architectures", {"Llama4ForConditionalGeneration"}}, {"eos_token_id", {2, 7}},
                            {"text_config", text}};
  auto l4 = parse_hf_config(wrapper.dump());
  ASSERT_TRUE(l4.has_value()) << l4.status().to_string();
  EXPECT_EQ(l4->arch, "llama4_text");
  EXPECT_TRUE(l4->multimodal_text && !l4->vision.present() && !l4->tie_embeddings);
  EXPECT_EQ(l4->eos_ids, (std::vector<int>{2, 7}));
  wrapper["text_config"]["model_type"] = "llama";
  EXPECT_EQ(parse_hf_config(wrapper.dump()).status().code(), StatusCode::unsupported);
  wrapper.erase("text_config");
  EXPECT_EQ(parse_hf_config(wrapper.dump()).status().code(), StatusCode::corrupt);
}

// IBM Granite 3 MoE: GraniteMoeConfig's expert defaults (8 of intermediate_size, top 2,
// renormalised: the softmax of the top k logits), Granite's multipliers, and the shared model's
// shared_intermediate_size (0 by default: none).
TEST(ModelConfig, ReadsGraniteMoe) {
  const nlohmann::json base = {{"hidden_size", 64},  {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                               {"num_key_value_heads", 2}, {"intermediate_size", 32}, {"vocab_size", 256},
                               {"embedding_multiplier", 12.0}, {"residual_multiplier", 0.22},
                               {"attention_multiplier", 0.0078125}, {"logits_scaling", 6.0}};
  auto parse = [&](const char* cls, const nlohmann::json& more) {
    nlohmann::json j = base;
    j["architectures"] = {cls};
    if (more.is_object()) j.update(more);
    return parse_hf_config(j.dump());
  };
  auto moe = parse("GraniteMoeForCausalLM", nullptr);
  ASSERT_TRUE(moe.has_value()) << moe.status().to_string();
  EXPECT_EQ(moe->arch, "granitemoe");
  EXPECT_EQ(moe->n_experts, 8);
  EXPECT_EQ(moe->n_experts_per_tok, 2);
  EXPECT_EQ(moe->moe_intermediate_size, 32);
  EXPECT_TRUE(moe->norm_topk_prob);
  EXPECT_EQ(moe->n_moe_layers(), 2);
  EXPECT_EQ(moe->shared_width(), 0);
  EXPECT_FLOAT_EQ(moe->embedding_multiplier, 12.0f);
  EXPECT_FLOAT_EQ(moe->residual_multiplier, 0.22f);
  EXPECT_FLOAT_EQ(moe->attn_scale, 0.0078125f);
  EXPECT_FLOAT_EQ(moe->logits_multiplier(), 1.0f / 6.0f);
  auto shared = parse("GraniteMoeSharedForCausalLM", {{"shared_intermediate_size", 1024}, {"num_local_experts", 40},
                                                      {"num_experts_per_tok", 8}});
  ASSERT_TRUE(shared.has_value()) << shared.status().to_string();
  EXPECT_EQ(shared->arch, "granitemoeshared");
  EXPECT_EQ(shared->n_experts, 40);
  EXPECT_EQ(shared->n_experts_per_tok, 8);
  EXPECT_EQ(shared->shared_width(), 1024);
  EXPECT_FALSE(shared->shared_gate);
  auto none = parse("GraniteMoeSharedForCausalLM", nullptr);
  ASSERT_TRUE(none.has_value()) << none.status().to_string();
  EXPECT_EQ(none->shared_width(), 0);
  const Status k = parse("GraniteMoeForCausalLM", {{"num_experts_per_tok", 9}}).status();
  EXPECT_EQ(k.code(), StatusCode::invalid_argument);
  EXPECT_NE(k.message().find("num_local_experts"), std::string::npos) << k.message();
  const Status neg = parse("GraniteMoeSharedForCausalLM", {{"shared_intermediate_size", -1}}).status();
  EXPECT_EQ(neg.code(), StatusCode::invalid_argument);
  const Status scale = parse("GraniteMoeForCausalLM", {{"logits_scaling", 0.0}}).status();
  EXPECT_EQ(scale.code(), StatusCode::invalid_argument);
}

// Tencent Hunyuan MoE (Hunyuan-A13B's config): per-layer lists of one value, the experts
// moe_intermediate_size wide where given, a shared MLP of intermediate_size, renormalised softmax
// top k, Hunyuan's NTK alpha; what it cannot run refused by name.
TEST(ModelConfig, ReadsHunyuanMoe) {
  const nlohmann::json base = {{"architectures", {"HunYuanMoEV1ForCausalLM"}},
                               {"hidden_size", 64},  {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                               {"num_key_value_heads", 2}, {"intermediate_size", 96}, {"vocab_size", 256},
                               {"head_dim", 16}, {"num_experts", 8}, {"moe_topk", {2, 2}},
                               {"moe_intermediate_size", {32, 32}}, {"num_shared_expert", {1, 1}},
                               {"use_mixed_mlp_moe", true}, {"use_qk_norm", true},
                               {"rope_scaling", {{"type", "dynamic"}, {"alpha", 1000.0}, {"factor", 1.0}}}};
  auto parse = [&](const nlohmann::json& more) {
    nlohmann::json j = base;
    if (more.is_object()) j.update(more);
    return parse_hf_config(j.dump());
  };
  auto a13b = parse(nullptr);
  ASSERT_TRUE(a13b.has_value()) << a13b.status().to_string();
  EXPECT_EQ(a13b->arch, "hunyuan_v1_moe");
  EXPECT_EQ(a13b->n_experts, 8);
  EXPECT_EQ(a13b->n_experts_per_tok, 2);
  EXPECT_EQ(a13b->moe_intermediate_size, 32);
  EXPECT_EQ(a13b->shared_width(), 96);
  EXPECT_FALSE(a13b->shared_gate);
  EXPECT_TRUE(a13b->norm_topk_prob);
  EXPECT_EQ(a13b->n_moe_layers(), 2);
  EXPECT_TRUE(a13b->qk_norm && a13b->qk_norm_after_rope);
  EXPECT_GT(a13b->rope_theta, 10000.0f) << "the NTK alpha stretches the base";
  auto plain = parse({{"moe_intermediate_size", nullptr}, {"moe_topk", 1}});
  ASSERT_TRUE(plain.has_value()) << plain.status().to_string();
  EXPECT_EQ(plain->moe_intermediate_size, 96) << "transformers 5's experts are intermediate_size wide";
  EXPECT_EQ(plain->n_experts_per_tok, 1);
  for (const auto& [more, code, word] :
       {std::tuple{nlohmann::json{{"moe_topk", {2, 4}}}, StatusCode::unsupported, "moe_topk"},
        std::tuple{nlohmann::json{{"moe_topk", "two"}}, StatusCode::invalid_argument, "moe_topk"},
        std::tuple{nlohmann::json{{"use_mixed_mlp_moe", false}}, StatusCode::unsupported, "use_mixed_mlp_moe"},
        std::tuple{nlohmann::json{{"num_shared_expert", 2}}, StatusCode::unsupported, "num_shared_expert"},
        std::tuple{nlohmann::json{{"use_cla", true}}, StatusCode::unsupported, "use_cla"},
        std::tuple{nlohmann::json{{"moe_topk", 9}}, StatusCode::invalid_argument, "num_experts"}}) {
    const Status s = parse(more).status();
    EXPECT_EQ(s.code(), code) << more.dump() << ": " << s.to_string();
    EXPECT_NE(s.message().find(word), std::string::npos) << s.message();
  }
}

// Cohere's Command R family: CohereConfig's defaults where the config leaves a field out (tied,
// logit_scale 0.0625, layer_norm_eps 1e-5), LayerNorms and parallel blocks, RoPE of adjacent
// pairs; Cohere2's head_dim from hidden / heads whatever the file says, its window on all but every
// 4th layer (or layer_types), those full layers without RoPE; Cohere2 MoE's defaults and layer
// rule; refusals by name.
TEST(ModelConfig, ReadsCohere) {
  const nlohmann::json base = {{"hidden_size", 64},  {"num_hidden_layers", 8}, {"num_attention_heads", 4},
                               {"num_key_value_heads", 2}, {"intermediate_size", 128}, {"vocab_size", 256}};
  auto parse = [&](const char* cls, const nlohmann::json& more) {
    nlohmann::json j = base;
    j["architectures"] = {cls};
    if (more.is_object()) j.update(more);
    return parse_hf_config(j.dump());
  };
  auto r = parse("CohereForCausalLM", nullptr);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->arch, "cohere");
  EXPECT_TRUE(r->layer_norms);
  EXPECT_TRUE(r->parallel_blocks);
  EXPECT_TRUE(r->tie_embeddings);
  EXPECT_FALSE(r->qk_norm);
  EXPECT_FLOAT_EQ(r->logit_scale, 0.0625f);
  EXPECT_FLOAT_EQ(r->logits_multiplier(), 0.0625f);
  EXPECT_FLOAT_EQ(r->rms_eps, 1e-5f);
  EXPECT_EQ(r->rope_style, RopeStyle::interleaved);
  EXPECT_EQ(r->sliding_window, 0);
  auto plus = parse("CohereForCausalLM", {{"use_qk_norm", true}, {"logit_scale", 0.8333333}, {"layer_norm_eps", 1e-6},
                                          {"attention_bias", true}, {"tie_word_embeddings", false}});
  ASSERT_TRUE(plus.has_value()) << plus.status().to_string();
  EXPECT_TRUE(plus->qk_norm);
  EXPECT_FALSE(plus->qk_norm_whole);
  EXPECT_TRUE(plus->qkv_bias && plus->o_bias);
  EXPECT_FALSE(plus->tie_embeddings);
  EXPECT_FLOAT_EQ(plus->logit_scale, 0.8333333f);
  EXPECT_FLOAT_EQ(plus->rms_eps, 1e-6f);
  auto unscaled = parse("CohereForCausalLM", {{"logit_scale", nullptr}});
  ASSERT_TRUE(unscaled.has_value()) << unscaled.status().to_string();
  EXPECT_FLOAT_EQ(unscaled->logits_multiplier(), 1.0f);

  auto r7b = parse("Cohere2ForCausalLM", {{"head_dim", 32}, {"sliding_window", 4096}});
  ASSERT_TRUE(r7b.has_value()) << r7b.status().to_string();
  EXPECT_EQ(r7b->arch, "cohere2");
  EXPECT_EQ(r7b->head_dim, 16);  // Cohere2Config sets hidden_size // num_attention_heads
  std::vector<bool> sliding, nope;
  for (int l = 0; l < 8; ++l) {
    sliding.push_back(r7b->layer_window(l) == 4096);
    nope.push_back(r7b->nope_layers[static_cast<size_t>(l)]);
  }
  EXPECT_EQ(sliding, (std::vector<bool>{true, true, true, false, true, true, true, false}));
  EXPECT_EQ(nope, (std::vector<bool>{false, false, false, true, false, false, false, true}));
  // Cohere2MoeConfig's defaults: head_dim 128, LayerNorms, 8 experts of intermediate_size, top 2
  // softmaxed, no shared expert (so nothing averaged: the routed weights unscaled), every layer sparse;
  // with first_k_dense_replace its dense prefix's pattern 1 makes those layers full, with RoPE.
  auto moe = parse("Cohere2MoeForCausalLM", {{"first_k_dense_replace", 2}, {"num_attention_heads", 4},
                                             {"num_key_value_heads", 4}, {"num_hidden_layers", 6}});
  ASSERT_TRUE(moe.has_value()) << moe.status().to_string();
  EXPECT_EQ(moe->arch, "cohere2_moe");
  EXPECT_EQ(moe->head_dim, 128);
  EXPECT_TRUE(moe->layer_norms && moe->parallel_blocks);
  EXPECT_EQ(moe->n_experts, 8);
  EXPECT_EQ(moe->n_experts_per_tok, 2);
  EXPECT_EQ(moe->first_k_dense_replace, 2);
  EXPECT_FLOAT_EQ(moe->routed_scaling_factor, 1.0f);
  std::vector<bool> moe_sliding;
  for (int l = 0; l < 6; ++l) moe_sliding.push_back(moe->layer_window(l) > 0);
  EXPECT_EQ(moe_sliding, (std::vector<bool>{false, false, true, true, true, false}));
  EXPECT_EQ(moe->nope_layers, (std::vector<bool>{false, false, false, false, false, true}));
  auto typed = parse("Cohere2ForCausalLM", {{"num_hidden_layers", 2}, {"layer_types", {"full_attention", "sliding_attention"}}});
  ASSERT_TRUE(typed.has_value()) << typed.status().to_string();
  EXPECT_EQ(typed->layer_window(0), 0);
  EXPECT_EQ(typed->layer_window(1), 4096);
  EXPECT_EQ(typed->nope_layers, (std::vector<bool>{true, false}));

  for (const auto& [cls, more, code, word] :
       {std::tuple{"Cohere2ForCausalLM", nlohmann::json{{"sliding_window", nullptr}}, StatusCode::unsupported, "sliding_window"},
        std::tuple{"Cohere2ForCausalLM", nlohmann::json{{"sliding_window", 0}}, StatusCode::invalid_argument, "sliding_window"},
        std::tuple{"CohereForCausalLM", nlohmann::json{{"hidden_act", "gelu"}}, StatusCode::unsupported, "hidden_act"},
        std::tuple{"CohereForCausalLM", nlohmann::json{{"logit_scale", -1.0}}, StatusCode::invalid_argument, "logit_scale"},
        std::tuple{"CohereForCausalLM", nlohmann::json{{"layer_norm_eps", 0.0}}, StatusCode::invalid_argument,
                   "layer_norm_eps"},
        std::tuple{"Cohere2MoeForCausalLM", nlohmann::json{{"expert_selection_fn", "relu"}}, StatusCode::unsupported,
                   "expert_selection_fn"},
        std::tuple{"Cohere2MoeForCausalLM", nlohmann::json{{"shared_expert_combination_strategy", "max"}},
                   StatusCode::unsupported, "shared_expert_combination_strategy"},
        std::tuple{"Cohere2MoeForCausalLM", nlohmann::json{{"sliding_window", nullptr}}, StatusCode::unsupported,
                   "sliding_window"},
        std::tuple{"Cohere2MoeForCausalLM", nlohmann::json{{"num_experts_per_tok", 9}}, StatusCode::invalid_argument,
                   "num_experts_per_tok"}}) {
    const Status s = parse(cls, more).status();
    EXPECT_EQ(s.code(), code) << more.dump() << ": " << s.to_string();
    EXPECT_NE(s.message().find(word), std::string::npos) << s.message();
  }
}

// rednote-hilab dots.llm1 (dots.llm1.inst's config.json at 4 layers): Qwen3's attention,
// DeepSeek-V3's routing (sigmoid, selection bias, groups by their two best, renormalised,
// scaled) beside n_shared_experts shared experts from first_k_dense_replace on; Dots1Config's
// windows (layer_types, else the layers from max_window_layers on); refusals by name.
TEST(ModelConfig, ReadsDots1) {
  const nlohmann::json base = {
      {"architectures", {"Dots1ForCausalLM"}}, {"model_type", "dots1"}, {"hidden_size", 64},
      {"num_hidden_layers", 4}, {"num_attention_heads", 4}, {"num_key_value_heads", 4}, {"intermediate_size", 96},
      {"vocab_size", 256}, {"first_k_dense_replace", 1}, {"moe_intermediate_size", 16}, {"moe_layer_freq", 1},
      {"n_routed_experts", 8}, {"n_shared_experts", 2}, {"num_experts_per_tok", 6}, {"norm_topk_prob", true},
      {"routed_scaling_factor", 2.5}, {"scoring_func", "sigmoid"}, {"topk_method", "noaux_tc"},
      {"sliding_window", nullptr}, {"use_sliding_window", false}, {"max_window_layers", 4},
      {"rms_norm_eps", 1e-5}, {"rope_theta", 10000000.0}};
  auto parse = [&](const nlohmann::json& more) {
    nlohmann::json j = base;
    if (more.is_object()) j.update(more);
    return parse_hf_config(j.dump());
  };
  auto inst = parse(nullptr);
  ASSERT_TRUE(inst.has_value()) << inst.status().to_string();
  EXPECT_EQ(inst->arch, "dots1");
  EXPECT_TRUE(inst->qk_norm);
  EXPECT_FALSE(inst->qk_norm_whole || inst->qk_norm_after_rope || inst->qkv_bias || inst->o_bias);
  EXPECT_EQ(inst->n_experts, 8);
  EXPECT_EQ(inst->n_experts_per_tok, 6);
  EXPECT_EQ(inst->moe_intermediate_size, 16);
  EXPECT_EQ(inst->n_shared_experts, 2);
  EXPECT_EQ(inst->shared_width(), 32);
  EXPECT_FALSE(inst->shared_gate);
  EXPECT_EQ(inst->first_k_dense_replace, 1);
  EXPECT_EQ(inst->n_moe_layers(), 3);
  EXPECT_EQ(inst->moe_scoring, MoeScoring::sigmoid);
  EXPECT_TRUE(inst->moe_score_bias);
  EXPECT_TRUE(inst->norm_topk_prob);
  EXPECT_FLOAT_EQ(inst->routed_scaling_factor, 2.5f);
  EXPECT_EQ(inst->moe_group_score, MoeGroupScore::none);
  EXPECT_EQ(inst->sliding_window, 0);
  EXPECT_FLOAT_EQ(inst->rope_theta, 1e7f);
  // Dots1Config's defaults: not renormalised, scale 1, every layer sparse.
  auto defaults = parse({{"norm_topk_prob", nullptr}, {"routed_scaling_factor", nullptr},
                         {"first_k_dense_replace", nullptr}, {"num_experts_per_tok", 2}});
  ASSERT_TRUE(defaults.has_value()) << defaults.status().to_string();
  EXPECT_FALSE(defaults->norm_topk_prob);
  EXPECT_FLOAT_EQ(defaults->routed_scaling_factor, 1.0f);
  EXPECT_EQ(defaults->n_moe_layers(), 4);
  auto grouped = parse({{"n_group", 2}, {"topk_group", 1}, {"num_experts_per_tok", 2}});
  ASSERT_TRUE(grouped.has_value()) << grouped.status().to_string();
  EXPECT_EQ(grouped->moe_group_score, MoeGroupScore::top2_sum);
  EXPECT_EQ(grouped->n_group, 2);
  EXPECT_EQ(grouped->topk_group, 1);
  // Windows: the layers from max_window_layers on (sliding_window's default 4096 when absent),
  // or as layer_types says.
  auto windowed = parse({{"sliding_window", 8}, {"max_window_layers", 2}});
  ASSERT_TRUE(windowed.has_value()) << windowed.status().to_string();
  std::vector<int> windows;
  for (int l = 0; l < 4; ++l) windows.push_back(windowed->layer_window(l));
  EXPECT_EQ(windows, (std::vector<int>{0, 0, 8, 8}));
  nlohmann::json no_window = base;
  no_window.erase("sliding_window");
  no_window["max_window_layers"] = 3;
  auto absent = parse_hf_config(no_window.dump());
  ASSERT_TRUE(absent.has_value()) << absent.status().to_string();
  EXPECT_EQ(absent->layer_window(2), 0);
  EXPECT_EQ(absent->layer_window(3), 4096);
  auto typed = parse({{"sliding_window", 16},
                      {"layer_types", {"sliding_attention", "full_attention", "sliding_attention", "full_attention"}}});
  ASSERT_TRUE(typed.has_value()) << typed.status().to_string();
  EXPECT_EQ(typed->layer_window(0), 16);
  EXPECT_EQ(typed->layer_window(1), 0);
  for (const auto& [more, code, word] :
       {std::tuple{nlohmann::json{{"scoring_func", "softmax"}}, StatusCode::unsupported, "scoring_func"},
        std::tuple{nlohmann::json{{"topk_method", "greedy"}}, StatusCode::unsupported, "topk_method"},
        std::tuple{nlohmann::json{{"moe_layer_freq", 2}}, StatusCode::unsupported, "moe_layer_freq"},
        std::tuple{nlohmann::json{{"hidden_act", "gelu"}}, StatusCode::unsupported, "hidden_act"},
        std::tuple{nlohmann::json{{"n_shared_experts", nullptr}}, StatusCode::invalid_argument, "n_shared_experts"},
        std::tuple{nlohmann::json{{"n_routed_experts", nullptr}}, StatusCode::invalid_argument, "n_routed_experts"},
        std::tuple{nlohmann::json{{"num_experts_per_tok", 9}}, StatusCode::invalid_argument, "num_experts_per_tok"},
        std::tuple{nlohmann::json{{"n_group", 3}}, StatusCode::invalid_argument, "n_group"},
        std::tuple{nlohmann::json{{"layer_types", {"full_attention", "chunked_attention", "full_attention",
                                                   "full_attention"}}},
                   StatusCode::unsupported, "layer_types"}}) {
    const Status s = parse(more).status();
    EXPECT_EQ(s.code(), code) << more.dump() << ": " << s.to_string();
    EXPECT_NE(s.message().find(word), std::string::npos) << s.message();
  }
}

// Ministral 3: Ministral3ForCausalLM alone or as Mistral3ForConditionalGeneration's text_config;
// the query temperature from the rope parameters' llama_4_scaling_beta over their
// original_max_position_embeddings, on every layer with no offset.
TEST(ModelConfig, ReadsMinistral3) {
  const nlohmann::json rope = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 16.0},
                               {"original_max_position_embeddings", 16384}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
                               {"mscale", 1.0}, {"mscale_all_dim", 1.0}, {"llama_4_scaling_beta", 0.1}};
  const nlohmann::json text = {{"model_type", "ministral3"}, {"hidden_size", 64}, {"num_hidden_layers", 2},
                               {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 32},
                               {"intermediate_size", 128}, {"vocab_size", 256}, {"max_position_embeddings", 262144},
                               {"rope_parameters", rope}};
  nlohmann::json alone = text;
  alone["architectures"] = {"Ministral3ForCausalLM"};
  const nlohmann::json wrapped = {{"architectures", {"Mistral3ForConditionalGeneration"}}, {"model_type", "mistral3"},
                                  {"text_config", text}, {"tie_word_embeddings", false}};
  for (const nlohmann::json& j : {alone, wrapped}) {
    auto r = parse_hf_config(j.dump());
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->arch, "ministral3");
    EXPECT_EQ(r->multimodal_text, j.contains("text_config"));
    EXPECT_EQ(r->head_dim, 32);
    EXPECT_EQ(r->rope_scaling.type, RopeScalingType::yarn);
    EXPECT_FLOAT_EQ(r->rope_scaling.factor, 16.0f);
    EXPECT_FLOAT_EQ(r->attn_temperature_floor, 16384.0f);
    EXPECT_FLOAT_EQ(r->attn_temperature_scale, 0.1f);
    EXPECT_FLOAT_EQ(r->attn_temperature_offset, 0.0f);
    EXPECT_TRUE(r->attn_temperature_all_layers);
    EXPECT_EQ(r->bos_id, 1);
    EXPECT_EQ(r->eos_ids, std::vector<int>{2});
    EXPECT_FALSE(r->tie_embeddings);
  }
  // Mistral3ForConditionalGeneration's text_config of Ministral3Config's defaults (the 8B's shape).
  nlohmann::json sparse = wrapped;
  sparse["text_config"] = {{"model_type", "ministral3"}, {"rope_parameters", rope}};
  auto d = parse_hf_config(sparse.dump());
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->hidden_size, 4096);
  EXPECT_EQ(d->n_layers, 34);
  EXPECT_EQ(d->vocab_size, 131072);
  // Without llama_4_scaling_beta (or 0): no temperature.
  nlohmann::json plain = alone;
  plain["rope_parameters"].erase("llama_4_scaling_beta");
  auto p = parse_hf_config(plain.dump());
  ASSERT_TRUE(p.has_value()) << p.status().to_string();
  EXPECT_EQ(p->attn_temperature_floor, 0.0f);
  auto refused = [](nlohmann::json j, StatusCode code, const char* word) {
    const Status s = parse_hf_config(j.dump()).status();
    EXPECT_EQ(s.code(), code) << j.dump() << ": " << s.to_string();
    EXPECT_NE(s.message().find(word), std::string::npos) << s.message();
  };
  nlohmann::json no_rope = alone;
  no_rope.erase("rope_parameters");
  refused(no_rope, StatusCode::unsupported, "rope_parameters");
  nlohmann::json no_unit = alone;
  no_unit["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}, {"llama_4_scaling_beta", 0.1}};
  refused(no_unit, StatusCode::invalid_argument, "original_max_position_embeddings");
  nlohmann::json other = wrapped;
  other["text_config"]["model_type"] = "qwen3";  // (mistral4 is Mistral Small 4's: mla_family_test.cpp)
  refused(other, StatusCode::unsupported, "qwen3");
}

// Phi-3.5-MoE-instruct's config.json as the Hub ships it (remote code's PhiMoEForCausalLM; its
// longrope lists cut to head_dim / 2 = 4 here): biased LayerNorms and lm_head, q/k/v/o biases,
// the window on every layer, the long factors (131072 > 4096) with long_mscale in place of
// longrope's attention factor, 16 experts of intermediate_size routed by sparsemixer with
// router_jitter_noise. Refused by name: top-k other than 2, another activation or rope type,
// longrope without its mscales.
TEST(ModelConfig, ReadsPhimoe) {
  const nlohmann::json rope = {{"type", "longrope"},        {"short_factor", {1.0, 1.1, 1.2, 1.3}},
                               {"long_factor", {1.0, 2.0, 4.0, 8.0}}, {"original_max_position_embeddings", 4096},
                               {"short_mscale", 1.1},       {"long_mscale", 1.243163121016122}};
  const nlohmann::json base = {
      {"architectures", {"PhiMoEForCausalLM"}}, {"model_type", "phimoe"}, {"attention_bias", true},
      {"bos_token_id", 1}, {"eos_token_id", 32000}, {"hidden_act", "silu"}, {"hidden_size", 256},
      {"input_jitter_noise", 0.01}, {"intermediate_size", 6400}, {"lm_head_bias", true},
      {"max_position_embeddings", 131072}, {"num_attention_heads", 32}, {"num_experts_per_tok", 2},
      {"num_hidden_layers", 4}, {"num_key_value_heads", 8}, {"num_local_experts", 16},
      {"original_max_position_embeddings", 4096}, {"rms_norm_eps", 1e-5}, {"rope_scaling", rope},
      {"rope_theta", 10000.0}, {"router_jitter_noise", 0.01}, {"sliding_window", 131072},
      {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"}, {"vocab_size", 32064}};
  auto parse = [&](const nlohmann::json& more) {
    nlohmann::json j = base;
    if (more.is_object()) j.update(more);
    return parse_hf_config(j.dump());
  };
  auto c = parse(nullptr);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "phimoe");
  EXPECT_TRUE(c->layer_norms && c->norm_bias && c->lm_head_bias && c->qkv_bias && c->o_bias);
  EXPECT_FALSE(c->parallel_blocks || c->fused_weights || c->qk_norm);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  EXPECT_EQ(c->sliding_window, 131072);
  EXPECT_TRUE(c->sliding_layers.empty());
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::longrope);
  EXPECT_TRUE(c->rope_scaling.longrope_long);
  EXPECT_FLOAT_EQ(c->rope_scaling.attention_factor, 1.243163121016122f);  // not sqrt(1 + ln 32 / ln 4096)
  EXPECT_EQ(c->n_experts, 16);
  EXPECT_EQ(c->n_experts_per_tok, 2);
  EXPECT_EQ(c->moe_intermediate_size, 6400);
  EXPECT_EQ(c->n_moe_layers(), 4);
  EXPECT_EQ(c->moe_scoring, MoeScoring::sparsemixer);
  EXPECT_FLOAT_EQ(c->moe_routing().jitter_eps, 0.01f);
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_EQ(c->eos_ids, std::vector<int>{32000});
  // transformers' class name; a context within the original one: the short factors and mscale.
  auto short_ctx = parse({{"architectures", {"PhimoeForCausalLM"}}, {"max_position_embeddings", 4096}});
  ASSERT_TRUE(short_ctx.has_value()) << short_ctx.status().to_string();
  EXPECT_FALSE(short_ctx->rope_scaling.longrope_long);
  EXPECT_FLOAT_EQ(short_ctx->rope_scaling.attention_factor, 1.1f);
  // PhimoeConfig's defaults: no window, no biases, jitter 0.01, theta 1e6, eps 1e-5, 16 experts.
  nlohmann::json sparse = {{"model_type", "phimoe"}, {"hidden_size", 64}, {"num_hidden_layers", 2},
                           {"num_attention_heads", 4}, {"intermediate_size", 32}, {"vocab_size", 128}};
  auto d = parse_hf_config(sparse.dump());
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->arch, "phimoe");
  EXPECT_EQ(d->sliding_window, 0);
  EXPECT_FALSE(d->qkv_bias || d->lm_head_bias);
  EXPECT_TRUE(d->norm_bias);
  EXPECT_FLOAT_EQ(d->router_jitter, 0.01f);
  EXPECT_FLOAT_EQ(d->rope_theta, 1000000.0f);
  EXPECT_FLOAT_EQ(d->rms_eps, 1e-5f);
  EXPECT_EQ(d->n_experts, 16);
  EXPECT_EQ(d->max_position, 131072);
  EXPECT_EQ(d->rope_scaling.type, RopeScalingType::none);
  auto refused = [&](const nlohmann::json& more, StatusCode code, const char* word) {
    const Status s = parse(more).status();
    EXPECT_EQ(s.code(), code) << more.dump() << ": " << s.to_string();
    EXPECT_NE(s.message().find(word), std::string::npos) << s.message();
  };
  refused({{"num_experts_per_tok", 1}}, StatusCode::unsupported, "num_experts_per_tok");
  refused({{"num_experts_per_tok", 4}}, StatusCode::unsupported, "sparsemixer");
  refused({{"hidden_act", "gelu"}}, StatusCode::unsupported, "hidden_act");
  refused({{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}}, StatusCode::unsupported, "linear");
  nlohmann::json no_mscale = rope;
  no_mscale.erase("long_mscale");
  refused({{"rope_scaling", no_mscale}}, StatusCode::invalid_argument, "long_mscale");
  refused({{"router_jitter_noise", -0.5}}, StatusCode::invalid_argument, "router_jitter_noise");
}

}  // namespace
}  // namespace brigade
