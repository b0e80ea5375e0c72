// Helpers of the tests that check one Backend op against a reference file written by
// scripts/make_fixtures.py (kda_op.json, lightning_op.json).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/backend.h"
#include "models/mapped_file.h"
#include "models/step_inputs.h"

namespace brigade::testing {

// The JSON document at `path` (a test failure and null where it cannot be read).
inline nlohmann::json read_json_or_fail(const std::string& path) {
  auto text = read_text_file(path);
  EXPECT_TRUE(text.has_value()) << text.status().to_string();
  return text ? nlohmann::json::parse(*text) : nlohmann::json();
}

// A [rows, cols] tensor of type t in b's memory, holding `host` (when given).
inline OwnedTensor upload(Backend& b, DType t, int64_t rows, int64_t cols, const void* host) {
  auto o = alloc_tensor(b, t, rows, cols);
  EXPECT_TRUE(o.has_value()) << o.status().to_string();
  if (host != nullptr) b.upload(o->tensor, host);
  return std::move(*o);
}

}  // namespace brigade::testing
