#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "models/make_model.h"
#include "tools/commands.h"

namespace brigade::tools {

void add_executor_flags(CLI::App* cmd, ExecutorFlags& flags) {
  cmd->add_option("--device", flags.device, "Executor device: cpu, cuda or cuda:N (default: the topology's, cpu)");
  cmd->add_option("--weights", flags.weights,
                  "Matrix weights: auto (the checkpoint's; bf16 on a GPU), bf16, or fp8 (E4M3 linear layers; a CUDA "
                  "GPU of compute capability >= 8.9) (default: the topology's, auto)")
      ->check(CLI::IsMember({"auto", "bf16", "fp8"}));
}

void apply_executor_flags(const ExecutorFlags& flags, EngineOptions& options) {
  ExecutorConfig& ex = options.topology.instances.front().executors.front();
  if (!flags.device.empty()) ex.device = flags.device;
  if (!flags.weights.empty()) ex.weights = flags.weights;
}

int fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return 1;
}

Expected<EngineOptions> engine_options(const std::string& topology_file, const std::string& model, int threads) {
  EngineOptions o;
  if (!topology_file.empty()) {
    auto t = load_topology_file(topology_file);
    if (!t) return t.status();
    o.topology = *t;
  }
  o.model_path = model;
  if (threads > 0) o.topology.instances.front().executors.front().threads = threads;
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
