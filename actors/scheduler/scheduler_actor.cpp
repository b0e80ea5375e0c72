#include "actors/scheduler/scheduler_actor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "actors/atoms.h"
#include "actors/hicache/hicache_actor.h"
#include "actors/step_codec.h"
#include "messages/blob.h"
#include "messages/convert.h"

namespace brigade {

namespace {

// The scheduler's lease on the KV pool: pages granted by the KV page manager and not yet used.
class LeasedPages final : public PageSource {
 public:
  int n_available() const override { return static_cast<int>(pages_.size()); }
  std::optional<std::vector<int32_t>> take(int n) override {
    if (n > n_available()) return std::nullopt;
    std::vector<int32_t> out(pages_.end() - n, pages_.end());
    pages_.resize(pages_.size() - static_cast<size_t>(n));
    return out;
  }
  void give_back(std::span<const int32_t> pages) override { pages_.insert(pages_.end(), pages.begin(), pages.end()); }
  // The page manager's free pages as of its last grant, plus what was returned since: the one
  // scheduler per pool is its only lessee, so this is what a lease request would get.
  int n_obtainable() const override { return pool_free_; }
  void granted(std::span<const int32_t> pages, int n_free) {
    give_back(pages);
    pool_free_ = n_free;
  }
  std::vector<int32_t> take_surplus(int keep) {
    if (n_available() <= keep) return {};
    auto out = take(n_available() - keep);
    if (!out) return {};
    pool_free_ += static_cast<int>(out->size());
    return std::move(*out);
  }
  void set_pool_free(int n) { pool_free_ = n; }

 private:
  std::vector<int32_t> pages_;
  int pool_free_ = 0;
};

struct SchedulerState {
  SchedulerSetup setup;
  std::unique_ptr<SchedulerPolicy> policy;
  LeasedPages lease;
  bool lease_pending = false;
  uint64_t next_lease_id = 1;
  // Running estimates (EWMA) for the load-or-recompute choice: microseconds to load one page from
  // the tiers, and to prefill one token (from steps that were mostly prompt chunks).
  double load_us_per_page = 0, prefill_us_per_token = 0;
  executor_actor executor;
  kv_manager_actor kv_manager;
  token_sink_actor sink;
  handoff_sink_actor handoffs;                   // PD prefill side: where hand-offs go
  // PD decode side: hand-offs queued until their pages are reserved, with their bytes (a shared
  // segment's mapping, taken on arrival; null for inline and local bytes, which the message holds).
  struct Arriving {
    kv_handoff_msg msg;
    std::shared_ptr<const HostBlob> taken;
  };
  std::map<uint64_t, Arriving> arriving;
  static inline const char* name = "brigade.scheduler";
};

// timer_atom: an admit group's deadline (SchedulerPolicy::release_group).
using scheduler_impl_actor = scheduler_actor::extend_with<lora_slots_actor>::extend_with<cache_reset_actor>::extend<
    caf::reacts_to<timer_atom, uint64_t>>;

// How long the first member of an admit group (a beam search's step) waits for the rest before
// whatever arrived is admitted: the members are sent back to back, so they normally arrive
// within microseconds; a member refused on the way never does.
constexpr auto kAdmitGroupWait = std::chrono::milliseconds(5);
using scheduler_ptr = scheduler_impl_actor::stateful_pointer<SchedulerState>;

// Publishes the gauges the Engine reports (running, waiting, pages held).
void update_gauges(scheduler_ptr self) {
  auto& st = self->state;
  if (!st.setup.counters) return;
  st.setup.counters->n_running = st.policy->n_running();
  st.setup.counters->n_waiting = st.policy->n_waiting();
  st.setup.counters->kv_pages_used = st.policy->n_pages_held();
  st.setup.counters->preemptions = st.policy->n_preemptions();
  const PrefixCacheStats cs = st.policy->cache_stats();
  st.setup.counters->cache_lookups = cs.lookups;
  st.setup.counters->cache_lookup_tokens = cs.lookup_tokens;
  st.setup.counters->cache_hit_tokens = cs.hit_tokens;
  st.setup.counters->cache_partial_hit_tokens = cs.partial_hit_tokens;
  st.setup.counters->cache_in_batch_waits = cs.in_batch_waits;
  st.setup.counters->cache_loaded_tokens = cs.loaded_tokens;
  st.setup.counters->cache_evicted_pages = cs.evicted_pages;
  st.setup.counters->cache_pages = cs.cached_pages;
  st.setup.counters->cache_idle_pages = cs.idle_pages;
  st.setup.counters->cache_state_saves = cs.state_saves;
  st.setup.counters->cache_state_restores = cs.state_restores;
  st.setup.counters->cache_state_snapshots = cs.state_snapshots;
  const SpecStats sp = st.policy->spec_stats();
  st.setup.counters->spec_draft_tokens = sp.draft_tokens;
  st.setup.counters->spec_accepted_tokens = sp.accepted_tokens;
  st.setup.counters->spec_verify_seqs = sp.verify_seqs;
  st.setup.counters->spec_misses = sp.misses;
  st.setup.counters->spec_off_compute_bound_steps = sp.off_compute_bound_steps;
  st.setup.counters->spec_off_batch_steps = sp.off_batch_steps;
  st.setup.counters->spec_seqs_turned_off = sp.seqs_turned_off;
  st.setup.counters->spec_draft_forwards = sp.drafter.forwards;
  st.setup.counters->spec_draft_forward_us = sp.drafter.forward_us;
  st.setup.counters->spec_draft_fed_tokens = sp.drafter.fed_tokens;
}

void emit(scheduler_ptr self, const std::vector<SeqEvent>& events) {
  // Counters and gauges are published before the events go out: a caller woken by a final event
  // (Engine::generate returning) must see stats that include it (pages freed, request done).
  if (auto& c = self->state.setup.counters) {
    for (const auto& ev : events) {
      c->generated_tokens += ev.new_tokens.size();
      if (ev.finish != Finish::none) c->requests_done++;
    }
  }
  update_gauges(self);
  for (const auto& ev : events) self->send(self->state.sink, encode_event(ev));
}

void return_surplus(scheduler_ptr self) {
  auto surplus = self->state.lease.take_surplus(4 * self->state.setup.lease_chunk);
  if (surplus.empty()) return;
  self->send(self->state.kv_manager, page_free_msg::build([&](schema::PageFree::Builder b) {
    fill_list(b.initPages(static_cast<unsigned>(surplus.size())), surplus);
  }));
}

double ewma(double old, double sample) { return old <= 0 ? sample : 0.8 * old + 0.2 * sample; }

void pump(scheduler_ptr self);
void on_loaded(scheduler_ptr self, uint64_t seq_id, int n_loaded);

// HiCache traffic the policy asked for (DESIGN.md §5): saves go to the executor before the next
// plan (which may reuse the pages; CAF keeps the order), loads are requests whose answers let the
// waiting sequences run.
void send_tier_traffic(scheduler_ptr self) {
  auto& st = self->state;
  auto saves = st.policy->take_saves();
  if (!saves.empty()) {
    std::vector<int32_t> pages;
    std::vector<PageKey> keys;
    for (const auto& s : saves) {
      pages.push_back(s.page);
      keys.push_back(s.key);
    }
    if (auto& c = st.setup.counters) c->tier_saved_pages += saves.size();
    self->send(st.executor, kv_save_msg::build([&](schema::KvSave::Builder b) {
      fill_list(b.initPages(static_cast<unsigned>(pages.size())), pages);
      fill_page_keys(b.initKeys(static_cast<unsigned>(keys.size())), keys);
    }));
  }
  for (auto& load : st.policy->take_loads()) {
    const uint64_t seq_id = load.seq_id;
    const auto sent = std::chrono::steady_clock::now();
    auto msg = kv_load_msg::build([&](schema::KvLoad::Builder b) {
      b.setRequestId(seq_id);
      fill_page_keys(b.initKeys(static_cast<unsigned>(load.keys.size())), load.keys);
      fill_list(b.initPages(static_cast<unsigned>(load.pages.size())), load.pages);
    });
    self->request(st.executor, caf::infinite, std::move(msg))
        .then(
            [self, sent](const kv_loaded_msg& res) {
              auto r = res.reader();
              if (r.getNLoaded() > 0) {  // the whole round trip, per page: what a load costs a request
                auto& s = self->state;
                const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sent).count();
                s.load_us_per_page = ewma(s.load_us_per_page, us / r.getNLoaded());
                s.policy->set_costs(s.load_us_per_page, s.prefill_us_per_token);
              }
              if (r.getError().size() > 0) spdlog::warn("scheduler: tier load: {}", r.getError().cStr());
              if (auto& c = self->state.setup.counters) {
                c->tier_host_hit_pages += static_cast<uint64_t>(std::max(0, r.getNFromHost()));
                c->tier_disk_hit_pages += static_cast<uint64_t>(std::max(0, r.getNFromDisk()));
              }
              on_loaded(self, r.getRequestId(), r.getNLoaded());
            },
            [self, seq_id](const caf::error& err) {
              spdlog::warn("scheduler: tier load failed ({}); recomputing", caf::to_string(err));
              on_loaded(self, seq_id, 0);
            });
  }
}

SeqEvent refusal(uint64_t id, const Status& status, int n_prompt) {
  return {id, {}, {}, Finish::error, status.message(), n_prompt, 0, status.code()};
}

int64_t steady_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// PD prefill side: the sequence's pages were read; it leaves for a decode instance (the router
// picks which) with the bytes behind the reply's BlobRef.
void on_exported(scheduler_ptr self, uint64_t seq_id, const kv_exported_msg& res, const std::string& error,
                 int64_t started_us) {
  auto& st = self->state;
  std::vector<SeqEvent> events;
  auto moved = st.policy->exported(seq_id, error.empty(), error, st.lease, events);
  if (!error.empty()) spdlog::error("scheduler: KV export of request {} failed: {}", seq_id, error);
  if (moved) {
    auto r = res.reader();
    auto view = resolve_blob(r.getBlob());
    BRIGADE_CHECK(view.has_value(), "the executor's own reply names a live blob");
    const auto& req = moved->req;
    auto handoff = kv_handoff_msg::build_attached(view->keep, [&](schema::KvHandoff::Builder b) {
      b.setRequestId(req.id);
      fill_list(b.initPrompt(static_cast<unsigned>(req.prompt.size())), req.prompt);
      fill_list(b.initGenerated(static_cast<unsigned>(moved->generated.size())), moved->generated);
      b.setNKvTokens(moved->n_kv_tokens);
      b.setMaxTokens(req.max_tokens);
      encode_sampling(req.sampling, b.initSampling());
      b.getSampling().setLogprobs(req.logprobs);
      fill_list(b.initStopIds(static_cast<unsigned>(req.stop_ids.size())), req.stop_ids);
      fill_list(b.initEosIds(static_cast<unsigned>(req.eos_ids.size())), req.eos_ids);
      b.setIgnoreEos(req.ignore_eos);
      b.setPriority(req.priority);
      b.setLora(req.lora);
      b.setCacheSalt(req.cache_salt);
      encode_images(req.images, b.initImages(static_cast<unsigned>(req.images.size())));
      b.setPageSize(st.setup.limits.page_size);
      b.setPageBytes(r.getPageBytes());
      b.setNPages(static_cast<int32_t>(r.getPageBytes() == 0 ? 0 : r.getBlob().getNBytes() / r.getPageBytes()));
      b.setKv(r.getBlob());
      b.setSentAtMicros(started_us);
      b.setFromInstance(st.setup.instance_name);
    });
    if (auto& c = st.setup.counters) {
      c->pd_transfers_out++;
      c->pd_bytes_out += r.getBlob().getNBytes();
    }
    // As emit does for events: the sequence has left this instance before anyone hears of it
    // again (the decode side may finish it before this handler ends).
    update_gauges(self);
    self->send(st.handoffs, std::move(handoff));
  } else if (!res.empty()) {
    discard_blob(res->getBlob());  // aborted while its pages were read: nobody takes its segment
  }
  return_surplus(self);
  pump(self);
  emit(self, events);
}

// PD decode side: a hand-off's pages were written (or not: it then recomputes here).
void on_imported(scheduler_ptr self, uint64_t seq_id, const std::string& error, int64_t sent_us, uint64_t n_bytes,
                 bool shared) {
  auto& st = self->state;
  if (auto& c = st.setup.counters) {
    if (error.empty()) {
      c->pd_transfers_in++;
      c->pd_bytes_in += n_bytes;
      c->pd_shm_transfers_in += shared;
      c->pd_transfer_us += static_cast<uint64_t>(std::max<int64_t>(0, steady_micros() - sent_us));
    } else {
      c->pd_import_failures++;
    }
  }
  if (!error.empty()) spdlog::error("scheduler: KV import of request {} failed ({}); recomputing it here", seq_id, error);
  auto events = st.policy->imported(seq_id, error.empty(), st.lease);
  return_surplus(self);
  pump(self);
  emit(self, events);
}

// PD traffic the policy asked for: page reads for hand-offs (prefill side) and page writes for
// admitted hand-offs (decode side). Both are requests; the sequences wait without the batch.
void send_pd_traffic(scheduler_ptr self) {
  auto& st = self->state;
  for (auto& ex : st.policy->take_exports()) {
    const uint64_t id = ex.seq_id;
    const int64_t started = steady_micros();
    auto msg = kv_export_msg::build([&](schema::KvExport::Builder b) {
      b.setRequestId(id);
      fill_list(b.initPages(static_cast<unsigned>(ex.pages.size())), ex.pages);
      b.setTransport(to_schema(st.setup.pd_transport));
    });
    self->request(st.executor, caf::infinite, std::move(msg))
        .then([self, id, started](const kv_exported_msg& res) {
                on_exported(self, id, res, std::string(to_string_view(res->getError())), started);
              },
              [self, id, started](const caf::error& err) {
                on_exported(self, id, {}, "executor failed: " + caf::to_string(err), started);
              });
  }
  for (auto& im : st.policy->take_imports()) {
    const uint64_t id = im.seq_id;
    auto it = st.arriving.find(id);
    BRIGADE_CHECK(it != st.arriving.end(), "an admitted hand-off has its message");
    const kv_handoff_msg h = std::move(it->second.msg);
    const auto taken = std::move(it->second.taken);  // keeps a shared segment resolvable below
    st.arriving.erase(it);
    const int64_t sent = h->getSentAtMicros();
    const uint64_t n_bytes = h->getKv().getNBytes();
    const bool shared = h->getKv().isShared();
    auto view = resolve_blob(h->getKv());
    if (!view) {
      on_imported(self, id, view.status().message(), sent, n_bytes, shared);
      continue;
    }
    auto msg = kv_import_msg::build_attached(view->keep, [&](schema::KvImport::Builder b) {
      b.setRequestId(id);
      fill_list(b.initPages(static_cast<unsigned>(im.pages.size())), im.pages);
      b.setBlob(h->getKv());
      b.setPageBytes(h->getPageBytes());
    });
    self->request(st.executor, caf::infinite, std::move(msg))
        .then([self, id, sent, n_bytes, shared](const kv_imported_msg& res) {
                on_imported(self, id, std::string(to_string_view(res->getError())), sent, n_bytes, shared);
              },
              [self, id, sent, n_bytes, shared](const caf::error& err) {
                on_imported(self, id, "executor failed: " + caf::to_string(err), sent, n_bytes, shared);
              });
  }
}

// PD decode side: a sequence prefilled elsewhere joins the queue; its bytes wait with it.
void on_handoff(scheduler_ptr self, const kv_handoff_msg& m) {
  auto& st = self->state;
  auto r = m.reader();
  const uint64_t id = r.getRequestId();
  const int n_prompt = static_cast<int>(r.getPrompt().size());
  // A shared-memory segment is taken at once: its name is freed whatever becomes of the hand-off,
  // and the mapping waits with it. One that cannot be taken fails the import later (the sequence
  // then recomputes here).
  auto taken = adopt_blob(r.getKv());
  if (!taken) spdlog::warn("scheduler: the KV bytes of hand-off {}: {}", id, taken.status().message());
  Status added = Status::ok();
  if (r.getPageSize() != st.setup.limits.page_size) {
    added = invalid_argument("the prefill instance's KV pages hold " + std::to_string(r.getPageSize()) +
                             " tokens, this decode instance's " + std::to_string(st.setup.limits.page_size));
  } else {
    TransferredSeq t;
    t.req.id = id;
    t.req.prompt = to_vector(r.getPrompt());
    t.req.max_tokens = r.getMaxTokens();
    t.req.sampling = decode_sampling(r.getSampling());
    t.req.logprobs = r.getSampling().getLogprobs();
    t.req.stop_ids = to_vector(r.getStopIds());
    t.req.eos_ids = to_vector(r.getEosIds());
    t.req.ignore_eos = r.getIgnoreEos();
    t.req.priority = r.getPriority();
    t.req.lora = r.getLora();
    t.req.cache_salt = r.getCacheSalt();
    t.req.images = decode_images(r.getImages());
    t.generated = to_vector(r.getGenerated());
    t.n_kv_tokens = r.getNKvTokens();
    added = st.policy->add_transferred(std::move(t));
  }
  if (!added.is_ok()) {
    spdlog::error("scheduler: refused a hand-off from '{}': {}", to_string_view(r.getFromInstance()), added.message());
    emit(self, {refusal(id, added, n_prompt)});
    return;
  }
  st.arriving[id] = {m, taken ? taken->keep : nullptr};
  pump(self);
  update_gauges(self);
}

void on_loaded(scheduler_ptr self, uint64_t seq_id, int n_loaded) {
  auto events = self->state.policy->loaded(seq_id, n_loaded, self->state.lease);
  return_surplus(self);
  pump(self);
  emit(self, events);
}

void on_step_done(scheduler_ptr self, const DecodedStepResult& r) {
  auto& st = self->state;
  if (r.error.empty() && r.n_tokens >= 64 && r.forward_us > 0) {  // a prefill-heavy step
    st.prefill_us_per_token = ewma(st.prefill_us_per_token, static_cast<double>(r.forward_us) / r.n_tokens);
    st.policy->set_costs(st.load_us_per_page, st.prefill_us_per_token);
  }
  if (auto& c = st.setup.counters) {
    c->steps++;
    c->step_tokens += static_cast<uint64_t>(r.n_tokens);
    c->executor_us += r.forward_us;
    c->step_flops += static_cast<uint64_t>(r.flops);
    c->step_bytes += static_cast<uint64_t>(r.bytes);
    if (r.roofline_us > 0.0) {
      const int b = r.compute_bound ? 1 : 0;
      c->bound_steps[b]++;
      c->bound_executor_us[b] += r.forward_us;
      c->bound_roofline_ns[b] += static_cast<uint64_t>(r.roofline_us * 1e3);
    }
  }
  if (r.error.empty()) st.policy->note_step_bound(r.roofline_us > 0.0 && r.compute_bound);  // the load rule
  std::vector<SeqEvent> events = r.error.empty() ? st.policy->complete(r.step_id, r.sampled, st.lease, r.prompt_logprobs, r.embeddings, r.drafts)
                                                 : st.policy->fail(r.step_id, r.error, st.lease);
  if (!r.error.empty()) spdlog::error("scheduler: step {} failed: {}", r.step_id, r.error);
  // The next plan goes out before the events: the executor starts the next step while the
  // tokenizer and frontend stream this one's tokens.
  return_surplus(self);
  pump(self);
  emit(self, events);
}

void request_pages(scheduler_ptr self, int short_by) {
  auto& st = self->state;
  if (st.lease_pending || short_by <= 0) return;
  st.lease_pending = true;
  auto req = page_lease_request_msg::build([&](schema::PageLeaseRequest::Builder b) {
    b.setRequestId(st.next_lease_id++);
    b.setNPages(short_by + st.setup.lease_chunk);
    b.setMinPages(short_by);
  });
  self->request(st.kv_manager, caf::infinite, req)
      .then(
          [self](const page_lease_grant_msg& grant) {
            auto& s = self->state;
            s.lease_pending = false;
            auto pages = to_vector(grant.reader().getPages());
            s.lease.granted(pages, grant.reader().getNFree());
            // An empty grant means the pool is exhausted; running sequences will free pages,
            // and the next pump asks again then.
            if (!pages.empty()) pump(self);
          },
          [self](const caf::error& err) {
            self->state.lease_pending = false;
            spdlog::error("scheduler: KV page manager failed: {}", caf::to_string(err));
          });
}

void pump(scheduler_ptr self) {
  auto& st = self->state;
  while (st.policy->n_inflight() < st.setup.max_inflight_steps) {
    send_pd_traffic(self);  // page reads first: the hand-off leaves before the next step runs
    auto step = st.policy->plan(st.lease);
    send_tier_traffic(self);  // saves before the plan that may reuse their pages
    if (!step) break;
    const uint64_t step_id = step->step_id;
    self->request(st.executor, caf::infinite, encode_step_plan(*step))
        .then([self](const step_result_msg& res) { on_step_done(self, decode_step_result(res.reader())); },
              [self, step_id](const caf::error& err) {
                on_step_done(self, {step_id, {}, "executor failed: " + caf::to_string(err), 0, 0});
              });
  }
  send_pd_traffic(self);  // imports of hand-offs the last plan admitted
  // Ask for pages only when nothing is running that will free some: with a lease of the whole
  // need outstanding, admission waits without a round trip per step.
  request_pages(self, st.policy->pages_short(st.lease));
}

scheduler_impl_actor::behavior_type scheduler_fun(scheduler_ptr self, SchedulerSetup setup, executor_actor executor,
                                             kv_manager_actor kv_manager, token_sink_actor sink,
                                             handoff_sink_actor handoffs) {
  auto& st = self->state;
  st.setup = std::move(setup);
  st.policy = std::make_unique<SchedulerPolicy>(st.setup.limits, st.setup.pool_pages, st.setup.cache_root,
                                                st.setup.drafter);
  for (size_t i = 0; i < st.setup.lora_identities.size(); ++i)
    st.policy->set_lora_identity(static_cast<int>(i) + 1, st.setup.lora_identities[i]);
  st.lease.set_pool_free(st.setup.pool_pages);  // the pool starts empty of leases
  st.executor = std::move(executor);
  st.kv_manager = std::move(kv_manager);
  st.sink = std::move(sink);
  st.handoffs = std::move(handoffs);
  BRIGADE_CHECK(st.setup.limits.role != PdRole::prefill || st.handoffs, "a prefill instance has a hand-off sink");
  return {
      [self](const generate_request_msg& msg) {
        auto r = msg.reader();
        SeqRequest req;
        req.id = r.getRequestId();
        if (!r.getPrompt().isTokenIds()) {
          emit(self, {refusal(req.id, invalid_argument("the scheduler takes token ids; send text prompts through "
                                                       "the tokenizer"), 0)});
          return;
        }
        req.prompt = to_vector(r.getPrompt().getTokenIds());
        req.max_tokens = r.getMaxTokens();
        req.sampling = decode_sampling(r.getSampling());
        req.logprobs = r.getSampling().getLogprobs();
        req.prompt_logprobs = r.getSampling().getPromptLogprobs();
        req.stop_ids = to_vector(r.getStop().getTokenIds());
        req.ignore_eos = r.getStop().getIgnoreEos();
        req.eos_ids = self->state.setup.eos_ids;
        if (req.sampling.min_tokens > 0 || req.sampling.constrained()) {  // what the executor masks
          auto& ends = req.sampling.end_ids;
          ends = req.stop_ids;
          // A complete schema instance or choice can only end: EOS is its one continuation even
          // under ignore_eos (which then keeps generating EOS up to max_tokens).
          const bool must_end = req.sampling.constrained() && !req.sampling.json_object;
          if (!req.ignore_eos || must_end) ends.insert(ends.end(), req.eos_ids.begin(), req.eos_ids.end());
        }
        req.priority = r.getPriority();
        req.pooling = static_cast<Pooling>(r.getPooling());
        req.lora = r.getLora();
        req.cache_salt = r.getCacheSalt();
        req.images = decode_images(r.getImages());
        req.admit_group = r.getAdmitGroup();
        req.admit_group_size = static_cast<int>(std::min<uint32_t>(r.getAdmitGroupSize(), 1u << 20));
        const int n_prompt = static_cast<int>(req.prompt.size());
        Status added = self->state.policy->add(std::move(req));
        if (!added.is_ok()) {
          emit(self, {refusal(r.getRequestId(), added, n_prompt)});
          return;
        }
        for (uint64_t group : self->state.policy->take_opened_groups())
          self->delayed_send(self, kAdmitGroupWait, timer_atom::value, group);
        if (self->state.setup.counters) self->state.setup.counters->prompt_tokens += static_cast<uint64_t>(n_prompt);
        pump(self);
        update_gauges(self);
      },
      [self](const prefix_query_msg& msg) {
        const auto tokens = to_vector(msg.reader().getTokens());
        const int cached = self->state.policy->cached_prefix(tokens);
        const int pages = self->state.policy->cache_stats().cached_pages;
        return prefix_query_result_msg::build([&](schema::PrefixQueryResult::Builder b) {
          b.setCachedTokens(cached);
          b.setCachedPages(pages);
        });
      },
      [self](const kv_handoff_msg& msg) { on_handoff(self, msg); },
      [self](const lora_update_msg& msg) {
        auto r = msg.reader();
        auto& state = self->state;
        const int slot = static_cast<int>(r.getSlot());
        Status s = slot >= 1 ? state.policy->drop_lora(slot, state.lease)
                             : invalid_argument("LoRA slot " + std::to_string(slot) + " (slots start at 1)");
        if (s.is_ok() && r.getLoad()) state.policy->set_lora_identity(slot, r.getIdentity());
        return_surplus(self);
        update_gauges(self);
        return lora_updated_msg::build([&](schema::LoraUpdated::Builder b) {
          b.setError(s.is_ok() ? "" : s.message());
          b.setCode(static_cast<uint8_t>(s.code()));
        });
      },
      [self](const cache_reset_msg&) {
        auto& state = self->state;
        const auto [freed, kept] = state.policy->reset_cache(state.lease);
        spdlog::info("scheduler {}: prefix cache reset: {} page(s) freed, {} kept (shared by running requests)",
                     state.setup.instance_name, freed, kept);
        return_surplus(self);
        update_gauges(self);
        pump(self);  // waiting requests may fit now
        return cache_reset_done_msg::build([&](schema::CacheResetDone::Builder b) {
          b.setFreedPages(static_cast<uint32_t>(freed));
          b.setKeptPages(static_cast<uint32_t>(kept));
        });
      },
      [self](timer_atom, uint64_t group) {  // an admit group's deadline
        self->state.policy->release_group(group);
        pump(self);
        update_gauges(self);
      },
      [self](const abort_msg& msg) {
        const uint64_t id = msg.reader().getRequestId();
        emit(self, self->state.policy->abort(id, self->state.lease));
        self->state.arriving.erase(id);  // a queued hand-off's bytes go with it
        return_surplus(self);
        pump(self);
        update_gauges(self);
      },
  };
}

}  // namespace

scheduler_actor spawn_scheduler(caf::actor_system& system, const SchedulerSetup& setup, executor_actor executor,
                                kv_manager_actor kv_manager, token_sink_actor sink, handoff_sink_actor handoffs) {
  if (setup.drafter)
    return system.spawn<caf::detached>(scheduler_fun, setup, std::move(executor), std::move(kv_manager),
                                       std::move(sink), std::move(handoffs));
  return system.spawn(scheduler_fun, setup, std::move(executor), std::move(kv_manager), std::move(sink),
                      std::move(handoffs));
}

}  // namespace brigade
