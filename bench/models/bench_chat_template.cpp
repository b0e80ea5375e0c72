// What rendering a chat prompt through the Jinja interpreter costs per request: the real Qwen3
// and Command-R7B templates (tests/fixtures/chat_templates/models.json) over conversations of
// 2..200 messages, Qwen2.5's and Llama 3.1's against the built-in C++ families, and parsing a
// template (done once, at load).
//   build/bench/bench_chat_template --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "models/chat_template_jinja.h"

namespace brigade {
namespace {

std::string template_source(const std::string& name) {
  std::ifstream in(std::string(BRIGADE_FIXTURES) + "/chat_templates/models.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str())["templates"][name]["template"].get<std::string>();
}

std::vector<ChatMessage> conversation(int n) {
  std::vector<ChatMessage> m{{"system", "You are a helpful assistant. Answer briefly."}};
  for (int i = 1; i < n; ++i)
    m.push_back({i % 2 ? "user" : "assistant", "Message " + std::to_string(i) + ": " + std::string(200, 'x')});
  return m;
}

void render(benchmark::State& state, const char* name) {
  auto t = JinjaChatTemplate::create(template_source(name), "<s>", "</s>");
  const auto msgs = conversation(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(t->apply(msgs, {}, true));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
void BM_RenderQwen3(benchmark::State& state) { render(state, "qwen3"); }
void BM_RenderCommandR7B(benchmark::State& state) { render(state, "command-r7b"); }
BENCHMARK(BM_RenderQwen3)->Arg(2)->Arg(20)->Arg(200)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RenderCommandR7B)->Arg(2)->Arg(20)->Arg(200)->Unit(benchmark::kMicrosecond);

// A model's own template against the built-in C++ rendering of its family (what brigade used to
// serve such models with, and what `--chat-template chatml|llama-3` still renders).
void BM_RenderQwen25(benchmark::State& state) { render(state, "qwen2.5"); }
void BM_RenderLlama31(benchmark::State& state) { render(state, "llama-3.1"); }
void built_in(benchmark::State& state, ChatFamily family) {
  const auto msgs = conversation(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(apply_chat_template(family, msgs, true));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
void BM_BuiltInChatml(benchmark::State& state) { built_in(state, ChatFamily::chatml); }
void BM_BuiltInLlama3(benchmark::State& state) { built_in(state, ChatFamily::llama3); }
BENCHMARK(BM_RenderQwen25)->Arg(2)->Arg(20)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BuiltInChatml)->Arg(2)->Arg(20)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RenderLlama31)->Arg(2)->Arg(20)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BuiltInLlama3)->Arg(2)->Arg(20)->Unit(benchmark::kMicrosecond);

void BM_ParseCommandR7B(benchmark::State& state) {
  const std::string src = template_source("command-r7b");
  for (auto _ : state) benchmark::DoNotOptimize(JinjaChatTemplate::create(src, "", ""));
}
BENCHMARK(BM_ParseCommandR7B)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace brigade

BENCHMARK_MAIN();
