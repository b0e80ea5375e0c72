// `brigade bench` workloads and reports: request shapes (input/output length distributions,
// shared prefixes, multi-turn conversations), per-request timings, percentiles and the table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::tools {

struct Workload {
  int n_requests = 64;
  int input_len = 128;       // prompt tokens (after the shared prefix)...
  int input_len_max = 0;     // ...uniform in [input_len, input_len_max] when larger
  int output_len = 64;
  int output_len_max = 0;
  int shared_prefix = 0;     // tokens every prompt starts with...
  int prefix_groups = 1;     // ...one of this many distinct prefixes (conversation c uses c % groups)
  int turns = 1;             // requests per conversation; turn k's prompt extends turn k-1's
  uint64_t seed = 0;
};

struct RequestSpec {
  std::vector<int32_t> prompt;  // token ids (byte tokens 3..258, valid in every brigade vocabulary)
  int max_tokens = 0;
  int conversation = 0;
};

// Conversations in order, each a list of turns. Turn k's prompt is turn k-1's prompt, then
// filler ids standing for the previous answer (the API returns text, not ids), then new user
// tokens; so a conversation's prompts share a growing prefix as in a chat.
std::vector<std::vector<RequestSpec>> make_conversations(const Workload& w);

struct RequestResult {
  bool ok = false;
  int http_status = 0;
  std::string error;
  double ttft_s = 0;   // send → first token
  double tpot_s = 0;   // mean gap between later tokens (0 when < 2 tokens)
  double e2e_s = 0;    // send → last byte
  int prompt_tokens = 0;
  int output_tokens = 0;
};

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
};
Percentiles percentiles(std::vector<double> v);

struct BenchSummary {
  std::string mode;  // "online" or "offline"
  int concurrency = 0;
  double rate = 0;   // Poisson arrivals per second; 0 = fixed concurrency
  int n_requests = 0, n_errors = 0;
  double wall_s = 0;
  double requests_per_s = 0, output_tokens_per_s = 0, total_tokens_per_s = 0;
  int64_t prompt_tokens = 0, output_tokens = 0;
  Percentiles ttft_s, tpot_s, e2e_s;
  std::string first_error;
};

BenchSummary summarize(const std::vector<RequestResult>& results, double wall_s);
void print_summary(const BenchSummary& s);
// Writes the summary as JSON; false when the file cannot be written.
bool write_summary_json(const BenchSummary& s, const std::string& path);

}  // namespace brigade::tools
