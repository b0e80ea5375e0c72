// What encoding a long prompt costs, and how much of it is splitting the text at added (special)
// tokens: a 100,000-character mixed text (English, code, Chinese, digits, whitespace runs, HTML with
// '<' and '[' everywhere, and special tokens inside) encoded by
//   few       the committed Qwen2-pattern byte-level BPE (tests/fixtures/tokenizers/qwen2), 3 added tokens
//   tekken1k  the same BPE with 1,000 special added tokens as Mistral's tekken files have ([INST],
//             [TOOL_CALLS], <SPECIAL_{id}> ... made here), none of them normalized
//   tekken    the committed tekken.json (tests/fixtures/tokenizers/tekken_json, 300 special tokens)
// next to what a plain pass over the same bytes costs in the same run (memcpy, and a byte scan that
// counts '<'), since the machine is shared: compare the encode rates as multiples of those.
//   build/bench/bench_tokenizer --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/tokenizer.h"
#include "models/tokenizer_bpe.h"

namespace brigade {
namespace {

using json = nlohmann::json;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Mistral's first special tokens (tekken v7+), then <SPECIAL_{id}> fillers up to `n`.
std::vector<std::string> tekken_names(int n) {
  std::vector<std::string> names = {"<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                                    "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]",
                                    "[IMG_END]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",
                                    "[TOOL_CONTENT]"};
  for (int i = static_cast<int>(names.size()); i < n; ++i) names.push_back("<SPECIAL_" + std::to_string(i) + ">");
  return names;
}

// The 100,000-character prompt: paragraphs of varied text, with special tokens of both
// tokenizers (and near misses: "<SPECIAL_", "[INST", "<|im_") between them.
std::string long_prompt() {
  const char* parts[] = {
      "The quick brown fox jumps over the lazy dog; it's what they'll say, and we've heard THEY'RE done. ",
      "<div class=\"note\"><p>Hello &amp; welcome</p><br/></div> if (a < b && c[i] > d[j]) { return x[0]; } ",
      "人工智能正在改变世界。我们今天讨论大型语言模型的分词器，以及中文、日文和韩文的处理方式。",
      "In 2024 we had 131072 tokens, 3.14159 and 1,000,000 dollars; call 555-0123 at 09:30.\n\n",
      "def forward(self, x):\n    return self.proj(x) ** 2  # [square] <it>\n\tfor i in range(10): print(i)\n",
      "<|im_start|>user\n", "<|im_end|>\n", "[INST] ", " [/INST]", "<SPECIAL_512>", "[TOOL_CALLS]",
      "a near miss: <SPECIAL_ [INST <|im_ [/TOOL ",
  };
  std::string out;
  for (size_t i = 0; out.size() < 100000; ++i) out += parts[(i * 7) % std::size(parts)];
  out.resize(100000);
  while ((static_cast<uint8_t>(out.back()) & 0xC0) == 0x80 || static_cast<uint8_t>(out.back()) >= 0xC0) out.pop_back();
  return out;
}

std::unique_ptr<Tokenizer> bpe(int n_specials) {
  json j = json::parse(read(std::string(BRIGADE_FIXTURES) + "/tokenizers/qwen2/tokenizer.json"));
  if (n_specials > 0) {
    int32_t next = 0;
    for (const auto& [tok, id] : j["model"]["vocab"].items()) next = std::max(next, id.get<int32_t>() + 1);
    for (const auto& a : j["added_tokens"]) next = std::max(next, a["id"].get<int32_t>() + 1);
    for (const std::string& name : tekken_names(n_specials))
      j["added_tokens"].push_back({{"id", next++}, {"content", name}, {"special", true}, {"normalized", false}});
  }
  auto tok = load_bpe_tokenizer(j, json(), "bench");
  if (!tok.has_value()) throw std::runtime_error(tok.status().message());
  return std::move(tok).value();
}

void encode(benchmark::State& state, const Tokenizer& tok) {
  const std::string text = long_prompt();
  size_t n = 0;
  for (auto _ : state) {
    auto ids = tok.encode(text, false);
    if (!ids.has_value()) state.SkipWithError(ids.status().message().c_str());
    n = ids.has_value() ? ids->size() : 0;
    benchmark::DoNotOptimize(ids);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
  state.counters["ids"] = static_cast<double>(n);
}

void BM_EncodeFewAdded(benchmark::State& state) { encode(state, *bpe(0)); }
void BM_EncodeTekken1000Added(benchmark::State& state) { encode(state, *bpe(1000)); }
void BM_EncodeTekkenJson(benchmark::State& state) {
  auto tok = Tokenizer::load(std::string(BRIGADE_FIXTURES) + "/tokenizers/tekken_json/tekken.json");
  if (!tok.has_value()) return state.SkipWithError(tok.status().message().c_str());
  encode(state, **tok);
}
BENCHMARK(BM_EncodeFewAdded)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeTekken1000Added)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeTekkenJson)->Unit(benchmark::kMillisecond);

// The floors: copying the text, and one pass over its bytes.
void BM_Memcpy(benchmark::State& state) {
  const std::string text = long_prompt();
  std::string copy(text.size(), '\0');
  for (auto _ : state) {
    std::memcpy(copy.data(), text.data(), text.size());
    benchmark::DoNotOptimize(copy.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
}
void BM_ByteScan(benchmark::State& state) {
  const std::string text = long_prompt();
  for (auto _ : state) {
    benchmark::DoNotOptimize(text.data());
    benchmark::DoNotOptimize(std::count(text.begin(), text.end(), '<'));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ByteScan)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace brigade

BENCHMARK_MAIN();
