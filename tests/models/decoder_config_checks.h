// Config checks shared by the tests of the Llama decoder's relatives (classic_decoders_test.cpp,
// llama_relatives_test.cpp, gpt_decoders_test.cpp, bloom_mpt_opt_test.cpp): a fixture's
// config.json parsed as edited, a refusal naming what was refused, the pieces `inspect` names,
// where a position table ends, and a fixture's tensors as stored.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hf_fixture.h"
#include "models/inspect.h"
#include "models/mapped_file.h"
#include "models/model_config.h"
#include "models/safetensors.h"

namespace brigade::testing {

using ConfigEdit = std::function<void(nlohmann::json&)>;

// The fixture `name`'s config.json, edited by `edit` (if any), as parse_hf_config reads it.
inline Expected<ModelConfig> parse_fixture(const std::string& name, const ConfigEdit& edit = {}) {
  auto j = nlohmann::json::parse(read_text_file(fixture_dir(name) + "/config.json").value());
  if (edit) edit(j);
  return parse_hf_config(j.dump());
}

// The fixture's config, edited, is refused with a message containing `what`.
inline void expect_config_refused(const std::string& name, const ConfigEdit& edit, const std::string& what) {
  auto c = parse_fixture(name, edit);
  ASSERT_FALSE(c.has_value()) << name << ": " << what;
  EXPECT_NE(c.status().message().find(what), std::string::npos) << c.status().message();
}

// `inspect` of each fixture names each of its pieces.
inline void expect_inspect_names(const std::vector<std::pair<std::string, std::vector<std::string>>>& want) {
  for (const auto& [name, pieces] : want) {
    auto info = inspect_model(fixture_dir(name));
    ASSERT_TRUE(info.has_value()) << info.status().to_string();
    const std::string text = format_model_info(*info);
    for (const std::string& piece : pieces) EXPECT_NE(text.find(piece), std::string::npos) << piece << "\n" << text;
  }
}

// A learned-positions fixture's table ends at `limit` (its max_position): a step at position
// limit - 1 runs, one at `limit` is refused by name.
inline void expect_positions_end_at(const std::string& fixture, int limit) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_or_fail(fixture_dir(fixture), *backend);
  ASSERT_NE(model, nullptr);
  auto kv = KvCache::allocate(*backend, model->kv_layout(8, 16, DType::f32));
  ASSERT_TRUE(kv.has_value());
  const int vocab = model->config().vocab_size;
  auto buf = backend->allocate(static_cast<size_t>(vocab) * sizeof(float));
  ASSERT_TRUE(buf.has_value());
  const Tensor logits = buf->view(DType::f32, {1, vocab});
  EXPECT_TRUE(model->forward(make_step({{0, {5}, limit - 1, false}}, 16, 8), *kv, logits).is_ok());
  const Status past = model->forward(make_step({{0, {5}, limit, false}}, 16, 8), *kv, logits);
  EXPECT_EQ(past.code(), StatusCode::invalid_argument);
  EXPECT_NE(past.message().find("max_position " + std::to_string(limit)), std::string::npos) << past.message();
}

// An f32 fixture's tensors as its model.safetensors stores them (Checkpoint::tensors are renamed
// already), to write a layout of the Hub's (another prefix, extra buffers) from.
inline std::vector<StEntry> stored_entries(const std::string& fixture) {
  std::vector<StEntry> out;
  auto file = MappedFile::open(fixture_dir(fixture) + "/model.safetensors");
  EXPECT_TRUE(file.has_value());
  if (!file) return out;
  std::map<std::string, RawTensor> tensors;
  EXPECT_TRUE(read_safetensors(*file, tensors).is_ok());
  for (const auto& [name, t] : tensors)
    out.push_back({name, "F32", t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())});
  return out;
}

}  // namespace brigade::testing
