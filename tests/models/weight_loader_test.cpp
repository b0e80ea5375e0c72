// WeightLoader: which element type each kind of weight is asked for. With fp8 weights the linear
// layers go to the backend as f8e4m3 and the tables (embedding, lm_head) as bf16; the GPU test
// (tests/gpu/fp8_model_test.cpp) checks the bytes this leaves on a device that takes fp8.
#include <gtest/gtest.h>

#include "cpu/cpu_backend.h"
#include "model_test_util.h"
#include "models/checkpoint.h"
#include "models/make_model.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

TEST(WeightLoader, Fp8AsksForFp8MatricesAndBf16Tables) {
  testing::TempDir dir("loader_fp8");
  SyntheticModelSpec spec;
  spec.hidden_size = 64;
  spec.n_layers = 1;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.intermediate_size = 128;
  spec.vocab_size = 300;
  spec.tie_embeddings = false;
  spec.dtype = DType::f32;
  ASSERT_TRUE(write_synthetic_model(spec, dir.str()).is_ok());
  auto ck = Checkpoint::open(dir.str());
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  auto backend = make_cpu_backend({.n_threads = 1});

  WeightLoader fp8(**ck, *backend, DType::f8e4m3);
  for (const char* name : {"model.embed_tokens.weight", "lm_head.weight"}) {
    auto t = fp8.table(name, 300, 64);
    ASSERT_TRUE(t.has_value()) << name << ": " << t.status().to_string();
    EXPECT_EQ(t->tensor.dtype, DType::bf16) << name;
  }
  // The CPU backend has no fp8: the request reaches it as f8e4m3 and is refused there.
  auto down = fp8.matrix("model.layers.0.mlp.down_proj.weight", 64, 128);
  ASSERT_FALSE(down.has_value());
  EXPECT_NE(down.status().message().find("to f8e4m3"), std::string::npos) << down.status().message();
  auto gate_up = fp8.fused({"model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"}, {128, 128}, 64);
  ASSERT_FALSE(gate_up.has_value());
  EXPECT_NE(gate_up.status().message().find("to f8e4m3"), std::string::npos) << gate_up.status().message();

  // Any other type reaches tables and matrices alike.
  WeightLoader half(**ck, *backend, DType::f16);
  EXPECT_EQ(half.table("model.embed_tokens.weight", 300, 64)->tensor.dtype, DType::f16);
  EXPECT_EQ(half.matrix("model.layers.0.mlp.down_proj.weight", 64, 128)->tensor.dtype, DType::f16);
  WeightLoader kept(**ck, *backend, std::nullopt);
  EXPECT_EQ(kept.table("model.embed_tokens.weight", 300, 64)->tensor.dtype, DType::f32);
}

}  // namespace
}  // namespace brigade
