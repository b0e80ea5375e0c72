// Helpers of the tests that check one Backend op against a reference file written by
// scripts/make_fixtures.py (kda_op.json, lightning_op.json).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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

// One sequence's step of a recurrent op: rows [0, n) in state slot 1, `fresh` or continuing its
// state, saving a snapshot after `save_after` rows into slot 0 (0: none); the tensors stay alive
// as long as this.
struct OneSequenceStep {
  OwnedTensor q_start, slot, fresh, save_rows, save_slots;
  SsmSeqs seqs;
  OneSequenceStep(Backend& b, int64_t n, int32_t is_fresh, int32_t save_after) {
    const std::vector<int32_t> qs = {0, static_cast<int32_t>(n)}, sl = {1}, fr = {is_fresh}, sr = {save_after}, ss = {0};
    q_start = upload(b, DType::i32, 1, 2, qs.data());
    slot = upload(b, DType::i32, 1, 1, sl.data());
    fresh = upload(b, DType::i32, 1, 1, fr.data());
    save_rows = upload(b, DType::i32, 1, 1, sr.data());
    save_slots = upload(b, DType::i32, 1, 1, ss.data());
    seqs = SsmSeqs{q_start.tensor, slot.tensor, fresh.tensor, 1, save_rows.tensor, save_slots.tensor};
  }
};

// The op's outputs [rows, H P] and slot 1's state, stored [H, P, N], against the reference's
// outputs and state [H, N, P] (transformers' layout): each max |diff| within `tol`, recorded as the
// test's max_abs_diff property.
inline void expect_outputs_and_state(const float* out, const std::vector<float>& want_out, const float* state,
                                     const std::vector<float>& want_state, int64_t H, int64_t N, int64_t P, float tol) {
  float worst = 0.0f;
  for (size_t i = 0; i < want_out.size(); ++i) worst = std::max(worst, std::fabs(out[i] - want_out[i]));
  float worst_state = 0.0f;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < P; ++j)
        worst_state = std::max(worst_state, std::fabs(state[(h * P + j) * N + i] -
                                                      want_state[static_cast<size_t>((h * N + i) * P + j)]));
  EXPECT_LE(worst, tol);
  EXPECT_LE(worst_state, tol);
  char measured[64];
  std::snprintf(measured, sizeof(measured), "out %.3g, state %.3g", worst, worst_state);
  ::testing::Test::RecordProperty("max_abs_diff", measured);
}

}  // namespace brigade::testing
