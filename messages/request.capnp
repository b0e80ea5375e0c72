# Client-facing messages: what a frontend submits and what streams back (DESIGN.md §3).
@0x85ded85c59cda5d9;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("brigade::schema");

struct SamplingParams {
  temperature @0 :Float32 = 1.0;   # 0 = greedy
  topP @1 :Float32 = 1.0;          # nucleus mass in (0, 1]
  topK @2 :Int32 = 0;              # 0 = off
  minP @3 :Float32 = 0.0;
  repetitionPenalty @4 :Float32 = 1.0;
  presencePenalty @5 :Float32 = 0.0;
  frequencyPenalty @6 :Float32 = 0.0;
  seed @7 :UInt64;
  hasSeed @8 :Bool;                # false: the engine picks a seed
  logprobs @9 :Int32 = -1;         # -1: none; k >= 0: the sampled token's logprob and the top k
  logitBias @10 :List(LogitBias);  # added to these ids' logits (distinct ids, in the vocabulary)
  minTokens @11 :Int32;            # the stop ids below cannot be sampled before this many tokens
  endIds @12 :List(Int32);         # filled by the scheduler: EOS (unless ignored) + stop ids
  jsonObject @13 :Bool;            # the output must be a JSON object (response_format json_object)
  jsonSchema @14 :Text;            # non-empty: the output is an instance of this JSON schema (text)
  guidedChoice @15 :List(Text);    # non-empty: the output is exactly one of these strings
  promptLogprobs @16 :Int32 = -1;  # -1: none; k >= 0: each prompt token's logprob given the tokens
                                   # before it, and the top k (vLLM's prompt_logprobs). In a
                                   # SeqWork: compute them for this chunk (SeqWork.promptLogprobsFrom)
  regex @17 :Text;                 # non-empty: the output matches this regex whole (guided_regex)
  grammar @18 :Text;               # non-empty: the output derives from this GBNF grammar's root
  reasoningEnd @19 :Int32 = -1;    # >= 0: the constraint starts after this token (`</think>`)
  reasoningStart @20 :Int32 = -1;  # >= 0: the output starts constrained unless its first token is
                                   # this one (`<think>`); -1: it starts inside the reasoning
  allowedTokenIds @22 :List(Int32);  # non-empty: only these ids may be sampled (vLLM's allowed_token_ids)
  reasoningHeader @21 :List(Int32);  # non-empty: reasoningEnd ends the reasoning only within 20
                                     # tokens after these in a row (harmony: `<|channel|>` `final`)
  badWords @23 :List(List(Int32));   # vLLM's bad_words as token ids (GenerateRequest.badWords,
                                     # tokenized): a word's last token is masked whenever the
                                     # output ends with its other tokens
  thinkingBudget @24 :Int32 = -1;    # >= 0: the reasoning block (reasoningStart / reasoningEnd)
                                     # holds at most this many generated tokens, then thinkingEnd
                                     # is forced (vLLM's thinking_token_budget); -1: no cap
  thinkingEnd @25 :List(Int32);      # the forced close, reasoningEnd last
}

struct LogitBias {
  token @0 :Int32;
  bias @1 :Float32;
}

struct StopConditions {
  tokenIds @0 :List(Int32);        # extra stop ids, besides the model's EOS
  strings @1 :List(Text);
  ignoreEos @2 :Bool;
  includeStrings @3 :Bool;         # the stop string that ends the output stays in its text
}

struct GenerateRequest {
  requestId @0 :UInt64;
  prompt :union {
    text @1 :Text;
    tokenIds @2 :List(Int32);
  }
  addBos @3 :Bool = true;          # prepend the model's BOS to a text prompt
  sampling @4 :SamplingParams;
  maxTokens @5 :Int32 = 16;
  stop @6 :StopConditions;
  priority @7 :Int32;              # higher runs first
  labels @8 :List(Label);          # the client's key/value tags (stations read them)
  pooling @9 :Pooling;             # not none: an embedding request (maxTokens 0): the prompt is
                                   # prefilled, nothing is sampled, and its final event carries
                                   # the pooled hidden state (TokenEvent.embedding)
  lora @10 :UInt32;                # LoRA adapter id (0 = base; i = EngineOptions::lora_modules[i - 1])
  skipSpecialTokens @11 :Bool = true;  # false: special tokens' text (but EOS's) stays in the output
  images @12 :List(ImageInput);    # a prompt's images (a model with a vision tower): the
                                   # k-th run of image tokens in the tokenized prompt is images[k];
                                   # a text prompt's k-th begin-of-image token is expanded into
                                   # that run by the tokenizer (as Gemma3Processor / Qwen2VLProcessor do)
  truncatePromptTokens @13 :Int32;  # > 0: the tokenized prompt keeps only its last this many tokens
  badWords @14 :List(Text);        # vLLM's bad_words: the tokenizer turns each into
                                   # sampling.badWords (with and without a leading space)
  returnPromptIds @15 :Bool;       # the first event carries the prompt's token ids (TokenEvent.promptTokenIds)
  cacheSalt @16 :Text;             # vLLM's cache_salt: non-empty, the prefix cache keys the prompt's
                                   # pages with it, so only requests with the same salt share them
  admitGroup @17 :UInt64;          # non-zero: one of admitGroupSize requests sent together (a beam
  admitGroupSize @18 :UInt32;      # search's step): the router sends them to one instance, whose
                                   # scheduler admits none before all have arrived (or a few
                                   # milliseconds passed), so they run in one step
}

struct ImageInput {
  pixels @0 :Data;                 # [3, S, S] f32 little-endian, channels first, normalised as the
                                   # model's image processor does (models/image_processor.h); a
                                   # dynamic-resolution image (Qwen2-VL family): the processor's
                                   # patch rows [gridH * gridW, patch width] (models/model.h StepImage)
  gridH @1 :Int32;                 # patches per column / row of a dynamic image; 0 for fixed-size
  gridW @2 :Int32;
}

# How a pooling request's final-norm hidden states become one vector (models/pooling.h).
enum Pooling {
  none @0;
  last @1;       # the last prompt token's
  mean @2;       # the mean over the prompt
  cls @3;        # the first token's
}

struct Label {
  key @0 :Text;
  value @1 :Text;
}

enum FinishReason {
  none @0;       # more events follow
  stop @1;       # EOS, a stop id or a stop string
  length @2;     # max tokens or the context limit
  abort @3;      # cancelled by the client
  error @4;      # see TokenEvent.error
}

struct TokenLogprob {
  tokenId @0 :Int32;
  logprob @1 :Float32;
  top @2 :List(TopLogprob);
  rank @3 :Int32;                  # prompt logprobs: 1 + the tokens more likely than this one;
                                   # 0 for the first prompt token, which has no logprob
  text @4 :Text;                   # prompt logprobs: the token's piece (set by the tokenizer)
}

struct TopLogprob {
  tokenId @0 :Int32;
  logprob @1 :Float32;
  text @2 :Text;                   # prompt logprobs: the token's piece (set by the tokenizer)
}

struct TokenEvent {
  requestId @0 :UInt64;
  tokenIds @1 :List(Int32);        # new ids since the previous event
  text @2 :Text;                   # new complete UTF-8 text since the previous event
  finishReason @3 :FinishReason;
  logprobs @4 :List(TokenLogprob); # one per new id when asked
  error @5 :Text;                  # set when finishReason is error: what was wrong
  promptTokens @6 :Int32;
  completionTokens @7 :Int32;      # total generated so far
  errorCode @8 :UInt16;            # brigade::StatusCode when finishReason is error
  promptLogprobs @9 :List(TokenLogprob);  # when asked (SamplingParams.promptLogprobs), in the
                                   # request's first event only: one per prompt token, in order;
                                   # the first has rank 0 and no logprob
  retryAfterMs @10 :UInt32;        # an error the client may retry later (a rate limit): how long
                                   # to wait; 0 = not said
  embedding @11 :List(Float32);    # a pooling request's final event: the pooled vector, not
                                   # normalized ([hidden_size])
  cachedTokens @12 :Int32;         # prompt tokens the prefix cache (or a lower tier) served at
                                   # admission (vLLM's num_cached_tokens)
  promptTokenIds @13 :List(Int32); # GenerateRequest.returnPromptIds: in the first event, the prompt
                                   # as the model runs it (tokenized, truncated, images expanded)
}

struct Abort {
  requestId @0 :UInt64;
}
