// The EAGLE-3 head (LoadOptions::eagle3, models/eagle3_head.h) on a Llama target against the
// reference scripts/make_eagle3_fixtures.py computes with transformers' own Llama modules
// composed as vLLM's llama_eagle3.py: the target's aux hidden states (the residual entering the
// configured layers, StepBatch::aux_rows), the head's teacher-forced draft logits over its draft
// vocabulary at every position, and a chain of three greedy drafts, each fed the head's own
// pre-norm output; the edited pair's first drafts are the target's next tokens; what is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/mapped_file.h"
#include "models/model.h"
#include "models/safetensors.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::make_step;

constexpr int kPageSize = 4, kPages = 16;
constexpr float kTol = 1e-4f;

std::string dir(const std::string& sub) { return fixture_dir("eagle3/" + sub); }

Expected<std::unique_ptr<Model>> load_with_head(Backend& backend, const std::string& target, const std::string& head) {
  LoadOptions o = testing::test_load_options();
  o.eagle3 = head;
  return Model::load(target, backend, o);
}

nlohmann::json expected() {
  auto text = read_text_file(dir("expected.json"));
  EXPECT_TRUE(text.has_value());
  return text ? nlohmann::json::parse(*text) : nlohmann::json::object();
}

struct Host {
  Backend& backend;
  std::vector<Buffer> keep;
  Tensor alloc(DType t, int64_t rows, int64_t cols) {
    auto buf = backend.allocate(dtype_bytes(t, std::max<int64_t>(rows, 1) * cols));
    EXPECT_TRUE(buf.has_value());
    keep.push_back(std::move(*buf));
    return keep.back().view(t, {rows, cols});
  }
  std::vector<float> down(const Tensor& t) {
    std::vector<float> h(static_cast<size_t>(t.numel()));
    backend.download(h.data(), t);
    return h;
  }
};

float row_diff(const float* got, const std::vector<float>& want) {
  float d = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) d = std::max(d, std::fabs(got[i] - want[i]));
  return d;
}

TEST(Eagle3Head, DeclaresItsShapeAndTakesAKvLayerOfThePool) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_with_head(*backend, dir("target"), dir("head"));
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  const Model::DraftHead h = (*model)->draft_head();
  EXPECT_EQ(h.aux_layers, (std::vector<int>{0, 2, 4}));  // eagle_config.eagle_aux_hidden_state_layer_ids
  EXPECT_EQ(h.aux_width, 32);
  EXPECT_EQ(h.hidden, 24);
  EXPECT_EQ(h.vocab, 96);
  ASSERT_NE(h.to_target, nullptr);
  EXPECT_EQ((*model)->n_mtp_layers(), 1);
  EXPECT_EQ((*model)->kv_layout(4, 4, DType::f32).n_layers, 6);
  const auto e = expected();
  EXPECT_EQ(h.aux_layers, e.at("aux_layers").get<std::vector<int>>());
  // No eagle_aux_hidden_state_layer_ids: vLLM's (2, L / 2, L - 3) of the 3-layer target.
  auto bigram = load_with_head(*backend, dir("bigram_target"), dir("bigram_head"));
  ASSERT_TRUE(bigram.has_value()) << bigram.status().to_string();
  EXPECT_EQ((*bigram)->draft_head().aux_layers, (std::vector<int>{2, 1, 0}));
  EXPECT_EQ((*bigram)->draft_head().aux_layers, e.at("bigram_aux_layers").get<std::vector<int>>());
}

// The target over positions 0..n-2 (aux planes of every row), the head over the same rows fed
// the next tokens, then the chain from the last row.
TEST(Eagle3Head, TeacherForcedDraftLogitsAndChainMatchTheReference) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto loaded = load_with_head(*backend, dir("target"), dir("head"));
  ASSERT_TRUE(loaded.has_value()) << loaded.status().to_string();
  Model& model = **loaded;
  const Model::DraftHead head = model.draft_head();
  const int dv = static_cast<int>(head.vocab);
  const DType act = backend->activation_dtype();
  const auto e = expected();
  ASSERT_FALSE(e.at("cases").empty());
  for (const auto& c : e.at("cases")) {
    const auto tokens = c.at("tokens").get<std::vector<int32_t>>();
    const auto want = c.at("draft_logits").get<std::vector<std::vector<float>>>();
    const int n = static_cast<int>(tokens.size());
    ASSERT_EQ(static_cast<int>(want.size()), n - 1);
    auto kv = KvCache::allocate(*backend, model.kv_layout(kPages, kPageSize, DType::f32));
    ASSERT_TRUE(kv.has_value());
    Host host{*backend, {}};
    StepBatch t = make_step({{0, std::vector<int32_t>(tokens.begin(), tokens.end() - 1), 0, false}}, kPageSize, kPages);
    t.logit_rows.clear();
    for (int r = 0; r < n - 1; ++r) t.aux_rows.push_back(r);
    const Tensor aux = host.alloc(act, 3 * int64_t{n - 1}, head.aux_width);
    t.aux_hidden = aux;
    Status st = model.forward(t, *kv, Tensor());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    StepBatch b = make_step({{0, std::vector<int32_t>(tokens.begin() + 1, tokens.end()), 0, true}}, kPageSize, kPages);
    b.prev_hidden = aux;
    b.hidden_rows = {n - 2};
    Tensor g = host.alloc(act, 1, head.hidden);
    b.hidden = g;
    const Tensor logits = host.alloc(DType::f32, n - 1, dv);
    st = model.forward_mtp(b, *kv, logits);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    const auto got = host.down(logits);
    float worst = 0.0f;
    for (int i = 0; i < n - 1; ++i) worst = std::max(worst, row_diff(got.data() + static_cast<size_t>(i) * dv, want[static_cast<size_t>(i)]));
    EXPECT_LE(worst, kTol) << n << " tokens";
    RecordProperty("eagle3_max_abs_diff_" + std::to_string(n), std::to_string(worst));
    const auto to_target = [&](const float* row) { return (*head.to_target)[static_cast<size_t>(testing::argmax(row, dv))]; };
    const auto want_chain = c.at("chain_logits").get<std::vector<std::vector<float>>>();
    std::vector<int32_t> drafts = {to_target(got.data() + static_cast<size_t>(n - 2) * dv)};
    float chain_worst = row_diff(got.data() + static_cast<size_t>(n - 2) * dv, want_chain[0]);
    for (size_t j = 1; j < want_chain.size(); ++j) {
      StepBatch s = make_step({{0, {drafts.back()}, n - 2 + static_cast<int>(j), true}}, kPageSize, kPages);
      s.prev_hidden = g;  // the head's own pre-norm output at the previous position
      g = host.alloc(act, 1, head.hidden);
      s.hidden_rows = {0};
      s.hidden = g;
      const Tensor l = host.alloc(DType::f32, 1, dv);
      st = model.forward_mtp(s, *kv, l);
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      const auto row = host.down(l);
      chain_worst = std::max(chain_worst, row_diff(row.data(), want_chain[j]));
      drafts.push_back(to_target(row.data()));
    }
    EXPECT_LE(chain_worst, kTol);
    EXPECT_EQ(drafts, c.at("chain_drafts").get<std::vector<int32_t>>());
    RecordProperty("eagle3_chain_max_abs_diff_" + std::to_string(n), std::to_string(chain_worst));
  }
}

// The edited pair: the head's argmax at every row is the target's next token there, the target's
// own greedy tokens (transformers) being what brigade's target decodes.
TEST(Eagle3Head, EditedHeadDraftsTheTargetsNextTokens) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto loaded = load_with_head(*backend, dir("bigram_target"), dir("bigram_head"));
  ASSERT_TRUE(loaded.has_value()) << loaded.status().to_string();
  Model& model = **loaded;
  const Model::DraftHead head = model.draft_head();
  const int dv = static_cast<int>(head.vocab);
  const auto e = expected();  // alive across the loop
  ASSERT_EQ(e.at("bigram_cases").size(), 2u);
  for (const auto& c : e.at("bigram_cases")) {
    std::vector<int32_t> tokens = c.at("prompt").get<std::vector<int32_t>>();
    const auto greedy = c.at("greedy").get<std::vector<int32_t>>();
    tokens.insert(tokens.end(), greedy.begin(), greedy.end());
    const int n = static_cast<int>(tokens.size());
    auto kv = KvCache::allocate(*backend, model.kv_layout(kPages * 2, kPageSize, DType::f32));
    ASSERT_TRUE(kv.has_value());
    Host host{*backend, {}};
    StepBatch t = make_step({{0, tokens, 0, true}}, kPageSize, kPages * 2);
    for (int r = 0; r < n; ++r) t.aux_rows.push_back(r);
    t.aux_hidden = host.alloc(backend->activation_dtype(), 3 * int64_t{n}, head.aux_width);
    const Tensor target_logits = host.alloc(DType::f32, n, model.config().vocab_size);
    ASSERT_TRUE(model.forward(t, *kv, target_logits).is_ok());
    StepBatch b = make_step({{0, std::vector<int32_t>(tokens.begin() + 1, tokens.end()), 0, true}}, kPageSize, kPages * 2);
    // The head's rows are positions 0..n-2: each plane's first n - 1 rows.
    const Tensor planes = host.alloc(backend->activation_dtype(), 3 * int64_t{n - 1}, head.aux_width);
    {
      const auto all = host.down(t.aux_hidden);
      std::vector<float> part;
      for (int p = 0; p < 3; ++p)
        part.insert(part.end(), all.begin() + static_cast<std::ptrdiff_t>(p) * n * head.aux_width,
                    all.begin() + (static_cast<std::ptrdiff_t>(p) * n + n - 1) * head.aux_width);
      backend->upload(planes, part.data());
    }
    b.prev_hidden = planes;
    const Tensor logits = host.alloc(DType::f32, n - 1, dv);
    ASSERT_TRUE(model.forward_mtp(b, *kv, logits).is_ok());
    const auto got = host.down(logits), tl = host.down(target_logits);
    // Row i reads token i + 1: its draft is the target's next token at position i + 1, which in the
    // greedy part is token i + 2.
    const int vocab = model.config().vocab_size, prompt = static_cast<int>(c.at("prompt").size());
    for (int i = 0; i < n - 1; ++i) {
      const int32_t draft = (*head.to_target)[static_cast<size_t>(testing::argmax(got.data() + static_cast<size_t>(i) * dv, dv))];
      EXPECT_EQ(draft, testing::argmax(tl.data() + static_cast<size_t>(i + 1) * vocab, vocab)) << i;
      if (i + 2 >= prompt && i + 2 < n) {
        EXPECT_EQ(draft, tokens[static_cast<size_t>(i + 2)]) << i;
      }
    }
  }
}

// A head directory: the fixture head's files with config.json edited by `edit` and the tensors
// for which `keep` says true.
struct EditedHead {
  testing::TempDir tmp{"eagle3"};
  EditedHead(const std::function<void(nlohmann::json&)>& edit,
             const std::function<bool(const std::string&)>& keep = [](const std::string&) { return true; }) {
    auto text = read_text_file(dir("head") + "/config.json");
    EXPECT_TRUE(text.has_value());
    auto j = nlohmann::json::parse(*text);
    edit(j);
    testing::write_text(tmp.file("config.json"), j.dump());
    auto file = MappedFile::open(dir("head") + "/model.safetensors");
    EXPECT_TRUE(file.has_value());
    std::map<std::string, RawTensor> tensors;
    EXPECT_TRUE(read_safetensors(*file, tensors).is_ok());
    std::vector<testing::StEntry> entries;
    for (const auto& [name, t] : tensors) {
      if (!keep(name)) continue;
      const std::string dtype = t.dtype == DType::i64 ? "I64" : t.dtype == DType::u8 ? "BOOL" : "F32";
      entries.push_back({name, dtype, t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())});
    }
    testing::write_safetensors_file(tmp.file("model.safetensors"), entries);
  }
  std::string path() const { return tmp.str(); }
};

void expect_refused(const std::string& target, const std::string& head, const std::string& says) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_with_head(*backend, target, head);
  ASSERT_FALSE(model.has_value()) << says;
  EXPECT_NE(model.status().message().find(says), std::string::npos) << model.status().to_string();
}

TEST(Eagle3Head, RefusesWhatItDoesNotRun) {
  const std::string target = dir("target");
  const auto set = [](const char* key, nlohmann::json v) { return [=](nlohmann::json& j) { j[key] = v; }; };
  expect_refused(target, EditedHead(set("architectures", {"Eagle3Speculator"})).path(), "speculators layout");
  expect_refused(target, EditedHead(set("architectures", {"LlamaForCausalLM"})).path(), "not an EAGLE-3 head");
  expect_refused(target, EditedHead(set("norm_before_residual", true)).path(), "norm_before_residual");
  expect_refused(target, EditedHead(set("num_hidden_layers", 2)).path(), "num_hidden_layers 2");
  expect_refused(target, EditedHead(set("vocab_size", 300)).path(), "vocab_size 300 is not the target's 256");
  expect_refused(target, EditedHead(set("target_hidden_size", 64)).path(), "target_hidden_size 64");
  expect_refused(target, EditedHead(set("num_key_value_heads", 4)).path(), "kv heads");
  expect_refused(target, EditedHead([](nlohmann::json& j) {
                   j["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = {0, 2, 5};
                 }).path(), "aux hidden state layer 5 is outside the target's 5 layers");
  expect_refused(target, EditedHead([](nlohmann::json& j) {
                   j["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = {0, 2};
                 }).path(), "takes 3 aux hidden states");
  expect_refused(target, EditedHead([](nlohmann::json&) {}, [](const std::string& n) { return n != "fc.weight"; }).path(),
                 "fc.weight");
  expect_refused(target, EditedHead([](nlohmann::json&) {}, [](const std::string& n) { return n != "d2t"; }).path(),
                 "no d2t tensor");
  // Without its embed_tokens a head narrower than the target has no embedding to use.
  expect_refused(target, EditedHead([](nlohmann::json&) {}, [](const std::string& n) {
                   return n != "embed_tokens.weight";
                 }).path(), "no embed_tokens.weight");
  expect_refused(target, dir("no_such_head"), "config.json");
  expect_refused(fixture_dir("qwen3"), dir("head"), "runs on a llama target");
}

// A step with aux rows on a model without a head, and a head step with a prev_hidden of neither
// shape, are refused.
TEST(Eagle3Head, RefusesMalformedSteps) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto plain = Model::load(dir("target"), *backend, testing::test_load_options());
  ASSERT_TRUE(plain.has_value());
  auto kv = KvCache::allocate(*backend, (*plain)->kv_layout(kPages, kPageSize, DType::f32));
  StepBatch t = make_step({{0, {1, 2, 3}, 0, false}}, kPageSize, kPages);
  t.logit_rows.clear();
  t.aux_rows = {0};
  EXPECT_FALSE((*plain)->forward(t, *kv, Tensor()).is_ok());
  auto model = load_with_head(*backend, dir("target"), dir("head"));
  ASSERT_TRUE(model.has_value());
  auto kv2 = KvCache::allocate(*backend, (*model)->kv_layout(kPages, kPageSize, DType::f32));
  Host host{*backend, {}};
  t.aux_hidden = host.alloc(backend->activation_dtype(), 2, 32);  // one plane short
  EXPECT_FALSE((*model)->forward(t, *kv2, Tensor()).is_ok());
  StepBatch b = make_step({{0, {2, 3}, 0, true}}, kPageSize, kPages);
  b.prev_hidden = host.alloc(backend->activation_dtype(), 2, 32);
  const Status st = (*model)->forward_mtp(b, *kv2, host.alloc(DType::f32, 2, 96));
  EXPECT_NE(st.message().find("an EAGLE-3 step needs prev_hidden"), std::string::npos) << st.to_string();
}

}  // namespace
}  // namespace brigade
