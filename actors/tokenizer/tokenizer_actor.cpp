#include "actors/tokenizer/tokenizer_actor.h"

#include <algorithm>
#include <unordered_map>

#include "actors/tokenizer/stop_filter.h"
#include "models/detokenizer.h"
#include "actors/step_codec.h"
#include "messages/convert.h"

namespace brigade {

namespace {

// Per-request output state.
struct TextState {
  std::unique_ptr<IncrementalDetokenizer> detok;  // null without a tokenizer
  StopFilter stops;
  bool stopped = false;  // a stop string ended it; swallow events until the scheduler's final one
  int min_tokens = 0;    // stop strings match only the text of the tokens after these
  int n_tokens = 0;      // output tokens seen
};

struct TokenizerState {
  std::shared_ptr<const Tokenizer> tokenizer;
  token_sink_actor frontend;
  scheduler_actor scheduler;
  std::unordered_map<uint64_t, TextState> streams;
  int max_context = 0;
  static inline const char* name = "brigade.tokenizer";
};

using tokenizer_ptr = tokenizer_actor::stateful_pointer<TokenizerState>;

// The request with its prompt as token ids (copying every other field; not msg::edited, whose
// copy would keep the text's bytes, zeroed, in a message that may cross to a node).
generate_request_msg with_ids(schema::GenerateRequest::Reader r, const std::vector<int32_t>& ids, int max_context) {
  return generate_request_msg::build([&](schema::GenerateRequest::Builder b) {
    b.setRequestId(r.getRequestId());
    fill_list(b.getPrompt().initTokenIds(static_cast<unsigned>(ids.size())), ids);
    b.setAddBos(r.getAddBos());
    b.setSampling(r.getSampling());
    b.setMaxTokens(max_tokens_within_context(r.getMaxTokens(), static_cast<int64_t>(ids.size()), max_context));
    b.setStop(r.getStop());
    b.setPriority(r.getPriority());
    b.setLabels(r.getLabels());
    b.setPooling(r.getPooling());
    b.setLora(r.getLora());
  });
}

// A token's piece as valid UTF-8 (a byte of a partial sequence becomes U+FFFD): the text of a
// prompt logprob entry, whose token is shown alone.
std::string piece_text(const Tokenizer* tokenizer, int32_t id) {
  if (!tokenizer || id < 0 || id >= tokenizer->vocab_size()) return {};
  std::string out;
  append_valid_utf8(out, tokenizer->token_to_piece(id), /*hold_tail=*/false);
  return out;
}

// The scheduler's prompt logprobs with the text of each token and alternative.
void copy_prompt_logprobs(const Tokenizer* tokenizer, capnp::List<schema::TokenLogprob>::Reader in,
                          schema::TokenEvent::Builder b) {
  if (in.size() == 0) return;
  auto out = b.initPromptLogprobs(in.size());
  for (unsigned i = 0; i < in.size(); ++i) {
    out.setWithCaveats(i, in[i]);
    out[i].setText(piece_text(tokenizer, in[i].getTokenId()));
    auto top = out[i].getTop();
    for (unsigned j = 0; j < top.size(); ++j) top[j].setText(piece_text(tokenizer, top[j].getTokenId()));
  }
}

void on_request(tokenizer_ptr self, const generate_request_msg& msg) {
  auto& st = self->state;
  auto r = msg.reader();
  const uint64_t id = r.getRequestId();
  generate_request_msg forward = msg;
  if (r.getPrompt().isText()) {
    if (!st.tokenizer) {
      self->send(st.frontend,
                 error_event(id, invalid_argument("this model has no tokenizer: send the prompt as token ids")));
      return;
    }
    auto ids = st.tokenizer->encode(to_string_view(r.getPrompt().getText()), r.getAddBos());
    if (!ids) {
      self->send(st.frontend, error_event(id, ids.status()));
      return;
    }
    forward = with_ids(r, *ids, st.max_context);
  } else if (const int capped = max_tokens_within_context(r.getMaxTokens(), r.getPrompt().getTokenIds().size(),
                                                          st.max_context);
             capped != r.getMaxTokens()) {
    forward = msg.edited([&](schema::GenerateRequest::Builder b) { b.setMaxTokens(capped); });
  }
  TextState ts{st.tokenizer ? std::make_unique<IncrementalDetokenizer>(*st.tokenizer, r.getSkipSpecialTokens()) : nullptr,
               StopFilter(to_vector(r.getStop().getStrings())), false, r.getSampling().getMinTokens(), 0};
  st.streams.insert_or_assign(id, std::move(ts));
  self->send(st.scheduler, forward);
}

void on_event(tokenizer_ptr self, const token_event_msg& msg) {
  auto& st = self->state;
  auto r = msg.reader();
  const uint64_t id = r.getRequestId();
  const bool final_event = r.getFinishReason() != schema::FinishReason::NONE;
  auto it = st.streams.find(id);
  if (it == st.streams.end()) {  // refused before a stream existed
    self->send(st.frontend, msg);
    return;
  }
  TextState& ts = it->second;
  if (ts.stopped) {  // the stop event went out already; this is the scheduler's abort echo
    if (final_event) st.streams.erase(it);
    return;
  }
  // Token by token: an event may carry several (speculative decoding), and a stop string that
  // completes at one of them ends the output there, its ids and logprobs included.
  const auto ids = r.getTokenIds();
  std::string text;
  unsigned n_kept = ids.size();
  for (unsigned i = 0; i < ids.size() && !ts.stops.stopped(); ++i) {
    std::string piece = ts.detok ? ts.detok->push(ids[i]) : std::string();
    if (final_event && ts.detok && i + 1 == ids.size()) piece += ts.detok->flush();
    text += ts.n_tokens++ < ts.min_tokens ? ts.stops.pass(piece) : ts.stops.push(piece);
    if (ts.stops.stopped()) n_kept = i + 1;
  }
  if (ids.size() == 0 && final_event && ts.detok) text += ts.stops.push(ts.detok->flush());
  const bool hit_stop = ts.stops.stopped();
  if (final_event && !hit_stop) text += ts.stops.flush();
  const unsigned n_cut = ids.size() - n_kept;
  auto out = token_event_msg::build([&](schema::TokenEvent::Builder b) {
    b.setRequestId(id);
    if (n_cut == 0) {
      b.setTokenIds(ids);
      b.setLogprobs(r.getLogprobs());
    } else {
      auto kept = b.initTokenIds(n_kept);
      for (unsigned i = 0; i < n_kept; ++i) kept.set(i, ids[i]);
      const auto lps = r.getLogprobs();
      if (lps.size() > 0) {
        auto out_lps = b.initLogprobs(std::min(n_kept, lps.size()));
        for (unsigned i = 0; i < out_lps.size(); ++i) out_lps.setWithCaveats(i, lps[i]);
      }
    }
    b.setText(text);
    b.setFinishReason(hit_stop ? schema::FinishReason::STOP : r.getFinishReason());
    b.setError(r.getError());
    b.setErrorCode(r.getErrorCode());
    b.setRetryAfterMs(r.getRetryAfterMs());
    b.setPromptTokens(r.getPromptTokens());
    b.setCachedTokens(r.getCachedTokens());
    b.setCompletionTokens(r.getCompletionTokens() - n_cut);
    copy_prompt_logprobs(st.tokenizer.get(), r.getPromptLogprobs(), b);
    if (r.hasEmbedding()) b.setEmbedding(r.getEmbedding());
  });
  self->send(st.frontend, out);
  if (hit_stop && !final_event) {
    ts.stopped = true;
    self->send(st.scheduler, abort_msg::build([&](schema::Abort::Builder b) { b.setRequestId(id); }));
  } else if (final_event) {
    st.streams.erase(it);
  }
}

tokenizer_actor::behavior_type tokenizer_fun(tokenizer_ptr self, std::shared_ptr<const Tokenizer> tokenizer,
                                             token_sink_actor frontend) {
  self->state.tokenizer = std::move(tokenizer);
  self->state.frontend = std::move(frontend);
  return {
      [self](const generate_request_msg& msg) { on_request(self, msg); },
      [self](const token_event_msg& msg) { on_event(self, msg); },
      [self](const abort_msg& msg) { self->send(self->state.scheduler, msg); },
      [self](wire_atom, scheduler_actor scheduler, int32_t max_context) {
        BRIGADE_CHECK(max_context > 0, "the tokenizer caps max_tokens to a known context");
        self->state.scheduler = std::move(scheduler);
        self->state.max_context = max_context;
      },
  };
}

}  // namespace

tokenizer_actor spawn_tokenizer(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                                token_sink_actor frontend) {
  return system.spawn(tokenizer_fun, std::move(tokenizer), std::move(frontend));
}

int max_tokens_within_context(int max_tokens, int64_t n_prompt, int max_context) {
  if (max_tokens <= 0 || max_context <= 0) return max_tokens;  // prompt scoring; no context known
  const int64_t room = std::max<int64_t>(1, static_cast<int64_t>(max_context) - n_prompt);
  return static_cast<int>(std::min<int64_t>(max_tokens, room));
}

}  // namespace brigade
