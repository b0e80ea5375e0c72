// The `brigade` command line: one function pair per subcommand (registration, run).
#pragma once

#include <CLI/CLI.hpp>

#include <csignal>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "actors/node/node_launcher.h"
#include "brigade/engine.h"
#include "core/status.h"

namespace brigade::tools {

// Flags that override the topology's (first) executor; empty keeps the topology's value.
struct ExecutorFlags {
  std::string device;   // cpu, cuda, cuda:N
  std::string weights;  // auto, f32, bf16, fp8, q8_0, q4_0, q4_1
  std::string speculative_config;  // vLLM's --speculative-config JSON (parse_speculative_json)
  std::string mm_processor_kwargs;  // vLLM's --mm-processor-kwargs JSON: min_pixels, max_pixels
  int max_num_batched_tokens = 0;   // vLLM's --max-num-batched-tokens: each instance's max_step_tokens (0: the topology's)
  // vLLM's engine flags, each onto the topology (0 / empty / false: the topology's):
  int tensor_parallel_size = 0;    // --tensor-parallel-size / -tp: each instance's executor tp
  int data_parallel_size = 0;      // --data-parallel-size / -dp: the one instance copied N times behind the router
  int max_num_seqs = 0;            // --max-num-seqs: scheduler.max_running
  std::string max_model_len;       // --max-model-len: scheduler.max_model_len (4096, 4k = 4000, 4K = 4096)
  int block_size = 0;              // --block-size: kv.page_size
  std::string kv_cache_dtype;      // --kv-cache-dtype: kv.dtype (auto, bfloat16, float16, float32, int8)
  std::string dtype;               // --dtype: weights (auto, bfloat16, float32)
  bool enable_prefix_caching = false, no_enable_prefix_caching = false;  // cache.radix
  bool enable_chunked_prefill = false, no_enable_chunked_prefill = false;  // scheduler.chunked_prefill
  bool enforce_eager = false;      // --enforce-eager: executor cuda_graphs false
  double gpu_memory_utilization = 0.0;  // --gpu-memory-utilization: kv.memory_fraction (0: the topology's)
  bool trust_remote_code = false;  // --trust-remote-code: accepted; brigade runs no code from a checkpoint
};
// Registers --device, --weights, --speculative-config, --mm-processor-kwargs,
// --max-num-batched-tokens and vLLM's engine flags above on `cmd`.
void add_executor_flags(CLI::App* cmd, ExecutorFlags& flags);
// vLLM's engine flags as the topology's values (empty / 0 / nullopt: not given); invalid_argument as
// apply_executor_flags says.
struct VllmEngineFlags {
  int max_model_len = 0;
  std::string kv_dtype;  // kv.dtype's name
  std::string weights;   // --dtype as the executor's weights
  std::optional<bool> prefix_caching, chunked_prefill;
};
Expected<VllmEngineFlags> vllm_engine_flags(const ExecutorFlags& flags);

// Writes the flags given into options' topology (validated when the engine starts); a malformed
// --speculative-config, a vLLM value brigade has no equivalent for (--kv-cache-dtype fp8, --dtype
// half), contradictory switches and -dp over a topology of several instances are refused here.
Status apply_executor_flags(const ExecutorFlags& flags, EngineOptions& options);

struct GenerateArgs {
  std::string model;
  std::string tokenizer;  // vLLM's --tokenizer (EngineOptions::tokenizer_path); empty: the model's
  std::string prompt;
  std::string prompt_ids;
  int max_tokens = 64;
  float temperature = 1.0f;
  float top_p = 1.0f;
  int top_k = 0;
  std::optional<uint64_t> seed;
  std::string topology;
  int threads = 0;
  bool ignore_eos = false;
  int min_tokens = 0;
  bool json_object = false;
  std::string json_schema_file;  // --json-schema: the output is an instance of this schema
  std::string regex;             // --regex: the output matches this pattern whole
  std::string grammar_file;      // --grammar: the output derives from this GBNF file's root rule
  bool score = false;            // --score: the prompt's log-likelihood and perplexity
  std::vector<std::string> images;  // --image: PNG/JPEG files for a model with a vision tower
  int beam_width = 0;               // --beam-width: > 0 runs a beam search and prints every beam
  float length_penalty = 1.0f;      // --length-penalty (beam search)
  std::string early_stopping = "false";  // --early-stopping: false, true or never (beam search)
  ExecutorFlags executor;
  bool launch_nodes = false;  // --launch-nodes
};

// Each registers its subcommand; when chosen, `run` is set to the function that runs it.
void add_generate_command(CLI::App& app, std::function<int()>& run);
void add_make_model_command(CLI::App& app, std::function<int()>& run);
void add_inspect_command(CLI::App& app, std::function<int()>& run);
void add_tokenize_command(CLI::App& app, std::function<int()>& run);
void add_demo_command(CLI::App& app, std::function<int()>& run);
void add_serve_command(CLI::App& app, std::function<int()>& run);
void add_bench_command(CLI::App& app, std::function<int()>& run);
void add_node_command(CLI::App& app, std::function<int()>& run);

int run_generate(const GenerateArgs& args);

// --launch-nodes: starts a `brigade node` process (this executable) for every remote instance of
// `options`' topology, read from `topology_file`, with the same model, --threads and executor
// flags, and supervises them (actors/node/node_launcher.h). Null when `launch` is false. Keep it
// alive longer than the engine that connects to the nodes.
Expected<std::unique_ptr<NodeLauncher>> launch_nodes(bool launch, const std::string& topology_file,
                                                     const EngineOptions& options, int threads,
                                                     const ExecutorFlags& flags);
// Registers --launch-nodes on `cmd`.
void add_launch_flag(CLI::App* cmd, bool& launch);

// Blocks SIGINT and SIGTERM in this thread and every thread started after it (engine, server),
// so that only a sigwait on the returned set receives them (graceful stop of serve and node).
sigset_t block_stop_signals();

// Prints "error: <status>" to stderr and returns the exit code 1.
int fail(const Status& status);
// Engine options from an optional topology file, a model path (empty: the topology's `model:`)
// and a thread count (0 = keep). `default_model`: with neither, the default synthetic model
// (made when absent). The chosen path is in model_path.
Expected<EngineOptions> engine_options(const std::string& topology_file, const std::string& model, int threads,
                                       bool default_model = false);
// The default synthetic model's directory ($BRIGADE_HOME or .brigade, then models/default-llama-100m).
std::string default_model_dir();
// Writes the default synthetic model into dir unless it is there already.
Status ensure_default_model(const std::string& dir);
// `model` when given; else the default model's directory, made when absent.
Expected<std::string> model_or_default(const std::string& model);
// How close the executor's steps came to the roofline of the ceilings measured at the engine's
// start (DESIGN.md §9): per bound, the steps, and the time the ceilings allow them over the time
// they took. Prints nothing when the ceilings were not measured.
void print_roofline(const EngineStats& s);
// The roofline fields of EngineStats from a /metrics page (zeros where a line is missing).
EngineStats roofline_from_metrics(const std::string& metrics);
// b - a for the roofline counters (the ceilings are b's): what happened between two readings.
EngineStats roofline_between(const EngineStats& a, const EngineStats& b);
// Submits and blocks until the final event; on_event sees every event (on an engine thread).
Status run_to_end(Engine& engine, const GenerateOptions& req, const std::function<void(const Event&)>& on_event);

}  // namespace brigade::tools
