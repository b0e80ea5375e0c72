// Engine: builds the actor topology (frontend → tokenizer → [router →] one scheduler, executor
// and KV page manager per instance) from a TopologyConfig and serves the embedding API.
#include "brigade/engine.h"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <unistd.h>

#include "actors/engine/beam_search_run.h"
#include "actors/engine/engine_embed.h"
#include "actors/engine/engine_testing.h"
#include "actors/engine/instance.h"
#include "actors/engine/instance_stats.h"
#include "actors/engine/lora_slots.h"
#include "actors/engine/wait_for_answer.h"
#include "actors/frontend/frontend_actor.h"
#include "actors/node/front_hello.h"
#include "actors/node/node_actor.h"
#include "actors/node/node_auth.h"
#include "actors/node/node_watch.h"
#include "actors/router/router_actor.h"
#include "actors/station/station_actor.h"
#include "actors/step_codec.h"
#include "models/gemma4_image_processor.h"
#include "models/image_processor.h"
#include "models/tokenizer.h"
#include "models/aya_vision_config.h"
#include "models/idefics3_config.h"
#include "models/idefics3_image_processor.h"
#include "models/internvl_image_processor.h"
#include "models/llava_next_image_processor.h"
#include "models/pixtral_image_processor.h"
#include "models/qwen_image_processor.h"
#include "models/qwen_vision.h"
#include "models/truncation.h"
#include "actors/tokenizer/tokenizer_actor.h"
#include "core/json_schema.h"
#include "core/token_trie.h"
#include "core/logging.h"
#include "core/grammar.h"
#include "core/regex_dfa.h"
#include "messages/blob.h"
#include "messages/convert.h"
#include "messages/registry.h"
#include "models/chat_template.h"
#include "models/chat_template_jinja.h"
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

// A model that cannot generate (a *ForSequenceClassification checkpoint, an encoder) refuses generation.
Status check_generates(const ModelSummary& m) {
  if (m.generates) return Status::ok();
  if (m.encoder)
    return unsupported("this model is an encoder (" + m.arch + "): it does not generate; it serves embeddings" +
                       (m.classifier ? std::string(", classify and score requests (/classify, /score, /rerank)")
                                     : std::string(" (/v1/embeddings, /score, /rerank)")));
  return unsupported("this model is a sequence classifier (" + (m.classifier ? m.classifier->architecture : m.arch) +
                     ") with no lm_head: it does not generate; it serves classify and score requests "
                     "(/classify, /score, /rerank; Engine::classify)");
}

namespace {

caf::actor_system_config& prepared_config(caf::actor_system_config& cfg, bool network) {
  register_message_types(cfg);
  register_node_types(cfg);
  if (network) cfg.load<caf::io::middleman>();
  // Work sharing wakes an idle worker through a condition variable as soon as a message
  // arrives; CAF's default work stealing polls and sleeps (50 us, then 10 ms) when idle, which
  // adds that much latency to every step whose result arrives while the workers doze.
  cfg.set("scheduler.policy", caf::atom("sharing"));
  return cfg;
}

// A schema, choice list, regex or grammar is compiled here, so that no executor ever sees one it cannot compile.
Status validate_output_format(const GenerateOptions& r, bool has_tokenizer) {
  static constexpr const char* kNames[] = {"text", "json_object", "json_schema", "guided_choice", "guided_regex", "guided_grammar"};
  if (r.response_format == ResponseFormat::text) return Status::ok();
  if (!has_tokenizer)
    return invalid_argument(std::string("response_format ") + kNames[static_cast<int>(r.response_format)] +
                            " needs the model's tokenizer (this model has none)");
  if (r.response_format == ResponseFormat::json_schema) return CompiledSchema::compile(r.json_schema).status();
  if (r.response_format == ResponseFormat::choice) return CompiledSchema::choice(r.guided_choice).status();
  if (r.response_format == ResponseFormat::regex) {
    if (r.regex.empty()) return invalid_argument("guided_regex is empty (give a pattern; '' would match only an empty output)");
    return CompiledRegex::compile(r.regex).status();
  }
  if (r.response_format == ResponseFormat::grammar) return CompiledGrammar::compile(r.grammar).status();
  return Status::ok();
}

// Every guided choice must be spelled by the vocabulary's tokens (special ones excluded): the mask
// would let the model start one it cannot finish, or allow nothing at all, and the output would
// end there, cut short or empty with `stop`. vLLM does not check this; here the request is
// refused instead, naming the choice.
Status validate_choices_spelled(const GenerateOptions& r, const TokenTrie* vocab) {
  if (r.response_format != ResponseFormat::choice || !vocab) return Status::ok();
  for (size_t i = 0; i < r.guided_choice.size(); ++i) {
    const std::string& c = r.guided_choice[i];
    if (!vocab->spells(c))
      return invalid_argument("guided_choice[" + std::to_string(i) + "] (\"" + c +
                              "\") cannot be produced: no sequence of this model's tokens spells it");
  }
  return Status::ok();
}

Status validate_reasoning_ids(const GenerateOptions& r, int vocab_size) {
  if (r.thinking_token_budget < -1)
    return invalid_argument("thinking_token_budget must be >= 0 (or -1 for none); got " +
                            std::to_string(r.thinking_token_budget));
  if (r.thinking_token_budget < 0 && !r.thinking_end_ids.empty())
    return invalid_argument("thinking_end_ids are forced only by a thinking_token_budget; this request has none");
  if (r.reasoning_end_id < 0 && r.reasoning_start_id < 0 && r.reasoning_header_ids.empty()) {
    if (r.thinking_token_budget >= 0)
      return invalid_argument("thinking_token_budget needs the reasoning block's reasoning_end_id (the token that "
                              "closes it)");
    return Status::ok();
  }
  if (r.response_format == ResponseFormat::text && r.thinking_token_budget < 0)
    return invalid_argument("reasoning_end_id/reasoning_start_id/reasoning_header_ids delay a response_format or "
                            "delimit a thinking_token_budget; this request has neither");
  if (r.reasoning_end_id < 0)
    return invalid_argument(std::string(r.reasoning_start_id >= 0 ? "reasoning_start_id" : "reasoning_header_ids") +
                            " needs a reasoning_end_id (the token that ends it)");
  if (r.reasoning_header_ids.size() > SamplingConfig::kMaxReasoningHeader)
    return invalid_argument("reasoning_header_ids holds " + std::to_string(r.reasoning_header_ids.size()) +
                            " ids; at most " + std::to_string(SamplingConfig::kMaxReasoningHeader));
  auto outside = [&](int32_t t) {
    return invalid_argument("reasoning token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                            std::to_string(vocab_size) + ")");
  };
  for (int32_t t : r.reasoning_header_ids)
    if (t < 0 || t >= vocab_size) return outside(t);
  for (int32_t t : {r.reasoning_end_id, r.reasoning_start_id})
    if (t >= vocab_size || t < -1) return outside(t);
  if (r.reasoning_start_id == r.reasoning_end_id)
    return invalid_argument("reasoning_start_id and reasoning_end_id are the same token");
  if (r.thinking_token_budget < 0) return Status::ok();
  if (!r.reasoning_header_ids.empty())
    return invalid_argument("thinking_token_budget cannot cap a block that reasoning_header_ids delimit (harmony's "
                            "channels)");
  if (r.thinking_end_ids.size() > SamplingConfig::kMaxThinkingEnd)
    return invalid_argument("thinking_end_ids holds " + std::to_string(r.thinking_end_ids.size()) + " ids; at most " +
                            std::to_string(SamplingConfig::kMaxThinkingEnd));
  for (int32_t t : r.thinking_end_ids)
    if (t < 0 || t >= vocab_size) return outside(t);
  if (!r.thinking_end_ids.empty() && r.thinking_end_ids.back() != r.reasoning_end_id)
    return invalid_argument("thinking_end_ids must end with reasoning_end_id (" + std::to_string(r.reasoning_end_id) +
                            "), the token that closes the block; got " + std::to_string(r.thinking_end_ids.back()) +
                            " last");
  return Status::ok();
}

Status validate_labels(const std::vector<std::pair<std::string, std::string>>& labels) {
  if (labels.size() > 16) return invalid_argument("at most 16 labels (got " + std::to_string(labels.size()) + ")");
  std::unordered_set<std::string> keys;
  for (const auto& [key, value] : labels) {
    if (key.empty() || key.size() > 64) return invalid_argument("a label key must be 1-64 bytes (got '" + key + "')");
    if (value.size() > 256) return invalid_argument("label '" + key + "' has a value over 256 bytes");
    if (!keys.insert(key).second) return invalid_argument("label '" + key + "' is given twice");
  }
  return Status::ok();
}

// A request's top-logprob count against the engine's limit (EngineOptions::max_logprobs).
Status check_logprobs(const char* field, int n, const ModelSummary& m) {
  if (n <= m.max_logprobs) return Status::ok();
  return invalid_argument(std::string(field) + " must be at most " + std::to_string(m.max_logprobs) + " (got " +
                          std::to_string(n) + "; the server's --max-logprobs)");
}

Status validate_request(const GenerateOptions& r, const ModelSummary& m) {
  BRIGADE_RETURN_IF_ERROR(check_generates(m));
  if (r.max_tokens < 1 && !(r.max_tokens == 0 && r.prompt_logprobs >= 0))
    return invalid_argument("max_tokens must be >= 1, or 0 with prompt_logprobs (got " + std::to_string(r.max_tokens) + ")");
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
  if (s.allowed_token_ids.size() > 4096)
    return invalid_argument("allowed_token_ids holds " + std::to_string(s.allowed_token_ids.size()) + " ids; at most 4096");
  std::unordered_set<int32_t> allowed;
  for (int32_t t : s.allowed_token_ids) {
    if (t < 0 || t >= m.vocab_size)
      return invalid_argument("allowed_token_ids: token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                              std::to_string(m.vocab_size) + ")");
    if (!allowed.insert(t).second) return invalid_argument("allowed_token_ids names token " + std::to_string(t) + " twice");
  }
  if (!s.bad_words.empty() && !m.has_tokenizer)
    return invalid_argument("bad_words needs the model's tokenizer; this model has none");
  if (s.bad_words.size() > 128)
    return invalid_argument("bad_words holds " + std::to_string(s.bad_words.size()) + " words; at most 128");
  for (const std::string& w : s.bad_words) {
    if (w.find_first_not_of(" \t\n\r\f\v") == std::string::npos) return invalid_argument("bad_words holds an empty word");
    if (w.size() > 1024) return invalid_argument("bad_words: a word of " + std::to_string(w.size()) + " bytes; at most 1024");
  }
  if (r.cache_salt.size() > 1024)
    return invalid_argument("cache_salt holds " + std::to_string(r.cache_salt.size()) + " bytes; at most 1024");
  if (r.truncate_prompt_tokens < 0)
    return invalid_argument("truncate_prompt_tokens must be >= 1, or 0 for none (got " +
                            std::to_string(r.truncate_prompt_tokens) + ")");
  if (r.truncate_prompt_tokens > 0 && !r.images.empty())
    return unsupported("truncate_prompt_tokens with images is not supported: a cut could split an image's tokens");
  BRIGADE_RETURN_IF_ERROR(check_logprobs("logprobs", r.logprobs, m));
  BRIGADE_RETURN_IF_ERROR(check_logprobs("prompt_logprobs", r.prompt_logprobs, m));
  if (r.prompt_ids.empty() && r.prompt.empty()) return invalid_argument("the prompt is empty: give text or token ids");
  BRIGADE_RETURN_IF_ERROR(validate_output_format(r, m.has_tokenizer));
  BRIGADE_RETURN_IF_ERROR(validate_reasoning_ids(r, m.vocab_size));
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
  return validate_labels(r.labels);
}

// At most this many ids end a beam (the model's EOS and the request's stop_ids): K = (1 + n) *
// beam_width candidates travel back per beam and step.
constexpr int kMaxBeamEndIds = 8;
constexpr int kMaxBeamWidth = 32;

// What BeamSearch::validate cannot see (max_tokens, length_penalty and the end ids it checks once
// the config is made).
Status validate_beam_request(const BeamSearchOptions& r, const ModelSummary& m) {
  BRIGADE_RETURN_IF_ERROR(check_generates(m));
  if (r.beam_width < 1 || r.beam_width > kMaxBeamWidth)
    return invalid_argument("the beam width must be in [1, " + std::to_string(kMaxBeamWidth) + "] (got " +
                            std::to_string(r.beam_width) + ")");
  BRIGADE_RETURN_IF_ERROR(check_logprobs("logprobs", r.logprobs, m));
  if (r.truncate_prompt_tokens < 0)
    return invalid_argument("truncate_prompt_tokens must be >= 1, or 0 for none (got " +
                            std::to_string(r.truncate_prompt_tokens) + ")");
  if (r.cache_salt.size() > 1024)
    return invalid_argument("cache_salt holds " + std::to_string(r.cache_salt.size()) + " bytes; at most 1024");
  if (r.prompt_ids.empty() && r.prompt.empty()) return invalid_argument("the prompt is empty: give text or token ids");
  if (r.prompt_ids.empty() && !m.has_tokenizer)
    return invalid_argument("this model has no tokenizer: send the prompt as token ids");
  for (int32_t t : r.prompt_ids)
    if (t < 0 || t >= m.vocab_size)
      return invalid_argument("prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                              std::to_string(m.vocab_size) + ")");
  for (int32_t t : r.stop_ids)
    if (t < 0 || t >= m.vocab_size) return invalid_argument("stop token id " + std::to_string(t) + " is outside the vocabulary");
  return validate_labels(r.labels);
}

// The ids that end a beam: the model's EOS (unless ignore_eos), then the stop ids, each once.
Expected<std::vector<int32_t>> beam_end_ids(const BeamSearchOptions& r, const ModelSummary& m) {
  std::vector<int32_t> ends;
  if (!r.ignore_eos) ends = m.eos_ids;
  for (int32_t t : r.stop_ids)
    if (std::find(ends.begin(), ends.end(), t) == ends.end()) ends.push_back(t);
  if (static_cast<int>(ends.size()) > kMaxBeamEndIds)
    return invalid_argument("a beam search takes at most " + std::to_string(kMaxBeamEndIds) +
                            " end ids, the model's EOS ids and stop_token_ids together (got " +
                            std::to_string(ends.size()) + ")");
  return ends;
}

// What the engine knows of each instance once it is loaded (local) or connected (remote), to
// check that the instances can serve together.
struct InstanceFacts {
  std::string name;
  PdRole role = PdRole::both;
  std::string arch;
  int vocab_size = 0;
  int max_position = 0;
  uint64_t n_params = 0;
  uint64_t weight_bytes = 0;
  size_t kv_page_bytes = 0;
  std::string kv_layout;
  int n_pages = 0;
  RooflineCeilings ceilings;
  bool remote_tokenizer = false;  // a node said its model has a tokenizer
};

InstanceFacts facts_of(const LoadedInstance& l) {
  const Model& m = *l.ranks.front()->model;
  return {l.name, l.setup.limits.role, m.config().arch, m.config().vocab_size, l.setup.limits.max_context,
          static_cast<uint64_t>(m.n_params()), static_cast<uint64_t>(m.weight_bytes()), l.kv_page_bytes, l.kv_layout,
          l.n_pages, l.ceilings};
}

InstanceFacts facts_of(schema::NodeInfo::Reader r) {
  return {r.getInstance(), *parse_pd_role(r.getRole()), r.getArch(), r.getVocabSize(), r.getMaxPosition(),
          r.getNParams(), r.getWeightBytes(), r.getKvPageBytes(), r.getKvLayout(), r.getNPages(),
          RooflineCeilings{r.getPeakBytesPerS(), r.getPeakFlopsPerS()}};
}

// The instances serve one model's requests: one vocabulary (the front validates and tokenizes
// for all of them). PD separation: a decode instance writes the prefill instance's page bytes as
// they are, so every PD instance's pages must have one layout (the topology checks page size and
// KV dtype; this checks the bytes the loaded models actually give, e.g. the same head sizes).
Status check_instances_agree(const std::vector<InstanceFacts>& facts) {
  const InstanceFacts& a = facts.front();
  const InstanceFacts* pd = nullptr;
  for (const auto& f : facts) {
    if (f.vocab_size != a.vocab_size || f.arch != a.arch)
      return invalid_argument("instances '" + a.name + "' and '" + f.name + "' run different models (" + a.arch + ", " +
                              std::to_string(a.vocab_size) + " ids vs " + f.arch + ", " +
                              std::to_string(f.vocab_size) + " ids): the instances of an engine serve one model");
    if (f.role == PdRole::both) continue;
    if (!pd) {
      pd = &f;
    } else if (f.kv_page_bytes != pd->kv_page_bytes || f.kv_layout != pd->kv_layout) {
      return invalid_argument("instances '" + pd->name + "' and '" + f.name + "' have KV pages of " +
                              std::to_string(pd->kv_page_bytes) + " and " + std::to_string(f.kv_page_bytes) +
                              " bytes (" + pd->kv_layout + " vs " + f.kv_layout +
                              "): prefill and decode instances need one model and KV layout (and one tp, "
                              "unless the cache is MLA's latent, which every rank holds whole)");
    }
  }
  return Status::ok();
}

bool has_remote(const TopologyConfig& t) {
  return std::any_of(t.instances.begin(), t.instances.end(), [](const InstanceConfig& i) { return !i.remote.empty(); });
}

// LoRA adapters load into the local executors (models/lora.h): a node's executor would not have them.
Status check_lora_options(const EngineOptions& o) {
  if (!o.lora_enabled()) return Status::ok();
  if (o.max_loras < 1 || o.max_lora_rank < 1)
    return invalid_argument("max_loras and max_lora_rank must be >= 1 (got " + std::to_string(o.max_loras) + ", " +
                            std::to_string(o.max_lora_rank) + ")");
  if (static_cast<int>(o.lora_modules.size()) > o.max_loras)
    return invalid_argument(std::to_string(o.lora_modules.size()) + " LoRA modules exceed max_loras " +
                            std::to_string(o.max_loras) + " (every adapter stays loaded; raise --max-loras)");
  if (has_remote(o.topology))
    return unsupported("LoRA adapters are served by in-process instances only; this topology has remote instances");
  return Status::ok();
}

class EngineImpl final : public Engine {
 public:
  // `network`: load CAF's middleman (remote instances); an engine of local instances opens no
  // socket and starts no I/O thread.
  explicit EngineImpl(bool network) : system_(prepared_config(cfg_, network)) {}
  using Engine::load_image;

  ~EngineImpl() override {
    // Running beam searches first: once abandoned, none submits or forgets anything more.
    for (const auto& run : beam_runs()) run->cancel("the engine is shutting down");
    // The router first: it must not mistake the instances stopping for failures. Remote nodes
    // are not told to exit: they outlive this front, and see it go through their monitor.
    if (router_) caf::anon_send_exit(router_, caf::exit_reason::user_shutdown);
    for (const auto& a : actors_) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    actors_.clear();
    // system_ waits for every actor, the detached executor included, in its destructor.
  }

  Status start(const EngineOptions& options);
  // Sets image_loader_ for the last local tower's family (start's `tower`, or null), or for the
  // tower summary_ describes; see image_loader_.
  Status set_image_loader(const std::string& path, const VisionConfig* tower, const EngineOptions& options);
  // Queues a validated request; pooling not none makes it an embedding request.
  // group: one of requests submitted together (a beam search's step; AdmitGroup).
  Expected<uint64_t> submit_as(const GenerateOptions& request, Pooling pooling, EventCallback on_event,
                               AdmitGroup group = {});

  // Sends `xs` to `dest` and waits up to `timeout` for its Reply; a CAF error (the timeout, a
  // dead actor, the receiver's own Status) comes back as a Status. Blocks the calling thread (a
  // client's, never an actor's).
  template <class Reply, class Handle, class... Ts>
  Expected<Reply> ask(const Handle& dest, caf::timespan timeout, Ts&&... xs) const {
    caf::scoped_actor self{*sys_};
    Expected<Reply> out = internal_error("no answer");
    self->request(dest, timeout, std::forward<Ts>(xs)...)
        .receive([&](const Reply& r) { out = r; }, [&](const caf::error& err) { out = to_status(err); });
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

  Expected<PrefixCacheReset> reset_prefix_cache(bool disk) override {
    PrefixCacheReset sum;
    std::string errors;
    auto fail = [&](const std::string& who, const std::string& what) {
      errors += (errors.empty() ? "" : "; ") + who + ": " + what;
    };
    const auto msg = cache_reset_msg::build([&](schema::CacheReset::Builder b) { b.setDisk(disk); });
    const auto clear = tier_clear_msg::build([&](schema::TierClear::Builder b) { b.setDisk(disk); });
    for (size_t i = 0; i < instances_.size(); ++i) {
      const SpawnedInstance& inst = instances_[i];
      const std::string who = "instance '" + inst.name + "'";
      // A node resets its own tiers; a local instance's tier actor is asked here, after its scheduler.
      const auto dest = caf::actor_cast<cache_reset_actor>(remote_[i] ? caf::actor_cast<caf::actor>(nodes_->get(i))
                                                                       : caf::actor_cast<caf::actor>(inst.scheduler));
      if (!dest) {
        fail(who, "its node is not connected");
        continue;
      }
      auto done = ask<cache_reset_done_msg>(dest, std::chrono::seconds(remote_[i] ? 150 : 30), msg);
      if (done && !remote_[i] && inst.tiers) {
        auto c = ask<tier_cleared_msg>(inst.tiers, std::chrono::seconds(120), clear);
        if (c) done = with_tiers_cleared(*done, c->reader());
        else fail(who + " tiers", c.status().message());
      }
      if (!done) {
        fail(who, done.status().message());
        continue;
      }
      const auto r = done->reader();
      sum.freed_pages += static_cast<int>(r.getFreedPages());
      sum.kept_pages += static_cast<int>(r.getKeptPages());
      sum.host_entries += r.getHostEntries();
      sum.disk_entries += r.getDiskEntries();
      if (r.getError().size() > 0) fail(who, r.getError());
    }
    if (router_) {
      if (auto r = ask<cache_reset_done_msg>(router_, std::chrono::seconds(10), msg); !r) fail("router", r.status().message());
    }
    spdlog::info("engine: prefix cache reset: {} page(s) freed, {} kept by running requests, {} host and {} disk tier "
                 "page(s) dropped{}",
                 sum.freed_pages, sum.kept_pages, sum.host_entries, sum.disk_entries, errors.empty() ? "" : "; " + errors);
    if (!errors.empty()) return io_error("prefix cache reset incomplete: " + errors);
    return sum;
  }

  Expected<uint64_t> submit(const GenerateOptions& request, EventCallback on_event) override {
    BRIGADE_RETURN_IF_ERROR(validate_request(request, summary_));
    BRIGADE_RETURN_IF_ERROR(validate_choices_spelled(request, vocab_.get()));
    return submit_as(request, Pooling::none, std::move(on_event));
  }
  Expected<uint64_t> submit_embed(const EmbedOptions& request, EmbedCallback on_done) override {
    BRIGADE_RETURN_IF_ERROR(validate_embed(request, summary_));
    BRIGADE_RETURN_IF_ERROR(validate_labels(request.labels));
    // A classifier reads the hidden states its head pools (the last token's; an encoder's first,
    // or ModernBERT's mean), whatever pooling embeddings use.
    const Pooling head_pooling = summary_.classifier ? summary_.classifier->pooling : Pooling::last;
    const Pooling pooling = request.task == PoolingTask::embed ? summary_.pooling : head_pooling;
    return submit_as(embed_as_generate(request), pooling, embed_events(request, summary_, std::move(on_done)));
  }
  Expected<uint64_t> submit_beam_search(const BeamSearchOptions& request, BeamSearchCallback on_done) override;
  void cancel(uint64_t request_id) override {
    std::shared_ptr<BeamSearchRun> run;
    {
      std::lock_guard<std::mutex> lock(beams_mu_);
      if (auto it = beams_.find(request_id); it != beams_.end()) run = it->second;
    }
    if (run) return run->cancel("the beam search was cancelled");
    caf::anon_send(tokenizer_, abort_msg::build([&](schema::Abort::Builder b) { b.setRequestId(request_id); }));
  }
  const ModelSummary& model() const override { return summary_; }

  Status load_lora(const LoraModule& module, bool replace) override {
    BRIGADE_ASSIGN_OR_RETURN(const int slot, lora_slots_.reserve(module, replace));
    Status s = update_lora_slot(slot, true, module);
    if (!s.is_ok()) {
      // Whatever instance took it lets it go again (a failed load left its own slot free).
      if (Status undo = update_lora_slot(slot, false, module); !undo.is_ok())
        spdlog::warn("engine: freeing LoRA slot {} after a failed load: {}", slot, undo.to_string());
      lora_slots_.abandon(slot);
      return s;
    }
    if (const int old = lora_slots_.commit(slot); old != 0) {  // replaced, and nothing runs under the old one
      if (Status freed = update_lora_slot(old, false, module); !freed.is_ok())
        spdlog::warn("engine: freeing LoRA slot {} of the replaced '{}': {}", old, module.name, freed.to_string());
      lora_slots_.abandon(old);
    }
    spdlog::info("engine: LoRA adapter '{}' ({}) loaded into slot {}{}", module.name, module.path, slot,
                 replace ? " (in place of any earlier one)" : "");
    return Status::ok();
  }

  Status unload_lora(const std::string& name) override {
    bool idle = false;
    BRIGADE_ASSIGN_OR_RETURN(const int slot, lora_slots_.retire(name, &idle));
    if (idle) {
      if (Status s = update_lora_slot(slot, false, LoraModule{name, ""}); !s.is_ok())
        spdlog::warn("engine: freeing LoRA slot {} of '{}': {}", slot, name, s.to_string());
      lora_slots_.abandon(slot);
    }
    spdlog::info("engine: LoRA adapter '{}' unloaded (slot {}{})", name, slot,
                 idle ? " freed" : ", freed once its running requests end");
    return Status::ok();
  }

  std::vector<LoraModule> loras() const override { return lora_slots_.live(); }
  using Engine::format_chat;
  Expected<std::string> format_chat(const std::vector<ChatTurn>& messages, const std::vector<std::string>& tools,
                                    bool add_generation_prompt, const std::string& template_kwargs) const override {
    if (!chat_template_) return chat_template_.status();
    return chat_template_->apply(messages, tools, add_generation_prompt, template_kwargs);
  }
  Expected<ChatTemplate> chat_template() const override { return chat_template_; }
  Expected<ChatTemplate> compile_chat_template(const std::string& source) const override {
    if (!tokenizer_model_) return not_found("this model has no tokenizer");
    ChatSpecialTokens tokens = chat_tokens_;
    if (chat_template_ && chat_template_->jinja) tokens = {chat_template_->jinja->bos_token(), chat_template_->jinja->eos_token()};
    return make_chat_template(source, "the request's chat_template", tokens);
  }
  Expected<std::vector<int32_t>> tokenize_pair(const std::string& a, const std::string& b,
                                               std::vector<int32_t>* token_type_ids, int max_length) const override {
    if (!tokenizer_model_) return not_found("this model has no tokenizer");
    return encode_pair_truncated(*tokenizer_model_, a, b, max_length, token_type_ids);
  }
  Expected<std::vector<int32_t>> tokenize(const std::string& text, bool add_bos) const override {
    if (!tokenizer_model_) return not_found("this model has no tokenizer");
    return tokenizer_model_->encode(text, add_bos);
  }
  Expected<std::string> detokenize(const std::vector<int32_t>& ids) const override {
    if (!tokenizer_model_) return not_found("this model has no tokenizer");
    return tokenizer_model_->decode(ids);
  }
  Expected<std::vector<std::string>> token_strings(const std::vector<int32_t>& ids) const override {
    if (!tokenizer_model_) return not_found("this model has no tokenizer");
    std::vector<std::string> out;
    out.reserve(ids.size());
    for (int32_t id : ids) {
      if (id < 0 || id >= tokenizer_model_->vocab_size())
        return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                std::to_string(tokenizer_model_->vocab_size()) + ")");
      out.push_back(tokenizer_model_->token_string(id));
    }
    return out;
  }
  Expected<ImagePixels> load_image(std::span<const uint8_t> bytes, int prompt_images) const override {
    if (prompt_images < 1)
      return invalid_argument("load_image: a prompt of " + std::to_string(prompt_images) + " images holds none");
    if (!image_loader_) return image_loader_.status();
    return (*image_loader_)(bytes, prompt_images);
  }
  EngineStats stats() const override {
    EngineStats sum;
    for (const auto& inst : instance_stats()) accumulate(sum, inst.stats);
    return sum;
  }
  std::vector<StationStats> station_stats() const override {
    std::vector<StationStats> out;
    for (size_t i = 0; i < station_counters_.size(); ++i) {
      const StationCounters& c = *station_counters_[i];
      out.push_back({station_configs_[i].name, station_configs_[i].type, c.requests.load(), c.passed.load(),
                     c.released.load(), c.rejected.load(), c.cancelled.load(), c.held.load()});
    }
    return out;
  }

  std::vector<InstanceStats> instance_stats() const override {
    std::vector<InstanceStats> out;
    for (size_t i = 0; i < instances_.size(); ++i) {
      InstanceStats is;
      is.name = instances_[i].name;
      is.role = pd_role_name(instances_[i].role);
      if (router_counters_) {
        const auto& routed = router_counters_->routed[i];
        is.routed_cache = routed[static_cast<size_t>(RouteReason::cache)].load();
        is.routed_load = routed[static_cast<size_t>(RouteReason::load)].load();
        is.routed_round_robin = routed[static_cast<size_t>(RouteReason::round_robin)].load();
        is.serving = !router_counters_->down[i].load();
      }
      is.stats = remote_[i] ? node_stats(i, is.serving) : scheduler_stats(instances_[i]);
      out.push_back(std::move(is));
    }
    return out;
  }

  // Test hook (actors/engine/engine_testing.h): instance `index`'s executor exits as a crash would.
  Status kill_executor(int index) {
    if (index < 0 || static_cast<size_t>(index) >= instances_.size())
      return invalid_argument("no instance " + std::to_string(index));
    if (remote_[static_cast<size_t>(index)]) return invalid_argument("instance " + std::to_string(index) + " is remote");
    caf::anon_send_exit(instances_[static_cast<size_t>(index)].executor, caf::exit_reason::kill);
    return Status::ok();
  }

 private:
  // Loads `m` into (or frees) `slot` on every instance: the scheduler first (it drops the slot's
  // cached prefixes and refuses while a request under the slot's old adapter is still there: an
  // aborted one finishing its last step; asked again for up to 5 s), then the executor.
  Status update_lora_slot(int slot, bool load, const LoraModule& m) {
    const std::string identity = load ? lora_identity(m) : "";
    auto build = [&] {
      return lora_update_msg::build([&](schema::LoraUpdate::Builder b) {
        b.setSlot(static_cast<uint32_t>(slot));
        b.setLoad(load);
        b.setName(m.name);
        b.setPath(m.path);
        b.setIdentity(identity);
      });
    };
    auto run = [&](const lora_slots_actor& dest, const std::string& who) -> Status {
      auto r = ask<lora_updated_msg>(dest, std::chrono::seconds(120), build());
      if (!r) return internal_error(who + ": " + r.status().message());
      const std::string err = r->reader().getError();
      if (err.empty()) return Status::ok();
      const auto code = static_cast<StatusCode>(r->reader().getCode());
      return Status(code == StatusCode::ok ? StatusCode::internal : code, who + ": " + err);
    };
    for (size_t i = 0; i < instances_.size(); ++i) {
      const SpawnedInstance& inst = instances_[i];
      Status s = Status::ok();
      for (int attempt = 0; attempt < 250; ++attempt) {
        s = run(caf::actor_cast<lora_slots_actor>(inst.scheduler), "instance '" + inst.name + "' scheduler");
        if (s.is_ok() || !load) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (!s.is_ok()) return s;
      BRIGADE_RETURN_IF_ERROR(run(caf::actor_cast<lora_slots_actor>(inst.executor), "instance '" + inst.name + "'"));
    }
    return Status::ok();
  }

  // One instance's counters as EngineStats (the scheduler's, its tiers', its ceilings and pool).
  EngineStats scheduler_stats(const SpawnedInstance& inst) const {
    EngineStats s = counter_stats(inst);
    if (!inst.tiers) return s;
    // The tier actor's counters: a short wait, skipped if it is busy.
    auto m = ask<tier_stats_msg>(inst.tiers, std::chrono::milliseconds(500), tier_stats_request_msg::build([](auto) {}));
    if (m) add_tier_stats(m->reader(), s);
    return s;
  }
  // A remote instance's stats, asked of its node (a short wait). A node that is down or does not
  // answer in time shows the last counters it gave (counters must not go back to 0 in /metrics),
  // with its gauges at 0 when it is down.
  EngineStats node_stats(size_t i, bool serving) const {
    std::optional<EngineStats> fresh;
    if (serving) {
      auto m = ask<node_stats_msg>(nodes_->get(i), std::chrono::milliseconds(1000),
                                   node_stats_request_msg::build([](auto) {}));
      if (m) fresh = decode_node_stats(m->reader());
    }
    std::lock_guard<std::mutex> lock(node_stats_mu_);
    EngineStats& last = last_node_stats_[i];
    if (fresh) {
      last = *fresh;
    } else if (!serving) {
      last.n_running = last.n_waiting = last.kv_pages_used = last.cache_pages = 0;
    }
    return last;
  }
  // Reaches the brigade node serving remote instance `inst` and asks what it serves (nothing
  // changes on the node); checks its protocol, instance name and role.
  Expected<std::pair<node_actor, node_info_msg>> probe_node(const InstanceConfig& inst);
  // Introduces this front to the node (its router takes the node's events and hand-offs from now
  // on). Only after every check passed: a front that fails later leaves its nodes connected
  // until it is destroyed.
  // `probed` is the node's (info) answer from probe_node (its challenge, with a token).
  Status connect_node(const InstanceConfig& inst, const node_actor& node, const node_info_msg& probed);
  FrontIdentity identity(const InstanceConfig& inst) const {
    return {"pid " + std::to_string(::getpid()), inst.name, inst.role, node_token_};
  }
  // An error only for a configured template that cannot be used.
  Status load_chat_template(const std::string& path, const std::string& configured);

  caf::actor_system_config cfg_;
  caf::actor_system system_;
  caf::actor_system* sys_ = &system_;  // for const methods that talk to actors
  std::vector<SpawnedInstance> instances_;  // remote ones: name, role, pool, ceilings; scheduler = the node
  std::vector<bool> remote_;                 // per instance: served by a brigade node
  // Their current nodes (the node watch replaces one that went and came back).
  std::shared_ptr<RemoteNodes> nodes_ = std::make_shared<RemoteNodes>();
  mutable std::mutex node_stats_mu_;
  mutable std::vector<EngineStats> last_node_stats_;  // per instance: its node's last answer
  router_actor router_;  // null with one instance: the tokenizer then talks to its scheduler
  std::shared_ptr<RouterCounters> router_counters_;
  std::string node_token_;  // the topology's node_token_file's secret; empty: nodes unauthenticated
  std::vector<StationConfig> station_configs_;
  std::vector<std::shared_ptr<StationCounters>> station_counters_;  // one per station_configs_
  std::vector<caf::actor> actors_;
  std::shared_ptr<CallbackRegistry> registry_ = std::make_shared<CallbackRegistry>();
  tokenizer_actor tokenizer_;
  // The tokenizer actor's tokenizer too (immutable and thread-safe, so sharing it is safe):
  // tokenize/detokenize calls need no round trip through the actor's queue.
  std::shared_ptr<const Tokenizer> tokenizer_model_;
  std::shared_ptr<const TokenTrie> vocab_;  // tokenizer_model_'s token bytes (null without one)
  // The model's image loader (load_image: encoded bytes and the prompt's image count to the tower's
  // pixels), made by set_image_loader from its family's processor config; the reason when no
  // instance takes images or the processor config did not load.
  using ImageLoader = std::function<Expected<ImagePixels>(std::span<const uint8_t> bytes, int prompt_images)>;
  Expected<ImageLoader> image_loader_ = unsupported("this model takes text only: no vision tower runs here");
  ModelSummary summary_;
  LoraSlots lora_slots_;  // adapter ids of requests (slots), their adapters and running requests
  Expected<ChatTemplate> chat_template_ = not_found("this model has no chat template");
  ChatSpecialTokens chat_tokens_;  // the tokenizer's BOS and EOS text (templates' fallback)
  std::vector<std::shared_ptr<BeamSearchRun>> beam_runs() {
    std::lock_guard<std::mutex> lock(beams_mu_);
    std::vector<std::shared_ptr<BeamSearchRun>> runs;
    for (const auto& [id, run] : beams_) runs.push_back(run);
    return runs;
  }
  std::atomic<uint64_t> next_id_{1};
  std::mutex beams_mu_;  // taken inside a run's mutex (BeamSearchRun), never around it
  std::unordered_map<uint64_t, std::shared_ptr<BeamSearchRun>> beams_;  // the running beam searches
  std::mt19937_64 seed_rng_{std::random_device{}()};  // seeds of requests without one (EngineOptions::seed)
  std::mutex seed_mu_;
};

// The model's chat template (models/model_chat_template.h), once for all instances. A model
// without a usable one still serves completions; chat says why not.
Status EngineImpl::load_chat_template(const std::string& path, const std::string& configured) {
  if (!tokenizer_model_) return Status::ok();
  ChatSpecialTokens tokens;
  if (tokenizer_model_->bos_id() >= 0) tokens.bos = tokenizer_model_->token_to_piece(tokenizer_model_->bos_id());
  if (!tokenizer_model_->eos_ids().empty()) tokens.eos = tokenizer_model_->token_to_piece(tokenizer_model_->eos_ids().front());
  chat_tokens_ = tokens;
  chat_template_ = brigade::load_chat_template(path, configured, tokens);
  if (chat_template_) {
    spdlog::info("engine: chat template: {}", chat_template_->describe());
  } else if (!configured.empty()) {
    return Status(chat_template_.status().code(), "--chat-template: " + chat_template_.status().message());
  } else if (chat_template_.status().code() != StatusCode::not_found) {
    spdlog::warn("engine: no usable chat template, /v1/chat/completions will answer 400: {}",
                 chat_template_.status().message());
  }
  return Status::ok();
}

Expected<std::pair<node_actor, node_info_msg>> EngineImpl::probe_node(const InstanceConfig& inst) {
  const Endpoint ep = *parse_endpoint(inst.remote);  // validated with the topology
  const std::string where = "instance '" + inst.name + "' (remote " + inst.remote + ")";
  auto node = system_.middleman().remote_actor<node_actor>(ep.host, static_cast<uint16_t>(ep.port));
  if (!node)
    return io_error(where + ": no brigade node answers there (" + system_.render(node.error()) +
                    "); start it first: brigade node --topology FILE --instance " + inst.name);
  auto info = ask<node_info_msg>(*node, std::chrono::seconds(10), info_atom::value);
  if (!info) return Status(info.status().code(), where + ": " + info.status().message());
  const auto r = info->reader();
  if (Status serves = node_serves(r, inst.name, inst.role); !serves.is_ok())
    return Status(serves.code(), where + ": " + serves.message());
  if (r.getVocabSize() < 1 || r.getNPages() < 1) return corrupt(where + ": the node's NodeInfo is malformed");
  std::string nonce;  // the node's authentication must match this front's before anything else
  if (auto hello = make_node_hello(identity(inst), r, nonce); !hello) return hello.status();
  return std::make_pair(std::move(*node), std::move(*info));
}

Status EngineImpl::connect_node(const InstanceConfig& inst, const node_actor& node, const node_info_msg& probed) {
  const FrontIdentity who = identity(inst);
  std::string nonce;
  BRIGADE_ASSIGN_OR_RETURN(node_hello_msg hello, make_node_hello(who, probed.reader(), nonce));
  auto info = ask<node_info_msg>(node, std::chrono::seconds(10), hello_atom::value, hello,
                                 token_sink_actor{router_}, handoff_sink_actor{router_});
  if (!info) return Status(info.status().code(), "instance '" + inst.name + "' (remote " + inst.remote + "): " +
                                                     info.status().message());
  BRIGADE_RETURN_IF_ERROR(check_hello_answer(who, nonce, info->reader()));
  const auto r = info->reader();
  spdlog::info("engine: instance '{}': brigade node at {} (pid {}): {} ({} params), KV {} pages", inst.name,
               inst.remote, r.getPid(), std::string(r.getArch()), r.getNParams(), r.getNPages());
  return Status::ok();
}

namespace {

// The loader of a family whose processor makes a PatchedImage (`pixels(bytes, config,
// prompt_images)`), or why its processor config did not load.
template <class Config, class Pixels>
std::function<Expected<ImagePixels>(std::span<const uint8_t>, int)> patched_loader(Config config, Pixels pixels) {
  return [config = std::move(config), pixels](std::span<const uint8_t> bytes, int prompt_images) -> Expected<ImagePixels> {
    BRIGADE_ASSIGN_OR_RETURN(PatchedImage image, pixels(bytes, config, prompt_images));
    return ImagePixels{std::make_shared<const std::vector<float>>(std::move(image.pixels)), image.grid_h, image.grid_w};
  };
}

}  // namespace

// The processor config is read from the model's directory (preprocessor_config.json,
// processor_config.json). --mm-processor-kwargs min_pixels / max_pixels bound the Qwen2-VL
// family's images only: the others' processors decide the size, and the option is refused
// there, naming what decides it. A processor config that does not load leaves its reason in
// image_loader_ (logged): the model still serves text, and images sent as pixels.
Status EngineImpl::set_image_loader(const std::string& path, const VisionConfig* tower, const EngineOptions& options) {
  const bool pixel_bounds = options.image_min_pixels > 0 || options.image_max_pixels > 0;
  const auto fixed_size = [&](const std::string& family, const char* decides) -> Status {
    if (!pixel_bounds) return Status::ok();
    return invalid_argument("--mm-processor-kwargs min_pixels / max_pixels bound Qwen2-VL's images; " + family +
                            " processor " + decides);
  };
  Expected<ImageLoader> loader = unsupported("no image processor");  // replaced by each family below
  std::string described;  // what the loader does, logged
  const auto failed = [&](Status why) { loader = std::move(why); };
  const auto is = [tower](VisionKind k) { return tower && tower->kind == k; };
  if (is(VisionKind::pixtral)) {  // PixtralImageProcessor: fit within longest_edge
    BRIGADE_RETURN_IF_ERROR(fixed_size("Mistral 3's", "fits them within its preprocessor_config.json size.longest_edge"));
    auto c = model_pixtral_image_processor(path, tower->patch_size, tower->merge);
    if (!c) failed(c.status());
    else {
      described = fmt::format("images are resized to fit {} pixels a side, in tokens of {}x{} pixels{}", c->longest_edge,
                              c->factor(), c->factor(), c->steps.do_resize ? "" : " (do_resize false: sent as they are)");
      loader = patched_loader(*c, [](auto bytes, const auto& config, int) { return pixtral_image_pixels(bytes, config); });
    }
  } else if (is(VisionKind::gemma4)) {  // Gemma4ImageProcessor: within max_soft_tokens, aspect kept
    BRIGADE_RETURN_IF_ERROR(fixed_size("Gemma 4's", "fits them within its processor config's max_soft_tokens"));
    auto c = model_gemma4_image_processor(path, tower->patch_size, tower->merge);
    if (!c) failed(c.status());
    else {
      described = fmt::format("images are resized to at most {} tokens of {}x{} pixels, keeping their aspect",
                              c->max_soft_tokens, c->side_multiple(), c->side_multiple());
      loader = patched_loader(*c, [](auto bytes, const auto& config, int) { return gemma4_image_pixels(bytes, config); });
    }
  } else if (is(VisionKind::idefics3)) {  // Idefics3ImageProcessor: tiles and the global tile
    BRIGADE_RETURN_IF_ERROR(fixed_size("Idefics3's", "resizes them by its preprocessor_config.json size.longest_edge "
                                                     "and cuts max_image_size tiles"));
    const int tile_tokens = tower->image_tokens(tower->patches_per_side(), tower->patches_per_side());
    auto c = model_idefics3_image_processor(path, tower->image_size);
    if (const Status seq = c ? check_idefics3_image_seq_len(path, tile_tokens) : c.status(); !seq.is_ok()) failed(seq);
    else {
      described = fmt::format("images are resized to {} pixels on their longest side{}, {} tokens a tile", c->longest_edge,
                              c->do_image_splitting ? " and cut into " + std::to_string(c->tile) + "-pixel tiles (+ the global tile)"
                                                    : ", as one " + std::to_string(c->tile) + "-pixel tile",
                              tile_tokens);
      loader = patched_loader(*c, [patch = tower->patch_size](auto bytes, const auto& config, int) {
        return idefics3_image_pixels(bytes, config, patch);
      });
    }
  } else if (is(VisionKind::internvl) || is(VisionKind::aya_vision)) {
    // GotOcr2ImageProcessor's tiles (crop_to_patches, as InternVLProcessor and AyaVisionProcessor pass it)
    BRIGADE_RETURN_IF_ERROR(fixed_size(tower->kind == VisionKind::internvl ? "InternVL's" : "Aya Vision's",
                                       "tiles them as its preprocessor_config.json min_patches / max_patches say"));
    const int tile_tokens = tower->image_tokens(tower->patches_per_side(), tower->patches_per_side());
    auto c = model_internvl_image_processor(path, tower->image_size);
    if (const Status checked = !c ? c.status()
                               : tower->kind == VisionKind::aya_vision ? check_aya_vision_processor(path, tile_tokens)
                                                                : Status::ok();
        !checked.is_ok())
      failed(checked);
    else {
      described = fmt::format("images are cut into {}..{} tiles of {}x{} pixels{}, {} tokens a tile", c->min_tiles,
                              c->max_tiles, c->tile, c->tile, c->use_thumbnail ? " (+ a thumbnail)" : "", tile_tokens);
      loader = patched_loader(*c, [patch = tower->patch_size](auto bytes, const auto& config, int) {
        return internvl_image_pixels(bytes, config, patch);
      });
    }
  } else if (is(VisionKind::llava) && tower->anyres.on()) {
    // LlavaNextImageProcessor: the base tile and the tiles, the image's size as its grid
    BRIGADE_RETURN_IF_ERROR(fixed_size("LLaVA-NeXT's", "tiles them by config.json's image_grid_pinpoints"));
    auto c = model_llava_next_image_processor(path, tower->anyres);
    if (!c) failed(c.status());
    else {
      std::string pins;
      for (const auto& [h, w] : c->grid.pinpoints) pins += (pins.empty() ? "" : ", ") + std::to_string(h) + "x" + std::to_string(w);
      described = fmt::format("images are a base tile and the tiles of the best of {} (height x width) in {}x{}-pixel "
                              "tiles, up to {} tokens", pins, tower->image_size, tower->image_size,
                              anyres_max_tokens(tower->anyres));
      // LLaVA-OneVision: an image among several is its base tile only.
      loader = patched_loader(*c, [](auto bytes, const auto& config, int prompt_images) -> Expected<PatchedImage> {
        BRIGADE_ASSIGN_OR_RETURN(Image decoded, decode_image(bytes));
        return config.onevision && prompt_images > 1 ? preprocess_llava_onevision_base(decoded, config)
                                                     : preprocess_llava_next(decoded, config);
      });
    }
  } else if (is(VisionKind::llava) || (summary_.image_merge == 0 && summary_.image_size > 0)) {
    // CLIPImageProcessor's (LLaVA) or Gemma3ImageProcessor's fixed-size pixel_values; LLaVA's
    // are its tower's grid of patches a side (Gemma 3's grid is 0: a fixed size).
    const bool llava = is(VisionKind::llava);
    if (llava)
      BRIGADE_RETURN_IF_ERROR(fixed_size("LLaVA's", "makes every image its preprocessor_config.json crop_size"));
    const int grid = llava ? tower->patches_per_side() : 0;
    auto c = model_image_processor(path, llava ? tower->image_size : summary_.image_size);
    if (!c) failed(c.status());
    else
      loader = ImageLoader([config = *c, grid](std::span<const uint8_t> bytes, int) -> Expected<ImagePixels> {
        BRIGADE_ASSIGN_OR_RETURN(std::vector<float> pixels, image_pixels(bytes, config));
        return ImagePixels{std::make_shared<const std::vector<float>>(std::move(pixels)), grid, grid};
      });
  } else if (summary_.image_merge > 0) {
    // Qwen2VLImageProcessor: resized within min_pixels..max_pixels. Every image load_image makes
    // must go through the tower (chunked prefill splits its tokens over steps as it needs: they
    // attend causally).
    const int64_t max_tokens = QwenVision::kMaxPatches / (int64_t{summary_.image_merge} * summary_.image_merge);
    auto c = model_qwen_image_processor(path);
    if (const Status bounded = c ? bound_qwen_pixels(*c, options.image_min_pixels, options.image_max_pixels, max_tokens)
                                 : c.status();
        !bounded.is_ok())
      failed(bounded);
    else {
      described = fmt::format("images are resized to {}..{} pixels ({} tokens at most)", c->min_pixels, c->max_pixels,
                              c->max_pixels / (int64_t{c->factor()} * c->factor()));
      loader = patched_loader(*c, [](auto bytes, const auto& config, int) { return qwen_image_pixels(bytes, config); });
    }
  } else {
    return Status::ok();  // no tower: image_loader_ keeps why
  }
  if (!loader) spdlog::warn("engine: images cannot be loaded from files: {}", loader.status().message());
  else if (!described.empty()) spdlog::info("engine: {}", described);
  image_loader_ = std::move(loader);
  return Status::ok();
}

Status EngineImpl::start(const EngineOptions& options) {
  BRIGADE_RETURN_IF_ERROR(options.topology.validate());
  const auto& configs = options.topology.instances;
  const std::string path = options.model_path.empty() ? options.topology.model : options.model_path;
  if (path.empty()) return invalid_argument("no model given: pass a model path or set `model:` in the topology");
  if (!options.topology.node_token_file.empty() && has_remote(options.topology)) {
    BRIGADE_ASSIGN_OR_RETURN(node_token_, load_node_token(options.topology.node_token_file));
  }
  BRIGADE_RETURN_IF_ERROR(check_lora_options(options));
  BRIGADE_RETURN_IF_ERROR(check_hf_overrides(options.hf_overrides));
  if (options.max_logprobs < -1)
    return invalid_argument("max_logprobs must be >= 0, or -1 for the whole vocabulary (got " +
                            std::to_string(options.max_logprobs) + ")");
  if (options.seed) seed_rng_.seed(*options.seed);  // vLLM's --seed: unseeded requests reproducible
  // The stations are made before any weights load: a bad station fails fast.
  BRIGADE_ASSIGN_OR_RETURN(auto stations, make_stations(options.topology.stations, options.station_types));
  station_configs_ = options.topology.stations;
  // `threads: 0` shares the cores out among every CPU rank of every local instance.
  int n_cpu_ranks = 0;
  for (const auto& inst : configs) {
    const ExecutorConfig& exe = inst.executors.front();
    if (inst.remote.empty() && !parse_device(exe.device)->cuda) n_cpu_ranks += exe.tp;
  }
  // Local instances load their weights here; remote ones are served by their nodes (this
  // process reads only the model's tokenizer and chat template for them).
  std::vector<std::optional<LoadedInstance>> loaded(configs.size());
  bool progress = options.progress;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!configs[i].remote.empty()) continue;
    auto one = load_instance(options, configs[i], path, n_cpu_ranks, progress);
    if (!one) {
      const std::string who = "instance '" + configs[i].name + "'";  // unless the message names it already
      if (configs.size() == 1 || one.status().message().starts_with(who)) return one.status();
      return Status(one.status().code(), who + ": " + one.status().message());
    }
    loaded[i] = std::move(*one);
    progress = false;
  }
  if (options.tokenizer_path.empty()) {
    BRIGADE_ASSIGN_OR_RETURN(tokenizer_model_, load_model_tokenizer(path));
    BRIGADE_RETURN_IF_ERROR(load_chat_template(path, options.chat_template));
  } else {  // vLLM's --tokenizer: it must be there
    auto tok = Tokenizer::load(options.tokenizer_path);
    if (!tok) return Status(tok.status().code(), "tokenizer " + options.tokenizer_path + ": " + tok.status().message());
    tokenizer_model_ = std::shared_ptr<const Tokenizer>(std::move(*tok));
    BRIGADE_RETURN_IF_ERROR(load_chat_template(options.tokenizer_path, options.chat_template));
  }

  auto frontend = spawn_frontend(system_, registry_);
  ImageMarkers markers;  // from the first local instance that takes images
  for (const auto& one : loaded) {
    if (!one || !markers.marker.empty()) continue;
    const Model& model = *one->ranks.front()->model;
    if (model.has_vision()) {
      markers = image_markers(tokenizer_model_.get(), model.config().vision);
    } else if (model.config().prefix_lm && markers.prefix_bos.empty()) {  // PaliGemma's prompt layout, text only
      markers = image_markers(tokenizer_model_.get(), model.config().vision);
      markers.marker.clear();
    }
  }
  tokenizer_ = spawn_tokenizer(system_, tokenizer_model_, frontend, std::move(markers));
  actors_ = {caf::actor_cast<caf::actor>(frontend), caf::actor_cast<caf::actor>(tokenizer_)};
  // One local instance: the tokenizer talks to its scheduler directly (no router hop, no
  // routing). A remote instance always has the router in front: it is what watches the node.
  token_sink_actor sink = caf::actor_cast<token_sink_actor>(tokenizer_);
  // Stations (include/brigade/station.h): each one's events go to the one before it.
  std::vector<station_actor> station_actors;
  for (size_t i = 0; i < stations.size(); ++i) {
    station_counters_.push_back(std::make_shared<StationCounters>());
    station_actors.push_back(
        spawn_station(system_, options.topology.stations[i], std::move(stations[i]), sink, station_counters_.back()));
    actors_.push_back(caf::actor_cast<caf::actor>(station_actors.back()));
    sink = station_actors.back();
  }
  if (configs.size() > 1 || has_remote(options.topology)) {
    RouterSetup rs;
    rs.config = options.topology.router;
    for (const auto& inst : configs) {
      rs.instance_names.push_back(inst.name);
      rs.roles.push_back(*parse_pd_role(inst.role));
    }
    router_counters_ = std::make_shared<RouterCounters>(static_cast<int>(configs.size()));
    rs.counters = router_counters_;
    router_ = spawn_router(system_, std::move(rs), sink);
    sink = router_;
    spdlog::info("engine: {} instances behind a {} router{}", configs.size(), options.topology.router.policy,
                 options.topology.pd_separated() ? " (PD separation: prompts to prefill instances, hand-offs to decode)"
                                                 : "");
  }
  std::vector<InstanceFacts> facts;
  // PD nodes that hand off through shared memory (pd_transport) must share this process's.
  const bool nodes_share_memory = options.topology.pd_separated() &&
                                  pd_transport(options.topology, /*in_node=*/true) == BlobTransport::shared;
  nodes_->nodes.resize(configs.size());
  remote_.resize(configs.size());
  std::vector<node_info_msg> infos(configs.size());
  last_node_stats_.resize(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    if (loaded[i]) {
      facts.push_back(facts_of(*loaded[i]));
      continue;
    }
    BRIGADE_ASSIGN_OR_RETURN(auto connected, probe_node(configs[i]));
    if (const std::string elsewhere = other_host(connected.second.reader()); nodes_share_memory && !elsewhere.empty())
      return unsupported("instance '" + configs[i].name + "' (remote " + configs[i].remote + "): " + elsewhere);
    nodes_->nodes[i] = std::move(connected.first);
    remote_[i] = true;
    infos[i] = connected.second;
    facts.push_back(facts_of(connected.second.reader()));
    facts.back().name = configs[i].name;
    facts.back().remote_tokenizer = connected.second.reader().getHasTokenizer();
  }
  BRIGADE_RETURN_IF_ERROR(check_instances_agree(facts));
  // The front tokenizes for its nodes: a node whose model has a tokenizer while the front found
  // none at its model path means the path is wrong on this host, not that text is unsupported.
  for (const auto& f : facts)
    if (f.remote_tokenizer && !tokenizer_model_)
      return invalid_argument("instance '" + f.name + "': its node's model has a tokenizer, but none was found at '" +
                              path + "'; give the front the same model (it reads the tokenizer and chat template only)");
  const InstanceFacts& model = facts.front();
  if (tokenizer_model_) BRIGADE_RETURN_IF_ERROR(check_tokenizer_fits(*tokenizer_model_, model.vocab_size));
  summary_ = {model.arch, model.vocab_size, model.max_position, static_cast<int64_t>(model.n_params),
              static_cast<int64_t>(model.weight_bytes), tokenizer_model_ != nullptr};
  for (const auto& l : loaded)
    if (l) summary_.hidden_size = l->ranks.front()->model->config().hidden_size;
  BRIGADE_RETURN_IF_ERROR(summarize_encoder(path, loaded, summary_));
  // The first local instance's EOS ids (what its scheduler ends at); remote instances' models
  // are the front's own, whose tokenizer names them.
  const auto local = std::find_if(loaded.begin(), loaded.end(), [](const auto& l) { return l.has_value(); });
  if (local != loaded.end()) {
    const auto& eos = (*local)->ranks.front()->model->config().eos_ids;
    summary_.eos_ids.assign(eos.begin(), eos.end());
  } else if (tokenizer_model_) {
    summary_.eos_ids = tokenizer_model_->eos_ids();
  }
  const VisionConfig* tower = nullptr;  // the last local instance's that runs one
  for (const auto& l : loaded)
    if (l && !l->ranks.front()->model->config().vision_off.empty())  // a tower refused by field: say why
      image_loader_ = unsupported("this model takes text only: its vision tower is off (" +
                                     l->ranks.front()->model->config().vision_off + ")");
  for (const auto& l : loaded)
    if (l && l->ranks.front()->model->has_vision()) {
      tower = &l->ranks.front()->model->config().vision;
      summary_.image_size = tower->image_size;
      summary_.tokens_per_image = tower->tokens_per_image;
      summary_.image_merge = tower->dynamic() ? tower->merge : 0;
    }
  BRIGADE_RETURN_IF_ERROR(set_image_loader(path, tower, options));
  resolve_pooling(options, path, summary_);
  BRIGADE_ASSIGN_OR_RETURN(auto classifier, read_classifier(path, options.hf_overrides, tokenizer_model_.get()));
  if (classifier) {
    if (summary_.hidden_size > 0 && classifier->hidden != summary_.hidden_size)
      return corrupt("the classifier takes hidden states of " + std::to_string(classifier->hidden) +
                     " values, the model makes " + std::to_string(summary_.hidden_size));
    summary_.generates = classifier->generates;
    spdlog::info("engine: sequence classifier {}", classifier->describe());
    summary_.classifier = std::make_shared<const ClassifierHead>(std::move(*classifier));
  }
  summary_.loras = options.lora_modules;
  summary_.max_loras = options.lora_enabled() ? options.max_loras : 0;
  summary_.max_logprobs = options.max_logprobs < 0 ? summary_.vocab_size : options.max_logprobs;
  lora_slots_.init(options.lora_enabled() ? options.max_loras : 0, options.lora_modules);
  if (tokenizer_model_) {  // the bytes of every token, for constrained output
    vocab_ = std::make_shared<const TokenTrie>(token_pieces(*tokenizer_model_));
    for (auto& l : loaded)
      if (l) l->ranks.front()->runner.vocab = vocab_;
  }
  std::vector<WatchedInstance> watched;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!remote_[i]) continue;
    BRIGADE_RETURN_IF_ERROR(connect_node(configs[i], nodes_->nodes[i], infos[i]));
    const Endpoint ep = *parse_endpoint(configs[i].remote);
    watched.push_back({static_cast<int>(i), ep.host, static_cast<uint16_t>(ep.port), infos[i], identity(configs[i]),
                       nodes_share_memory});
    EngineStats& last = last_node_stats_[i];  // until the node's first answer
    last.kv_pages_total = facts[i].n_pages;
    last.peak_bytes_per_s = facts[i].ceilings.bytes_per_s;
    last.peak_flops_per_s = facts[i].ceilings.flops_per_s;
  }
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!loaded[i]) {
      SpawnedInstance remote;  // what stats and routing need; its actors live in the node
      remote.name = configs[i].name;
      remote.role = facts[i].role;
      remote.n_pages = facts[i].n_pages;
      remote.ceilings = facts[i].ceilings;
      remote.scheduler = nodes_->nodes[i];
      instances_.push_back(std::move(remote));
      continue;
    }
    instances_.push_back(spawn_instance(system_, std::move(*loaded[i]), sink, /*linked=*/router_ != nullptr, router_));
    const auto& spawned = instances_.back().actors;
    actors_.insert(actors_.end(), spawned.begin(), spawned.end());
  }
  scheduler_actor entry = router_ ? scheduler_actor{router_} : instances_.front().scheduler;
  if (router_) {
    for (size_t i = 0; i < instances_.size(); ++i)
      caf::anon_send(router_, wire_atom::value, static_cast<int32_t>(i), instances_[i].scheduler);
    if (!watched.empty()) actors_.push_back(spawn_node_watch(system_, std::move(watched), nodes_, router_));
  }
  for (auto it = station_actors.rbegin(); it != station_actors.rend(); ++it) {
    caf::anon_send(*it, wire_atom::value, entry);
    entry = *it;
  }
  caf::anon_send(tokenizer_, wire_atom::value, entry, static_cast<int32_t>(summary_.max_context));
  if (!station_actors.empty()) spdlog::info("engine: {} station(s) in the request path", station_actors.size());
  return Status::ok();
}

Expected<uint64_t> EngineImpl::submit_as(const GenerateOptions& request, Pooling pooling, EventCallback on_event,
                                         AdmitGroup group) {
  BRIGADE_ASSIGN_OR_RETURN(const int32_t lora, lora_slots_.acquire(request.lora));
  if (lora != 0) {  // the slot counts the request until its last event (LoraSlots)
    on_event = [this, lora, cb = std::move(on_event)](const Event& ev) {
      // Released before the caller hears the end: a load right after it may take the slot (the
      // scheduler still refuses while the sequence is there, and the load asks again).
      if (ev.finish != FinishReason::none) lora_slots_.release(lora);
      cb(ev);
    };
  }
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
                       .allowed_token_ids =
                           [&] {
                             std::vector<int32_t> ids = o.allowed_token_ids;
                             std::sort(ids.begin(), ids.end());
                             return ids;
                           }(),
                       .min_tokens = request.min_tokens,
                       .json_object = request.response_format == ResponseFormat::json_object,
                       .json_schema = request.response_format == ResponseFormat::json_schema ? request.json_schema : "",
                       .guided_choice = request.response_format == ResponseFormat::choice ? request.guided_choice
                                                                                        : std::vector<std::string>{},
                       .regex = request.response_format == ResponseFormat::regex ? request.regex : "",
                       .grammar = request.response_format == ResponseFormat::grammar ? request.grammar : "",
                       .reasoning_end = request.reasoning_end_id,
                       .reasoning_start = request.reasoning_start_id,
                       .reasoning_header = request.reasoning_header_ids,
                       .thinking_budget = request.thinking_token_budget,
                       .thinking_end = request.thinking_token_budget < 0    ? std::vector<int32_t>{}
                                       : request.thinking_end_ids.empty() ? std::vector<int32_t>{request.reasoning_end_id}
                                                                          : request.thinking_end_ids,
                       .end_ids = {}};
    auto s = b.initSampling();
    encode_sampling(cfg, s);
    s.setLogprobs(request.logprobs);
    s.setPromptLogprobs(request.prompt_logprobs);
    b.setMaxTokens(request.max_tokens);  // capped to the context by the tokenizer
    auto stop = b.initStop();
    fill_list(stop.initTokenIds(static_cast<unsigned>(request.stop_ids.size())), request.stop_ids);
    auto strs = stop.initStrings(static_cast<unsigned>(request.stop.size()));
    for (unsigned i = 0; i < request.stop.size(); ++i) strs.set(i, request.stop[i]);
    stop.setIgnoreEos(request.ignore_eos);
    stop.setIncludeStrings(request.include_stop_str_in_output);
    b.setTruncatePromptTokens(request.truncate_prompt_tokens);
    auto bad = b.initBadWords(static_cast<unsigned>(o.bad_words.size()));
    for (unsigned i = 0; i < o.bad_words.size(); ++i) bad.set(i, o.bad_words[i]);
    b.setSkipSpecialTokens(request.skip_special_tokens);
    b.setReturnPromptIds(request.return_prompt_ids);
    b.setPriority(request.priority);
    b.setLora(static_cast<uint32_t>(lora));
    b.setCacheSalt(request.cache_salt);
    std::vector<SeqImage> images;
    for (const ImagePixels& im : request.images) images.push_back({0, im.pixels, im.grid_h, im.grid_w});
    encode_images(images, b.initImages(static_cast<unsigned>(images.size())));
    auto labels = b.initLabels(static_cast<unsigned>(request.labels.size()));
    for (unsigned i = 0; i < request.labels.size(); ++i) {
      labels[i].setKey(request.labels[i].first);
      labels[i].setValue(request.labels[i].second);
    }
    b.setPooling(static_cast<schema::Pooling>(pooling));
    b.setAdmitGroup(group.id);
    b.setAdmitGroupSize(group.size);
  });
  registry_->add(id, std::move(on_event));
  caf::anon_send(tokenizer_, msg);
  return id;
}

Expected<uint64_t> EngineImpl::submit_beam_search(const BeamSearchOptions& request, BeamSearchCallback on_done) {
  BRIGADE_RETURN_IF_ERROR(validate_beam_request(request, summary_));
  BeamRunSetup setup;
  setup.options = request;
  if (!request.prompt_ids.empty()) {
    setup.prompt = request.prompt_ids;
  } else {
    BRIGADE_ASSIGN_OR_RETURN(setup.prompt, tokenizer_model_->encode(request.prompt, request.add_bos));
  }
  if (request.truncate_prompt_tokens > 0 && static_cast<int>(setup.prompt.size()) > request.truncate_prompt_tokens)
    setup.prompt.erase(setup.prompt.begin(), setup.prompt.end() - request.truncate_prompt_tokens);
  const int room = summary_.max_context - static_cast<int>(setup.prompt.size());
  if (setup.prompt.empty() || room < 1)
    return invalid_argument("the prompt's " + std::to_string(setup.prompt.size()) + " tokens leave no room in the " +
                            std::to_string(summary_.max_context) + "-token context for a beam search");
  BeamSearchConfig& c = setup.config;
  c.beam_width = request.beam_width;
  c.max_new_tokens = std::min(request.max_tokens, room);
  c.length_penalty = request.length_penalty;
  c.early_stopping = request.early_stopping;
  BRIGADE_ASSIGN_OR_RETURN(c.end_ids, beam_end_ids(request, summary_));
  c.keep_top = request.logprobs > 0;
  BRIGADE_RETURN_IF_ERROR(BeamSearch::validate(c, summary_.vocab_size));
  setup.id = next_id_.fetch_add(1);
  setup.tokenizer = tokenizer_model_;
  setup.submit = [this](const GenerateOptions& g, AdmitGroup group, EventCallback cb) {
    return submit_as(g, Pooling::none, std::move(cb), group);
  };
  setup.new_group = [this] { return next_id_.fetch_add(1); };  // unique among requests and groups
  setup.cancel = [this](uint64_t id) {
    caf::anon_send(tokenizer_, abort_msg::build([&](schema::Abort::Builder b) { b.setRequestId(id); }));
  };
  setup.forget = [this](uint64_t id) {
    std::lock_guard<std::mutex> lock(beams_mu_);
    beams_.erase(id);
  };
  const uint64_t id = setup.id;
  auto run = std::make_shared<BeamSearchRun>(std::move(setup), std::move(on_done));
  {
    std::lock_guard<std::mutex> lock(beams_mu_);
    beams_.emplace(id, run);
  }
  if (Status s = run->start(); !s.is_ok()) {
    std::lock_guard<std::mutex> lock(beams_mu_);
    beams_.erase(id);
    return s;
  }
  return id;
}

}  // namespace

Expected<std::unique_ptr<Engine>> Engine::create(const EngineOptions& options) {
  init_logging();
  auto engine = std::make_unique<EngineImpl>(has_remote(options.topology));
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
    if (!ev.prompt_logprobs.empty()) sh->c.prompt_logprobs = ev.prompt_logprobs;
    sh->c.prompt_tokens = ev.prompt_tokens;
    sh->c.cached_tokens = ev.cached_tokens;
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

Expected<BeamSearchResult> Engine::beam_search(const BeamSearchOptions& request) {
  return wait_for_answer<BeamSearchResult>([&](BeamSearchCallback done) { return submit_beam_search(request, std::move(done)); });
}

Status kill_instance_executor_for_testing(Engine& engine, int index) {
  auto* impl = dynamic_cast<EngineImpl*>(&engine);
  if (!impl) return invalid_argument("not a brigade engine");
  return impl->kill_executor(index);
}

}  // namespace brigade
