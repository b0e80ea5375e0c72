// BlobRef (messages/blob.h) and the PD messages' codec: inline bytes survive the flat encoding;
// a local handle resolves while a message carries its buffer and frees it with the last copy;
// a handle of another process, or of a freed buffer, is refused. Shared-memory segments cross
// to another (forked) process, which takes them and frees their names; every other way a
// segment's life can end frees its name too.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

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

kv_handoff_msg handoff(std::shared_ptr<const HostBlob> blob, BlobTransport transport) {
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
    fill_blob_ref(b.initKv(), blob, transport);
  };
  return transport == BlobTransport::inline_bytes ? kv_handoff_msg::build(fill)
                                                  : kv_handoff_msg::build_attached(blob, fill);
}

bool segment_exists(const std::string& name) {
  struct stat sb;
  return ::stat(("/dev/shm" + name).c_str(), &sb) == 0;
}

// A flat hand-off and the child process that made its segment.
struct ChildHandoff {
  std::vector<uint8_t> flat;
  pid_t pid = -1;
  // Collects the exited child: from then on its pid is dead to every process's sweep.
  void reap() {
    if (pid <= 0) return;
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    pid = -1;
  }
  ~ChildHandoff() { reap(); }
  ChildHandoff() = default;
  ChildHandoff(const ChildHandoff&) = delete;
  ChildHandoff& operator=(const ChildHandoff&) = delete;
};

// A segment of n patterned bytes named by a flat hand-off, made in a child process that then
// ends without cleaning up (_exit: a node whose message is still in flight, or one killed). The
// child has exited when this returns but is not reaped until reap(): until then its pid still
// exists, so no process's sweep of dead makers' segments takes the segment (every process's
// first make_shared_blob sweeps, and ctest runs other tests' processes beside this one, which
// once swept a segment between its making and this test's checks).
void handoff_from_a_dead_child(ChildHandoff& out, size_t n, size_t claimed = 0) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    auto seg = make_shared_blob(n);
    if (!seg) ::_exit(2);
    for (size_t i = 0; i < n; ++i) (**seg)[i] = static_cast<std::byte>(i * 13);
    auto m = handoff(*seg, BlobTransport::shared);
    if (claimed) m = m.edited([&](schema::KvHandoff::Builder b) { b.getKv().setNBytes(claimed); });
    const auto flat = m.to_bytes();
    const size_t len = flat.size();
    if (::write(fds[1], &len, sizeof len) != sizeof len) ::_exit(3);
    if (::write(fds[1], flat.data(), len) != static_cast<ssize_t>(len)) ::_exit(3);
    ::_exit(0);
  }
  out.pid = pid;
  ::close(fds[1]);
  size_t len = 0;
  if (::read(fds[0], &len, sizeof len) == sizeof len) {
    out.flat.resize(len);
    size_t got = 0;
    while (got < len) {
      const ssize_t r = ::read(fds[0], out.flat.data() + got, len - got);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
  }
  ::close(fds[0]);
  siginfo_t info{};
  EXPECT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);  // exited, left unreaped
}

TEST(BlobRef, InlineBytesSurviveTheFlatEncoding) {
  auto blob = bytes(1000);
  auto m = handoff(blob, BlobTransport::inline_bytes);
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
    auto m = handoff(bytes(4096), BlobTransport::local);
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
  auto m = handoff(bytes(64), BlobTransport::local);
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

TEST(SharedBlob, ASegmentCrossesToAnotherProcessWhichTakesItAndFreesItsName) {
  const size_t live = n_live_blobs();
  ChildHandoff child;
  handoff_from_a_dead_child(child, 5000);
  const auto& flat = child.flat;
  auto m = kv_handoff_msg::from_bytes(flat);
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  ASSERT_TRUE((*m)->getKv().isShared());
  const std::string name = (*m)->getKv().getShared().getName();
  EXPECT_LT(flat.size(), 1024u) << "the bytes are not in the message";
  EXPECT_TRUE(segment_exists(name)) << "the maker is gone, its segment is not";
  EXPECT_FALSE(resolve_blob((*m)->getKv()).has_value()) << "not taken yet";
  {
    auto view = adopt_blob((*m)->getKv());
    ASSERT_TRUE(view.has_value()) << view.status().to_string();
    EXPECT_FALSE(segment_exists(name)) << "taken: the name is freed at once";
    ASSERT_EQ(view->bytes.size(), 5000u);
    for (size_t i = 0; i < 5000; ++i) ASSERT_EQ(view->bytes[i], static_cast<std::byte>(i * 13)) << i;
    auto again = resolve_blob((*m)->getKv());  // the executor's resolve of the forwarded ref
    ASSERT_TRUE(again.has_value()) << again.status().to_string();
    EXPECT_EQ(again->bytes.data(), view->bytes.data());
    EXPECT_EQ(n_live_blobs(), live + 1);
  }
  EXPECT_EQ(n_live_blobs(), live) << "the mapping went with its last holder";
  auto gone = adopt_blob((*m)->getKv());
  ASSERT_FALSE(gone.has_value());
  EXPECT_NE(gone.status().message().find("cannot be opened"), std::string::npos) << gone.status().message();
}

TEST(SharedBlob, ASegmentOfAKilledMakerIsSweptAndBadRefsTouchNothing) {
  ChildHandoff child;
  handoff_from_a_dead_child(child, 100);
  auto m = kv_handoff_msg::from_bytes(child.flat);
  ASSERT_TRUE(m.has_value());
  const std::string name = (*m)->getKv().getShared().getName();
  ASSERT_TRUE(segment_exists(name));
  sweep_shared_blobs(kSharedBlobTtl);
  EXPECT_TRUE(segment_exists(name)) << "its maker's pid still exists (exited, not yet reaped)";
  child.reap();
  // (Another test process's first shared blob may sweep it first: either way it goes.)
  sweep_shared_blobs(kSharedBlobTtl);
  EXPECT_FALSE(segment_exists(name)) << "its maker's pid is dead";

  // A size that disagrees with the segment's is refused; the segment is left to its maker.
  ChildHandoff liar;
  handoff_from_a_dead_child(liar, 100, /*claimed=*/99);
  auto l = kv_handoff_msg::from_bytes(liar.flat);
  ASSERT_TRUE(l.has_value());
  auto wrong = adopt_blob((*l)->getKv());
  ASSERT_FALSE(wrong.has_value());
  EXPECT_EQ(wrong.status().code(), StatusCode::corrupt);
  EXPECT_NE(wrong.status().message().find("holds 100 bytes"), std::string::npos) << wrong.status().message();
  liar.reap();
  sweep_shared_blobs(kSharedBlobTtl);
  EXPECT_FALSE(segment_exists((*l)->getKv().getShared().getName()));

  // Names this code does not make are neither opened nor unlinked.
  for (const char* bad : {"/etc", "/brigade-kv.", "/brigade-kv.1/../x", "brigade-kv.1.2.3", "/other.1.2.3"}) {
    auto ref = msg<schema::BlobRef>::build([&](schema::BlobRef::Builder b) {
      b.setNBytes(8);
      b.initShared().setName(bad);
    });
    auto r = adopt_blob(ref.reader());
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_NE(r.status().message().find("is not a brigade shared-memory blob name"), std::string::npos) << bad;
  }
}

TEST(SharedBlob, EveryOtherEndOfASegmentFreesItsName) {
  const size_t unreceived = n_unreceived_shared_blobs();
  std::string name;
  {  // made, never sent: its last holder frees the name
    auto seg = make_shared_blob(64);
    ASSERT_TRUE(seg.has_value()) << seg.status().to_string();
    name = (*seg)->segment();
    EXPECT_TRUE(segment_exists(name));
  }
  EXPECT_FALSE(segment_exists(name));
  EXPECT_EQ(n_unreceived_shared_blobs(), unreceived);

  {  // sent, then discarded on purpose (a router dropping an aborted hand-off)
    auto m = handoff(*as_shared_blob(bytes(64)), BlobTransport::shared);
    name = m->getKv().getShared().getName();
    EXPECT_TRUE(segment_exists(name));
    discard_blob(m->getKv());
    EXPECT_FALSE(segment_exists(name));
  }
  {  // sent and never taken: the maker's sweep frees it after the TTL (0 here)
    auto m = handoff(*as_shared_blob(bytes(64)), BlobTransport::shared);
    name = m->getKv().getShared().getName();
    auto own = resolve_blob(m->getKv());  // the maker resolves its own segment
    ASSERT_TRUE(own.has_value()) << own.status().to_string();
    EXPECT_EQ(own->bytes[3], static_cast<std::byte>(21));
    m = kv_handoff_msg();
    own = internal_error("dropped");
    EXPECT_TRUE(segment_exists(name)) << "a sent name outlives its maker's mapping (the receiver takes it)";
    EXPECT_EQ(n_unreceived_shared_blobs(), unreceived + 1);
    sweep_shared_blobs(std::chrono::seconds(0));
    EXPECT_FALSE(segment_exists(name));
    EXPECT_EQ(n_unreceived_shared_blobs(), unreceived);
  }
  {  // taken in the maker's own process (nodes of one test process): the name is freed too
    auto m = handoff(*as_shared_blob(bytes(300)), BlobTransport::shared);
    name = m->getKv().getShared().getName();
    auto view = adopt_blob(m->getKv());
    ASSERT_TRUE(view.has_value()) << view.status().to_string();
    EXPECT_FALSE(segment_exists(name));
    EXPECT_EQ(view->bytes.size(), 300u);
    EXPECT_EQ(n_unreceived_shared_blobs(), unreceived);
  }
  // An empty blob has no segment: it goes inline.
  auto empty = handoff(*as_shared_blob(bytes(0)), BlobTransport::shared);
  EXPECT_TRUE(empty->getKv().isInline());
  EXPECT_FALSE(make_shared_blob(0).has_value());
  EXPECT_FALSE(blob_host_id().empty());
}

// Threads making, sending, resolving, taking and discarding handles and segments at once (the
// executors and schedulers of several instances do): every view reads its own bytes, and nothing
// is left alive or in /dev/shm afterwards. Under TSan (scripts/tsan.sh) this checks the registries'
// locking.
TEST(SharedBlob, ConcurrentUseOfTheRegistries) {
  const size_t live = n_live_blobs(), unreceived = n_unreceived_shared_blobs();
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &bad] {
      for (int i = 0; i < 200; ++i) {
        auto heap = std::make_shared<HostBlob>(256 + static_cast<size_t>(i));
        (*heap)[0] = static_cast<std::byte>(t * 50 + i % 50);
        const bool shared = (i + t) % 2 == 0;
        std::shared_ptr<const HostBlob> blob = heap;
        if (shared) {
          auto seg = as_shared_blob(blob);
          if (!seg) {
            ++bad;
            continue;
          }
          blob = *seg;
        }
        auto m = handoff(blob, shared ? BlobTransport::shared : BlobTransport::local);
        auto view = i % 3 == 0 ? adopt_blob(m->getKv()) : resolve_blob(m->getKv());
        if (!view || view->bytes[0] != static_cast<std::byte>(t * 50 + i % 50)) ++bad;
        if (shared && i % 3 != 0) discard_blob(m->getKv());  // the rest were taken by adopt_blob
        if (i % 50 == 0) n_live_blobs();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(n_live_blobs(), live);
  EXPECT_EQ(n_unreceived_shared_blobs(), unreceived) << "every segment was taken or discarded";
}

}  // namespace
}  // namespace brigade
