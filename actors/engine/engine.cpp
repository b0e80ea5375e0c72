// Engine: builds the actor topology (frontend → tokenizer → [router →] one scheduler, executor
// and KV page manager per instance) from a TopologyConfig and serves the embedding API.
#include "brigade/engine.h"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <random>
#include <unordered_set>
#include <utility>

#include "actors/engine/engine_testing.h"
#include "actors/engine/instance.h"
#include "actors/frontend/frontend_actor.h"
#include "actors/router/router_actor.h"
#include "actors/step_codec.h"
#include "actors/tokenizer/tokenizer_actor.h"
#include "core/logging.h"
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
  if (r.min_tokens < 0 || r.min_tokens > r.max_tokens)
    return invalid_argument("min_tokens must be in [0, max_tokens = " + std::to_string(r.max_tokens) + "] (got " +
                            std::to_string(r.min_tokens) + ")");
  std::unordered_set<int32_t> biased;
  for (const auto& [t, bias] : s.logit_bias) {
    if (t < 0 || t >= m.vocab_size)
      return invalid_argument("logit_bias token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                              std::to_string(m.vocab_size) + ")");
    if (!(bias >= -100.0f && bias <= 100.0f))
      return invalid_argument("logit_bias for token " + std::to_string(t) + " must be in [-100, 100] (got " +
                              std::to_string(bias) + ")");
    if (!biased.insert(t).second) return invalid_argument("logit_bias names token " + std::to_string(t) + " twice");
  }
  if (r.logprobs > 20) return invalid_argument("logprobs must be at most 20 (got " + std::to_string(r.logprobs) + ")");
  if (r.prompt_ids.empty() && r.prompt.empty()) return invalid_argument("the prompt is empty: give text or token ids");
  if (r.response_format == ResponseFormat::json_object && !m.has_tokenizer)
    return invalid_argument("response_format json_object needs the model's tokenizer (this model has none)");
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
    {&EngineStats::pd_transfers_out, &SchedulerCounters::pd_transfers_out},
    {&EngineStats::pd_bytes_out, &SchedulerCounters::pd_bytes_out},
    {&EngineStats::pd_transfers_in, &SchedulerCounters::pd_transfers_in},
    {&EngineStats::pd_bytes_in, &SchedulerCounters::pd_bytes_in},
    {&EngineStats::pd_transfer_us, &SchedulerCounters::pd_transfer_us},
    {&EngineStats::pd_import_failures, &SchedulerCounters::pd_import_failures},
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

// Adds one instance's stats into a sum (stats() over instances): every counter and gauge, the
// roofline times, the ceilings (the instances' together), pages and tier bytes.
void accumulate(EngineStats& to, const EngineStats& from) {
  for (const auto& field : kCounterTotals) to.*field.first += from.*field.first;
  for (const auto& field : kCounterGauges) to.*field.first += from.*field.first;
  for (const auto& [memory, compute] : kBoundFields) {
    to.*memory += from.*memory;
    to.*compute += from.*compute;
  }
  for (const auto& field : kTierFields) to.*field.first += from.*field.first;
  to.memory_bound_roofline_us += from.memory_bound_roofline_us;
  to.compute_bound_roofline_us += from.compute_bound_roofline_us;
  to.peak_bytes_per_s += from.peak_bytes_per_s;
  to.peak_flops_per_s += from.peak_flops_per_s;
  to.kv_pages_total += from.kv_pages_total;
  to.tiers = to.tiers || from.tiers;
  to.tier_disk_degraded = to.tier_disk_degraded || from.tier_disk_degraded;
}

// PD separation: a decode instance writes the prefill instance's page bytes as they are, so every
// PD instance's pages must have one layout (the topology checks page size and KV dtype; this
// checks the bytes the loaded models actually give, e.g. the same head sizes).
Status check_pd_layouts(const std::vector<LoadedInstance>& loaded) {
  const LoadedInstance* first = nullptr;
  for (const auto& l : loaded) {
    if (l.setup.limits.role == PdRole::both) continue;
    if (!first) {
      first = &l;
    } else if (l.kv_page_bytes != first->kv_page_bytes) {
      return invalid_argument("instances '" + first->name + "' and '" + l.name + "' have KV pages of " +
                              std::to_string(first->kv_page_bytes) + " and " + std::to_string(l.kv_page_bytes) +
                              " bytes: prefill and decode instances need one model and KV layout");
    }
  }
  return Status::ok();
}

class EngineImpl final : public Engine {
 public:
  EngineImpl() : system_(prepared_config(cfg_)) {}

  ~EngineImpl() override {
    // The router first: it must not mistake the instances stopping for failures.
    if (router_) caf::anon_send_exit(router_, caf::exit_reason::user_shutdown);
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
    // With a router: the instance it would route this prompt to answers.
    auto r = router_ ? ask<prefix_query_result_msg>(router_, std::chrono::seconds(10), std::move(q))
                     : ask<prefix_query_result_msg>(instances_.front().scheduler, std::chrono::seconds(10), std::move(q));
    if (!r) return internal_error("prefix query failed: " + r.status().message());
    return r->reader().getCachedTokens();
  }

  // Asks an instance's tier actor for its counters (a short wait; skipped if it is busy).
  void add_tier_stats(const hicache_actor& tiers, EngineStats& s) const {
    s.tiers = true;
    auto m = ask<tier_stats_msg>(tiers, std::chrono::milliseconds(500), tier_stats_request_msg::build([](auto) {}));
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
    EngineStats sum;
    for (const auto& inst : instance_stats()) accumulate(sum, inst.stats);
    return sum;
  }
  std::vector<InstanceStats> instance_stats() const override {
    std::vector<InstanceStats> out;
    for (size_t i = 0; i < instances_.size(); ++i) {
      InstanceStats is;
      is.name = instances_[i].name;
      is.role = pd_role_name(instances_[i].role);
      is.stats = scheduler_stats(instances_[i]);
      if (router_counters_) {
        const auto& routed = router_counters_->routed[i];
        is.routed_cache = routed[static_cast<size_t>(RouteReason::cache)].load();
        is.routed_load = routed[static_cast<size_t>(RouteReason::load)].load();
        is.routed_round_robin = routed[static_cast<size_t>(RouteReason::round_robin)].load();
        is.serving = !router_counters_->down[i].load();
      }
      out.push_back(std::move(is));
    }
    return out;
  }

  // Test hook (actors/engine/engine_testing.h): instance `index`'s executor exits as a crash would.
  Status kill_executor(int index) {
    if (index < 0 || static_cast<size_t>(index) >= instances_.size())
      return invalid_argument("no instance " + std::to_string(index));
    caf::anon_send_exit(instances_[static_cast<size_t>(index)].executor, caf::exit_reason::kill);
    return Status::ok();
  }

 private:
  // One instance's counters as EngineStats (the scheduler's, its tiers', its ceilings and pool).
  EngineStats scheduler_stats(const SpawnedInstance& inst) const {
    const SchedulerCounters& c = *inst.counters;
    EngineStats s;
    for (const auto& [to, from] : kCounterTotals) s.*to = (c.*from).load();
    for (const auto& [to, from] : kCounterGauges) s.*to = (c.*from).load();
    for (size_t i = 0; i < std::size(kBoundFields); ++i) {
      s.*kBoundFields[i].first = (c.*kBoundCounters[i])[0].load();
      s.*kBoundFields[i].second = (c.*kBoundCounters[i])[1].load();
    }
    s.memory_bound_roofline_us = static_cast<double>(c.bound_roofline_ns[0].load()) / 1e3;
    s.compute_bound_roofline_us = static_cast<double>(c.bound_roofline_ns[1].load()) / 1e3;
    s.peak_bytes_per_s = inst.ceilings.bytes_per_s;
    s.peak_flops_per_s = inst.ceilings.flops_per_s;
    s.kv_pages_total = inst.n_pages;
    if (inst.tiers) add_tier_stats(inst.tiers, s);
    return s;
  }
  Status load_tokenizer(const std::string& path, const ModelConfig& mc);

  caf::actor_system_config cfg_;
  caf::actor_system system_;
  caf::actor_system* sys_ = &system_;  // for const methods that talk to actors
  std::vector<SpawnedInstance> instances_;
  router_actor router_;  // null with one instance: the tokenizer then talks to its scheduler
  std::shared_ptr<RouterCounters> router_counters_;
  std::vector<caf::actor> actors_;
  std::shared_ptr<CallbackRegistry> registry_ = std::make_shared<CallbackRegistry>();
  tokenizer_actor tokenizer_;
  // The tokenizer actor's tokenizer too (immutable and thread-safe, so sharing it is safe):
  // tokenize/detokenize calls need no round trip through the actor's queue.
  std::shared_ptr<const Tokenizer> tokenizer_model_;
  ModelSummary summary_;
  Expected<ChatFamily> chat_family_ = not_found("this model has no chat template");
  std::atomic<uint64_t> next_id_{1};
  std::mt19937_64 seed_rng_{std::random_device{}()};
  std::mutex seed_mu_;
};

// The model's tokenizer (a directory's tokenizer files, or a GGUF's embedded vocabulary) and chat
// family, once for all instances.
Status EngineImpl::load_tokenizer(const std::string& path, const ModelConfig& mc) {
  const bool gguf = std::filesystem::path(path).extension() == ".gguf";
  if (std::filesystem::is_directory(path) || gguf) {  // a GGUF may carry its vocabulary (tokenizer.ggml.*)
    auto tok = Tokenizer::load(path);
    if (tok) {
      BRIGADE_RETURN_IF_ERROR(check_tokenizer_fits(**tok, mc.vocab_size));
      tokenizer_model_ = std::move(*tok);
    } else if (tok.status().code() != StatusCode::not_found) {
      return tok.status();
    }
  }
  if (tokenizer_model_ && std::filesystem::is_directory(path)) {
    // A model with a template of no known family still serves completions; chat says why not.
    chat_family_ = chat_family_for_model(path, "");
  } else if (tokenizer_model_ && gguf) {
    if (auto file = GgufFile::open(path)) {
      if (auto jinja = (*file)->get_string("tokenizer.chat_template")) chat_family_ = detect_chat_family(*jinja);
    }
  }
  return Status::ok();
}

Status EngineImpl::start(const EngineOptions& options) {
  BRIGADE_RETURN_IF_ERROR(options.topology.validate());
  // The topology format accepts `remote:` so node configs can be written now; the middleman
  // wiring that would connect to a `brigade node` is not built, and loading the instance here
  // instead would silently run it in the wrong process.
  for (const auto& inst : options.topology.instances)
    if (!inst.remote.empty())
      return unsupported("instance '" + inst.name + "' names remote: " + inst.remote +
                         "; connecting to remote instances (brigade node) is not built yet: run it in this "
                         "process (remove remote: and give its executors)");
  const std::string path = options.model_path.empty() ? options.topology.model : options.model_path;
  if (path.empty()) return invalid_argument("no model given: pass a model path or set `model:` in the topology");
  // `threads: 0` shares the cores out among every CPU rank of every instance.
  int n_cpu_ranks = 0;
  for (const auto& inst : options.topology.instances) {
    const ExecutorConfig& exe = inst.executors.front();
    if (!parse_device(exe.device)->cuda) n_cpu_ranks += exe.tp;
  }
  std::vector<LoadedInstance> loaded;
  for (const auto& inst : options.topology.instances) {
    auto one = load_instance(options, inst, path, n_cpu_ranks, options.progress && loaded.empty());
    if (!one) {
      if (options.topology.instances.size() == 1) return one.status();
      return Status(one.status().code(), "instance '" + inst.name + "': " + one.status().message());
    }
    loaded.push_back(std::move(*one));
  }
  const Model& model = *loaded.front().ranks.front()->model;
  const ModelConfig& mc = model.config();
  BRIGADE_RETURN_IF_ERROR(load_tokenizer(path, mc));
  if (tokenizer_model_) {  // the bytes of every token, for json_object sequences
    auto trie = std::make_shared<const TokenTrie>(token_pieces(*tokenizer_model_));
    for (auto& inst : loaded) inst.ranks.front()->runner.vocab = trie;
  }
  summary_ = {mc.arch, mc.vocab_size, mc.max_position, model.n_params(), model.weight_bytes(), tokenizer_model_ != nullptr};

  auto frontend = spawn_frontend(system_, registry_);
  tokenizer_ = spawn_tokenizer(system_, tokenizer_model_, frontend);
  actors_ = {caf::actor_cast<caf::actor>(frontend), caf::actor_cast<caf::actor>(tokenizer_)};
  // One instance: the tokenizer talks to its scheduler directly (no router hop, no routing).
  token_sink_actor sink = caf::actor_cast<token_sink_actor>(tokenizer_);
  if (loaded.size() > 1) {
    RouterSetup rs;
    rs.config = options.topology.router;
    for (const auto& l : loaded) rs.instance_names.push_back(l.name);
    router_counters_ = std::make_shared<RouterCounters>(static_cast<int>(loaded.size()));
    rs.counters = router_counters_;
    for (const auto& l : loaded) rs.roles.push_back(l.setup.limits.role);
    router_ = spawn_router(system_, std::move(rs), sink);
    sink = router_;
    spdlog::info("engine: {} instances behind a {} router{}", loaded.size(), options.topology.router.policy,
                 options.topology.pd_separated() ? " (PD separation: prompts to prefill instances, hand-offs to decode)"
                                                 : "");
  }
  BRIGADE_RETURN_IF_ERROR(check_pd_layouts(loaded));
  for (auto& l : loaded) {
    instances_.push_back(spawn_instance(system_, std::move(l), sink, /*linked=*/router_ != nullptr, router_));
    const auto& spawned = instances_.back().actors;
    actors_.insert(actors_.end(), spawned.begin(), spawned.end());
  }
  if (router_) {
    for (size_t i = 0; i < instances_.size(); ++i)
      caf::anon_send(router_, wire_atom::value, static_cast<int32_t>(i), instances_[i].scheduler);
    caf::anon_send(tokenizer_, wire_atom::value, scheduler_actor{router_});
  } else {
    caf::anon_send(tokenizer_, wire_atom::value, instances_.front().scheduler);
  }
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
    const SamplingOptions& o = request.sampling;
    SamplingConfig cfg{.temperature = o.temperature, .top_p = o.top_p, .top_k = o.top_k, .min_p = o.min_p,
                       .repetition_penalty = o.repetition_penalty, .presence_penalty = o.presence_penalty,
                       .frequency_penalty = o.frequency_penalty, .seed = seed, .logit_bias = o.logit_bias,
                       .min_tokens = request.min_tokens,
                       .json_object = request.response_format == ResponseFormat::json_object, .end_ids = {}};
    auto s = b.initSampling();
    encode_sampling(cfg, s);
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

Status kill_instance_executor_for_testing(Engine& engine, int index) {
  auto* impl = dynamic_cast<EngineImpl*>(&engine);
  if (!impl) return invalid_argument("not a brigade engine");
  return impl->kill_executor(index);
}

}  // namespace brigade
