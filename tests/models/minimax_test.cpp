// MiniMax-Text-01 / M1 (models/minimax.h): Backend::lightning_attention against transformers'
// MiniMaxLightningAttention (lightning_op.json, written by `python3 scripts/make_fixtures.py
// minimax`), the config it reads and the configs it refuses. The model against transformers'
// logits: HfFixture (one prefill) and StateSpace/Lightning (prefill then decode, chunked prefill,
// several sequences per step, snapshots).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "op_fixture_util.h"
#include "models/mapped_file.h"
#include "models/minimax.h"
#include "models/model_config.h"
#include "models/step_inputs.h"

namespace brigade {
namespace {

using json = nlohmann::json;

using testing::read_json_or_fail;
using testing::expect_outputs_and_state;
using testing::OneSequenceStep;
using testing::upload;

// transformers' lightning attention over lightning_op.json's rows (H 3, D 8): its blocked prefill
// of 11 rows (blocks of 4), then 3 rows through its cache. The op runs them as a fresh step of 6
// rows in slot 1 (a snapshot into slot 0 after its 3rd row), then 5, then 3 one-row steps: every
// output and the final state (transformers' [H, D key, D value], the op's [H, value, key]) as
// transformers has them; the snapshot is the state a 3-row run leaves. The slopes are
// transformers' get_slope_rate.
TEST(MiniMaxLightning, FollowsTransformersAttention) {
  const json ref = read_json_or_fail(testing::fixture_dir("minimax") + "/lightning_op.json");
  ASSERT_TRUE(ref.is_object());
  const int64_t H = ref["heads"], D = ref["head_dim"], T = ref["rows"].get<int64_t>() + ref["decode_rows"].get<int64_t>();
  const int64_t slots = 3;
  const SsmLayout l{.n_heads = static_cast<int>(H), .head_dim = static_cast<int>(D), .n_groups = static_cast<int>(H),
                    .state_size = static_cast<int>(D), .conv_kernel = 1};
  const auto vec = [&](const char* key) { return ref[key].get<std::vector<float>>(); };
  const std::vector<float> qkv = vec("qkv"), want_out = vec("out"), want_state = vec("state"), slope = vec("slope");
  std::vector<float> decay;
  for (int64_t h = 0; h < H; ++h) {
    const float s = lightning_slope(static_cast<int>(H), static_cast<int>(h), ref["layer"], ref["layers"]);
    EXPECT_NEAR(s, slope[static_cast<size_t>(h)], 1e-7f * slope[static_cast<size_t>(h)]) << "head " << h;
    decay.push_back(std::exp(-s));
  }
  auto b = make_cpu_backend({.n_threads = 2});
  auto t_qkv = upload(*b, DType::f32, T, 3 * H * D, qkv.data());
  auto t_decay = upload(*b, DType::f32, 1, H, decay.data());
  const std::vector<float> junk(static_cast<size_t>(slots * H * D * D), 7.0f);  // a fresh sequence ignores it
  auto t_state = upload(*b, DType::f32, slots, H * D * D, junk.data());
  auto t_out = upload(*b, DType::f32, T, H * D, nullptr);
  const auto step = [&](int64_t from, int64_t to, int32_t fresh, int32_t save_after) {
    const OneSequenceStep one(*b, to - from, fresh, save_after);
    b->lightning_attention(t_qkv.tensor.rows(from, to - from), t_decay.tensor, l, one.seqs, t_state.tensor,
                           t_out.tensor.rows(from, to - from));
  };

  step(0, 6, 1, 3);
  const std::vector<float> snapshot(t_state.tensor.as<float>(), t_state.tensor.as<float>() + H * D * D);
  step(6, 11, 0, 0);
  for (int64_t r = 11; r < T; ++r) step(r, r + 1, 0, 0);
  expect_outputs_and_state(t_out.tensor.as<float>(), want_out, t_state.tensor.as<float>() + H * D * D, want_state, H, D,
                           D, 1e-5f);
  // The snapshot after row 3 is what a 3-row run leaves: rerun rows [0, 3) fresh into slot 1.
  step(0, 3, 1, 0);
  for (int64_t i = 0; i < H * D * D; ++i)
    ASSERT_EQ(snapshot[static_cast<size_t>(i)], t_state.tensor.as<float>()[H * D * D + i]) << "snapshot element " << i;
}

json fixture_config() { return read_json_or_fail(testing::fixture_dir("minimax") + "/config.json"); }

TEST(MiniMaxConfig, ReadsTheFixturesFields) {
  auto c = parse_hf_config(fixture_config().dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "minimax");
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, false, true, false}));
  EXPECT_TRUE(c->ssm.lightning);
  EXPECT_EQ(c->ssm.layout.n_heads, 4);
  EXPECT_EQ(c->ssm.layout.n_groups, 4);
  EXPECT_EQ(c->ssm.layout.head_dim, 8);
  EXPECT_EQ(c->ssm.layout.state_size, 8);
  EXPECT_EQ(c->ssm.layout.conv_kernel, 1);
  EXPECT_EQ(c->n_attention_layers(), 2);
  EXPECT_EQ(c->n_kv_heads, 2);
  EXPECT_EQ(c->n_experts, 4);
  EXPECT_EQ(c->n_experts_per_tok, 2);
  EXPECT_EQ(c->moe_intermediate_size, 32);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_FLOAT_EQ(c->attn_scale, 1.0f / std::sqrt(8.0f));
  EXPECT_EQ(c->block_alpha, (std::array<float, 3>{0.8f, 1.1f, 0.7f}));
  EXPECT_EQ(c->block_beta, (std::array<float, 3>{1.2f, 0.9f, 1.3f}));
  // recurrent state: per lightning layer H D D f32, no conv rows
  EXPECT_EQ(c->ssm.layout.d_inner() * c->ssm.layout.state_size, 4 * 8 * 8);
  // Without layer_types: MiniMaxConfig's default, full attention at even layers.
  json j = fixture_config();
  j.erase("layer_types");
  c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{false, true, false, true}));
}

TEST(MiniMaxConfig, RefusesWhatItCannotRun) {
  const auto refused = [](const json& j, const std::string& names) {
    auto c = parse_hf_config(j.dump());
    ASSERT_FALSE(c.has_value()) << names;
    EXPECT_NE(c.status().message().find(names), std::string::npos) << c.status().to_string();
  };
  json j = fixture_config();
  j["layer_types"][1] = "sliding_attention";
  refused(j, "layer_types[1]");
  j = fixture_config();
  j["hidden_act"] = "gelu";
  refused(j, "hidden_act 'gelu'");
  j = fixture_config();
  j["sliding_window"] = 16;
  refused(j, "sliding_window 16");
  j = fixture_config();
  j["rope_parameters"]["partial_rotary_factor"] = 0.5;
  refused(j, "partial_rotary_factor");
  j = fixture_config();
  j["rotary_dim"] = 4;
  refused(j, "rotary_dim 4");
  j = fixture_config();
  j["router_jitter_noise"] = 0.1;
  refused(j, "router_jitter_noise");
  j = fixture_config();
  j["layer_types"] = {"linear_attention"};
  refused(j, "layer_types must list one type per layer");
}

}  // namespace
}  // namespace brigade
