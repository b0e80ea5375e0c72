// BLOOM, MPT and OPT (models/gpt_decoders_config.h) against transformers: the bloom, mpt, mpt_clip
// and opt fixtures (scripts/make_fixtures.py) run in HfFixture (hf_fixture_test.cpp); here, their
// configs as parsed (ALiBi's slopes against transformers' formulas worked by hand), every cached
// decode step, each piece moving the logits far outside the tolerance, the Hub's layouts (BLOOM's
// and OPT's without the model prefix), OPT's offset position table and its limit, refusals by
// name (a backend without ALiBi included) and what `inspect` says.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "decoder_config_checks.h"
#include "hf_fixture.h"
#include "tests/memory_only_backend.h"
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

void expect_slopes(const ModelConfig& c, const std::vector<float>& want) {
  ASSERT_EQ(c.alibi_slopes.size(), want.size());
  for (size_t h = 0; h < want.size(); ++h) EXPECT_FLOAT_EQ(c.alibi_slopes[h], want[h]) << "head " << h;
}

// BLOOM's slopes (_get_alibi_slopes) for 6 heads: the largest power of two is 4, base 2^(-8/4) =
// 1/4 to the powers 1..4, then 2^(-8/8) = 1/2 to the odd powers 1, 3. MPT's (build_mpt_alibi_tensor)
// for 4 heads (alibi_bias_max 8): 1 / 2^(8 i / 4); for 6 heads, the 8 slopes 1 / 2^i reordered
// odd-indexed first, the first 6 of them.
TEST(BloomMptOpt, Configs) {
  auto b = parse_fixture("bloom");
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  EXPECT_EQ(b->arch, "bloom");
  EXPECT_EQ(b->n_heads, 6);
  EXPECT_EQ(b->n_kv_heads, 6);
  EXPECT_EQ(b->intermediate_size, 192) << "4 x hidden";
  EXPECT_TRUE(b->embed_norm && b->layer_norms && b->norm_bias && b->qkv_bias && b->o_bias && b->mlp_bias &&
              b->mlp_ungated && b->tie_embeddings);
  EXPECT_EQ(b->mlp_activation, MlpActivation::gelu_tanh) << "bloom_gelu";
  EXPECT_FALSE(b->learned_positions || b->parallel_blocks);
  expect_slopes(*b, {0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f});
  auto b8 = parse_fixture("bloom", [](nlohmann::json& j) { j["n_head"] = 8; });
  ASSERT_TRUE(b8.has_value()) << b8.status().to_string();
  expect_slopes(*b8, {0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f, 0.0078125f, 0.00390625f});
  // bigscience/bloom-560m's config.json: n_embed, no tie key, no ids.
  auto hub = parse_fixture("bloom", [](nlohmann::json& j) {
    j["n_embed"] = j["hidden_size"];
    for (const char* k : {"hidden_size", "tie_word_embeddings", "bos_token_id", "eos_token_id"}) j.erase(k);
    j["seq_length"] = 2048;
  });
  ASSERT_TRUE(hub.has_value()) << hub.status().to_string();
  EXPECT_EQ(hub->hidden_size, 48);
  EXPECT_TRUE(hub->tie_embeddings);
  EXPECT_EQ(hub->bos_id, 1);
  EXPECT_EQ(hub->eos_ids, std::vector<int>{2});
  EXPECT_EQ(hub->max_position, 2048) << "seq_length";

  auto m = parse_fixture("mpt");
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  EXPECT_EQ(m->arch, "mpt");
  EXPECT_EQ(m->hidden_size, 32);
  EXPECT_EQ(m->n_layers, 2);
  EXPECT_EQ(m->intermediate_size, 128);
  EXPECT_EQ(m->max_position, 256) << "max_seq_len";
  EXPECT_TRUE(m->layer_norms && m->tie_embeddings && m->mlp_ungated);
  EXPECT_FALSE(m->norm_bias || m->qkv_bias || m->o_bias || m->mlp_bias || m->embed_norm);
  EXPECT_EQ(m->mlp_activation, MlpActivation::gelu);
  EXPECT_EQ(m->clip_qkv, 0.0f);
  EXPECT_EQ(m->attn_scale, 0.0f) << "softmax_scale null: 1 / sqrt(head_dim)";
  expect_slopes(*m, {0.25f, 0.0625f, 0.015625f, 0.00390625f});
  auto mc = parse_fixture("mpt_clip");
  ASSERT_TRUE(mc.has_value()) << mc.status().to_string();
  EXPECT_EQ(mc->clip_qkv, 1.0f);
  EXPECT_EQ(mc->attn_scale, 0.25f);
  expect_slopes(*mc, {0.25f, 1.0f / 16, 1.0f / 64, 1.0f / 256, 0.5f, 0.125f});
  // mosaicml/mpt-7b's config.json: the remote code's class, attn_config without most keys.
  auto hub_mpt = parse_fixture("mpt", [](nlohmann::json& j) {
    j["architectures"] = {"MPTForCausalLM"};
    j["attn_config"] = {{"alibi", true}, {"attn_impl", "triton"}, {"clip_qkv", nullptr}, {"softmax_scale", nullptr}};
  });
  ASSERT_TRUE(hub_mpt.has_value()) << hub_mpt.status().to_string();
  EXPECT_EQ(hub_mpt->arch, "mpt");
  expect_slopes(*hub_mpt, {0.25f, 0.0625f, 0.015625f, 0.00390625f});

  auto o = parse_fixture("opt");
  ASSERT_TRUE(o.has_value()) << o.status().to_string();
  EXPECT_EQ(o->arch, "opt");
  EXPECT_EQ(o->intermediate_size, 64) << "ffn_dim";
  EXPECT_EQ(o->mlp_activation, MlpActivation::relu);
  EXPECT_TRUE(o->learned_positions && o->tie_embeddings && o->qkv_bias && o->o_bias && o->mlp_bias && o->norm_bias);
  EXPECT_TRUE(o->alibi_slopes.empty());
  EXPECT_EQ(o->max_position, 64);
  auto no_bias = parse_fixture("opt", [](nlohmann::json& j) { j["enable_bias"] = false; });
  ASSERT_TRUE(no_bias.has_value());
  EXPECT_FALSE(no_bias->qkv_bias || no_bias->o_bias || no_bias->mlp_bias);
}

// Every prompt's logits, greedy tokens and cached decode steps (pages of 4: ALiBi's distances and
// OPT's position rows at each new position) are transformers'.
TEST(BloomMptOpt, DecodeStepsMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  for (const char* name : {"bloom", "mpt", "mpt_clip", "opt"}) {
    SCOPED_TRACE(name);
    auto model = testing::load_or_fail(fixture_dir(name), *backend);
    ASSERT_NE(model, nullptr);
    testing::expect_fixture_cases_match(*model, *backend, name, kLogitTol);
  }
}

// Each piece moves the logits far outside the tolerance.
TEST(BloomMptOpt, PiecesMoveTheLogits) {
  const float far = 100 * kLogitTol;
  EXPECT_GT(max_diff_with_rules("bloom", [](ModelConfig& c) { c.alibi_slopes.assign(6, 0.0f); }), far) << "no ALiBi";
  EXPECT_GT(max_diff_with_rules("bloom", [](ModelConfig& c) { std::swap(c.alibi_slopes[0], c.alibi_slopes[4]); }), far)
      << "heads 0 and 4 with each other's slopes";
  EXPECT_GT(max_diff_with_rules("bloom", [](ModelConfig& c) { c.mlp_activation = MlpActivation::gelu; }), kLogitTol)
      << "the exact GELU for bloom_gelu";
  EXPECT_GT(max_diff_with_rules("mpt", [](ModelConfig& c) { c.alibi_slopes = {0.5f, 0.25f, 0.125f, 0.0625f}; }), far)
      << "BLOOM's slopes for 4 heads";
  EXPECT_GT(max_diff_with_rules("mpt_clip", [](ModelConfig& c) { c.clip_qkv = 0.0f; }), far) << "no clip_qkv";
  EXPECT_GT(max_diff_with_rules("mpt_clip", [](ModelConfig& c) { c.attn_scale = 0.0f; }), far) << "1/sqrt(8) for 0.25";
  EXPECT_GT(max_diff_with_rules("opt", [](ModelConfig& c) { c.mlp_activation = MlpActivation::gelu; }), far)
      << "gelu for relu";
}

// The fixture's stored tensors as the file has them, `rename` applied to each name.
void write_stored(const std::string& fixture, const testing::TempDir& dir, const std::function<std::string(std::string)>& rename) {
  std::vector<StEntry> entries = testing::stored_entries(fixture);
  ASSERT_FALSE(entries.empty());
  for (StEntry& e : entries) e.name = rename(e.name);
  testing::write_safetensors_file(dir.file("model.safetensors"), entries);
  std::filesystem::copy_file(fixture_dir(fixture) + "/config.json", dir.file("config.json"));
}

// bigscience/bloom-560m's model.safetensors is saved from BloomModel (word_embeddings, h.N.*, ln_f
// without transformer.), facebook/opt-125m's from OPTModel (decoder.*): both give transformers'
// logits.
TEST(BloomMptOpt, TheHubsLayoutsLoad) {
  for (const auto& [fixture, prefix] : {std::pair{"bloom", "transformer."}, {"opt", "model."}}) {
    SCOPED_TRACE(fixture);
    const testing::TempDir dir(std::string("hub_") + fixture);
    write_stored(fixture, dir, [p = std::string(prefix)](std::string n) { return n.starts_with(p) ? n.substr(p.size()) : n; });
    auto backend = make_cpu_backend({.n_threads = 1});
    auto model = testing::load_or_fail(dir.str(), *backend);
    ASSERT_NE(model, nullptr);
    const auto cases = testing::read_fixture_cases(fixture);
    EXPECT_LE(testing::run_fixture_case(*model, *backend, cases.back()).max_abs_diff, kLogitTol);
  }
}

// OPT's table holds max_position_embeddings + 2 rows: another size is refused naming the tensor,
// and a step at position 64 (row 66, past the table) by the step check.
TEST(BloomMptOpt, OptPositionTable) {
  const testing::TempDir dir("opt_positions");
  write_stored("opt", dir, [](std::string n) { return n; });
  auto config = nlohmann::json::parse(read_text_file(dir.file("config.json")).value());
  config["max_position_embeddings"] = 66;  // the table's rows, without the offset
  testing::write_text(dir.file("config.json"), config.dump());
  auto ck = Checkpoint::open(dir.str());
  ASSERT_FALSE(ck.has_value());
  EXPECT_EQ(ck.status().code(), StatusCode::corrupt);
  EXPECT_NE(ck.status().message().find("model.decoder.embed_positions.weight"), std::string::npos) << ck.status().message();
  EXPECT_NE(ck.status().message().find("max_position_embeddings + 2 rows"), std::string::npos) << ck.status().message();
  testing::expect_positions_end_at("opt", 64);
}

TEST(BloomMptOpt, UnsupportedConfigValuesAreRefusedByName) {
  refused("bloom", [](nlohmann::json& j) { j["apply_residual_connection_post_layernorm"] = true; },
          "apply_residual_connection_post_layernorm = true is not supported for bloom");
  refused("mpt", [](nlohmann::json& j) { j["attn_config"]["attn_type"] = "multiquery_attention"; },
          "attn_config.attn_type 'multiquery_attention' is not supported for mpt");
  refused("mpt", [](nlohmann::json& j) { j["attn_config"]["qk_ln"] = true; }, "attn_config.qk_ln = true is not supported");
  refused("mpt", [](nlohmann::json& j) { j["attn_config"]["prefix_lm"] = true; }, "attn_config.prefix_lm = true");
  refused("mpt", [](nlohmann::json& j) { j["attn_config"]["alibi"] = false; }, "attn_config.alibi = false is not supported");
  refused("mpt", [](nlohmann::json& j) { j["attn_config"]["alibi_bias_max"] = 16; },
          "attn_config.alibi_bias_max 16 is not supported for mpt (transformers' MptModel uses 8");
  refused("mpt", [](nlohmann::json& j) { j["attn_config"]["clip_qkv"] = -1.0; },
          "attn_config.clip_qkv must be a positive number or null");
  refused("mpt", [](nlohmann::json& j) { j["expansion_ratio"] = 2; }, "expansion_ratio 2 is not supported for mpt");
  refused("mpt", [](nlohmann::json& j) { j["no_bias"] = false; }, "no_bias = false is not supported for mpt");
  refused("mpt", [](nlohmann::json& j) { j["logit_scale"] = 0.5; }, "logit_scale 0.5 is not supported for mpt");
  refused("opt", [](nlohmann::json& j) { j["do_layer_norm_before"] = false; },
          "do_layer_norm_before = false is not supported for opt");
  refused("opt", [](nlohmann::json& j) { j["word_embed_proj_dim"] = 16; },
          "word_embed_proj_dim 16 (!= hidden_size 32: OPT-350m's project_in / project_out)");
  refused("opt", [](nlohmann::json& j) { j["layer_norm_elementwise_affine"] = false; },
          "layer_norm_elementwise_affine = false is not supported for opt");
  refused("opt", [](nlohmann::json& j) { j["activation_function"] = "silu"; },
          "activation 'silu' is not supported for opt; supported: gelu, gelu_new, gelu_fast, gelu_pytorch_tanh, relu");
  refused("gpt2", [](nlohmann::json& j) { j["activation_function"] = "relu"; }, "activation 'relu' is not supported for gpt2");
}

// A backend whose attention has no ALiBi refuses BLOOM and MPT by name rather than run them
// without their positions.
TEST(BloomMptOpt, ABackendWithoutAlibiRefusesThem) {
  class NoAlibi : public testing::MemoryOnlyBackend {  // supports_alibi false
   public:
    std::string name() const override { return "no-alibi"; }
  } backend;
  for (const char* name : {"bloom", "mpt"}) {
    auto m = Model::load(fixture_dir(name), backend, testing::test_load_options());
    ASSERT_FALSE(m.has_value()) << name;
    EXPECT_EQ(m.status().code(), StatusCode::unsupported) << name;
    EXPECT_NE(m.status().message().find("has no ALiBi attention"), std::string::npos) << m.status().message();
  }
}

// `inspect` names the pieces.
TEST(BloomMptOpt, InspectNamesThem) {
  expect_inspect_names({
      {"bloom", {"bloom", "positions:     ALiBi, slopes 0.25, 0.0625, 0.015625, 0.00390625, ...; no RoPE",
                 "a LayerNorm of the embeddings before layer 0", "ungated gelu_tanh MLP", "qkv bias, o bias"}},
      {"mpt", {"mpt", "positions:     ALiBi, slopes 0.25, 0.0625, 0.015625, 0.00390625; no RoPE", "LayerNorms without bias",
               "ungated gelu (erf) MLP"}},
      {"opt", {"opt", "positions:     learned absolute (model.embed_positions), 64, no RoPE", "ungated relu MLP",
               "MLP biases"}}});
}

}  // namespace
}  // namespace brigade
