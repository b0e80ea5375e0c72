// ModernBERT (models/modernbert.h) against transformers: the fixtures of
// scripts/make_modernbert_fixtures.py (tests/fixtures/modernbert/): every row of
// last_hidden_state (prompts longer than the local layers' window among them), both config.json
// layouts, the classification heads over [CLS] and over the mean of the tokens, the tokenizer's
// [CLS] ... [SEP]; the CPU attention's bidirectional window; what is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "cpu/cpu_backend.h"
#include "models/classifier.h"
#include "models/model_config.h"
#include "models/step_inputs.h"
#include "models/tokenizer.h"
#include "tests/models/encoder_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

using json = nlohmann::json;
using testing::encoder_hidden_states;
using testing::head_or_fail;
using testing::TempDir;

constexpr int kPageSize = testing::kEncoderPageSize;
constexpr double kTol = 2e-4;              // fp32 both sides, |hidden| ~ 1

std::string fixture(const std::string& name) { return "modernbert/" + name; }
std::string dir_of(const std::string& name) { return testing::fixture_dir(fixture(name)); }
json expected(const std::string& name) { return json::parse(read_text_file(dir_of(name) + "/expected.json").value()); }
json config_of(const std::string& name) { return json::parse(read_text_file(dir_of(name) + "/config.json").value()); }

LoadOptions options() {
  LoadOptions o = testing::test_load_options();
  o.max_batch_tokens = 256;  // every text of a fixture in one step
  return o;
}

// The rows of one fixture case's ids.
std::vector<std::vector<float>> hidden_of(Model& model, Backend& backend, const json& c) {
  return encoder_hidden_states(model, backend, std::vector<std::vector<int32_t>>{c["ids"].get<std::vector<int32_t>>()});
}

// The largest |got - want| over rows [first, first + want.size()) of got.
double max_diff(const std::vector<std::vector<float>>& got, size_t first, const json& want) {
  EXPECT_GE(got.size(), first + want.size());
  double d = 0.0;
  for (size_t r = 0; r < want.size() && first + r < got.size(); ++r)
    for (size_t i = 0; i < want[r].size(); ++i) d = std::max(d, std::abs(got[first + r][i] - want[r][i].get<double>()));
  return d;
}

std::vector<float> mean_row(const std::vector<std::vector<float>>& rows) {
  std::vector<double> sum(rows.front().size(), 0.0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) sum[i] += r[i];
  std::vector<float> out;
  for (double v : sum) out.push_back(static_cast<float>(v / static_cast<double>(rows.size())));
  return out;
}

// The Hub's layout (global_attn_every_n_layers 2, global_rope_theta / local_rope_theta) and
// transformers 5's (layer_types, rope_parameters) map onto the same ModelConfig fields.
TEST(ModernBert, ReadsBothConfigLayouts) {
  auto hub = parse_hf_config(config_of("embed").dump());
  ASSERT_TRUE(hub.has_value()) << hub.status().to_string();
  EXPECT_EQ(hub->arch, "modernbert");
  EXPECT_TRUE(hub->encoder);
  EXPECT_FALSE(hub->seq_cls);
  EXPECT_EQ(hub->sliding_layers, (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(hub->sliding_window, 4);  // local_attention 8: four on either side
  EXPECT_FLOAT_EQ(hub->rope_theta, 80000.0f);
  EXPECT_FLOAT_EQ(hub->rope_local_theta, 20000.0f);
  EXPECT_TRUE(hub->layer_norms);
  EXPECT_FALSE(hub->norm_bias);
  EXPECT_FALSE(hub->qkv_bias);
  EXPECT_EQ(hub->type_vocab_size, 0);
  EXPECT_EQ(hub->max_position, 128);
  EXPECT_EQ(hub->head_dim, 16);
  auto v5 = parse_hf_config(config_of("cls").dump());
  ASSERT_TRUE(v5.has_value()) << v5.status().to_string();
  EXPECT_TRUE(v5->seq_cls);
  EXPECT_EQ(v5->sliding_layers, (std::vector<bool>{false, true, true, false}));
  EXPECT_FLOAT_EQ(v5->rope_theta, 160000.0f);
  EXPECT_FLOAT_EQ(v5->rope_local_theta, 10000.0f);
  EXPECT_TRUE(v5->norm_bias && v5->qkv_bias && v5->o_bias && v5->mlp_bias);
  json masked = config_of("embed");  // the masked-LM checkpoints run as their encoder
  masked["architectures"] = {"ModernBertForMaskedLM"};
  auto mlm = parse_hf_config(masked.dump());
  ASSERT_TRUE(mlm.has_value()) << mlm.status().to_string();
  EXPECT_TRUE(mlm->encoder);
  EXPECT_FALSE(mlm->seq_cls);
  masked.erase("architectures");  // model_type alone
  auto bare = parse_hf_config(masked.dump());
  ASSERT_TRUE(bare.has_value()) << bare.status().to_string();
  EXPECT_EQ(bare->arch, "modernbert");
}

// ModernBertModel: each text alone, then every text in one step (each attends to itself only);
// the 118-token text is many local windows long.
TEST(ModernBert, HiddenStatesMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(dir_of("embed"), *backend, options());
  ASSERT_TRUE(model);
  const json want = expected("embed");
  ASSERT_EQ(want["texts"].size(), 4u);
  ASSERT_GT(want["texts"][3]["ids"].size(), 100u);
  std::vector<std::vector<int32_t>> all;
  for (const json& c : want["texts"]) {
    EXPECT_LT(max_diff(hidden_of(*model, *backend, c), 0, c["hidden"]), kTol) << c["text"];
    all.push_back(c["ids"].get<std::vector<int32_t>>());
  }
  const auto together = encoder_hidden_states(*model, *backend, all);
  size_t first = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_LT(max_diff(together, first, want["texts"][i]["hidden"]), kTol) << "in one step, text " << i;
    first += all[i].size();
  }
}

// The local layers' window is what makes the long text's states: with it widened past the prompt
// (local_attention 256), or by one token on either side (local_attention 10), the long text no
// longer matches, while a 3-token text (inside any window) still does. The window's edge itself:
// WindowIsExactlyTheHalfWidthOnEitherSide.
TEST(ModernBert, TheLocalWindowShapesLongPrompts) {
  const json want = expected("embed");
  for (int local : {256, 10}) {
    const TempDir dir("modernbert_window");
    testing::write_edited_fixture(fixture("embed"), dir, [](auto&) {}, [&](json& c) { c["local_attention"] = local; });
    auto backend = make_cpu_backend({.n_threads = 2});
    auto wide = testing::load_or_fail(dir.str(), *backend, options());
    ASSERT_TRUE(wide);
    EXPECT_GT(max_diff(hidden_of(*wide, *backend, want["texts"][3]), 0, want["texts"][3]["hidden"]), 1e-2) << local;
    EXPECT_LT(max_diff(hidden_of(*wide, *backend, want["texts"][2]), 0, want["texts"][2]["hidden"]), kTol) << local;
  }
}

// The sentence embedding modernbert-embed-base's sentence-transformers modules compute: the mean
// of the rows, normalized.
TEST(ModernBert, MeanPooledEmbeddingsMatchSentenceTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(dir_of("embed"), *backend, options());
  ASSERT_TRUE(model);
  const json want = expected("embed");  // held: the loop reads into it
  for (const json& c : want["texts"]) {
    const auto rows = hidden_of(*model, *backend, c);
    ASSERT_FALSE(rows.empty());
    const auto e = finish_embedding(mean_row(rows), 0, true);
    for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(e[i], c["embedding"][i].get<double>(), 1e-5) << c["text"] << " " << i;
  }
}

// The byte-level BPE tokenizer.json with its TemplateProcessing: [CLS] text [SEP], and pairs
// [CLS] a [SEP] b [SEP], as transformers' tokenizer gives them.
TEST(ModernBert, TokenizerAddsClsAndSep) {
  auto tok = Tokenizer::load(dir_of("embed"));
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  const json want = expected("embed");  // held: the loop reads into it
  for (const json& c : want["texts"]) {
    auto ids = (*tok)->encode(c["text"].get<std::string>(), true);
    ASSERT_TRUE(ids.has_value());
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << c["text"];
  }
  const json pairs = expected("rerank");  // held: the loop reads into it
  for (const json& p : pairs["pairs"]) {
    auto ids = (*tok)->encode_pair(p["text_1"].get<std::string>(), p["text_2"].get<std::string>());
    ASSERT_TRUE(ids.has_value());
    EXPECT_EQ(*ids, p["ids"].get<std::vector<int32_t>>()) << p["text_1"] << " / " << p["text_2"];
  }
}

// ModernBertForSequenceClassification over [CLS] with every bias (norm, attention, MLP, head.dense):
// the encoder's rows and the logits of head.dense + gelu + head.norm + classifier.
TEST(ModernBert, ClassifierOverClsMatchesTransformers) {
  const ClassifierHead head = head_or_fail(dir_of("cls"));
  EXPECT_EQ(head.num_labels, 3);
  EXPECT_EQ(head.labels, (std::vector<std::string>{"negative", "neutral", "positive"}));
  EXPECT_EQ(head.pooling, Pooling::cls);
  EXPECT_EQ(head.pre_activation, DenseActivation::gelu);
  EXPECT_EQ(head.pre_bias.size(), 32u);
  EXPECT_EQ(head.pre_norm_bias.size(), 32u);
  EXPECT_EQ(head.source, "head.dense + gelu + head.norm, classifier over the first token");
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(dir_of("cls"), *backend, options());
  ASSERT_TRUE(model);
  const json want = expected("cls");  // held: the loop reads into it
  for (const json& c : want["texts"]) {
    const auto rows = hidden_of(*model, *backend, c);
    ASSERT_FALSE(rows.empty());
    EXPECT_LT(max_diff(rows, 0, c["hidden"]), kTol) << c["text"];
    const auto logits = head.logits(rows[0]);
    for (size_t l = 0; l < 3; ++l) EXPECT_NEAR(logits[l], c["logits"][l].get<double>(), 1e-4) << c["text"] << " " << l;
  }
}

// A one-label reranker over the mean of the tokens (gte-reranker-modernbert-base's shape): pairs
// as the tokenizer makes them, transformers' logit and its sigmoid as the /score value.
TEST(ModernBert, MeanPooledRerankerMatchesTransformers) {
  const ClassifierHead head = head_or_fail(dir_of("rerank"));
  EXPECT_EQ(head.num_labels, 1);
  EXPECT_EQ(head.pooling, Pooling::mean);
  EXPECT_TRUE(head.pre_bias.empty());  // classifier_bias false
  EXPECT_TRUE(head.pre_norm_bias.empty());  // norm_bias false
  EXPECT_EQ(head.score_activation, ClassifierActivation::sigmoid);
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(dir_of("rerank"), *backend, options());
  ASSERT_TRUE(model);
  const json want = expected("rerank");
  ASSERT_EQ(want["pairs"].size(), 3u);
  for (const json& p : want["pairs"]) {
    const auto rows = hidden_of(*model, *backend, p);
    ASSERT_FALSE(rows.empty());
    const auto mean = mean_row(rows);
    EXPECT_NEAR(head.logits(mean)[0], p["logit"].get<double>(), 1e-4);
    EXPECT_NEAR(head.outputs(mean, PoolingTask::score, true)[0], p["score"].get<double>(), 1e-5);
    EXPECT_GT(std::abs(head.logits(rows[0])[0] - p["logit"].get<double>()), 1e-4);  // not the first token's
  }
}

// The CPU attention under what the local layers pass (AttentionMeta::sliding_window w + 1, and
// attend_until min(p + w, n - 1) per row) against softmax over exactly the keys |i - j| <= w.
TEST(ModernBert, WindowIsExactlyTheHalfWidthOnEitherSide) {
  constexpr int kHeads = 2, kDim = 8, kN = 21;
  auto backend = make_cpu_backend({.n_threads = 2});
  const KvLayout layout{1, 2, kPageSize, kHeads, kDim, DType::f32};
  auto kv = KvCache::allocate(*backend, layout);
  ASSERT_TRUE(kv.has_value());
  std::vector<int32_t> tokens(kN, 5);
  StepBatch batch = testing::make_step({{0, tokens, 0, false}}, kPageSize, 2);
  batch.logit_rows.clear();
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  const int64_t width = 3 * kHeads * kDim;
  std::vector<float> qkv(static_cast<size_t>(kN * width));
  for (float& v : qkv) v = dist(rng);
  auto qkv_t = alloc_tensor(*backend, DType::f32, kN, width);
  auto out_t = alloc_tensor(*backend, DType::f32, kN, kHeads * kDim);
  ASSERT_TRUE(qkv_t.has_value() && out_t.has_value());
  backend->upload(qkv_t->tensor, qkv.data());
  const QkvLayout l{kHeads, kHeads, kDim};
  const float scale = 0.3f;
  for (int w : {0, 1, 4, 25}) {
    std::vector<int32_t> until(kN);
    for (int p = 0; p < kN; ++p) until[static_cast<size_t>(p)] = std::min(p + w, kN - 1);
    StepInputs ints;
    ASSERT_TRUE(ints.allocate(*backend, kN).is_ok());
    ASSERT_TRUE(ints.upload(*backend, batch, until).is_ok());
    AttentionMeta meta = ints.meta(batch, StepBounds{kN, kN}, w + 1);
    backend->write_kv(kv->layer(0), qkv_t->tensor, l, ints.slots(kN));
    backend->attention(qkv_t->tensor, l, kv->layer(0), meta, scale, out_t->tensor);
    std::vector<float> got(static_cast<size_t>(kN * kHeads * kDim));
    backend->download(got.data(), out_t->tensor);
    for (int i = 0; i < kN; ++i)
      for (int h = 0; h < kHeads; ++h) {
        const float* q = qkv.data() + i * width + h * kDim;
        std::vector<double> s(kN, -INFINITY);
        double top = -INFINITY, sum = 0.0;
        for (int j = std::max(0, i - w); j <= std::min(kN - 1, i + w); ++j) {
          const float* k = qkv.data() + j * width + (kHeads + h) * kDim;
          double d = 0.0;
          for (int e = 0; e < kDim; ++e) d += double{q[e]} * k[e];
          s[static_cast<size_t>(j)] = d * scale;
          top = std::max(top, s[static_cast<size_t>(j)]);
        }
        std::vector<double> o(kDim, 0.0);
        for (int j = 0; j < kN; ++j) {
          if (std::isinf(s[static_cast<size_t>(j)])) continue;
          const double p = std::exp(s[static_cast<size_t>(j)] - top);
          sum += p;
          const float* v = qkv.data() + j * width + (2 * kHeads + h) * kDim;
          for (int e = 0; e < kDim; ++e) o[static_cast<size_t>(e)] += p * v[e];
        }
        for (int e = 0; e < kDim; ++e)
          ASSERT_NEAR(got[static_cast<size_t>((i * kHeads + h) * kDim + e)], o[static_cast<size_t>(e)] / sum, 1e-5)
              << "w " << w << " row " << i << " head " << h;
      }
  }
}

// Steps an encoder cannot run are refused with the reason, before anything is computed.
TEST(ModernBert, RefusesStepsItCannotRun) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(dir_of("embed"), *backend, options());
  ASSERT_TRUE(model);
  Status st = testing::encoder_step_status(*model, *backend, {0, {5, 6, 7}, 4, false});
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("whole in one step"), std::string::npos) << st.to_string();
  st = testing::encoder_step_status(*model, *backend, {0, {1, 5, 2}, 0, false}, true);
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("computes no logits"), std::string::npos) << st.to_string();
  st = testing::encoder_step_status(*model, *backend, {0, {1, 300, 2}, 0, false});  // vocab 300
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("300"), std::string::npos) << st.to_string();
}

// config.json fields brigade does not run are refused by name.
TEST(ModernBert, RefusesConfigsItDoesNotRun) {
  auto refused = [](const std::string& name, const std::function<void(json&)>& edit, const std::string& needle) {
    json c = config_of(name);
    edit(c);
    auto parsed = parse_hf_config(c.dump());
    ASSERT_FALSE(parsed.has_value()) << needle;
    EXPECT_NE(parsed.status().message().find(needle), std::string::npos) << parsed.status().to_string();
  };
  refused("embed", [](json& c) { c["hidden_activation"] = "silu"; }, "hidden_activation 'silu'");
  refused("embed", [](json& c) { c["is_decoder"] = true; }, "is_decoder");
  refused("embed", [](json& c) { c["local_attention"] = 1; }, "local_attention must be >= 2");
  refused("embed", [](json& c) { c["global_attn_every_n_layers"] = 0; }, "global_attn_every_n_layers must be >= 1");
  refused("embed", [](json& c) { c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}}; }, "rope_scaling");
  refused("embed", [](json& c) { c["architectures"] = {"ModernBertForTokenClassification"}; },
          "architecture 'ModernBertForTokenClassification' is not supported");
  refused("embed", [](json& c) { c["architectures"] = {"ModernBertDecoderForCausalLM"}; },
          "architecture 'ModernBertDecoderForCausalLM' is not supported");
  refused("embed", [](json& c) { c["quantization_config"] = {{"quant_method", "fp8"}}; }, "quantization_config");
  refused("cls", [](json& c) { c["classifier_pooling"] = "max"; }, "classifier_pooling 'max'");
  refused("cls", [](json& c) { c["classifier_activation"] = "silu"; }, "classifier_activation 'silu'");
  refused("cls", [](json& c) { c["rope_parameters"]["full_attention"]["rope_type"] = "yarn"; },
          "rope_parameters.full_attention.rope_type 'yarn'");
  refused("cls", [](json& c) { c["layer_types"][1] = "chunked_attention"; }, "layer_types[1] \"chunked_attention\"");
  refused("cls", [](json& c) { c["layer_types"] = {"full_attention"}; }, "one type per layer");
}

}  // namespace
}  // namespace brigade
