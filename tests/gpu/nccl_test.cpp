// The NCCL communicator on one GPU (tp = 1, the most a one-GPU machine runs): the all-reduce of a
// single rank leaves f32 and bf16 tensors as they were, and a model forward whose blocks all-reduce
// through NCCL gives the logits of the same model without a communicator. Group sizes beyond the
// machine's GPUs are refused with the count.
#include "gpu/nccl_communicator.h"
#include "models/make_model.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/models/model_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

// Rank 0 of a one-GPU group on the shared backend's stream, or a skip when the device image has
// no libnccl (which gpu_check.sh reports, since it counts skips on a GPU machine as failures).
#define NCCL_RANK0(comm)                                                                        \
  BRIGADE_REQUIRE_GPU();                                                                      \
  auto comm##_group = make_nccl_group({{0, gpu()->stream()}});                                \
  if (!comm##_group && comm##_group.status().code() == StatusCode::unsupported)               \
    GTEST_SKIP() << comm##_group.status().to_string();                                        \
  ASSERT_TRUE(comm##_group.has_value()) << comm##_group.status().to_string();                 \
  std::unique_ptr<Communicator> comm = std::move((*comm##_group)[0])

TEST(Nccl, SingleRankAllReduceKeepsValues) {
  NCCL_RANK0(comm);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  std::mt19937 rng(3);
  const auto values = random_values(rng, 4099);  // already bf16-exact
  for (DType t : {DType::f32, DType::bf16}) {
    auto x = put(*gpu(), t, {4099}, values);
    ASSERT_TRUE(comm->all_reduce_sum(x.tensor).is_ok());
    EXPECT_EQ(get(*gpu(), x.tensor), values) << dtype_name(t);
  }
  std::vector<int32_t> ids(4);
  auto i = put_i32(*gpu(), {4}, ids);
  EXPECT_EQ(comm->all_reduce_sum(i.tensor).code(), StatusCode::invalid_argument);
  comm->abort("test done");
  EXPECT_EQ(comm->all_reduce_sum(put(*gpu(), DType::f32, {4}, {1, 2, 3, 4}).tensor).code(), StatusCode::cancelled);
}

TEST(Nccl, MoreRanksThanGpusIsRefused) {
  BRIGADE_REQUIRE_GPU();
  std::vector<NcclRank> ranks;
  for (int d = 0; d <= cuda_device_count(); ++d) ranks.push_back({d, gpu()->stream()});
  auto group = make_nccl_group(ranks);
  ASSERT_FALSE(group.has_value());
  if (group.status().code() == StatusCode::unsupported) GTEST_SKIP() << group.status().to_string();
  EXPECT_NE(group.status().message().find("GPU(s)"), std::string::npos) << group.status().message();
}

TEST(Nccl, Tp1ForwardThroughNcclMatchesTheUnshardedModel) {
  NCCL_RANK0(comm);
  testing::TempDir dir("gpu_nccl");
  SyntheticModelSpec spec;
  spec.hidden_size = 256;
  spec.n_layers = 2;
  spec.n_heads = 8;
  spec.n_kv_heads = 2;
  spec.intermediate_size = 512;
  spec.vocab_size = 1000;
  spec.seed = 21;
  ASSERT_TRUE(write_synthetic_model(spec, dir.str()).is_ok());
  std::vector<std::vector<float>> logits;
  for (Communicator* c : {static_cast<Communicator*>(nullptr), comm.get()}) {
    LoadOptions o;
    o.max_batch_tokens = 128;
    o.progress = false;
    o.communicator = c;
    auto m = Model::load(dir.str(), *gpu(), o);
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    auto kv = KvCache::allocate(*gpu(), (*m)->kv_layout(16, 16, DType::bf16));
    ASSERT_TRUE(kv.has_value()) << kv.status().to_string();
    std::vector<int32_t> p0(40), p1(9);
    for (size_t i = 0; i < p0.size(); ++i) p0[i] = static_cast<int32_t>((i * 37) % 1000);
    for (size_t i = 0; i < p1.size(); ++i) p1[i] = static_cast<int32_t>((i * 11 + 5) % 1000);
    const StepBatch prefill = testing::make_step({{0, p0, 0, true}, {1, p1, 0, false}}, 16, 8);
    std::vector<float> l = testing::run_step(**m, *gpu(), *kv, prefill);
    const StepBatch decode = testing::make_step({{0, {7}, 40, false}, {1, {8}, 9, false}}, 16, 8);
    const std::vector<float> d = testing::run_step(**m, *gpu(), *kv, decode);
    l.insert(l.end(), d.begin(), d.end());
    logits.push_back(std::move(l));
  }
  // One rank's sum is the identity (bf16 -> f32 -> bf16 is exact): the logits agree to rounding
  // noise at most, far inside the bf16 tolerance of the CPU comparison (4e-2).
  EXPECT_LT(rel_error(logits[1], logits[0]), 1e-5);
}

}  // namespace
}  // namespace brigade
