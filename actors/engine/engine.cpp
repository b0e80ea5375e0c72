// Engine: builds the actor topology of one instance (frontend → tokenizer → scheduler →
// executor, plus the KV page manager) from a TopologyConfig and serves the embedding API.
#include "brigade/engine.h"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "actors/executor/executor_actor.h"
#include "actors/frontend/frontend_actor.h"
#include "actors/hicache/hicache_actor.h"
#include "actors/kv_manager/kv_manager_actor.h"
#include "actors/scheduler/scheduler_actor.h"
#include "actors/tokenizer/tokenizer_actor.h"
#include "core/in_process_communicator.h"
#include "core/logging.h"
#include "cpu/cpu_backend.h"
#include "cpu/membw.h"
#ifdef BRIGADE_HAVE_CUDA
#include "gpu/cuda_backend.h"
#include "gpu/roofline.h"
#include "gpu/nccl_communicator.h"
#endif
#include "messages/convert.h"
#include "messages/registry.h"
#include "models/chat_template.h"
#include "models/gguf.h"

namespace brigade {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::none: return "none";
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::abort: return "abort";
    case FinishReason::error: return "error";
  }
  return "?";
}

namespace {

caf::actor_system_config& prepared_config(caf::actor_system_config& cfg) {
  register_message_types(cfg);
  // Work sharing wakes an idle worker through a condition variable as soon as a message
  // arrives; CAF's default work stealing polls and sleeps (50 us, then 10 ms) when idle, which
  // adds that much latency to every step whose result arrives while the workers doze.
  cfg.set("scheduler.policy", caf::atom("sharing"));
  return cfg;
}

Expected<DType> kv_dtype_for(const std::string& name, DType weights) {
  if (name == "auto") return weights;
  auto t = parse_dtype(name);
  if (!t || (*t != DType::f32 && *t != DType::bf16 && *t != DType::f16 && *t != DType::i8))
    return invalid_argument("kv.dtype '" + name + "' is not one of: auto, f32, bf16, f16, int8");
  return *t;
}

// The executor's `weights` key (validated by the topology) as LoadOptions::weight_dtype.
std::optional<DType> weight_dtype_for(const std::string& weights) {
  if (weights == "fp8") return DType::f8e4m3;
  if (weights == "bf16") return DType::bf16;
  return std::nullopt;  // auto: the checkpoint's
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
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const auto size = fs::file_size(f, ec);
    std::string head(std::min<uintmax_t>(size, 1 << 20), '\0'), tail(head.size(), '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    in.seekg(static_cast<std::streamoff>(size - tail.size()));
    in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
    id << '|' << f.filename().string() << ':' << size << ':' << root_key(head + tail).hex();
  }
  return id.str();
}

Status validate_request(const GenerateOptions& r, const ModelSummary& m) {
  if (r.max_tokens < 1) return invalid_argument("max_tokens must be >= 1 (got " + std::to_string(r.max_tokens) + ")");
  const auto& s = r.sampling;
  if (!(s.temperature >= 0.0f)) return invalid_argument("temperature must be >= 0 (got " + std::to_string(s.temperature) + ")");
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) return invalid_argument("top_p must be in (0, 1] (got " + std::to_string(s.top_p) + ")");
  if (s.top_k < 0) return invalid_argument("top_k must be >= 0 (got " + std::to_string(s.top_k) + ")");
  if (!(s.min_p >= 0.0f && s.min_p < 1.0f)) return invalid_argument("min_p must be in [0, 1) (got " + std::to_string(s.min_p) + ")");
  if (!(s.repetition_penalty > 0.0f))
    return invalid_argument("repetition_penalty must be > 0 (got " + std::to_string(s.repetition_penalty) + ")");
  if (!(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f))
    return invalid_argument("presence_penalty must be in [-2, 2] (got " + std::to_string(s.presence_penalty) + ")");
  if (!(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f))
    return invalid_argument("frequency_penalty must be in [-2, 2] (got " + std::to_string(s.frequency_penalty) + ")");
  if (r.logprobs > 20) return invalid_argument("logprobs must be at most 20 (got " + std::to_string(r.logprobs) + ")");
  if (r.prompt_ids.empty() && r.prompt.empty()) return invalid_argument("the prompt is empty: give text or token ids");
  if (r.prompt_ids.empty() && !m.has_tokenizer)
    return invalid_argument("this model has no tokenizer: send the prompt as token ids");
  for (int32_t t : r.prompt_ids) {
    if (t < 0 || t >= m.vocab_size)
      return invalid_argument("prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                              std::to_string(m.vocab_size) + ")");
  }
  for (int32_t t : r.stop_ids) {
    if (t < 0 || t >= m.vocab_size) return invalid_argument("stop token id " + std::to_string(t) + " is outside the vocabulary");
  }
  return Status::ok();
}

// CPU threads of one executor rank (0 = all cores): ranks share the machine's cores, so "all
// cores" means an equal share for each.
int rank_threads(const ExecutorConfig& exe) {
  if (exe.threads > 0 || exe.tp == 1) return exe.threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / exe.tp);
}

// The backend of tensor-parallel rank `rank` (options.backend_factory, when set, wins): the CPU,
// or the GPU the topology's device names plus the rank (cuda:N puts the ranks on N, N+1, ...).
Expected<std::unique_ptr<Backend>> make_backend(const EngineOptions& options, int rank) {
  if (options.backend_factory) return options.backend_factory();
  const ExecutorConfig& exe = options.topology.instances.front().executors.front();
  BRIGADE_ASSIGN_OR_RETURN(DeviceSpec spec, parse_device(exe.device));
  if (!spec.cuda) return make_cpu_backend(CpuBackendOptions{rank_threads(exe)});
#ifdef BRIGADE_HAVE_CUDA
  CudaBackendOptions co;
  co.device = spec.index + rank;
  auto cuda = make_cuda_backend(co);
  if (!cuda) {
    const std::string which = exe.tp > 1 ? "tp rank " + std::to_string(rank) + " on cuda:" + std::to_string(co.device)
                                         : "device '" + exe.device + "'";
    return unsupported(which + ": " + cuda.status().message());
  }
  return std::unique_ptr<Backend>(std::move(*cuda));
#else
  (void)rank;
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
Expected<std::shared_ptr<ExecutorResources>> load_rank(const EngineOptions& options, const std::string& path,
                                                       LoadOptions lo, std::unique_ptr<Backend> backend,
                                                       std::unique_ptr<Communicator> comm) {
  const ExecutorConfig& exe = options.topology.instances.front().executors.front();
  auto res = std::make_shared<ExecutorResources>();
  res->communicator = std::move(comm);
  res->backend = std::move(backend);
  lo.communicator = res->communicator.get();
  BRIGADE_ASSIGN_OR_RETURN(res->model, Model::load(path, *res->backend, lo));
  // Followers (rank > 0) never sample. Rank 0 keeps the tokens on the device when asked to, or
  // when its backend prefers that (a GPU), unless it leads a tensor-parallel group: it then
  // hands its followers plans with the tokens filled in, so it samples on the host.
  res->runner.device_steps =
      exe.tp == 1 && (exe.step_path == "device" || (exe.step_path == "auto" && res->backend->prefers_device_steps()));
  res->runner.max_step_tokens = lo.max_batch_tokens;
  return res;
}

// Where stats() finds each EngineStats field: the scheduler's counters (totals and gauges) and
// the tier actor's TierStats answer.
template <class T>
using CounterField = std::pair<T EngineStats::*, std::atomic<T> SchedulerCounters::*>;
constexpr CounterField<uint64_t> kCounterTotals[] = {
    {&EngineStats::steps, &SchedulerCounters::steps},
    {&EngineStats::step_tokens, &SchedulerCounters::step_tokens},
    {&EngineStats::executor_us, &SchedulerCounters::executor_us},
    {&EngineStats::requests_done, &SchedulerCounters::requests_done},
    {&EngineStats::prompt_tokens, &SchedulerCounters::prompt_tokens},
    {&EngineStats::generated_tokens, &SchedulerCounters::generated_tokens},
    {&EngineStats::preemptions, &SchedulerCounters::preemptions},
    {&EngineStats::cache_lookups, &SchedulerCounters::cache_lookups},
    {&EngineStats::cache_hit_tokens, &SchedulerCounters::cache_hit_tokens},
    {&EngineStats::cache_loaded_tokens, &SchedulerCounters::cache_loaded_tokens},
    {&EngineStats::cache_evicted_pages, &SchedulerCounters::cache_evicted_pages},
    {&EngineStats::tier_saved_pages, &SchedulerCounters::tier_saved_pages},
    {&EngineStats::tier_host_hit_pages, &SchedulerCounters::tier_host_hit_pages},
    {&EngineStats::tier_disk_hit_pages, &SchedulerCounters::tier_disk_hit_pages},
    {&EngineStats::step_flops, &SchedulerCounters::step_flops},
    {&EngineStats::step_bytes, &SchedulerCounters::step_bytes},
    {&EngineStats::spec_draft_tokens, &SchedulerCounters::spec_draft_tokens},
    {&EngineStats::spec_accepted_tokens, &SchedulerCounters::spec_accepted_tokens},
    {&EngineStats::spec_verify_seqs, &SchedulerCounters::spec_verify_seqs},
    {&EngineStats::spec_misses, &SchedulerCounters::spec_misses},
    {&EngineStats::spec_off_compute_bound_steps, &SchedulerCounters::spec_off_compute_bound_steps},
    {&EngineStats::spec_off_batch_steps, &SchedulerCounters::spec_off_batch_steps},
    {&EngineStats::spec_seqs_turned_off, &SchedulerCounters::spec_seqs_turned_off},
};
// Per bound, memory then compute (SchedulerCounters::bound_*).
constexpr std::pair<uint64_t EngineStats::*, uint64_t EngineStats::*> kBoundFields[] = {
    {&EngineStats::memory_bound_steps, &EngineStats::compute_bound_steps},
    {&EngineStats::memory_bound_executor_us, &EngineStats::compute_bound_executor_us},
};
constexpr std::atomic<uint64_t> (SchedulerCounters::*kBoundCounters[])[2] = {&SchedulerCounters::bound_steps,
                                                                               &SchedulerCounters::bound_executor_us};
constexpr CounterField<int> kCounterGauges[] = {
    {&EngineStats::n_running, &SchedulerCounters::n_running},
    {&EngineStats::n_waiting, &SchedulerCounters::n_waiting},
    {&EngineStats::kv_pages_used, &SchedulerCounters::kv_pages_used},
    {&EngineStats::cache_pages, &SchedulerCounters::cache_pages},
};
using TierReader = schema::TierStats::Reader;
constexpr std::pair<uint64_t EngineStats::*, uint64_t (TierReader::*)() const> kTierFields[] = {
    {&EngineStats::tier_host_bytes_in, &TierReader::getHostBytesIn},
    {&EngineStats::tier_host_bytes_out, &TierReader::getHostBytesOut},
    {&EngineStats::tier_host_bytes_used, &TierReader::getHostBytesUsed},
    {&EngineStats::tier_disk_bytes_in, &TierReader::getDiskBytesIn},
    {&EngineStats::tier_disk_bytes_out, &TierReader::getDiskBytesOut},
    {&EngineStats::tier_disk_bytes_used, &TierReader::getDiskBytesUsed},
    {&EngineStats::tier_disk_corrupt, &TierReader::getDiskCorrupt},
};

class EngineImpl final : public Engine {
 public:
  EngineImpl() : system_(prepared_config(cfg_)) {}

  ~EngineImpl() override {
    for (const auto& a : actors_) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    actors_.clear();
    // system_ waits for every actor, the detached executor included, in its destructor.
  }

  Status start(const EngineOptions& options);

  // Sends `request` to `dest` and waits up to `timeout` for its Reply; a CAF error (the timeout, a
  // dead actor) comes back as internal. Blocks the calling thread (a client's, never an actor's).
  template <class Reply, class Handle, class Request>
  Expected<Reply> ask(const Handle& dest, caf::timespan timeout, Request request) const {
    caf::scoped_actor self{*sys_};
    Expected<Reply> out = internal_error("no answer");
    self->request(dest, timeout, std::move(request))
        .receive([&](const Reply& r) { out = r; }, [&](const caf::error& err) { out = internal_error(caf::to_string(err)); });
    return out;
  }

  Expected<int> cached_prefix_tokens(const std::vector<int32_t>& prompt_ids) const override {
    auto q = prefix_query_msg::build([&](schema::PrefixQuery::Builder b) {
      fill_list(b.initTokens(static_cast<unsigned>(prompt_ids.size())), prompt_ids);
    });
    auto r = ask<prefix_query_result_msg>(scheduler_, std::chrono::seconds(10), std::move(q));
    if (!r) return internal_error("prefix query failed: " + r.status().message());
    return r->reader().getCachedTokens();
  }

  // Asks the tier actor for its counters (a short wait; the numbers are skipped if it is busy).
  void add_tier_stats(EngineStats& s) const {
    s.tiers = true;
    auto m = ask<tier_stats_msg>(tiers_, std::chrono::milliseconds(500), tier_stats_request_msg::build([](auto) {}));
    if (!m) return;
    const auto r = m->reader();
    for (const auto& [to, from] : kTierFields) s.*to = (r.*from)();
    s.tier_disk_degraded = r.getDiskDegraded();
  }

  Expected<uint64_t> submit(const GenerateOptions& request, EventCallback on_event) override;
  void cancel(uint64_t request_id) override {
    caf::anon_send(tokenizer_, abort_msg::build([&](schema::Abort::Builder b) { b.setRequestId(request_id); }));
  }
  const ModelSummary& model() const override { return summary_; }
  Expected<std::string> format_chat(const std::vector<ChatTurn>& messages, bool add_generation_prompt) const override {
    if (!chat_family_) return chat_family_.status();
    std::vector<ChatMessage> turns;
    turns.reserve(messages.size());
    for (const auto& m : messages) turns.push_back({m.role, m.content});
    return apply_chat_template(*chat_family_, turns, add_generation_prompt);
  }
  Expected<std::vector<int32_t>> tokenize(const std::string& text, bool add_bos) const override {
    if (!tokenizer_model_) return not_found("this model has no tokenizer");
    return tokenizer_model_->encode(text, add_bos);
  }
  Expected<std::string> detokenize(const std::vector<int32_t>& ids) const override {
    if (!tokenizer_model_) return not_found("this model has no tokenizer");
    return tokenizer_model_->decode(ids);
  }
  EngineStats stats() const override {
    const SchedulerCounters& c = *counters_;
    EngineStats s;
    for (const auto& [to, from] : kCounterTotals) s.*to = (c.*from).load();
    for (const auto& [to, from] : kCounterGauges) s.*to = (c.*from).load();
    for (size_t i = 0; i < std::size(kBoundFields); ++i) {
      s.*kBoundFields[i].first = (c.*kBoundCounters[i])[0].load();
      s.*kBoundFields[i].second = (c.*kBoundCounters[i])[1].load();
    }
    s.memory_bound_roofline_us = static_cast<double>(c.bound_roofline_ns[0].load()) / 1e3;
    s.compute_bound_roofline_us = static_cast<double>(c.bound_roofline_ns[1].load()) / 1e3;
    s.peak_bytes_per_s = ceilings_.bytes_per_s;
    s.peak_flops_per_s = ceilings_.flops_per_s;
    s.kv_pages_total = kv_pages_total_;
    if (tiers_) add_tier_stats(s);
    return s;
  }

 private:
  caf::actor_system_config cfg_;
  caf::actor_system system_;
  caf::actor_system* sys_ = &system_;  // for const methods that talk to actors
  hicache_actor tiers_;
  scheduler_actor scheduler_;
  std::vector<caf::actor> actors_;
  std::shared_ptr<CallbackRegistry> registry_ = std::make_shared<CallbackRegistry>();
  tokenizer_actor tokenizer_;
  // The tokenizer actor's tokenizer too (immutable and thread-safe, so sharing it is safe):
  // tokenize/detokenize calls need no round trip through the actor's queue.
  std::shared_ptr<const Tokenizer> tokenizer_model_;
  ModelSummary summary_;
  int kv_pages_total_ = 0;
  Expected<ChatFamily> chat_family_ = not_found("this model has no chat template");
  std::shared_ptr<SchedulerCounters> counters_ = std::make_shared<SchedulerCounters>();
  RooflineCeilings ceilings_;  // measured at start (executor `roofline: true`), else zeros
  std::atomic<uint64_t> next_id_{1};
  std::mt19937_64 seed_rng_{std::random_device{}()};
  std::mutex seed_mu_;
};

Status EngineImpl::start(const EngineOptions& options) {
  BRIGADE_RETURN_IF_ERROR(options.topology.validate());
  const InstanceConfig& inst = options.topology.instances.front();
  const ExecutorConfig& exe = inst.executors.front();
  const std::string path = options.model_path.empty() ? options.topology.model : options.model_path;
  if (path.empty()) return invalid_argument("no model given: pass a model path or set `model:` in the topology");

  LoadOptions lo;
  lo.max_batch_tokens = inst.scheduler.max_step_tokens;
  lo.progress = options.progress;
  lo.weight_dtype = weight_dtype_for(exe.weights);
  // Every rank's backend first: a GPU rank's communicator is bound to its backend's stream.
  std::vector<std::unique_ptr<Backend>> backends;
  for (int r = 0; r < exe.tp; ++r) {
    BRIGADE_ASSIGN_OR_RETURN(auto backend, make_backend(options, r));
    backends.push_back(std::move(backend));
  }
  BRIGADE_ASSIGN_OR_RETURN(auto comms, make_group(backends));
  std::vector<std::shared_ptr<ExecutorResources>> ranks;
  for (int r = 0; r < exe.tp; ++r) {
    BRIGADE_ASSIGN_OR_RETURN(auto rank, load_rank(options, path, lo, std::move(backends[static_cast<size_t>(r)]),
                                                  std::move(comms[static_cast<size_t>(r)])));
    ranks.push_back(std::move(rank));
    lo.progress = false;  // one bar is enough
  }
  const std::shared_ptr<ExecutorResources>& res = ranks.front();
  const ModelConfig& mc = res->model->config();
  if (exe.roofline) {
    ceilings_ = measure_ceilings(*res->backend, rank_threads(exe), exe.weights);
    res->ceilings = ceilings_;
    spdlog::info("engine: ceilings {:.1f} GB/s, {:.1f} GFLOP/s (roofline per step)", ceilings_.bytes_per_s * 1e-9,
                 ceilings_.flops_per_s * 1e-9);
  }

  std::shared_ptr<const Tokenizer> tokenizer;
  const bool gguf = std::filesystem::path(path).extension() == ".gguf";
  if (std::filesystem::is_directory(path) || gguf) {  // a GGUF may carry its vocabulary (tokenizer.ggml.*)
    auto tok = Tokenizer::load(path);
    if (tok) {
      BRIGADE_RETURN_IF_ERROR(check_tokenizer_fits(**tok, mc.vocab_size));
      tokenizer = std::move(*tok);
    } else if (tok.status().code() != StatusCode::not_found) {
      return tok.status();
    }
  }

  if (tokenizer && std::filesystem::is_directory(path)) {
    // A model with a template of no known family still serves completions; chat says why not.
    chat_family_ = chat_family_for_model(path, "");
  } else if (tokenizer && gguf) {
    if (auto file = GgufFile::open(path)) {
      if (auto jinja = (*file)->get_string("tokenizer.chat_template")) chat_family_ = detect_chat_family(*jinja);
    }
  }

  BRIGADE_ASSIGN_OR_RETURN(DType kv_dtype, kv_dtype_for(inst.kv.dtype, mc.dtype));
  KvLayout layout = res->model->kv_layout(1, inst.kv.page_size, kv_dtype);
  int n_pages = inst.kv.pages;
  if (n_pages == 0) n_pages = static_cast<int>(inst.kv.memory_mb * 1024 * 1024 / static_cast<int64_t>(layout.page_bytes()));
  if (n_pages < 1) return invalid_argument("kv.memory_mb is too small for one page of this model");
  layout.n_pages = n_pages;
  for (auto& rank : ranks) {
    BRIGADE_ASSIGN_OR_RETURN(rank->kv, KvCache::allocate(*rank->backend, layout));
  }

  summary_ = {mc.arch, mc.vocab_size, mc.max_position, res->model->n_params(), res->model->weight_bytes(),
              tokenizer != nullptr};
  spdlog::info("engine: {} ({} params, {} weights, {} MiB) on {}, tp {}, KV {} pages x {} tokens ({} MiB per rank, {}), "
               "{} step path",
               mc.arch, summary_.n_params, exe.weights, res->model->weight_bytes() >> 20, res->backend->name(), exe.tp,
               n_pages, layout.page_size, layout.total_bytes() >> 20, dtype_name(kv_dtype),
               res->runner.device_steps ? "device" : "host");

  SchedulerSetup setup;
  setup.limits = {inst.scheduler.max_running, inst.scheduler.max_waiting, inst.scheduler.max_step_tokens,
                  mc.max_position,            inst.kv.page_size,          mc.vocab_size};
  BRIGADE_RETURN_IF_ERROR(setup.limits.validate());
  setup.max_inflight_steps = inst.scheduler.max_inflight_steps;
  setup.pool_pages = n_pages;
  kv_pages_total_ = n_pages;
  setup.eos_ids = mc.eos_ids;
  setup.counters = counters_;
  setup.limits.chunked_prefill = inst.scheduler.chunked_prefill;
  setup.limits.prefix_cache = inst.cache.radix;
  if (const SpeculativeConfig& sc = inst.scheduler.speculative; sc.method == "ngram") {
    setup.limits.spec = {sc.num_tokens, sc.ngram_min, sc.ngram_max, sc.min_acceptance, sc.disable_batch_size};
    spdlog::info("engine: speculative decoding: ngram {}..{}, {} drafts per step, min acceptance {}", sc.ngram_min,
                 sc.ngram_max, sc.num_tokens, sc.min_acceptance);
  }
  BRIGADE_ASSIGN_OR_RETURN(setup.limits.eviction, parse_eviction_policy(inst.cache.eviction));
  // The root of the page-key chain and the disk tier's guard (kvstore/page_key.h). Keys name pages
  // beyond this process only through the tiers; without them the device cache is born and dies
  // with the engine, so a constant root serves, and the checkpoint is not read again to hash it.
  const bool tiers_on = inst.cache.tiers_enabled();
  // fp8 weights compute other K/V than the same checkpoint in bf16: their pages must not meet.
  const std::string weights_id = exe.weights == "fp8" ? "|weights=fp8" : "";
  const std::string kv_fp =
      tiers_on ? kv_fingerprint(model_identity(path, mc, summary_.n_params) + weights_id, layout) : "";
  setup.cache_root = root_key(tiers_on ? kv_fp : "device-only");
  setup.limits.lower_tiers = inst.cache.radix && tiers_on;
  // write_through: a page is saved down when it enters the device cache (and reaches disk at
  // once); write_back: when the device evicts it (and disk when host evicts it).
  setup.limits.save_on_insert = inst.cache.write_policy == "write_through";
  hicache_actor tiers;
  if (tiers_on) {
    HiCacheSetup hc;
    hc.host_bytes = static_cast<size_t>(inst.cache.effective_host_bytes());
    hc.disk_path = inst.cache.disk_path;
    hc.disk_bytes = static_cast<size_t>(inst.cache.disk_bytes);
    BRIGADE_ASSIGN_OR_RETURN(hc.policy, parse_write_policy(inst.cache.write_policy));
    hc.model_fingerprint = kv_fp;
    spdlog::info("engine: HiCache tiers: host {} MiB, disk {} ({} MiB), {}", hc.host_bytes >> 20,
                 hc.disk_path.empty() ? "off" : hc.disk_path, hc.disk_path.empty() ? 0 : hc.disk_bytes >> 20,
                 write_policy_name(hc.policy));
    tiers = spawn_hicache(system_, std::move(hc));
    tiers_ = tiers;
    actors_.push_back(caf::actor_cast<caf::actor>(tiers));
  }

  auto kv_manager = spawn_kv_manager(system_, n_pages);
  std::vector<tp_follower_actor> followers;
  for (size_t r = 1; r < ranks.size(); ++r) {
    followers.push_back(spawn_tp_follower(system_, ranks[r]));
    actors_.push_back(caf::actor_cast<caf::actor>(followers.back()));
  }
  auto executor = spawn_executor(system_, ranks.front(), tiers, std::move(followers));
  auto frontend = spawn_frontend(system_, registry_);
  tokenizer_model_ = tokenizer;
  tokenizer_ = spawn_tokenizer(system_, tokenizer, frontend);
  auto scheduler = spawn_scheduler(system_, setup, executor, kv_manager, caf::actor_cast<token_sink_actor>(tokenizer_));
  scheduler_ = scheduler;
  caf::anon_send(tokenizer_, wire_atom::value, scheduler);
  for (caf::actor a : {caf::actor_cast<caf::actor>(kv_manager), caf::actor_cast<caf::actor>(executor),
                       caf::actor_cast<caf::actor>(frontend), caf::actor_cast<caf::actor>(tokenizer_),
                       caf::actor_cast<caf::actor>(scheduler)})
    actors_.push_back(a);
  return Status::ok();
}

Expected<uint64_t> EngineImpl::submit(const GenerateOptions& request, EventCallback on_event) {
  BRIGADE_RETURN_IF_ERROR(validate_request(request, summary_));
  const uint64_t id = next_id_.fetch_add(1);
  uint64_t seed = 0;
  if (request.sampling.seed) {
    seed = *request.sampling.seed;
  } else {
    std::lock_guard<std::mutex> lock(seed_mu_);
    seed = seed_rng_();
  }
  auto msg = generate_request_msg::build([&](schema::GenerateRequest::Builder b) {
    b.setRequestId(id);
    if (!request.prompt_ids.empty()) {
      fill_list(b.getPrompt().initTokenIds(static_cast<unsigned>(request.prompt_ids.size())), request.prompt_ids);
    } else {
      b.getPrompt().setText(request.prompt);
    }
    b.setAddBos(request.add_bos);
    auto s = b.initSampling();
    s.setTemperature(request.sampling.temperature);
    s.setTopP(request.sampling.top_p);
    s.setTopK(request.sampling.top_k);
    s.setMinP(request.sampling.min_p);
    s.setRepetitionPenalty(request.sampling.repetition_penalty);
    s.setPresencePenalty(request.sampling.presence_penalty);
    s.setFrequencyPenalty(request.sampling.frequency_penalty);
    s.setSeed(seed);
    s.setHasSeed(true);
    s.setLogprobs(request.logprobs);
    b.setMaxTokens(request.max_tokens);
    auto stop = b.initStop();
    fill_list(stop.initTokenIds(static_cast<unsigned>(request.stop_ids.size())), request.stop_ids);
    auto strs = stop.initStrings(static_cast<unsigned>(request.stop.size()));
    for (unsigned i = 0; i < request.stop.size(); ++i) strs.set(i, request.stop[i]);
    stop.setIgnoreEos(request.ignore_eos);
    b.setPriority(request.priority);
  });
  registry_->add(id, std::move(on_event));
  caf::anon_send(tokenizer_, msg);
  return id;
}

}  // namespace

Expected<std::unique_ptr<Engine>> Engine::create(const EngineOptions& options) {
  init_logging();
  auto engine = std::make_unique<EngineImpl>();
  BRIGADE_RETURN_IF_ERROR(engine->start(options));
  return std::unique_ptr<Engine>(std::move(engine));
}

Expected<Completion> Engine::generate(const GenerateOptions& request) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    Completion c;
    bool done = false;
    std::string error;
    StatusCode code = StatusCode::ok;
  };
  auto sh = std::make_shared<Shared>();
  auto id = submit(request, [sh](const Event& ev) {
    std::lock_guard<std::mutex> lock(sh->mu);
    sh->c.token_ids.insert(sh->c.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
    sh->c.text += ev.text;
    sh->c.logprobs.insert(sh->c.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
    sh->c.prompt_tokens = ev.prompt_tokens;
    if (ev.finish != FinishReason::none) {
      sh->c.finish = ev.finish;
      sh->error = ev.error;
      sh->code = ev.error_code == StatusCode::ok ? StatusCode::internal : ev.error_code;
      sh->done = true;
      sh->cv.notify_all();
    }
  });
  if (!id) return id.status();
  std::unique_lock<std::mutex> lock(sh->mu);
  sh->cv.wait(lock, [&] { return sh->done; });
  if (sh->c.finish == FinishReason::error) return Status(sh->code, sh->error);
  return std::move(sh->c);
}

}  // namespace brigade
