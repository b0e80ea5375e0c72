// The encoder cache of images split over steps (models/image_feature_cache.h): keys tell images
// apart by pixels and grid, entries of earlier steps are dropped least recently used first when a
// new image needs room (never those the current step uses), and an image larger than the whole
// cache is still held alone.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/backend.h"
#include "cpu/cpu_backend.h"
#include "models/image_feature_cache.h"

namespace brigade {
namespace {

StepImage image(float value, int32_t grid_h, int32_t grid_w) {
  return {0, std::make_shared<const std::vector<float>>(static_cast<size_t>(grid_h * grid_w) * 6, value), grid_h, grid_w};
}

TEST(ImageFeatureCache, KeysTellPixelsAndGridsApart) {
  const ImageKey a = image_key(image(0.5f, 2, 4));
  EXPECT_EQ(a, image_key(image(0.5f, 2, 4)));
  EXPECT_FALSE(a == image_key(image(0.25f, 2, 4)));  // other pixels
  EXPECT_FALSE(a == image_key(image(0.5f, 4, 2)));   // the same pixels as another grid
}

TEST(ImageFeatureCache, DropsTheLeastRecentlyUsedImageForANewOne) {
  auto backend = make_cpu_backend({.n_threads = 1});
  ImageFeatureCache cache(10);
  const ImageKey a = image_key(image(1, 2, 2)), b = image_key(image(2, 2, 2)), c = image_key(image(3, 2, 2));
  auto fa = cache.insert(*backend, a, 4, 3, DType::f32);
  ASSERT_TRUE(fa.has_value()) << fa.status().to_string();
  EXPECT_EQ(fa->dim(0), 4);
  EXPECT_EQ(fa->dim(1), 3);
  fa->as<float>()[0] = 7.0f;
  ASSERT_TRUE(cache.insert(*backend, b, 4, 3, DType::f32).has_value());
  EXPECT_EQ(cache.rows(), 8);
  ASSERT_NE(cache.find(a), nullptr);  // a is now the most recently used
  EXPECT_EQ(cache.find(a)->as<float>()[0], 7.0f);
  // In this step a and b are in use: c is held beside them, over the capacity.
  ASSERT_TRUE(cache.insert(*backend, c, 4, 3, DType::f32).has_value());
  EXPECT_EQ(cache.size(), 3u);
  cache.erase(c);
  cache.begin_step();  // a new step: earlier entries may go, least recently used first
  ASSERT_TRUE(cache.insert(*backend, c, 4, 3, DType::f32).has_value());  // 12 > 10: b goes
  EXPECT_EQ(cache.find(b), nullptr);
  EXPECT_NE(cache.find(a), nullptr);
  EXPECT_NE(cache.find(c), nullptr);
  EXPECT_EQ(cache.size(), 2u);
  cache.erase(a);
  EXPECT_EQ(cache.find(a), nullptr);
  EXPECT_EQ(cache.rows(), 4);
  // Larger than the cache: everything else goes, and it is held alone.
  cache.begin_step();
  const ImageKey big = image_key(image(4, 4, 8));
  ASSERT_TRUE(cache.insert(*backend, big, 32, 3, DType::f32).has_value());
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_NE(cache.find(big), nullptr);
  // Inserting a key again replaces its entry.
  ASSERT_TRUE(cache.insert(*backend, big, 8, 3, DType::f32).has_value());
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.rows(), 8);
}

}  // namespace
}  // namespace brigade
