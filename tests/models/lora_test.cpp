// LoRA adapters (models/lora.h) against transformers + PEFT: tests/fixtures/lora/<name>/ written
// by scripts/make_lora_fixtures.py for the tests/fixtures/llama checkpoint.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/lora.h"
#include "model_test_util.h"

namespace brigade::testing {
namespace {

constexpr int kPageSize = 16, kPages = 4;

std::vector<LoraModule> fixture_loras() {
  return {{"all", fixture_dir("lora/all_r4")}, {"rs", fixture_dir("lora/rslora_qv")}};
}

std::unique_ptr<Model> load_with(const std::vector<LoraModule>& loras, Backend& backend, std::string* error = nullptr,
                                 int max_loras = 0) {
  LoadOptions opts;
  opts.max_batch_tokens = 160;
  opts.progress = false;
  opts.loras = loras;
  opts.max_loras = max_loras;
  auto m = Model::load(fixture_dir("llama"), backend, opts);
  if (error != nullptr) *error = m ? "" : m.status().to_string();
  return m ? std::move(*m) : nullptr;
}

float max_diff(const float* got, const std::vector<std::vector<float>>& want) {
  float d = 0.0f;
  for (size_t r = 0; r < want.size(); ++r)
    for (size_t v = 0; v < want[r].size(); ++v) d = std::max(d, std::fabs(got[r * want[r].size() + v] - want[r][v]));
  return d;
}

// Prefill of the whole prompt under adapter `id`, then greedy decode steps under it.
FixtureRun run_adapter_case(Model& model, Backend& backend, const FixtureCase& fc, int32_t id) {
  FixtureRun run;
  auto kv = KvCache::allocate(backend, model.kv_layout(kPages, kPageSize, DType::f32));
  EXPECT_TRUE(kv.has_value());
  const int vocab = model.config().vocab_size;
  StepBatch b = make_step({{0, fc.prompt, 0, true}}, kPageSize, kPages);
  b.lora = {id};
  run.logits = run_step(model, backend, *kv, b);
  run.max_abs_diff = max_diff(run.logits.data(), fc.logits);
  int32_t next = argmax(run.logits.data() + (fc.prompt.size() - 1) * static_cast<size_t>(vocab), vocab);
  int n_past = static_cast<int>(fc.prompt.size());
  while (run.greedy.size() < fc.greedy.size()) {
    run.greedy.push_back(next);
    StepBatch d = make_step({{0, {next}, n_past++, false}}, kPageSize, kPages);
    d.lora = {id};
    next = argmax(run_step(model, backend, *kv, d).data(), vocab);
  }
  return run;
}

TEST(Lora, EachAdapterMatchesPeft) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_with(fixture_loras(), *backend);
  ASSERT_NE(model, nullptr);
  const char* names[] = {"lora/all_r4", "lora/rslora_qv"};
  for (int id = 1; id <= 2; ++id) {
    const auto cases = read_fixture_cases(names[id - 1]);
    const auto base = read_fixture_cases("llama");
    ASSERT_EQ(cases.size(), base.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(std::string(names[id - 1]) + " case " + std::to_string(i));
      // The adapter changes the model clearly, so matching PEFT is not matching the base.
      EXPECT_GT(max_diff(cases[i].logits.front().data(), {base[i].logits.front()}), 100 * kLogitTol);
      const FixtureRun run = run_adapter_case(*model, *backend, cases[i], id);
      EXPECT_LT(run.max_abs_diff, kLogitTol);
      EXPECT_EQ(run.greedy, cases[i].greedy);
    }
  }
}

// One step holding the same prompt three times: base, adapter 1, adapter 2.
// lora/all_r4 as PEFT saved adapters before safetensors: adapter_model.bin (torch.save,
// scripts/make_torch_bin_fixtures.py), against the same PEFT reference.
TEST(Lora, AdapterModelBinMatchesPeft) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_with({{"all", fixture_dir("lora/all_r4_bin")}}, *backend);
  ASSERT_NE(model, nullptr);
  const auto cases = read_fixture_cases("lora/all_r4");
  ASSERT_FALSE(cases.empty());
  for (const auto& fc : cases) {
    const FixtureRun run = run_adapter_case(*model, *backend, fc, 1);
    EXPECT_LT(run.max_abs_diff, kLogitTol);
    EXPECT_EQ(run.greedy, fc.greedy);
  }
}

TEST(Lora, MixedBatchKeepsEveryRowItsOwn) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_with(fixture_loras(), *backend);
  ASSERT_NE(model, nullptr);
  const auto base = read_fixture_cases("llama"), all = read_fixture_cases("lora/all_r4"),
             rs = read_fixture_cases("lora/rslora_qv");
  const FixtureCase& fc = base[0];
  const size_t n = fc.prompt.size(), vocab = static_cast<size_t>(model->config().vocab_size);
  auto kv = KvCache::allocate(*backend, model->kv_layout(3 * kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  StepBatch b = make_step({{0, fc.prompt, 0, true}, {1, fc.prompt, 0, true}, {2, fc.prompt, 0, true}}, kPageSize, kPages);
  b.lora = {0, 1, 2};
  const std::vector<float> mixed = run_step(*model, *backend, *kv, b);
  EXPECT_LT(max_diff(mixed.data(), fc.logits), kLogitTol);
  EXPECT_LT(max_diff(mixed.data() + n * vocab, all[0].logits), kLogitTol);
  EXPECT_LT(max_diff(mixed.data() + 2 * n * vocab, rs[0].logits), kLogitTol);
  // The base rows are those of a base-only step bit for bit.
  StepBatch alone = make_step({{0, fc.prompt, 0, true}}, kPageSize, kPages);
  const std::vector<float> base_only = run_step(*model, *backend, *kv, alone);
  EXPECT_TRUE(std::equal(base_only.begin(), base_only.end(), mixed.begin()));
}

TEST(Lora, ModelWithoutAdaptersRefusesAnAdapterStep) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_with({}, *backend);
  ASSERT_NE(model, nullptr);
  auto kv = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
  StepBatch b = make_step({{0, {1, 2, 3}, 0, false}}, kPageSize, kPages);
  b.lora = {1};
  auto buf = backend->allocate(256 * sizeof(float));
  const Status st = model->forward(b, *kv, buf->view(DType::f32, {1, 256}));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument) << st.to_string();
}

TEST(Lora, StepWithUnknownAdapterIdIsRefused) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_with(fixture_loras(), *backend);
  ASSERT_NE(model, nullptr);
  auto kv = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
  StepBatch b = make_step({{0, {1, 2, 3}, 0, false}}, kPageSize, kPages);
  b.lora = {3};
  auto buf = backend->allocate(256 * sizeof(float));
  const Status st = model->forward(b, *kv, buf->view(DType::f32, {1, 256}));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("outside [0, 2]"), std::string::npos) << st.to_string();
}

// Slots for adapters loaded at run time (LoadOptions::max_loras, Model::load_lora): a model
// loaded with none takes both adapters later, each matching PEFT from its slot; a freed slot is
// refused, and taking another adapter it serves that one (nothing of the old one stays).
TEST(Lora, AdaptersLoadedIntoSlotsAtRunTimeMatchPeft) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_with({}, *backend, nullptr, /*max_loras=*/2);
  ASSERT_NE(model, nullptr);
  const auto all = read_fixture_cases("lora/all_r4"), rs = read_fixture_cases("lora/rslora_qv");
  const auto base = read_fixture_cases("llama");
  // Empty slots: the base runs as without LoRA, and a step naming a slot is refused.
  FixtureRun plain = run_adapter_case(*model, *backend, base[0], 0);
  EXPECT_LT(plain.max_abs_diff, kLogitTol);
  auto kv = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
  StepBatch b = make_step({{0, {1, 2, 3}, 0, false}}, kPageSize, kPages);
  b.lora = {2};
  auto buf = backend->allocate(256 * sizeof(float));
  Status st = model->forward(b, *kv, buf->view(DType::f32, {1, 256}));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("free slot"), std::string::npos) << st.to_string();

  ASSERT_TRUE(model->load_lora(2, {"rs", fixture_dir("lora/rslora_qv")}).is_ok());
  ASSERT_TRUE(model->load_lora(1, {"all", fixture_dir("lora/all_r4")}).is_ok());
  for (size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const FixtureRun a = run_adapter_case(*model, *backend, all[i], 1), r = run_adapter_case(*model, *backend, rs[i], 2);
    EXPECT_LT(a.max_abs_diff, kLogitTol);
    EXPECT_EQ(a.greedy, all[i].greedy);
    EXPECT_LT(r.max_abs_diff, kLogitTol);
    EXPECT_EQ(r.greedy, rs[i].greedy);
  }
  // Slot 1 freed: refused; then slot 1 takes "rs" too and serves it exactly.
  ASSERT_TRUE(model->unload_lora(1).is_ok());
  b.lora = {1};
  st = model->forward(b, *kv, buf->view(DType::f32, {1, 256}));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument) << st.to_string();
  ASSERT_TRUE(model->load_lora(1, {"rs", fixture_dir("lora/rslora_qv")}).is_ok());
  const FixtureRun again = run_adapter_case(*model, *backend, rs[0], 1);
  EXPECT_LT(again.max_abs_diff, kLogitTol);
  EXPECT_EQ(again.greedy, rs[0].greedy);
  // Outside the slots, or a bad adapter: refused, and a failed load leaves the slot free.
  EXPECT_EQ(model->load_lora(3, {"x", fixture_dir("lora/all_r4")}).code(), StatusCode::invalid_argument);
  EXPECT_FALSE(model->load_lora(1, {"x", fixture_dir("llama")}).is_ok());  // no adapter files
  st = model->forward(b, *kv, buf->view(DType::f32, {1, 256}));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument) << "the failed load left slot 1 free";
}

TEST(Lora, ModelWithoutSlotsRefusesRuntimeLoads) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_with({}, *backend);
  ASSERT_NE(model, nullptr);
  const Status st = model->load_lora(1, {"all", fixture_dir("lora/all_r4")});
  EXPECT_EQ(st.code(), StatusCode::unsupported) << st.to_string();
}

TEST(LoraConfig, RefusesWhatItCannotRun) {
  const std::string ok = R"({"r": 4, "lora_alpha": 8, "target_modules": ["q_proj"]})";
  ASSERT_TRUE(parse_lora_config(ok, "x").has_value());
  EXPECT_FLOAT_EQ(parse_lora_config(ok, "x")->scale(), 2.0f);
  auto rs = parse_lora_config(R"({"r": 4, "lora_alpha": 8, "use_rslora": true, "target_modules": ["q_proj"]})", "x");
  ASSERT_TRUE(rs.has_value());
  EXPECT_FLOAT_EQ(rs->scale(), 4.0f);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"r": 4, "target_modules": ".*\\.(q|v)_proj"})", "regex string"},
      {R"({"r": 4, "target_modules": ["lm_head"]})", "'lm_head' is not supported"},
      {R"({"r": 4, "bias": "all", "target_modules": ["q_proj"]})", "bias"},
      {R"({"r": 4, "modules_to_save": ["lm_head"], "target_modules": ["q_proj"]})", "modules_to_save"},
      {R"({"r": 4, "use_dora": true, "target_modules": ["q_proj"]})", "use_dora"},
      {R"({"r": 4, "fan_in_fan_out": true, "target_modules": ["q_proj"]})", "fan_in_fan_out"},
      {R"({"r": 0, "target_modules": ["q_proj"]})", "r must be"},
      {R"({"r": 4})", "target_modules is missing"},
      {R"({"r": 4, "peft_type": "IA3", "target_modules": ["q_proj"]})", "peft_type"},
      {"not json", "not valid JSON"},
  };
  for (const auto& [text, want] : bad) {
    auto c = parse_lora_config(text, "x");
    ASSERT_FALSE(c.has_value()) << text;
    EXPECT_NE(c.status().message().find(want), std::string::npos) << c.status().to_string();
  }
  // An empty modules_to_save, null layers_to_transform: nothing to refuse.
  EXPECT_TRUE(parse_lora_config(R"({"r": 2, "modules_to_save": [], "layers_to_transform": null,
                                    "target_modules": ["self_attn.q_proj"]})", "x").has_value());
}

// A q_proj-only adapter of rank 2 for the llama fixture (hidden 64, q width 64, 2 layers), with
// `edit` changing its tensor list before it is written.
template <typename Edit>
std::string adapter_error(Edit edit, int max_rank = 16) {
  const TempDir dir("lora");
  write_text(dir.file("adapter_config.json"), R"({"r": 2, "lora_alpha": 4, "target_modules": ["q_proj"]})");
  std::vector<StEntry> entries;
  for (int l = 0; l < 2; ++l) {
    const std::string p = "base_model.model.model.layers." + std::to_string(l) + ".self_attn.q_proj.";
    entries.push_back({p + "lora_A.weight", "F32", {2, 64}, std::vector<uint8_t>(2 * 64 * 4, 0)});
    entries.push_back({p + "lora_B.weight", "F32", {64, 2}, std::vector<uint8_t>(64 * 2 * 4, 0)});
  }
  edit(entries);
  write_safetensors_file(dir.file("adapter_model.safetensors"), entries);
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions opts;
  opts.progress = false;
  opts.loras = {{"t", dir.str()}};
  opts.max_lora_rank = max_rank;
  auto m = Model::load(fixture_dir("llama"), *backend, opts);
  return m ? "" : m.status().to_string();
}

TEST(LoraAdapter, BadFilesGetClearErrors) {
  EXPECT_EQ(adapter_error([](auto&) {}), "");
  EXPECT_NE(adapter_error([](auto& e) { e.pop_back(); }).find("lacks layers.1.q_proj.lora_B.weight"), std::string::npos);
  EXPECT_NE(adapter_error([](auto& e) { e[0].shape = {2, 32}; e[0].bytes.resize(2 * 32 * 4); }).find("[2, 64]"),
            std::string::npos);
  EXPECT_NE(adapter_error([](auto& e) { e[0].name = "base_model.model.model.layers.7.self_attn.q_proj.lora_A.weight"; })
                .find("has 2 layers"),
            std::string::npos);
  EXPECT_NE(adapter_error([](auto& e) { e.push_back({"base_model.model.lm_head.lora_A.weight", "F32", {2, 64},
                                                      std::vector<uint8_t>(2 * 64 * 4, 0)}); })
                .find("not a LoRA A/B weight"),
            std::string::npos);
  EXPECT_NE(adapter_error([](auto& e) { e[0].name = "base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight"; })
                .find("which target_modules does not list"),
            std::string::npos);
  EXPECT_NE(adapter_error([](auto&) {}, 1).find("exceeds --max-lora-rank 1"), std::string::npos);
}

TEST(LoraAdapter, DuplicateNamesAndMissingDirectoriesAreRefused) {
  auto backend = make_cpu_backend({.n_threads = 1});
  std::string error;
  EXPECT_EQ(load_with({{"a", fixture_dir("lora/all_r4")}, {"a", fixture_dir("lora/rslora_qv")}}, *backend, &error),
            nullptr);
  EXPECT_NE(error.find("given twice"), std::string::npos) << error;
  EXPECT_EQ(load_with({{"a", "/nonexistent/adapter"}}, *backend, &error), nullptr);
  EXPECT_NE(error.find("/nonexistent/adapter/adapter_config.json"), std::string::npos) << error;
}

TEST(LoraAdapter, MixtureOfExpertsModelsAreRefused) {
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions opts;
  opts.progress = false;
  opts.loras = fixture_loras();
  auto m = Model::load(fixture_dir("qwen3_moe"), *backend, opts);
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.status().message().find("mixture-of-experts"), std::string::npos) << m.status().to_string();
}

}  // namespace
}  // namespace brigade::testing
