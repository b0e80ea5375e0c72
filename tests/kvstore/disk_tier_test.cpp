#include "kvstore/disk_tier.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace brigade {
namespace {

namespace fs = std::filesystem;

constexpr char kFingerprint[] = "test-model|kv:layers=2";
constexpr size_t kHeader = 24;  // DiskTier's value header (disk_tier.h)

PageKey key(uint64_t i) { return PageKey{0x1234, i}; }

// Deterministic bytes for page i (splitmix64), so a reader can check what a writer stored.
PageBytes payload(uint64_t i, size_t n) {
  PageBytes b(n);
  uint64_t x = i * 0x9E3779B97F4A7C15ULL + 1;
  for (size_t j = 0; j < n; ++j) {
    x += 0x9E3779B97F4A7C15ULL;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    b[j] = static_cast<std::byte>(z >> 56);
  }
  return b;
}

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("brigade_disk_tier_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  fs::path path() const { return path_; }

 private:
  fs::path path_;
};

std::unique_ptr<DiskTier> open_ok(const std::string& path, size_t capacity) {
  auto t = DiskTier::open(path, capacity, kFingerprint);
  EXPECT_TRUE(t.has_value()) << t.status().to_string();
  return t.has_value() ? std::move(*t) : nullptr;
}

// Writes `value` under `raw_key` with RocksDB directly (the tier must be closed).
void raw_put(const std::string& path, const std::string& raw_key, const std::string& value) {
  rocksdb::DB* db = nullptr;
  rocksdb::Options o;
  ASSERT_TRUE(rocksdb::DB::Open(o, path, &db).ok());
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), raw_key, value).ok());
  delete db;
}

TEST(DiskTier, RoundTripAndCounters) {
  TempDir dir;
  auto t = open_ok(dir.str(), 1 << 20);
  ASSERT_TRUE(t);
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(t->put(key(i), payload(i, 1000)).is_ok());
  for (uint64_t i = 0; i < 3; ++i) {
    auto got = t->get(key(i));
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, payload(i, 1000));
  }
  EXPECT_FALSE(t->get(key(7)).has_value());
  const DiskTierStats s = t->stats();
  EXPECT_EQ(s.n_hits, 3u);
  EXPECT_EQ(s.n_misses, 1u);
  EXPECT_EQ(s.bytes_in, 3000u);
  EXPECT_EQ(s.bytes_out, 3000u);
  EXPECT_EQ(s.n_entries, 3u);
  EXPECT_EQ(s.bytes_used, 3 * (1000 + kHeader));
  EXPECT_EQ(s.n_corrupt, 0u);
  EXPECT_FALSE(s.degraded);
  EXPECT_TRUE(t->erase(key(1)));
  EXPECT_FALSE(t->contains(key(1)));
  EXPECT_FALSE(t->get(key(1)).has_value());
}

// A prefix cache reset of the disk tier: every page goes (from the database too, not just the
// in-memory index), the fingerprint stays, and the tier takes pages again.
TEST(DiskTier, ClearRemovesEveryPageFromTheDatabase) {
  TempDir dir;
  {
    auto t = open_ok(dir.str(), 1 << 22);
    ASSERT_TRUE(t);
    for (uint64_t i = 0; i < 40; ++i) ASSERT_TRUE(t->put(key(i), payload(i, 3000)).is_ok());
    auto n = t->clear();
    ASSERT_TRUE(n.has_value()) << n.status().to_string();
    EXPECT_EQ(*n, 40u);
    EXPECT_EQ(t->stats().n_entries, 0u);
    EXPECT_EQ(t->stats().bytes_used, 0u);
    EXPECT_FALSE(t->get(key(3)).has_value());
    ASSERT_TRUE(t->put(key(100), payload(100, 3000)).is_ok());
    EXPECT_EQ(*t->clear(), 1u);
    ASSERT_TRUE(t->put(key(101), payload(101, 3000)).is_ok());
  }
  {
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir.str(), &db).ok());
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    std::vector<std::string> left;
    for (it->SeekToFirst(); it->Valid(); it->Next()) left.push_back(it->key().ToString().substr(0, 2));
    it.reset();
    delete db;
    EXPECT_EQ(left, (std::vector<std::string>{"i:", "m:", "p:"})) << "page 101's index and value, and the fingerprint";
  }
  auto t = open_ok(dir.str(), 1 << 22);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->stats().n_entries, 1u);
  auto got = t->get(key(101));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, payload(101, 3000));
}

TEST(DiskTier, ReopenServesEarlierPagesAndKeepsRecency) {
  TempDir dir;
  const size_t value = 500 + kHeader;
  {
    auto t = open_ok(dir.str(), 3 * value);
    for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(t->put(key(i), payload(i, 500)).is_ok());
    ASSERT_TRUE(t->get(key(0)).has_value());  // key 1 is now the least recently used
  }
  auto t = open_ok(dir.str(), 3 * value);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->stats().n_entries, 3u);
  EXPECT_EQ(t->stats().bytes_used, 3 * value);
  ASSERT_TRUE(t->put(key(3), payload(3, 500)).is_ok());
  EXPECT_FALSE(t->contains(key(1))) << "recency survives the restart";
  for (uint64_t i : {0, 2, 3}) {
    auto got = t->get(key(i));
    ASSERT_TRUE(got.has_value()) << i;
    EXPECT_EQ(*got, payload(i, 500));
  }
}

TEST(DiskTier, CapacityEvictsLeastRecentlyUsed) {
  TempDir dir;
  const size_t value = 100 + kHeader;
  auto t = open_ok(dir.str(), 3 * value);
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(t->put(key(i), payload(i, 100)).is_ok());
  ASSERT_TRUE(t->get(key(0)).has_value());
  ASSERT_TRUE(t->put(key(3), payload(3, 100)).is_ok());
  EXPECT_FALSE(t->contains(key(1)));
  EXPECT_TRUE(t->contains(key(0)));
  EXPECT_EQ(t->stats().n_evictions, 1u);
  EXPECT_LE(t->stats().bytes_used, 3 * value);
  // A page larger than the whole capacity is not stored and evicts nothing.
  ASSERT_TRUE(t->put(key(9), payload(9, 4 * value)).is_ok());
  EXPECT_FALSE(t->contains(key(9)));
  EXPECT_EQ(t->stats().n_entries, 3u);
  // Lowering the capacity trims at open.
  t.reset();
  t = open_ok(dir.str(), value);
  EXPECT_EQ(t->stats().n_entries, 1u);
  EXPECT_TRUE(t->contains(key(3))) << "the most recently written page stays";
}

TEST(DiskTier, CorruptValueIsDroppedNeverServed) {
  TempDir dir;
  {
    auto t = open_ok(dir.str(), 1 << 20);
    ASSERT_TRUE(t->put(key(1), payload(1, 256)).is_ok());
    ASSERT_TRUE(t->put(key(2), payload(2, 256)).is_ok());
  }
  // Same length, one payload byte flipped: only the checksum can tell.
  std::string v = DiskTier::encode_value(payload(1, 256));
  v[kHeader + 100] = static_cast<char>(v[kHeader + 100] ^ 0x40);
  raw_put(dir.str(), DiskTier::value_key(key(1)), v);
  {
    auto t = open_ok(dir.str(), 1 << 20);
    EXPECT_FALSE(t->get(key(1)).has_value());
    EXPECT_EQ(t->stats().n_corrupt, 1u);
    EXPECT_EQ(t->stats().n_misses, 1u);
    EXPECT_FALSE(t->contains(key(1))) << "a corrupt entry is deleted";
    auto good = t->get(key(2));
    ASSERT_TRUE(good.has_value());
    EXPECT_EQ(*good, payload(2, 256));
  }
  auto t = open_ok(dir.str(), 1 << 20);
  EXPECT_FALSE(t->contains(key(1))) << "the deletion is persistent";
  EXPECT_EQ(t->stats().n_entries, 1u);
}

TEST(DiskTier, TruncatedOrGarbageValueIsDropped) {
  TempDir dir;
  {
    auto t = open_ok(dir.str(), 1 << 20);
    for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(t->put(key(i), payload(i, 256)).is_ok());
  }
  const std::string full = DiskTier::encode_value(payload(1, 256));
  raw_put(dir.str(), DiskTier::value_key(key(1)), full.substr(0, full.size() - 10));  // truncated payload
  raw_put(dir.str(), DiskTier::value_key(key(2)), full.substr(0, 10));               // truncated header
  raw_put(dir.str(), DiskTier::value_key(key(3)), std::string(full.size(), 'x'));    // wrong magic
  auto t = open_ok(dir.str(), 1 << 20);
  for (uint64_t i = 1; i <= 3; ++i) EXPECT_FALSE(t->get(key(i)).has_value()) << i;
  EXPECT_EQ(t->stats().n_corrupt, 3u);
  EXPECT_EQ(t->stats().n_entries, 0u);
  // The key works again once rewritten.
  ASSERT_TRUE(t->put(key(1), payload(1, 256)).is_ok());
  EXPECT_EQ(*t->get(key(1)), payload(1, 256));
}

TEST(DiskTier, MalformedIndexRecordIsDroppedWithItsValue) {
  TempDir dir;
  {
    auto t = open_ok(dir.str(), 1 << 20);
    ASSERT_TRUE(t->put(key(1), payload(1, 64)).is_ok());
    ASSERT_TRUE(t->put(key(2), payload(2, 64)).is_ok());
  }
  raw_put(dir.str(), DiskTier::index_key(key(1)), "bad");
  {
    auto t = open_ok(dir.str(), 1 << 20);
    EXPECT_EQ(t->stats().n_entries, 1u);
    EXPECT_EQ(t->stats().bytes_used, 64 + kHeader);
    EXPECT_FALSE(t->get(key(1)).has_value());
    EXPECT_EQ(*t->get(key(2)), payload(2, 64));
  }
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir.str(), &db).ok());
  std::string v;
  EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), DiskTier::value_key(key(1)), &v).IsNotFound());
  delete db;
}

TEST(DiskTier, OtherModelFingerprintIsRefused) {
  TempDir dir;
  { ASSERT_TRUE(open_ok(dir.str(), 1 << 20)); }
  auto other = DiskTier::open(dir.str(), 1 << 20, "another-model");
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(other.status().message().find("delete the directory"), std::string::npos) << other.status().message();
  EXPECT_EQ(DiskTier::open(dir.str(), 0, kFingerprint).status().code(), StatusCode::invalid_argument);
}

TEST(DiskTier, UnwritableDirectoryIsAnOpenError) {
  TempDir dir;
  fs::create_directories(dir.path());
  const fs::path file = dir.path() / "a_file";
  std::ofstream(file) << "not a directory";
  // A path below a regular file cannot be created, whoever runs the test (root included).
  auto t = DiskTier::open((file / "tier").string(), 1 << 20, kFingerprint);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.status().code(), StatusCode::io_error);
  // The same directory opened twice (another server holds it) is an error too, not a hang.
  auto a = open_ok((dir.path() / "db").string(), 1 << 20);
  auto b = DiskTier::open((dir.path() / "db").string(), 1 << 20, kFingerprint);
  EXPECT_FALSE(b.has_value());
  EXPECT_EQ(b.status().code(), StatusCode::io_error);
}

// Exit codes of the write-error child, each naming the expectation that failed.
enum ChildResult { kChildOk = 0, kOpenFailed = 10, kNoError, kTwoErrors, kNotDegraded, kServedWhenDegraded, kPutAfter };

int degrade_on_write_error(const std::string& path) {
  auto t = DiskTier::open(path, size_t{1} << 30, kFingerprint);
  if (!t) return kOpenFailed;
  // Files may not grow past 256 KiB from here: the write-ahead log hits EFBIG (the signal
  // that would kill us is ignored), as a full disk makes write() fail.
  ::signal(SIGXFSZ, SIG_IGN);
  const rlimit lim{256 << 10, 256 << 10};
  ::setrlimit(RLIMIT_FSIZE, &lim);
  int n_errors = 0;
  for (uint64_t i = 0; i < 64; ++i) {
    if (!(*t)->put(key(i), payload(i, 16 << 10)).is_ok()) ++n_errors;
  }
  if (n_errors == 0) return kNoError;
  if (n_errors > 1) return kTwoErrors;
  if (!(*t)->degraded() || !(*t)->stats().degraded) return kNotDegraded;
  if ((*t)->get(key(0)).has_value() || (*t)->contains(key(0))) return kServedWhenDegraded;
  if (!(*t)->put(key(100), payload(100, 10)).is_ok()) return kPutAfter;
  return kChildOk;
}

TEST(DiskTier, WriteErrorDegradesOnceToATierThatMisses) {
  TempDir dir;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(degrade_on_write_error(dir.str()));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), kChildOk) << "see ChildResult";
}

// The fault test: a writer killed with SIGKILL mid-way leaves a tier that opens and serves
// only pages equal to what was written under their key. With `evicting`, the capacity holds
// about 100 pages, so the writer is also deleting pages when it dies.
void kill_writer_and_reopen(size_t capacity, bool evicting) {
  TempDir dir;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    auto t = DiskTier::open(dir.str(), capacity, kFingerprint);
    if (!t) ::_exit(1);
    for (uint64_t i = 0;; ++i) {
      if (!(*t)->put(key(i), payload(i, 4096 + (i % 7) * 512)).is_ok()) ::_exit(2);
      if (::write(fds[1], &i, sizeof i) != sizeof i) ::_exit(3);  // i is stored (acknowledged)
    }
  }
  ::close(fds[1]);
  uint64_t acked = 0;
  for (uint64_t i; ::read(fds[0], &i, sizeof i) == sizeof i;) {
    acked = i;
    if (i >= 300) break;
  }
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(fds[0]);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the writer stopped before the kill (exit " << WEXITSTATUS(status) << ")";
  ASSERT_GE(acked, 300u);

  auto t = open_ok(dir.str(), capacity);
  ASSERT_TRUE(t);
  uint64_t n_served = 0;
  for (uint64_t i = 0; i < acked + 1000; ++i) {
    auto got = t->get(key(i));
    if (!got) {
      if (!evicting) {
        EXPECT_GT(i, acked) << "an acknowledged page was lost";
      }
      continue;
    }
    ++n_served;
    EXPECT_EQ(*got, payload(i, 4096 + (i % 7) * 512)) << "page " << i;
  }
  EXPECT_EQ(t->stats().n_corrupt, 0u);
  if (evicting) {
    EXPECT_GE(n_served, 50u);
    EXPECT_LE(t->stats().bytes_used, capacity);
  } else {
    EXPECT_GE(n_served, acked + 1);
  }
  // The reopened tier takes writes again.
  ASSERT_TRUE(t->put(key(1u << 20), payload(7, 100)).is_ok());
  EXPECT_EQ(*t->get(key(1u << 20)), payload(7, 100));
}

TEST(DiskTier, SurvivesSigkillDuringWrites) { kill_writer_and_reopen(size_t{1} << 30, false); }

TEST(DiskTier, SurvivesSigkillDuringWritesAndEvictions) { kill_writer_and_reopen(100 * (7000 + kHeader), true); }

}  // namespace
}  // namespace brigade
