#include <cctype>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>

#include <pthread.h>

#include <nlohmann/json.hpp>

#include "models/make_model.h"
#include "tools/commands.h"
#include "cpu/openblas_core.h"

namespace brigade::tools {
namespace {

Expected<int> parse_model_len(const std::string& text) {
  // vLLM's human-readable lengths: k / m / g are powers of 1000, K / M / G of 1024.
  if (text.empty()) return 0;
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string rest = text.substr(digits);
  static const std::map<std::string, int64_t> kScale = {{"", 1},          {"k", 1000},    {"m", 1000000},
                                                         {"g", 1000000000}, {"K", 1 << 10}, {"M", 1 << 20},
                                                         {"G", 1 << 30}};
  auto scale = kScale.find(rest);
  if (digits == 0 || digits > 9 || scale == kScale.end())
    return invalid_argument("--max-model-len: '" + text + "' is not a token count (4096, 4k = 4000, 4K = 4096)");
  const int64_t n = std::stoll(text.substr(0, digits)) * scale->second;
  if (n < 1 || n > std::numeric_limits<int32_t>::max())
    return invalid_argument("--max-model-len: " + text + " is out of range [1, 2^31)");
  return static_cast<int>(n);
}

}  // namespace

Expected<VllmEngineFlags> vllm_engine_flags(const ExecutorFlags& flags) {
  VllmEngineFlags v;
  BRIGADE_ASSIGN_OR_RETURN(v.max_model_len, parse_model_len(flags.max_model_len));
  if (!flags.kv_cache_dtype.empty()) {
    static const std::map<std::string, std::string> kKv = {{"auto", "auto"},    {"bfloat16", "bf16"}, {"bf16", "bf16"},
                                                           {"float16", "f16"},  {"half", "f16"},      {"f16", "f16"},
                                                           {"float32", "f32"},  {"float", "f32"},     {"f32", "f32"},
                                                           {"int8", "int8"}};
    auto it = kKv.find(flags.kv_cache_dtype);
    if (it == kKv.end())
      return invalid_argument("--kv-cache-dtype " + flags.kv_cache_dtype +
                              " is not supported: brigade's KV caches are auto (the checkpoint's type), bfloat16, "
                              "float16, float32 or int8 (the CPU); no fp8 KV cache");
    v.kv_dtype = it->second;
  }
  if (!flags.dtype.empty()) {
    static const std::map<std::string, std::string> kWeights = {{"auto", "auto"}, {"bfloat16", "bf16"},
                                                                {"float32", "f32"}, {"float", "f32"}};
    auto it = kWeights.find(flags.dtype);
    if (it == kWeights.end())
      return invalid_argument("--dtype " + flags.dtype + " is not supported: auto, bfloat16 or float32 (brigade has no "
                              "float16 weights; see --weights for quantized ones)");
    if (!flags.weights.empty() && flags.weights != it->second)
      return invalid_argument("--dtype " + flags.dtype + " and --weights " + flags.weights + " disagree; give one");
    v.weights = it->second;
  }
  if (flags.enable_prefix_caching && flags.no_enable_prefix_caching)
    return invalid_argument("--enable-prefix-caching and --no-enable-prefix-caching: give one");
  if (flags.enable_prefix_caching || flags.no_enable_prefix_caching) v.prefix_caching = flags.enable_prefix_caching;
  if (flags.enable_chunked_prefill && flags.no_enable_chunked_prefill)
    return invalid_argument("--enable-chunked-prefill and --no-enable-chunked-prefill: give one");
  if (flags.enable_chunked_prefill || flags.no_enable_chunked_prefill) v.chunked_prefill = flags.enable_chunked_prefill;
  return v;
}

void add_executor_flags(CLI::App* cmd, ExecutorFlags& flags) {
  cmd->add_option("--device", flags.device, "Executor device: cpu, cuda or cuda:N (default: the topology's, cpu)");
  cmd->add_option("--weights", flags.weights,
                  "Matrix weights: auto (the checkpoint's: GGUF Q4_K, Q8_0, ... stay quantized on the CPU; fp8 "
                  "checkpoints dequantized to f32 on the CPU; bf16 on a GPU), f32 or bf16 (dequantized), fp8 (E4M3 "
                  "linear layers; a CUDA GPU of compute capability >= 8.9), or q8_0 / q4_0 / q4_1 / mxfp4 (linear layers quantized "
                  "at load; the CPU) (default: the topology's, auto)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "fp8", "q8_0", "q4_0", "q4_1", "mxfp4"}));
  cmd->add_option("--speculative-config", flags.speculative_config,
                  "Speculative decoding, as vLLM's flag: JSON with method (ngram, draft_model, mtp or deepseek_mtp: "
                  "DeepSeek-V3's own MTP module, eagle3: an EAGLE-3 head), num_speculative_tokens, model (a draft checkpoint "
                  "or the EAGLE-3 head's directory), "
                  "prompt_lookup_min/max, disable_by_batch_size, min_acceptance, kv_tokens (default: the topology's)");
  cmd->add_option("--max-num-batched-tokens", flags.max_num_batched_tokens,
                  "Token budget of one step (decodes and prompt chunks; vLLM's flag), every instance's "
                  "scheduler.max_step_tokens; an encoder's is raised to its positions (default: the topology's, 512)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--tensor-parallel-size", flags.tensor_parallel_size,
                  "Tensor-parallel ranks of each instance's executor (vLLM's flag; the topology's executor tp)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--data-parallel-size", flags.data_parallel_size,
                  "Copies of the model behind the router (vLLM's flag): the topology's one instance run N times, "
                  "named <name>-dp0 ... (CPU threads divided among them)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--max-num-seqs", flags.max_num_seqs,
                  "Sequences decoded together per instance (vLLM's flag; scheduler.max_running, default 64)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--max-model-len", flags.max_model_len,
                  "Tokens a sequence may hold, prompt and output (vLLM's flag: 4096, 4k = 4000, 4K = 4096; "
                  "scheduler.max_model_len; default: the model's positions)");
  cmd->add_option("--block-size", flags.block_size, "Tokens per KV page (vLLM's flag; kv.page_size, default 16)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--kv-cache-dtype", flags.kv_cache_dtype,
                  "KV cache type (vLLM's flag): auto (the checkpoint's), bfloat16, float16, float32, or int8 (the CPU); "
                  "kv.dtype");
  cmd->add_option("--dtype", flags.dtype,
                  "Weights and activations (vLLM's flag): auto, bfloat16 or float32 (the --weights values bf16, f32)");
  cmd->add_flag("--enable-prefix-caching", flags.enable_prefix_caching, "The radix prefix cache on (the default)");
  cmd->add_flag("--no-enable-prefix-caching", flags.no_enable_prefix_caching, "The radix prefix cache off (cache.radix false)");
  cmd->add_flag("--enable-chunked-prefill", flags.enable_chunked_prefill, "Prompts in chunks beside decodes (the default)");
  cmd->add_flag("--no-enable-chunked-prefill", flags.no_enable_chunked_prefill,
                "Prompts whole, in prefill-only steps (scheduler.chunked_prefill false)");
  cmd->add_option("--gpu-memory-utilization", flags.gpu_memory_utilization,
                  "Share of each GPU's memory the instance uses for weights, buffers and KV pages together (vLLM's "
                  "flag; kv.memory_fraction): the KV pool takes what the loaded model leaves of it; a CPU executor "
                  "keeps kv.memory_mb")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--enforce-eager", flags.enforce_eager,
                "Decode steps op by op instead of replayed CUDA Graphs (vLLM's flag; executor cuda_graphs false); "
                "no effect on the CPU");
  cmd->add_flag("--trust-remote-code", flags.trust_remote_code,
                "Accepted for vLLM compatibility: brigade runs no Python from a checkpoint (an architecture it does "
                "not implement natively is refused by name either way)");
  cmd->add_option("--mm-processor-kwargs", flags.mm_processor_kwargs,
                  "Image processor settings, as vLLM's flag: JSON with min_pixels and/or max_pixels, the bounds of a "
                  "Qwen2-VL / Qwen2.5-VL image's pixels after resizing (default: the model's preprocessor_config.json, "
                  "max_pixels lowered to what one step can take)");
}

// --mm-processor-kwargs: {"min_pixels": N, "max_pixels": N}, positive integers; other keys are
// refused by name (brigade's processors take no others).
Status parse_mm_processor_kwargs(const std::string& text, EngineOptions& options) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("--mm-processor-kwargs: not a JSON object: " + text);
  for (const auto& [key, value] : j.items()) {
    int64_t* field = key == "min_pixels" ? &options.image_min_pixels : key == "max_pixels" ? &options.image_max_pixels : nullptr;
    if (field == nullptr)
      return invalid_argument("--mm-processor-kwargs: '" + key + "' is not supported; supported: min_pixels, max_pixels");
    if (!value.is_number_integer() || value.get<int64_t>() <= 0)
      return invalid_argument("--mm-processor-kwargs: " + key + " must be a positive integer");
    *field = value.get<int64_t>();
  }
  if (options.image_min_pixels > 0 && options.image_max_pixels > 0 && options.image_min_pixels > options.image_max_pixels)
    return invalid_argument("--mm-processor-kwargs: min_pixels exceeds max_pixels");
  return Status::ok();
}

// Flags apply to every instance's executor (two instances on one --device GPU are refused by
// the topology's validation; give each its own cuda:N in the file instead).
Status apply_executor_flags(const ExecutorFlags& flags, EngineOptions& options) {
  BRIGADE_ASSIGN_OR_RETURN(VllmEngineFlags v, vllm_engine_flags(flags));
  for (auto& inst : options.topology.instances) {
    ExecutorConfig& ex = inst.executors.front();
    if (!flags.device.empty()) ex.device = flags.device;
    if (!flags.weights.empty()) ex.weights = flags.weights;
    if (flags.max_num_batched_tokens > 0) inst.scheduler.max_step_tokens = flags.max_num_batched_tokens;
    if (!flags.speculative_config.empty())
      BRIGADE_RETURN_IF_ERROR(parse_speculative_json(flags.speculative_config, inst.scheduler.speculative));
    if (flags.tensor_parallel_size > 0) ex.tp = flags.tensor_parallel_size;
    if (flags.max_num_seqs > 0) inst.scheduler.max_running = flags.max_num_seqs;
    if (v.max_model_len > 0) inst.scheduler.max_model_len = v.max_model_len;
    if (flags.block_size > 0) inst.kv.page_size = flags.block_size;
    if (!v.kv_dtype.empty()) inst.kv.dtype = v.kv_dtype;
    if (!v.weights.empty()) ex.weights = v.weights;
    if (v.prefix_caching) inst.cache.radix = *v.prefix_caching;
    if (v.chunked_prefill) inst.scheduler.chunked_prefill = *v.chunked_prefill;
    if (flags.enforce_eager) ex.cuda_graphs = false;
    if (flags.gpu_memory_utilization > 0.0) inst.kv.memory_fraction = flags.gpu_memory_utilization;
  }
  if (flags.data_parallel_size > 1) {
    auto& insts = options.topology.instances;
    if (insts.size() != 1 || insts.front().role != "both" || !insts.front().remote.empty())
      return invalid_argument("--data-parallel-size copies a topology's one local instance; this topology has " +
                              std::to_string(insts.size()) + " (list the copies under instances: instead)");
    const InstanceConfig proto = insts.front();
    insts.clear();
    for (int i = 0; i < flags.data_parallel_size; ++i) {
      insts.push_back(proto);
      insts.back().name = proto.name + "-dp" + std::to_string(i);
    }
  }
  if (!flags.mm_processor_kwargs.empty()) BRIGADE_RETURN_IF_ERROR(parse_mm_processor_kwargs(flags.mm_processor_kwargs, options));
  return Status::ok();
}

void add_launch_flag(CLI::App* cmd, bool& launch) {
  cmd->add_flag("--launch-nodes", launch,
                "Start a `brigade node` process for each remote instance of the --topology file (all on this host), "
                "with this command's --model, --threads and executor flags; a node that dies is started again, and "
                "all stop with this command (a local cluster in one command)");
}

Expected<std::unique_ptr<NodeLauncher>> launch_nodes(bool launch, const std::string& topology_file,
                                                     const EngineOptions& options, int threads,
                                                     const ExecutorFlags& flags) {
  if (!launch) return std::unique_ptr<NodeLauncher>();
  if (topology_file.empty())
    return invalid_argument("--launch-nodes starts the nodes of a --topology file's remote instances; give one");
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return io_error("--launch-nodes: cannot find this executable (/proc/self/exe: " + ec.message() + ")");
  LaunchOptions lo;
  lo.brigade = self.string();
  lo.topology_file = topology_file;
  if (!options.model_path.empty()) lo.node_args.insert(lo.node_args.end(), {"--model", options.model_path});
  if (threads > 0) lo.node_args.insert(lo.node_args.end(), {"--threads", std::to_string(threads)});
  if (!flags.device.empty()) lo.node_args.insert(lo.node_args.end(), {"--device", flags.device});
  if (!flags.weights.empty()) lo.node_args.insert(lo.node_args.end(), {"--weights", flags.weights});
  if (!flags.speculative_config.empty())
    lo.node_args.insert(lo.node_args.end(), {"--speculative-config", flags.speculative_config});
  if (flags.max_num_batched_tokens > 0)
    lo.node_args.insert(lo.node_args.end(), {"--max-num-batched-tokens", std::to_string(flags.max_num_batched_tokens)});
  // vLLM's engine flags reach the nodes' instances too (--data-parallel-size is refused with remote instances).
  if (flags.tensor_parallel_size > 0)
    lo.node_args.insert(lo.node_args.end(), {"--tensor-parallel-size", std::to_string(flags.tensor_parallel_size)});
  if (flags.max_num_seqs > 0) lo.node_args.insert(lo.node_args.end(), {"--max-num-seqs", std::to_string(flags.max_num_seqs)});
  if (!flags.max_model_len.empty()) lo.node_args.insert(lo.node_args.end(), {"--max-model-len", flags.max_model_len});
  if (flags.block_size > 0) lo.node_args.insert(lo.node_args.end(), {"--block-size", std::to_string(flags.block_size)});
  if (!flags.kv_cache_dtype.empty()) lo.node_args.insert(lo.node_args.end(), {"--kv-cache-dtype", flags.kv_cache_dtype});
  if (!flags.dtype.empty()) lo.node_args.insert(lo.node_args.end(), {"--dtype", flags.dtype});
  if (flags.gpu_memory_utilization > 0.0)
    lo.node_args.insert(lo.node_args.end(), {"--gpu-memory-utilization", std::to_string(flags.gpu_memory_utilization)});
  for (const auto& [on, name] : {std::pair{flags.enable_prefix_caching, "--enable-prefix-caching"},
                                 std::pair{flags.no_enable_prefix_caching, "--no-enable-prefix-caching"},
                                 std::pair{flags.enable_chunked_prefill, "--enable-chunked-prefill"},
                                 std::pair{flags.no_enable_chunked_prefill, "--no-enable-chunked-prefill"},
                                 std::pair{flags.enforce_eager, "--enforce-eager"}})
    if (on) lo.node_args.push_back(name);
  return NodeLauncher::start(options.topology, std::move(lo));
}

sigset_t block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

int fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return 1;
}

Expected<EngineOptions> engine_options(const std::string& topology_file, const std::string& model, int threads,
                                       bool default_model) {
  EngineOptions o;
  if (!topology_file.empty()) {
    auto t = load_topology_file(topology_file);
    if (!t) return t.status();
    o.topology = *t;
  }
  o.model_path = model.empty() ? o.topology.model : model;
  if (default_model && o.model_path.empty()) {
    BRIGADE_ASSIGN_OR_RETURN(o.model_path, model_or_default(""));
  }
  if (threads > 0)
    for (auto& inst : o.topology.instances) inst.executors.front().threads = threads;
  return o;
}

std::string default_model_dir() {
  const char* home = std::getenv("BRIGADE_HOME");
  return std::string(home && *home ? home : ".brigade") + "/models/default-llama-100m";
}

// Bumped whenever make-model's output changes (v2: tokenizer_config.json has a chat template), so
// a default model written by an older brigade is written again rather than used half-current.
constexpr const char* kDefaultModelStamp = "/.brigade-default-model-v2";

Status ensure_default_model(const std::string& dir) {
  if (std::filesystem::exists(dir + "/model.safetensors") && std::filesystem::exists(dir + kDefaultModelStamp))
    return Status::ok();
  std::fprintf(stderr, "writing the default synthetic model (Llama, ~100M parameters, bf16) to %s ...\n", dir.c_str());
  SyntheticModelSpec spec;  // the defaults are the ~100M model
  BRIGADE_RETURN_IF_ERROR(write_synthetic_model(spec, dir));
  std::FILE* f = std::fopen((dir + kDefaultModelStamp).c_str(), "w");
  if (!f) return io_error("cannot write " + dir + kDefaultModelStamp);
  std::fclose(f);
  return Status::ok();
}

Expected<std::string> model_or_default(const std::string& model) {
  if (!model.empty()) return model;
  std::string dir = default_model_dir();
  BRIGADE_RETURN_IF_ERROR(ensure_default_model(dir));
  return dir;
}

void print_roofline(const EngineStats& s) {
  if (s.peak_bytes_per_s <= 0.0) return;
  std::printf("\nroofline (ceilings measured at start: %.1f GB/s memory, %.1f GFLOP/s GEMM; OpenBLAS kernels: %s):\n",
              s.peak_bytes_per_s / 1e9, s.peak_flops_per_s / 1e9, cpu::openblas_core().c_str());
  const auto line = [](const char* bound, uint64_t steps, uint64_t us, double allowed_us) {
    if (steps == 0) return;
    std::printf("  %-14s %6llu steps at %5.1f%% of the roofline (%.3f s allowed, %.3f s taken)\n", bound,
                static_cast<unsigned long long>(steps), us > 0 ? 100.0 * allowed_us / static_cast<double>(us) : 0.0,
                allowed_us / 1e6, static_cast<double>(us) / 1e6);
  };
  line("memory-bound", s.memory_bound_steps, s.memory_bound_executor_us, s.memory_bound_roofline_us);
  line("compute-bound", s.compute_bound_steps, s.compute_bound_executor_us, s.compute_bound_roofline_us);
}

EngineStats roofline_from_metrics(const std::string& metrics) {
  EngineStats s;
  // Line prefix, where the value goes, and its unit there (the page has seconds, EngineStats
  // microseconds).
  struct Field {
    const char* prefix;
    std::function<void(double)> set;
  };
  const auto count = [](uint64_t& out, double scale) {
    return [&out, scale](double v) { out = static_cast<uint64_t>(std::llround(v * scale)); };
  };
  const auto real = [](double& out, double scale) { return [&out, scale](double v) { out = v * scale; }; };
  const Field fields[] = {
      {"brigade_device_peak_bytes_per_second ", real(s.peak_bytes_per_s, 1.0)},
      {"brigade_device_peak_flops_per_second ", real(s.peak_flops_per_s, 1.0)},
      {"brigade_roofline_steps_total{bound=\"memory\"} ", count(s.memory_bound_steps, 1.0)},
      {"brigade_roofline_steps_total{bound=\"compute\"} ", count(s.compute_bound_steps, 1.0)},
      {"brigade_roofline_step_seconds_total{bound=\"memory\"} ", count(s.memory_bound_executor_us, 1e6)},
      {"brigade_roofline_step_seconds_total{bound=\"compute\"} ", count(s.compute_bound_executor_us, 1e6)},
      {"brigade_roofline_allowed_seconds_total{bound=\"memory\"} ", real(s.memory_bound_roofline_us, 1e6)},
      {"brigade_roofline_allowed_seconds_total{bound=\"compute\"} ", real(s.compute_bound_roofline_us, 1e6)},
  };
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    for (const Field& f : fields) {
      const size_t n = std::strlen(f.prefix);
      if (line.compare(0, n, f.prefix) == 0) f.set(std::strtod(line.c_str() + n, nullptr));
    }
  }
  return s;
}

EngineStats roofline_between(const EngineStats& a, const EngineStats& b) {
  EngineStats d = b;
  d.memory_bound_steps -= a.memory_bound_steps;
  d.compute_bound_steps -= a.compute_bound_steps;
  d.memory_bound_executor_us -= a.memory_bound_executor_us;
  d.compute_bound_executor_us -= a.compute_bound_executor_us;
  d.memory_bound_roofline_us -= a.memory_bound_roofline_us;
  d.compute_bound_roofline_us -= a.compute_bound_roofline_us;
  return d;
}

Status run_to_end(Engine& engine, const GenerateOptions& req, const std::function<void(const Event&)>& on_event) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  auto id = engine.submit(req, [&](const Event& ev) {
    on_event(ev);
    if (ev.finish != FinishReason::none) {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
      cv.notify_all();
    }
  });
  if (!id) return id.status();
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return Status::ok();
}

}  // namespace brigade::tools
