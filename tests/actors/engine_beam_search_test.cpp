// Engine::beam_search against transformers' generate(num_beams=W) on the real stories260K
// checkpoint (tests/fixtures/beam_search/stories260K.json, written by
// scripts/make_beam_fixtures.py): the same W beams with the same scores, for every
// early_stopping rule, positive, zero and negative length penalties, and several end ids. Then
// what the engine adds: the prefix cache serving the beams' shared pages (and changing nothing),
// vLLM's output form, cancellation, and the parameter errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <future>
#include <numeric>

#include "brigade/engine.h"
#include "brigade/station.h"
#include "models/mapped_file.h"
#include "models/make_model.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kStoriesEos = 2;

std::string stories_path() { return std::string(BRIGADE_TESTDATA) + "/models/stories260K.bin"; }

struct BeamCase {
  std::string name;
  BeamSearchOptions options;
  std::vector<int32_t> end_ids;
  std::vector<std::pair<std::vector<int32_t>, double>> beams;  // tokens (end id included), score
};

std::vector<BeamCase> read_cases() {
  auto text = read_text_file(std::string(BRIGADE_FIXTURES) + "/beam_search/stories260K.json");
  EXPECT_TRUE(text.has_value()) << text.status().to_string();
  if (!text) return {};
  std::vector<BeamCase> out;
  const nlohmann::json doc = nlohmann::json::parse(*text);
  for (const auto& c : doc.at("cases")) {
    BeamCase bc;
    bc.name = c.at("name").get<std::string>();
    BeamSearchOptions& o = bc.options;
    o.prompt_ids = c.at("prompt").get<std::vector<int32_t>>();
    o.beam_width = c.at("beam_width").get<int>();
    o.max_tokens = c.at("max_new_tokens").get<int>();
    o.length_penalty = c.at("length_penalty").get<float>();
    const auto& early = c.at("early_stopping");
    o.early_stopping = early.is_string() ? EarlyStopping::never
                       : early.get<bool>() ? EarlyStopping::on
                                           : EarlyStopping::heuristic;
    bc.end_ids = c.at("end_ids").get<std::vector<int32_t>>();
    for (int32_t t : bc.end_ids)
      if (t != kStoriesEos) o.stop_ids.push_back(t);
    o.include_stop_str_in_output = true;  // token_ids as transformers returns them
    o.logprobs = 0;
    for (const auto& b : c.at("beams")) bc.beams.emplace_back(b.at("tokens").get<std::vector<int32_t>>(), b.at("score").get<double>());
    out.push_back(std::move(bc));
  }
  return out;
}

EngineOptions stories_options(bool radix = true) {
  EngineOptions o = testing::test_engine_options(stories_path(), 1);
  o.topology.instances.front().kv.memory_mb = 16;
  o.topology.instances.front().cache.radix = radix;
  return o;
}

// The same beams as transformers' (as a set: two scores within float noise may swap), each with
// its score, best first; an end id ends exactly the beams that carry one.
void expect_matches(const BeamCase& want, const BeamSearchResult& got) {
  SCOPED_TRACE(want.name);
  ASSERT_EQ(got.beams.size(), want.beams.size());
  for (size_t i = 1; i < got.beams.size(); ++i) EXPECT_GE(got.beams[i - 1].score, got.beams[i].score) << "rank " << i;
  for (const auto& [tokens, score] : want.beams) {
    auto it = std::find_if(got.beams.begin(), got.beams.end(), [&](const Beam& b) { return b.token_ids == tokens; });
    ASSERT_NE(it, got.beams.end()) << "transformers' beam of " << tokens.size() << " tokens (score " << score
                                   << ") is missing";
    EXPECT_NEAR(it->score, score, 1e-4 * std::max(1.0, std::fabs(score)));
    const bool ended = std::find(want.end_ids.begin(), want.end_ids.end(), tokens.back()) != want.end_ids.end();
    EXPECT_EQ(it->finish, ended ? FinishReason::stop : FinishReason::length);
    EXPECT_EQ(it->stop_token, ended ? tokens.back() : -1);
    ASSERT_EQ(it->logprobs.size(), tokens.size());
    EXPECT_NEAR(std::accumulate(it->logprobs.begin(), it->logprobs.end(), 0.0), it->cumulative_logprob, 1e-4);
  }
}

// A search that runs for hundreds of steps: still running when a test cancels it.
BeamSearchOptions long_search() {
  BeamSearchOptions o;
  o.prompt_ids = {1};
  o.beam_width = 8;
  o.max_tokens = 400;
  o.ignore_eos = true;
  return o;
}

class EngineBeamSearch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(stories_path())) GTEST_SKIP() << "test data absent: " << stories_path();
  }
};

TEST_F(EngineBeamSearch, MatchesTransformersOnStories260K) {
  const auto cases = read_cases();
  ASSERT_EQ(cases.size(), 10u);
  auto engine = testing::create_engine(stories_options());
  ASSERT_TRUE(engine);
  ASSERT_EQ(engine->model().eos_ids, std::vector<int32_t>{kStoriesEos});
  for (const BeamCase& c : cases) {
    auto got = engine->beam_search(c.options);
    ASSERT_TRUE(got.has_value()) << c.name << ": " << got.status().to_string();
    expect_matches(c, *got);
    EXPECT_EQ(got->prompt_token_ids, c.options.prompt_ids);
    EXPECT_GE(got->steps, 1);
    EXPECT_LE(got->steps, c.options.max_tokens);
  }
}

// The beams share the prompt's pages and their own earlier ones: with the prefix cache on, the
// steps' requests find them cached; with it off they recompute them. The results are the same.
TEST_F(EngineBeamSearch, ThePrefixCacheServesTheBeamsSharedPagesAndChangesNothing) {
  const auto cases = read_cases();
  ASSERT_FALSE(cases.empty());
  const BeamCase& c = cases.back();  // the long prompt, width 8
  auto cached = testing::create_engine(stories_options(true));
  auto plain = testing::create_engine(stories_options(false));
  ASSERT_TRUE(cached && plain);
  auto with = cached->beam_search(c.options);
  auto without = plain->beam_search(c.options);
  ASSERT_TRUE(with.has_value() && without.has_value());
  expect_matches(c, *with);
  expect_matches(c, *without);
  for (size_t i = 0; i < with->beams.size(); ++i) EXPECT_EQ(with->beams[i].token_ids, without->beams[i].token_ids);
  const EngineStats s = cached->stats();
  // Every step after the first runs W requests whose prompts are the 41-token prompt and more.
  EXPECT_GT(s.cache_hit_tokens, static_cast<uint64_t>(c.options.beam_width) * 32 * (with->steps - 1));
  EXPECT_EQ(plain->stats().cache_hit_tokens, 0u);
  // Each step's request continues inside the page its parent's request left partly filled: those
  // rows are copied (cache.partial_pages), so a beam computes one token per step.
  EXPECT_GT(s.cache_partial_hit_tokens, 0u);
  // Step 0 runs the prompt alone; every later step has W running beams (transformers' rule).
  EXPECT_EQ(s.step_tokens,
            c.options.prompt_ids.size() + static_cast<uint64_t>(with->steps - 1) * static_cast<uint64_t>(c.options.beam_width))
      << "the prompt once, then one token per running beam and step";
}

// A station holds every third request it sees for 10 ms, longer than an admit group's 5 ms
// deadline: a step's group loses a member on the way, the scheduler's deadline admits the others
// without it, and the straggler runs when it comes. The search still finds transformers' beams.
class Straggler final : public Station {
 public:
  StationVerdict on_request(StationRequest& request, StationContext& ctx) override {
    if (++n_ % 3 != 0) return StationVerdict::pass();
    const uint64_t id = request.id;
    ctx.after(std::chrono::milliseconds(10), [id, &ctx] { ctx.release(id); });
    return StationVerdict::hold();
  }

 private:
  int n_ = 0;
};

TEST_F(EngineBeamSearch, AStepWithAStragglingRequestStillFindsTheBeams) {
  const auto cases = read_cases();
  ASSERT_FALSE(cases.empty());
  EngineOptions o = stories_options();
  o.station_types["straggler"] = [](const StationSpec&) -> Expected<std::unique_ptr<Station>> {
    return std::unique_ptr<Station>(std::make_unique<Straggler>());
  };
  o.topology.stations.push_back({"late", "straggler", false, {}});
  auto engine = testing::create_engine(o);
  ASSERT_TRUE(engine);
  auto got = engine->beam_search(cases[0].options);
  ASSERT_TRUE(got.has_value()) << cases[0].name << ": " << got.status().to_string();
  expect_matches(cases[0], *got);
  EXPECT_GT(got->steps, 3) << "several steps, so several groups lost a member";
}

TEST_F(EngineBeamSearch, TheEndIdLeavesTheOutputUnlessIncluded) {
  const auto cases = read_cases();
  auto it = std::find_if(cases.begin(), cases.end(), [](const BeamCase& c) { return c.name == "p3_w4_three_ends"; });
  ASSERT_NE(it, cases.end());
  BeamSearchOptions o = it->options;
  o.include_stop_str_in_output = false;
  o.logprobs = 3;
  auto engine = testing::create_engine(stories_options());
  ASSERT_TRUE(engine);
  auto got = engine->beam_search(o);
  ASSERT_TRUE(got.has_value()) << got.status().to_string();
  int n_stopped = 0;
  for (const Beam& b : got->beams) {
    auto want = std::find_if(it->beams.begin(), it->beams.end(), [&](const auto& w) {
      return b.finish == FinishReason::stop ? std::vector<int32_t>(w.first.begin(), w.first.end() - 1) == b.token_ids
                                            : w.first == b.token_ids;
    });
    ASSERT_NE(want, it->beams.end());
    ASSERT_EQ(b.logprobs.size(), b.token_ids.size());
    ASSERT_EQ(b.top_logprobs.size(), b.token_ids.size());
    for (const auto& top : b.top_logprobs) EXPECT_EQ(top.size(), 3u);
    if (b.finish != FinishReason::stop) continue;
    ++n_stopped;
    EXPECT_EQ(b.stop_token, want->first.back());
    // The cumulative logprob still counts the end id's.
    EXPECT_LT(b.cumulative_logprob, std::accumulate(b.logprobs.begin(), b.logprobs.end(), 0.0));
  }
  EXPECT_EQ(n_stopped, 2);
}

// Width 1 with nothing to end a beam but the length is greedy decoding: the same tokens and text
// as Engine::generate, through a model with a tokenizer and a text prompt.
TEST(EngineBeamSearchText, WidthOneWithoutEndsIsGreedyDecodingTextAndAll) {
  const fs::path dir = fs::temp_directory_path() / ("brigade_beam_test_" + std::to_string(::getpid()));
  ASSERT_TRUE(write_synthetic_model(testing::tiny_llama(512, 256, 11), dir.string()).is_ok());
  auto engine = testing::create_engine(testing::test_engine_options(dir.string(), 1));
  ASSERT_TRUE(engine);
  GenerateOptions g;
  g.prompt = "Once upon a time";
  g.max_tokens = 20;
  g.sampling.temperature = 0.0f;
  g.ignore_eos = true;
  auto greedy = engine->generate(g);
  ASSERT_TRUE(greedy.has_value()) << greedy.status().to_string();
  BeamSearchOptions o;
  o.prompt = g.prompt;
  o.beam_width = 1;
  o.max_tokens = 20;
  o.ignore_eos = true;
  auto beams = engine->beam_search(o);
  ASSERT_TRUE(beams.has_value()) << beams.status().to_string();
  ASSERT_EQ(beams->beams.size(), 1u);
  EXPECT_EQ(beams->beams[0].token_ids, greedy->token_ids);
  EXPECT_EQ(beams->beams[0].text, greedy->text);
  EXPECT_EQ(beams->beams[0].finish, FinishReason::length);
  EXPECT_EQ(static_cast<int>(beams->prompt_token_ids.size()), greedy->prompt_tokens);
  engine.reset();
  fs::remove_all(dir);
}

TEST_F(EngineBeamSearch, CancelEndsTheSearchAndTheEngineServesOn) {
  auto engine = testing::create_engine(stories_options());
  ASSERT_TRUE(engine);
  const BeamSearchOptions o = long_search();
  std::promise<Expected<BeamSearchResult>> done;
  auto id = engine->submit_beam_search(o, [&](Expected<BeamSearchResult> r) { done.set_value(std::move(r)); });
  ASSERT_TRUE(id.has_value()) << id.status().to_string();
  engine->cancel(*id);
  engine->cancel(*id);  // twice is harmless
  const auto r = done.get_future().get();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::cancelled);
  // Its step requests were cancelled too: the engine drains and serves the next request.
  auto next = engine->generate(testing::greedy_ids({1}, 8));
  ASSERT_TRUE(next.has_value()) << next.status().to_string();
  for (int i = 0; i < 200 && engine->stats().n_running > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(engine->stats().n_running, 0);
}

// An engine destroyed under a running search cancels it first: its callback hears `cancelled`
// (from the destructor), and no step request is submitted into the stopping engine.
TEST_F(EngineBeamSearch, DestroyingTheEngineCancelsARunningSearch) {
  auto engine = testing::create_engine(stories_options());
  ASSERT_TRUE(engine);
  const BeamSearchOptions o = long_search();
  std::promise<Status> done;
  auto id = engine->submit_beam_search(o, [&](Expected<BeamSearchResult> r) { done.set_value(r ? Status::ok() : r.status()); });
  ASSERT_TRUE(id.has_value()) << id.status().to_string();
  engine.reset();
  auto heard = done.get_future();
  ASSERT_EQ(heard.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(heard.get().code(), StatusCode::cancelled);
}

TEST_F(EngineBeamSearch, RefusesWhatItCannotRun) {
  auto engine = testing::create_engine(stories_options());
  ASSERT_TRUE(engine);
  auto refused = [&](BeamSearchOptions o, StatusCode code, const char* says) {
    auto r = engine->beam_search(o);
    ASSERT_FALSE(r.has_value()) << says;
    EXPECT_EQ(r.status().code(), code) << r.status().to_string();
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  };
  BeamSearchOptions ok;
  ok.prompt_ids = {1, 5};
  BeamSearchOptions o = ok;
  o.beam_width = 0;
  refused(o, StatusCode::invalid_argument, "beam width");
  o.beam_width = 33;
  refused(o, StatusCode::invalid_argument, "beam width");
  o = ok;
  o.max_tokens = 0;
  refused(o, StatusCode::invalid_argument, "max_tokens");
  o = ok;
  o.logprobs = 21;
  refused(o, StatusCode::invalid_argument, "logprobs");
  o = ok;
  o.prompt_ids = {1, 512};
  refused(o, StatusCode::invalid_argument, "outside the vocabulary");
  o = ok;
  o.prompt_ids.clear();
  o.prompt = "no tokenizer here";
  refused(o, StatusCode::invalid_argument, "no tokenizer");
  o = ok;
  o.stop_ids = {3, 4, 5, 6, 7, 8, 9, 10};  // with the EOS, 9 end ids
  refused(o, StatusCode::invalid_argument, "end ids");
  o = ok;
  o.prompt_ids.assign(static_cast<size_t>(engine->model().max_context), 5);
  refused(o, StatusCode::invalid_argument, "no room");
  o = ok;
  o.lora = "nope";
  refused(o, StatusCode::invalid_argument, "nope");
  o = ok;
  o.length_penalty = INFINITY;
  refused(o, StatusCode::invalid_argument, "length_penalty");
  // A prompt one token short of the context runs one step.
  o = ok;
  o.prompt_ids.assign(static_cast<size_t>(engine->model().max_context - 1), 5);
  o.max_tokens = 50;
  auto last = engine->beam_search(o);
  ASSERT_TRUE(last.has_value()) << last.status().to_string();
  EXPECT_EQ(last->steps, 1);
  for (const Beam& b : last->beams) EXPECT_EQ(b.token_ids.size() + (b.finish == FinishReason::stop ? 1 : 0), 1u);
}

}  // namespace
}  // namespace brigade
