// The EAGLE-3 head (LoadOptions::eagle3, models/eagle3_head.h) on Llama, Qwen2, Qwen3 and
// Qwen3-MoE targets, in the Hub layout and the speculators one, against the reference
// scripts/make_eagle3_fixtures.py computes with transformers' own Llama modules
// composed as vLLM's llama_eagle3.py: the target's aux hidden states (the residual entering the
// configured layers, StepBatch::aux_rows), the head's teacher-forced draft logits over its draft
// vocabulary at every position, and a chain of three greedy drafts, each fed the head's own
// pre-norm output; the edited pair's first drafts are the target's next tokens; what is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/eagle3_head.h"
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
void expect_reference_drafts(const std::string& target, const std::string& head_dir, const nlohmann::json& cases,
                             const std::string& label) {
  SCOPED_TRACE(label);
  auto backend = make_cpu_backend({.n_threads = 2});
  auto loaded = load_with_head(*backend, target, head_dir);
  ASSERT_TRUE(loaded.has_value()) << loaded.status().to_string();
  Model& model = **loaded;
  const Model::DraftHead head = model.draft_head();
  const int dv = static_cast<int>(head.vocab);
  const DType act = backend->activation_dtype();
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
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
    ::testing::Test::RecordProperty(label + "_max_abs_diff_" + std::to_string(n), std::to_string(worst));
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
    ::testing::Test::RecordProperty(label + "_chain_max_abs_diff_" + std::to_string(n), std::to_string(chain_worst));
  }
}

TEST(Eagle3Head, TeacherForcedDraftLogitsAndChainMatchTheReference) {
  expect_reference_drafts(dir("target"), dir("head"), expected().at("cases"), "eagle3");
}

// The same head as the Hub's EAGLE-3 heads ship it: pytorch_model.bin (torch.save,
// scripts/make_torch_bin_fixtures.py), with the same reference.
TEST(Eagle3Head, PytorchModelBinHeadMatchesTheReference) {
  expect_reference_drafts(dir("target"), dir("head_bin"), expected().at("cases"), "eagle3_bin");
}

// Qwen2 (q/k/v biases, tied embeddings), Qwen3 (q/k norms) and Qwen3-MoE targets: their aux
// hidden states are the residual entering the layers as Llama's; the Qwen3-MoE head is in the
// speculators layout (layers.0.* tensors, transformer_layer_config) with norm_before_residual.
TEST(Eagle3Head, QwenTargetsAndTheSpeculatorsLayoutMatchTheReference) {
  const auto e = expected();
  ASSERT_EQ(e.at("variants").size(), 3u);
  for (const auto& [name, v] : e.at("variants").items()) {
    auto backend = make_cpu_backend({.n_threads = 1});
    auto model = load_with_head(*backend, dir(name + "_target"), dir(name + "_head"));
    ASSERT_TRUE(model.has_value()) << name << ": " << model.status().to_string();
    EXPECT_EQ((*model)->draft_head().aux_layers, v.at("aux_layers").get<std::vector<int>>()) << name;
    expect_reference_drafts(dir(name + "_target"), dir(name + "_head"), v.at("cases"), "eagle3_" + name);
  }
}

// The edited pair: the head's argmax at every row is the target's next token there, the target's
// own greedy tokens (transformers) being what brigade's target decodes.
void expect_next_token_drafts(const std::string& prefix) {
  SCOPED_TRACE(prefix);
  auto backend = make_cpu_backend({.n_threads = 2});
  auto loaded = load_with_head(*backend, dir(prefix + "_target"), dir(prefix + "_head"));
  ASSERT_TRUE(loaded.has_value()) << loaded.status().to_string();
  Model& model = **loaded;
  const Model::DraftHead head = model.draft_head();
  const int dv = static_cast<int>(head.vocab);
  const auto e = expected();  // alive across the loop
  ASSERT_EQ(e.at(prefix + "_cases").size(), 2u);
  EXPECT_EQ(head.aux_layers, e.at(prefix + "_aux_layers").get<std::vector<int>>());
  for (const auto& c : e.at(prefix + "_cases")) {
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

// The Llama pair, and a Qwen3 pair whose head is in the speculators layout with
// norm_before_residual and its own copy of the target's embedding.
TEST(Eagle3Head, EditedHeadDraftsTheTargetsNextTokens) {
  expect_next_token_drafts("bigram");
  expect_next_token_drafts("qwen3_bigram");
}

// A head directory: the files of the fixture head `src` with config.json edited by `edit`, the
// tensors for which `keep` says true, and `extra` ones.
struct EditedHead {
  testing::TempDir tmp{"eagle3"};
  EditedHead(const std::function<void(nlohmann::json&)>& edit,
             const std::function<bool(const std::string&)>& keep = [](const std::string&) { return true; },
             const std::string& src = "head", std::vector<testing::StEntry> extra = {}) {
    auto text = read_text_file(dir(src) + "/config.json");
    EXPECT_TRUE(text.has_value());
    auto j = nlohmann::json::parse(*text);
    edit(j);
    testing::write_text(tmp.file("config.json"), j.dump());
    auto file = MappedFile::open(dir(src) + "/model.safetensors");
    EXPECT_TRUE(file.has_value());
    std::map<std::string, RawTensor> tensors;
    EXPECT_TRUE(read_safetensors(*file, tensors).is_ok());
    std::vector<testing::StEntry> entries;
    for (const auto& [name, t] : tensors) {
      if (!keep(name)) continue;
      const std::string dtype = t.dtype == DType::i64 ? "I64" : t.dtype == DType::u8 ? "BOOL" : "F32";
      entries.push_back({name, dtype, t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())});
    }
    entries.insert(entries.end(), extra.begin(), extra.end());
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
  // Eagle3Speculator without speculators_model_type / transformer_layer_config is neither layout.
  expect_refused(target, EditedHead(set("architectures", {"Eagle3Speculator"})).path(), "not an EAGLE-3 head");
  expect_refused(target, EditedHead(set("architectures", {"LlamaForCausalLM"})).path(), "not an EAGLE-3 head");
  expect_refused(target, EditedHead(set("norm_before_fc", true)).path(), "norm_before_fc = true is not supported");
  expect_refused(target, EditedHead([](nlohmann::json& j) { j["eagle_config"]["norm_before_fc"] = true; }).path(),
                 "norm_before_fc = true");  // where NVIDIA's gpt-oss heads keep it
  expect_refused(target, EditedHead(set("attention_bias", true)).path(), "attention_bias = true");
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
  // gpt-oss's heads read norm_before_fc; it and the other decoders are not EAGLE-3 targets here.
  expect_refused(fixture_dir("gpt_oss"), dir("head"), "runs on a llama, qwen2, qwen3 or qwen3_moe target");
}

// The speculators layout (Eagle3Speculator): what vLLM's SpeculatorsConfig would not map, or
// vLLM's llama layer does not run, is refused by name.
TEST(Eagle3Head, SpeculatorsLayoutRefusesWhatItDoesNotRun) {
  const std::string target = dir("qwen3_moe_target"), src = "qwen3_moe_head";
  const auto keep_all = [](const std::string&) { return true; };
  const auto spec = [&](const std::function<void(nlohmann::json&)>& edit) { return EditedHead(edit, keep_all, src); };
  const auto set = [](const char* key, nlohmann::json v) { return [=](nlohmann::json& j) { j[key] = v; }; };
  expect_refused(target, spec(set("speculators_model_type", "peagle")).path(),
                 "speculators_model_type \"peagle\" is not supported");
  expect_refused(target, spec(set("speculators_model_type", "dflash")).path(), "\"dflash\" is not supported");
  for (const char* key : {"norm_before_fc", "fc_norm", "norm_output"})
    expect_refused(target, spec(set(key, true)).path(), std::string(key) + " = true is not supported");
  expect_refused(target, spec([](nlohmann::json& j) { j.erase("transformer_layer_config"); }).path(),
                 "needs transformer_layer_config");
  expect_refused(target, spec([](nlohmann::json& j) { j["transformer_layer_config"]["model_type"] = "qwen3"; }).path(),
                 "transformer_layer_config.model_type \"qwen3\" is not supported");
  expect_refused(target, spec([](nlohmann::json& j) { j["transformer_layer_config"]["num_hidden_layers"] = 2; }).path(),
                 "num_hidden_layers 2");
  expect_refused(target, spec([](nlohmann::json& j) { j["transformer_layer_config"]["mlp_bias"] = true; }).path(),
                 "mlp_bias = true");
  expect_refused(target, spec(set("target_hidden_size", 48)).path(), "target_hidden_size 48");
  expect_refused(target, spec(set("eagle_aux_hidden_state_layer_ids", {0, 1, 3})).path(),
                 "aux hidden state layer 3 is outside the target's 3 layers");
  // fc with a bias (speculators' early Eagle3Speculator had one; vLLM's fc has none).
  std::vector<uint8_t> zeros(24 * 4, 0);
  expect_refused(target, EditedHead([](nlohmann::json&) {}, keep_all, src, {{"fc.bias", "F32", {24}, zeros}}).path(),
                 "fc.bias is not supported");
  expect_refused(target, EditedHead([](nlohmann::json&) {}, [](const std::string& n) {
                   return n != "layers.0.hidden_norm.weight";
                 }, src).path(), "layers.0.hidden_norm.weight");
}

// norm_before_residual defaults to true in the speculators layout (vLLM's update_eagle3) and to
// false in LlamaForCausalLMEagle3's; either is read where given. The teacher-forced test above
// checks the true case's logits against the reference.
TEST(Eagle3Head, ReadsNormBeforeResidualAsVllmDoes) {
  const auto cfg = [](const std::string& src, const std::function<void(nlohmann::json&)>& edit) {
    auto text = read_text_file(dir(src) + "/config.json");
    EXPECT_TRUE(text.has_value());
    auto j = nlohmann::json::parse(*text);
    edit(j);
    return j.dump();
  };
  auto backend = make_cpu_backend({.n_threads = 1});
  auto target = Model::load(dir("qwen3_moe_target"), *backend, testing::test_load_options());
  ASSERT_TRUE(target.has_value());
  const ModelConfig& tc = (*target)->config();
  auto spec_default = parse_eagle3_config(cfg("qwen3_moe_head", [](nlohmann::json& j) { j.erase("norm_before_residual"); }), tc);
  ASSERT_TRUE(spec_default.has_value()) << spec_default.status().to_string();
  EXPECT_TRUE(spec_default->norm_before_residual);
  EXPECT_TRUE(spec_default->speculators);
  auto spec_false = parse_eagle3_config(cfg("qwen3_moe_head", [](nlohmann::json& j) { j["norm_before_residual"] = false; }), tc);
  ASSERT_TRUE(spec_false.has_value());
  EXPECT_FALSE(spec_false->norm_before_residual);
  auto llama_target = Model::load(dir("target"), *backend, testing::test_load_options());
  ASSERT_TRUE(llama_target.has_value());
  auto native = parse_eagle3_config(cfg("head", [](nlohmann::json&) {}), (*llama_target)->config());
  ASSERT_TRUE(native.has_value());
  EXPECT_FALSE(native->norm_before_residual);
  EXPECT_FALSE(native->speculators);
  auto native_true = parse_eagle3_config(cfg("head", [](nlohmann::json& j) { j["norm_before_residual"] = true; }),
                                         (*llama_target)->config());
  ASSERT_TRUE(native_true.has_value());
  EXPECT_TRUE(native_true->norm_before_residual);
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
