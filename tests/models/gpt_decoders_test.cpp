// The classic GPT decoders against transformers (models/gpt_decoders_config.h): the gpt_neox,
// gpt_neox_sequential, gptj, codegen, gpt2, gpt_bigcode, gpt_bigcode_mha and falcon* fixtures
// (scripts/make_fixtures.py) run in HfFixture (hf_fixture_test.cpp); here, their configs as
// parsed (the Hub's names and transformers 5's, Falcon's RW remote-code names), their cached
// decode steps, each piece moving the logits far outside the tolerance when changed, the Hub's
// GPT-2 tensor layout (no transformer. prefix, the causal-mask buffers) and an RW config.json
// giving transformers' logits, the learned positions' limit, refusals by name, what `inspect` says
// and what a step costs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "decoder_config_checks.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/mapped_file.h"
#include "models/model_config.h"
#include "models/safetensors.h"

namespace brigade {
namespace {

using testing::expect_inspect_names;
using testing::fixture_dir;
using testing::kLogitTol;
using testing::max_diff_with_rules;
using testing::parse_fixture;
using testing::StEntry;

const auto refused = testing::expect_config_refused;  // (fixture, edit, what the refusal names)

TEST(GptDecoders, NeoxConfigs) {
  auto c = parse_fixture("gpt_neox");  // the Hub's names: rotary_pct, rotary_emb_base
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "gpt_neox");
  EXPECT_TRUE(c->layer_norms && c->norm_bias && c->qkv_bias && c->o_bias && c->mlp_bias && c->mlp_ungated);
  EXPECT_TRUE(c->parallel_blocks && c->parallel_mlp_norm) << "use_parallel_residual: two norms";
  EXPECT_EQ(c->mlp_activation, MlpActivation::gelu) << "Pythia's exact GELU";
  EXPECT_EQ(c->rope_style, RopeStyle::neox);
  EXPECT_EQ(c->rope_dims(), 4) << "rotary_pct 0.5 of 8";
  EXPECT_FALSE(c->tie_embeddings || c->learned_positions || c->lm_head_bias);
  // transformers 5 writes rope_parameters (partial_rotary_factor, rope_theta) instead.
  auto v5 = parse_fixture("gpt_neox", [](nlohmann::json& j) {
    j.erase("rotary_pct");
    j.erase("rotary_emb_base");
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500.0}, {"partial_rotary_factor", 0.25}};
  });
  ASSERT_TRUE(v5.has_value()) << v5.status().to_string();
  EXPECT_EQ(v5->rope_dims(), 2);
  EXPECT_EQ(v5->rope_theta, 500.0f);
  auto defaults = parse_fixture("gpt_neox", [](nlohmann::json& j) {
    for (const char* k : {"rotary_pct", "rotary_emb_base", "use_parallel_residual", "attention_bias", "hidden_act"}) j.erase(k);
  });
  ASSERT_TRUE(defaults.has_value()) << defaults.status().to_string();
  EXPECT_EQ(defaults->rope_dims(), 2) << "GPTNeoXConfig's rotary_pct 0.25";
  EXPECT_TRUE(defaults->parallel_mlp_norm && defaults->qkv_bias);
  EXPECT_EQ(defaults->mlp_activation, MlpActivation::gelu);
  auto s = parse_fixture("gpt_neox_sequential");
  ASSERT_TRUE(s.has_value()) << s.status().to_string();
  EXPECT_FALSE(s->parallel_blocks || s->parallel_mlp_norm || s->qkv_bias || s->o_bias);
  EXPECT_TRUE(s->mlp_bias) << "the MLP keeps its biases";
  EXPECT_EQ(s->rope_dims(), 2);
}

TEST(GptDecoders, GptjGpt2AndBigCodeConfigs) {
  auto j = parse_fixture("gptj");
  ASSERT_TRUE(j.has_value()) << j.status().to_string();
  EXPECT_EQ(j->arch, "gptj");
  EXPECT_EQ(j->hidden_size, 32);
  EXPECT_EQ(j->intermediate_size, 128) << "n_inner null: 4 x n_embd";
  EXPECT_EQ(j->max_position, 256);
  EXPECT_TRUE(j->parallel_blocks && j->lm_head_bias && j->mlp_bias);
  EXPECT_FALSE(j->parallel_mlp_norm || j->qkv_bias || j->o_bias || j->tie_embeddings);
  EXPECT_EQ(j->rope_style, RopeStyle::interleaved) << "rotate_every_two";
  EXPECT_EQ(j->rope_dims(), 4);
  EXPECT_EQ(j->mlp_activation, MlpActivation::gelu_tanh);

  auto g = parse_fixture("gpt2");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  EXPECT_EQ(g->arch, "gpt2");
  EXPECT_TRUE(g->learned_positions && g->tie_embeddings && g->qkv_bias && g->o_bias && g->norm_bias);
  EXPECT_FALSE(g->parallel_blocks);
  EXPECT_EQ(g->max_position, 64) << "n_positions";
  EXPECT_EQ(g->n_kv_heads, 4);
  auto hub = parse_fixture("gpt2", [](nlohmann::json& c) {  // the Hub's gpt2 config.json has no tie key
    c.erase("tie_word_embeddings");
    c.erase("n_positions");
  });
  ASSERT_TRUE(hub.has_value());
  EXPECT_TRUE(hub->tie_embeddings) << "GPT2Config ties by default";
  EXPECT_EQ(hub->max_position, 1024) << "GPT2Config's n_positions";

  auto b = parse_fixture("gpt_bigcode", [](nlohmann::json& c) { c.erase("num_key_value_heads"); });  // as the Hub's
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  EXPECT_EQ(b->n_kv_heads, 1) << "multi_query";
  EXPECT_EQ(b->intermediate_size, 64);
  EXPECT_TRUE(b->learned_positions && b->tie_embeddings);
  auto mha = parse_fixture("gpt_bigcode_mha");
  ASSERT_TRUE(mha.has_value()) << mha.status().to_string();
  EXPECT_EQ(mha->n_kv_heads, 4);
}

// CodeGen: GPT-J's layer (parallel, interleaved RoPE over rotary_dim, lm_head bias, untied by
// default) from config.json as Salesforce/codegen-350M-mono's has it (no tie key).
TEST(GptDecoders, CodegenConfig) {
  auto c = parse_fixture("codegen", [](nlohmann::json& j) { j.erase("tie_word_embeddings"); });
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "codegen");
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->n_kv_heads, 8);
  EXPECT_EQ(c->intermediate_size, 256) << "n_inner null: 4 x n_embd";
  EXPECT_TRUE(c->parallel_blocks && c->lm_head_bias && c->mlp_bias);
  EXPECT_FALSE(c->parallel_mlp_norm || c->qkv_bias || c->o_bias || c->tie_embeddings);
  EXPECT_EQ(c->rope_style, RopeStyle::interleaved);
  EXPECT_EQ(c->rope_dims(), 4);
  refused("codegen", [](nlohmann::json& j) { j["rotary_dim"] = nullptr; }, "rotary_dim null is not supported for codegen");
  refused("codegen", [](nlohmann::json& j) {
    j["n_embd"] = 42;
    j["n_head"] = 6;
  }, "codegen's hidden size (42) must be divisible by 4");
}

// qkv_proj's four blocks of q | v | k: reading them as q | k | v blocks, or the whole as q, k, v one
// after the other, moves the logits far (split at open, so each layout is a tensor rewrite here).
TEST(GptDecoders, CodegenQkvBlocksAreSplitAsTransformersDoes) {
  const float far = 100 * kLogitTol;
  for (const bool whole : {false, true}) {
    SCOPED_TRACE(whole ? "q, k, v one after the other" : "blocks of q | k | v");
    const testing::TempDir dir("codegen_qkv");
    std::vector<StEntry> entries = testing::stored_entries("codegen");
    ASSERT_FALSE(entries.empty());
    for (StEntry& e : entries) {
      if (e.name.find(".attn.qkv_proj.weight") == std::string::npos) continue;
      // Rows of 64 floats; a block is 3 x 16 rows [q | v | k]. Rewrite so that the reader's split
      // takes the wrong rows: swap each block's v and k (blocks of q | k | v), or put q, v, k whole.
      const size_t row = 64 * sizeof(float), local = 16;
      std::vector<uint8_t> out(e.bytes.size());
      for (size_t b = 0; b < 4; ++b)
        for (size_t part = 0; part < 3; ++part)
          for (size_t r = 0; r < local; ++r) {
            const size_t from = (b * 3 + part) * local + r;
            const size_t to = whole ? (part * 4 + b) * local + r : (b * 3 + (part == 0 ? 0 : 3 - part)) * local + r;
            std::memcpy(out.data() + to * row, e.bytes.data() + from * row, row);
          }
      e.bytes = std::move(out);
    }
    testing::write_safetensors_file(dir.file("model.safetensors"), entries);
    std::filesystem::copy_file(fixture_dir("codegen") + "/config.json", dir.file("config.json"));
    auto backend = make_cpu_backend({.n_threads = 1});
    auto model = testing::load_or_fail(dir.str(), *backend);
    ASSERT_NE(model, nullptr);
    EXPECT_GT(testing::run_fixture_case(*model, *backend, testing::read_fixture_cases("codegen").back()).max_abs_diff, far);
  }
}

// Falcon's layers as FalconConfig describes them: Falcon-7B's (multi_query, one norm), the new
// decoder's (Falcon-40B: num_kv_heads, ln_attn / ln_mlp; Falcon2-11B: one norm), the sequential
// one; the Hub's config.json without the keys transformers 5 writes takes FalconConfig's defaults.
TEST(GptDecoders, FalconConfigs) {
  auto f = parse_fixture("falcon");
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  EXPECT_EQ(f->arch, "falcon");
  EXPECT_EQ(f->n_kv_heads, 1) << "multi_query: one k and one v head (num_kv_heads 4 is not read)";
  EXPECT_TRUE(f->parallel_blocks && f->tie_embeddings && f->layer_norms && f->norm_bias && f->mlp_ungated);
  EXPECT_FALSE(f->parallel_mlp_norm || f->qkv_bias || f->o_bias || f->mlp_bias || f->learned_positions);
  EXPECT_EQ(f->intermediate_size, 128);
  EXPECT_EQ(f->mlp_activation, MlpActivation::gelu) << "nn.GELU, exact";
  EXPECT_EQ(f->rope_style, RopeStyle::neox);
  EXPECT_EQ(f->rope_dims(), 8) << "whole heads";
  // tiiuae/falcon-7b's config.json: none of ffn_hidden_size, num_kv_heads, the ids, the tie, RoPE keys.
  auto hub = parse_fixture("falcon", [](nlohmann::json& j) {
    for (const char* k : {"ffn_hidden_size", "num_kv_heads", "num_key_value_heads", "bos_token_id", "eos_token_id",
                          "tie_word_embeddings", "rope_parameters", "activation", "num_ln_in_parallel_attn",
                          "max_position_embeddings"})
      j.erase(k);
  });
  ASSERT_TRUE(hub.has_value()) << hub.status().to_string();
  EXPECT_EQ(hub->n_kv_heads, 1);
  EXPECT_EQ(hub->intermediate_size, 128) << "ffn_hidden_size null: 4 x hidden";
  EXPECT_EQ(hub->bos_id, 11);
  EXPECT_EQ(hub->eos_ids, std::vector<int>{11}) << "FalconConfig's ids";
  EXPECT_TRUE(hub->tie_embeddings);
  EXPECT_EQ(hub->rope_theta, 10000.0f);
  EXPECT_EQ(hub->max_position, 2048);
  EXPECT_EQ(hub->mlp_activation, MlpActivation::gelu);

  auto n = parse_fixture("falcon_new");
  ASSERT_TRUE(n.has_value()) << n.status().to_string();
  EXPECT_EQ(n->n_kv_heads, 2);
  EXPECT_TRUE(n->parallel_blocks && n->parallel_mlp_norm) << "ln_attn and ln_mlp";
  EXPECT_FALSE(n->tie_embeddings);
  EXPECT_EQ(n->intermediate_size, 64);
  EXPECT_EQ(n->rope_theta, 500.0f);
  // tiiuae/falcon-40b's config.json has no num_ln_in_parallel_attn (null: 2 with the new decoder) and
  // parallel_attn is not read with it.
  auto forty = parse_fixture("falcon_new", [](nlohmann::json& j) {
    j.erase("num_ln_in_parallel_attn");
    j.erase("num_key_value_heads");
    j["multi_query"] = true;  // ignored by the new decoder
  });
  ASSERT_TRUE(forty.has_value()) << forty.status().to_string();
  EXPECT_TRUE(forty->parallel_mlp_norm);
  EXPECT_EQ(forty->n_kv_heads, 2);
  auto one = parse_fixture("falcon_one_norm");
  ASSERT_TRUE(one.has_value()) << one.status().to_string();
  EXPECT_TRUE(one->parallel_blocks);
  EXPECT_FALSE(one->parallel_mlp_norm) << "num_ln_in_parallel_attn 1";
  EXPECT_EQ(one->rope_theta, 500042.0f);
  auto s = parse_fixture("falcon_sequential");
  ASSERT_TRUE(s.has_value()) << s.status().to_string();
  EXPECT_FALSE(s->parallel_blocks || s->parallel_mlp_norm);
  EXPECT_EQ(s->n_kv_heads, 4) << "no multi_query: a k and a v head per query head";
  EXPECT_TRUE(s->qkv_bias && s->o_bias && s->mlp_bias);
  EXPECT_EQ(s->mlp_activation, MlpActivation::gelu_tanh) << "gelu_new";
}

// GPT-Neo: attention_types expanded to the layers' kinds (local ones sliding over window_size),
// unscaled scores; EleutherAI/gpt-neo-125m's config.json (no tie key, intermediate_size null, 12
// layers of [global, local] x 6) read with GPTNeoConfig's defaults.
TEST(GptDecoders, GptNeoConfigs) {
  auto n = parse_fixture("gpt_neo");
  ASSERT_TRUE(n.has_value()) << n.status().to_string();
  EXPECT_EQ(n->arch, "gpt_neo");
  EXPECT_EQ(n->n_layers, 4);
  EXPECT_EQ(n->intermediate_size, 128) << "null: 4 x hidden";
  EXPECT_EQ(n->sliding_window, 8);
  EXPECT_EQ(n->sliding_layers, (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(n->attn_scale, 1.0f);
  EXPECT_TRUE(n->learned_positions && n->tie_embeddings && n->o_bias && n->mlp_bias);
  EXPECT_FALSE(n->qkv_bias);
  EXPECT_EQ(n->mlp_activation, MlpActivation::gelu_tanh);
  auto hub = parse_fixture("gpt_neo", [](nlohmann::json& j) {
    for (const char* k : {"tie_word_embeddings", "window_size", "max_position_embeddings", "attention_layers"}) j.erase(k);
    j["num_layers"] = 12;
    j["attention_types"] = nlohmann::json::parse(R"([[["global", "local"], 6]])");
  });
  ASSERT_TRUE(hub.has_value()) << hub.status().to_string();
  EXPECT_TRUE(hub->tie_embeddings);
  EXPECT_EQ(hub->sliding_window, 256) << "GPTNeoConfig's window_size";
  EXPECT_EQ(hub->max_position, 2048);
  ASSERT_EQ(hub->sliding_layers.size(), 12u);
  EXPECT_TRUE(hub->sliding_layers[11] && !hub->sliding_layers[10]);
}

// The RW remote code's config.json (RWForCausalLM; model_type RefinedWebModel for Falcon-7B's layer,
// RefinedWeb for the new decoder; n_embed, n_head, n_layer, n_head_kv): read as FalconConfig's, and
// over the falcon fixture's weights (the RW checkpoints' tensor names are FalconForCausalLM's) it
// gives transformers' logits.
TEST(GptDecoders, FalconRwConfigs) {
  const nlohmann::json seven = {{"architectures", {"RWForCausalLM"}}, {"model_type", "RefinedWebModel"},
                                {"n_embed", 32}, {"n_head", 4}, {"n_layer", 2}, {"vocab_size", 256},
                                {"multi_query", true}, {"parallel_attn", true}, {"bias", false},
                                {"alibi", false}, {"layer_norm_epsilon", 1e-5}, {"bos_token_id", 1},
                                {"eos_token_id", 2}, {"apply_residual_connection_post_layernorm", false}};
  const testing::TempDir dir("falcon_rw");
  std::filesystem::copy_file(fixture_dir("falcon") + "/model.safetensors", dir.file("model.safetensors"));
  testing::write_text(dir.file("config.json"), seven.dump());
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(dir.str(), *backend);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->config().arch, "falcon");
  EXPECT_EQ(model->config().n_kv_heads, 1);
  for (const auto& c : testing::read_fixture_cases("falcon"))
    EXPECT_LE(testing::run_fixture_case(*model, *backend, c).max_abs_diff, kLogitTol);

  nlohmann::json forty = seven;
  forty["model_type"] = "RefinedWeb";
  forty["n_head_kv"] = 2;
  auto c = parse_hf_config(forty.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->n_kv_heads, 2) << "n_head_kv: the new decoder's";
  EXPECT_TRUE(c->parallel_mlp_norm) << "RefinedWeb: the new decoder, ln_attn and ln_mlp";
}

// Every prompt's logits, greedy tokens and cached decode steps (pages of 4, so steps cross pages:
// GPT-2's position rows and GPT-J's rotation at each new position) are transformers'.
TEST(GptDecoders, DecodeStepsMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  for (const char* name : {"gpt_neox", "gpt_neox_sequential", "gptj", "gpt2", "gpt_bigcode", "gpt_bigcode_mha", "falcon",
                           "falcon_new", "falcon_one_norm", "falcon_sequential", "gpt_neo", "codegen"}) {
    SCOPED_TRACE(name);
    auto model = testing::load_or_fail(fixture_dir(name), *backend);
    ASSERT_NE(model, nullptr);
    testing::expect_fixture_cases_match(*model, *backend, name, kLogitTol);
  }
}

// Each piece the fixtures exercise moves their logits far outside the tolerance.
TEST(GptDecoders, PiecesMoveTheLogits) {
  const float far = 100 * kLogitTol;
  EXPECT_GT(max_diff_with_rules("gpt_neox", [](ModelConfig& c) { c.parallel_mlp_norm = false; }), far)
      << "the MLP on the attention's norm";
  EXPECT_GT(max_diff_with_rules("gpt_neox", [](ModelConfig& c) { c.rotary_dim = 0; }), far) << "whole heads rotated";
  EXPECT_GT(max_diff_with_rules("gpt_neox", [](ModelConfig& c) { c.mlp_activation = MlpActivation::gelu_tanh; }), kLogitTol)
      << "the tanh GELU for the exact one";
  EXPECT_GT(max_diff_with_rules("gpt_neox_sequential", [](ModelConfig& c) { c.parallel_blocks = c.parallel_mlp_norm = true; }),
            far)
      << "the parallel residual";
  EXPECT_GT(max_diff_with_rules("gptj", [](ModelConfig& c) { c.rope_style = RopeStyle::neox; }), far) << "NeoX pairs";
  EXPECT_GT(max_diff_with_rules("gptj", [](ModelConfig& c) { c.lm_head_bias = false; }), far) << "no lm_head bias";
  EXPECT_GT(max_diff_with_rules("gpt2", [](ModelConfig& c) { c.learned_positions = false; }), far) << "RoPE, no wpe";
  EXPECT_GT(max_diff_with_rules("gpt_bigcode", [](ModelConfig& c) { c.norm_bias = false; }), far) << "norms without bias";
  EXPECT_GT(max_diff_with_rules("falcon_new", [](ModelConfig& c) { c.parallel_mlp_norm = false; }), far)
      << "the MLP on ln_attn";
  EXPECT_GT(max_diff_with_rules("falcon_sequential", [](ModelConfig& c) { c.parallel_blocks = c.parallel_mlp_norm = true; }),
            far)
      << "Falcon's parallel layer for its sequential one";
  EXPECT_GT(max_diff_with_rules("falcon_one_norm", [](ModelConfig& c) { c.rope_theta = 10000.0f; }), far)
      << "theta 10000 for Falcon2's 500042";
  EXPECT_GT(max_diff_with_rules("falcon", [](ModelConfig& c) { c.rotary_dim = 4; }), far) << "half of each head rotated";
  EXPECT_GT(max_diff_with_rules("gpt_neo", [](ModelConfig& c) { c.attn_scale = 0.0f; }), far) << "scores / sqrt(head_dim)";
  EXPECT_GT(max_diff_with_rules("gpt_neo", [](ModelConfig& c) { c.sliding_layers.clear(); }), far) << "every layer local";
  EXPECT_GT(max_diff_with_rules("gpt_neo", [](ModelConfig& c) { c.sliding_window = 0; }), far) << "no local layers";
}

// openai-community/gpt2's model.safetensors, saved from GPT2Model: h.N.*, wte, wpe, ln_f without
// transformer., and each layer's causal-mask buffer attn.bias; it gives transformers' logits.
TEST(GptDecoders, TheHubsGpt2LayoutLoads) {
  const testing::TempDir dir("hub_gpt2");
  std::vector<StEntry> entries = testing::stored_entries("gpt2");
  ASSERT_FALSE(entries.empty());
  for (StEntry& e : entries) e.name = e.name.substr(std::string("transformer.").size());
  for (const char* mask : {"h.0.attn.bias", "h.1.attn.bias"})
    entries.push_back({mask, "F32", {1, 1, 4, 4}, std::vector<uint8_t>(16 * sizeof(float), 0)});
  testing::write_safetensors_file(dir.file("model.safetensors"), entries);
  std::filesystem::copy_file(fixture_dir("gpt2") + "/config.json", dir.file("config.json"));
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(dir.str(), *backend);
  ASSERT_NE(model, nullptr);
  const auto cases = testing::read_fixture_cases("gpt2");
  EXPECT_LE(testing::run_fixture_case(*model, *backend, cases.back()).max_abs_diff, kLogitTol);
}

// GPT-2's positions are a table of n_positions rows: a step at position 64 is refused by name.
TEST(GptDecoders, LearnedPositionsEndAtMaxPosition) { testing::expect_positions_end_at("gpt2", 64); }

TEST(GptDecoders, UnsupportedConfigValuesAreRefusedByName) {
  refused("gpt2", [](nlohmann::json& j) { j["scale_attn_by_inverse_layer_idx"] = true; },
          "scale_attn_by_inverse_layer_idx = true is not supported for gpt2");
  refused("gpt2", [](nlohmann::json& j) { j["scale_attn_weights"] = false; }, "scale_attn_weights = false");
  refused("gpt_bigcode", [](nlohmann::json& j) { j["add_cross_attention"] = true; }, "add_cross_attention = true");
  refused("gpt2", [](nlohmann::json& j) { j["activation_function"] = "relu"; },
          "activation 'relu' is not supported for gpt2; supported: gelu, gelu_new, gelu_fast, gelu_pytorch_tanh");
  refused("gpt_neox", [](nlohmann::json& j) { j["hidden_act"] = "silu"; }, "activation 'silu' is not supported for gpt_neox");
  refused("gptj", [](nlohmann::json& j) { j["rotary_dim"] = nullptr; }, "rotary_dim null is not supported for gptj");
  refused("gptj", [](nlohmann::json& j) { j["rotary_dim"] = 5; }, "rotary_dim must be even");
  refused("gpt_neox", [](nlohmann::json& j) { j["rotary_pct"] = 1.5; }, "rotary_pct must be in (0, 1]");
  refused("gpt_neox", [](nlohmann::json& j) { j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}}; },
          "quantization_config is not supported for gpt_neox");
  refused("falcon", [](nlohmann::json& j) { j["alibi"] = true; }, "alibi = true is not supported for falcon (ALiBi");
  refused("falcon_new", [](nlohmann::json& j) { j["parallel_attn"] = false; },
          "new_decoder_architecture = true with parallel_attn = false is not supported for falcon");
  refused("falcon", [](nlohmann::json& j) { j["num_ln_in_parallel_attn"] = 2; },
          "num_ln_in_parallel_attn = 2 is not supported for falcon without new_decoder_architecture");
  refused("falcon_new", [](nlohmann::json& j) { j["num_ln_in_parallel_attn"] = 3; },
          "num_ln_in_parallel_attn must be 1, 2 or null (got 3)");
  refused("falcon_sequential", [](nlohmann::json& j) { j["num_kv_heads"] = 2; },
          "num_kv_heads (2) must equal num_attention_heads for falcon without multi_query");
  refused("falcon_new", [](nlohmann::json& j) { j["num_kv_heads"] = 3; }, "must be a multiple of num_kv_heads (3)");
  refused("falcon", [](nlohmann::json& j) { j["activation"] = "relu"; }, "activation 'relu' is not supported for falcon");
  refused("gpt_neo", [](nlohmann::json& j) { j["attention_types"] = nlohmann::json::parse(R"([[["global", "local"], 3]])"); },
          "attention_types expands to 6 layers, but num_layers is 4");
  refused("gpt_neo", [](nlohmann::json& j) { j["attention_types"] = nlohmann::json::parse(R"([[["global", "sparse"], 2]])"); },
          "attention_types must be a list of");
  refused("gpt_neo", [](nlohmann::json& j) { j["window_size"] = 0; }, "window_size must be > 0");
}

// A fused q|k|v whose rows do not fit the heads is refused naming it: the MQA file under a config
// that says multi_query false.
TEST(GptDecoders, FusedQkvOfTheWrongShapeIsRefused) {
  const testing::TempDir dir("bigcode_mha");
  std::filesystem::copy_file(fixture_dir("gpt_bigcode") + "/model.safetensors", dir.file("model.safetensors"));
  auto config = nlohmann::json::parse(read_text_file(fixture_dir("gpt_bigcode") + "/config.json").value());
  config["multi_query"] = false;
  config.erase("num_key_value_heads");
  testing::write_text(dir.file("config.json"), config.dump());
  auto ck = Checkpoint::open(dir.str());
  ASSERT_FALSE(ck.has_value());
  EXPECT_EQ(ck.status().code(), StatusCode::corrupt);
  EXPECT_NE(ck.status().message().find("transformer.h.0.attn.c_attn"), std::string::npos) << ck.status().message();
  EXPECT_NE(ck.status().message().find("fused q|k|v"), std::string::npos) << ck.status().message();
}

// A step reads the position rows it looks up, not the whole table, and multiplies no table but
// the tied head.
TEST(GptDecoders, StepCostCountsThePositionRows) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(fixture_dir("gpt2"), *backend);
  ASSERT_NE(model, nullptr);
  const double h = 32, vocab = 256, positions = 64, f32 = 4;
  // One decode token at position 9 with its logits: 10 keys per head in each of the 2 layers.
  const StepBatch b = testing::make_step({{0, {5}, 9, false}}, 16, 4);
  const StepCost c = model->step_cost(b, 0.0);
  const double linear = static_cast<double>(model->n_params()) - (vocab + positions) * h;
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * linear + 2.0 * vocab * h + 4.0 * 4 * 8 * 2 * 10);
  // The weights less both tables, plus one row of each and the tied head.
  EXPECT_DOUBLE_EQ(c.bytes, static_cast<double>(model->weight_bytes()) - (vocab + positions) * h * f32 + 2 * h * f32 +
                                vocab * h * f32);
}

// `inspect` names the pieces.
TEST(GptDecoders, InspectNamesThem) {
  expect_inspect_names({
      {"gpt_neox", {"gpt_neox", "attention and MLP side by side, each on its own norm", "rotary dims 4 of 8",
                    "ungated gelu (erf) MLP", "LayerNorms with biases (eps 1e-05)", "qkv bias, o bias", "MLP biases"}},
      {"gptj", {"gptj", "interleaved", "rotary dims 4 of 8", "lm_head bias", "side by side on one norm"}},
      {"gpt2", {"gpt2", "positions:     learned absolute (model.embed_positions), 64, no RoPE", "tied embed:    yes",
                "ungated gelu_tanh MLP"}},
      {"gpt_bigcode", {"gpt_bigcode", "positions:     learned absolute"}},
      {"falcon", {"falcon", "4 q, 1 kv, head_dim 8", "attention and MLP side by side on one norm", "ungated gelu (erf) MLP"}},
      {"falcon_new", {"falcon", "4 q, 2 kv", "attention and MLP side by side, each on its own norm", "tied embed:    no"}},
      {"falcon_sequential", {"falcon", "qkv bias, o bias", "MLP biases", "ungated gelu_tanh MLP"}},
      {"gpt_neo", {"gpt_neo", "positions:     learned absolute", "o bias"}}});
}

}  // namespace
}  // namespace brigade
