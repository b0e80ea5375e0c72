// The engine with HiCache tiers configured: it spawns the tier actor, and a disk tier that cannot
// be opened degrades to a warning, never to an error for the engine or its clients.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <thread>

#include "brigade/engine.h"
#include "models/make_model.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

class EngineCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("brigade_engine_cache_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(write_synthetic_model(testing::tiny_llama(300, 128, 3), (dir_ / "model").string()).is_ok());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Starts an engine with the given cache block and runs one greedy request.
  std::vector<int32_t> generate_with(const CacheConfig& cache) {
    EngineOptions o = testing::test_engine_options((dir_ / "model").string(), 1);
    o.topology.instances.front().kv.memory_mb = 8;
    o.topology.instances.front().cache = cache;
    auto engine = Engine::create(o);
    EXPECT_TRUE(engine.has_value()) << engine.status().to_string();
    if (!engine) return {};
    auto c = (*engine)->generate(testing::greedy_ids({5, 6, 7, 8, 9}, 6));
    EXPECT_TRUE(c.has_value()) << c.status().to_string();
    return c ? c->token_ids : std::vector<int32_t>{};
  }

  fs::path dir_;
};

TEST_F(EngineCache, TiersOnOrBrokenGiveTheSameOutputs) {
  const std::vector<int32_t> plain = generate_with(CacheConfig{});
  ASSERT_EQ(plain.size(), 6u);

  CacheConfig disk;
  disk.disk_path = (dir_ / "tier").string();
  disk.write_policy = "write_back";
  EXPECT_EQ(generate_with(disk), plain);
  EXPECT_TRUE(fs::exists(dir_ / "tier" / "CURRENT")) << "the engine opened the RocksDB disk tier";

  std::ofstream(dir_ / "a_file") << "not a directory";
  CacheConfig broken;
  broken.disk_path = (dir_ / "a_file" / "tier").string();  // cannot be created: degrades
  EXPECT_EQ(generate_with(broken), plain);
}

// Prompts sharing a 48-token prefix (three pages), each with its own tail.
std::vector<GenerateOptions> prefix_family() {
  std::vector<GenerateOptions> reqs;
  for (int tail : {9, 20, 3, 30, 9}) {
    GenerateOptions r;
    for (int i = 0; i < 48; ++i) r.prompt_ids.push_back((i * 41 + 7) % 290 + 3);
    for (int i = 0; i < tail; ++i) r.prompt_ids.push_back((i * 13 + tail) % 290 + 3);
    r.max_tokens = 8;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    reqs.push_back(r);
  }
  return reqs;
}

EngineOptions options_for(const fs::path& model, const CacheConfig& cache, int pages, int tp = 1) {
  EngineOptions o = testing::test_engine_options(model.string(), 1);
  o.topology.instances.front().kv.pages = pages;
  o.topology.instances.front().cache = cache;
  o.topology.instances.front().executors.front().tp = tp;
  return o;
}

std::vector<std::vector<int32_t>> run_in_order(Engine& engine, const std::vector<GenerateOptions>& reqs) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& r : reqs) {
    auto c = engine.generate(r);
    EXPECT_TRUE(c.has_value()) << c.status().to_string();
    out.push_back(c ? c->token_ids : std::vector<int32_t>{});
  }
  return out;
}

// Between requests, a filler request with an unrelated prompt takes the whole device pool, so
// the family's cached pages are evicted to host (and, past host's tiny capacity, to disk) and
// must come back from there.
std::vector<GenerateOptions> with_fillers(const std::vector<GenerateOptions>& reqs) {
  std::vector<GenerateOptions> out;
  for (size_t k = 0; k < reqs.size(); ++k) {
    out.push_back(reqs[k]);
    GenerateOptions filler;
    for (int i = 0; i < 100; ++i) filler.prompt_ids.push_back((i * 7 + static_cast<int>(k) * 31) % 290 + 3);
    filler.max_tokens = 4;
    filler.sampling.temperature = 0.0f;
    filler.ignore_eos = true;
    out.push_back(filler);
  }
  return out;
}

TEST_F(EngineCache, PagesEvictedToHostAndDiskComeBackExact) {
  const auto reqs = with_fillers(prefix_family());
  CacheConfig off;
  off.radix = false;
  auto plain = Engine::create(options_for(dir_ / "model", off, 64));
  ASSERT_TRUE(plain.has_value());
  const auto want = run_in_order(**plain, reqs);
  for (const char* policy : {"write_through", "write_back"}) {
    CacheConfig tiers;
    tiers.disk_path = (dir_ / (std::string("tier_") + policy)).string();
    tiers.host_bytes = 2 * 2 * 2 * 16 * 2 * 16 * 4;  // two pages (2 layers, K+V, 16 x 2 heads x 16 dims, f32)
    tiers.write_policy = policy;
    auto engine = Engine::create(options_for(dir_ / "model", tiers, 8));  // 128 token slots
    ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
    EXPECT_EQ(run_in_order(**engine, reqs), want) << policy;
    const EngineStats st = (*engine)->stats();
    EXPECT_TRUE(st.tiers);
    EXPECT_GT(st.cache_evicted_pages, 0u) << policy;
    EXPECT_GT(st.tier_saved_pages, 0u) << policy;
    EXPECT_GT(st.cache_loaded_tokens, 0u) << policy << ": later requests load the shared prefix";
    EXPECT_GT(st.tier_disk_hit_pages, 0u) << policy << ": host holds two pages, so some came from disk";
    EXPECT_EQ(st.tier_disk_corrupt, 0u);
    // The tier actor's byte counters reach EngineStats.
    EXPECT_GT(st.tier_host_bytes_in, 0u) << policy;
    EXPECT_LE(st.tier_host_bytes_used, static_cast<uint64_t>(tiers.host_bytes)) << policy;
    EXPECT_GT(st.tier_disk_bytes_in, 0u) << policy;
    EXPECT_GT(st.tier_disk_bytes_out, 0u) << policy << ": the disk hits were read";
    EXPECT_GT(st.tier_disk_bytes_used, 0u) << policy;
    EXPECT_FALSE(st.tier_disk_degraded);
  }
}

// Under tensor parallelism a tier page holds every rank's kv heads (rank 0 gathers the
// followers' parts on save and scatters them on load): evicted pages come back exact through
// host and disk, a restart at tp 2 serves them from disk, and a disk tier written at tp 1 is
// not read at tp 2 (its bytes are laid out differently: the fingerprint names the tp).
TEST_F(EngineCache, TensorParallelRanksSaveAndLoadTheirHeads) {
  const auto reqs = with_fillers(prefix_family());
  CacheConfig off;
  off.radix = false;
  auto plain = Engine::create(options_for(dir_ / "model", off, 64, 2));
  ASSERT_TRUE(plain.has_value()) << plain.status().to_string();
  const auto want = run_in_order(**plain, reqs);
  CacheConfig tiers;
  tiers.disk_path = (dir_ / "tier_tp2").string();
  tiers.host_bytes = 2 * 2 * 2 * 16 * 2 * 16 * 4;  // two pages of the group (both ranks' heads)
  {
    auto engine = Engine::create(options_for(dir_ / "model", tiers, 8, 2));
    ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
    EXPECT_EQ(run_in_order(**engine, reqs), want);
    const EngineStats st = (*engine)->stats();
    EXPECT_GT(st.tier_saved_pages, 0u);
    EXPECT_GT(st.cache_loaded_tokens, 0u) << "later requests load the shared prefix";
    EXPECT_GT(st.tier_disk_hit_pages, 0u);
    EXPECT_EQ(st.tier_disk_corrupt, 0u);
  }
  const auto family = prefix_family();
  auto restarted = Engine::create(options_for(dir_ / "model", tiers, 64, 2));
  ASSERT_TRUE(restarted.has_value()) << restarted.status().to_string();
  const auto again = run_in_order(**restarted, family);
  for (size_t i = 0; i < family.size(); ++i) EXPECT_EQ(again[i], want[2 * i]) << "request " << i;
  EXPECT_GE((*restarted)->stats().cache_loaded_tokens, 48u) << "the restart at tp 2 reads what tp 2 wrote";
  restarted->reset();
  auto at_tp1 = Engine::create(options_for(dir_ / "model", tiers, 64, 1));
  ASSERT_TRUE(at_tp1.has_value()) << at_tp1.status().to_string();
  run_in_order(**at_tp1, family);
  EXPECT_EQ((*at_tp1)->stats().cache_loaded_tokens, 0u) << "tp 1 does not read pages tp 2 laid out";
}

TEST_F(EngineCache, ARestartedEngineServesEarlierPrefixesFromDisk) {
  const auto reqs = prefix_family();
  CacheConfig tiers;
  tiers.disk_path = (dir_ / "tier").string();
  tiers.host_bytes = 0;  // disk only: nothing survives but what RocksDB holds
  std::vector<std::vector<int32_t>> first;
  {
    auto engine = Engine::create(options_for(dir_ / "model", tiers, 64));
    ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
    first = run_in_order(**engine, reqs);
    EXPECT_EQ((*engine)->stats().cache_loaded_tokens, 0u) << "a cold disk tier has nothing";
  }
  auto engine = Engine::create(options_for(dir_ / "model", tiers, 64));
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  EXPECT_EQ(run_in_order(**engine, reqs), first);
  const EngineStats st = (*engine)->stats();
  EXPECT_GE(st.cache_loaded_tokens, 48u) << "the first request after the restart loads the prefix from disk";
  EXPECT_GT(st.tier_disk_hit_pages, 0u);
  EXPECT_EQ(st.tier_host_hit_pages, 0u);
}

// Each request reports the prompt tokens it did not compute (Event/Completion::cached_tokens,
// the server's usage.prompt_tokens_details.cached_tokens): none cold, the shared prefix's pages
// from the device cache, and after a restart what the disk tier loaded; equal to what the
// engine's counters saw served.
TEST_F(EngineCache, EachRequestReportsItsCachedPromptTokens) {
  const auto family = prefix_family();  // a 48-token shared prefix
  CacheConfig tiers;
  tiers.disk_path = (dir_ / "tier_cached").string();
  tiers.host_bytes = 0;
  {
    auto engine = Engine::create(options_for(dir_ / "model", tiers, 64));
    ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
    auto cold = (*engine)->generate(family[0]);
    ASSERT_TRUE(cold.has_value());
    EXPECT_EQ(cold->cached_tokens, 0);
    const uint64_t hits = (*engine)->stats().cache_hit_tokens;
    auto warm = (*engine)->generate(family[1]);
    ASSERT_TRUE(warm.has_value());
    EXPECT_EQ(warm->cached_tokens, 48) << "the three pages of the shared prefix";
    EXPECT_EQ(static_cast<uint64_t>(warm->cached_tokens), (*engine)->stats().cache_hit_tokens - hits);
    auto again = (*engine)->generate(family[1]);  // its whole prompt is cached but for the last token
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->token_ids, warm->token_ids);
    EXPECT_EQ(again->cached_tokens, 67)
        << "all 68 prompt tokens but the last: four whole pages and 3 rows of the fifth, the page warm "
           "left partly filled (cache.partial_pages)";
  }
  auto restarted = Engine::create(options_for(dir_ / "model", tiers, 64));
  ASSERT_TRUE(restarted.has_value()) << restarted.status().to_string();
  auto loaded = (*restarted)->generate(family[2]);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->cached_tokens, 48) << "the prefix came back from disk";
  EXPECT_EQ(static_cast<uint64_t>(loaded->cached_tokens), (*restarted)->stats().cache_loaded_tokens);
}

// A conversation: each turn's prompt is the last turn's prompt and output and 4 more tokens, so
// it continues inside the page the last turn left partly filled (cache.partial_pages). The rows
// copied from it give the tokens that computing them gives (cache off, or whole pages only), on
// every KV dtype (int8 with its scales) and at tp 2 (each rank copies its heads). Prompts stay
// under 48 tokens, where every step shape computes the same bits (see "Exactness").
TEST_F(EngineCache, PartlyFilledPagesGiveTheTokensThatComputingThemGives) {
  struct Case {
    const char* dtype;
    int tp;
  };
  for (const Case c : {Case{"f32", 1}, Case{"bf16", 1}, Case{"int8", 1}, Case{"f32", 2}}) {
    const auto conversation = [&](bool radix, bool partial, std::vector<int>* cached) {
      CacheConfig cache;
      cache.radix = radix;
      cache.partial_pages = partial;
      EngineOptions o = options_for(dir_ / "model", cache, 64, c.tp);
      o.topology.instances.front().kv.dtype = c.dtype;
      auto engine = Engine::create(o);
      EXPECT_TRUE(engine.has_value()) << engine.status().to_string();
      std::vector<std::vector<int32_t>> outs;
      if (!engine) return std::make_pair(outs, uint64_t{0});
      std::vector<int32_t> convo;
      for (int turn = 0; turn < 5; ++turn) {
        for (int i = 0; i < 4; ++i) convo.push_back((i * 37 + turn * 11) % 290 + 3);
        auto r = (*engine)->generate(testing::greedy_ids(convo, 5));
        EXPECT_TRUE(r.has_value()) << r.status().to_string();
        if (!r) break;
        outs.push_back(r->token_ids);
        if (cached) cached->push_back(r->cached_tokens);
        convo.insert(convo.end(), r->token_ids.begin(), r->token_ids.end());
      }
      return std::make_pair(outs, (*engine)->stats().cache_partial_hit_tokens);
    };
    const std::string what = std::string(c.dtype) + " tp " + std::to_string(c.tp);
    const auto [want, none] = conversation(false, false, nullptr);
    ASSERT_EQ(want.size(), 5u) << what;
    const auto [whole, whole_partial] = conversation(true, false, nullptr);
    EXPECT_EQ(whole, want) << what;
    EXPECT_EQ(whole_partial, 0u) << what;
    std::vector<int> cached;
    const auto [got, partial] = conversation(true, true, &cached);
    EXPECT_EQ(got, want) << what;
    // Turn k's prompt is 9k + 4 tokens; the turn before left KV for 9k - 1 of them (its last
    // output token was never fed back), all of which it gets: 16-token pages, whole and partial.
    EXPECT_EQ(cached, (std::vector<int>{0, 8, 17, 26, 35})) << what;
    EXPECT_EQ(partial, 8u + 1u + 10u + 3u) << what << ": 8, 17 - 16, 26 - 16, 35 - 32 rows copied";
  }
}

// In-batch prefix sharing: four prompts sharing 36 tokens (two whole pages and 4 more), sent
// together while the first one's prefill takes several 8-token steps. Each of the other three
// takes the two pages from the cache (waiting for them, or finding them in when it arrives;
// a late one also copies the third page's 4 shared rows),
// and the tokens are those of the cache off. Prompts stay under 48 tokens (see "Exactness").
TEST_F(EngineCache, RequestsArrivingTogetherComputeTheirSharedPrefixOnce) {
  std::vector<GenerateOptions> reqs;
  for (int tail = 3; tail <= 6; ++tail) {
    GenerateOptions r;
    for (int i = 0; i < 36; ++i) r.prompt_ids.push_back((i * 29 + 5) % 290 + 3);
    for (int i = 0; i < tail; ++i) r.prompt_ids.push_back((i * 17 + tail) % 290 + 3);
    r.max_tokens = 6;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    reqs.push_back(r);
  }
  const auto together = [&](const CacheConfig& cache, EngineStats* stats) {
    EngineOptions o = options_for(dir_ / "model", cache, 64);
    o.topology.instances.front().scheduler.max_step_tokens = 8;
    auto engine = Engine::create(o);
    EXPECT_TRUE(engine.has_value()) << engine.status().to_string();
    std::vector<std::vector<int32_t>> out(reqs.size());
    if (!engine) return out;
    std::vector<std::promise<void>> done(reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      auto id = (*engine)->submit(reqs[i], [&out, &done, i](const Event& ev) {
        out[i].insert(out[i].end(), ev.token_ids.begin(), ev.token_ids.end());
        if (ev.finish != FinishReason::none) done[i].set_value();
      });
      EXPECT_TRUE(id.has_value()) << id.status().to_string();
    }
    for (auto& d : done) d.get_future().wait();
    if (stats) *stats = (*engine)->stats();
    return out;
  };
  CacheConfig off;
  off.radix = false;
  const auto want = together(off, nullptr);
  ASSERT_EQ(want.front().size(), 6u);
  EngineStats st;
  // A follower waits for shared uncached whole pages of at least in_batch_prefix_tokens: with the
  // default 32, one that arrives once the leader's first page is in the tree (a loaded machine
  // delays arrivals) has 16 + 4 shared tokens left, takes the one page and computes the rest
  // itself, as designed. With 16, every follower waits for (or finds) both pages, whenever it
  // comes.
  CacheConfig sharing;
  sharing.in_batch_prefix_tokens = 16;
  EXPECT_EQ(together(sharing, &st), want);
  // Each follower took the leader's two whole pages (a match is 0, 16 or 32 tokens, or 36 with the
  // third page's leading rows when a follower comes late enough to find that page whole: seen
  // on a loaded machine), so the three together took 96 to 108.
  EXPECT_GE(st.cache_hit_tokens, 3u * 32u) << "each follower took the leader's two whole pages";
  EXPECT_LE(st.cache_hit_tokens, 3u * 36u);
  EXPECT_LE(st.cache_in_batch_waits, 3u);
  std::printf("in-batch waits: %llu of 3\n", static_cast<unsigned long long>(st.cache_in_batch_waits));
}

// vLLM's cache_salt: a request reuses only pages computed under the same salt (the device cache
// and the disk tier, before and after a restart), prompts under one salt share what they would
// share unsalted, and the salt changes no output.
TEST_F(EngineCache, CacheSaltKeepsRequestsApartOnEveryTier) {
  const auto family = prefix_family();  // a 48-token shared prefix
  CacheConfig tiers;
  tiers.disk_path = (dir_ / "tier_salted").string();
  tiers.host_bytes = 0;
  const auto salted = [&](size_t i, const std::string& salt) {
    GenerateOptions r = family[i];
    r.cache_salt = salt;
    return r;
  };
  {
    auto engine = Engine::create(options_for(dir_ / "model", tiers, 64));
    ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
    auto a0 = (*engine)->generate(salted(0, "tenant-a"));
    ASSERT_TRUE(a0.has_value()) << a0.status().to_string();
    EXPECT_EQ(a0->cached_tokens, 0);
    auto b1 = (*engine)->generate(salted(1, "tenant-b"));
    ASSERT_TRUE(b1.has_value());
    EXPECT_EQ(b1->cached_tokens, 0) << "another salt's pages";
    auto plain1 = (*engine)->generate(family[1]);
    ASSERT_TRUE(plain1.has_value());
    EXPECT_EQ(plain1->cached_tokens, 0) << "an unsalted request takes no salted page";
    auto a1 = (*engine)->generate(salted(1, "tenant-a"));
    ASSERT_TRUE(a1.has_value());
    EXPECT_EQ(a1->cached_tokens, 48) << "the salt's own prefix";
    EXPECT_EQ(a1->token_ids, plain1->token_ids) << "the salt changes no output";
    EXPECT_EQ(b1->token_ids, plain1->token_ids);
    auto b1_again = (*engine)->generate(salted(1, "tenant-b"));
    ASSERT_TRUE(b1_again.has_value());
    EXPECT_EQ(b1_again->cached_tokens, 67)
        << "its own earlier prompt but the last token: four whole pages and 3 rows of the fifth";
  }
  auto restarted = Engine::create(options_for(dir_ / "model", tiers, 64));
  ASSERT_TRUE(restarted.has_value()) << restarted.status().to_string();
  auto c2 = (*restarted)->generate(salted(2, "tenant-c"));
  ASSERT_TRUE(c2.has_value());
  EXPECT_EQ(c2->cached_tokens, 0) << "no page on disk has this salt";
  auto a2 = (*restarted)->generate(salted(2, "tenant-a"));
  ASSERT_TRUE(a2.has_value());
  EXPECT_EQ(a2->cached_tokens, 48) << "the salt's prefix came back from disk";
  EXPECT_EQ(a2->token_ids, c2->token_ids);
  GenerateOptions too_long = salted(0, std::string(1025, 's'));
  auto refused = (*restarted)->generate(too_long);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(refused.status().message().find("cache_salt"), std::string::npos) << refused.status().message();
}

using testing::eventually;

// Engine::reset_prefix_cache (vLLM's /reset_prefix_cache): the device cache gives its pages back
// and the host tier empties; the disk tier keeps its pages (the next run of the prompt loads
// them) until a reset asks for it too. The tokens never change.
TEST_F(EngineCache, ResetEmptiesTheCacheAndHostTierAndTheDiskTierWhenAsked) {
  const auto family = prefix_family();
  CacheConfig tiers;
  tiers.disk_path = (dir_ / "tier_reset").string();
  tiers.host_bytes = 1 << 20;  // write_through: pages entering the cache go to host and disk
  auto engine = Engine::create(options_for(dir_ / "model", tiers, 64));
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  Engine& e = **engine;
  auto first = e.generate(family[0]);
  ASSERT_TRUE(first.has_value()) << first.status().to_string();
  ASSERT_TRUE(eventually(e, [](const EngineStats& s) { return s.tier_host_bytes_used > 0 && s.tier_disk_bytes_used > 0; }));
  const EngineStats before = e.stats();
  ASSERT_GT(before.cache_pages, 0);
  ASSERT_EQ(*e.cached_prefix_tokens(family[0].prompt_ids), 48);

  auto r = e.reset_prefix_cache();
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->freed_pages, before.cache_pages);
  EXPECT_EQ(r->kept_pages, 0);
  EXPECT_GT(r->host_entries, 0u);
  EXPECT_EQ(r->disk_entries, 0u) << "the disk tier only when asked";
  const EngineStats after = e.stats();
  EXPECT_EQ(after.cache_pages, 0);
  EXPECT_EQ(after.kv_pages_used, 0);
  EXPECT_EQ(*e.cached_prefix_tokens(family[0].prompt_ids), 0);
  EXPECT_GT(after.tier_disk_bytes_used, 0u);

  auto from_disk = e.generate(family[0]);
  ASSERT_TRUE(from_disk.has_value());
  EXPECT_EQ(from_disk->token_ids, first->token_ids);
  EXPECT_EQ(from_disk->cached_tokens, 48) << "the prefix came back from disk";
  const EngineStats loaded = e.stats();
  EXPECT_GT(loaded.tier_disk_hit_pages, before.tier_disk_hit_pages);
  EXPECT_EQ(loaded.tier_host_hit_pages, before.tier_host_hit_pages) << "the host tier held nothing after the reset";

  r = e.reset_prefix_cache(/*disk=*/true);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_GT(r->freed_pages, 0);
  EXPECT_GE(r->disk_entries, 3u) << "the prefix's three pages at least";
  auto cold = e.generate(family[0]);
  ASSERT_TRUE(cold.has_value());
  EXPECT_EQ(cold->token_ids, first->token_ids);
  EXPECT_EQ(cold->cached_tokens, 0) << "nothing left in any tier";
  EXPECT_EQ(e.stats().tier_disk_hit_pages, loaded.tier_disk_hit_pages);
}

// Resets racing with running requests (SchedulerPolicyCache.AResetFreesWhatNoSequenceUsesAndKeepsTheRest
// checks what a reset keeps, step by step): no request's tokens change, and when all have ended
// every page the pool lent is in the cache, none leaked.
TEST_F(EngineCache, ResetsRacingWithRequestsChangeNoTokensAndLeakNoPage) {
  auto engine = Engine::create(options_for(dir_ / "model", CacheConfig{}, 64));
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  Engine& e = **engine;
  std::vector<GenerateOptions> reqs = prefix_family();
  for (auto& r : reqs) r.max_tokens = 30;
  const auto want = run_in_order(e, reqs);
  testing::Outcomes out;
  std::vector<uint64_t> ids;
  int kept = 0;
  for (int round = 0; round < 4; ++round) {
    for (const auto& r : reqs) {
      auto id = e.submit(r, out.callback());
      ASSERT_TRUE(id.has_value());
      ids.push_back(*id);
    }
    for (int k = 0; k < 3; ++k) {
      auto res = e.reset_prefix_cache();
      ASSERT_TRUE(res.has_value()) << res.status().to_string();
      kept += res->kept_pages;
    }
  }
  ASSERT_TRUE(out.wait(ids.size()));
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(out.get(ids[i]).token_ids, want[i % reqs.size()]) << i;
  const EngineStats s = e.stats();
  EXPECT_EQ(s.kv_pages_used, s.cache_pages) << "pages outside the cache leaked";
  auto last = e.reset_prefix_cache();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->kept_pages, 0);
  EXPECT_EQ(e.stats().kv_pages_used, 0);
  std::printf("(resets kept %d page(s) of running requests in all)\n", kept);
}

// With several instances every one is reset (and the router's affinity starts over).
TEST_F(EngineCache, AResetReachesEveryInstance) {
  EngineOptions o = options_for(dir_ / "model", CacheConfig{}, 64);
  InstanceConfig second = o.topology.instances.front();
  o.topology.instances.front().name = "a";
  second.name = "b";
  o.topology.instances.push_back(second);
  o.topology.router.policy = "round_robin";
  auto engine = Engine::create(o);
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  Engine& e = **engine;
  const auto family = prefix_family();
  ASSERT_TRUE(e.generate(family[0]).has_value());
  ASSERT_TRUE(e.generate(family[1]).has_value());
  const auto per = e.instance_stats();
  ASSERT_EQ(per.size(), 2u);
  ASSERT_GT(per[0].stats.cache_pages, 0);
  ASSERT_GT(per[1].stats.cache_pages, 0);
  auto r = e.reset_prefix_cache();
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->freed_pages, per[0].stats.cache_pages + per[1].stats.cache_pages);
  for (const auto& inst : e.instance_stats()) EXPECT_EQ(inst.stats.cache_pages, 0) << inst.name;
  EXPECT_EQ(*e.cached_prefix_tokens(family[0].prompt_ids), 0);
}

}  // namespace
}  // namespace brigade
