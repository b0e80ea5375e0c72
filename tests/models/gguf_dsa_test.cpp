// DeepSeek Sparse Attention in GGUF, written by llama.cpp's own converter from the deepseek_v32
// and glm_moe_dsa checkpoints (scripts/make_gguf_dsa_fixtures.py), against llama.cpp's run of
// each file (expected.json, llama-cpp-python 0.3.36, F32 KV cache), which computes the indexer's
// top-k itself (src/models/deepseek32.cpp, glm-dsa.cpp; their Hadamard rotation of q and k is
// orthogonal and leaves the scores as they are):
//   gguf_deepseek_v32  arch deepseek32: the indexer's tensors blk.N.indexer.*, its shapes in
//                      attention.indexer.*, NEOX RoPE of its q and k; YaRN as llama.cpp's deepseek2
//                      reads it (so its logits leave transformers' past the original context, as
//                      for deepseek2 files: llamacpp.json's transformers_max_diff);
//   gguf_glm_moe_dsa   arch glm-dsa: attention.indexer.types (layer 1 shared), pairs RoPE.
#include <gtest/gtest.h>

#include "cpu/cpu_backend.h"
#include "gguf_variants_util.h"
#include "gguf_vocab.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::gguf_path;
using testing::open_config;

constexpr float kTol = 1e-4f;  // F32 files against llama.cpp

// The indexer as llama.cpp reads the file equals the checkpoint's config (transformers').
TEST(GgufDsa, ConfigAsLlamaCppReadsIt) {
  for (const auto& [gguf, hf_name] : {std::pair{"gguf_deepseek_v32", "deepseek_v32"}, std::pair{"gguf_glm_moe_dsa", "glm_moe_dsa"}}) {
    SCOPED_TRACE(gguf);
    const ModelConfig g = open_config(gguf);
    auto hf = Checkpoint::open(fixture_dir(hf_name));
    ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
    const ModelConfig& h = (*hf)->config();
    EXPECT_EQ(g.arch, h.arch);
    EXPECT_EQ(g.dsa.n_heads, h.dsa.n_heads);
    EXPECT_EQ(g.dsa.head_dim, h.dsa.head_dim);
    EXPECT_EQ(g.dsa.topk, h.dsa.topk);
    EXPECT_EQ(g.dsa.rope_style, h.dsa.rope_style);
    EXPECT_EQ(g.dsa.shared, h.dsa.shared);
    EXPECT_EQ(g.q_lora_rank, h.q_lora_rank);
  }
}

// Every case of expected.json (llama.cpp's run) within kTol at every prompt position and cached
// decode step, its greedy tokens.
TEST(GgufDsa, FilesMatchLlamaCpp) {
  auto backend = make_cpu_backend({.n_threads = 2});
  for (const char* fixture : {"gguf_deepseek_v32", "gguf_glm_moe_dsa"}) {
    SCOPED_TRACE(fixture);
    if (auto model = testing::load_or_fail(gguf_path(fixture), *backend))
      testing::expect_fixture_cases_match(*model, *backend, fixture, kTol);
  }
}

}  // namespace
}  // namespace brigade
