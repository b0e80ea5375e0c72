#include "actors/executor/executor_actor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "actors/executor/step_runner.h"
#include "actors/step_codec.h"
#include "messages/blob.h"

namespace brigade {

namespace {

// The executor's own message: look again whether the step in flight has finished.
using step_poll_atom = caf::atom_constant<caf::atom("steppoll")>;
using executor_impl_actor = executor_actor::extend<caf::reacts_to<step_poll_atom, uint64_t>>;

// A step started on the backend whose tokens have not been handed back yet.
struct PendingStep {
  uint64_t step_id = 0;
  int n_tokens = 0;
  InFlightStep step;
  caf::typed_response_promise<step_result_msg> promise;
  std::chrono::steady_clock::time_point started;
};

struct ExecutorState {
  std::shared_ptr<ExecutorResources> resources;
  std::unique_ptr<StepRunner> runner;
  hicache_actor tiers;
  std::vector<tp_follower_actor> followers;
  std::deque<PendingStep> pending;  // started, in start order; at most one between messages
  std::chrono::steady_clock::time_point last_done;  // when the previous step's tokens came back
  static inline const char* name = "brigade.executor";
};

using executor_ptr = executor_impl_actor::stateful_pointer<ExecutorState>;

// Empty when every page id lies in the pool and there is one page per key; else why not.
std::string check_pages(const KvLayout& layout, capnp::List<int32_t>::Reader pages, size_t n_keys) {
  if (pages.size() != n_keys)
    return std::to_string(n_keys) + " keys but " + std::to_string(pages.size()) + " pages";
  for (int32_t p : pages) {
    if (p < 0 || p >= layout.n_pages)
      return "page " + std::to_string(p) + " is outside the pool [0, " + std::to_string(layout.n_pages) + ")";
  }
  return {};
}

void save_pages(executor_ptr self, const kv_save_msg& m) {
  auto& st = self->state;
  const KvCache& kv = st.runner->kv();
  const std::string bad = check_pages(kv.layout(), m->getPages(), m->getKeys().size());
  if (!bad.empty()) {
    spdlog::error("executor: dropping a KvSave: {}", bad);
    return;
  }
  if (!st.tiers) return;  // no tiers below this pool: nothing keeps the pages
  auto pages = m->getPages();
  // The bytes go straight from the device into the message.
  auto put = tier_put_msg::build([&](schema::TierPut::Builder b) {
    b.setKeys(m->getKeys());
    auto data = b.initData(pages.size());
    for (unsigned i = 0; i < pages.size(); ++i) {
      auto out = data.init(i, static_cast<unsigned>(kv.layout().page_bytes()));
      const Status s = kv.read_page(st.runner->backend(), pages[i],
                                    std::span<std::byte>(reinterpret_cast<std::byte*>(out.begin()), out.size()));
      BRIGADE_CHECK(s.is_ok(), "read_page failed on a page check_pages accepted");
    }
  });
  self->send(st.tiers, std::move(put));
}

kv_loaded_msg loaded(uint64_t request_id, int n_loaded, int n_host, int n_disk, const std::string& error) {
  return kv_loaded_msg::build([&](schema::KvLoaded::Builder b) {
    b.setRequestId(request_id);
    b.setNLoaded(n_loaded);
    b.setNFromHost(n_host);
    b.setNFromDisk(n_disk);
    b.setError(error);
  });
}

// Writes the run the tiers returned into the requested pages.
kv_loaded_msg fill_pages(executor_ptr self, const kv_load_msg& req, const tier_pages_msg& got) {
  auto& runner = *self->state.runner;
  auto pages = req->getPages();
  auto data = got->getData();
  auto from = got->getFrom();
  const unsigned n = std::min({data.size(), from.size(), pages.size()});
  int n_host = 0, n_disk = 0;
  for (unsigned i = 0; i < n; ++i) {
    const auto bytes = data[i];
    const Status s = runner.kv().write_page(runner.backend(), pages[i],
                                            std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.begin()), bytes.size()));
    if (!s.is_ok()) return loaded(req->getRequestId(), static_cast<int>(i), n_host, n_disk, "tier page unusable: " + s.message());
    (from[i] == schema::Tier::HOST ? n_host : n_disk)++;
  }
  return loaded(req->getRequestId(), static_cast<int>(n), n_host, n_disk, "");
}

caf::result<kv_loaded_msg> load_pages(executor_ptr self, const kv_load_msg& m) {
  auto& st = self->state;
  const uint64_t id = m->getRequestId();
  const std::string bad = check_pages(st.runner->kv().layout(), m->getPages(), m->getKeys().size());
  if (!bad.empty()) return loaded(id, 0, 0, 0, "bad KvLoad: " + bad);
  if (!st.tiers) return loaded(id, 0, 0, 0, "no HiCache tiers are configured");
  auto get = tier_get_msg::build([&](schema::TierGet::Builder b) { b.setKeys(m->getKeys()); });
  auto rp = self->make_response_promise<kv_loaded_msg>();
  self->request(st.tiers, caf::infinite, std::move(get))
      .then([self, rp, m](const tier_pages_msg& got) mutable { rp.deliver(fill_pages(self, m, got)); },
            [rp, id](const caf::error& err) mutable {
              rp.deliver(loaded(id, 0, 0, 0, "HiCache tier failed: " + caf::to_string(err)));
            });
  return rp;
}

kv_exported_msg exported_error(uint64_t id, const std::string& error) {
  return kv_exported_msg::build([&](schema::KvExported::Builder b) {
    b.setRequestId(id);
    b.setError(error);
  });
}

// PD hand-off, prefill side: the pages' bytes into one host buffer, named by a BlobRef.
kv_exported_msg export_pages(executor_ptr self, const kv_export_msg& m) {
  auto& runner = *self->state.runner;
  const KvCache& kv = runner.kv();
  const uint64_t id = m->getRequestId();
  auto pages = m->getPages();
  const std::string bad = check_pages(kv.layout(), pages, pages.size());
  if (!bad.empty()) return exported_error(id, "bad KvExport: " + bad);
  if (!self->state.followers.empty())
    return exported_error(id, "KvExport under tensor parallelism would read rank 0's heads only");
  const size_t page_bytes = kv.layout().page_bytes();
  auto blob = std::make_shared<HostBlob>(page_bytes * pages.size());
  for (unsigned i = 0; i < pages.size(); ++i) {
    const Status s = kv.read_page(runner.backend(), pages[i], std::span<std::byte>(blob->data() + i * page_bytes, page_bytes));
    if (!s.is_ok()) return exported_error(id, "reading page " + std::to_string(pages[i]) + ": " + s.message());
  }
  const bool inline_bytes = m->getInline();
  std::shared_ptr<const HostBlob> bytes = std::move(blob);
  auto fill = [&](schema::KvExported::Builder b) {
    b.setRequestId(id);
    b.setPageBytes(page_bytes);
    fill_blob_ref(b.initBlob(), bytes, inline_bytes);
  };
  // A local buffer lives as long as the reply (and each message it is forwarded in) does.
  return inline_bytes ? kv_exported_msg::build(fill) : kv_exported_msg::build_attached(bytes, fill);
}

kv_imported_msg imported(uint64_t id, const std::string& error) {
  return kv_imported_msg::build([&](schema::KvImported::Builder b) {
    b.setRequestId(id);
    b.setError(error);
  });
}

// PD hand-off, decode side: a blob's pages into this executor's device pages.
kv_imported_msg import_pages(executor_ptr self, const kv_import_msg& m) {
  auto& runner = *self->state.runner;
  const uint64_t id = m->getRequestId();
  auto pages = m->getPages();
  const std::string bad = check_pages(runner.kv().layout(), pages, pages.size());
  if (!bad.empty()) return imported(id, "bad KvImport: " + bad);
  if (!self->state.followers.empty()) return imported(id, "KvImport under tensor parallelism is not supported");
  const size_t page_bytes = runner.kv().layout().page_bytes();
  if (m->getPageBytes() != page_bytes)
    return imported(id, "the pages hold " + std::to_string(m->getPageBytes()) + " bytes each, this instance's " +
                            std::to_string(page_bytes) + ": the KV layouts differ");
  auto view = resolve_blob(m->getBlob());
  if (!view) return imported(id, view.status().message());
  if (view->bytes.size() != page_bytes * pages.size())
    return imported(id, "the blob holds " + std::to_string(view->bytes.size()) + " bytes for " +
                            std::to_string(pages.size()) + " pages of " + std::to_string(page_bytes));
  for (unsigned i = 0; i < pages.size(); ++i) {
    const Status s = runner.kv().write_page(runner.backend(), pages[i], view->bytes.subspan(i * page_bytes, page_bytes));
    if (!s.is_ok()) return imported(id, "writing page " + std::to_string(pages[i]) + ": " + s.message());
  }
  return imported(id, "");
}

void init_state(ExecutorState& state, caf::local_actor* self, std::shared_ptr<ExecutorResources> resources) {
  state.resources = resources;
  state.runner = std::make_unique<StepRunner>(*resources->backend, *resources->model, std::move(resources->kv),
                                              resources->runner);
  if (Communicator* comm = resources->communicator.get()) {
    // Whatever ends this rank (shutdown, a crash of its behaviour), its peers must not wait on it.
    self->attach_functor([resources, rank = comm->rank()] {
      resources->communicator->abort("executor rank " + std::to_string(rank) + " stopped");
    });
  }
}

// A bad plan is refused by every rank alike before any collective; any other failure may leave
// peers inside a collective, so the group is failed for all of them.
void abort_group_on_failure(const ExecutorResources& res, const Status& st) {
  if (st.is_ok() || st.code() == StatusCode::invalid_argument || res.communicator == nullptr) return;
  res.communicator->abort("rank " + std::to_string(res.communicator->rank()) + " failed a step: " + st.to_string());
}

// Microseconds the step held the executor: from its start, or from the previous step's end when
// it started behind that one (steps in flight), to its tokens.
uint64_t step_us(ExecutorState& st, std::chrono::steady_clock::time_point started) {
  const auto now = std::chrono::steady_clock::now();
  const auto from = std::max(started, st.last_done);
  st.last_done = now;
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(now - from).count());
}

// What the step cost, how long it took, and what the ceilings allowed for it (DESIGN.md §9).
StepReport report(const ExecutorState& st, const StepCost& cost, int n_tokens, uint64_t us) {
  StepReport r{n_tokens, us, cost.flops, cost.bytes, 0, false};
  const RooflineCeilings& c = st.resources->ceilings;
  if (c.known()) {
    const double memory_s = cost.bytes / c.bytes_per_s, compute_s = cost.flops / c.flops_per_s;
    r.roofline_us = std::max(memory_s, compute_s) * 1e6;
    r.compute_bound = compute_s > memory_s;
  }
  return r;
}

// Hands back the oldest step in flight (waiting for its tokens when needed).
void deliver_oldest(executor_ptr self) {
  ExecutorState& st = self->state;
  PendingStep p = std::move(st.pending.front());
  st.pending.pop_front();
  const auto sampled = st.runner->finish(p.step);
  const uint64_t us = step_us(st, p.started);
  p.promise.deliver(encode_step_result(p.step_id, sampled, report(st, p.step.cost(), p.n_tokens, us)));
}

// Runs a plan. A device step whose rows all sample on the device stays in flight: the reply
// waits for its tokens while the next plan (already in the mailbox when the scheduler keeps two
// steps in flight) starts behind it on the device, so the device never idles while the host
// prepares a step. Replies keep the plans' order.
caf::result<step_result_msg> run_step(executor_ptr self, const step_plan_msg& plan) {
  const auto t0 = std::chrono::steady_clock::now();
  ExecutorState& st = self->state;
  PlannedStep step = decode_step_plan(plan.reader());
  if (!st.followers.empty()) {
    // Followers never sample: they get the plan with the tokens this rank sampled filled in.
    if (Status s = st.runner->resolve_last_sampled(step); !s.is_ok()) return encode_step_error(step.step_id, s.to_string());
    const step_plan_msg resolved = encode_step_plan(step);
    for (const auto& f : st.followers) self->send(f, resolved);
  }
  auto started = st.runner->start(step);
  // The older step's tokens go first; the device already has this step queued behind it.
  while (!st.pending.empty()) deliver_oldest(self);
  if (!started) {
    abort_group_on_failure(*st.resources, started.status());
    st.last_done = std::chrono::steady_clock::now();
    return encode_step_error(step.step_id, started.status().to_string());
  }
  if (!started->pending() || !st.followers.empty()) {
    const auto sampled = st.runner->finish(*started);
    const uint64_t us = step_us(st, t0);
    return encode_step_result(step.step_id, sampled, report(st, started->cost(), step.n_tokens, us));
  }
  auto promise = self->make_response_promise<step_result_msg>();
  st.pending.push_back(PendingStep{step.step_id, step.n_tokens, std::move(*started), promise, t0});
  self->send(self, step_poll_atom::value, step.step_id);
  return promise;
}

// The step is handed back once its tokens are there. Until then the poll goes round the mailbox
// again, behind any plan that arrived meanwhile.
void poll_step(executor_ptr self, uint64_t step_id) {
  ExecutorState& st = self->state;
  if (st.pending.empty() || st.pending.front().step_id != step_id) return;  // delivered already
  if (st.runner->ready(st.pending.front().step)) {
    deliver_oldest(self);
  } else {
    std::this_thread::yield();
    self->send(self, step_poll_atom::value, step_id);
  }
}

executor_impl_actor::behavior_type executor_fun(executor_ptr self, std::shared_ptr<ExecutorResources> resources,
                                                hicache_actor tiers, std::vector<tp_follower_actor> followers) {
  init_state(self->state, self, std::move(resources));
  self->state.tiers = std::move(tiers);
  self->state.followers = std::move(followers);
  return {
      [self](const step_plan_msg& plan) -> caf::result<step_result_msg> { return run_step(self, plan); },
      [self](step_poll_atom, uint64_t step_id) { poll_step(self, step_id); },
      [self](const kv_save_msg& m) { save_pages(self, m); },
      [self](const kv_load_msg& m) -> caf::result<kv_loaded_msg> { return load_pages(self, m); },
      [self](const kv_export_msg& m) { return export_pages(self, m); },
      [self](const kv_import_msg& m) { return import_pages(self, m); },
  };
}

tp_follower_actor::behavior_type follower_fun(tp_follower_actor::stateful_pointer<ExecutorState> self,
                                              std::shared_ptr<ExecutorResources> resources) {
  init_state(self->state, self, std::move(resources));
  return {
      [self](const step_plan_msg& plan) {
        const PlannedStep step = decode_step_plan(plan.reader());
        const Status st = self->state.runner->run_forward_only(step);
        // Rank 0 reports the step's outcome; a bad plan fails there the same way, and a group
        // that another rank aborted (at shutdown, say) has been reported by that rank.
        if (!st.is_ok() && st.code() != StatusCode::invalid_argument && st.code() != StatusCode::cancelled)
          spdlog::error("executor rank {}: step {} failed: {}", self->state.resources->communicator->rank(),
                        step.step_id, st.to_string());
        abort_group_on_failure(*self->state.resources, st);
      },
  };
}

}  // namespace

executor_actor spawn_executor(caf::actor_system& system, std::shared_ptr<ExecutorResources> resources,
                              hicache_actor tiers, std::vector<tp_follower_actor> followers) {
  BRIGADE_CHECK(followers.empty() || !tiers, "HiCache tiers are not combined with tensor parallelism");
  executor_impl_actor impl =
      system.spawn<caf::detached>(executor_fun, std::move(resources), std::move(tiers), std::move(followers));
  return impl;
}

tp_follower_actor spawn_tp_follower(caf::actor_system& system, std::shared_ptr<ExecutorResources> resources) {
  BRIGADE_CHECK(resources->communicator != nullptr, "a follower rank has a communicator");
  return system.spawn<caf::detached>(follower_fun, std::move(resources));
}

}  // namespace brigade
