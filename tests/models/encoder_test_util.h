// What the encoder tests (bert_test.cpp, nomic_bert_test.cpp, modernbert_test.cpp) share: a case's
// typed ids, and every row's hidden state of
// whole prompts run in one step, as the engine runs an encoder's prompts.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include <nlohmann/json.hpp>

#include "kvstore/kv_layout.h"
#include "models/bert.h"
#include "models/model.h"
#include "tests/models/model_test_util.h"

namespace brigade::testing {

constexpr int kEncoderPageSize = 16, kEncoderPages = 8;  // 128 positions per sequence

// An expected.json case's ids with its token types (type_ids, when given) in bit 30
// (models/bert.h), as the engine sends a pair.
inline std::vector<int32_t> typed(const nlohmann::json& c) {
  auto ids = c["ids"].get<std::vector<int32_t>>();
  if (c.contains("type_ids")) {
    const auto types = c["type_ids"].get<std::vector<int>>();
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = with_token_type(ids[i], types[i]);
  }
  return ids;
}

// Every row's hidden state of `prompts` run whole, all in one step (sequence s in its own pages),
// in the order of the prompts. A failed forward is a test failure, or, with `status`, reported
// there; either way the result is then empty.
inline std::vector<std::vector<float>> encoder_hidden_states(Model& model, Backend& backend,
                                                             const std::vector<std::vector<int32_t>>& prompts,
                                                             Status* status = nullptr) {
  auto kv = KvCache::allocate(
      backend, model.kv_layout(kEncoderPages * static_cast<int>(prompts.size()), kEncoderPageSize, DType::f32));
  EXPECT_TRUE(kv.has_value());
  std::vector<SeqChunk> chunks;
  for (size_t s = 0; s < prompts.size(); ++s) chunks.push_back({static_cast<int>(s), prompts[s], 0, false});
  StepBatch batch = make_step(chunks, kEncoderPageSize, kEncoderPages);
  batch.logit_rows.clear();
  for (int r = 0; r < batch.n_tokens(); ++r) batch.hidden_rows.push_back(r);
  const int64_t hidden = model.config().hidden_size, n = batch.n_tokens();
  auto buf = backend.allocate(static_cast<size_t>(n * hidden) * sizeof(float));
  EXPECT_TRUE(buf.has_value());
  batch.hidden = buf->view(DType::f32, {n, hidden});
  const Status st = model.forward(batch, *kv, Tensor());
  if (status != nullptr) *status = st;
  else EXPECT_TRUE(st.is_ok()) << st.to_string();
  if (!st.is_ok()) return {};
  std::vector<float> host(static_cast<size_t>(n * hidden));
  backend.synchronize();
  backend.download(host.data(), batch.hidden);
  std::vector<std::vector<float>> out;
  for (int64_t r = 0; r < n; ++r) out.emplace_back(host.begin() + r * hidden, host.begin() + (r + 1) * hidden);
  return out;
}

// What forward says to one step of `chunk` (fresh KV pages): without logit rows, or with the
// last row's when `logits` (which an encoder refuses).
inline Status encoder_step_status(Model& model, Backend& backend, const SeqChunk& chunk, bool logits = false) {
  auto kv = KvCache::allocate(backend, model.kv_layout(kEncoderPages, kEncoderPageSize, DType::f32));
  EXPECT_TRUE(kv.has_value());
  StepBatch step = make_step({chunk}, kEncoderPageSize, kEncoderPages);
  if (!logits) step.logit_rows.clear();
  return model.forward(step, *kv, Tensor());
}

}  // namespace brigade::testing
