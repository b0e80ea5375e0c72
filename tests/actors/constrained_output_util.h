// Shared by the constrained-output engine tests (engine_regex_test, engine_grammar_test,
// engine_thinking_budget_test): the synthetic byte-level model they run, and one constraint
// sampled over every executor path.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "brigade/engine.h"
#include "models/make_model.h"
#include "tests/engine_test_util.h"

namespace brigade::testing {

constexpr int32_t byte_id(char c) { return 3 + static_cast<uint8_t>(c); }  // synthetic byte tokens

// A suite over one synthetic byte-level model (512 tokens: 3 specials, then one per byte),
// written once for the suite's process.
class SyntheticByteModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / ("brigade_byte_model_" + std::to_string(::getpid()));
    Status st = write_synthetic_model(tiny_llama(512, 256, 17), dir_.string());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static EngineOptions options() { return test_engine_options(dir_.string(), 1); }
  static inline std::filesystem::path dir_;
};

struct SampledConstraint {
  std::function<void(GenerateOptions&)> constrain;  // sets response_format and the constraint's text
  int max_tokens = 0;
  std::pair<int32_t, float> favoured;               // a token pushed up so that outputs close
  std::function<bool(const std::string&)> whole;    // an output that ended is valid
  std::function<bool(const std::string&)> prefix;   // one cut by max_tokens can still be completed
};

// Ten seeds (greedy first, then sampled; EOS at +100 on even seeds, so it comes as soon as the mask
// lets it) on every executor path: each output that stopped passes `whole`, each cut by max_tokens
// passes `prefix`, at least five stop, and the same seeds give the same tokens on every path.
inline void expect_constrained_on_every_path(const EngineOptions& base, const SampledConstraint& c) {
  std::vector<std::vector<int32_t>> first;
  for (auto& [name, o] : variants(base)) {
    auto engine = create_engine(o);
    ASSERT_NE(engine, nullptr);
    std::vector<std::vector<int32_t>> outs;
    int n_closed = 0;
    for (uint64_t seed = 0; seed < 10; ++seed) {
      GenerateOptions r = greedy_ids({9, 10, 11}, c.max_tokens);
      r.ignore_eos = false;
      c.constrain(r);
      r.sampling.temperature = seed == 0 ? 0.0f : 1.0f;
      r.sampling.seed = seed;
      r.sampling.logit_bias = {{kSyntheticEosId, seed % 2 == 0 ? 100.0f : 0.0f}, c.favoured};
      auto out = engine->generate(r);
      ASSERT_TRUE(out.has_value()) << name << ": " << out.status().to_string();
      if (out->finish == FinishReason::stop) {
        ++n_closed;
        EXPECT_TRUE(c.whole(out->text)) << name << ": '" << out->text << "'";
      } else {
        EXPECT_EQ(out->finish, FinishReason::length) << name;
        EXPECT_TRUE(c.prefix(out->text)) << name << ": '" << out->text << "'";
      }
      outs.push_back(out->token_ids);
    }
    EXPECT_GE(n_closed, 5) << name;
    if (first.empty()) first = outs;
    EXPECT_EQ(outs, first) << name << ": the same seeds give the same tokens on every path";
  }
}

}  // namespace brigade::testing
