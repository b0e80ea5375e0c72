// LoRA adapters loaded and unloaded while the engine serves (Engine::load_lora / unload_lora,
// actors/engine/lora_slots.h), against transformers + PEFT (tests/fixtures/lora): an adapter loaded
// at run time gives its reference's tokens on every executor path; a slot that takes another
// adapter serves none of the old one's cached pages; a request running when its adapter is
// unloaded finishes under it; the disk tier never hands one adapter's pages to another across a
// restart; and the refusals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "actors/engine/instance.h"
#include "actors/engine/lora_slots.h"
#include "brigade/engine.h"
#include "tests/actors/lora_test_util.h"
#include "tests/engine_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

LoraModule all_r4(const std::string& name = "all") { return {name, testing::fixture_dir("lora/all_r4")}; }
LoraModule rslora_qv(const std::string& name = "rs") { return {name, testing::fixture_dir("lora/rslora_qv")}; }

EngineOptions slots_options(int max_loras) {
  EngineOptions o = testing::test_engine_options(testing::fixture_dir("llama"), 1);
  o.enable_lora = true;
  o.max_loras = max_loras;
  return o;
}

using testing::greedy_under;

// The fixture's long prompt (two whole pages) under `lora`, one token with its logprob.
GenerateOptions scored_under(const testing::FixtureCase& fc, const std::string& lora) {
  GenerateOptions r = greedy_under(fc.prompt, 1, lora);
  r.logprobs = 0;
  return r;
}

void expect_reference(Engine& engine, const testing::FixtureCase& fc, const std::string& lora, const char* what) {
  auto c = engine.generate(scored_under(fc, lora));
  ASSERT_TRUE(c.has_value()) << what << ": " << c.status().to_string();
  ASSERT_EQ(c->token_ids.size(), 1u);
  EXPECT_EQ(c->token_ids[0], fc.greedy[0]) << what;
  ASSERT_EQ(c->logprobs.size(), 1u);
  EXPECT_NEAR(c->logprobs[0], testing::reference_logprob(fc.logits.back(), fc.greedy[0]), 2 * testing::kLogitTol)
      << what;
}

// An engine started with empty slots takes both adapters while running; base and adapter requests
// sharing steps each give their reference's tokens, on the host, device, speculative and PD paths
// (PD: both instances load the adapter into the same slot).
TEST(EngineLoraRuntime, AdaptersLoadedWhileServingMatchTheirReferences) {
  for (const auto& [name, options] : testing::variants(slots_options(2))) {
    SCOPED_TRACE(name);
    auto engine = testing::create_engine(options);
    ASSERT_NE(engine, nullptr);
    EXPECT_TRUE(engine->loras().empty());
    EXPECT_EQ(engine->model().max_loras, 2);
    ASSERT_TRUE(engine->load_lora(rslora_qv()).is_ok());
    ASSERT_TRUE(engine->load_lora(all_r4()).is_ok());
    const auto loaded = engine->loras();
    ASSERT_EQ(loaded.size(), 2u);
    EXPECT_EQ(loaded[0].name, "rs");  // slot order: rs took slot 1
    EXPECT_EQ(loaded[1].name, "all");
    testing::expect_lora_mix(*engine);
  }
}

// Tensor parallelism 2 on the CPU: the adapters given at start and one loaded while serving
// (rank 0 forwards the load to the other rank) give their PEFT references' tokens.
TEST(EngineLoraRuntime, TensorParallelRanksEachLoadTheirPart) {
  EngineOptions o = slots_options(2);
  o.lora_modules = {all_r4()};
  o.topology.instances.front().executors.front().tp = 2;
  auto engine = testing::create_engine(o);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->load_lora(rslora_qv()).is_ok());
  testing::expect_lora_mix(*engine);
  expect_reference(*engine, testing::read_fixture_cases("lora/rslora_qv").back(), "rs", "rs at tp 2");
  ASSERT_TRUE(engine->unload_lora("rs").is_ok());
  ASSERT_TRUE(engine->load_lora(rslora_qv("rs2")).is_ok());
  expect_reference(*engine, testing::read_fixture_cases("lora/rslora_qv").back(), "rs2", "rs2 in rs's slot at tp 2");
}

// One slot: "all" runs (and caches its prompt's pages), is unloaded, and "rs" takes the slot.
// The same prompt under "rs" must not be served from the pages "all" left in the slot's part of
// the prefix cache (the load drops them): its logprob is rs's PEFT reference.
TEST(EngineLoraRuntime, ASlotTakingAnotherAdapterServesNoneOfTheOldOnesPages) {
  const testing::FixtureCase all = testing::read_fixture_cases("lora/all_r4").back();
  const testing::FixtureCase rs = testing::read_fixture_cases("lora/rslora_qv").back();
  ASSERT_EQ(all.prompt, rs.prompt);
  ASSERT_GE(all.prompt.size(), 32u);
  auto engine = testing::create_engine(slots_options(1));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->load_lora(all_r4()).is_ok());
  expect_reference(*engine, all, "all", "all");
  const uint64_t hits = engine->stats().cache_hit_tokens;
  expect_reference(*engine, all, "all", "all again");
  EXPECT_GE(engine->stats().cache_hit_tokens, hits + 32) << "the adapter's own pages serve it again";

  ASSERT_TRUE(engine->unload_lora("all").is_ok());
  auto refused = engine->submit(scored_under(all, "all"), [](const Event&) {});
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("loaded: none"), std::string::npos) << refused.status().to_string();
  EXPECT_EQ(engine->unload_lora("all").code(), StatusCode::not_found);

  ASSERT_TRUE(engine->load_lora(rslora_qv()).is_ok());
  const uint64_t before = engine->stats().cache_hit_tokens;
  expect_reference(*engine, rs, "rs", "rs in all's old slot");
  EXPECT_EQ(engine->stats().cache_hit_tokens, before) << "rs was served pages computed under all";
  // And the base's pages are still the base's.
  ASSERT_TRUE(engine->generate(greedy_under(all.prompt, 1, "")).has_value());
}

// Unloading an adapter while a request runs under it: new requests are refused at once, the
// running one finishes under the adapter (its reference's tokens), and the slot cannot be taken
// until it has; afterwards it can.
TEST(EngineLoraRuntime, UnloadWhileARequestRunsLetsItFinish) {
  const testing::FixtureCase fc = testing::read_fixture_cases("lora/all_r4").front();
  auto engine = testing::create_engine(slots_options(1));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->load_lora(all_r4()).is_ok());
  std::promise<void> unloaded, done;
  std::shared_future<void> unloaded_f = unloaded.get_future().share();
  std::vector<int32_t> tokens;
  bool first = true;
  auto id = engine->submit(greedy_under(fc.prompt, static_cast<int>(fc.greedy.size()), "all"), [&](const Event& ev) {
    if (first) {  // hold the request (and the engine thread) until the unload has returned
      first = false;
      unloaded_f.wait_for(std::chrono::seconds(20));
    }
    tokens.insert(tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
    if (ev.finish != FinishReason::none) done.set_value();
  });
  ASSERT_TRUE(id.has_value()) << id.status().to_string();
  // Wait for the request to have started (the callback holds its first event).
  for (int i = 0; i < 2000 && engine->stats().prompt_tokens == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(engine->unload_lora("all").is_ok());
  EXPECT_TRUE(engine->loras().empty());
  EXPECT_FALSE(engine->submit(greedy_under(fc.prompt, 1, "all"), [](const Event&) {}).has_value());
  const Status busy = engine->load_lora(rslora_qv());
  EXPECT_EQ(busy.code(), StatusCode::out_of_resources) << busy.to_string();
  EXPECT_NE(busy.message().find("still running"), std::string::npos) << busy.to_string();
  unloaded.set_value();
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(tokens, fc.greedy) << "the running request finished under its adapter";
  ASSERT_TRUE(engine->load_lora(rslora_qv()).is_ok());
  expect_reference(*engine, testing::read_fixture_cases("lora/rslora_qv").back(), "rs", "rs after the drain");
}

// vLLM's load_inplace: "x" is "all", then is replaced by "rs" while serving; requests naming "x"
// then get rs's reference, never a refusal in between, and the old slot is freed for the next load.
TEST(EngineLoraRuntime, ReplacingAnAdapterInPlaceKeepsItsName) {
  const testing::FixtureCase all = testing::read_fixture_cases("lora/all_r4").back();
  const testing::FixtureCase rs = testing::read_fixture_cases("lora/rslora_qv").back();
  auto engine = testing::create_engine(slots_options(2));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->load_lora(all_r4("x")).is_ok());
  expect_reference(*engine, all, "x", "x = all");
  EXPECT_EQ(engine->load_lora(rslora_qv("x")).code(), StatusCode::invalid_argument) << "not without replace";
  ASSERT_TRUE(engine->load_lora(rslora_qv("x"), /*replace=*/true).is_ok());
  ASSERT_EQ(engine->loras().size(), 1u);
  EXPECT_EQ(engine->loras()[0].path, testing::fixture_dir("lora/rslora_qv"));
  expect_reference(*engine, rs, "x", "x = rs");
  // The replaced adapter's slot was freed: both slots can be used again.
  ASSERT_TRUE(engine->load_lora(all_r4("y")).is_ok());
  expect_reference(*engine, all, "y", "y = all in the freed slot");
  // With no slot free, a replace is refused and the old adapter keeps serving.
  const Status full = engine->load_lora(all_r4("x"), /*replace=*/true);
  EXPECT_EQ(full.code(), StatusCode::out_of_resources) << full.to_string();
  expect_reference(*engine, rs, "x", "x still rs");
}

TEST(EngineLoraRuntime, LoadErrorsChangeNothing) {
  auto engine = testing::create_engine(slots_options(1));
  ASSERT_NE(engine, nullptr);
  Status st = engine->load_lora({"x", testing::fixture_dir("llama")});  // a model, not an adapter
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("adapter_config.json"), std::string::npos) << st.to_string();
  EXPECT_EQ(engine->load_lora({"x", "/nonexistent/adapter"}).code(), StatusCode::not_found);
  EXPECT_EQ(engine->load_lora({"", testing::fixture_dir("lora/all_r4")}).code(), StatusCode::invalid_argument);
  EXPECT_TRUE(engine->loras().empty());
  // The failed loads left the one slot free.
  ASSERT_TRUE(engine->load_lora(all_r4()).is_ok());
  EXPECT_EQ(engine->load_lora(all_r4()).code(), StatusCode::invalid_argument) << "already loaded";
  st = engine->load_lora(rslora_qv());
  EXPECT_EQ(st.code(), StatusCode::out_of_resources) << st.to_string();
  EXPECT_NE(st.message().find("max_loras (1)"), std::string::npos) << st.to_string();
  expect_reference(*engine, testing::read_fixture_cases("lora/all_r4").back(), "all", "all after the refusals");

  // An adapter above max_lora_rank is the files' error, with the slot left free.
  EngineOptions small = slots_options(1);
  small.max_lora_rank = 2;
  auto strict = testing::create_engine(small);
  ASSERT_NE(strict, nullptr);
  st = strict->load_lora(all_r4());
  EXPECT_EQ(st.code(), StatusCode::invalid_argument) << st.to_string();
  EXPECT_TRUE(strict->loras().empty());

  // Without slots, loads are unsupported and say how to get them.
  auto plain = testing::create_engine(testing::test_engine_options(testing::fixture_dir("llama"), 1));
  ASSERT_NE(plain, nullptr);
  st = plain->load_lora(all_r4());
  EXPECT_EQ(st.code(), StatusCode::unsupported);
  EXPECT_NE(st.message().find("enable_lora"), std::string::npos) << st.to_string();
  EXPECT_EQ(plain->model().max_loras, 0);
}

// The disk tier outlives the engine. Pages an adapter computed are keyed by what its files hold,
// not by its slot: a restart that puts another adapter in the same slot under the same name gets
// none of them (its logprob is its own reference's), while the same adapter again gets them back.
TEST(EngineLoraRuntime, TheDiskTierNeverGivesOneAdaptersPagesToAnother) {
  const fs::path dir = fs::temp_directory_path() / ("brigade_lora_tier_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const testing::FixtureCase all = testing::read_fixture_cases("lora/all_r4").back();
  const testing::FixtureCase rs = testing::read_fixture_cases("lora/rslora_qv").back();
  // write_through sends pages down as they enter the cache; the disk has them a little later.
  auto wait_for_disk = [](Engine& engine) {
    for (int i = 0; i < 1000 && engine.stats().tier_disk_bytes_in == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_GT(engine.stats().tier_disk_bytes_in, 0u) << "the pages reached the disk tier";
  };
  auto options = [&](const LoraModule& m) {
    EngineOptions o = testing::test_engine_options(testing::fixture_dir("llama"), 1);
    o.lora_modules = {m};
    o.topology.instances.front().cache.disk_path = (dir / "tier").string();
    o.topology.instances.front().cache.write_policy = "write_through";
    return o;
  };
  {
    auto engine = testing::create_engine(options(all_r4("x")));
    ASSERT_NE(engine, nullptr);
    expect_reference(*engine, all, "x", "all as x");
    EXPECT_GT(engine->stats().tier_saved_pages, 0u);
    wait_for_disk(*engine);
  }
  {
    auto engine = testing::create_engine(options(rslora_qv("x")));
    ASSERT_NE(engine, nullptr);
    expect_reference(*engine, rs, "x", "rs as x after a restart");
    EXPECT_EQ(engine->stats().tier_disk_hit_pages, 0u) << "rs was served all's pages from disk";
  }
  {
    auto engine = testing::create_engine(options(all_r4("x")));
    ASSERT_NE(engine, nullptr);
    expect_reference(*engine, all, "x", "all as x again");
    EXPECT_GT(engine->stats().tier_disk_hit_pages, 0u) << "the same adapter's pages come back from disk";
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// The slot book alone.
TEST(LoraSlots, StatesAndRefusals) {
  LoraSlots slots;
  slots.init(2, {all_r4()});
  EXPECT_EQ(slots.n_slots(), 2);
  EXPECT_EQ(*slots.acquire(""), 0);
  EXPECT_EQ(*slots.acquire("all"), 1);
  auto bad = slots.acquire("rs");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("loaded: all"), std::string::npos);
  // A load reserves a free slot; a second load of the name meanwhile is refused; commit: live.
  auto rs = slots.reserve(rslora_qv());
  ASSERT_TRUE(rs.has_value());
  EXPECT_EQ(*rs, 2);
  EXPECT_EQ(slots.reserve(rslora_qv()).status().code(), StatusCode::invalid_argument);
  EXPECT_FALSE(slots.acquire("rs").has_value()) << "not live before commit";
  slots.commit(*rs);
  EXPECT_EQ(*slots.acquire("rs"), 2);
  EXPECT_EQ(slots.reserve({"z", "/p"}).status().code(), StatusCode::out_of_resources);
  // "all" has one request running: retiring it drains; its slot is not reusable until released.
  bool idle = true;
  ASSERT_EQ(*slots.retire("all", &idle), 1);
  EXPECT_FALSE(idle);
  EXPECT_EQ(slots.retire("all", &idle).status().code(), StatusCode::not_found);
  auto busy = slots.reserve({"z", "/p"});
  EXPECT_EQ(busy.status().code(), StatusCode::out_of_resources);
  EXPECT_NE(busy.status().message().find("still running"), std::string::npos);
  slots.release(1);
  EXPECT_EQ(*slots.reserve({"z", "/p"}), 1) << "a drained slot is taken again";
  slots.abandon(1);
  // "rs" idle (its request released): retire holds the slot for the caller until abandon.
  slots.release(2);
  ASSERT_EQ(*slots.retire("rs", &idle), 2);
  EXPECT_TRUE(idle);
  EXPECT_EQ(*slots.reserve({"z", "/p"}), 1);
  EXPECT_EQ(slots.reserve({"w", "/p"}).status().code(), StatusCode::out_of_resources) << "slot 2 is being freed";
  slots.abandon(2);
  EXPECT_EQ(*slots.reserve({"w", "/p"}), 2);
  // A replace: the new slot takes the name at commit; the old one drains, or is handed back to
  // free when nothing runs under it.
  slots.abandon(1);
  slots.abandon(2);
  slots.init(3, {all_r4("x"), rslora_qv("y")});
  EXPECT_EQ(slots.reserve(rslora_qv("x")).status().code(), StatusCode::invalid_argument);
  auto fresh = slots.reserve(rslora_qv("x"), /*replace=*/true);
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(*fresh, 3);
  EXPECT_EQ(*slots.acquire("x"), 1) << "the old one serves until the commit";
  EXPECT_EQ(slots.commit(*fresh), 0) << "the old slot has a request: it drains";
  EXPECT_EQ(*slots.acquire("x"), 3);
  EXPECT_EQ(slots.live().size(), 2u);
  slots.release(1);
  EXPECT_EQ(*slots.reserve(all_r4("x"), true), 1) << "the drained slot is taken again";
  EXPECT_EQ(slots.commit(1), 0) << "slot 3 has a request running";
  slots.release(3);
  EXPECT_EQ(*slots.reserve(all_r4("z")), 3);
  slots.abandon(3);
  EXPECT_EQ(*slots.reserve(rslora_qv("x"), true), 3);
  EXPECT_EQ(slots.commit(3), 1) << "nothing runs under slot 1: the caller frees it";
  LoraSlots none;
  none.init(0, {});
  EXPECT_EQ(none.reserve(all_r4()).status().code(), StatusCode::unsupported);
}

// An adapter as PEFT saved them before safetensors (adapter_model.bin) loads while serving and gives
// its reference's token; its identity, which roots its prompts' cached pages, names that file by its
// bytes, so two .bin adapters with one adapter_config.json never share pages.
TEST(EngineLoraRuntime, ABinAdapterServesAndIsNamedByItsWeights) {
  auto engine = testing::create_engine(slots_options(1));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->load_lora({"bin", testing::fixture_dir("lora/all_r4_bin")}).is_ok());
  expect_reference(*engine, testing::read_fixture_cases("lora/all_r4").back(), "bin", "all_r4 as adapter_model.bin");

  const fs::path dir = fs::temp_directory_path() / ("brigade_lora_bin_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(testing::fixture_dir("lora/all_r4_bin"), dir);
  const std::string before = lora_identity({"x", dir.string()});
  EXPECT_NE(before.find("|adapter_model.bin:"), std::string::npos) << before;
  EXPECT_EQ(before.find(":missing"), std::string::npos) << before;
  {
    std::fstream f(dir / "adapter_model.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    f.put('\x7f');  // one byte of the file changed
  }
  EXPECT_NE(lora_identity({"x", dir.string()}), before);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace brigade
