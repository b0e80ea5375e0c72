// NomicBERT (NomicBertModel: nomic-ai/nomic-embed-text-v1 / v1.5; models/bert.h with arch
// nomic_bert) against transformers 5.25's NomicBertModel: the fixtures of
// scripts/make_encoder_fixtures.py nomic (tests/fixtures/encoder/nomic_embed with transformers'
// config, nomic_embed_remote with the Hub's remote-code config; the same weights under the Hub's
// names): every row of last_hidden_state for texts and pairs with token types, alone and in one
// step; another RoPE base moves them (RoPE is checked); the configs read and what is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "models/bert.h"
#include "models/model_config.h"
#include "tests/models/encoder_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

using json = nlohmann::json;
using testing::encoder_hidden_states;
using testing::typed;
using testing::TempDir;

std::string dir_of(const std::string& name) { return testing::fixture_dir("encoder/" + name); }
json read_json(const std::string& path) { return json::parse(read_text_file(path).value()); }

// The largest |difference| of got's rows from first on against want's rows.
double worst_difference(const std::vector<std::vector<float>>& got, size_t first, const json& want) {
  double worst = 0.0;
  if (got.size() < first + want.size()) return INFINITY;
  for (size_t r = 0; r < want.size(); ++r)
    for (size_t i = 0; i < want[r].size(); ++i)
      worst = std::max(worst, std::fabs(got[first + r][i] - want[r][i].get<double>()));
  return worst;
}

class NomicBert : public ::testing::TestWithParam<std::string> {};

// Each text alone, each pair with its token types, then every case in one step.
TEST_P(NomicBert, HiddenStatesMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions opts;
  opts.max_batch_tokens = 512;
  auto model = testing::load_or_fail(dir_of(GetParam()), *backend, opts);
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  EXPECT_TRUE(c.encoder);
  EXPECT_EQ(c.arch, "nomic_bert");
  EXPECT_EQ(c.max_position, 128);
  EXPECT_FLOAT_EQ(c.rope_theta, 1000.0f);
  const json want = read_json(dir_of("nomic_embed") + "/expected.json");
  std::vector<std::vector<int32_t>> all;
  std::vector<const json*> cases;
  double worst = 0.0;
  for (const char* kind : {"texts", "pairs"})
    for (const json& k : want[kind]) {
      const auto ids = typed(k);
      const double d = worst_difference(encoder_hidden_states(*model, *backend, {ids}), 0, k["hidden"]);
      EXPECT_LE(d, 2e-4) << k.value("text", k.value("text_1", ""));
      worst = std::max(worst, d);
      all.push_back(ids);
      cases.push_back(&k);
    }
  ASSERT_EQ(all.size(), 7u);
  const auto together = encoder_hidden_states(*model, *backend, all);
  size_t first = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_LE(worst_difference(together, first, (*cases[i])["hidden"]), 2e-4) << "in one step, case " << i;
    first += all[i].size();
  }
  std::printf("[ measured ] %s: largest |hidden difference| from transformers: %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NomicBert, ::testing::Values("nomic_embed", "nomic_embed_remote"));

// With another RoPE base (10000, BERT-like models' usual) the rows move far beyond the tolerance.
TEST(NomicBertMutation, AnotherRopeBaseMovesTheHiddenStates) {
  TempDir dir("nomic_theta");
  for (const char* f : {"model.safetensors", "tokenizer.json"})
    std::filesystem::copy_file(dir_of("nomic_embed_remote") + "/" + f, dir.file(f));
  json config = read_json(dir_of("nomic_embed_remote") + "/config.json");
  config["rotary_emb_base"] = 10000;
  std::ofstream(dir.file("config.json")) << config.dump();
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(dir.str(), *backend, LoadOptions{});
  ASSERT_TRUE(model);
  const json c = read_json(dir_of("nomic_embed") + "/expected.json")["texts"][0];
  EXPECT_GT(worst_difference(encoder_hidden_states(*model, *backend, {typed(c)}), 0, c["hidden"]), 1e-2);
}

TEST(NomicBertConfig, RefusesWhatItDoesNotRunByName) {
  const json remote = read_json(dir_of("nomic_embed_remote") + "/config.json");
  const json native = read_json(dir_of("nomic_embed") + "/config.json");
  auto refused = [](json c, const char* key, const json& value, const std::string& needle) {
    c[key] = value;
    auto parsed = parse_hf_config(c.dump());
    ASSERT_FALSE(parsed.has_value()) << key;
    EXPECT_NE(parsed.status().message().find(needle), std::string::npos) << parsed.status().to_string();
  };
  refused(remote, "rotary_scaling_factor", 2.0, "rotary_scaling_factor 2.0");
  refused(remote, "qkv_proj_bias", true, "qkv_proj_bias");
  refused(remote, "mlp_fc1_bias", true, "mlp_fc1_bias");
  refused(remote, "prenorm", true, "prenorm");
  refused(remote, "use_rms_norm", true, "use_rms_norm");
  refused(remote, "rotary_emb_interleaved", true, "rotary_emb_interleaved");
  refused(remote, "rotary_emb_fraction", 0.5, "rotary_emb_fraction 0.5");
  refused(remote, "rotary_emb_fraction", "half", "rotary_emb_fraction \"half\"");
  refused(remote, "rotary_scaling_factor", "x", "rotary_scaling_factor \"x\"");
  refused(remote, "activation_function", "gelu", "activation_function 'gelu'");
  refused(remote, "moe_every_n_layers", 2, "moe_every_n_layers 2");
  refused(native, "hidden_act", "gelu", "hidden_act 'gelu'");
  refused(native, "type_vocab_size", 3, "type_vocab_size 3");
  json yarn = native;
  yarn["rope_parameters"]["rope_type"] = "yarn";
  auto parsed = parse_hf_config(yarn.dump());
  ASSERT_FALSE(parsed.has_value());
  EXPECT_NE(parsed.status().message().find("rope_type 'yarn'"), std::string::npos) << parsed.status().message();
  // nomic-embed-text-v1.5's own config: 768 wide, 12 layers, the context it was trained at.
  json hub = remote;
  for (const char* k : {"n_embd", "n_head", "n_inner", "n_layer", "max_trained_positions"}) hub.erase(k);
  hub["n_embd"] = 768, hub["n_head"] = 12, hub["n_inner"] = 3072, hub["n_layer"] = 12, hub["n_positions"] = 8192;
  hub["max_trained_positions"] = 2048, hub["vocab_size"] = 30528;
  auto v15 = parse_hf_config(hub.dump());
  ASSERT_TRUE(v15.has_value()) << v15.status().to_string();
  EXPECT_EQ(v15->hidden_size, 768);
  EXPECT_EQ(v15->head_dim, 64);
  EXPECT_EQ(v15->intermediate_size, 3072);
  EXPECT_EQ(v15->max_position, 2048);
}

}  // namespace
}  // namespace brigade
