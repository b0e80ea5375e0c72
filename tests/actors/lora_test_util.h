// Shared by the engine's LoRA tests (engine_lora_test.cpp, engine_lora_runtime_test.cpp): requests
// under an adapter, and the base/"all"/"rs" request mix whose tokens each have a PEFT reference
// (tests/fixtures/lora, scripts/make_lora_fixtures.py).
#pragma once

#include <string>
#include <vector>

#include "brigade/engine.h"
#include "tests/engine_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade::testing {

inline GenerateOptions greedy_under(const std::vector<int32_t>& prompt, int n, const std::string& lora) {
  GenerateOptions r = greedy_ids(prompt, n);
  r.lora = lora;
  return r;
}

// Base, adapter "all" and adapter "rs" on every fixture prompt (submit them together so they share
// steps), with the tokens each must give.
struct LoraMix {
  std::vector<GenerateOptions> reqs;
  std::vector<std::vector<int32_t>> want;
};
inline LoraMix lora_mix() {
  const auto base = read_fixture_cases("llama"), all = read_fixture_cases("lora/all_r4"),
             rs = read_fixture_cases("lora/rslora_qv");
  LoraMix m;
  for (size_t i = 0; i < base.size(); ++i) {
    const int n = static_cast<int>(base[i].greedy.size());
    m.reqs.push_back(greedy_under(base[i].prompt, n, ""));
    m.want.push_back(base[i].greedy);
    m.reqs.push_back(greedy_under(all[i].prompt, n, "all"));
    m.want.push_back(all[i].greedy);
    m.reqs.push_back(greedy_under(rs[i].prompt, n, "rs"));
    m.want.push_back(rs[i].greedy);
  }
  return m;
}

// Runs the mix on `engine`; each request must give its reference's tokens.
inline void expect_lora_mix(Engine& engine) {
  const LoraMix m = lora_mix();
  ASSERT_FALSE(m.reqs.empty());
  const auto got = generate_all(engine, m.reqs);
  for (size_t i = 0; i < m.reqs.size(); ++i)
    EXPECT_EQ(got[i], m.want[i]) << "request " << i << " (lora '" << m.reqs[i].lora << "')";
}

}  // namespace brigade::testing
