// The state-space models and hybrids (models/state_space.h) against transformers: the fixtures
// of scripts/make_fixtures.py (mamba2: 2 groups, a 4-tap conv with bias; mamba2_bias: projection
// biases, one group, tied embeddings, a 2-tap conv without bias; mamba1 and falcon_mamba: Mamba1
// mixers, Falcon-Mamba's normed dt/B/C, biases, a 3-tap conv; granite_hybrid: mixer, attention,
// mixer layers each with a shared SwiGLU and 4 experts, and Granite's scalings;
// granite_hybrid_dense: attention first, the shared MLP alone; nemotron_h(_bias): mixer, relu2
// MLP and attention blocks). transformers computes the prompt logits with its chunked scans
// (chunk_size 16, so the 40-token prompt crosses chunks) and the decode logits with its
// one-token updates; brigade runs one scan for both, through the state slots: whole prompts,
// prompts cut into chunks over several steps, several sequences per step in any slots, decode
// steps. Then the steps it refuses, and the configs it reads.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cpu/cpu_backend.h"
#include "models/checkpoint.h"
#include "models/state_space_config.h"
#include "models/model_config.h"
#include "models/state_space.h"
#include "hf_fixture.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::kLogitTol;
using testing::read_fixture_cases;

constexpr int kPageSize = 16, kPagesPerSeq = 4;

std::unique_ptr<Model> load(const std::string& name, Backend& backend, int slots) {
  LoadOptions o = testing::test_load_options();
  o.state_slots = slots;
  return testing::load_or_fail(fixture_dir(name), backend, o);
}

float max_diff(const float* got, const std::vector<float>& want) {
  float worst = 0.0f;
  for (size_t v = 0; v < want.size(); ++v) {
    const float d = std::fabs(got[v] - want[v]);
    worst = std::max(worst, std::isnan(d) ? INFINITY : d);
  }
  return worst;
}

Status forward(Model& m, Backend& backend, const KvCache& kv, StepBatch b) {
  const int64_t vocab = m.config().vocab_size, r = static_cast<int64_t>(b.logit_rows.size());
  auto buf = backend.allocate(static_cast<size_t>(r * vocab) * sizeof(float));
  EXPECT_TRUE(buf.has_value());
  return m.forward(b, kv, buf->view(DType::f32, {r, vocab}));
}

class StateSpace : public ::testing::TestWithParam<std::string> {};

// The whole prompt in one step, then the greedy continuation one decode step at a time; and the
// decode steps fed transformers' tokens against its cached decode logits.
TEST_P(StateSpace, LogitsAndDecodeMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(GetParam(), *backend, 1);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->state_slots(), 1);
  const auto cases = read_fixture_cases(GetParam());
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& fc : cases) {
    const testing::FixtureRun run = testing::run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kLogitTol) << "prompt of " << fc.prompt.size() << " tokens";
    EXPECT_EQ(run.greedy, fc.greedy) << "prompt of " << fc.prompt.size() << " tokens";
    if (fc.greedy.size() > 1) {
      EXPECT_LE(testing::decode_max_diff(*model, *backend, fc), kLogitTol) << "prompt of " << fc.prompt.size();
    }
  }
}

// The three prompts together, each cut into chunks of its own size (1, 3 and 7 tokens) so the
// steps mix a sequence's first chunk with others' later ones, each sequence in a slot of its own
// (not its index); then their greedy tokens fed together, one decode step each.
TEST_P(StateSpace, ChunksAndSeveralSequencesPerStepMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(GetParam(), *backend, 5);
  ASSERT_NE(model, nullptr);
  const auto cases = read_fixture_cases(GetParam());
  const int vocab = model->config().vocab_size;
  auto kv = KvCache::allocate(*backend, model->kv_layout(3 * kPagesPerSeq, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value()) << kv.status().to_string();
  EXPECT_EQ(kv->layout().page_bytes() == 0, model->config().n_attention_layers() == 0);  // attention's K/V only
  const int chunk[3] = {3, 1, 7};
  const int32_t slot_of[3] = {4, 0, 2};
  std::vector<int> done(3, 0);
  float worst = 0.0f;
  for (int step = 0; step < 64; ++step) {
    std::vector<testing::SeqChunk> chunks;
    std::vector<int> which;
    for (int c = 0; c < 3; ++c) {
      const auto& p = cases[static_cast<size_t>(c)].prompt;
      if (done[static_cast<size_t>(c)] >= static_cast<int>(p.size())) continue;
      const int from = done[static_cast<size_t>(c)];
      const int to = std::min<int>(from + chunk[c], static_cast<int>(p.size()));
      chunks.push_back({c, std::vector<int32_t>(p.begin() + from, p.begin() + to), from, true});
      which.push_back(c);
    }
    if (chunks.empty()) break;
    StepBatch b = testing::make_step(chunks, kPageSize, kPagesPerSeq);
    for (int c : which) b.state_slots.push_back(slot_of[c]);
    const std::vector<float> logits = testing::run_step(*model, *backend, *kv, b);
    size_t row = 0;
    for (size_t i = 0; i < which.size(); ++i) {
      const int c = which[i];
      for (size_t j = 0; j < chunks[i].tokens.size(); ++j, ++row) {
        const int pos = chunks[i].n_past + static_cast<int>(j);
        worst = std::max(worst, max_diff(logits.data() + row * static_cast<size_t>(vocab),
                                         cases[static_cast<size_t>(c)].logits[static_cast<size_t>(pos)]));
      }
      done[static_cast<size_t>(c)] += static_cast<int>(chunks[i].tokens.size());
    }
  }
  EXPECT_LE(worst, kLogitTol);
  // Decode: step i feeds every case's greedy[i] and must match transformers' decode logits.
  float decode_worst = 0.0f;
  for (size_t i = 0; i + 1 < cases[0].greedy.size(); ++i) {
    std::vector<testing::SeqChunk> chunks;
    for (int c = 0; c < 3; ++c) {
      const auto& fc = cases[static_cast<size_t>(c)];
      chunks.push_back({c, {fc.greedy[i]}, static_cast<int>(fc.prompt.size() + i), false});
    }
    StepBatch b = testing::make_step(chunks, kPageSize, kPagesPerSeq);
    b.state_slots = {slot_of[0], slot_of[1], slot_of[2]};
    const std::vector<float> logits = testing::run_step(*model, *backend, *kv, b);
    for (int c = 0; c < 3; ++c) {
      const auto& fc = cases[static_cast<size_t>(c)];
      const float* row = logits.data() + static_cast<size_t>(c) * static_cast<size_t>(vocab);
      decode_worst = std::max(decode_worst, max_diff(row, fc.decode_logits[i]));
      EXPECT_EQ(testing::argmax(row, vocab), fc.greedy[i + 1]) << "case " << c << " step " << i;
    }
  }
  EXPECT_LE(decode_worst, kLogitTol);
}

// Snapshots (StepBatch::state_save / state_from, the prefix cache's): a prompt step saves its
// state after a page's rows into a spare slot; new sequences start from it (their first page
// the first sequence's, for the hybrids' attention) and go on as transformers does. A snapshot
// taken mid-chunk and restored into the slot it is saved into in the same step (restores come
// first), and one taken by a decode step, serve too; wrong restores and saves are refused.
TEST_P(StateSpace, SnapshotsRestoreTheStateWhereTheyWereTaken) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(GetParam(), *backend, 4);
  ASSERT_NE(model, nullptr);
  const auto cases = read_fixture_cases(GetParam());
  const auto& fc = *std::max_element(cases.begin(), cases.end(),
                                     [](const auto& a, const auto& b) { return a.prompt.size() < b.prompt.size(); });
  const int n = static_cast<int>(fc.prompt.size()), vocab = model->config().vocab_size;
  ASSERT_GT(n, kPageSize + 8);
  ASSERT_GE(fc.greedy.size(), 3u);
  auto kv = KvCache::allocate(*backend, model->kv_layout(4 * kPagesPerSeq, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  // Sequence `seq`'s chunk [from, to) of the prompt; its first page is sequence 0's.
  auto chunk = [&](int seq, int from, int to) {
    StepBatch b = testing::make_step({{seq, std::vector<int32_t>(fc.prompt.begin() + from, fc.prompt.begin() + to), from, true}},
                                     kPageSize, kPagesPerSeq);
    b.block_table[0] = 0;
    return b;
  };
  auto expect_prompt = [&](const std::vector<float>& logits, int from, const char* what) {
    for (size_t r = 0; r * static_cast<size_t>(vocab) < logits.size(); ++r)
      EXPECT_LE(max_diff(logits.data() + r * static_cast<size_t>(vocab), fc.logits[from + r]), kLogitTol)
          << what << ", position " << from + static_cast<int>(r);
  };
  // Sequence 0: the whole prompt in slot 0, saving after its first page into slot 3.
  StepBatch a = chunk(0, 0, n);
  a.state_slots = {0};
  a.state_save = {3};
  a.state_save_rows = {kPageSize};
  expect_prompt(testing::run_step(*model, *backend, *kv, a), 0, "the saving step");
  // Sequence 1 from the snapshot: positions [16, n) in slot 1.
  StepBatch b = chunk(1, kPageSize, n);
  b.state_slots = {1};
  b.state_from = {3};
  expect_prompt(testing::run_step(*model, *backend, *kv, b), kPageSize, "restored at a page");
  // Sequence 2 from it again, 5 tokens, saving after 3 of them into slot 3 itself.
  StepBatch c = chunk(2, kPageSize, kPageSize + 5);
  c.state_slots = {2};
  c.state_from = {3};
  c.state_save = {3};
  c.state_save_rows = {3};
  expect_prompt(testing::run_step(*model, *backend, *kv, c), kPageSize, "restored and saved in one step");
  // Sequence 2's pages again (its rows 16..18 are there), from position 19 in slot 0.
  StepBatch d = chunk(2, kPageSize + 3, n);
  d.state_slots = {0};
  d.state_from = {3};
  expect_prompt(testing::run_step(*model, *backend, *kv, d), kPageSize + 3, "restored mid-page");
  // Sequence 1 decodes greedy[0] at position n, saving into slot 3; sequence 1's pages, in slot
  // 2, continue from that snapshot with greedy[1].
  StepBatch e = testing::make_step({{1, {fc.greedy[0]}, n, false}}, kPageSize, kPagesPerSeq);
  e.block_table[0] = 0;
  e.state_slots = {1};
  e.state_save = {3};
  e.state_save_rows = {1};
  EXPECT_LE(max_diff(testing::run_step(*model, *backend, *kv, e).data(), fc.decode_logits[0]), kLogitTol);
  StepBatch f = testing::make_step({{1, {fc.greedy[1]}, n + 1, false}}, kPageSize, kPagesPerSeq);
  f.block_table[0] = 0;
  f.state_slots = {2};
  f.state_from = {3};
  EXPECT_LE(max_diff(testing::run_step(*model, *backend, *kv, f).data(), fc.decode_logits[1]), kLogitTol);
  // Refused, nothing run: a snapshot that ends elsewhere, a restore at position 0, a save into
  // the sequence's own slot or outside the slots, after no row or past the sequence's rows.
  auto refused = [&](StepBatch x, const char* what) {
    EXPECT_EQ(forward(*model, *backend, *kv, std::move(x)).code(), StatusCode::invalid_argument) << what;
  };
  StepBatch g = chunk(1, kPageSize, n);
  g.state_slots = {1};
  g.state_from = {3};  // holds the state after n + 1 positions
  refused(g, "a snapshot of another position");
  g = chunk(1, 0, n);
  g.state_slots = {1};
  g.state_from = {3};
  refused(g, "a restore at position 0");
  for (const auto& [slot, rows] : std::vector<std::pair<int32_t, int32_t>>{{0, 4}, {3, 0}, {3, n + 1}, {4, 4}}) {
    StepBatch h = chunk(0, 0, n);
    h.state_slots = {0};
    h.state_save = {slot};
    h.state_save_rows = {rows};
    refused(h, "a save into a wrong slot or after a wrong row");
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, StateSpace, ::testing::Values("mamba2", "mamba2_bias"));
// Mamba1 mixers: a state per channel (MambaForCausalLM), and FalconMamba's normed dt, B and C.
INSTANTIATE_TEST_SUITE_P(Mamba1, StateSpace, ::testing::Values("mamba1", "falcon_mamba"));
// Granite 4.0-H: mixers and attention layers (their K/V in the pages), the MLP after each (Granite
// 4.0's attention-only granite4_rope keeps no state: HfFixture.* runs it).
// Nemotron-H: mixer, MLP and attention blocks (relu2 MLPs, attention without positions).
// Jamba: Mamba1 mixers with normed dt/B/C, attention, SwiGLU and MoE layers.
// Nemotron 3: mixer, MoE and attention blocks (relu2 experts, sigmoid routing in groups).
// Bamba: Granite 4.0-H's mixers under Jamba's names, attention with RoPE over half of each head.
INSTANTIATE_TEST_SUITE_P(Hybrids, StateSpace, ::testing::Values("granite_hybrid", "granite_hybrid_dense", "nemotron_h",
                                                            "nemotron_h_bias", "jamba", "nemotron_h_moe", "bamba"));
// Qwen3-Next: Gated DeltaNet layers, gated attention with RoPE, MoE with a gated shared expert and
// a dense layer; Qwen3.5's dense and MoE language models (the projections apart, tied embeddings).
// qwen3_5_mm: Qwen3.5 as the Hub ships it (Qwen3_5ForConditionalGeneration), its language model.
// qwen3_next_yarn: with YaRN's context extension (its attention's quarter-heads rotated by YaRN's frequencies).
INSTANTIATE_TEST_SUITE_P(GatedDelta, StateSpace,
                         ::testing::Values("qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_mm", "qwen3_next_yarn"));
// LFM2: short-conv blocks (C * conv(B * x), a 3-tap conv's state) and attention with q/k norms and
// RoPE, tied embeddings, an auto-adjusted SwiGLU; LFM2-MoE: a dense layer, then sigmoid-routed
// experts with expert_bias, scaled by 2; conv biases and a 4-tap conv.
INSTANTIATE_TEST_SUITE_P(ShortConv, StateSpace, ::testing::Values("lfm2", "lfm2_moe"));
// Falcon-H1: a Mamba2 mixer and RoPE attention in every layer, summed, every muP multiplier set
// apart from 1 (folded into the weights); falcon_h1_norm with the gated RMSNorm, biases, tied.
INSTANTIATE_TEST_SUITE_P(Parallel, StateSpace, ::testing::Values("falcon_h1", "falcon_h1_norm"));
// Kimi Linear: KDA blocks (the per-channel delta rule's state) beside MLA without RoPE (its latent in
// the pages), DeepSeek-V3's MoE (models/kimi_linear.h).
INSTANTIATE_TEST_SUITE_P(Kda, StateSpace, ::testing::Values("kimi_linear"));
// MiniMax-Text-01 / M1: lightning attention (a fixed decay per head, no conv) beside GQA softmax
// attention, Mixtral's experts, the residual scalings (models/minimax.h).
INSTANTIATE_TEST_SUITE_P(Lightning, StateSpace, ::testing::Values("minimax"));

// A step that would read a state for a past it does not hold is refused before anything runs,
// and the states stay as they were: the sequence then continues and still matches transformers.
TEST(StateSpaceSteps, RefusesStepsThatDoNotContinueTheirState) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load("mamba2", *backend, 2);
  ASSERT_NE(model, nullptr);
  const auto cases = read_fixture_cases("mamba2");
  const std::vector<int32_t>& p = cases[0].prompt;  // 7 tokens
  auto kv = KvCache::allocate(*backend, model->kv_layout(2 * kPagesPerSeq, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  auto step = [&](int n_past, int n, std::vector<int32_t> slots) {
    StepBatch b = testing::make_step({{0, std::vector<int32_t>(p.begin() + n_past, p.begin() + n_past + n), n_past, true}},
                                     kPageSize, kPagesPerSeq);
    b.state_slots = std::move(slots);
    return b;
  };
  Status st = forward(*model, *backend, *kv, step(2, 2, {0}));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("holds no state"), std::string::npos) << st.to_string();
  ASSERT_TRUE(forward(*model, *backend, *kv, step(0, 3, {1})).is_ok());  // positions 0..2 in slot 1
  for (const auto& [n_past, slots] : std::vector<std::pair<int, std::vector<int32_t>>>{
           {2, {1}},      // again from position 2: the state is past it
           {4, {1}},      // skips position 3
           {3, {2}},      // a slot outside [0, 2)
           {3, {-1}},
           {3, {1, 1}}})  // a slot per sequence, not two
    EXPECT_EQ(forward(*model, *backend, *kv, step(n_past, 2, slots)).code(), StatusCode::invalid_argument)
        << "n_past " << n_past << ", " << slots.size() << " slots, first " << slots[0];
  // Another sequence (its pages from 4 on) continuing in slot 1, which holds sequence 0's state.
  StepBatch other = testing::make_step({{1, {p[3]}, 3, false}}, kPageSize, kPagesPerSeq);
  other.state_slots = {1};
  const Status st_other = forward(*model, *backend, *kv, other);
  EXPECT_EQ(st_other.code(), StatusCode::invalid_argument);
  EXPECT_NE(st_other.message().find("another sequence's state"), std::string::npos) << st_other.to_string();
  // Two sequences in one slot.
  StepBatch two = testing::make_step({{0, {p[3]}, 3, false}, {1, {p[0]}, 0, false}}, kPageSize, kPagesPerSeq);
  two.state_slots = {1, 1};
  EXPECT_EQ(forward(*model, *backend, *kv, two).code(), StatusCode::invalid_argument);
  // Slot 1 still holds positions 0..2.
  const std::vector<float> logits = testing::run_step(*model, *backend, *kv, step(3, 4, {1}));
  const int vocab = model->config().vocab_size;
  for (int j = 0; j < 4; ++j)
    EXPECT_LE(max_diff(logits.data() + j * vocab, cases[0].logits[static_cast<size_t>(3 + j)]), kLogitTol) << j;
  // A sequence that starts again at position 0 in a used slot starts afresh.
  const std::vector<float> again = testing::run_step(*model, *backend, *kv, step(0, 7, {1}));
  for (int j = 0; j < 7; ++j)
    EXPECT_LE(max_diff(again.data() + j * vocab, cases[0].logits[static_cast<size_t>(j)]), kLogitTol) << j;
}

// weights: q8_0 quantizes in_proj and out_proj (the linear layers) at load, as for any decoder:
// the logits stay within q8_0's error of transformers' and the greedy tokens follow its.
TEST(StateSpaceSteps, Q8WeightsFollowTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  LoadOptions o = testing::test_load_options();
  o.weight_dtype = DType::q8_0;
  // The fixture under weights: q8_0 smaller than in f32 by `ratio`, its logits moved but within
  // `bound` of transformers', its greedy tokens following transformers'.
  const auto follows = [&](const std::string& fixture, double ratio, float bound) {
    SCOPED_TRACE(fixture);
    auto q8 = testing::load_or_fail(fixture_dir(fixture), *backend, o);
    auto f32 = testing::load_or_fail(fixture_dir(fixture), *backend, testing::test_load_options());
    ASSERT_TRUE(q8 && f32);
    EXPECT_LT(static_cast<double>(q8->weight_bytes()), static_cast<double>(f32->weight_bytes()) * ratio);
    for (const auto& fc : read_fixture_cases(fixture)) {
      const testing::FixtureRun run = testing::run_fixture_case(*q8, *backend, fc);
      RecordProperty(fixture + "_q8_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(run.max_abs_diff));
      EXPECT_GT(run.max_abs_diff, kLogitTol) << "quantized weights change the logits";
      EXPECT_LE(run.max_abs_diff, bound) << "prompt of " << fc.prompt.size();
      EXPECT_TRUE(testing::greedy_follows(run, fc, {fc.greedy}, 0.1)) << "prompt of " << fc.prompt.size();
    }
  };
  follows("mamba2", 0.6, 0.75f);  // measured 0.05, 0.09, 0.41
  // Qwen3-Next's input projection, taken apart from its interleaved rows, quantizes as one matrix.
  follows("qwen3_next", 0.6, 0.75f);
  // Nemotron 3's relu2 experts quantized (the router and the shared expert stay float).
  follows("nemotron_h_moe", 1.0, 0.75f);
  // LFM2-MoE: its short convs' projections, attention, dense MLP and experts quantized. Measured
  // 0.94, 0.94, 1.60; transformers' own run with its weights and the inputs of these matmuls
  // rounded to Q8_0 as brigade's are (experts included) moves 0.94 from its float logits at the
  // first position too (a choice of experts flips), so the bound is looser than the others'.
  follows("lfm2_moe", 0.6, 2.0f);
  // Falcon-H1: its scaled in_proj, out_proj, q|k|v, o and MLP quantized after the multipliers
  // (measured 0.036, 0.025, 0.056).
  follows("falcon_h1", 0.6, 0.75f);
}

std::string fixture_config() { return read_text_file(fixture_dir("mamba2") + "/config.json").value(); }

TEST(StateSpaceConfig, ReadsTheStateSpaceFields) {
  auto c = parse_hf_config(fixture_config());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "mamba2");
  EXPECT_TRUE(c->recurrent());
  EXPECT_EQ(c->n_attention_layers(), 0);
  EXPECT_EQ(c->ssm.layout.n_heads, 8);
  EXPECT_EQ(c->ssm.layout.head_dim, 16);
  EXPECT_EQ(c->ssm.layout.n_groups, 2);
  EXPECT_EQ(c->ssm.layout.state_size, 16);
  EXPECT_EQ(c->ssm.layout.conv_kernel, 4);
  EXPECT_EQ(c->ssm.layout.proj_width(), 128 + 128 + 2 * 2 * 16 + 8);
  EXPECT_TRUE(c->ssm.conv_bias);
  EXPECT_FALSE(c->ssm.proj_bias);
  EXPECT_EQ(c->ssm.dt_min, 0.0f);
  EXPECT_EQ(c->ssm.dt_max, 0.0f);  // transformers 5's {"__float__": "Infinity"}: unbounded
  EXPECT_EQ(c->max_position, 1 << 20);
  EXPECT_EQ(c->eos_ids, std::vector<int>{2});
}

// Older transformers write json.dumps's bare Infinity, which is not JSON.
TEST(StateSpaceConfig, ReadsPythonsInfinity) {
  auto j = nlohmann::json::parse(fixture_config());
  j["time_step_limit"] = {0.001, 0.5};
  std::string text = j.dump();
  auto bounded = parse_hf_config(text);
  ASSERT_TRUE(bounded.has_value()) << bounded.status().to_string();
  EXPECT_FLOAT_EQ(bounded->ssm.dt_min, 0.001f);
  EXPECT_FLOAT_EQ(bounded->ssm.dt_max, 0.5f);
  j["time_step_limit"] = {0.0, 1.0};
  text = j.dump();
  const std::string one = "[0.0,1.0]";
  ASSERT_NE(text.find(one), std::string::npos) << text;
  text.replace(text.find(one), one.size(), "[0.0, Infinity]");
  auto c = parse_hf_config(text);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->ssm.dt_max, 0.0f);
  EXPECT_EQ(quote_python_floats(R"({"a": "x Infinity \" NaN", "b": [NaN, -Infinity, 1]})"),
            R"({"a": "x Infinity \" NaN", "b": ["NaN", "-Infinity", 1]})");
}

// Bamba: Granite 4.0-H's mixers, attention at attn_layer_indices with RoPE over half of each head
// (whole heads, or none, would move the logits), its refusals by name.
TEST(StateSpaceConfig, ReadsBamba) {
  const auto j = nlohmann::json::parse(read_text_file(fixture_dir("bamba") + "/config.json").value());
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "bamba");
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(c->rope_dims(), 8) << "partial_rotary_factor 0.5 of heads of 16";
  EXPECT_FALSE(c->nope);
  EXPECT_EQ(c->intermediate_size, 96);
  EXPECT_EQ(c->ssm.layout.n_groups, 2);
  EXPECT_FLOAT_EQ(c->attn_scale, 0.25f);
  EXPECT_GT(testing::max_diff_with_rules("bamba", [](ModelConfig& m) { m.rotary_dim = 0; }), 100 * kLogitTol);
  EXPECT_GT(testing::max_diff_with_rules("bamba", [](ModelConfig& m) { m.nope = true; }), 100 * kLogitTol);
  for (const auto& [key, value] : {std::pair<const char*, nlohmann::json>{"attention_bias", true}, {"mlp_bias", true},
                                   {"attn_layer_indices", nlohmann::json::array({7})}}) {
    nlohmann::json bad = j;
    bad[key] = value;
    const Status st = parse_hf_config(bad.dump()).status();
    EXPECT_FALSE(st.is_ok()) << key;
    EXPECT_NE(st.message().find(key), std::string::npos) << st.message();
  }
}

TEST(StateSpaceConfig, ReadsGraniteHybrids) {
  const auto j = nlohmann::json::parse(read_text_file(fixture_dir("granite_hybrid") + "/config.json").value());
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "granitemoehybrid");
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(c->n_attention_layers(), 1);
  EXPECT_EQ(c->n_heads, 4);
  EXPECT_EQ(c->n_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->ssm.layout.n_heads, 8);
  EXPECT_EQ(c->ssm.layout.n_groups, 2);
  EXPECT_EQ(c->n_experts, 4);
  EXPECT_EQ(c->moe_intermediate_size, 32);
  EXPECT_EQ(c->shared_width(), 48);
  EXPECT_FLOAT_EQ(c->attn_scale, 0.2f);
  EXPECT_FLOAT_EQ(c->embedding_multiplier, 3.0f);
  EXPECT_FLOAT_EQ(c->residual_multiplier, 0.5f);
  EXPECT_FLOAT_EQ(c->logits_scaling, 2.0f);
  // The Hub's names for the layer types (transformers 5 writes linear_/full_attention).
  auto hub = j;
  hub["layer_types"] = {"attention", "mamba", "mamba"};
  auto h = parse_hf_config(hub.dump());
  ASSERT_TRUE(h.has_value()) << h.status().to_string();
  EXPECT_EQ(h->ssm_layers, (std::vector<bool>{false, true, true}));
  auto refused = [&](const char* key, nlohmann::json value) {
    auto bad = j;
    bad[key] = std::move(value);
    return parse_hf_config(bad.dump()).status();
  };
  EXPECT_EQ(refused("position_embedding_type", "alibi").code(), StatusCode::unsupported);
  // Granite 4.0's attention-only models: RoPE over whole heads, rope_parameters' theta; the
  // mamba_* defaults (which fit no width) matter only where a layer is a mixer.
  auto rope = j;
  rope["position_embedding_type"] = "rope";
  rope["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000000.0}};
  rope["layer_types"] = {"attention", "attention", "attention"};
  rope["mamba_n_heads"] = 7;
  auto r = parse_hf_config(rope.dump());
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_FALSE(r->nope);
  EXPECT_FALSE(r->recurrent());
  EXPECT_FLOAT_EQ(r->rope_theta, 1e7f);
  EXPECT_EQ(r->rope_style, RopeStyle::neox);
  rope["layer_types"] = {"attention", "mamba", "attention"};
  EXPECT_EQ(parse_hf_config(rope.dump()).status().code(), StatusCode::invalid_argument) << "7 heads fit no mixer";
  auto null_positions = j;
  null_positions["position_embedding_type"] = nullptr;
  auto n = parse_hf_config(null_positions.dump());
  ASSERT_TRUE(n.has_value()) << n.status().to_string();
  EXPECT_TRUE(n->nope);
  EXPECT_EQ(refused("attention_bias", true).code(), StatusCode::unsupported);
  EXPECT_EQ(refused("layer_types", {"mamba", "mlp", "mamba"}).code(), StatusCode::unsupported);
  EXPECT_EQ(refused("layer_types", {"mamba"}).code(), StatusCode::corrupt);
  EXPECT_EQ(refused("residual_multiplier", 0).code(), StatusCode::invalid_argument);
  EXPECT_EQ(refused("num_experts_per_tok", 5).code(), StatusCode::invalid_argument);
}

TEST(StateSpaceConfig, ReadsNemotronH) {
  const auto j = nlohmann::json::parse(read_text_file(fixture_dir("nemotron_h") + "/config.json").value());
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "nemotron_h");
  EXPECT_EQ(c->n_layers, 5);
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, false, false, false, true}));
  EXPECT_EQ(c->mlp_layers, (std::vector<bool>{false, true, false, true, false}));
  EXPECT_EQ(c->n_attention_layers(), 1);
  EXPECT_TRUE(c->nope);
  EXPECT_EQ(c->ssm.layout.d_inner(), 96);  // 6 heads of 16, not expand * hidden = 128
  EXPECT_EQ(c->intermediate_size, 96);
  EXPECT_FLOAT_EQ(c->attn_scale, 0.25f);  // head_dim^-0.5
  // The Hub's form: a pattern of letters, and older mamba_-prefixed names.
  auto hub = j;
  hub.erase("layers_block_type");
  hub["hybrid_override_pattern"] = "M*-";
  hub.erase("n_groups");
  hub["mamba_n_groups"] = 3;
  auto h = parse_hf_config(hub.dump());
  ASSERT_TRUE(h.has_value()) << h.status().to_string();
  EXPECT_EQ(h->ssm_layers, (std::vector<bool>{true, false, false}));
  EXPECT_EQ(h->mlp_layers, (std::vector<bool>{false, false, true}));
  EXPECT_EQ(h->ssm.layout.n_groups, 3);
  auto refused = [&](const char* key, nlohmann::json value) {
    auto bad = hub;
    bad[key] = std::move(value);
    return parse_hf_config(bad.dump()).status();
  };
  EXPECT_EQ(refused("hybrid_override_pattern", "M*x").code(), StatusCode::unsupported);
  EXPECT_EQ(refused("mlp_hidden_act", "silu").code(), StatusCode::unsupported);
  EXPECT_EQ(refused("sliding_window", 128).code(), StatusCode::unsupported);
  EXPECT_EQ(refused("num_nextn_predict_layers", 1).code(), StatusCode::unsupported);
  EXPECT_EQ(refused("mamba_num_heads", 5).code(), StatusCode::invalid_argument);  // not a multiple of 3 groups
}

// Nemotron 3's MoE blocks: relu2 experts routed as DeepSeek-V3's (sigmoid, a selection bias,
// groups scored by their top two), a relu2 shared expert; the other blocks dense.
TEST(StateSpaceConfig, ReadsNemotron3sMoeBlocks) {
  const auto j = nlohmann::json::parse(read_text_file(fixture_dir("nemotron_h_moe") + "/config.json").value());
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "nemotron_h");
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(c->mlp_layers, (std::vector<bool>{false, true, false, true})) << "MLP blocks: of experts";
  EXPECT_EQ(c->n_attention_layers(), 1);
  EXPECT_EQ(c->n_experts, 8);
  EXPECT_EQ(c->n_experts_per_tok, 2);
  EXPECT_EQ(c->moe_intermediate_size, 32);
  EXPECT_EQ(c->shared_width(), 48);
  EXPECT_EQ(c->n_moe_layers(), 2);
  EXPECT_TRUE(c->is_moe_layer(1) && c->is_moe_layer(3) && !c->is_moe_layer(2));
  EXPECT_TRUE(c->relu2_experts);
  const MoeRouting r = c->moe_routing();
  EXPECT_EQ(r.scoring, MoeScoring::sigmoid);
  EXPECT_EQ(r.group_score, MoeGroupScore::top2_sum);
  EXPECT_EQ(r.n_group, 2);
  EXPECT_EQ(r.topk_group, 1);
  EXPECT_TRUE(r.normalize);
  EXPECT_FLOAT_EQ(r.scale, 2.5f);
  auto refused = [&](const char* key, nlohmann::json value) {
    auto bad = j;
    bad[key] = std::move(value);
    return parse_hf_config(bad.dump()).status();
  };
  EXPECT_EQ(refused("moe_latent_size", 32).code(), StatusCode::unsupported);
  EXPECT_EQ(refused("num_experts_per_tok", 5).code(), StatusCode::invalid_argument);  // one group holds 4
  EXPECT_EQ(refused("n_group", 3).code(), StatusCode::invalid_argument);              // 8 experts in 3 groups
  EXPECT_EQ(refused("routed_scaling_factor", 0).code(), StatusCode::invalid_argument);
}

// The fixture's routing rules each move the logits (so LogitsAndDecodeMatchTransformers/nemotron_h_moe
// checks them): routing over all experts instead of one group's, and the experts' weights not
// scaled by routed_scaling_factor.
TEST(StateSpaceConfig, Nemotron3sRoutingRulesMoveTheLogits) {
  EXPECT_GT(testing::max_diff_with_config("nemotron_h_moe", [](nlohmann::json& j) { j["n_group"] = 1, j["topk_group"] = 1; }),
            1e-2f);
  EXPECT_GT(testing::max_diff_with_config("nemotron_h_moe", [](nlohmann::json& j) { j["routed_scaling_factor"] = 1.0; }),
            1e-2f);
}

// LFM2: conv and attention layers, the short conv's layout, the attention's q/k norms and RoPE,
// the MLP width as Lfm2MLP adjusts it; the Hub's older names; LFM2-MoE's routing.
TEST(StateSpaceConfig, ReadsLfm2) {
  const auto j = nlohmann::json::parse(read_text_file(fixture_dir("lfm2") + "/config.json").value());
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "lfm2");
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(c->n_attention_layers(), 1);
  EXPECT_TRUE(c->ssm.short_conv);
  EXPECT_EQ(c->ssm.layout.d_inner(), 64);
  EXPECT_EQ(c->ssm.layout.conv_kernel, 3);
  EXPECT_EQ(c->ssm.layout.state_size, 0);
  EXPECT_EQ(recurrent_state_bytes(*c), 3 * 2 * 64 * 4) << "3 conv layers of the last 2 products of 64 channels";
  EXPECT_FALSE(c->ssm.conv_bias);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
  EXPECT_EQ(c->intermediate_size, 128) << "int(2 * 150 / 3) = 100, rounded up to a multiple of 32";
  EXPECT_TRUE(c->tie_embeddings);
  EXPECT_EQ(c->n_experts, 0);
  // LFM2-1.2B's and LFM2-350M's config.json form: block_ff_dim, tie_embedding, rope_theta at the
  // top; their MLP widths (8192, 4608) as their checkpoints store them.
  auto hub = j;
  for (const char* key : {"intermediate_size", "tie_word_embeddings", "rope_parameters", "layer_types", "block_multiple_of"})
    hub.erase(key);
  hub["block_ff_dim"] = 12288;
  hub["hidden_size"] = 2048;
  hub["num_attention_heads"] = 32;
  hub["num_key_value_heads"] = 8;
  hub["tie_embedding"] = true;
  hub["rope_theta"] = 10000.0;
  hub["full_attn_idxs"] = {2};
  auto h = parse_hf_config(hub.dump());
  ASSERT_TRUE(h.has_value()) << h.status().to_string();
  EXPECT_EQ(h->intermediate_size, 8192);
  EXPECT_EQ(h->ssm_layers, (std::vector<bool>{true, true, false, true}));
  EXPECT_FLOAT_EQ(h->rope_theta, 1e4f);
  EXPECT_EQ(h->head_dim, 64);
  hub["block_ff_dim"] = 6656;
  hub["hidden_size"] = 1024;
  EXPECT_EQ(parse_hf_config(hub.dump())->intermediate_size, 4608);
  hub["block_ffn_dim_multiplier"] = nullptr;  // no multiplier: int(2 I / 3), not rounded
  EXPECT_EQ(parse_hf_config(hub.dump())->intermediate_size, 4437);
  hub["block_auto_adjust_ff_dim"] = false;
  EXPECT_EQ(parse_hf_config(hub.dump())->intermediate_size, 6656);
  hub["tie_embedding"] = false;
  hub["tie_word_embeddings"] = true;  // tie_embedding wins, as Lfm2Config pops it over the field
  EXPECT_FALSE(parse_hf_config(hub.dump())->tie_embeddings);
  hub.erase("full_attn_idxs");  // none listed: every layer attention (Lfm2Config)
  EXPECT_FALSE(parse_hf_config(hub.dump())->recurrent());
  // LFM2-MoE.
  const auto jm = nlohmann::json::parse(read_text_file(fixture_dir("lfm2_moe") + "/config.json").value());
  auto m = parse_hf_config(jm.dump());
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  EXPECT_EQ(m->arch, "lfm2_moe");
  EXPECT_EQ(m->intermediate_size, 96) << "the dense layers' width, not adjusted";
  EXPECT_EQ(m->n_experts, 8);
  EXPECT_EQ(m->moe_intermediate_size, 32);
  EXPECT_EQ(m->n_moe_layers(), 3);
  EXPECT_FALSE(m->is_moe_layer(0));
  EXPECT_TRUE(m->ssm.conv_bias && m->ssm.proj_bias);
  EXPECT_EQ(m->ssm.layout.conv_kernel, 4);
  EXPECT_FALSE(m->tie_embeddings);
  const MoeRouting r = m->moe_routing();
  EXPECT_EQ(r.scoring, MoeScoring::sigmoid);
  EXPECT_EQ(r.k, 2);
  EXPECT_TRUE(r.normalize);
  EXPECT_FLOAT_EQ(r.scale, 2.0f);
  EXPECT_TRUE(m->moe_score_bias);
  auto refused = [](nlohmann::json bad, const char* key, nlohmann::json value) {
    bad[key] = std::move(value);
    return parse_hf_config(bad.dump()).status().code();
  };
  EXPECT_EQ(refused(j, "layer_types", {"conv", "mamba", "full_attention", "conv"}), StatusCode::unsupported);
  EXPECT_EQ(refused(j, "layer_types", {"conv"}), StatusCode::corrupt);
  EXPECT_EQ(refused(j, "rope_parameters", {{"rope_type", "longrope"}, {"short_factor", {1.0}}, {"long_factor", {1.0}}}),
            StatusCode::unsupported);
  EXPECT_EQ(refused(j, "quantization_config", {{"quant_method", "fp8"}}), StatusCode::unsupported);
  EXPECT_EQ(refused(j, "conv_L_cache", 0), StatusCode::invalid_argument);
  EXPECT_EQ(refused(hub, "full_attn_idxs", {4}), StatusCode::invalid_argument);
  EXPECT_EQ(refused(jm, "num_experts_per_tok", 9), StatusCode::invalid_argument);
  EXPECT_EQ(refused(jm, "routed_scaling_factor", 0), StatusCode::invalid_argument);
}

// The fixture's pieces each move the logits (so LogitsAndDecodeMatchTransformers/lfm2* checks
// them): LFM2-MoE's selection bias and scale; the conv biases.
TEST(StateSpaceConfig, Lfm2sPiecesMoveTheLogits) {
  EXPECT_GT(testing::max_diff_with_config("lfm2_moe", [](nlohmann::json& j) { j["use_expert_bias"] = false; }), 1e-2f);
  EXPECT_GT(testing::max_diff_with_config("lfm2_moe", [](nlohmann::json& j) { j["routed_scaling_factor"] = 1.0; }), 1e-2f);
  EXPECT_GT(testing::max_diff_with_config("lfm2_moe", [](nlohmann::json& j) { j["conv_bias"] = false; }), 1e-2f);
}

// Falcon-H1: a mixer and attention in every layer, the muP multipliers, the mixer's width from
// mamba_d_ssm and head_dim apart from hidden / heads.
TEST(StateSpaceConfig, ReadsFalconH1) {
  const auto j = nlohmann::json::parse(read_text_file(fixture_dir("falcon_h1") + "/config.json").value());
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "falcon_h1");
  EXPECT_TRUE(c->parallel_attention);
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, true, true}));
  EXPECT_EQ(c->n_attention_layers(), 3) << "attention beside every mixer";
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_FLOAT_EQ(c->attn_scale, 1.0f / std::sqrt(32.0f));
  EXPECT_EQ(c->ssm.layout.d_inner(), 96);
  EXPECT_EQ(c->ssm.layout.head_dim, 16) << "mamba_d_head auto: mamba_d_ssm / mamba_n_heads";
  EXPECT_EQ(c->ssm.layout.n_groups, 2);
  EXPECT_FALSE(c->ssm.gated_norm);
  EXPECT_TRUE(c->ssm.conv_bias);
  EXPECT_FLOAT_EQ(c->rope_theta, 1e5f);
  EXPECT_FLOAT_EQ(c->embedding_multiplier, 1.5f);
  EXPECT_FLOAT_EQ(c->logits_scaling, 1.0f / 0.6f);
  EXPECT_FLOAT_EQ(c->mup.key, 0.8f);
  EXPECT_FLOAT_EQ(c->mup.ssm_rows[4], 1.3f);
  EXPECT_FLOAT_EQ(c->mup.mlp_down, 0.9f);
  auto normed = parse_hf_config(read_text_file(fixture_dir("falcon_h1_norm") + "/config.json").value());
  ASSERT_TRUE(normed.has_value()) << normed.status().to_string();
  EXPECT_TRUE(normed->ssm.gated_norm && normed->ssm.proj_bias);
  auto refused = [&](const char* key, nlohmann::json value) {
    auto bad = j;
    bad[key] = std::move(value);
    return parse_hf_config(bad.dump()).status().code();
  };
  EXPECT_EQ(refused("mamba_rms_norm", true), StatusCode::unsupported) << "the norm before the gate (the default)";
  EXPECT_EQ(refused("projectors_bias", true), StatusCode::unsupported) << "out_proj's bias without in_proj's";
  EXPECT_EQ(refused("attention_bias", true), StatusCode::unsupported);
  EXPECT_EQ(refused("ssm_multipliers", {1.0, 1.0}), StatusCode::corrupt);
  EXPECT_EQ(refused("key_multiplier", 0), StatusCode::invalid_argument);
  EXPECT_EQ(refused("mamba_d_head", 15), StatusCode::invalid_argument);
}

// Each muP multiplier the fixture sets moves the logits (so LogitsAndDecodeMatchTransformers/
// falcon_h1 checks where each is folded in).
TEST(StateSpaceConfig, FalconH1sMultipliersMoveTheLogits) {
  for (const char* key : {"key_multiplier", "attention_in_multiplier", "attention_out_multiplier", "ssm_in_multiplier",
                          "ssm_out_multiplier", "lm_head_multiplier", "embedding_multiplier"})
    EXPECT_GT(testing::max_diff_with_config("falcon_h1", [&](nlohmann::json& j) { j[key] = 1.0; }), 1e-2f) << key;
  for (int i = 0; i < 5; ++i)
    EXPECT_GT(testing::max_diff_with_config("falcon_h1", [&](nlohmann::json& j) { j["ssm_multipliers"][i] = 1.0; }), 1e-2f)
        << "ssm_multipliers[" << i << "]";
  for (int i = 0; i < 2; ++i)
    EXPECT_GT(testing::max_diff_with_config("falcon_h1", [&](nlohmann::json& j) { j["mlp_multipliers"][i] = 1.0; }), 1e-2f)
        << "mlp_multipliers[" << i << "]";
}

TEST(StateSpaceConfig, ReadsMamba1) {
  const auto j = nlohmann::json::parse(read_text_file(fixture_dir("falcon_mamba") + "/config.json").value());
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "falcon_mamba");
  EXPECT_TRUE(c->ssm.mamba1());
  EXPECT_EQ(c->ssm.dt_rank, 8);
  EXPECT_EQ(c->ssm.layout.d_inner(), 128);
  EXPECT_EQ(c->ssm.layout.state_size, 16);
  EXPECT_EQ(c->ssm.layout.conv_kernel, 3);
  EXPECT_FLOAT_EQ(c->ssm.bcdt_norm_eps, 1e-6f);
  EXPECT_TRUE(c->ssm.proj_bias);
  EXPECT_FALSE(c->ssm.conv_bias);
  EXPECT_FALSE(c->tie_embeddings);
  auto plain = nlohmann::json::parse(read_text_file(fixture_dir("mamba1") + "/config.json").value());
  plain["time_step_rank"] = "auto";
  plain.erase("tie_word_embeddings");
  auto m = parse_hf_config(plain.dump());
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  EXPECT_EQ(m->arch, "mamba");
  EXPECT_EQ(m->ssm.dt_rank, 4);  // ceil(64 / 16)
  EXPECT_EQ(m->ssm.bcdt_norm_eps, 0.0f);
  EXPECT_TRUE(m->tie_embeddings);  // MambaConfig's default
  plain["time_step_rank"] = "big";
  EXPECT_EQ(parse_hf_config(plain.dump()).status().code(), StatusCode::corrupt);
}

TEST(StateSpaceConfig, ReadsJamba) {
  const auto j = nlohmann::json::parse(read_text_file(fixture_dir("jamba") + "/config.json").value());
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "jamba");
  EXPECT_TRUE(c->ssm.mamba1());
  EXPECT_EQ(c->ssm.dt_rank, 4);
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, true, false, true}));  // attention at 2 of every 4
  EXPECT_EQ(c->n_attention_layers(), 1);
  EXPECT_EQ(c->n_experts, 4);
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1));
  EXPECT_FALSE(c->is_moe_layer(2));
  EXPECT_TRUE(c->is_moe_layer(3));
  EXPECT_FLOAT_EQ(c->ssm.bcdt_norm_eps, 1e-6f);
  auto bad = j;
  bad["attn_layer_offset"] = 4;
  EXPECT_EQ(parse_hf_config(bad.dump()).status().code(), StatusCode::invalid_argument);
  bad = j;
  bad["num_experts"] = 1;  // a dense MLP in every layer
  auto dense = parse_hf_config(bad.dump());
  ASSERT_TRUE(dense.has_value());
  EXPECT_EQ(dense->n_moe_layers(), 0);
}

// Qwen3-Next: the Gated DeltaNet layout, the layers, partial RoPE, the MoE with its gated shared
// expert; without layer_types every fourth layer is attention; refusals name the field.
TEST(StateSpaceConfig, ReadsQwen3Next) {
  const auto j = nlohmann::json::parse(read_text_file(fixture_dir("qwen3_next") + "/config.json").value());
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "qwen3_next");
  EXPECT_TRUE(c->ssm.gated_delta);
  EXPECT_EQ(c->ssm.layout.n_heads, 4);
  EXPECT_EQ(c->ssm.layout.head_dim, 8);
  EXPECT_EQ(c->ssm.layout.n_groups, 2);
  EXPECT_EQ(c->ssm.layout.state_size, 16);
  EXPECT_EQ(c->ssm.layout.conv_dim(), 2 * 2 * 16 + 4 * 8);
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ(c->rope_dims(), 8);  // a quarter of 32
  EXPECT_TRUE(c->qk_norm);
  EXPECT_TRUE(c->shared_gate);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_EQ(c->shared_expert_intermediate_size, 48);
  EXPECT_TRUE(c->is_moe_layer(0));
  EXPECT_FALSE(c->is_moe_layer(2));  // mlp_only_layers
  EXPECT_EQ(recurrent_state_bytes(*c), 3 * (3 * 96 + 4 * 8 * 16) * 4);
  auto every_fourth = j;
  every_fourth.erase("layer_types");
  every_fourth["num_hidden_layers"] = 8;
  auto e = parse_hf_config(every_fourth.dump());
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  EXPECT_EQ(e->ssm_layers, (std::vector<bool>{true, true, true, false, true, true, true, false}));
  auto refused = [&](const char* key, nlohmann::json value) {
    auto bad = j;
    bad[key] = std::move(value);
    return parse_hf_config(bad.dump()).status();
  };
  EXPECT_EQ(refused("linear_num_value_heads", 3).code(), StatusCode::invalid_argument);  // not a multiple of 2
  EXPECT_EQ(refused("linear_key_head_dim", 0).code(), StatusCode::invalid_argument);
  EXPECT_EQ(refused("layer_types", {"linear_attention", "sliding_attention", "full_attention", "full_attention"}).code(),
            StatusCode::unsupported);
  EXPECT_EQ(refused("layer_types", {"full_attention"}).code(), StatusCode::corrupt);
  EXPECT_EQ(refused("attention_bias", true).code(), StatusCode::unsupported);
  EXPECT_EQ(refused("hidden_act", "gelu").code(), StatusCode::unsupported);
  EXPECT_EQ(refused("shared_expert_intermediate_size", 0).code(), StatusCode::invalid_argument);
}

// A config.json of Qwen3-Next-80B-A3B's shape in the transformers 4.57 form (top-level rope_theta
// and partial_rotary_factor, full_attention_interval instead of layer_types, rope_scaling null,
// use_sliding_window false): 36 Gated DeltaNet layers, 64 of 256 dims rotated, 512 experts.
TEST(StateSpaceConfig, ReadsQwen3Next80BsShape) {
  const auto j = nlohmann::json::parse(R"({"architectures": ["Qwen3NextForCausalLM"], "attention_bias": false,
    "attention_dropout": 0.0, "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645,
    "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 5120, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "max_position_embeddings": 262144, "mlp_only_layers": [], "model_type": "qwen3_next", "moe_intermediate_size": 512,
    "norm_topk_prob": true, "num_attention_heads": 16, "num_experts": 512, "num_experts_per_tok": 10,
    "num_hidden_layers": 48, "num_key_value_heads": 2, "output_router_logits": false, "partial_rotary_factor": 0.25,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 10000000, "router_aux_loss_coef": 0.001,
    "shared_expert_intermediate_size": 512, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(std::count(c->ssm_layers.begin(), c->ssm_layers.end(), true), 36);
  EXPECT_FALSE(c->ssm_layers[3]);
  EXPECT_EQ(c->n_attention_layers(), 12);
  EXPECT_EQ(c->rope_dims(), 64);
  EXPECT_FLOAT_EQ(c->rope_theta, 1e7f);
  EXPECT_EQ(c->ssm.layout.conv_dim(), 2 * 16 * 128 + 32 * 128);
  EXPECT_EQ(c->n_moe_layers(), 48);
  EXPECT_EQ(c->n_experts_per_tok, 10);
  EXPECT_EQ(c->shared_expert_intermediate_size, 512);
  EXPECT_EQ(c->dtype, DType::bf16);
  // A sequence's state: per Gated DeltaNet layer 3 conv rows of 8192 and 32 heads of 128 x 128, f32.
  EXPECT_EQ(recurrent_state_bytes(*c), int64_t{36} * (3 * 8192 + 32 * 128 * 128) * 4);
}

// Qwen3.5 as the Hub ships it: text_config read as Qwen3_5(Moe)ForCausalLM, with its M-RoPE
// and vision tower (tests/models/qwen_vl_model_test.cpp runs it with images).
TEST(StateSpaceConfig, ReadsQwen35sLanguageModel) {
  const auto j = nlohmann::json::parse(read_text_file(fixture_dir("qwen3_5_mm") + "/config.json").value());
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "qwen3_5_text");
  EXPECT_TRUE(c->multimodal_text);
  EXPECT_TRUE(c->vision.present());
  EXPECT_EQ(c->vision.kind, VisionKind::qwen3_vl);
  EXPECT_EQ(c->vision.image_token, 250);
  EXPECT_EQ(c->mrope_section, (std::vector<int>{2, 1, 1}));
  EXPECT_TRUE(c->mrope_interleaved);
  EXPECT_EQ(c->n_experts, 0);
  auto moe = j;
  moe["architectures"] = {"Qwen3_5MoeForConditionalGeneration"};
  moe["text_config"]["num_experts"] = 4;
  moe["text_config"]["num_experts_per_tok"] = 2;
  moe["text_config"]["moe_intermediate_size"] = 32;
  moe["text_config"]["shared_expert_intermediate_size"] = 48;
  auto m = parse_hf_config(moe.dump());
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  EXPECT_EQ(m->arch, "qwen3_5_moe_text");
  EXPECT_EQ(m->n_moe_layers(), 4);
  EXPECT_TRUE(m->norm_topk_prob);
  auto none = j;
  none.erase("text_config");
  EXPECT_EQ(parse_hf_config(none.dump()).status().code(), StatusCode::corrupt);
  auto odd = j;  // a model_type that is not a string is refused, not thrown
  odd["text_config"]["model_type"] = 7;
  EXPECT_TRUE(parse_hf_config(odd.dump()).has_value());  // architectures decide; the text's type is rewritten
  odd.erase("architectures");
  odd["model_type"] = {1, 2};
  EXPECT_FALSE(parse_hf_config(odd.dump()).has_value());
}

TEST(StateSpaceConfig, RefusesWhatItCannotRun) {
  const auto base = nlohmann::json::parse(fixture_config());
  auto refused = [&](const char* key, nlohmann::json value) {
    auto j = base;
    j[key] = std::move(value);
    return parse_hf_config(j.dump()).status();
  };
  EXPECT_EQ(refused("expand", 3).code(), StatusCode::invalid_argument);  // 3 * 64 != 8 * 16
  EXPECT_EQ(refused("n_groups", 3).code(), StatusCode::invalid_argument);
  EXPECT_EQ(refused("hidden_act", "gelu").code(), StatusCode::unsupported);
  EXPECT_EQ(refused("quantization_config", {{"quant_method", "fp8"}}).code(), StatusCode::unsupported);
  EXPECT_EQ(refused("time_step_limit", {0.5, 0.1}).code(), StatusCode::invalid_argument);
  EXPECT_EQ(refused("state_size", 0).code(), StatusCode::invalid_argument);
  EXPECT_EQ(refused("eos_token_id", 999).code(), StatusCode::invalid_argument);
}

// A checkpoint without a tensor the config needs fails the load naming it.
TEST(StateSpaceConfig, AMissingTensorFailsTheLoad) {
  testing::TempDir dir("mamba2_missing");
  testing::write_edited_fixture("mamba2", dir, [](std::vector<testing::StEntry>& entries) {
    std::erase_if(entries, [](const testing::StEntry& e) { return e.name == "backbone.layers.1.mixer.A_log"; });
  });
  auto backend = make_cpu_backend({.n_threads = 1});
  auto m = Model::load(dir.str(), *backend, testing::test_load_options());
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.status().message().find("backbone.layers.1.mixer.A_log"), std::string::npos) << m.status().to_string();
}

}  // namespace
}  // namespace brigade
