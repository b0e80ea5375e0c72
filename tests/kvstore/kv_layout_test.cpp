#include "kvstore/kv_layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cpu/cpu_backend.h"

namespace brigade {
namespace {

KvLayout small_layout() {
  KvLayout l;
  l.n_layers = 3;
  l.n_pages = 5;
  l.page_size = 4;
  l.n_kv_heads = 2;
  l.head_dim = 8;
  l.dtype = DType::f32;
  return l;
}

// Fills every K and V element with a value that names its layer, tensor, page and offset.
void fill_distinct(Backend& backend, const KvCache& kv) {
  for (int l = 0; l < kv.layout().n_layers; ++l) {
    int t_index = 0;
    for (const Tensor* t : page_tensors(kv.layer(l))) {
      std::vector<float> host(static_cast<size_t>(t->numel()));
      for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(l * 1000000 + t_index * 100000) + static_cast<float>(i);
      backend.upload(*t, host.data());
      ++t_index;
    }
  }
}

TEST(KvCachePages, ReadPageListsLayersThenKThenV) {
  auto backend = make_cpu_backend({1});
  const KvLayout layout = small_layout();
  auto kv = KvCache::allocate(*backend, layout);
  ASSERT_TRUE(kv.has_value()) << kv.status().to_string();
  fill_distinct(*backend, *kv);
  std::vector<std::byte> page(layout.page_bytes());
  ASSERT_TRUE(kv->read_page(*backend, 2, page).is_ok());
  const size_t per = layout.page_bytes_per_layer() / sizeof(float);
  const auto* f = reinterpret_cast<const float*>(page.data());
  for (int l = 0; l < layout.n_layers; ++l) {
    for (int t = 0; t < 2; ++t) {
      const float* piece = f + (static_cast<size_t>(l) * 2 + static_cast<size_t>(t)) * per;
      EXPECT_EQ(piece[0], static_cast<float>(l * 1000000 + t * 100000) + static_cast<float>(2 * per));
      EXPECT_EQ(piece[per - 1], static_cast<float>(l * 1000000 + t * 100000) + static_cast<float>(3 * per - 1));
    }
  }
}

TEST(KvCachePages, WritePageRoundTripsAndTouchesOnlyThatPage) {
  auto backend = make_cpu_backend({1});
  const KvLayout layout = small_layout();
  auto kv = KvCache::allocate(*backend, layout);
  ASSERT_TRUE(kv.has_value());
  fill_distinct(*backend, *kv);
  std::vector<std::byte> p1(layout.page_bytes()), p3_before(layout.page_bytes()), p1_before(layout.page_bytes());
  ASSERT_TRUE(kv->read_page(*backend, 1, p1).is_ok());
  ASSERT_TRUE(kv->read_page(*backend, 3, p3_before).is_ok());
  p1_before = p1;
  ASSERT_TRUE(kv->write_page(*backend, 3, p1).is_ok());
  std::vector<std::byte> p3_after(layout.page_bytes()), p1_after(layout.page_bytes()), p4(layout.page_bytes());
  ASSERT_TRUE(kv->read_page(*backend, 3, p3_after).is_ok());
  ASSERT_TRUE(kv->read_page(*backend, 1, p1_after).is_ok());
  EXPECT_EQ(p3_after, p1_before);
  EXPECT_NE(p3_after, p3_before);
  EXPECT_EQ(p1_after, p1_before);
  // The neighbours of page 3 keep their own bytes.
  ASSERT_TRUE(kv->read_page(*backend, 4, p4).is_ok());
  EXPECT_NE(p4, p1_before);
  const auto* f4 = reinterpret_cast<const float*>(p4.data());
  EXPECT_EQ(f4[0], static_cast<float>(4 * layout.page_bytes_per_layer() / sizeof(float)));
}

TEST(KvCachePages, RejectsBadPagesAndSizes) {
  auto backend = make_cpu_backend({1});
  const KvLayout layout = small_layout();
  auto kv = KvCache::allocate(*backend, layout);
  ASSERT_TRUE(kv.has_value());
  std::vector<std::byte> page(layout.page_bytes());
  EXPECT_EQ(kv->read_page(*backend, -1, page).code(), StatusCode::invalid_argument);
  EXPECT_EQ(kv->read_page(*backend, layout.n_pages, page).code(), StatusCode::invalid_argument);
  std::vector<std::byte> short_buf(layout.page_bytes() - 1);
  const Status s = kv->write_page(*backend, 0, short_buf);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("a page is " + std::to_string(layout.page_bytes())), std::string::npos) << s.message();
}

TEST(KvFingerprint, NamesModelAndLayoutButNotPoolSize) {
  KvLayout a = small_layout();
  KvLayout b = a;
  b.n_pages = 99;
  EXPECT_EQ(kv_fingerprint("m", a), kv_fingerprint("m", b));
  b.dtype = DType::bf16;
  EXPECT_NE(kv_fingerprint("m", a), kv_fingerprint("m", b));
  EXPECT_NE(kv_fingerprint("m", a), kv_fingerprint("n", a));
}

}  // namespace
}  // namespace brigade
