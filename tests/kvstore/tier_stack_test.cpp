#include "kvstore/tier_stack.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <vector>

namespace brigade {
namespace {

namespace fs = std::filesystem;

constexpr char kFingerprint[] = "tier-stack-test";
constexpr size_t kPage = 200;
constexpr size_t kValue = kPage + 24;  // disk value: header + page (disk_tier.h)

PageKey key(uint64_t i) { return PageKey{7, i}; }
PageBytes page(uint64_t i) { return PageBytes(kPage, static_cast<std::byte>(i + 1)); }
std::vector<PageKey> keys(std::initializer_list<uint64_t> ids) {
  std::vector<PageKey> k;
  for (uint64_t i : ids) k.push_back(key(i));
  return k;
}

class TierStackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() / ("brigade_tier_stack_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::unique_ptr<DiskTier> disk(size_t capacity) {
    auto d = DiskTier::open(dir_.string(), capacity, kFingerprint);
    EXPECT_TRUE(d.has_value()) << d.status().to_string();
    return d.has_value() ? std::move(*d) : nullptr;
  }
  fs::path dir_;
};

TEST(WritePolicy, ParsesAndListsValidValues) {
  EXPECT_EQ(*parse_write_policy("write_back"), WritePolicy::write_back);
  EXPECT_EQ(*parse_write_policy("write_through"), WritePolicy::write_through);
  auto bad = parse_write_policy("writeback");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("write_through, write_back"), std::string::npos);
}

TEST_F(TierStackTest, WriteThroughStoresInBothTiers) {
  TierStack s(10 * kPage, disk(1 << 20), WritePolicy::write_through);
  ASSERT_TRUE(s.put(key(1), page(1)).is_ok());
  const TierStackStats st = s.stats();
  EXPECT_EQ(st.host.n_entries, 1u);
  EXPECT_EQ(st.disk.n_entries, 1u);
  EXPECT_EQ(st.disk.bytes_in, kPage);
}

TEST_F(TierStackTest, ClearEmptiesHostAndDiskOnlyWhenAsked) {
  TierStack s(10 * kPage, disk(1 << 20), WritePolicy::write_through);
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(s.put(key(i), page(i)).is_ok());
  TierClearResult r = s.clear(/*disk=*/false);
  EXPECT_EQ(r.host_entries, 3u);
  EXPECT_EQ(r.disk_entries, 0u);
  EXPECT_TRUE(r.disk_status.is_ok());
  EXPECT_EQ(s.stats().host.n_entries, 0u);
  EXPECT_EQ(s.stats().host.bytes_used, 0u);
  TierRun run = s.get_run(keys({1, 2}));
  ASSERT_EQ(run.from, (std::vector<Tier>{Tier::disk, Tier::disk})) << "disk kept its pages";
  EXPECT_EQ(run.pages[1], page(2));
  r = s.clear(/*disk=*/true);
  EXPECT_EQ(r.host_entries, 2u) << "the two promoted by the lookup";
  EXPECT_EQ(r.disk_entries, 3u);
  EXPECT_TRUE(s.get_run(keys({1})).pages.empty());
  TierStack host_only(10 * kPage, nullptr, WritePolicy::write_back);
  ASSERT_TRUE(host_only.put(key(1), page(1)).is_ok());
  r = host_only.clear(/*disk=*/true);
  EXPECT_EQ(r.host_entries, 1u);
  EXPECT_EQ(r.disk_entries, 0u);
}

TEST_F(TierStackTest, WriteBackReachesDiskOnlyOnEviction) {
  TierStack s(2 * kPage, disk(1 << 20), WritePolicy::write_back);
  ASSERT_TRUE(s.put(key(1), page(1)).is_ok());
  ASSERT_TRUE(s.put(key(2), page(2)).is_ok());
  EXPECT_EQ(s.stats().disk.n_entries, 0u);
  ASSERT_TRUE(s.put(key(3), page(3)).is_ok());  // evicts key 1 to disk
  EXPECT_EQ(s.stats().disk.n_entries, 1u);
  EXPECT_EQ(s.stats().host.n_entries, 2u);
  TierRun run = s.get_run(keys({2, 3, 1}));
  ASSERT_EQ(run.pages.size(), 3u);
  EXPECT_EQ(run.from, (std::vector<Tier>{Tier::host, Tier::host, Tier::disk}));
  for (uint64_t i : {0, 1}) EXPECT_EQ(run.pages[i], page(i + 2));
  EXPECT_EQ(run.pages[2], page(1));
  // Promoting key 1 pushed key 2 (least recently used) from host back to disk.
  EXPECT_EQ(s.stats().disk.n_entries, 2u);
  run = s.get_run(keys({2}));
  ASSERT_EQ(run.from.size(), 1u);
  EXPECT_EQ(run.from[0], Tier::disk);
}

TEST_F(TierStackTest, LookupReturnsTheLeadingRunAndPromotesDiskHits) {
  TierStack s(kPage, disk(1 << 20), WritePolicy::write_through);
  for (uint64_t i : {1, 2, 4}) ASSERT_TRUE(s.put(key(i), page(i)).is_ok());
  // Host holds only key 4 now; keys 1 and 2 are on disk. Key 3 is missing: the run stops there.
  TierRun run = s.get_run(keys({1, 2, 3, 4}));
  ASSERT_EQ(run.pages.size(), 2u);
  EXPECT_EQ(run.from, (std::vector<Tier>{Tier::disk, Tier::disk}));
  EXPECT_EQ(run.pages[1], page(2));
  // Key 2 was promoted last, so it is in host now.
  run = s.get_run(keys({2}));
  ASSERT_EQ(run.from.size(), 1u);
  EXPECT_EQ(run.from[0], Tier::host);
  EXPECT_TRUE(s.get_run(keys({9, 1})).pages.empty()) << "a miss on the first key is an empty run";
}

TEST_F(TierStackTest, DiskOnlyWithZeroHostCapacity) {
  for (WritePolicy p : {WritePolicy::write_through, WritePolicy::write_back}) {
    TierStack s(0, disk(1 << 20), p);
    ASSERT_TRUE(s.put(key(1), page(1)).is_ok());
    ASSERT_TRUE(s.put(key(2), page(2)).is_ok());
    TierRun run = s.get_run(keys({1, 2}));
    ASSERT_EQ(run.pages.size(), 2u) << write_policy_name(p);
    EXPECT_EQ(run.from, (std::vector<Tier>{Tier::disk, Tier::disk}));
    EXPECT_EQ(run.pages[0], page(1));
    EXPECT_EQ(s.stats().host.n_entries, 0u);
  }
}

TEST_F(TierStackTest, HostOnlyDropsEvictedPages) {
  TierStack s(kPage, nullptr, WritePolicy::write_back);
  ASSERT_TRUE(s.put(key(1), page(1)).is_ok());
  ASSERT_TRUE(s.put(key(2), page(2)).is_ok());
  EXPECT_FALSE(s.has_disk());
  EXPECT_TRUE(s.get_run(keys({1})).pages.empty());
  EXPECT_EQ(s.get_run(keys({2})).pages.size(), 1u);
}

TEST_F(TierStackTest, DiskCapacityBoundsTheStack) {
  TierStack s(0, disk(2 * kValue), WritePolicy::write_through);
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(s.put(key(i), page(i)).is_ok());
  EXPECT_EQ(s.stats().disk.n_entries, 2u);
  EXPECT_TRUE(s.get_run(keys({1})).pages.empty());
  EXPECT_EQ(s.get_run(keys({2, 3})).pages.size(), 2u);
}

}  // namespace
}  // namespace brigade
