// The MTP references scripts/make_fixtures.py (deepseek_v3_mtp, glm4_moe_mtp: expected.json) and
// scripts/make_gguf_fixtures.py (gguf_glm4moe: mtp.json) write, read for the model tests
// (tests/models/mtp_test.cpp) and the engine tests (tests/actors/engine_mtp_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "models/mapped_file.h"

namespace brigade::testing {

struct MtpCase {
  std::vector<int32_t> tokens;
  int target_greedy_from = 0;                    // the prompt's length: the rest is the target's greedy text
  std::vector<std::vector<float>> mtp_logits;    // [n - 1][vocab], teacher-forced
  std::vector<int32_t> chain_drafts;             // three greedy drafts after the whole sequence
  std::vector<std::vector<float>> chain_logits;  // [3][vocab]
};

// The cases of one reference file (a failed read fails the calling test and gives none).
inline std::vector<MtpCase> read_mtp_cases(const std::string& path) {
  auto text = read_text_file(path);
  EXPECT_TRUE(text.has_value()) << path;
  std::vector<MtpCase> out;
  if (!text) return out;
  const auto doc = nlohmann::json::parse(*text);  // alive across the loop
  for (const auto& c : doc.at("cases"))
    out.push_back({c.at("tokens").get<std::vector<int32_t>>(), c.at("target_greedy_from").get<int>(),
                   c.at("mtp_logits").get<std::vector<std::vector<float>>>(),
                   c.at("chain_drafts").get<std::vector<int32_t>>(),
                   c.at("chain_logits").get<std::vector<std::vector<float>>>()});
  return out;
}

}  // namespace brigade::testing
