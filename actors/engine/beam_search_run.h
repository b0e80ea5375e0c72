// BeamSearchRun: one beam search (Engine::submit_beam_search) driven over the engine's ordinary
// requests. Each step submits one request per running beam (the prompt + the beam's tokens, one
// greedy token, the raw logprobs of its K best candidates: core/beam_search.h), waits for all of
// them, advances the BeamSearch and submits the next step, until it is done. The prefix cache
// serves the pages the beams share with the prompt and with each other, so a step computes
// little more than each beam's last page (vLLM's beam search works the same way).
//
// Thread safety: every entry point takes the run's mutex; the engine callbacks the run registers
// and the engine's cancel come from any thread. The engine's functions (submit, cancel, forget)
// are called with the mutex held, so abandon() returning means the run will call none of them
// again; on_done is called without it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "brigade/engine.h"
#include "core/beam_search.h"
#include "models/tokenizer.h"

namespace brigade {

// Requests submitted together (GenerateRequest.admitGroup): admitted in one step.
struct AdmitGroup {
  uint64_t id = 0;  // 0: none
  uint32_t size = 0;
};

struct BeamRunSetup {
  uint64_t id = 0;                 // the search's id (Engine::cancel)
  BeamSearchOptions options;       // the step requests' priority, salt, labels, LoRA; the output's form
  std::vector<int32_t> prompt;     // as run: tokenized and truncated
  BeamSearchConfig config;         // passed BeamSearch::validate
  std::shared_ptr<const Tokenizer> tokenizer;  // the beams' text; null: none
  // Submits a step request as one of the step's admit group (all its requests run in one engine
  // step); new_group names each step's group.
  std::function<Expected<uint64_t>(const GenerateOptions&, AdmitGroup, EventCallback)> submit;
  std::function<uint64_t()> new_group;
  std::function<void(uint64_t)> cancel;  // a step request's id
  std::function<void(uint64_t)> forget;  // the engine drops the search's id (once, at its end)
};

class BeamSearchRun : public std::enable_shared_from_this<BeamSearchRun> {
 public:
  BeamSearchRun(BeamRunSetup setup, BeamSearchCallback on_done);

  // Submits the first step. An error (a request the engine refused) means nothing runs, forget
  // is not called and on_done never will be.
  Status start();
  // Ends the search now: its running requests are cancelled and on_done gets `why` (cancelled).
  // Nothing once it has ended.
  void cancel(const std::string& why);

 private:
  Status submit_step_locked();
  void on_event(int step, int beam, const Event& ev);
  // Ends the search (with the mutex held): cancels what runs, tells the engine; returns the
  // callback to call once the mutex is released (empty when it had already ended).
  BeamSearchCallback end_locked(bool cancel_running);
  BeamSearchResult results();
  Beam to_beam(const BeamHypothesis& h) const;

  BeamRunSetup setup_;
  BeamSearchCallback on_done_;
  std::mutex mu_;
  BeamSearch search_;
  int step_ = 0;                              // the step in flight
  int k_ = 0;                                 // candidates asked of each step request
  std::vector<uint64_t> request_ids_;         // per running beam: its step request (0 once answered)
  std::vector<TokenCandidates> tops_;         // per running beam: its answer
  int n_answered_ = 0;
  int cached_tokens_ = 0;
  bool ended_ = false;
};

}  // namespace brigade
