// What the GGUF tests of the Llama decoder's relatives share (gguf_llama_variants_test.cpp,
// gguf_cohere_hunyuan_test.cpp): a fixture's model.gguf, its config, and a refused file.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/model_config.h"

namespace brigade::testing {

inline std::string gguf_path(const std::string& fixture) { return fixture_dir(fixture) + "/model.gguf"; }

// A file of `kv` and zero `tensors` at `path` is refused with `code`, the message naming `key`.
inline void expect_refused(const std::string& path, const std::vector<GgufKv>& kv,
                           const std::vector<std::pair<std::string, std::vector<uint64_t>>>& tensors, StatusCode code,
                           const std::string& key) {
  const Status bad = open_gguf_zeros(path, kv, tensors);
  EXPECT_EQ(bad.code(), code) << key << ": " << bad.to_string();
  EXPECT_NE(bad.message().find(key), std::string::npos) << bad.message();
}

inline ModelConfig open_config(const std::string& fixture) {
  auto ck = Checkpoint::open(gguf_path(fixture));
  EXPECT_TRUE(ck.has_value()) << fixture << ": " << ck.status().to_string();
  return ck ? (*ck)->config() : ModelConfig{};
}

}  // namespace brigade::testing
