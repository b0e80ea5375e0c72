// KvCache page I/O (read_page/write_page, int8 scales included), KvLayout sizes (int8 pages with
// their scales cost about half of bf16), zeroed int8 scales, and refusal by a backend without int8 KV.
#include "kvstore/kv_layout.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "tests/memory_only_backend.h"

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


TEST(KvCachePages, Int8PagesCarryTheirScales) {
  auto backend = make_cpu_backend({1});
  KvLayout layout = small_layout();
  layout.dtype = DType::i8;
  auto kv = KvCache::allocate(*backend, layout);
  ASSERT_TRUE(kv.has_value()) << kv.status().to_string();
  for (int l = 0; l < layout.n_layers; ++l) {
    const KvLayer& layer = kv->layer(l);
    ASSERT_EQ(page_tensors(layer).size(), 4u);
    for (int64_t i = 0; i < layer.k.numel(); ++i) layer.k.as<int8_t>()[i] = static_cast<int8_t>(i % 251 - 125);
    for (int64_t i = 0; i < layer.k_scale.numel(); ++i) layer.k_scale.as<float>()[i] = static_cast<float>(l * 100 + i);
  }
  std::vector<std::byte> page(layout.page_bytes());
  ASSERT_TRUE(kv->read_page(*backend, 1, page).is_ok());
  ASSERT_TRUE(kv->write_page(*backend, 3, page).is_ok());
  for (int l = 0; l < layout.n_layers; ++l) {
    const KvLayer& layer = kv->layer(l);
    const int64_t scales_per_page = static_cast<int64_t>(layout.page_size) * layout.n_kv_heads;  // one per row
    for (int64_t r = 0; r < scales_per_page; ++r)
      EXPECT_EQ(layer.k_scale.as<float>()[3 * scales_per_page + r], layer.k_scale.as<float>()[1 * scales_per_page + r]);
    const int64_t per_page = layer.k.numel() / layout.n_pages;
    EXPECT_EQ(std::memcmp(layer.k.as<int8_t>() + 3 * per_page, layer.k.as<int8_t>() + per_page, static_cast<size_t>(per_page)), 0);
  }
}

// copy_rows: the leading rows of a page go to another page in every layer and page tensor
// (int8 scales included); the rest of the target and every other page are untouched.
TEST(KvCachePages, CopyRowsCopiesTheLeadingRowsOfEveryTensor) {
  auto backend = make_cpu_backend({1});
  for (DType t : {DType::f32, DType::bf16, DType::i8}) {
    KvLayout layout = small_layout();
    layout.dtype = t;
    auto kv = KvCache::allocate(*backend, layout);
    ASSERT_TRUE(kv.has_value()) << kv.status().to_string();
    for (int l = 0; l < layout.n_layers; ++l) {
      int k = 0;
      for (const Tensor* x : page_tensors(kv->layer(l))) {
        std::vector<uint8_t> bytes(x->nbytes());
        for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + static_cast<size_t>(k * 13 + l));
        backend->upload(*x, bytes.data());
        ++k;
      }
    }
    auto read = [&](int32_t page) {
      std::vector<std::byte> b(layout.page_bytes());
      EXPECT_TRUE(kv->read_page(*backend, page, b).is_ok());
      return b;
    };
    const auto src = read(1), dst = read(3), other = read(2);
    ASSERT_TRUE(kv->copy_rows(*backend, 1, 3, 3).is_ok()) << dtype_name(t);
    const auto got = read(3);
    // Page bytes: per layer, each page tensor's slice; its first 3 of 4 rows come from page 1.
    size_t off = 0;
    for (int l = 0; l < layout.n_layers; ++l) {
      for (const Tensor* x : page_tensors(kv->layer(l))) {
        const size_t slice = x->nbytes() / static_cast<size_t>(layout.n_pages), row = slice / 4;
        EXPECT_EQ(std::memcmp(got.data() + off, src.data() + off, 3 * row), 0) << dtype_name(t) << " layer " << l;
        EXPECT_EQ(std::memcmp(got.data() + off + 3 * row, dst.data() + off + 3 * row, row), 0) << "the last row stays";
        off += slice;
      }
    }
    EXPECT_EQ(off, layout.page_bytes());
    EXPECT_EQ(read(1), src);
    EXPECT_EQ(read(2), other);
    // Refused, nothing copied: pages outside the pool, a page onto itself, rows outside [1, 4].
    EXPECT_EQ(kv->copy_rows(*backend, 1, 5, 1).code(), StatusCode::invalid_argument);
    EXPECT_EQ(kv->copy_rows(*backend, -1, 3, 1).code(), StatusCode::invalid_argument);
    EXPECT_EQ(kv->copy_rows(*backend, 2, 2, 1).code(), StatusCode::invalid_argument);
    EXPECT_EQ(kv->copy_rows(*backend, 2, 3, 0).code(), StatusCode::invalid_argument);
    EXPECT_EQ(kv->copy_rows(*backend, 2, 3, 5).code(), StatusCode::invalid_argument);
    EXPECT_EQ(read(3), got);
  }
}

// The backend's default copy goes through the host (a backend without its own).
TEST(KvCachePages, CopyRowsWorksThroughTheDefaultBackendCopy) {
  struct HostCopies final : testing::MemoryOnlyBackend {
    std::string name() const override { return "memory"; }
  } backend;
  KvLayout layout = small_layout();
  auto kv = KvCache::allocate(backend, layout);
  ASSERT_TRUE(kv.has_value()) << kv.status().to_string();
  std::vector<std::byte> page(layout.page_bytes());
  for (size_t i = 0; i < page.size(); ++i) page[i] = static_cast<std::byte>(i % 251);
  ASSERT_TRUE(kv->write_page(backend, 0, page).is_ok());
  ASSERT_TRUE(kv->copy_rows(backend, 0, 4, 4).is_ok());
  std::vector<std::byte> got(layout.page_bytes());
  ASSERT_TRUE(kv->read_page(backend, 4, got).is_ok());
  EXPECT_EQ(got, page) << "all 4 rows: the whole page";
}

KvLayout shape_8b(DType t) { return KvLayout{32, 4, 16, 8, 128, t}; }  // Llama-3-8B's KV shape

TEST(KvLayout, Int8PagesWithScalesCostAboutHalfOfBf16) {
  const KvLayout bf16 = shape_8b(DType::bf16), i8 = shape_8b(DType::i8);
  EXPECT_EQ(bf16.page_bytes(), 2u * 32 * 16 * 8 * 128 * 2);
  EXPECT_EQ(bf16.scale_bytes_per_layer(), 0u);
  // Per page and layer, K and V: 16 x 8 x 128 bytes plus 16 x 8 f32 scales (one per row).
  EXPECT_EQ(i8.page_bytes(), 2u * 32 * (16 * 8 * 128 + 16 * 8 * 4));
  const double ratio = static_cast<double>(i8.page_bytes()) / static_cast<double>(bf16.page_bytes());
  EXPECT_DOUBLE_EQ(ratio, (128.0 + 4.0) / 256.0);  // 0.516 at head_dim 128
  EXPECT_EQ(i8.total_bytes(), 4 * i8.page_bytes());
}

TEST(KvCache, Int8AllocatesZeroScales) {
  auto backend = make_cpu_backend({.n_threads = 1});
  ASSERT_TRUE(backend->supports_kv_dtype(DType::i8));
  auto kv = KvCache::allocate(*backend, shape_8b(DType::i8));
  ASSERT_TRUE(kv.has_value()) << kv.status().to_string();
  for (int l = 0; l < 32; ++l) {
    const KvLayer& layer = kv->layer(l);
    EXPECT_EQ(layer.k.dtype, DType::i8);
    EXPECT_EQ(layer.k.shape_string(), "[4, 16, 8, 128]");
    for (const Tensor* s : {&layer.k_scale, &layer.v_scale}) {
      ASSERT_EQ(s->shape_string(), "[4, 16, 8]");
      ASSERT_EQ(s->dtype, DType::f32);
      for (int64_t i = 0; i < s->numel(); ++i) ASSERT_EQ(s->as<const float>()[i], 0.0f);
    }
  }
  auto f32 = KvCache::allocate(*backend, shape_8b(DType::f32));
  ASSERT_TRUE(f32.has_value());
  EXPECT_TRUE(f32->layer(0).k_scale.empty());
}

// A backend with the default KV dtypes (no int8, as the CUDA backend): memory only, no ops.
class NoInt8Backend final : public testing::MemoryOnlyBackend {
 public:
  std::string name() const override { return "no-int8"; }
};

TEST(KvCache, BackendWithoutInt8KvRefusesItWithAClearError) {
  NoInt8Backend backend;
  auto kv = KvCache::allocate(backend, shape_8b(DType::i8));
  ASSERT_FALSE(kv.has_value());
  EXPECT_EQ(kv.status().code(), StatusCode::unsupported);
  EXPECT_NE(kv.status().message().find("no-int8"), std::string::npos) << kv.status().message();
  EXPECT_NE(kv.status().message().find("kv.dtype"), std::string::npos) << kv.status().message();
  EXPECT_TRUE(KvCache::allocate(backend, shape_8b(DType::bf16)).has_value());
}

// Gemma 4's pool: layers of different K/V shapes (KvLayout::layer_shapes). Each layer's tensors
// take its own shape, a page's bytes are the sum of its layers' slices in layer order, and the
// bytes round-trip page to page (int8 scales included) and copy_rows copies every layer's rows.
KvLayout mixed_layout(DType t) {
  KvLayout l = small_layout();
  l.dtype = t;
  l.layer_shapes = {{2, 8}, {1, 16}, {2, 8}};
  return l;
}

TEST(KvCachePages, MixedLayerShapesRoundTripTheirPageBytes) {
  auto backend = make_cpu_backend({1});
  for (DType t : {DType::f32, DType::bf16, DType::i8}) {
    const KvLayout layout = mixed_layout(t);
    ASSERT_TRUE(layout.validate().is_ok());
    auto kv = KvCache::allocate(*backend, layout);
    ASSERT_TRUE(kv.has_value()) << kv.status().to_string();
    EXPECT_EQ(kv->layer(1).k.dim(2), 1);
    EXPECT_EQ(kv->layer(1).k.dim(3), 16);
    EXPECT_EQ(kv->layer(2).v.dim(3), 8);
    const size_t elem = dtype_size(t), scales = t == DType::i8 ? sizeof(float) : 0;
    // Per page: 4 rows; layers 0 and 2 hold 2 x 8 per row, layer 1 1 x 16 (the same 16 elements,
    // but one scale per row where the others hold two).
    const size_t want = 2 * (3 * 4 * 16 * elem + 4 * (2 + 1 + 2) * scales);
    EXPECT_EQ(layout.page_bytes(), want) << dtype_name(t);
    EXPECT_EQ(layout.page_bytes_per_layer(1), 4 * 16 * elem);
    EXPECT_EQ(layout.scale_bytes_per_layer(1), 4 * scales);
    for (int l = 0; l < layout.n_layers; ++l) {
      int k = 0;
      for (const Tensor* x : page_tensors(kv->layer(l))) {
        std::vector<uint8_t> bytes(x->nbytes());
        for (size_t i = 0; i < bytes.size(); ++i)  // not periodic in 256 bytes: each page's slice differs
          bytes[i] = static_cast<uint8_t>(i * 5 + i / 256 * 3 + static_cast<size_t>(k * 11 + l));
        backend->upload(*x, bytes.data());
        ++k;
      }
    }
    std::vector<std::byte> p1(layout.page_bytes()), p3(layout.page_bytes()), back(layout.page_bytes());
    ASSERT_TRUE(kv->read_page(*backend, 1, p1).is_ok());
    ASSERT_TRUE(kv->read_page(*backend, 3, p3).is_ok());
    EXPECT_NE(p1, p3);
    ASSERT_TRUE(kv->write_page(*backend, 3, p1).is_ok());
    ASSERT_TRUE(kv->read_page(*backend, 3, back).is_ok());
    EXPECT_EQ(back, p1) << dtype_name(t);
    // Layer 1's K slice of page 1 sits after layer 0's K, V (and their scales) in the page bytes.
    std::vector<uint8_t> k1(kv->layer(1).k.nbytes());
    backend->download(k1.data(), kv->layer(1).k);
    const size_t off = 2 * (layout.page_bytes_per_layer(0) + layout.scale_bytes_per_layer(0));
    const size_t slice = layout.page_bytes_per_layer(1);
    EXPECT_EQ(std::memcmp(p1.data() + off, k1.data() + slice, slice), 0) << dtype_name(t);
    ASSERT_TRUE(kv->copy_rows(*backend, 0, 2, 2).is_ok());
    std::vector<std::byte> p0(layout.page_bytes()), p2(layout.page_bytes());
    ASSERT_TRUE(kv->read_page(*backend, 0, p0).is_ok());
    ASSERT_TRUE(kv->read_page(*backend, 2, p2).is_ok());
    EXPECT_EQ(std::memcmp(p2.data() + off, p0.data() + off, slice / 2), 0) << "layer 1's first 2 rows copied";
  }
}

TEST(KvLayout, MixedShapesChangeTheFingerprintAndAreValidated) {
  const KvLayout uniform = small_layout(), mixed = mixed_layout(DType::f32);
  EXPECT_NE(kv_fingerprint("m", uniform), kv_fingerprint("m", mixed));
  KvLayout other = mixed;
  other.layer_shapes[1] = {1, 32};
  EXPECT_NE(kv_fingerprint("m", mixed), kv_fingerprint("m", other));
  KvLayout wrong = mixed;
  wrong.layer_shapes.pop_back();
  EXPECT_EQ(wrong.validate().code(), StatusCode::invalid_argument);
  wrong = mixed;
  wrong.layer_shapes[0].head_dim = 0;
  EXPECT_EQ(wrong.validate().code(), StatusCode::invalid_argument);
}

TEST(KvLayout, RejectsOtherDtypes) {
  EXPECT_FALSE(shape_8b(DType::i32).validate().is_ok());
  EXPECT_TRUE(shape_8b(DType::i8).validate().is_ok());
}

}  // namespace
}  // namespace brigade
