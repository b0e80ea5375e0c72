// HiCache data path through the actors: executor KvSave/KvLoad <-> the tier actor.
#include "actors/hicache/hicache_actor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>

#include "actors/executor/executor_actor.h"
#include "cpu/cpu_backend.h"
#include "messages/registry.h"
#include "models/make_model.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

constexpr int kPages = 8;
constexpr auto kTimeout = std::chrono::seconds(60);

struct Config : caf::actor_system_config {
  Config() { register_message_types(*this); }
};

PageKey key(char set, uint64_t i) { return PageKey{static_cast<uint64_t>(set), i}; }

// Deterministic bytes for pattern i (splitmix64).
PageBytes pattern(uint64_t i, size_t n) {
  PageBytes b(n);
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ULL;
  for (auto& byte : b) {
    x += 0x9E3779B97F4A7C15ULL;
    uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    byte = static_cast<std::byte>(z >> 56);
  }
  return b;
}

kv_save_msg save(std::vector<int32_t> pages, std::vector<PageKey> keys) {
  return kv_save_msg::build([&](schema::KvSave::Builder b) {
    auto p = b.initPages(static_cast<unsigned>(pages.size()));
    for (unsigned i = 0; i < pages.size(); ++i) p.set(i, pages[i]);
    fill_page_keys(b.initKeys(static_cast<unsigned>(keys.size())), keys);
  });
}

kv_load_msg load(uint64_t id, std::vector<PageKey> keys, std::vector<int32_t> pages) {
  return kv_load_msg::build([&](schema::KvLoad::Builder b) {
    b.setRequestId(id);
    fill_page_keys(b.initKeys(static_cast<unsigned>(keys.size())), keys);
    auto p = b.initPages(static_cast<unsigned>(pages.size()));
    for (unsigned i = 0; i < pages.size(); ++i) p.set(i, pages[i]);
  });
}

struct Loaded {
  uint64_t id = 0;
  int n_loaded = -1, n_host = -1, n_disk = -1;
  std::string error;
};

class HiCacheActors : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() / ("brigade_hicache_actor_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
    // A tiny model: the test moves KV bytes and never runs a forward pass.
    ASSERT_TRUE(write_synthetic_model(testing::tiny_llama(300, 128, 0), (dir_ / "model").string()).is_ok());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // An executor over a fresh CPU KV pool whose page i holds pattern(100 + i).
  executor_actor spawn_executor_with_pages(hicache_actor tiers) {
    auto res = std::make_shared<ExecutorResources>();
    res->backend = make_cpu_backend({1});
    LoadOptions lo;
    lo.progress = false;
    lo.max_batch_tokens = 64;
    auto model = Model::load((dir_ / "model").string(), *res->backend, lo);
    EXPECT_TRUE(model.has_value()) << model.status().to_string();
    if (!model) return {};
    res->model = std::move(*model);
    auto kv = KvCache::allocate(*res->backend, res->model->kv_layout(kPages, 4, DType::f32));
    EXPECT_TRUE(kv.has_value());
    if (!kv) return {};
    page_bytes_ = kv->layout().page_bytes();
    for (int p = 0; p < kPages; ++p) EXPECT_TRUE(kv->write_page(*res->backend, p, pattern(100 + static_cast<uint64_t>(p), page_bytes_)).is_ok());
    res->kv = std::move(*kv);
    return spawn_executor(sys_, std::move(res), std::move(tiers));
  }

  // disk: the disk tier's directory under the test's, empty = no disk tier.
  hicache_actor spawn_tiers(size_t host_bytes, const std::string& disk, WritePolicy policy) {
    HiCacheSetup s;
    s.host_bytes = host_bytes;
    if (!disk.empty()) s.disk_path = (dir_ / disk).string();
    s.disk_bytes = 1 << 20;
    s.policy = policy;
    s.model_fingerprint = "hicache-actor-test";
    return spawn_hicache(sys_, s);
  }

  Loaded ask(const executor_actor& exe, const kv_load_msg& m) {
    caf::scoped_actor self{sys_};
    Loaded out;
    self->request(exe, kTimeout, m)
        .receive(
            [&](const kv_loaded_msg& r) {
              out = {r->getRequestId(), r->getNLoaded(), r->getNFromHost(), r->getNFromDisk(), r->getError().cStr()};
            },
            [&](const caf::error& e) { ADD_FAILURE() << "KvLoad failed: " << sys_.render(e); });
    return out;
  }

  TierRun get(const hicache_actor& tiers, std::vector<PageKey> keys) {
    caf::scoped_actor self{sys_};
    TierRun run;
    auto m = tier_get_msg::build([&](schema::TierGet::Builder b) {
      fill_page_keys(b.initKeys(static_cast<unsigned>(keys.size())), keys);
    });
    self->request(tiers, kTimeout, m)
        .receive(
            [&](const tier_pages_msg& r) {
              for (unsigned i = 0; i < r->getData().size(); ++i) {
                auto d = r->getData()[i];
                run.pages.emplace_back(reinterpret_cast<const std::byte*>(d.begin()), reinterpret_cast<const std::byte*>(d.end()));
                run.from.push_back(r->getFrom()[i] == schema::Tier::HOST ? Tier::host : Tier::disk);
              }
            },
            [&](const caf::error& e) { ADD_FAILURE() << "TierGet failed: " << sys_.render(e); });
    return run;
  }

  // Saves pages 0-2 (A) and 3-5 (B), overwrites 0-2 with B, loads A into 5-7, and checks the
  // bytes of every page involved through a second save. `from` is the tier A must come from.
  void save_overwrite_load(const hicache_actor& tiers, Tier from) {
    auto exe = spawn_executor_with_pages(tiers);
    ASSERT_TRUE(exe);
    const std::vector<PageKey> a = {key('A', 0), key('A', 1), key('A', 2)};
    const std::vector<PageKey> b = {key('B', 0), key('B', 1), key('B', 2)};
    caf::anon_send(exe, save({0, 1, 2}, a));
    caf::anon_send(exe, save({3, 4, 5}, b));
    Loaded r = ask(exe, load(7, b, {0, 1, 2}));
    EXPECT_EQ(r.id, 7u);
    EXPECT_EQ(r.n_loaded, 3) << r.error;
    r = ask(exe, load(8, a, {5, 6, 7}));
    EXPECT_EQ(r.n_loaded, 3) << r.error;
    EXPECT_EQ(from == Tier::host ? r.n_host : r.n_disk, 3);
    EXPECT_TRUE(r.error.empty()) << r.error;

    // Read the device pages back: save them under new keys, then fetch those from the tiers
    // (the awaited KvLoad orders the executor's puts before our lookup).
    const std::vector<PageKey> check = {key('C', 0), key('C', 1), key('C', 2), key('C', 5), key('C', 6), key('C', 7)};
    caf::anon_send(exe, save({0, 1, 2, 5, 6, 7}, check));
    EXPECT_EQ(ask(exe, load(9, {}, {})).n_loaded, 0);
    const TierRun run = get(tiers, check);
    ASSERT_EQ(run.pages.size(), 6u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(run.pages[i], pattern(103 + i, page_bytes_)) << "page " << i << " was overwritten with B";
      EXPECT_EQ(run.pages[3 + i], pattern(100 + i, page_bytes_)) << "page " << 5 + i << " was loaded with A";
    }

    // A run stops at the first key no tier holds.
    r = ask(exe, load(10, {key('A', 0), key('Z', 1), key('A', 2)}, {5, 6, 7}));
    EXPECT_EQ(r.n_loaded, 1);
    caf::anon_send_exit(exe, caf::exit_reason::user_shutdown);
  }

  Config cfg_;
  caf::actor_system sys_{cfg_};
  fs::path dir_;
  size_t page_bytes_ = 0;
};

TEST_F(HiCacheActors, SaveOverwriteLoadThroughHost) {
  auto tiers = spawn_tiers(1 << 20, "", WritePolicy::write_back);
  save_overwrite_load(tiers, Tier::host);
  caf::anon_send_exit(tiers, caf::exit_reason::user_shutdown);
}

TEST_F(HiCacheActors, SaveOverwriteLoadThroughDiskOnly) {
  for (WritePolicy p : {WritePolicy::write_through, WritePolicy::write_back}) {
    auto tiers = spawn_tiers(0, std::string("disk_") + write_policy_name(p), p);
    save_overwrite_load(tiers, Tier::disk);
    caf::scoped_actor self{sys_};
    self->request(tiers, kTimeout, tier_stats_request_msg::build([](schema::TierStatsRequest::Builder) {}))
        .receive(
            [&](const tier_stats_msg& s) {
              EXPECT_TRUE(s->getHasDisk());
              EXPECT_FALSE(s->getDiskDegraded());
              EXPECT_EQ(s->getHostEntries(), 0u);
              EXPECT_GE(s->getDiskHits(), 9u);  // A, B, the six checked pages, and A0 of the partial run
              EXPECT_GE(s->getDiskBytesOut(), 9 * page_bytes_);
              EXPECT_EQ(s->getDiskCorrupt(), 0u);
            },
            [&](const caf::error& e) { ADD_FAILURE() << sys_.render(e); });
    caf::anon_send_exit(tiers, caf::exit_reason::user_shutdown);
  }
}

TEST_F(HiCacheActors, BadOrUnservedLoadsAnswerZero) {
  auto no_tiers = spawn_executor_with_pages({});
  ASSERT_TRUE(no_tiers);
  Loaded r = ask(no_tiers, load(1, {key('A', 0)}, {0}));
  EXPECT_EQ(r.n_loaded, 0);
  EXPECT_NE(r.error.find("no HiCache tiers"), std::string::npos) << r.error;
  caf::anon_send(no_tiers, save({0}, {key('A', 0)}));  // dropped quietly: nothing to save to

  auto tiers = spawn_tiers(1 << 20, "", WritePolicy::write_through);
  auto exe = spawn_executor_with_pages(tiers);
  r = ask(exe, load(2, {key('A', 0), key('A', 1)}, {0}));
  EXPECT_EQ(r.n_loaded, 0);
  EXPECT_NE(r.error.find("2 keys but 1 pages"), std::string::npos) << r.error;
  r = ask(exe, load(3, {key('A', 0)}, {kPages}));
  EXPECT_EQ(r.n_loaded, 0);
  EXPECT_NE(r.error.find("outside the pool"), std::string::npos) << r.error;
  caf::anon_send(exe, save({-1}, {key('A', 0)}));  // refused (logged), nothing stored
  r = ask(exe, load(4, {key('A', 0)}, {0}));
  EXPECT_EQ(r.n_loaded, 0);
  EXPECT_TRUE(r.error.empty()) << "a miss is not an error: " << r.error;
  for (const auto& a : {caf::actor_cast<caf::actor>(no_tiers), caf::actor_cast<caf::actor>(exe), caf::actor_cast<caf::actor>(tiers)})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace brigade
