// Helpers of the tests of checkpoints read through another architecture's config or tensors
// (InternLM, ChatGLM, MiniCPM, the aliases): a fixture's config.json, refusals by field, and tensors
// whose rows say where they came from, to check how a fused tensor is taken apart.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "hf_fixture.h"
#include "models/mapped_file.h"
#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade::testing {

// tests/fixtures/<name>/config.json, parsed (null, the failure recorded, when it cannot be read).
inline nlohmann::json fixture_config(const std::string& name) {
  auto text = read_text_file(fixture_dir(name) + "/config.json");
  EXPECT_TRUE(text.has_value()) << text.status().to_string();
  return text ? nlohmann::json::parse(*text) : nlohmann::json();
}

// Each edit of `base` is refused by parse_hf_config, the message naming the field.
inline void expect_config_refused(const nlohmann::json& base,
                                  const std::vector<std::pair<std::function<void(nlohmann::json&)>, const char*>>& edits) {
  for (const auto& [edit, field] : edits) {
    nlohmann::json j = base;
    edit(j);
    const Status st = parse_hf_config(j.dump()).status();
    EXPECT_FALSE(st.is_ok()) << field;
    EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
  }
}

// An f32 tensor (a 2-D weight or a 1-D bias) whose row r holds r in every column, kept alive by `store`.
inline RawTensor numbered_rows(const std::string& name, std::vector<int64_t> shape, std::vector<std::vector<float>>& store) {
  const int64_t rows = shape[0], cols = shape.size() == 2 ? shape[1] : 1;
  std::vector<float>& v = store.emplace_back(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) v[static_cast<size_t>(r * cols + k)] = static_cast<float>(r);
  RawTensor t;
  t.name = name;
  t.file = "model.safetensors";
  t.dtype = DType::f32;
  t.shape = std::move(shape);
  t.bytes = {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)};
  return t;
}

// The first column of each of t's rows: the source rows of a numbered_rows tensor taken apart.
inline std::vector<int> source_rows(const RawTensor& t) {
  const int64_t cols = t.shape.size() == 2 ? t.shape[1] : 1;
  std::vector<int> out;
  for (int64_t r = 0; r < t.shape[0]; ++r) {
    float f;
    std::memcpy(&f, t.bytes.data() + static_cast<size_t>(r * cols) * sizeof(float), sizeof f);
    out.push_back(static_cast<int>(f));
  }
  return out;
}

}  // namespace brigade::testing
