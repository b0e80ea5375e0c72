// BlobRef (messages/blob.h) and the PD messages' codec: inline bytes survive the flat encoding;
// a local handle resolves while a message carries its buffer and frees it with the last copy;
// a handle of another process, or of a freed buffer, is refused.
#include <gtest/gtest.h>

#include "messages/blob.h"
#include "messages/convert.h"
#include "messages/types.h"

namespace brigade {
namespace {

std::shared_ptr<const HostBlob> bytes(size_t n) {
  auto b = std::make_shared<HostBlob>(n);
  for (size_t i = 0; i < n; ++i) (*b)[i] = static_cast<std::byte>(i * 7);
  return b;
}

kv_handoff_msg handoff(std::shared_ptr<const HostBlob> blob, bool inline_bytes) {
  auto fill = [&](schema::KvHandoff::Builder b) {
    b.setRequestId(42);
    fill_list(b.initPrompt(3), std::vector<int32_t>{5, 6, 7});
    fill_list(b.initGenerated(1), std::vector<int32_t>{9});
    b.setNKvTokens(3);
    b.setMaxTokens(16);
    b.initSampling().setSeed(77);
    b.setPageSize(16);
    b.setPageBytes(blob->size());
    b.setNPages(1);
    fill_blob_ref(b.initKv(), blob, inline_bytes);
  };
  return inline_bytes ? kv_handoff_msg::build(fill) : kv_handoff_msg::build_attached(blob, fill);
}

TEST(BlobRef, InlineBytesSurviveTheFlatEncoding) {
  auto blob = bytes(1000);
  auto m = handoff(blob, /*inline_bytes=*/true);
  auto back = kv_handoff_msg::from_bytes(m.to_bytes());
  ASSERT_TRUE(back.has_value()) << back.status().to_string();
  EXPECT_EQ((*back)->getRequestId(), 42u);
  EXPECT_EQ(to_vector((*back)->getGenerated()), std::vector<int32_t>{9});
  EXPECT_EQ((*back)->getSampling().getSeed(), 77u);
  auto view = resolve_blob((*back)->getKv());
  ASSERT_TRUE(view.has_value()) << view.status().to_string();
  ASSERT_EQ(view->bytes.size(), 1000u);
  EXPECT_TRUE(std::equal(view->bytes.begin(), view->bytes.end(), blob->begin()));
}

TEST(BlobRef, ALocalHandleLivesExactlyAsLongAsAMessageCarriesIt) {
  const size_t before = n_live_blobs();
  const void* data = nullptr;
  {
    auto m = handoff(bytes(4096), /*inline_bytes=*/false);
    EXPECT_TRUE(m->getKv().isLocal());
    EXPECT_EQ(n_live_blobs(), before + 1);
    kv_handoff_msg copy = m;  // what CAF does in process
    auto view = resolve_blob(copy->getKv());
    ASSERT_TRUE(view.has_value()) << view.status().to_string();
    EXPECT_EQ(view->bytes.size(), 4096u);
    data = view->bytes.data();
    EXPECT_EQ(view->bytes[3], static_cast<std::byte>(21));
    EXPECT_LT(m.to_bytes().size(), 1024u) << "the bytes are not in the message";
  }
  EXPECT_NE(data, nullptr);
  EXPECT_EQ(n_live_blobs(), before) << "the last message copy freed the buffer";
}

TEST(BlobRef, AFreedOrForeignHandleIsRefused) {
  auto m = handoff(bytes(64), /*inline_bytes=*/false);
  const auto flat = m.to_bytes();  // the handle without the attachment, as another process gets it
  m = kv_handoff_msg();
  auto orphan = kv_handoff_msg::from_bytes(flat);
  ASSERT_TRUE(orphan.has_value());
  auto gone = resolve_blob((*orphan)->getKv());
  ASSERT_FALSE(gone.has_value());
  EXPECT_NE(gone.status().message().find("is gone"), std::string::npos);

  auto foreign = msg<schema::BlobRef>::build([](schema::BlobRef::Builder b) {
    b.setNBytes(8);
    auto l = b.initLocal();
    l.setProcess(blob_process_id() ^ 1);
    l.setId(1);
  });
  auto other = resolve_blob(foreign.reader());
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.status().code(), StatusCode::corrupt);
  EXPECT_NE(other.status().message().find("another process"), std::string::npos);

  auto bad_size = msg<schema::BlobRef>::build([](schema::BlobRef::Builder b) {
    b.setNBytes(9);
    b.setInline(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>("12345678"), 8));
  });
  EXPECT_FALSE(resolve_blob(bad_size.reader()).has_value());
}

}  // namespace
}  // namespace brigade
