#include "core/tensor.h"

#include <gtest/gtest.h>

#include <vector>

namespace brigade {
namespace {

// An absent optional weight (a bias, a tied lm_head) is a default Tensor: it must count no
// elements and no bytes, or cost and size sums pick up a phantom element.
TEST(Tensor, ADefaultTensorIsEmptyAndHoldsNothing) {
  const Tensor t;
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
  EXPECT_EQ(t.shape_string(), "[]");
}

TEST(Tensor, ATensorWithDataAndNoDimsIsAScalar) {
  float x = 3.0f;
  const Tensor t(&x, DType::f32, {});
  EXPECT_FALSE(t.empty());
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(t.nbytes(), 4u);
}

TEST(Tensor, RowsAndReshapesAreViewsOfTheSameMemory) {
  std::vector<uint16_t> mem(6 * 4);
  const Tensor t(mem.data(), DType::bf16, {6, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(t.row_numel(), 4);
  const Tensor r = t.rows(2, 3);
  EXPECT_EQ(r.data, mem.data() + 8);
  EXPECT_EQ(r.shape_string(), "[3, 4]");
  const Tensor none = t.rows(6, 0);  // an empty range at the end is a valid view of no rows
  EXPECT_EQ(none.numel(), 0);
  const Tensor flat = t.reshaped({24});
  EXPECT_EQ(flat.data, t.data);
  EXPECT_EQ(flat.numel(), 24);
}

TEST(Tensor, ABufferViewMustFitTheBuffer) {
  Buffer b(new char[64], 64, [](void* p) { delete[] static_cast<char*>(p); });
  EXPECT_EQ(b.view(DType::f32, {4, 4}).nbytes(), 64u);
  EXPECT_DEATH((void)b.view(DType::f32, {5, 4}), "view fits inside the buffer");
}

}  // namespace
}  // namespace brigade
