#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <sstream>

#include <pthread.h>

#include <nlohmann/json.hpp>

#include "models/make_model.h"
#include "tools/commands.h"
#include "cpu/openblas_core.h"

namespace brigade::tools {

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
  for (auto& inst : options.topology.instances) {
    ExecutorConfig& ex = inst.executors.front();
    if (!flags.device.empty()) ex.device = flags.device;
    if (!flags.weights.empty()) ex.weights = flags.weights;
    if (flags.max_num_batched_tokens > 0) inst.scheduler.max_step_tokens = flags.max_num_batched_tokens;
    if (!flags.speculative_config.empty())
      BRIGADE_RETURN_IF_ERROR(parse_speculative_json(flags.speculative_config, inst.scheduler.speculative));
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
