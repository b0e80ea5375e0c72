// Reads the transformers reference fixtures (tests/fixtures/<name>/, written by
// scripts/make_fixtures.py) and runs a brigade model against them: logits of every prompt
// position in one prefill, then the greedy continuation one decode step at a time.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model_test_util.h"
#include "cpu/cpu_backend.h"
#include "models/checkpoint.h"
#include "models/classifier.h"
#include "models/deepseek.h"
#include "models/llama.h"
#include "models/mapped_file.h"
#include "models/state_space.h"
#include "models/tokenizer.h"

namespace brigade::testing {

// brigade against transformers, fp32 both sides (hf_fixture_test.cpp says how it was chosen).
constexpr float kLogitTol = 2e-4f;

// The classifier of the model at `path` (read_classifier with its tokenizer and `overrides`),
// failing the test when there is none.
inline ClassifierHead head_or_fail(const std::string& path, std::string_view overrides = "") {
  auto tok = Tokenizer::load(path);
  EXPECT_TRUE(tok.has_value()) << tok.status().to_string();
  auto head = read_classifier(path, overrides, tok ? tok->get() : nullptr);
  EXPECT_TRUE(head.has_value()) << head.status().to_string();
  EXPECT_TRUE(head.has_value() && head->has_value());
  return head.has_value() && head->has_value() ? **head : ClassifierHead();
}

// BRIGADE_FIXTURES_DIR, when set, takes the place of the source tree's tests/fixtures: binaries
// packed on one machine and run on another (scripts/gpu_check.sh) find the fixtures there.
inline std::string fixture_dir(const std::string& name) {
  const char* moved = std::getenv("BRIGADE_FIXTURES_DIR");
  return std::string(moved && *moved ? moved : BRIGADE_FIXTURES) + "/" + name;
}

struct FixtureCase {
  std::vector<int32_t> prompt;
  std::vector<std::vector<float>> logits;  // [prompt.size()][vocab]
  std::vector<int32_t> greedy;             // transformers' greedy continuation
  // deepseek fixtures: logits of the cached decode steps, step i fed greedy[i] ([greedy - 1][vocab])
  std::vector<std::vector<float>> decode_logits;
};

inline std::vector<FixtureCase> read_fixture_cases(const std::string& name) {
  auto text = read_text_file(fixture_dir(name) + "/expected.json");
  EXPECT_TRUE(text.has_value()) << text.status().to_string();
  if (!text) return {};
  const auto j = nlohmann::json::parse(*text);
  std::vector<FixtureCase> out;
  for (const auto& c : j.at("cases")) {
    FixtureCase fc;
    fc.prompt = c.at("prompt").get<std::vector<int32_t>>();
    fc.logits = c.at("logits").get<std::vector<std::vector<float>>>();
    fc.greedy = c.at("greedy").get<std::vector<int32_t>>();
    if (c.contains("decode_logits")) fc.decode_logits = c.at("decode_logits").get<std::vector<std::vector<float>>>();
    out.push_back(std::move(fc));
  }
  return out;
}

// log p(token) under a reference logits row (log_softmax in double).
inline double reference_logprob(const std::vector<float>& logits, int32_t token) {
  double mx = -INFINITY, sum = 0.0;
  for (float v : logits) mx = std::max(mx, static_cast<double>(v));
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  return static_cast<double>(logits[static_cast<size_t>(token)]) - mx - std::log(sum);
}

// What one model produced on one case.
struct FixtureRun {
  float max_abs_diff = 0.0f;  // over every prompt position's logits
  std::vector<float> logits;  // [prompt.size() * vocab] of the prefill
  std::vector<int32_t> greedy;
  // [greedy.size()][vocab]: the row greedy[i] was chosen from (the prefill's last row, then the
  // step fed greedy[i - 1])
  std::vector<std::vector<float>> greedy_logits;
};

// Prefill of the whole prompt (logits of every row), then greedy decode steps; the model must
// fit prompt + greedy in kPages * kPageSize positions.
inline FixtureRun run_fixture_case(Model& model, Backend& backend, const FixtureCase& fc) {
  constexpr int kPageSize = 16, kPages = 4;
  FixtureRun run;
  auto kv = KvCache::allocate(backend, model.kv_layout(kPages, kPageSize, DType::f32));
  EXPECT_TRUE(kv.has_value()) << kv.status().to_string();
  if (!kv) return run;
  const int vocab = model.config().vocab_size;
  SeqChunk prefill{0, fc.prompt, 0, /*all_logits=*/true};
  run.logits = run_step(model, backend, *kv, make_step({prefill}, kPageSize, kPages));
  const std::vector<float>& logits = run.logits;
  for (size_t r = 0; r < fc.logits.size(); ++r) {
    for (int v = 0; v < vocab; ++v) {
      const float d = std::fabs(logits[r * static_cast<size_t>(vocab) + static_cast<size_t>(v)] - fc.logits[r][static_cast<size_t>(v)]);
      run.max_abs_diff = std::max(run.max_abs_diff, std::isnan(d) ? INFINITY : d);
    }
  }
  const float* last = logits.data() + (fc.prompt.size() - 1) * static_cast<size_t>(vocab);
  std::vector<float> row(last, last + vocab);
  int n_past = static_cast<int>(fc.prompt.size());
  while (run.greedy.size() < fc.greedy.size()) {
    const int32_t next = argmax(row.data(), vocab);
    run.greedy.push_back(next);
    run.greedy_logits.push_back(std::move(row));
    row = run_step(model, backend, *kv, make_step({{0, {next}, n_past, false}}, kPageSize, kPages));
    ++n_past;
  }
  return run;
}

// Prefill, then one decode step per greedy token of transformers' (fed the same tokens, pages of 4
// so steps cross pages); returns the worst difference of a decode step's logits from the
// fixture's decode_logits (transformers' cached decode) and expects each step's argmax to be the
// next greedy token.
inline float decode_max_diff(Model& model, Backend& backend, const FixtureCase& fc) {
  constexpr int kPageSize = 4, kPagesPerSeq = 16;
  EXPECT_EQ(fc.decode_logits.size(), fc.greedy.size() - 1);
  auto kv = KvCache::allocate(backend, model.kv_layout(kPagesPerSeq, kPageSize, DType::f32));
  EXPECT_TRUE(kv.has_value());
  if (!kv) return INFINITY;
  run_step(model, backend, *kv, make_step({{0, fc.prompt, 0, false}}, kPageSize, kPagesPerSeq));
  int n_past = static_cast<int>(fc.prompt.size());
  float worst = 0.0f;
  for (size_t i = 0; i < fc.decode_logits.size(); ++i, ++n_past) {
    const auto logits = run_step(model, backend, *kv, make_step({{0, {fc.greedy[i]}, n_past, false}}, kPageSize, kPagesPerSeq));
    for (size_t v = 0; v < fc.decode_logits[i].size(); ++v)
      worst = std::max(worst, std::fabs(logits[v] - fc.decode_logits[i][v]));
    EXPECT_EQ(argmax(logits.data(), model.config().vocab_size), fc.greedy[i + 1]) << "step " << i;
  }
  return worst;
}

// Max |Δ| between logits rows [r, vocab] and the fixture's rows first, first + 1, ...
inline float rows_diff(const std::vector<float>& logits, const FixtureCase& fc, size_t first, int vocab) {
  float worst = 0.0f;
  const size_t w = static_cast<size_t>(vocab);
  for (size_t r = 0; r * w < logits.size(); ++r)
    for (size_t v = 0; v < w; ++v) worst = std::max(worst, std::fabs(logits[r * w + v] - fc.logits[first + r][v]));
  return worst;
}

// fc's prompt prefilled in steps of `chunk` tokens (pages of 4, so chunks cross pages); the worst
// difference of any row's logits from the fixture's prefill logits.
inline float chunked_max_diff(Model& model, Backend& backend, const FixtureCase& fc, int chunk) {
  constexpr int kPageSize = 4, kPages = 16;
  auto kv = KvCache::allocate(backend, model.kv_layout(kPages, kPageSize, DType::f32));
  EXPECT_TRUE(kv.has_value());
  if (!kv) return INFINITY;
  const int n = static_cast<int>(fc.prompt.size());
  float worst = 0.0f;
  for (int begin = 0; begin < n; begin += chunk) {
    const int end = std::min(n, begin + chunk);
    const std::vector<int32_t> part(fc.prompt.begin() + begin, fc.prompt.begin() + end);
    const auto logits = run_step(model, backend, *kv, make_step({{0, part, begin, true}}, kPageSize, kPages));
    worst = std::max(worst, rows_diff(logits, fc, static_cast<size_t>(begin), model.config().vocab_size));
  }
  return worst;
}

// Two sequences in one step: fc's prompt's first `split` tokens in a step of their own, then its
// rest beside `other`'s whole prompt; the worst difference of either's rows from its fixture logits.
inline float mixed_step_max_diff(Model& model, Backend& backend, const FixtureCase& fc, const FixtureCase& other,
                                 int split) {
  constexpr int kPageSize = 4, kPages = 16;
  auto kv = KvCache::allocate(backend, model.kv_layout(2 * kPages, kPageSize, DType::f32));
  EXPECT_TRUE(kv.has_value());
  if (!kv) return INFINITY;
  const int vocab = model.config().vocab_size;
  const std::vector<int32_t> a(fc.prompt.begin(), fc.prompt.begin() + split), b(fc.prompt.begin() + split, fc.prompt.end());
  run_step(model, backend, *kv, make_step({{0, a, 0, false}}, kPageSize, kPages));
  const auto logits =
      run_step(model, backend, *kv, make_step({{0, b, split, true}, {1, other.prompt, 0, true}}, kPageSize, kPages));
  const auto mid = logits.begin() + static_cast<std::ptrdiff_t>(b.size() * static_cast<size_t>(vocab));
  return std::max(rows_diff({logits.begin(), mid}, fc, static_cast<size_t>(split), vocab),
                  rows_diff({mid, logits.end()}, other, 0, vocab));
}

// fc's prompt whose first `cached` positions (whole pages of 4) another sequence computed: the
// second sequence's block table starts with those pages and it runs only the rest, as the prefix
// cache serves it. The worst difference of its rows from the fixture's; its last row's argmax
// must be the first greedy token.
inline float cached_prefix_max_diff(Model& model, Backend& backend, const FixtureCase& fc, int cached) {
  constexpr int kPageSize = 4, kPages = 16;
  auto kv = KvCache::allocate(backend, model.kv_layout(2 * kPages, kPageSize, DType::f32));
  EXPECT_TRUE(kv.has_value());
  if (!kv) return INFINITY;
  const int vocab = model.config().vocab_size;
  run_step(model, backend, *kv,
           make_step({{0, std::vector<int32_t>(fc.prompt.begin(), fc.prompt.begin() + cached), 0, false}}, kPageSize,
                     kPages));
  StepBatch step = make_step({{1, std::vector<int32_t>(fc.prompt.begin() + cached, fc.prompt.end()), cached, true}},
                             kPageSize, kPages);
  for (int p = 0; p < cached / kPageSize; ++p) step.block_table[static_cast<size_t>(p)] = p;  // sequence 0's pages
  const auto logits = run_step(model, backend, *kv, step);
  EXPECT_EQ(argmax(logits.data() + logits.size() - static_cast<size_t>(vocab), vocab), fc.greedy.front());
  return rows_diff(logits, fc, static_cast<size_t>(cached), vocab);
}

// Every case of `fixture` on `model`: each prompt position's logits within `tol` of the fixture's,
// transformers' greedy tokens, and (where the fixture has them) the decode steps fed its tokens
// within `tol` of its cached decode logits.
inline void expect_fixture_cases_match(Model& model, Backend& backend, const std::string& fixture, float tol) {
  const auto cases = read_fixture_cases(fixture);
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& fc : cases) {
    const FixtureRun run = run_fixture_case(model, backend, fc);
    EXPECT_LE(run.max_abs_diff, tol) << fixture << ", prompt of " << fc.prompt.size();
    EXPECT_EQ(run.greedy, fc.greedy) << fixture << ", prompt of " << fc.prompt.size();
    if (!fc.decode_logits.empty()) {
      EXPECT_LE(decode_max_diff(model, backend, fc), tol) << fixture << ", prompt of " << fc.prompt.size();
    }
  }
}

// Whether a run with quantized weights or activations follows greedy references (`refs`: the
// fixture's tokens and those of the reference run quantized alike): its longest common prefix
// with one of them is at least half the tokens, or it leaves that reference at a near tie that
// any error of size `tol` may flip (the continuation then goes its own way): its first token
// differs where the reference's top two logits at the last prompt position are within `tol` of
// each other, or a later one where the run's own logits put the reference's token within `tol`
// of the token it took (both fed the same tokens until then).
inline ::testing::AssertionResult greedy_follows(const FixtureRun& run, const FixtureCase& fc,
                                                 const std::vector<std::vector<int32_t>>& refs, double tol) {
  size_t best = 0;
  double later_margin = INFINITY;  // at the divergence from a reference followed for a while
  for (const auto& ref : refs) {
    size_t n = 0;
    while (n < run.greedy.size() && n < ref.size() && run.greedy[n] == ref[n]) ++n;
    best = std::max(best, n);
    if (n > 0 && n < run.greedy.size() && n < ref.size() && n < run.greedy_logits.size()) {
      const std::vector<float>& row = run.greedy_logits[n];
      later_margin = std::min(later_margin, static_cast<double>(row[static_cast<size_t>(run.greedy[n])]) -
                                                row[static_cast<size_t>(ref[n])]);
    }
  }
  if (best >= fc.greedy.size() / 2) return ::testing::AssertionSuccess();
  std::vector<float> last = fc.logits.back();
  std::partial_sort(last.begin(), last.begin() + 2, last.end(), std::greater<float>());
  const double margin = last[0] - last[1];
  if (best == 0 && margin <= tol) return ::testing::AssertionSuccess() << "near tie of " << margin;
  if (later_margin <= tol) return ::testing::AssertionSuccess() << "later near tie of " << later_margin;
  return ::testing::AssertionFailure() << "greedy tokens follow the reference for " << best << " of " << fc.greedy.size()
                                       << " (first-token margin " << margin << ", margin at the divergence "
                                       << later_margin << ", tolerance " << tol << ")";
}

// safetensors' name of a dtype a fixture stores.
inline const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::f8e4m3: return "F8_E4M3";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::i8: return "I8";
    case DType::u8: return "U8";
    default: return "F32";
  }
}

// Writes fixture `fixture`'s tensors, with `edit` applied, and its config.json (changed by
// `edit_config`) into `dir`.
inline void write_edited_fixture(const std::string& fixture, const TempDir& dir,
                                 const std::function<void(std::vector<StEntry>&)>& edit,
                                 const std::function<void(nlohmann::json&)>& edit_config = {}) {
  auto ck = Checkpoint::open(fixture_dir(fixture));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  std::vector<StEntry> entries;
  for (const auto& [name, t] : (*ck)->tensors())
    entries.push_back({name, safetensors_dtype(t.dtype), t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())});
  edit(entries);
  write_safetensors_file(dir.file("model.safetensors"), entries);
  auto config = nlohmann::json::parse(read_text_file(fixture_dir(fixture) + "/config.json").value());
  if (edit_config) edit_config(config);
  write_text(dir.file("config.json"), config.dump());
}

// Model::load's error message on the fixture edited as write_edited_fixture does (a test failure,
// and "", when it loads).
inline std::string edited_fixture_load_error(const std::string& fixture,
                                             const std::function<void(std::vector<StEntry>&)>& edit,
                                             const std::function<void(nlohmann::json&)>& edit_config = {}) {
  const TempDir dir("edited_" + fixture);
  write_edited_fixture(fixture, dir, edit, edit_config);
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions o;
  o.progress = false;
  auto m = Model::load(dir.str(), *backend, o);
  EXPECT_FALSE(m.has_value());
  return m ? "" : m.status().message();
}

// The entry called `name` (a test failure, and the first, when there is none).
inline StEntry& st_entry(std::vector<StEntry>& es, const std::string& name) {
  for (auto& e : es)
    if (e.name == name) return e;
  ADD_FAILURE() << "no tensor " << name;
  return es.front();
}

// The tests' load options: steps of up to 64 tokens, no progress bar.
inline LoadOptions test_load_options() {
  LoadOptions opts;
  opts.max_batch_tokens = 64;
  opts.progress = false;
  return opts;
}

inline std::unique_ptr<Model> load_or_fail(const std::string& path, Backend& backend, const LoadOptions& opts) {
  auto m = Model::load(path, backend, opts);
  EXPECT_TRUE(m.has_value()) << m.status().to_string();
  return m ? std::move(*m) : nullptr;
}

inline std::unique_ptr<Model> load_or_fail(const std::string& path, Backend& backend,
                                           std::optional<DType> weights = std::nullopt) {
  LoadOptions opts = test_load_options();
  opts.weight_dtype = weights;
  return load_or_fail(path, backend, opts);
}

// Max |Δlogit| on `fixture`'s longest prompt with its weights but config.json changed by `edit`.
template <typename Edit>
float max_diff_with_config(const std::string& fixture, Edit edit) {
  const TempDir dir("config_edit");
  const std::string src = fixture_dir(fixture);
  std::filesystem::copy_file(src + "/model.safetensors", dir.file("model.safetensors"));
  auto text = read_text_file(src + "/config.json");
  EXPECT_TRUE(text.has_value());
  if (!text) return 0;
  auto j = nlohmann::json::parse(*text);
  edit(j);
  write_text(dir.file("config.json"), j.dump());
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_or_fail(dir.str(), *backend);
  const auto cases = read_fixture_cases(fixture);
  EXPECT_FALSE(cases.empty());
  if (!model || cases.empty()) return 0;
  return run_fixture_case(*model, *backend, cases.back()).max_abs_diff;
}

// Max |Δlogit| on `fixture`'s longest prompt with the checkpoint at `path` (default: the fixture's
// directory) loaded with its config changed by `edit` after parsing (a rule that no config field
// turns off: Gemma's +1 of the norms, the embedding scale), weights as stored or `weights`; by
// load_llama, or load_deepseek for deepseek_v2 / deepseek_v3.
inline float max_diff_with_rules(const std::string& fixture, const std::function<void(ModelConfig&)>& edit,
                                 const std::string& path = "", std::optional<DType> weights = std::nullopt) {
  auto ck = Checkpoint::open(path.empty() ? fixture_dir(fixture) : path);
  EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
  if (!ck) return 0;
  ModelConfig c = (*ck)->config();
  edit(c);
  auto edited = Checkpoint::from_memory((*ck)->path(), c, (*ck)->tensors());
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions opts;
  opts.max_batch_tokens = 64;
  opts.weight_dtype = weights;
  const bool mla = c.is_mla();  // deepseek_v2 / v3, mistral4, glm4_moe_lite
  auto model = c.recurrent() ? load_state_space(*edited, *backend, opts)  // the hybrids (Bamba)
               : mla         ? load_deepseek(*edited, *backend, opts)
                             : load_llama(*edited, *backend, opts);
  EXPECT_TRUE(model.has_value()) << model.status().to_string();
  if (!model) return 0;
  return run_fixture_case(**model, *backend, read_fixture_cases(fixture).back()).max_abs_diff;
}

// decode_max_diff of every case of `fixture` on a CPU model of it: each within kLogitTol, each
// recorded as a test property.
inline void expect_decode_steps_match(const std::string& fixture) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto m = Model::load(fixture_dir(fixture), *backend, test_load_options());
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  for (const auto& fc : read_fixture_cases(fixture)) {
    const float d = decode_max_diff(**m, *backend, fc);
    EXPECT_LE(d, kLogitTol) << fixture << ", prompt of " << fc.prompt.size();
    ::testing::Test::RecordProperty(fixture + "_decode_max_abs_diff_" + std::to_string(fc.prompt.size()),
                                    std::to_string(d));
  }
}

// A model's own loader that takes the checkpoint (load_gemma3n, load_gemma4).
using CheckpointLoader =
    std::function<Expected<std::unique_ptr<Model>>(std::unique_ptr<Checkpoint>, Backend&, const LoadOptions&)>;

// Max |Δlogit| on `fixture`'s longest prompt with its config changed by `edit` after parsing,
// loaded by `load`.
inline float max_diff_with_loader(const std::string& fixture, const std::function<void(ModelConfig&)>& edit,
                                  const CheckpointLoader& load) {
  auto ck = Checkpoint::open(fixture_dir(fixture));
  EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
  if (!ck) return 0;
  ModelConfig c = (*ck)->config();
  edit(c);
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load(Checkpoint::from_memory((*ck)->path(), c, (*ck)->tensors()), *backend, test_load_options());
  EXPECT_TRUE(model.has_value()) << model.status().to_string();
  if (!model) return 0;
  return run_fixture_case(**model, *backend, read_fixture_cases(fixture).back()).max_abs_diff;
}

}  // namespace brigade::testing
