#include "actors/engine/instance.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>

#include "actors/drafter/draft_model_load.h"
#include "actors/drafter/mtp_drafter.h"
#include "actors/kv_manager/kv_manager_actor.h"
#include "core/in_process_communicator.h"
#include "cpu/cpu_backend.h"
#include "cpu/membw.h"
#include "models/checkpoint.h"
#include "models/gemma4_vision.h"
#include "models/mapped_file.h"
#include "models/model_config.h"
#include "models/qwen_vision.h"
#include "models/state_space.h"
#include "models/torch_checkpoint.h"
#ifdef BRIGADE_HAVE_CUDA
#include "gpu/cuda_backend.h"
#include "gpu/roofline.h"
#include "gpu/nccl_communicator.h"
#endif

namespace brigade {

namespace {

Expected<DType> kv_dtype_for(const std::string& name, DType weights) {
  if (name == "auto") return weights;
  auto t = parse_dtype(name);
  if (!t || (*t != DType::f32 && *t != DType::bf16 && *t != DType::f16 && *t != DType::i8))
    return invalid_argument("kv.dtype '" + name + "' is not one of: auto, f32, bf16, f16, int8");
  return *t;
}

// The executor's `weights` key (validated by the topology) as LoadOptions::weight_dtype.
std::optional<DType> weight_dtype_for(const std::string& weights) {
  if (weights == "auto") return std::nullopt;  // the checkpoint's
  return parse_dtype(weights);                 // fp8, f32, bf16, q8_0, q4_0, q4_1
}

// A file by content: its name, size and a hash of its first and last MiB.
std::string file_identity(const std::filesystem::path& f) {
  std::error_code ec;
  std::ifstream in(f, std::ios::binary);
  const auto size = std::filesystem::file_size(f, ec);
  if (ec) return f.filename().string() + ":missing";
  std::string head(std::min<uintmax_t>(size, 1 << 20), '\0'), tail(head.size(), '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  in.seekg(static_cast<std::streamoff>(size - tail.size()));
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  return f.filename().string() + ':' + std::to_string(size) + ':' + root_key(head + tail).hex();
}

// What names the model's weights for the KV fingerprint: architecture, parameter count, and each
// checkpoint file by content (name, size, hash of its first and last MiB), so the same weights
// copied elsewhere keep their cached pages and weights rewritten in place (a new make-model
// seed, a fine-tune saved over them) never meet the KV pages of the old ones. A synthetic spec
// (`synthetic:...`) has deterministic weights: its name is its identity.
std::string model_identity(const std::string& path, const ModelConfig& mc, int64_t n_params) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::ostringstream id;
  id << mc.arch << "|params=" << n_params;
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec)) {
      const auto ext = e.path().extension().string();
      if (e.is_regular_file(ec) && (ext == ".safetensors" || ext == ".gguf" || ext == ".bin" || ext == ".json"))
        files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(path, ec)) {
    files.push_back(path);
  } else {
    id << '|' << path;
  }
  for (const auto& f : files) id << '|' << file_identity(f);
  return id.str();
}

// The backend of tensor-parallel rank `rank` (options.backend_factory, when set, wins): the CPU,
// or the GPU the topology's device names plus the rank (cuda:N puts the ranks on N, N+1, ...).
Expected<std::unique_ptr<Backend>> make_backend(const EngineOptions& options, const ExecutorConfig& exe, int rank,
                                                int n_cpu_ranks) {
  if (options.backend_factory) return options.backend_factory();
  BRIGADE_ASSIGN_OR_RETURN(DeviceSpec spec, parse_device(exe.device));
  if (!spec.cuda) return make_cpu_backend(CpuBackendOptions{rank_threads(exe, n_cpu_ranks)});
#ifdef BRIGADE_HAVE_CUDA
  CudaBackendOptions co;
  co.device = spec.index + rank;
  co.use_graphs = exe.cuda_graphs;
  auto cuda = make_cuda_backend(co);
  if (!cuda) {
    const std::string which = exe.tp > 1 ? "tp rank " + std::to_string(rank) + " on cuda:" + std::to_string(co.device)
                                         : "device '" + exe.device + "'";
    return unsupported(which + ": " + cuda.status().message());
  }
  return std::unique_ptr<Backend>(std::move(*cuda));
#else
  (void)rank;
  (void)n_cpu_ranks;
  return unsupported("device '" + exe.device + "' needs the CUDA backend, and this build has none "
                     "(configure with -DBRIGADE_CUDA=ON where nvcc is installed); use device: cpu");
#endif
}

// The ceilings the executor reports each step against (DESIGN.md §9), measured on its backend:
// HBM copy bandwidth and the GEMM rate of the model's weights (bf16, or fp8 with `weights: fp8`)
// on a GPU, read bandwidth and the f32 GEMM rate with the executor's threads (0 = all) on the CPU.
RooflineCeilings measure_ceilings(Backend& backend, int threads, const std::string& weights) {
#ifdef BRIGADE_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaBackend*>(&backend)) {
    const double tflops = weights == "fp8" ? measure_fp8_gemm_tflops(*cuda) : measure_bf16_gemm_tflops(*cuda);
    return {measure_copy_bandwidth_gbps(*cuda) * 1e9, tflops * 1e12};
  }
#endif
  (void)backend;
  (void)weights;
  ThreadPool pool(threads);
  return {measure_read_bandwidth_gbps(pool) * 1e9, measure_f32_gemm_gflops(pool) * 1e9};
}

// The communicators of a tensor-parallel group, one per backend (rank = index): NCCL when every
// rank is a GPU (one GPU each), the in-process group when every rank is a CPU backend; none for
// one rank.
Expected<std::vector<std::unique_ptr<Communicator>>> make_group(const std::vector<std::unique_ptr<Backend>>& backends) {
  const int n = static_cast<int>(backends.size());
  if (n == 1) return std::vector<std::unique_ptr<Communicator>>(1);
#ifdef BRIGADE_HAVE_CUDA
  std::vector<NcclRank> gpus;
  for (const auto& b : backends)
    if (auto* cuda = dynamic_cast<CudaBackend*>(b.get())) gpus.push_back({cuda->device(), cuda->stream()});
  if (static_cast<int>(gpus.size()) == n) {
#ifdef BRIGADE_HAVE_NCCL
    return make_nccl_group(gpus);
#else
    return unsupported("tp " + std::to_string(n) + " on GPUs joins the ranks with NCCL, and this build found no "
                       "nccl.h; install NCCL's headers where CUDA is and rebuild, or use tp: 1");
#endif
  }
#endif
  for (const auto& b : backends) {
    if (b->name().rfind("cpu", 0) != 0)
      return unsupported("tp " + std::to_string(n) + " joins CPU ranks in process and GPU ranks with NCCL; backend '" +
                         b->name() + "' is neither");
  }
  return make_in_process_group({.size = n});
}

// One executor rank's model (its shard when comm is set) on its backend; the KV cache comes
// later, once rank 0's layout has decided the page count.
Expected<std::shared_ptr<ExecutorResources>> load_rank(const ExecutorConfig& exe, const std::string& path,
                                                       LoadOptions lo, std::unique_ptr<Backend> backend,
                                                       std::unique_ptr<Communicator> comm) {
  auto res = std::make_shared<ExecutorResources>();
  res->communicator = std::move(comm);
  res->backend = std::move(backend);
  lo.communicator = res->communicator.get();
  BRIGADE_ASSIGN_OR_RETURN(res->model, Model::load(path, *res->backend, lo));
  // Followers (rank > 0) never sample. Rank 0 keeps the tokens on the device when asked to, or
  // when its backend prefers that (a GPU), unless it leads a tensor-parallel group: it then
  // hands its followers plans with the tokens filled in, so it samples on the host.
  // The MTP pass runs on the host path (actors/executor/step_runner.h).
  // A recurrent model (models/state_space.h) runs on the host path: the device path pads decode
  // steps with rows that would need state slots of their own.
  // Gemma 3n and Gemma 4 E2B / E4B gather their per-layer embedding rows on the host
  // (models/per_layer_inputs.h): the host path.
  res->runner.device_steps = exe.tp == 1 && !lo.mtp && lo.eagle3.empty() && !res->model->config().recurrent() &&
                             res->model->config().gemma3n.altup_inputs == 0 &&
                             res->model->config().gemma4.per_layer_dim == 0 &&
                             (exe.step_path == "device" || (exe.step_path == "auto" && res->backend->prefers_device_steps()));
  res->runner.max_step_tokens = lo.max_batch_tokens;
  return res;
}

// The ModelConfig of a checkpoint directory's config.json or a GGUF file's header, read before
// the load sizes it (an encoder's step, a recurrent model's state slots); nullopt for other paths
// (a llama2.c file) or a config the load itself will refuse.
std::optional<ModelConfig> directory_config(const std::string& path) {
  if (path.ends_with(".gguf")) {  // its header and tensor index (the load maps the file again)
    auto ck = Checkpoint::open(path);
    return ck ? std::optional<ModelConfig>((*ck)->config()) : std::nullopt;
  }
  std::error_code ec;
  const auto config = std::filesystem::path(path) / "config.json";
  if (!std::filesystem::is_regular_file(config, ec)) return std::nullopt;
  auto text = read_text_file(config.string());
  if (!text) return std::nullopt;
  auto c = parse_hf_config(*text);
  if (!c) return std::nullopt;
  return *c;
}

}  // namespace

BlobTransport pd_transport(const TopologyConfig& topology, bool in_node) {
  const std::string& t = topology.pd.transfer;
  if (t == "inline") return BlobTransport::inline_bytes;
  const bool crosses = in_node || std::any_of(topology.instances.begin(), topology.instances.end(), [](const auto& i) {
                         return !i.remote.empty() && i.role == "decode";
                       });
  if (!crosses) return BlobTransport::local;
  const bool one_host = std::all_of(topology.instances.begin(), topology.instances.end(), [](const auto& i) {
    if (i.remote.empty() || i.role == "both") return true;
    auto ep = parse_endpoint(i.remote);
    return ep.has_value() && ep->loopback();
  });
  return t == "shm" || (t == "auto" && one_host) ? BlobTransport::shared : BlobTransport::inline_bytes;
}

std::string lora_identity(const LoraModule& m) {
  const std::filesystem::path dir(m.path);
  // The file read_lora_adapter reads: adapter_model.safetensors or, without it, adapter_model.bin.
  const std::string weights = weights_file_path(m.path, "adapter_model.safetensors", "adapter_model.bin");
  return "lora|" + file_identity(dir / "adapter_config.json") + '|' + file_identity(weights);
}

Expected<int64_t> kv_budget_from_fraction(double fraction, size_t free, size_t total) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const int64_t used = static_cast<int64_t>(total) - static_cast<int64_t>(std::min(free, total));
  const int64_t reserve = std::max<int64_t>(int64_t{256} << 20, static_cast<int64_t>(total / 100));
  const int64_t budget = static_cast<int64_t>(fraction * static_cast<double>(total)) - used - reserve;
  if (budget > 0) return budget;
  char why[256];
  std::snprintf(why, sizeof why,
                "kv.memory_fraction %.2f (--gpu-memory-utilization) leaves no room for KV pages: %.2f of the "
                "device's %.2f GiB are in use after the load and %.2f GiB are kept in reserve; raise it",
                fraction, static_cast<double>(used) / kGiB, static_cast<double>(total) / kGiB,
                static_cast<double>(reserve) / kGiB);
  return invalid_argument(why);
}

namespace {

// The KV bytes kv.memory_fraction gives every rank (the least of theirs) when all are GPUs;
// nullopt when a rank reports no device memory (the CPU: kv.memory_mb stays).
Expected<std::optional<int64_t>> fraction_budget(const std::vector<std::shared_ptr<ExecutorResources>>& ranks,
                                                 double fraction) {
  std::optional<int64_t> least;
  for (const auto& rank : ranks) {
#ifdef BRIGADE_HAVE_CUDA
    if (auto* cuda = dynamic_cast<CudaBackend*>(rank->backend.get())) {
      const auto [free, total] = cuda->memory_info();
      if (total == 0) return std::optional<int64_t>();
      BRIGADE_ASSIGN_OR_RETURN(const int64_t bytes, kv_budget_from_fraction(fraction, free, total));
      least = least ? std::min(*least, bytes) : bytes;
      continue;
    }
#endif
    (void)rank;
    return std::optional<int64_t>();
  }
  return least;
}

}  // namespace

int rank_threads(const ExecutorConfig& exe, int n_cpu_ranks) {
  if (exe.threads > 0 || n_cpu_ranks <= 1) return exe.threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / n_cpu_ranks);
}

Expected<LoadedInstance> load_instance(const EngineOptions& options, const InstanceConfig& inst, const std::string& path,
                                       int n_cpu_ranks, bool progress) {
  const ExecutorConfig& exe = inst.executors.front();
  LoadedInstance out;
  out.name = inst.name;
  LoadOptions lo;
  const std::optional<ModelConfig> dir_config = directory_config(path);
  // An encoder's step holds its longest prompt, as vLLM raises max_num_batched_tokens to the
  // model's length when prompts are not chunked.
  const int step_tokens = std::max(inst.scheduler.max_step_tokens,
                                   dir_config && dir_config->encoder ? dir_config->max_position : 0);
  // A recurrent model keeps a state per running sequence (models/state_space.h): as many as
  // max_running, or as kv.memory_mb holds when fewer (then they bound max_running too); a hybrid
  // (attention layers too) gives its states at most half of kv.memory_mb and its KV pages the rest.
  // With the prefix cache, snapshots of states (cache.state_snapshots) come out of the same memory.
  int state_slots = inst.scheduler.max_running;
  int state_snapshots = 0;
  int64_t state_bytes = 0;
  if (dir_config && dir_config->recurrent()) {
    const int64_t per_slot = std::max<int64_t>(1, recurrent_state_bytes(*dir_config, exe.tp));
    const int64_t budget = inst.kv.memory_mb * 1024 * 1024 / (dir_config->n_attention_layers() > 0 ? 2 : 1);
    const int64_t fit = std::max<int64_t>(1, budget / per_slot);
    const int64_t max_running = inst.scheduler.max_running;
    int64_t snaps = 0;
    if (inst.cache.radix && inst.cache.state_snapshots == CacheConfig::kAuto)
      snaps = fit > max_running ? std::min(fit - max_running, 4 * max_running) : fit / 4;
    else if (inst.cache.radix)
      snaps = inst.cache.state_snapshots;
    if (snaps >= fit)
      return invalid_argument("instance '" + inst.name + "': cache.state_snapshots " + std::to_string(snaps) +
                              " leaves no state for a running sequence: kv.memory_mb holds " + std::to_string(fit) +
                              " states of " + std::to_string(per_slot >> 10) + " KiB" +
                              (dir_config->n_attention_layers() > 0 ? " (half of it, a hybrid's pages take the rest)" : ""));
    state_snapshots = static_cast<int>(snaps);
    state_slots = static_cast<int>(std::min(max_running, fit - snaps)) + state_snapshots;
    state_bytes = per_slot * state_slots;
  }
  lo.max_batch_tokens = step_tokens;
  lo.progress = progress;
  lo.weight_dtype = weight_dtype_for(exe.weights);
  lo.expert_parallel = exe.expert_parallel;
  lo.loras = options.lora_modules;
  lo.max_lora_rank = options.max_lora_rank;
  lo.max_loras = options.lora_enabled() ? options.max_loras : 0;
  lo.mtp = inst.scheduler.speculative.method == "mtp";
  if (inst.scheduler.speculative.method == "eagle3") lo.eagle3 = inst.scheduler.speculative.model;
  lo.state_slots = state_slots;
  // Every rank's backend first: a GPU rank's communicator is bound to its backend's stream.
  std::vector<std::unique_ptr<Backend>> backends;
  for (int r = 0; r < exe.tp; ++r) {
    BRIGADE_ASSIGN_OR_RETURN(auto backend, make_backend(options, exe, r, n_cpu_ranks));
    backends.push_back(std::move(backend));
  }
  BRIGADE_ASSIGN_OR_RETURN(auto comms, make_group(backends));
  for (int r = 0; r < exe.tp; ++r) {
    BRIGADE_ASSIGN_OR_RETURN(auto rank, load_rank(exe, path, lo, std::move(backends[static_cast<size_t>(r)]),
                                                  std::move(comms[static_cast<size_t>(r)])));
    out.ranks.push_back(std::move(rank));
    lo.progress = false;  // one bar is enough
  }
  const std::shared_ptr<ExecutorResources>& res = out.ranks.front();
  const ModelConfig& mc = res->model->config();
  if (exe.roofline) {
    out.ceilings = measure_ceilings(*res->backend, rank_threads(exe, n_cpu_ranks), exe.weights);
    res->ceilings = out.ceilings;
    spdlog::info("engine: instance '{}': ceilings {:.1f} GB/s, {:.1f} GFLOP/s (roofline per step)", inst.name,
                 out.ceilings.bytes_per_s * 1e-9, out.ceilings.flops_per_s * 1e-9);
  }

  BRIGADE_ASSIGN_OR_RETURN(DType kv_dtype, kv_dtype_for(inst.kv.dtype, mc.dtype));
  KvLayout layout = res->model->kv_layout(1, inst.kv.page_size, kv_dtype);
  int n_pages = inst.kv.pages;
  // The pool's bytes: kv.memory_mb, or on GPUs what kv.memory_fraction leaves (the model's states
  // are allocated by then, so they are not taken off again).
  int64_t kv_bytes = inst.kv.memory_mb * 1024 * 1024 - state_bytes;
  if (inst.kv.memory_fraction > 0.0 && n_pages == 0) {
    BRIGADE_ASSIGN_OR_RETURN(const std::optional<int64_t> budget, fraction_budget(out.ranks, inst.kv.memory_fraction));
    if (budget) {
      kv_bytes = *budget;
      spdlog::info("engine: instance '{}': kv.memory_fraction {:.2f} leaves {} MiB per rank for KV pages", inst.name,
                   inst.kv.memory_fraction, *budget >> 20);
    } else {
      spdlog::warn("engine: instance '{}': kv.memory_fraction (--gpu-memory-utilization) sizes a GPU's KV pool; this "
                   "{} executor's is kv.memory_mb ({} MiB)", inst.name, res->backend->name(), inst.kv.memory_mb);
    }
  }
  // Without attention layers (a state-space model) a page holds no bytes: the pool only counts
  // positions, kRecurrentPages of them unless kv.pages says.
  constexpr int kRecurrentPages = 1 << 16;
  if (n_pages == 0 && layout.page_bytes() == 0) n_pages = kRecurrentPages;
  if (n_pages == 0)
    n_pages = static_cast<int>(std::min<int64_t>(std::max<int64_t>(0, kv_bytes) / static_cast<int64_t>(layout.page_bytes()),
                                                 std::numeric_limits<int32_t>::max()));
  if (n_pages < 1)
    return invalid_argument(inst.kv.memory_fraction > 0.0 ? "kv.memory_fraction leaves too little memory for one page of this model"
                                                          : "kv.memory_mb is too small for one page of this model");
  layout.n_pages = n_pages;
  for (auto& rank : out.ranks) {
    BRIGADE_ASSIGN_OR_RETURN(rank->kv, KvCache::allocate(*rank->backend, layout));
  }
  out.n_pages = n_pages;
  const bool split_pages = exe.tp > 1 && !layout.latent;
  out.kv_page_bytes = layout.page_bytes() * static_cast<size_t>(split_pages ? exe.tp : 1);
  out.kv_layout = kv_fingerprint("", layout) + (split_pages ? ",tp=" + std::to_string(exe.tp) : "");
  spdlog::info("engine: instance '{}': {} ({} params, {} weights, {} MiB) on {}, tp {}{}, KV {} pages x {} tokens "
               "({} MiB per rank, {}), {} step path",
               inst.name, mc.arch, res->model->n_params(), exe.weights, res->model->weight_bytes() >> 20,
               res->backend->name(), exe.tp,
               exe.tp > 1 && mc.n_moe_layers() > 0 ? (exe.expert_parallel ? " (experts split by expert)" : " (experts split by columns)") : "",
               n_pages, layout.page_size, layout.total_bytes() >> 20,
               dtype_name(kv_dtype), res->runner.device_steps ? "device" : "host");

  SchedulerSetup& setup = out.setup;
  // vLLM's max_model_len: at most the model's positions (vLLM refuses a longer one too).
  const int max_model_len = inst.scheduler.max_model_len;
  if (max_model_len > mc.max_position)
    return invalid_argument("instance '" + inst.name + "': scheduler.max_model_len " + std::to_string(max_model_len) +
                            " exceeds the model's " + std::to_string(mc.max_position) + " positions (" + mc.arch +
                            "'s max_position_embeddings)");
  setup.limits = {inst.scheduler.max_running, inst.scheduler.max_waiting, inst.scheduler.max_step_tokens,
                  max_model_len > 0 ? max_model_len : mc.max_position, inst.kv.page_size, mc.vocab_size};
  BRIGADE_RETURN_IF_ERROR(setup.limits.validate());
  setup.max_inflight_steps = inst.scheduler.max_inflight_steps;
  setup.pool_pages = n_pages;
  setup.eos_ids = mc.eos_ids;
  for (const LoraModule& m : options.lora_modules) setup.lora_identities.push_back(lora_identity(m));
  setup.counters = std::make_shared<SchedulerCounters>();
  setup.limits.chunked_prefill = inst.scheduler.chunked_prefill;
  setup.limits.prefix_cache = inst.cache.radix;
  setup.limits.partial_pages = inst.cache.radix && inst.cache.partial_pages;
  setup.limits.in_batch_prefix_tokens = inst.cache.radix ? inst.cache.in_batch_prefix_tokens : 0;
  if (mc.encoder) {
    // An encoder's tokens each see the whole prompt: a prompt runs whole in one step (so it is
    // at most a step's tokens), and no prefix of its K/V means anything to another prompt, so
    // nothing of it is cached (models/bert.h).
    setup.limits.chunked_prefill = false;
    setup.limits.prefix_cache = setup.limits.partial_pages = false;
    setup.limits.in_batch_prefix_tokens = 0;
    setup.limits.max_step_tokens = step_tokens;  // at least the positions (directory_config)
    setup.limits.max_context = std::min(setup.limits.max_context, step_tokens);
    setup.limits.token_types = mc.type_vocab_size;
    if (inst.role != "both" || inst.scheduler.speculative.method != "none")
      return unsupported("instance '" + inst.name + "': " + mc.arch + " is an encoder: it pools and classifies, so it "
                         "runs with neither a PD role nor speculative decoding");
    spdlog::info("engine: instance '{}': an encoder; prompts of up to {} tokens run whole, uncached, in steps of "
                 "{} tokens{}", inst.name, setup.limits.max_context, step_tokens,
                 step_tokens > inst.scheduler.max_step_tokens ? " (max_step_tokens raised to the model's positions)" : "");
  }
  if (mc.recurrent()) {
    // A sequence's state holds its whole past and cannot be rebuilt from another sequence's
    // pages: a cached prefix serves only where a snapshot of the state at its end was kept
    // (SchedulerLimits::state_snapshots), so no partly filled pages or in-batch sharing (whose
    // prefixes end anywhere) and no tiers; it runs neither PD roles nor speculation (a rejected
    // draft would need the state from before it).
    const int running = res->model->state_slots() - state_snapshots;
    setup.limits.prefix_cache = state_snapshots > 0;
    setup.limits.state_snapshots = state_snapshots;
    setup.limits.partial_pages = false;
    setup.limits.in_batch_prefix_tokens = 0;
    setup.limits.max_running = std::min(setup.limits.max_running, running);
    for (auto& rank : out.ranks) rank->runner.state_snapshots = state_snapshots;
    if (inst.role != "both" || inst.scheduler.speculative.method != "none")
      return unsupported("instance '" + inst.name + "': " + mc.arch + " keeps a recurrent state per sequence, so it "
                         "runs with neither a PD role nor speculative decoding");
    const double mib = static_cast<double>(res->model->state_bytes_per_slot()) / (1 << 20);
    spdlog::info("engine: instance '{}': a recurrent state for each of up to {} running sequences ({:.1f} MiB each{}); "
                 "{}", inst.name, running, mib,
                 running < inst.scheduler.max_running ? ", max_running lowered to what kv.memory_mb holds" : "",
                 state_snapshots > 0 ? fmt::format("prefix cache with {} state snapshots ({:.1f} MiB)", state_snapshots,
                                                   mib * state_snapshots)
                                     : std::string("no prefix cache"));
  }
  if (mc.prefix_lm) {  // PaliGemma: each prompt whole in one step, from position 0 (SchedulerLimits::prompt_whole)
    setup.limits.prompt_whole = true;
    // PaliGemma 2: a prompt longer than the sliding window runs alone (the model drops the window for its step).
    setup.limits.prompt_alone_beyond = std::max(0, mc.sliding_window);
    setup.limits.in_batch_prefix_tokens = 0;  // no prompt shares another's pages
    setup.limits.partial_pages = false;
    spdlog::info("engine: instance '{}': a prompt attends to all of itself, so it runs whole in one step (at most {} "
                 "tokens{}) and never from the prefix cache", inst.name, setup.limits.max_step_tokens,
                 mc.sliding_window > 0 ? fmt::format("; alone in its step beyond the sliding window of {}", mc.sliding_window)
                                       : std::string());
  }
  if (res->model->has_vision()) {  // requests with images; the others' images are refused
    const VisionConfig& v = mc.vision;
    setup.limits.image_token = v.image_token;
    if (v.dynamic()) {
      setup.limits.image_merge = v.merge;
      setup.limits.image_patch_width = v.patch_width();
      setup.limits.max_image_patches = QwenVision::kMaxPatches;
      if (v.kind == VisionKind::pixtral) {  // rows of [IMG] with [IMG_BREAK]s, then [IMG_END]; no M-RoPE
        setup.limits.image_break_token = v.image_break_token;
        setup.limits.image_end_token = v.eoi_token;
      }
      if (v.kind == VisionKind::gemma4) {  // no M-RoPE; under "vision" each image runs whole in one step
        setup.limits.image_1d = true;
        setup.limits.image_whole = v.whole_images();
        setup.limits.max_image_patches = static_cast<int>(Gemma4Vision::kMaxTokens * v.merge * v.merge);
      }
      if (v.kind == VisionKind::internvl) {  // columns of tiles; no M-RoPE
        setup.limits.image_1d = true;
        setup.limits.image_tile = v.patches_per_side();
      }
      if (v.kind == VisionKind::llava && v.anyres.on()) {  // LLaVA-NeXT: tiles by the image's size; no M-RoPE
        setup.limits.image_anyres = v.anyres;
      } else if (v.kind == VisionKind::llava || v.tiled()) {
        // Fixed-size images (Idefics3: each tile one), [3, S, S] pixels, the grid's tokens (+ LLaVA's
        // class row); no M-RoPE.
        setup.limits.image_grid = v.patches_per_side();
        setup.limits.image_size = v.image_size;
        setup.limits.image_extra_tokens = v.extra_tokens;
        setup.limits.image_1d = true;
      }
      if (v.kind == VisionKind::llava && v.anyres.on())
        spdlog::info("engine: instance '{}': images of any size in {}x{}-pixel tiles, up to {} tokens each (vision "
                     "tower on {})", inst.name, v.image_size, v.image_size, anyres_max_tokens(v.anyres),
                     res->backend->name());
      else if (v.kind == VisionKind::llava)
        spdlog::info("engine: instance '{}': images of {}x{} pixels, {} tokens each (vision tower on {})", inst.name,
                     v.image_size, v.image_size, v.image_tokens(v.patches_per_side(), v.patches_per_side()),
                     res->backend->name());
      else if (v.tiled())
        spdlog::info("engine: instance '{}': images in tiles of {}x{} pixels, {} tokens a tile (vision tower on {})",
                     inst.name, v.image_size, v.image_size, v.image_tokens(v.patches_per_side(), v.patches_per_side()),
                     res->backend->name());
      else
        spdlog::info("engine: instance '{}': images of any size in {}-pixel patches, a token per {}x{} patches, at "
                     "most {} patches{} (vision tower on {})", inst.name, v.patch_size, v.merge, v.merge,
                     setup.limits.max_image_patches, setup.limits.image_whole ? ", each image whole in one step" : "",
                     res->backend->name());
    } else {
      setup.limits.tokens_per_image = v.tokens_per_image;
      setup.limits.image_size = v.image_size;
      spdlog::info("engine: instance '{}': images of {}x{} pixels, {} tokens each (vision tower on {})", inst.name,
                   v.image_size, v.image_size, v.tokens_per_image, res->backend->name());
    }
  } else if (mc.vision.present()) {
    spdlog::warn("engine: instance '{}': the checkpoint's vision tower runs on the CPU backend at tp 1; this instance "
                 "serves text only", inst.name);
  } else if (!mc.vision_off.empty()) {
    spdlog::warn("engine: instance '{}': images are off, the language model serves text only: {}", inst.name,
                 mc.vision_off);
  }
  BRIGADE_ASSIGN_OR_RETURN(setup.limits.role, parse_pd_role(inst.role));
  setup.instance_name = inst.name;
  setup.pd_transport = pd_transport(options.topology, /*in_node=*/false);
  if (const SpeculativeConfig& sc = inst.scheduler.speculative; sc.method == "ngram") {
    setup.limits.spec = {sc.num_tokens, sc.ngram_min, sc.ngram_max, sc.min_acceptance, sc.disable_batch_size};
    spdlog::info("engine: speculative decoding: ngram {}..{}, {} drafts per step, min acceptance {}", sc.ngram_min,
                 sc.ngram_max, sc.num_tokens, sc.min_acceptance);
  } else if (sc.method == "mtp" || sc.method == "eagle3") {
    // The model loaded its MTP module or EAGLE-3 head (load_instance); its executor drafts with every step. A
    // prefill instance still writes the module's K/V (the decode instance drafts from it) but
    // asks for no drafts.
    setup.limits.spec = {sc.num_tokens, 1, 1, sc.min_acceptance, sc.disable_batch_size};
    setup.limits.spec.mtp = true;
    if (setup.limits.role != PdRole::prefill) setup.drafter = std::make_unique<MtpDrafter>();
    spdlog::info("engine: speculative decoding: {}, {} drafts per step, min acceptance {}",
                 sc.method == "mtp" ? "the model's MTP module" : "EAGLE-3 head '" + sc.model + "'", sc.num_tokens,
                 sc.min_acceptance);
  } else if (sc.method == "draft_model" && setup.limits.role != PdRole::prefill) {
    // (A prefill instance never decodes: it loads no draft.)
    setup.limits.spec = {sc.num_tokens, 1, 1, sc.min_acceptance, sc.disable_batch_size};
    // The draft runs whole on one backend of the executor's device (rank 0's under tp, with the
    // executor's thread count on the CPU), its KV pool as many tokens as the target's unless
    // kv_tokens says otherwise.
    DraftModelSpec ds{sc.model, path, mc.vocab_size, sc.kv_tokens > 0 ? sc.kv_tokens : n_pages * inst.kv.page_size,
                      inst.kv.page_size, inst.scheduler.max_step_tokens};
    BRIGADE_ASSIGN_OR_RETURN(auto backend, make_backend(options, exe, 0, n_cpu_ranks));
    BRIGADE_ASSIGN_OR_RETURN(setup.drafter, load_draft_model(ds, std::move(backend)));
    spdlog::info("engine: speculative decoding: draft model '{}', {} drafts per step, min acceptance {}", sc.model,
                 sc.num_tokens, sc.min_acceptance);
  }
  BRIGADE_ASSIGN_OR_RETURN(setup.limits.eviction, parse_eviction_policy(inst.cache.eviction));
  // The root of the page-key chain and the disk tier's guard (kvstore/page_key.h). Keys name pages
  // beyond this process only through the tiers; without them the device cache is born and dies
  // with the engine, so a constant root serves, and the checkpoint is not read again to hash it.
  const bool tiers_on = inst.cache.tiers_enabled();
  // fp8, q8_0, q4_0 and q4_1 weights compute other K/V than the same checkpoint in bf16 (and f32 other
  // than a quantized GGUF's native kernels): their pages must not meet.
  const std::string weights_id = exe.weights == "auto" || exe.weights == "bf16" ? "" : "|weights=" + exe.weights;
  const std::string kv_fp = tiers_on ? model_identity(path, mc, res->model->n_params()) + weights_id + out.kv_layout : "";
  setup.cache_root = root_key(tiers_on ? kv_fp : "device-only");
  setup.limits.lower_tiers = inst.cache.radix && tiers_on && !mc.encoder && !mc.recurrent();
  // write_through: a page is saved down when it enters the device cache (and reaches disk at
  // once); write_back: when the device evicts it (and disk when host evicts it).
  setup.limits.save_on_insert = inst.cache.write_policy == "write_through";
  if (tiers_on) {
    HiCacheSetup hc;
    hc.host_bytes = static_cast<size_t>(inst.cache.effective_host_bytes());
    hc.disk_path = inst.cache.disk_path;
    hc.disk_bytes = static_cast<size_t>(inst.cache.disk_bytes);
    BRIGADE_ASSIGN_OR_RETURN(hc.policy, parse_write_policy(inst.cache.write_policy));
    hc.model_fingerprint = kv_fp;
    spdlog::info("engine: instance '{}': HiCache tiers: host {} MiB, disk {} ({} MiB), {}", inst.name,
                 hc.host_bytes >> 20, hc.disk_path.empty() ? "off" : hc.disk_path,
                 hc.disk_path.empty() ? 0 : hc.disk_bytes >> 20, write_policy_name(hc.policy));
    out.tiers = std::move(hc);
  }
  return out;
}

Expected<std::shared_ptr<const Tokenizer>> load_model_tokenizer(const std::string& path) {
  const bool gguf = std::filesystem::path(path).extension() == ".gguf";
  if (!std::filesystem::is_directory(path) && !gguf) return std::shared_ptr<const Tokenizer>{};  // a llama2.c .bin
  auto tok = Tokenizer::load(path);  // a GGUF may carry its vocabulary (tokenizer.ggml.*)
  if (!tok) {
    if (tok.status().code() == StatusCode::not_found) return std::shared_ptr<const Tokenizer>{};
    return tok.status();
  }
  return std::shared_ptr<const Tokenizer>(std::move(*tok));
}

SpawnedInstance spawn_instance(caf::actor_system& system, LoadedInstance loaded, token_sink_actor sink, bool linked,
                               handoff_sink_actor handoffs) {
  SpawnedInstance out;
  out.role = loaded.setup.limits.role;
  out.name = loaded.name;
  out.counters = loaded.setup.counters;
  out.ceilings = loaded.ceilings;
  out.n_pages = loaded.n_pages;
  if (loaded.tiers) {
    out.tiers = spawn_hicache(system, std::move(*loaded.tiers));
    out.actors.push_back(caf::actor_cast<caf::actor>(out.tiers));
  }
  auto kv_manager = spawn_kv_manager(system, loaded.n_pages);
  std::vector<tp_follower_actor> followers;
  for (size_t r = 1; r < loaded.ranks.size(); ++r) {
    followers.push_back(spawn_tp_follower(system, loaded.ranks[r]));
    out.actors.push_back(caf::actor_cast<caf::actor>(followers.back()));
  }
  out.executor = spawn_executor(system, loaded.ranks.front(), out.tiers, std::move(followers));
  if (out.role != PdRole::prefill) handoffs = nullptr;
  out.scheduler = spawn_scheduler(system, loaded.setup, out.executor, kv_manager, std::move(sink), std::move(handoffs));
  out.actors.push_back(caf::actor_cast<caf::actor>(kv_manager));
  out.actors.push_back(caf::actor_cast<caf::actor>(out.executor));
  // Links make the instance live and die as one: an actor that exits with an error takes the
  // scheduler along, which the router monitors.
  if (linked) {
    auto* scheduler = caf::actor_cast<caf::abstract_actor*>(out.scheduler);
    for (const caf::actor& a : out.actors) scheduler->add_link(caf::actor_cast<caf::abstract_actor*>(a));
  }
  out.actors.push_back(caf::actor_cast<caf::actor>(out.scheduler));
  return out;
}

}  // namespace brigade
