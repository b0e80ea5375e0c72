// Kimi Linear (models/kimi_linear.h): Backend::kda against transformers' recurrent_kimi_delta_attention
// (kda_op.json, written by `python3 scripts/make_fixtures.py kimi_linear`), the config it reads
// and the configs it refuses. The model against transformers' logits: HfFixture (one prefill) and
// StateSpace/Kda (prefill then decode, chunked prefill, several sequences per step, snapshots).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "op_fixture_util.h"
#include "models/mapped_file.h"
#include "models/model_config.h"
#include "models/step_inputs.h"

namespace brigade {
namespace {

using json = nlohmann::json;

using testing::read_json_or_fail;
using testing::expect_outputs_and_state;
using testing::OneSequenceStep;
using testing::upload;

// transformers' rule from a zero state over kda_op.json's 7 rows (H 2, N 8, P 6), run as one
// sequence of 4 rows (fresh, in slot 1, a snapshot into slot 0 after its 2nd row) and a second step
// continuing it with the last 3: every output row and the final state (transformers' [H, N, P],
// the op's [H, P, N]) as transformers has them; the snapshot is the state a run of 2 rows leaves.
TEST(KimiKda, FollowsTransformersRecurrentRule) {
  const json ref = read_json_or_fail(testing::fixture_dir("kimi_linear") + "/kda_op.json");
  ASSERT_TRUE(ref.is_object());
  const int64_t H = ref["heads"], N = ref["key_dim"], P = ref["value_dim"], T = ref["rows"], slots = 3;
  const SsmLayout l{.n_heads = static_cast<int>(H), .head_dim = static_cast<int>(P), .n_groups = static_cast<int>(H),
                    .state_size = static_cast<int>(N), .conv_kernel = 4};
  const auto vec = [&](const char* key) { return ref[key].get<std::vector<float>>(); };
  const std::vector<float> q = vec("q"), k = vec("k"), v = vec("v"), f = vec("f"), beta = vec("beta");
  const std::vector<float> want_out = vec("out"), want_state = vec("state");
  std::vector<float> a = vec("a_log");
  for (float& x : a) x = -std::exp(x);
  // qkv rows as ssm_conv leaves them: q heads, k heads, v heads.
  std::vector<float> qkv;
  for (int64_t t = 0; t < T; ++t) {
    qkv.insert(qkv.end(), q.begin() + t * H * N, q.begin() + (t + 1) * H * N);
    qkv.insert(qkv.end(), k.begin() + t * H * N, k.begin() + (t + 1) * H * N);
    qkv.insert(qkv.end(), v.begin() + t * H * P, v.begin() + (t + 1) * H * P);
  }
  auto b = make_cpu_backend({.n_threads = 2});
  const int64_t ch = 2 * H * N + H * P;
  auto t_qkv = upload(*b, DType::f32, T, ch, qkv.data());
  auto t_f = upload(*b, DType::f32, T, H * N, f.data());
  auto t_beta = upload(*b, DType::f32, T, H, beta.data());
  auto t_a = upload(*b, DType::f32, 1, H, a.data());
  auto t_dt = upload(*b, DType::f32, 1, H * N, vec("dt_bias").data());
  const std::vector<float> junk(static_cast<size_t>(slots * H * P * N), 7.0f);  // a fresh sequence ignores it
  auto t_state = upload(*b, DType::f32, slots, H * P * N, junk.data());
  auto t_out = upload(*b, DType::f32, T, H * P, nullptr);
  const SsmParams p{t_a.tensor, Tensor(), t_dt.tensor, 0.0f, 0.0f, Tensor(), 1e-5f};
  const auto step = [&](int64_t from, int64_t to, int32_t fresh, int32_t save_after) {
    const OneSequenceStep one(*b, to - from, fresh, save_after);
    b->kda(t_qkv.tensor.rows(from, to - from), t_f.tensor.rows(from, to - from), t_beta.tensor.rows(from, to - from), l, p,
           one.seqs, t_state.tensor, t_out.tensor.rows(from, to - from));
  };

  step(0, 4, 1, 2);
  const std::vector<float> snapshot(t_state.tensor.as<float>(), t_state.tensor.as<float>() + H * P * N);
  step(4, T, 0, 0);
  expect_outputs_and_state(t_out.tensor.as<float>(), want_out, t_state.tensor.as<float>() + H * P * N, want_state, H, N,
                           P, 2e-6f);
  // The snapshot after row 2 is what a 2-row run leaves: rerun rows [0, 2) fresh into slot 1.
  step(0, 2, 1, 0);
  for (int64_t i = 0; i < H * P * N; ++i)
    ASSERT_EQ(snapshot[static_cast<size_t>(i)], t_state.tensor.as<float>()[H * P * N + i]) << "snapshot element " << i;
}

// The model's prefill and its cached decode steps against transformers (expected.json's logits and
// decode_logits), tighter than HfFixture's 2e-4: every step of the f32 recurrence (brigade's for
// prompts and decode alike) within 2e-5 of transformers' chunked prompt and recurrent decode.
TEST(KimiLinearModel, PrefillAndDecodeFollowTransformersClosely) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(testing::fixture_dir("kimi_linear"), *backend);
  ASSERT_NE(model, nullptr);
  std::string measured;
  for (const auto& fc : testing::read_fixture_cases("kimi_linear")) {
    const float prefill = testing::run_fixture_case(*model, *backend, fc).max_abs_diff;
    const float decode = testing::decode_max_diff(*model, *backend, fc);
    EXPECT_LE(prefill, 2e-5f) << fc.prompt.size() << " tokens";
    EXPECT_LE(decode, 2e-5f) << fc.prompt.size() << " tokens";
    char line[96];
    std::snprintf(line, sizeof(line), "%zu tokens: %.3g / decode %.3g; ", fc.prompt.size(), prefill, decode);
    measured += line;
  }
  RecordProperty("max_abs_diff", measured);
}

json fixture_config() { return read_json_or_fail(testing::fixture_dir("kimi_linear") + "/config.json"); }

TEST(KimiLinearConfig, ReadsTheFixturesFields) {
  auto c = parse_hf_config(fixture_config().dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "kimi_linear");
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, false, true}));
  EXPECT_TRUE(c->ssm.kda && c->nope && c->is_mla());
  EXPECT_EQ(c->ssm.layout.n_heads, 2);
  EXPECT_EQ(c->ssm.layout.n_groups, 2);
  EXPECT_EQ(c->ssm.layout.head_dim, 16);
  EXPECT_EQ(c->ssm.layout.state_size, 16);
  EXPECT_EQ(c->ssm.layout.conv_kernel, 4);
  EXPECT_EQ(c->n_attention_layers(), 1);
  EXPECT_EQ(c->n_experts, 8);
  EXPECT_EQ(c->n_experts_per_tok, 2);
  EXPECT_EQ(c->n_shared_experts, 1);
  EXPECT_EQ(c->n_group, 1);
  EXPECT_EQ(c->topk_group, 1);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_FLOAT_EQ(c->routed_scaling_factor, 2.5f);
  EXPECT_EQ(c->first_k_dense_replace, 1);
  EXPECT_EQ(c->max_position, 256);
  EXPECT_FLOAT_EQ(c->attn_scale, 1.0f / std::sqrt(24.0f));
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1) && c->is_moe_layer(2));
  // Without layer_types: linear_attn_config's 1-based lists (the Hub's config.json).
  json j = fixture_config();
  j.erase("layer_types");
  j["linear_attn_config"]["full_attn_layers"] = {1};
  j["linear_attn_config"]["kda_layers"] = {2, 3};
  c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{false, true, true}));
}

TEST(KimiLinearConfig, RefusesWhatItCannotRun) {
  const auto refused = [](const json& j, const std::string& names) {
    auto c = parse_hf_config(j.dump());
    ASSERT_FALSE(c.has_value()) << names;
    EXPECT_NE(c.status().message().find(names), std::string::npos) << c.status().to_string();
  };
  json j = fixture_config();
  j["mla_use_nope"] = false;
  refused(j, "mla_use_nope");
  j = fixture_config();
  j["moe_router_activation_func"] = "softmax";
  refused(j, "moe_router_activation_func 'softmax'");
  j = fixture_config();
  j["mlp_layer_types"] = {"dense", "sparse", "dense"};
  refused(j, "mlp_layer_types[2]");
  j = fixture_config();
  j["layer_types"][1] = "sliding_attention";
  refused(j, "layer_types[1]");
  j = fixture_config();
  j.erase("layer_types");
  j["linear_attn_config"]["kda_layers"] = {0, 3};
  refused(j, "1-based");
  j = fixture_config();
  j["hidden_act"] = "gelu";
  refused(j, "hidden_act 'gelu'");
}

}  // namespace
}  // namespace brigade
