#include "actors/executor/executor_actor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
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
using executor_impl_actor = executor_actor::extend<caf::reacts_to<step_poll_atom, uint64_t>>::extend_with<lora_slots_actor>;

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

// ---- pages across tensor-parallel ranks ----
// Under tensor parallelism a page of the group is every rank's bytes of it, in rank order (each
// rank caches its kv heads), or, for MLA's latent cache, which every rank holds whole, rank 0's
// bytes alone. KvSave/KvExport gather the followers' parts (rank 0 reads its own at once; each
// follower reads when it takes the request, which rank 0 sent after every plan it forwarded
// before, so all parts are of the same moment); KvLoad/KvImport write rank 0's part and send each
// follower its own, and answer once every follower has written (a later plan reaches the
// followers after that).

bool gathers(const ExecutorState& st) { return !st.followers.empty() && !st.runner->kv().layout().latent; }

size_t group_page_bytes(const ExecutorState& st) {
  return st.runner->kv().layout().page_bytes() * (gathers(st) ? st.followers.size() + 1 : 1);
}

// Reads this rank's pages into out: page i's bytes at i * stride.
Status read_own_pages(ExecutorState& st, capnp::List<int32_t>::Reader pages, std::byte* out, size_t stride) {
  const KvCache& kv = st.runner->kv();
  const size_t bytes = kv.layout().page_bytes();
  for (unsigned i = 0; i < pages.size(); ++i) {
    const Status s = kv.read_page(st.runner->backend(), pages[i], std::span<std::byte>(out + i * stride, bytes));
    if (!s.is_ok()) return Status(s.code(), "reading page " + std::to_string(pages[i]) + ": " + s.message());
  }
  return Status::ok();
}

// Writes this rank's pages (a capnp list or a vector of ids) from page_of(i) (each this rank's
// page_bytes).
template <class Pages, class PageOf>
Status write_own_pages(ExecutorState& st, const Pages& pages, PageOf page_of) {
  for (unsigned i = 0; i < pages.size(); ++i) {
    const Status s = st.runner->kv().write_page(st.runner->backend(), pages[i], page_of(i));
    if (!s.is_ok()) return Status(s.code(), "writing page " + std::to_string(pages[i]) + ": " + s.message());
  }
  return Status::ok();
}

// Host memory for n bytes: a shared-memory segment when `shared` (heap memory, with a warning,
// when none can be made: the caller then sends the bytes inline), else heap memory.
std::shared_ptr<HostBlob> host_bytes(size_t n, bool shared) {
  if (shared && n > 0) {
    auto seg = make_shared_blob(n);
    if (seg) return std::move(*seg);
    spdlog::warn("executor: {}; these bytes go inline", seg.status().message());
  }
  return std::make_shared<HostBlob>(n);
}

// The group's bytes of `pages` (n x group_page_bytes), in a shared-memory segment when `shared`:
// done(blob) once every rank's part is in, or done(error). Calls done before returning when there
// is nothing to gather.
void gather_pages(executor_ptr self, const std::vector<int32_t>& page_ids, bool shared,
                  std::function<void(Expected<std::shared_ptr<HostBlob>>)> done) {
  ExecutorState& st = self->state;
  const size_t own = st.runner->kv().layout().page_bytes(), group = group_page_bytes(st);
  auto blob = host_bytes(group * page_ids.size(), shared);
  const auto ask = kv_export_msg::build([&](schema::KvExport::Builder b) {
    auto p = b.initPages(static_cast<unsigned>(page_ids.size()));
    for (unsigned i = 0; i < page_ids.size(); ++i) p.set(i, page_ids[i]);
  });
  if (Status s = read_own_pages(st, ask->getPages(), blob->data(), group); !s.is_ok()) return done(s);
  if (!gathers(st)) return done(blob);
  struct Gather {
    size_t left;
    std::string error;
  };
  auto g = std::make_shared<Gather>(Gather{st.followers.size(), ""});
  auto finish = [g, blob, done] {
    if (--g->left > 0) return;
    if (!g->error.empty()) return done(internal_error(g->error));
    done(blob);
  };
  for (size_t r = 0; r < st.followers.size(); ++r) {
    const size_t offset = (r + 1) * own, n = page_ids.size();
    self->request(st.followers[r], caf::infinite, ask)
        .then(
            [g, blob, finish, offset, own, group, n, r](const kv_exported_msg& got) {
              auto view = resolve_blob(got->getBlob());
              if (!(got->getError().size() == 0) || !view || view->bytes.size() != n * own) {
                g->error = "rank " + std::to_string(r + 1) + " did not read its pages: " +
                           (!(got->getError().size() == 0) ? std::string(got->getError().cStr())
                                                     : view ? "wrong size" : view.status().message());
              } else {
                for (size_t i = 0; i < n; ++i) std::memcpy(blob->data() + i * group + offset, view->bytes.data() + i * own, own);
              }
              finish();
            },
            [g, finish, r](const caf::error& err) {
              g->error = "rank " + std::to_string(r + 1) + ": " + caf::to_string(err);
              finish();
            });
  }
}

// Writes the group's bytes of `pages` (page_of(i): group_page_bytes each): this rank's part now,
// each follower's by a KvImport; done(ok) once all have written, or done(error).
template <class PageOf>
void scatter_pages(executor_ptr self, const std::vector<int32_t>& page_ids, PageOf page_of,
                   std::function<void(Status)> done) {
  ExecutorState& st = self->state;
  const size_t own = st.runner->kv().layout().page_bytes();
  const size_t n = page_ids.size();
  auto build_pages = [&](auto list) {
    for (unsigned i = 0; i < n; ++i) list.set(i, page_ids[i]);
  };
  const bool split = gathers(st);
  if (Status s = write_own_pages(st, page_ids, [&](unsigned i) { return page_of(i).subspan(0, own); }); !s.is_ok())
    return done(s);
  if (st.followers.empty()) return done(Status::ok());
  auto left = std::make_shared<size_t>(st.followers.size());
  auto error = std::make_shared<std::string>();
  auto finish = [left, error, done] {
    if (--*left > 0) return;
    done(error->empty() ? Status::ok() : internal_error(*error));
  };
  for (size_t r = 0; r < st.followers.size(); ++r) {
    // A follower's part: its slice of each group page, or the whole page for the latent cache.
    auto part = std::make_shared<HostBlob>(own * n);
    for (size_t i = 0; i < n; ++i) std::memcpy(part->data() + i * own, page_of(static_cast<unsigned>(i)).data() + (split ? (r + 1) * own : 0), own);
    std::shared_ptr<const HostBlob> bytes = std::move(part);
    auto put = kv_import_msg::build_attached(bytes, [&](schema::KvImport::Builder b) {
      build_pages(b.initPages(static_cast<unsigned>(n)));
      b.setPageBytes(own);
      fill_blob_ref(b.initBlob(), bytes, BlobTransport::local);
    });
    self->request(st.followers[r], caf::infinite, std::move(put))
        .then(
            [error, finish, r](const kv_imported_msg& got) {
              if (!(got->getError().size() == 0)) *error = "rank " + std::to_string(r + 1) + ": " + got->getError().cStr();
              finish();
            },
            [error, finish, r](const caf::error& err) {
              *error = "rank " + std::to_string(r + 1) + ": " + caf::to_string(err);
              finish();
            });
  }
}

// The first n (all by default) page ids of a message.
std::vector<int32_t> page_list(capnp::List<int32_t>::Reader pages, size_t n = SIZE_MAX) {
  std::vector<int32_t> ids;
  for (unsigned i = 0; i < pages.size() && ids.size() < n; ++i) ids.push_back(pages[i]);
  return ids;
}

void save_pages(executor_ptr self, const kv_save_msg& m) {
  auto& st = self->state;
  const std::string bad = check_pages(st.runner->kv().layout(), m->getPages(), m->getKeys().size());
  if (!bad.empty()) {
    spdlog::error("executor: dropping a KvSave: {}", bad);
    return;
  }
  if (!st.tiers) return;  // no tiers below this pool: nothing keeps the pages
  const size_t group = group_page_bytes(st);
  gather_pages(self, page_list(m->getPages()), /*shared=*/false, [self, m, group](Expected<std::shared_ptr<HostBlob>> blob) {
    if (!blob) {
      spdlog::error("executor: dropping a KvSave: {}", blob.status().to_string());
      return;
    }
    auto put = tier_put_msg::build([&](schema::TierPut::Builder b) {
      b.setKeys(m->getKeys());
      auto data = b.initData(m->getPages().size());
      for (unsigned i = 0; i < data.size(); ++i) {
        auto out = data.init(i, static_cast<unsigned>(group));
        std::memcpy(out.begin(), (*blob)->data() + i * group, group);
      }
    });
    self->send(self->state.tiers, std::move(put));
  });
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

// Writes the run the tiers returned into the requested pages (every rank's part of them).
void fill_pages(executor_ptr self, const kv_load_msg& req, const tier_pages_msg& got,
                caf::typed_response_promise<kv_loaded_msg> rp) {
  auto pages = req->getPages();
  auto data = got->getData();
  auto from = got->getFrom();
  const uint64_t id = req->getRequestId();
  const unsigned n = std::min({data.size(), from.size(), pages.size()});
  const size_t group = group_page_bytes(self->state);
  int n_host = 0, n_disk = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (data[i].size() != group) {
      rp.deliver(loaded(id, 0, 0, 0, "tier page unusable: " + std::to_string(data[i].size()) + " bytes, the group's pages hold " +
                                         std::to_string(group)));
      return;
    }
    (from[i] == schema::Tier::HOST ? n_host : n_disk)++;
  }
  auto page_of = [got](unsigned i) {
    const auto bytes = got->getData()[i];
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.begin()), bytes.size());
  };
  scatter_pages(self, page_list(pages, n), page_of, [rp, id, n, n_host, n_disk](Status s) mutable {
    rp.deliver(s.is_ok() ? loaded(id, static_cast<int>(n), n_host, n_disk, "")
                         : loaded(id, 0, 0, 0, "tier page unusable: " + s.message()));
  });
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
      .then([self, rp, m](const tier_pages_msg& got) mutable { fill_pages(self, m, got, rp); },
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

kv_exported_msg exported(uint64_t id, std::shared_ptr<const HostBlob> bytes, size_t page_bytes,
                         BlobTransport transport) {
  // A shared transport whose segment could not be made (host_bytes warned) sends inline.
  if (transport == BlobTransport::shared && bytes->segment().empty()) transport = BlobTransport::inline_bytes;
  auto fill = [&](schema::KvExported::Builder b) {
    b.setRequestId(id);
    b.setPageBytes(page_bytes);
    fill_blob_ref(b.initBlob(), bytes, transport);
  };
  // A local buffer (or a segment's mapping) lives as long as the reply, and each message it is
  // forwarded in, does.
  return transport == BlobTransport::inline_bytes ? kv_exported_msg::build(fill)
                                                  : kv_exported_msg::build_attached(bytes, fill);
}

// PD hand-off, prefill side: the pages' bytes (every rank's part) into one host buffer (a
// shared-memory segment for a shared transport), named by a BlobRef. A follower answers its own
// part the same way.
caf::result<kv_exported_msg> export_pages(executor_ptr self, const kv_export_msg& m) {
  auto& st = self->state;
  const uint64_t id = m->getRequestId();
  auto pages = m->getPages();
  const std::string bad = check_pages(st.runner->kv().layout(), pages, pages.size());
  if (!bad.empty()) return exported_error(id, "bad KvExport: " + bad);
  auto rp = self->make_response_promise<kv_exported_msg>();
  const BlobTransport transport = from_schema(m->getTransport());
  gather_pages(self, page_list(pages), transport == BlobTransport::shared,
               [rp, id, group = group_page_bytes(st), transport](Expected<std::shared_ptr<HostBlob>> blob) mutable {
                 rp.deliver(blob ? exported(id, std::move(*blob), group, transport)
                                 : exported_error(id, blob.status().message()));
               });
  return rp;
}

kv_imported_msg imported(uint64_t id, const std::string& error) {
  return kv_imported_msg::build([&](schema::KvImported::Builder b) {
    b.setRequestId(id);
    b.setError(error);
  });
}

// Empty when the blob of m holds its pages of this group's page size; else why not.
std::string check_import(const ExecutorState& st, const kv_import_msg& m, const Expected<BlobView>& view) {
  const size_t page_bytes = group_page_bytes(st), n = m->getPages().size();
  if (m->getPageBytes() != page_bytes)
    return "the pages hold " + std::to_string(m->getPageBytes()) + " bytes each, this instance's " +
           std::to_string(page_bytes) + ": the KV layouts differ";
  if (!view) return view.status().message();
  if (view->bytes.size() != page_bytes * n)
    return "the blob holds " + std::to_string(view->bytes.size()) + " bytes for " + std::to_string(n) + " pages of " +
           std::to_string(page_bytes);
  return {};
}

// PD hand-off, decode side: a blob's pages into this executor's device pages (every rank's part).
caf::result<kv_imported_msg> import_pages(executor_ptr self, const kv_import_msg& m) {
  auto& st = self->state;
  const uint64_t id = m->getRequestId();
  auto pages = m->getPages();
  const std::string bad = check_pages(st.runner->kv().layout(), pages, pages.size());
  if (!bad.empty()) return imported(id, "bad KvImport: " + bad);
  auto view = resolve_blob(m->getBlob());
  if (std::string wrong = check_import(st, m, view); !wrong.empty()) return imported(id, wrong);
  const size_t group = group_page_bytes(st);
  auto rp = self->make_response_promise<kv_imported_msg>();
  const std::span<const std::byte> bytes = view->bytes;
  scatter_pages(self, page_list(pages), [bytes, group](unsigned i) { return bytes.subspan(i * group, group); },
                [rp, id](Status s) mutable { rp.deliver(imported(id, s.is_ok() ? "" : s.message())); });
  return rp;
}

// A follower's own part of a KvExport / KvImport from rank 0 (gather_pages, scatter_pages).
kv_exported_msg follower_export(ExecutorState& st, const kv_export_msg& m) {
  const size_t own = st.runner->kv().layout().page_bytes();
  auto blob = std::make_shared<HostBlob>(own * m->getPages().size());
  if (Status s = read_own_pages(st, m->getPages(), blob->data(), own); !s.is_ok())
    return exported_error(m->getRequestId(), s.message());
  return exported(m->getRequestId(), std::move(blob), own, BlobTransport::local);
}

kv_imported_msg follower_import(ExecutorState& st, const kv_import_msg& m) {
  const size_t own = st.runner->kv().layout().page_bytes();
  auto view = resolve_blob(m->getBlob());
  if (!view || view->bytes.size() != own * m->getPages().size() || m->getPageBytes() != own)
    return imported(m->getRequestId(), "a part of the wrong size");
  const Status s = write_own_pages(st, m->getPages(), [&](unsigned i) { return view->bytes.subspan(i * own, own); });
  return imported(m->getRequestId(), s.is_ok() ? "" : s.message());
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
  p.promise.deliver(encode_step_result(p.step_id, sampled, report(st, p.step.cost(), p.n_tokens, us),
                                       p.step.take_prompt_logprobs(), p.step.take_embeddings(), p.step.take_drafts()));
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
    return encode_step_result(step.step_id, sampled, report(st, started->cost(), step.n_tokens, us),
                              started->take_prompt_logprobs(), started->take_embeddings(), started->take_drafts());
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

lora_updated_msg lora_reply(const Status& s) {
  return lora_updated_msg::build([&](schema::LoraUpdated::Builder b) {
    b.setError(s.is_ok() ? "" : s.message());
    b.setCode(static_cast<uint8_t>(s.code()));
  });
}

// A LoRA slot loaded or freed between steps (Model::load_lora synchronizes with a step still in
// flight on the device before it touches the slot's weights), on this rank.
Status update_own_lora(const ExecutorState& st, const lora_update_msg& m) {
  auto r = m.reader();
  Model& model = *st.resources->model;
  const int slot = static_cast<int>(r.getSlot());
  const Status s = r.getLoad() ? model.load_lora(slot, LoraModule{r.getName(), r.getPath()}) : model.unload_lora(slot);
  if (s.is_ok())
    spdlog::info("executor: LoRA slot {} {}", slot, r.getLoad() ? "loaded '" + std::string(r.getName().cStr()) + "'" : "freed");
  return s;
}

// Rank 0 updates its own part, then every follower's, and answers once all have: the engine makes
// the adapter's name live only then, so no step names the slot before every rank holds it.
caf::result<lora_updated_msg> update_lora(executor_ptr self, const lora_update_msg& m) {
  const Status own = update_own_lora(self->state, m);
  if (self->state.followers.empty() || !own.is_ok()) return lora_reply(own);
  auto promise = self->make_response_promise<lora_updated_msg>();
  struct Gather {
    size_t left;
    Status first_error = Status::ok();
  };
  auto gather = std::make_shared<Gather>(Gather{self->state.followers.size()});
  auto done = [promise, gather](const Status& s) mutable {
    if (!s.is_ok() && gather->first_error.is_ok()) gather->first_error = s;
    if (--gather->left == 0) promise.deliver(lora_reply(gather->first_error));
  };
  for (size_t i = 0; i < self->state.followers.size(); ++i) {
    const std::string who = "tp rank " + std::to_string(i + 1) + ": ";
    self->request(self->state.followers[i], std::chrono::seconds(120), m)
        .then(
            [done, who](const lora_updated_msg& r) mutable {
              const std::string err = r.reader().getError();
              done(err.empty() ? Status::ok()
                               : Status(static_cast<StatusCode>(r.reader().getCode()), who + err));
            },
            [done, who](const caf::error& e) mutable { done(internal_error(who + caf::to_string(e))); });
  }
  return promise;
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
      [self](const kv_export_msg& m) -> caf::result<kv_exported_msg> { return export_pages(self, m); },
      [self](const kv_import_msg& m) -> caf::result<kv_imported_msg> { return import_pages(self, m); },
      [self](const lora_update_msg& m) -> caf::result<lora_updated_msg> { return update_lora(self, m); },
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
      [self](const lora_update_msg& m) { return lora_reply(update_own_lora(self->state, m)); },
      [self](const kv_export_msg& m) { return follower_export(self->state, m); },
      [self](const kv_import_msg& m) { return follower_import(self->state, m); },
  };
}

}  // namespace

executor_actor spawn_executor(caf::actor_system& system, std::shared_ptr<ExecutorResources> resources,
                              hicache_actor tiers, std::vector<tp_follower_actor> followers) {
  executor_impl_actor impl =
      system.spawn<caf::detached>(executor_fun, std::move(resources), std::move(tiers), std::move(followers));
  return impl;
}

tp_follower_actor spawn_tp_follower(caf::actor_system& system, std::shared_ptr<ExecutorResources> resources) {
  BRIGADE_CHECK(resources->communicator != nullptr, "a follower rank has a communicator");
  return system.spawn<caf::detached>(follower_fun, std::move(resources));
}

}  // namespace brigade
