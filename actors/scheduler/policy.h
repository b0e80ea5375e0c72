// SchedulerPolicy: the plain scheduling logic of one instance (DESIGN.md §6), tested without
// actors. The scheduler actor owns one and translates messages into calls.
//
// A running sequence has `tokens` (prompt + generated tokens the scheduler has seen); positions
// [0, n_scheduled) are covered by steps sent to the executor, [0, n_computed) by steps that came
// back. Each step gives a sequence either a chunk of known tokens (a prompt chunk, or the
// recompute of a preempted sequence) or one decode token. With several steps in flight, a decode
// may refer to a token the executor sampled in an earlier step that has not come back yet
// (`use_last_sampled`); the executor resolves it, so outputs are the same for any depth.
//
// Order within a step: decodes first (one token each), then prompt chunks fill the step's token
// budget (chunked prefill), then waiting requests are admitted in (priority, arrival) order.
//
// Pages: admission needs pages for the known tokens plus one; running sequences take a page when
// they cross a page boundary. When none is free, the lowest-priority, latest-arriving sequence
// with no step in flight is preempted: its pages go back, and it returns to the head of its
// priority in the waiting queue, to be recomputed from its tokens (its place is kept). A sequence
// waits instead (no preemption) while the KV page manager still has free pages to lease.
//
// Speculative decoding (DESIGN.md §7, `spec`): a decoding sequence whose last token is known gets
// up to k drafts from its drafter (n-gram, or a draft model the caller passes); its work item carries the token and the drafts (k + 1
// positions, pages for all of them, k + 1 of the step's token budget) and it is not planned
// again until the result says how many were accepted (1..k+1 tokens arrive, stops and max_tokens
// cut them). Its length then advances by what was accepted and pages wholly past its tokens go
// back (a later step overwrites the rejected slots in its last page). A sequence that drafts does
// not decode on a token still in flight (use_last_sampled): it waits for the result instead. Load
// rule: no drafts in a step while the last one came back compute-bound or more than
// disable_batch_size sequences decode; per sequence, none for a while when its acceptance is low.
//
// Prefix cache (DESIGN.md §5, `prefix_cache`): admission matches the prompt against a RadixTree
// and starts the sequence after its cached pages (at least one token is always computed, for the
// logits). Prompt pages enter the tree as their chunks complete, so a request arriving while
// another is still generating already shares its prompt; every computed page enters it when a
// sequence ends or is preempted. Pages the tree owns return to the lease only when evicted, which
// happens when the lease runs short, before any preemption. With lower tiers (`lower_tiers`), an
// admitted sequence whose prompt continues past the device match first asks the tiers for the
// following pages (a KvLoadRequest the scheduler sends to the executor); it waits, holding its
// pages but not the batch, until loaded() says how many arrived, and computes the rest.
//
// Prompt logprobs (SeqRequest::prompt_logprobs, policy_prompt_logprobs.cpp): prompt chunks ask
// the executor to score the prompt positions they cover that were not scored yet, and the
// results gather in the sequence until its first event carries them all. Positions served from
// the prefix cache have no logits, so such a sequence matches at most the positions already
// scored (none at first: vLLM V1 also recomputes) and loads nothing from lower tiers; its pages
// still enter the cache. After a preemption a recomputed chunk scores only what is missing, so
// each position is reported once. max_tokens 0 runs the prompt only and ends with length.
//
// Recurrent models (SchedulerLimits::state_snapshots, policy_states.cpp; docs/architecture.md
// "State snapshots"): a sequence's past is a state, not its pages, so a cached prefix is usable
// only where a snapshot of the state at its end is kept. The executor holds state_snapshots
// snapshot slots; work items ask it to save the state at page boundaries (the last one of each
// prompt chunk and the prompt's, and every page a decode completes) into a slot, which joins the
// tree with the page it ends (a sequence keeps only its latest decode snapshot there), and
// admission cuts a match back to the longest prefix whose last page has one and starts the
// sequence from it (SeqWorkItem::state_from). Snapshots are reused least recently used first,
// and leave with their page when the tree evicts it.
//
// Pooling (SeqRequest::pooling, policy_pooling.cpp; docs/architecture.md "Embeddings"): the
// prompt runs in chunks beside other sequences' decodes and chunks, nothing is sampled
// (max_tokens is 0), and the chunk that ends the prompt brings back the pooled vector, which the
// final event (finish stop) carries; the sequence's pages then go back (to the prefix cache when
// whole). last pooling takes prefix-cache hits like generation (the last token is always
// computed); mean and cls need every prompt position's hidden state, so they take none and load
// nothing from lower tiers (their pages still enter the cache).
//
// PD separation (`role`, policy_pd.cpp; docs/architecture.md "PD separation"): a prefill
// instance never decodes. When a sequence's prompt has run and its first token is sampled, the
// policy asks for its KV pages to be read (take_exports); once they are (exported()), the
// sequence leaves without a final event, its pages going back to the lease or to the prefix
// cache, and its state goes to a decode instance. There add_transferred() queues it like a
// request; admission reserves pages for it and asks for the bytes to be written (take_imports);
// it waits, holding its pages but not the batch, until imported(), then decodes from its last
// token as if it had computed the prompt itself.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/drafter/drafter.h"
#include "actors/step_types.h"
#include "brigade/topology.h"
#include "core/sampling.h"
#include "core/status.h"
#include "kvstore/page_pool.h"
#include "kvstore/radix_tree.h"
#include "models/anyres.h"

namespace brigade {

// Speculative decoding with the n-gram drafter (DESIGN.md §7; docs/architecture.md "Speculative
// decoding"). num_tokens = 0 turns it off.
struct SpeculativeLimits {
  int num_tokens = 0;           // k: drafts verified per sequence and step
  int ngram_min = 1;            // the drafter's suffix lengths (NgramDrafterOptions)
  int ngram_max = 3;
  double min_acceptance = 0.2;  // a sequence whose measured acceptance falls below this stops
                                // drafting for kSpecCooldownTokens tokens
  int disable_batch_size = 0;   // no drafts in a step with more decoding sequences (0 = no limit)
  // MTP (speculative method mtp): the executor runs the model's MTP module with every step, so
  // every chunk sends the token after it (SeqWorkItem::next_token) and, when a drafter is set
  // (not on a prefill instance), every sampling item asks for num_tokens drafts
  // (SeqWorkItem::mtp_drafts), which come back with the step (complete(): MtpDrafter). A radix
  // match gives up its last page, whose last MTP entry was made from another sequence's next token.
  bool mtp = false;
  Status validate() const;
};

struct SchedulerLimits {
  int max_running = 64;         // sequences in the running set
  int max_waiting = 1024;       // bounded queue: a request beyond it is refused
  int max_step_tokens = 512;    // token budget of one step (decode tokens + prompt chunks)
  int max_context = 0;          // the model's context length (prompt + generated)
  int page_size = 16;
  int vocab_size = 0;
  // An encoder's token types (models/bert.h): above 1, a prompt id carries its type in bit 30,
  // which the vocabulary check ignores.
  int token_types = 0;
  bool chunked_prefill = true;  // false: prompts run whole, in prefill-only steps (vLLM v0 style)
  bool prefix_cache = false;    // the radix prefix cache (on by default in the topology config)
  // With the prefix cache: a sequence that ends leaves its partly filled last page in the cache,
  // and admission copies the leading rows of such a page (or of a cached whole page a prompt
  // diverges in or ends in) instead of computing them (RadixTree "tails"; cache.partial_pages).
  // Not with an MTP module (SpeculativeLimits::mtp).
  bool partial_pages = false;
  // A recurrent model (models/state_space.h): with the prefix cache, the executor's snapshot
  // slots (StepRunnerOptions::state_snapshots, at least 1); without it, 0. Not with partial pages,
  // in-batch prefix sharing or lower tiers.
  int state_snapshots = 0;
  // In-batch prefix sharing (SGLang's in-batch prefix caching; cache.in_batch_prefix_tokens): a
  // waiting prompt that shares at least this many tokens past its cached match (whole pages) with
  // a running sequence that has yet to compute them waits for it, to the end of the pages they
  // share, then takes them from the cache; other waiting requests are admitted meanwhile. 0 = off.
  // With the prefix cache only.
  int in_batch_prefix_tokens = 0;
  EvictionPolicy eviction = EvictionPolicy::lru;
  bool lower_tiers = false;     // HiCache tiers below the device: ask them for uncached prefixes
  bool save_on_insert = true;   // with lower tiers: write-through (a page is saved when it enters
                                // the device cache) or write-back (saved when evicted from it)
  // Load or recompute (DESIGN.md §5): a prefix is loaded from the lower tiers when loading its
  // pages is estimated cheaper than recomputing their tokens. 0 = unknown, and then it loads.
  double tier_load_us_per_page = 0;
  double prefill_us_per_token = 0;
  SpeculativeLimits spec;
  PdRole role = PdRole::both;  // PD separation (brigade/topology.h)
  // Images (policy_images.cpp): a run of image_token ids in a prompt is one image of the request:
  // tokens_per_image of them for fixed-size images of [3, image_size, image_size] f32 pixels
  // (Gemma 3); (grid_h / image_merge) * (grid_w / image_merge) for dynamic-resolution images of
  // [grid_h * grid_w, image_patch_width] f32 patch rows (the Qwen2-VL family, whose M-RoPE
  // positions SeqWorkItem::rope_delta carries). Neither set = the model takes text only.
  // Mistral 3's Pixtral (image_break_token set): dynamic images laid out in rows, each row's
  // (grid_w / image_merge) image tokens then image_break_token, the last break image_end_token,
  // so (grid_h / image_merge) * (grid_w / image_merge + 1) tokens; plain 1D positions (no M-RoPE).
  int32_t image_token = -1;
  int tokens_per_image = 0;
  int image_size = 0;
  int image_merge = 0;
  int64_t image_patch_width = 0;
  int max_image_patches = 0;  // dynamic: the tower's bound on grid_h * grid_w (0 = none)
  int32_t image_break_token = -1;
  int32_t image_end_token = -1;
  // LLaVA: dynamic images of exactly image_grid x image_grid patches (merge 1), whose runs hold
  // the grid's tokens plus image_extra_tokens (the class row kept, or a patch dropped), at plain
  // 1D positions (no M-RoPE).
  int image_grid = 0;
  int image_extra_tokens = 0;
  // LLaVA-NeXT (image_anyres.on(), with image_merge 1 and no image_grid): an image's grid is its
  // height x width in pixels, its pixels its base tile and tiles ([1 + tiles, 3, tile, tile]), its
  // run anyres_tokens (models/anyres.h); plain 1D positions.
  AnyresGrid image_anyres;
  // Gemma 4: dynamic images at plain 1D positions (image_1d), whose tokens attend to one another
  // under use_bidirectional_attention "vision" (image_whole: each runs whole in one step).
  bool image_1d = false;
  bool image_whole = false;
  // InternVL: dynamic images (with image_1d) that are columns of tiles of image_tile x image_tile
  // patches: grid_w = image_tile, grid_h a whole number of tiles.
  int image_tile = 0;
  // PaliGemma (ModelConfig::prefix_lm): a prompt attends to all of itself, so it runs whole in one
  // step from position 0: at most max_step_tokens tokens, refused at submission beyond; never a
  // prefix-cache match or a lower-tier load (computes_whole_prompt), and its pages are not
  // inserted into the prefix cache (their KV is not what their tokens alone would give); a
  // recomputed sequence's first chunk ends at its prompt's end (the model takes a sequence's rows
  // from position 0 as its whole prompt). A prompt that found no room beside the decodes goes
  // before them in the next step.
  bool prompt_whole = false;
  // > 0 (the instance sets PaliGemma 2's sliding window): a whole prompt longer than this runs
  // alone in its step. A prompt row sees the whole prompt on the sliding layers too (the prompt's
  // block overrides the window), which the model computes by running a step with such a prompt
  // without the window; no other row of the step may then need it.
  int prompt_alone_beyond = 0;
  bool takes_images() const { return tokens_per_image > 0 || image_merge > 0; }
  bool image_rows() const { return image_break_token >= 0; }
  bool image_mrope() const {
    return image_merge > 0 && !image_rows() && image_grid == 0 && !image_1d && !image_anyres.on();
  }
  // Dynamic images attend causally (the Qwen2-VL family, Pixtral), so chunked prefill may cut one over
  // several steps (the model keeps its features between them); Gemma 3's attend to one another
  // within the image, so each runs whole in one step (at most max_step_tokens tokens).
  bool images_split() const { return image_merge > 0 && !image_whole; }
  Status validate() const;
};

enum class Finish : uint8_t { none, stop, length, abort, error };
const char* finish_name(Finish f);

struct SeqRequest {
  uint64_t id = 0;
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  SamplingConfig sampling;
  int logprobs = -1;                 // -1 none; else the sampled token's logprob (+ top k)
  int prompt_logprobs = -1;          // -1 none; else each prompt token's logprob (+ top k), sent
                                     // with the first event; max_tokens may then be 0
  std::vector<int32_t> stop_ids;     // stops besides eos (unless ignore_eos)
  std::vector<int32_t> eos_ids;
  bool ignore_eos = false;
  int priority = 0;                  // higher first
  Pooling pooling = Pooling::none;   // not none: an embedding request (max_tokens 0; above)
  uint32_t lora = 0;                 // LoRA adapter id (0 = base); keys its prefix-cache pages
  std::string cache_salt;            // non-empty: keys its prefix-cache pages (cache_key)
  // The prompt's images, in the order of their runs of image tokens (SchedulerLimits): pixels and
  // grid as models/model.h StepImage takes them (positions unset).
  std::vector<SeqImage> images;
  // Requests sent together (GenerateRequest.admitGroup, a beam search's step): none of the
  // admit_group_size is admitted before all have been added, or release_group() says to stop
  // waiting. 0: on its own.
  uint64_t admit_group = 0;
  int admit_group_size = 0;
};

// Where the policy gets pages and gives them back (the scheduler's lease on the KV pool).
class PageSource {
 public:
  virtual ~PageSource() = default;
  virtual int n_available() const = 0;
  // Exactly n pages, or nullopt (nothing taken).
  virtual std::optional<std::vector<int32_t>> take(int n) = 0;
  virtual void give_back(std::span<const int32_t> pages) = 0;
  // Pages not in hand that asking would get (the KV page manager's free pages): while there are
  // enough, a sequence short of pages waits for them instead of preempting another.
  virtual int n_obtainable() const { return 0; }
};

// Pages to fill from a lower cache tier before a sequence can run (sent as kv_load).
struct KvLoadRequest {
  uint64_t seq_id = 0;
  std::vector<PageKey> keys;    // the hash chain of the pages wanted, in order
  std::vector<int32_t> pages;   // device pages to write them into, one per key
};

// PD separation. A sequence whose KV pages must be read for a hand-off (prefill side; pages
// cover [0, n_kv_tokens)), or written from one before it can decode (decode side).
struct KvPagesRequest {
  uint64_t seq_id = 0;
  std::vector<int32_t> pages;
};

// A prefilled sequence moving between instances: the request, the tokens it generated (the
// prefill side's first token) and how many leading positions have KV (prompt + generated - 1).
struct TransferredSeq {
  SeqRequest req;
  std::vector<int32_t> generated;
  int n_kv_tokens = 0;
};

struct PrefixCacheStats {
  uint64_t lookups = 0;         // admissions that consulted the cache
  uint64_t lookup_tokens = 0;   // the tokens those admissions looked up (prompt, or prompt +
                                // generated for a preempted sequence)
  uint64_t hit_tokens = 0;      // prompt tokens served from the device tier (prefill saved)
  uint64_t partial_hit_tokens = 0;  // of those, the rows copied from partly used pages
  uint64_t in_batch_waits = 0;  // admissions that waited for a running sequence to prefill a prefix they
                                // share (SchedulerLimits::in_batch_prefix_tokens), counted once each
  uint64_t loaded_tokens = 0;   // prompt tokens loaded from the lower tiers
  uint64_t evicted_pages = 0;
  // Recurrent models' state snapshots (SchedulerLimits::state_snapshots): saved by steps, the
  // sequences that started from one (counted when that step came back), and how many the tree
  // holds now.
  uint64_t state_saves = 0;
  uint64_t state_restores = 0;
  int state_snapshots = 0;
  int cached_pages = 0;         // pages the tree holds now
  int idle_pages = 0;           // of those, the ones no sequence uses (eviction could take them)
};

// Speculative decoding counters (EngineStats spec_*, /metrics brigade_spec_*).
struct SpecStats {
  uint64_t draft_tokens = 0;             // drafts sent for verification
  uint64_t accepted_tokens = 0;          // drafts the target accepted
  uint64_t verify_seqs = 0;              // (sequence, step) pairs that verified drafts
  uint64_t misses = 0;                   // drafting attempts where the drafter proposed nothing
  uint64_t off_compute_bound_steps = 0;  // steps planned without drafts: the last step was compute-bound
  uint64_t off_batch_steps = 0;          // ... more decoding sequences than disable_batch_size
  uint64_t seqs_turned_off = 0;          // times a sequence's acceptance fell below min_acceptance
  DrafterStats drafter;                  // what a draft model spent (Drafter::stats)
};

// What the scheduler tells a client after a step (mirrors schema::TokenEvent).
struct SeqEvent {
  uint64_t seq_id = 0;
  std::vector<int32_t> new_tokens;
  std::vector<float> logprobs;  // one per new token when asked
  Finish finish = Finish::none;
  std::string error;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  StatusCode error_code = StatusCode::ok;
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;  // per new token, when asked
  // SeqRequest::prompt_logprobs >= 0, in the request's first event only (the one with its first
  // token, or its final event): one entry per prompt token, the first with rank 0 (no logprob).
  std::vector<TokenLogprobEntry> prompt_logprobs;
  int cached_tokens = 0;  // prompt tokens the prefix cache (or a lower tier) served at admission
  std::vector<float> embedding;  // a pooling request's final event: the pooled vector (raw)
};

class SchedulerPolicy {
 public:
  // pool_pages: pages in the whole KV pool (what one sequence could ever hold). cache_root: the
  // hash-chain root naming this model's pages (see kvstore/page_key.h), used by the prefix cache.
  // drafter: who proposes drafts when limits.spec.num_tokens > 0 (a draft model, shared with
  // whoever reads its counters; called on this policy's thread only); null: the n-gram drafter.
  SchedulerPolicy(const SchedulerLimits& limits, int pool_pages, PageKey cache_root = {},
                  std::shared_ptr<Drafter> drafter = nullptr);

  // Queues a request. Errors (nothing queued): invalid prompt or parameters, a duplicate id,
  // queue full (out_of_resources), a prompt that does not fit the context or the KV pool.
  Status add(SeqRequest request);
  // Ends a request: a waiting one at once; a running one when no step using it is in flight.
  // Returns the events to send now (possibly none). Unknown ids are ignored.
  std::vector<SeqEvent> abort(uint64_t id, PageSource& pages);

  // LoRA adapters (policy_lora.cpp; docs/architecture.md "LoRA adapters"). The adapter in `slot`
  // (1-based: a request's lora id) is named by `identity` (what its files hold): its prompts'
  // hash chains start from a key of the model's root and that identity, so pages computed under
  // one adapter never reach another through the lower tiers. Empty: the model's root.
  void set_lora_identity(int slot, const std::string& identity);
  // Drops the prefix cache's pages of the adapter in `slot` (unloaded, or about to take another
  // adapter) and forgets its identity. out_of_resources, changing nothing, while a request of the
  // slot is still queued or running here; out_of_resources too when a cached prefix of it is still
  // locked (those stay).
  Status drop_lora(int slot, PageSource& pages);

  // A cache reset: drops every cached prefix no sequence uses (RadixTree::clear_unlocked) and
  // gives its pages to `pages`, with the write-back saves still queued (those pages are gone).
  // Returns {pages freed, cached pages kept because running sequences share them}.
  std::pair<int, int> reset_cache(PageSource& pages);

  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  int n_waiting() const { return static_cast<int>(waiting_.size()); }
  int n_running() const { return static_cast<int>(running_.size()); }
  int n_inflight() const { return static_cast<int>(inflight_.size()); }
  uint64_t n_preemptions() const { return n_preemptions_; }
  // Pages held by running sequences and not by the prefix cache, plus the cache's pages.
  int n_pages_held() const;
  PrefixCacheStats cache_stats() const;
  SpecStats spec_stats() const;
  // The roofline verdict of the step that came back last (StepReport::compute_bound; false when
  // the ceilings are unknown): while compute-bound, steps are planned without drafts.
  void note_step_bound(bool compute_bound) { last_step_compute_bound_ = compute_bound; }
  // Leading tokens of `tokens` whose pages the device cache holds (0 without a cache; for a
  // recurrent model, up to the last with a state snapshot); does not count as a use for eviction.
  int cached_prefix(std::span<const int32_t> tokens);
  // Pages the head of the waiting queue needs beyond what `pages` has now (0 when it fits or
  // nothing can be admitted): what the scheduler asks its KV page manager for.
  int pages_short(const PageSource& pages) const;

  // Plans the next step; nullopt when nothing can run now. The step is in flight until
  // complete() or fail() is called with its id; steps complete in the order they were planned
  // (failures may come in any order: a dead executor bounces later steps first).
  std::optional<PlannedStep> plan(PageSource& pages);
  // Applies a finished step: appends sampled tokens, ends sequences that are done (their
  // pages go back to `pages` once no step in flight uses them). One event per sequence that
  // sampled or ended.
  // prompt_logprobs: the step's PromptLogprobRuns (a run the plan did not ask for, or one of the
  // wrong positions, ends its sequence with an error).
  // embeddings: the pooled vectors of pooling sequences whose prompt ended in the step (a
  // missing or unasked one ends its sequence with an error).
  std::vector<SeqEvent> complete(uint64_t step_id, std::span<const SampledResult> sampled, PageSource& pages,
                                 std::span<const PromptLogprobRun> prompt_logprobs = {},
                                 std::span<const PooledEmbedding> embeddings = {},
                                 std::span<const SeqDrafts> drafts = {});
  // A step failed as a whole: every sequence in it ends with `error`.
  std::vector<SeqEvent> fail(uint64_t step_id, const std::string& error, PageSource& pages);

  // Admit groups (SeqRequest::admit_group): the groups whose first member add() queued since the
  // last call; the caller gives each a deadline, then calls release_group(): whatever of it
  // arrived may be admitted without the rest (a member refused upstream, or late). The head of
  // the queue waits for its group: admission stops there (nothing overtakes), decodes go on.
  std::vector<uint64_t> take_opened_groups() { return std::exchange(opened_groups_, {}); }
  void release_group(uint64_t group);
  int n_forming_groups() const;  // groups still waiting for members

  // Lower-tier loads to send (each sequence at most once per admission), and pages to save to the
  // lower tiers with their keys: pages entering the device cache (write-through) or evicted from
  // it (write-back). The caller sends the saves before the next plan, which may reuse the pages.
  std::vector<KvLoadRequest> take_loads();
  std::vector<RadixTree::Evicted> take_saves();
  // A load finished: the first n_loaded pages arrived; the sequence computes the rest. Events
  // when the sequence ended meanwhile (abort).
  std::vector<SeqEvent> loaded(uint64_t seq_id, int n_loaded, PageSource& pages);
  // ---- PD separation (policy_pd.cpp) ----
  // Decode side: queues a sequence prefilled elsewhere. Errors (nothing queued): inconsistent
  // state (no generated token, a KV length other than its tokens - 1, ids outside the
  // vocabulary), a duplicate id, more tokens than the context or the pool holds. Unlike add(),
  // a full waiting queue does not refuse it (that would throw its prefill away).
  Status add_transferred(TransferredSeq seq);
  // Admitted transferred sequences whose pages must be written (each once); the caller sends
  // each with its bytes and reports imported().
  std::vector<KvPagesRequest> take_imports();
  // The bytes arrived (ok) or not (then the sequence recomputes its tokens here). Events when it
  // ended meanwhile (abort).
  std::vector<SeqEvent> imported(uint64_t seq_id, bool ok, PageSource& pages);
  // Prefill side: sequences whose first token is sampled and whose pages must be read (each
  // once); the caller reports exported().
  std::vector<KvPagesRequest> take_exports();
  // The pages were read (ok) or not (the sequence ends with `error`). On success the sequence
  // leaves this instance without a final event (its decode instance sends it) and its state is
  // returned for the hand-off; nullopt when it ended meanwhile (abort, error: `events` has its
  // final event). Its pages go back to `pages` or to the prefix cache.
  std::optional<TransferredSeq> exported(uint64_t seq_id, bool ok, const std::string& error, PageSource& pages,
                                         std::vector<SeqEvent>& events);
  PdRole role() const { return limits_.role; }

  // Measured costs for the load-or-recompute choice (0 = unknown, which loads).
  void set_costs(double tier_load_us_per_page, double prefill_us_per_token) {
    limits_.tier_load_us_per_page = tier_load_us_per_page;
    limits_.prefill_us_per_token = prefill_us_per_token;
  }

 private:
  struct Seq {
    SeqRequest req;
    std::vector<int32_t> tokens;  // prompt + generated, as far as seen
    int n_computed = 0;           // positions whose KV came back
    int n_scheduled = 0;          // positions sent to the executor (>= n_computed)
    int n_generated = 0;          // generated tokens seen
    int n_pending = 0;            // samples expected from steps in flight
    int n_inflight = 0;           // steps in flight that include this sequence
    int max_context = 0;          // the model's context, or the pool's capacity if smaller
    BlockTable blocks;
    Finish ended = Finish::none;  // why it ends; it stays until no step in flight uses it
    bool final_sent = false;      // its last event went out
    std::string error;
    uint64_t arrival = 0;
    RadixTree::NodeRef cache_node = nullptr;  // locked while the sequence uses cached pages
    // A partly matched cached page whose leading rows admission gave the sequence: held in the
    // tree until the step that copies them into the sequence's page copy_dst comes back.
    RadixTree::Partial copy_src;
    int32_t copy_dst = -1;                    // -1: nothing to copy
    bool copy_planned = false;                // a work item carries the copy
    std::vector<bool> tree_owned;             // per block page: the prefix cache owns it
    int n_cache_checked = 0;                  // leading pages already offered to the cache
    bool send_history = false;                // next work item carries tokens [0, start) for penalties
    bool loading = false;                     // waiting for a lower-tier load
    int n_load_pages = 0;
    // Prompt tokens served from the prefix cache and the lower tiers at the first admission
    // (a preempted sequence re-admitted over its own pages does not count them again).
    int n_cached = 0;
    bool was_preempted = false;
    bool waited_for_prefill = false;  // counted in PrefixCacheStats::in_batch_waits
    bool deferred = false;            // its last admission attempt waited for a prefill (admit_at)
    // A chunk it must run whole (an image, or a prompt_whole prompt) found no room in the last
    // step's budget: the next step plans it before the decodes (plan_waiting_whole).
    bool waits_for_room = false;
    bool drafting = false;     // a step verifying its drafts is in flight: until it returns, its
                               // length is unknown and it is not planned again
    double spec_rate = 1.0;    // EWMA of the fraction of drafts accepted per drafting attempt
    int spec_off_until = 0;    // no drafts before n_generated reaches this (acceptance too low)
    int n_import_tokens = 0;   // PD decode side: positions whose KV arrives from a prefill
                               // instance at admission (0: none, or already arrived)
    bool exporting = false;    // PD prefill side: its pages are being read for the hand-off
    int prompt_lp_next = 1;    // prompt logprobs: the next prompt position to score
    std::vector<TokenLogprobEntry> prompt_lps;  // scored so far (positions 1..prompt_lp_next-1)
    bool prompt_lps_sent = false;
    std::vector<float> embedding;  // pooling: the pooled vector, once the prompt has run
    std::vector<SeqImage> images;        // the prompt's images at their positions (find_images)
    std::vector<uint64_t> image_hashes;  // XXH3 of each image's pixels: their prefix-cache keys
    std::vector<int32_t> image_tokens;   // each image's token count
    // Recurrent models (policy_states.cpp): the snapshot admission starts it from (pinned until
    // its first item carries it), its saves not yet in the tree, and its latest decode
    // snapshot in the tree (only that one stays there while it runs).
    int state_from = -1;
    struct StateSave {
      int snap = -1;
      int n_tokens = 0;  // the state after this many positions (a page boundary)
      bool done = false;  // its step came back
      bool decode = false;
    };
    std::vector<StateSave> state_saves;
    int decode_snap = -1;
    int32_t decode_snap_page = -1;
    // Where its prompt leaves the deepest cached path it shares (whole pages) when no snapshot
    // ends there: its prefill saves one at that boundary, so later prompts sharing that prefix (a
    // system prompt) start from it. 0: none.
    int branch_save = 0;
  };
  struct StepEntry {
    uint64_t seq_id;
    int n_tokens;
    bool sample;
    int n_draft = 0;  // drafts among the tokens (the sequence's last token comes first)
    int start = 0;    // the work item's start position
    int prompt_lp_first = 0, prompt_lp_last = -1;  // prompt positions the item scores (none: first > last)
    bool pools = false;  // a pooling chunk that ends the prompt: its embedding comes back
    bool copies = false;  // the item copies the sequence's partial match (Seq::copy_src)
    int state_save = -1;  // the snapshot the item saves into (Seq::state_saves)
    bool restores = false;  // the item starts from a snapshot (counted when the step comes back)
  };

  void enqueue(Seq s);
  bool admit_next(PageSource& pages);
  // Admits waiting_[i] (false: it waits for pages, its group, or, `deferred`, a running prefill).
  bool admit_at(size_t i, PageSource& pages);
  Seq make_seq(SeqRequest request);
  // PD: admission of a transferred sequence (its pages are written, not matched or computed),
  // and the start of a prefill sequence's hand-off once its first token is in.
  void admit_import(Seq& s);
  void start_export(Seq& s);
  bool ensure_pages(Seq& s, int n_positions, PageSource& pages);
  bool preempt_one(uint64_t except, PageSource& pages);
  std::optional<std::vector<int32_t>> take_pages(int n, PageSource& pages);
  // Tails the insert makes redundant go back to `pages`.
  void cache_computed(Seq& s, PageSource& pages, bool save = true);
  // Offers the sequence's partly computed last page to the cache as a tail (partial_pages); when
  // the tree takes it, it is the tree's to free. Pages the tree lets go are appended to freed.
  void cache_tail(Seq& s, std::vector<int32_t>& freed);
  // Admission: the leading rows of a cached page that continue the match m (partial_pages);
  // held, and the sequence's first step copies them.
  void match_partial_page(Seq& s, const RadixTree::Match& m, std::span<const int32_t> key, int limit);
  // The copy is done (its step came back) or will never run: the source page is let go.
  void drop_copy(Seq& s);
  // Positions whose KV is in the sequence's pages and whose tokens it knows.
  static int n_kv_valid(const Seq& s) { return std::min(s.n_computed, static_cast<int>(s.tokens.size())); }
  void retire_pages(Seq& s, PageSource& pages, bool cache_them);
  void add_work(Seq& s, int n_tokens, PlannedStep& step, std::vector<StepEntry>& entries,
                std::span<const int32_t> drafts = {});
  void plan_decodes(PlannedStep& step, std::vector<StepEntry>& entries, int& budget, PageSource& pages);
  // Appends a step's tokens for s up to the first that ends it; one event. Returns how many.
  int append_tokens(Seq& s, std::span<const SampledResult* const> got, std::vector<SeqEvent>& events);

  // ---- speculative decoding (policy_spec.cpp) ----
  static constexpr int kSpecCooldownTokens = 64;
  // Whether this step may carry drafts (the load rule), counting why not.
  bool drafting_this_step();
  // The load rule itself (drafting_this_step counts the steps it turns drafts off).
  enum class DraftRule { on, no_drafter, compute_bound, batch };
  DraftRule draft_rule() const;
  DraftRule step_rule_ = DraftRule::no_drafter;  // draft_rule() for the step plan() is building
  bool spec_active(const Seq& s) const { return drafter_ && s.n_generated >= s.spec_off_until; }
  // Drafts for the decodes of running sequences `ids` (in plan order) within the step's budget,
  // max_tokens and the context; sequences without drafts are absent.
  std::map<uint64_t, std::vector<int32_t>> propose_drafts(const std::vector<uint64_t>& ids, int budget);
  bool take_draft_pages(Seq& s, int n_draft, PageSource& pages);
  void note_acceptance(Seq& s, double fraction);
  void complete_drafts(Seq& s, const StepEntry& e, const std::vector<const SampledResult*>* got,
                       std::vector<SeqEvent>& events, PageSource& pages);
  // ---- images (policy_images.cpp) ----
  // Fills s.images from the prompt's runs of image tokens and s.req.images; invalid_argument when
  // they disagree (a run of another length, another count) or an image that must run in one
  // step (!images_split) cannot, unsupported for images to a text model.
  Status find_images(Seq& s) const;
  // A chunk of s from n_scheduled of at most n tokens; unless images_split, cut so that no image
  // is split: it ends before an image it would split (0 when it starts at one that does not fit: the sequence waits
  // for a step with room for it).
  // With prompt_whole: the rest of the prompt (its end at most, or 0 to wait) while the prompt is
  // not yet scheduled.
  int chunk_within_images(const Seq& s, int n) const;
  // A chunk of n tokens that must be the only item of its step (prompt_alone_beyond).
  bool runs_alone(const Seq& s, int n) const;
  // Plans, before the decodes, the chunks that must run whole and found no room last step
  // (Seq::waits_for_room), so that a steady load of decodes cannot keep them waiting.
  void plan_waiting_whole(PlannedStep& step, std::vector<StepEntry>& entries, int& budget, PageSource& pages);
  // Plans s's chunk of n tokens unless n is 0, it runs alone in a step that already holds others,
  // or its pages cannot be had; one that runs alone closes the step (budget 0). Whether it did.
  bool plan_chunk(Seq& s, int n, PlannedStep& step, std::vector<StepEntry>& entries, int& budget, PageSource& pages);
  // The longest prefix of at most n tokens that does not end inside an image (a prefix-cache
  // match is cut back to it, so the image's rows are computed together); n when images_split.
  int image_safe_prefix(const Seq& s, int n) const;
  // The item's images (those whose tokens its chunk holds, in part when images_split) and its
  // rope_delta (M-RoPE: the images wholly before the chunk).
  void plan_images(const Seq& s, SeqWorkItem& w) const;
  // An image's token count (its grid's, or tokens_per_image).
  int image_token_count(const SeqImage& im) const;
  // Replaces the image tokens of a prefix-cache key with keys from each image's hash.
  void key_images(const Seq& s, std::vector<int32_t>& key) const;
  // ---- recurrent models' state snapshots (policy_states.cpp) ----
  bool keeps_states() const { return cache_ && limits_.state_snapshots > 0; }
  // The pages of m's longest prefix whose last page has a snapshot (what a recurrent model can use).
  int state_prefix_pages(const RadixTree::Match& m) const;
  // Admission: m cut back to its longest prefix whose last page has a snapshot; s starts from it.
  void match_state(Seq& s, RadixTree::Match& m, std::span<const int32_t> key);
  // Undoes match_state's pin when the admission does not happen or the item never runs.
  void unpin_state(Seq& s);
  // The item's restore and save (add_work).
  void plan_states(Seq& s, SeqWorkItem& w, StepEntry& e, int n_tokens);
  // A free snapshot slot, or the least recently used unpinned one in the tree; -1 when none.
  int take_snapshot();
  void free_snapshot(int snap);
  // After cache_computed's insert: s's done saves whose pages are in the tree join it.
  void attach_states(Seq& s);
  // The step that carried s's save into snap came back (done) or failed (dropped).
  void finish_save(Seq& s, int snap, bool done);
  // A sequence leaves (retire_pages): its saves that did not join the tree are freed.
  void drop_states(Seq& s);
  // Pages the tree let go take their snapshots with them.
  void forget_states(std::span<const RadixTree::Evicted> gone);
  struct Snapshot {
    int32_t page = -1;    // the tree page it ends (-1: not in the tree)
    bool used = false;    // saved, or being saved, by a sequence
    int pins = 0;         // admitted sequences whose first item restores from it
    uint64_t last_use = 0;
  };
  std::vector<Snapshot> snaps_;
  std::vector<int> free_snaps_;
  std::unordered_map<int32_t, int> snap_of_page_;
  uint64_t snap_clock_ = 0;

  // ---- LoRA adapters (policy_lora.cpp) ----
  // The tokens the prefix cache keys s by: s.tokens for the base model; a copy in `buf` with the
  // first token salted by the adapter under a LoRA adapter, so no adapter shares pages with
  // another or with the base (the same tokens give other K/V under an adapter).
  std::span<const int32_t> cache_key(const Seq& s, std::vector<int32_t>& buf) const;
  // The cache salt's part of the key: positions [1, kSaltedPositions] remapped by the salt.
  static constexpr size_t kSaltedPositions = 31;
  void salt_key(const std::string& salt, std::vector<int32_t>& key) const;
  // The adapter slot a salted first token names (0 for a real token id).
  int lora_slot_of(int32_t first_token) const;
  // ---- prompt logprobs (policy_prompt_logprobs.cpp) ----
  bool needs_prompt_logprobs(const Seq& s) const;
  // The most leading tokens admission may take from the prefix cache.
  int cache_match_limit(const Seq& s) const;
  // In-batch prefix sharing: whether waiting sequence s, whose cache key is `key`, `matched` tokens
  // of it cached and at most `limit` takeable, should wait for a running sequence that has yet to
  // compute whole pages the two keys begin with: at least SchedulerLimits::in_batch_prefix_tokens
  // past the match, or, once s waits, any.
  bool waits_for_prefill(const Seq& s, std::span<const int32_t> key, int matched, int limit) const;
  // Asks the work item to score the prompt positions of its chunk not scored yet.
  void plan_prompt_logprobs(const Seq& s, SeqWorkItem& w, StepEntry& e) const;
  // Takes the item's run; false (with s.error set) when it is not what the plan asked for.
  bool take_prompt_logprobs(Seq& s, const StepEntry& e, std::span<const PromptLogprobRun> runs);
  // Moves the whole prompt's logprobs into the request's first event (once, when complete).
  void attach_prompt_logprobs(Seq& s, SeqEvent& ev);
  // ---- pooling (policy_pooling.cpp) ----
  // Every prompt position must be computed here, none served by the cache or a lower tier:
  // mean / cls pooling (every position's hidden state is needed) and prompt_whole (every
  // position's KV depends on the whole prompt).
  bool computes_whole_prompt(const Seq& s) const;
  void plan_pooling(const Seq& s, SeqWorkItem& w, StepEntry& e) const;
  // Takes the item's embedding; false (with s.error set) when it is missing or unasked.
  bool take_embedding(Seq& s, const StepEntry& e, std::span<const PooledEmbedding> embeddings);
  bool wants_decode(const Seq& s) const;
  bool wants_chunk(const Seq& s) const;
  Finish finish_of(const Seq& s) const;
  SeqEvent final_event(Seq& s);
  void release(Seq& s, PageSource& pages);
  void drop_if_drained(uint64_t id, PageSource& pages, std::vector<SeqEvent>& events);

  SchedulerLimits limits_;
  int pool_pages_;
  std::deque<Seq> waiting_;               // sorted by (priority desc, arrival asc)
  std::map<uint64_t, Seq> running_;       // ordered by id: a stable plan order
  std::map<uint64_t, std::vector<StepEntry>> inflight_;
  std::vector<uint64_t> released_;
  std::vector<uint64_t> admitted_now_;  // admitted by the plan() under way
  uint64_t next_step_ = 1;
  uint64_t next_arrival_ = 0;
  uint64_t n_preemptions_ = 0;
  int pages_wanted_ = 0;
  uint64_t n_load_skips_ = 0;  // pages a sequence of the last plan waited for (to lease)
  std::unique_ptr<RadixTree> cache_;
  PageKey cache_root_;
  std::vector<PageKey> lora_roots_;  // [slot - 1]: the chain root of the adapter's prompts
  std::vector<bool> lora_rooted_;    // whether set_lora_identity gave the slot one
  PrefixCacheStats cache_stats_;
  std::vector<KvLoadRequest> loads_;
  std::vector<RadixTree::Evicted> saves_;
  struct AdmitGroup {
    int arrived = 0;
    int size = 0;
    bool released = false;  // its deadline passed: its members no longer wait
  };
  std::map<uint64_t, AdmitGroup> groups_;  // groups not all of whose members arrived
  std::deque<uint64_t> released_groups_;   // released and still incomplete, oldest first (bounded)
  std::vector<uint64_t> opened_groups_;
  // Whether s must wait for the rest of its admit group.
  bool waits_for_group(const Seq& s) const;
  void note_group_arrival(const SeqRequest& r);
  std::vector<KvPagesRequest> imports_;  // PD
  std::vector<KvPagesRequest> exports_;
  std::shared_ptr<Drafter> drafter_;  // null: speculation off
  SpecStats spec_stats_;
  bool last_step_compute_bound_ = false;
};

}  // namespace brigade
