// brigade's embedding API: create an engine from a topology, submit requests, receive streamed
// token events, cancel.
//
//   auto engine = brigade::Engine::create({.model_path = "models/stories260K.bin"});
//   if (!engine) { fprintf(stderr, "%s\n", engine.status().to_string().c_str()); return 1; }
//   brigade::GenerateOptions req;
//   req.prompt = "Once upon a time";
//   auto id = (*engine)->submit(req, [](const brigade::Event& ev) { fputs(ev.text.c_str(), stdout); });
//
// Behind the Engine runs an actor topology (DESIGN.md §3): frontend → tokenizer → scheduler →
// executor, with a KV page manager; with several instances a router sits between the tokenizer
// and their schedulers. Engine methods are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <optional>
#include <string>
#include <vector>

#include "brigade/station.h"
#include "brigade/topology.h"
#include "core/backend.h"
#include "core/beam_search.h"
#include "core/status.h"
#include "models/chat_template.h"
#include "models/classifier.h"
#include "models/lora_adapter.h"
#include "models/model_chat_template.h"
#include "models/pooling.h"

namespace brigade {

struct SamplingOptions {
  float temperature = 1.0f;  // 0 = greedy; must be >= 0
  float top_p = 1.0f;        // (0, 1]
  int top_k = 0;             // 0 = off; must be >= 0
  float min_p = 0.0f;        // [0, 1)
  float repetition_penalty = 1.0f;  // > 0; 1 = off (divides positive logits of seen tokens)
  float presence_penalty = 0.0f;    // [-2, 2]; subtracted once from every generated token's logit
  float frequency_penalty = 0.0f;   // [-2, 2]; subtracted per occurrence in the generated tokens
  std::optional<uint64_t> seed;  // unset: the engine draws one
  // Added to these token ids' logits before sampling (OpenAI `logit_bias`): each bias in
  // [-100, 100], ids distinct and inside the vocabulary. Logprobs stay those of the raw logits.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // vLLM's allowed_token_ids: when not empty, only these ids may be sampled (every other logit is
  // -inf, EOS included unless listed); distinct, inside the vocabulary, at most 4096.
  std::vector<int32_t> allowed_token_ids;
  // vLLM's bad_words: none of these words is generated. Each is tokenized as it is and after a
  // space (by vLLM's rule, bad_word_ids in actors/tokenizer/tokenizer_actor.h); a one-token
  // word's token is never sampled, a longer word's last token is masked whenever the output ends
  // with its other tokens. Needs the model's tokenizer; at most 128 words, none empty.
  std::vector<std::string> bad_words;
};

// What the output must be (OpenAI's response_format, vLLM's guided_json/guided_choice/
// guided_regex/guided_grammar): free text, one JSON object, an instance of
// GenerateOptions::json_schema, exactly one of GenerateOptions::guided_choice, a whole match of
// GenerateOptions::regex (Python `re` syntax, core/regex_syntax.h), or a whole derivation of
// GenerateOptions::grammar (GBNF, llama.cpp's format: core/grammar_syntax.h) (tokens that would break it are masked while sampling; the
// output ends once it is complete, at the model's EOS or a stop id). Needs a model with a
// tokenizer. docs/architecture.md "Schema output" lists the schema keywords enforced.
enum class ResponseFormat { text, json_object, json_schema, choice, regex, grammar };

// An image as the model's vision tower takes it, preprocessed as the model's image processor does
// (models/image_processor.h, models/qwen_image_processor.h). Fixed-size images (Gemma 3): pixels
// [3, S, S] f32, channels first (ModelSummary::image_size), grid 0 x 0. Dynamic-resolution images
// (the Qwen2-VL family): the processor's patch rows [grid_h * grid_w, 3 * temporal * patch * patch]
// f32 for a grid of grid_h x grid_w patches (multiples of image_merge). LLaVA-NeXT's / OneVision's:
// its base tile and tiles [1 + tiles, 3, S, S] f32, grid_h x grid_w its height x width in pixels
// (models/anyres.h); OneVision's image of a prompt with several: its base tile [1, 3, S, S], grid 0 x 0.
// Idefics3's / SmolVLM's: its tiles row by row then the global tile [rows * cols + 1, 3, S, S] f32,
// grid (rows * side) x (cols * side) patches (side = S / patch), or [1, 3, S, S] with grid side x
// side unsplit; the tokenizer station makes each tile an image of its own (one run of image tokens).
// InternVL's and Aya Vision's: GotOcr2's tiles, the thumbnail last, [T, 3, S, S] f32 as a column of
// grid (T * side) x side patches; InternVL's is one run of image tokens, Aya Vision's tiles are split
// by the tokenizer station as Idefics3's are.
struct ImagePixels {
  std::shared_ptr<const std::vector<float>> pixels;
  int grid_h = 0;
  int grid_w = 0;
};

struct GenerateOptions {
  std::string prompt;                // text, tokenized by the model's tokenizer...
  std::vector<int32_t> prompt_ids;   // ...or token ids (when non-empty, `prompt` is ignored)
  bool add_bos = true;               // add the tokenizer's special tokens to a text prompt (BOS first; Tokenizer::encode)
  SamplingOptions sampling;
  int max_tokens = 16;               // >= 1 (0 with prompt_logprobs: score the prompt only, finish
                                     // length); generation also stops at the context length
  ResponseFormat response_format = ResponseFormat::text;
  std::string json_schema;                 // ResponseFormat::json_schema: the schema's JSON text
  std::vector<std::string> guided_choice;  // ResponseFormat::choice: the strings allowed (>= 1)
  std::string regex;                       // ResponseFormat::regex: the pattern the output matches whole
  std::string grammar;                     // ResponseFormat::grammar: GBNF text; output derives from `root`
  // A thinking model's reasoning before the constrained answer (vLLM's and SGLang's structured
  // output with a reasoning parser): the response_format applies only after the model generates
  // reasoning_end_id (`</think>`), the output before it is free. reasoning_start_id >= 0: the
  // output starts as the answer unless its first token is this id (`<think>`), which opens the
  // reasoning; -1: the output starts inside the reasoning (the prompt opened it). Both -1: the
  // constraint applies from the first token. Ids inside the vocabulary, distinct; a
  // reasoning_start_id needs a reasoning_end_id, and either needs a response_format other than text
  // or a thinking_token_budget.
  // reasoning_header_ids (gpt-oss's harmony: `<|channel|>` `final`, with reasoning_end_id
  // `<|message|>`): the reasoning ends at reasoning_end_id only when it comes at most 20 tokens
  // after these ids in a row, so the constraint applies to the final channel's message whatever
  // channels came before it (at most 16 ids, inside the vocabulary; needs a reasoning_end_id).
  int32_t reasoning_end_id = -1;
  int32_t reasoning_start_id = -1;
  std::vector<int32_t> reasoning_header_ids;
  // vLLM's thinking_token_budget: >= 0 caps the reasoning block that reasoning_end_id and
  // reasoning_start_id delimit (as above, with or without a response_format; reasoning_end_id
  // needed, no reasoning_header_ids) at this many generated tokens, not counting the opening
  // reasoning_start_id. The next tokens are then forced to thinking_end_ids one by one (empty: just
  // reasoning_end_id; otherwise at most 64 ids inside the vocabulary, reasoning_end_id last, e.g. a
  // closing sentence before `</think>`), and the output goes on as the answer. -1: no cap.
  int thinking_token_budget = -1;
  std::vector<int32_t> thinking_end_ids;
  int min_tokens = 0;                // [0, max_tokens]: neither EOS, a stop id nor a stop string
                                     // ends the output before this many tokens
  std::vector<int32_t> stop_ids;     // extra stop tokens besides the model's EOS
  std::vector<std::string> stop;     // stop strings (never streamed, even in part)
  bool include_stop_str_in_output = false;  // vLLM's: the stop string that ended the output stays at its end
  // vLLM's truncate_prompt_tokens: > 0 keeps only the prompt's last this many tokens (after
  // tokenizing; the BOS goes with the cut). Not with images.
  int truncate_prompt_tokens = 0;
  bool ignore_eos = false;
  // The first event carries the prompt's token ids (Event::prompt_token_ids; vLLM's return_token_ids).
  bool return_prompt_ids = false;
  // vLLM's skip_special_tokens: false keeps special tokens' text in the output (a tool-call
  // marker such as Mistral's [TOOL_CALLS]), all but the model's EOS.
  bool skip_special_tokens = true;
  int priority = 0;                  // higher is scheduled first
  // vLLM's cache_salt: non-empty, the prefix cache (every tier, and across restarts) keys the
  // prompt's pages with it, so a request reuses only pages computed for the same salt and nobody
  // else can time their way to another tenant's prompts. At most 1024 bytes.
  std::string cache_salt;
  int logprobs = -1;                 // >= 0: report each sampled token's logprob and the
                                     // `logprobs` most likely alternatives (at most 20)
  int prompt_logprobs = -1;          // >= 0: report each prompt token's logprob given the tokens
                                     // before it, its rank and the `prompt_logprobs` most likely
                                     // tokens there (at most 20; vLLM's prompt_logprobs), from the
                                     // raw logits (sampling settings do not apply). The prompt is
                                     // then computed whole: it takes no prefix-cache hits.
  // Key/value tags the topology's stations read (StationRequest::label), e.g. a tenant for a
  // rate limit. At most 16; keys 1-64 bytes and distinct, values at most 256 bytes.
  std::vector<std::pair<std::string, std::string>> labels;
  // The LoRA adapter to run under (EngineOptions::lora_modules' name, or one Engine::load_lora
  // loaded; vLLM's model=<adapter>); empty: the base model. An unknown name is refused naming the
  // loaded ones.
  std::string lora;
  // Images for a model with a vision tower (Engine::model().takes_images()), as
  // Engine::load_image makes them from PNG/JPEG bytes (ImagePixels). A text prompt names where
  // each goes with the model's image marker (Gemma 3's `<start_of_image>`, the Qwen2-VL family's
  // `<|image_pad|>` between `<|vision_start|>` and `<|vision_end|>`; the chat template writes it
  // for an image part), the k-th marker the k-th image; a token-id prompt holds each image's run
  // of image tokens itself (as many as ModelSummary says). Refused for a model without images, or when
  // the counts disagree.
  std::vector<ImagePixels> images;
};

// One prompt token's logprob (Event::prompt_logprobs).
struct PromptLogprob {
  struct Alternative {
    int32_t token = 0;
    float logprob = 0.0f;
    std::string text;
  };
  int32_t token = 0;
  std::string text;              // the token's piece (invalid UTF-8 bytes as U+FFFD; empty
                                 // without a tokenizer)
  std::optional<float> logprob;  // log p(token | the tokens before it); none for the first token
  int rank = 0;                  // 1 + the tokens more likely at this position; 0 for the first
  std::vector<Alternative> top;  // the most likely tokens at this position, best first
};

enum class FinishReason { none, stop, length, abort, error };
const char* finish_reason_name(FinishReason r);

// One streamed update of a request. The last event of a request has finish != none.
struct Event {
  uint64_t request_id = 0;
  std::vector<int32_t> token_ids;  // new ids since the previous event
  std::string text;                // new text since the previous event (complete UTF-8 only)
  std::vector<float> logprobs;     // one per new id when asked
  // When asked: per new id, the most likely tokens and their logprobs, best first.
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;
  // GenerateOptions::prompt_logprobs >= 0: in the request's first event only (with its first
  // token, or its final event when max_tokens is 0), one per prompt token, in order.
  std::vector<PromptLogprob> prompt_logprobs;
  FinishReason finish = FinishReason::none;
  std::string error;               // what was wrong, when finish == error
  StatusCode error_code = StatusCode::ok;  // invalid_argument: the request was bad;
                                           // out_of_resources: the engine is full, retry later
  int64_t retry_after_ms = 0;      // an error to retry later (a station's rate limit): the wait
                                   // it names (the server's Retry-After); 0 = not said
  int prompt_tokens = 0;
  int completion_tokens = 0;
  // Prompt tokens whose KV the prefix cache (or a HiCache tier) served at admission, so they were
  // not computed (vLLM's num_cached_tokens; OpenAI's usage.prompt_tokens_details.cached_tokens).
  // Counted at the first admission; a prefill/decode decode instance counts none.
  int cached_tokens = 0;
  // GenerateOptions::return_prompt_ids: in the request's first event, the prompt's token ids as
  // the model runs them (tokenized, truncated, image tokens expanded).
  std::vector<int32_t> prompt_token_ids;
  // An embedding request's final event (Engine::submit_embed): the pooled vector, not normalized.
  std::vector<float> embedding;
};

// An embedding request (OpenAI's /v1/embeddings, vLLM's pooling runner): the prompt is prefilled
// like a generation's (chunked, sharing steps, the prefix cache, the KV pool), nothing is
// sampled, and its final-norm hidden states are pooled into one vector by the engine's pooling
// (ModelSummary::pooling: last, mean or cls; models/pooling.h). With task classify or score
// (a model with a classifier, ModelSummary::classifier) the last token's hidden state goes
// through the classifier instead: Embedding::values are then the labels' outputs
// (models/classifier.h).
struct EmbedOptions {
  std::string prompt;               // text, tokenized by the model's tokenizer...
  std::vector<int32_t> prompt_ids;  // ...or token ids (when non-empty, `prompt` is ignored)
  bool add_bos = true;              // add the tokenizer's special tokens to a text prompt (BOS first; Tokenizer::encode)
  // > 0: keep the first `dimensions` values (Matryoshka truncation), then normalize them (as
  // sentence-transformers' truncate_dim). At most the hidden size. 0: all of them.
  int dimensions = 0;
  std::optional<bool> normalize;    // L2-normalize; unset: the model's (ModelSummary)
  // > 0: embed only this many tokens: a text's first ones with its special tokens kept (vLLM
  // truncates pooling inputs from the right), token ids their last ones (as GenerateOptions').
  int truncate_prompt_tokens = 0;
  int priority = 0;                 // higher is scheduled first
  std::vector<std::pair<std::string, std::string>> labels;  // as GenerateOptions::labels
  // embed: the pooled embedding; classify: the classifier's outputs under its /classify
  // activation; score: under its cross-encoder activation (a classifier of one label: the score).
  PoolingTask task = PoolingTask::embed;
  bool use_activation = true;       // classify / score: false returns the raw logits (vLLM's use_activation)
  // An encoder's token types (BERT's token_type_ids; ModelSummary::token_types), one per
  // prompt_ids entry: a pair's second segment is type 1 (tokenize_pair gives them). Empty: all 0.
  std::vector<int32_t> token_type_ids;
};

struct Embedding {
  std::vector<float> values;  // embed: [dimensions or hidden_size]; classify / score: [num_labels]
  int prompt_tokens = 0;
};

// A finished classification (Engine::classify).
struct Classification {
  std::vector<float> probs;   // each label's output (the activation's, or the logits without it)
  int label = 0;              // the index of the largest
  std::string label_name;     // its name (config.json's id2label, else LABEL_<i>)
  int prompt_tokens = 0;
};

// Called once per embedding request, on an engine thread: the embedding or what went wrong
// (invalid_argument: the request was bad, e.g. too long for the context; out_of_resources: the
// engine is full, retry later; cancelled: Engine::cancel).
using EmbedCallback = std::function<void(Expected<Embedding>)>;

// A whole finished request, from Engine::generate.
struct Completion {
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<float> logprobs;
  std::vector<PromptLogprob> prompt_logprobs;  // when asked
  FinishReason finish = FinishReason::none;
  int prompt_tokens = 0;
  int cached_tokens = 0;  // Event::cached_tokens
};

using EventCallback = std::function<void(const Event&)>;

// A beam search (vLLM's use_beam_search; transformers' generate(num_beams=beam_width,
// do_sample=False), whose algorithm core/beam_search.h follows step for step): the beam_width
// most likely continuations by length-normalized log-probability, all returned at the end. Each
// step runs one request per live beam (its prompt + its tokens, one token, the raw logprobs of
// its best candidates), as vLLM does, so the prefix cache serves what the beams share. No
// sampling setting applies (the search is deterministic); stop strings, guided output, penalties
// and images are not available here.
struct BeamSearchOptions {
  std::string prompt;               // text, tokenized by the model's tokenizer...
  std::vector<int32_t> prompt_ids;  // ...or token ids (when non-empty, `prompt` is ignored)
  bool add_bos = true;              // as GenerateOptions::add_bos
  int beam_width = 2;               // [1, 32]: beams kept, and returned
  int max_tokens = 16;              // >= 1, capped to what the context leaves the prompt
  float length_penalty = 1.0f;      // finished score = cumulative logprob / length^length_penalty
  EarlyStopping early_stopping = EarlyStopping::heuristic;  // transformers' False / True / "never"
  bool ignore_eos = false;          // the model's EOS ids do not end a beam (stop_ids still do)
  std::vector<int32_t> stop_ids;    // more ids that end a beam (at most 8 in all with the EOS ids)
  // vLLM's: the id that ended a beam stays in its token_ids (and text, unless special and skipped).
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;  // as GenerateOptions'
  int truncate_prompt_tokens = 0;   // as GenerateOptions'
  int logprobs = -1;                // >= 0: each beam's per-token logprobs and this many alternatives
                                    // (<= EngineOptions::max_logprobs)
  int priority = 0;                 // as GenerateOptions' (every step's requests carry it)
  std::string cache_salt;           // as GenerateOptions'
  std::vector<std::pair<std::string, std::string>> labels;  // as GenerateOptions'
  std::string lora;                 // as GenerateOptions'
};

struct Beam {
  std::vector<int32_t> token_ids;   // generated (the end id only with include_stop_str_in_output)
  std::string text;                 // their text (the end id's never, unless include_stop_str_in_output)
  // Per token id, the text it completed (complete UTF-8 only, as a stream's events carry it;
  // the last one also takes what the end flushes): their concatenation is `text`.
  std::vector<std::string> token_texts;
  std::vector<float> logprobs;      // BeamSearchOptions::logprobs >= 0: per token id
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;  // > 0: per token id, best first
  double cumulative_logprob = 0.0;  // of every generated token, the end id included
  double score = 0.0;               // cumulative_logprob / generated length^length_penalty (the rank)
  FinishReason finish = FinishReason::length;  // stop: at an end id (stop_token)
  int32_t stop_token = -1;
};

struct BeamSearchResult {
  std::vector<Beam> beams;  // beam_width of them, best score first
  std::vector<int32_t> prompt_token_ids;  // as run (tokenized, truncated)
  int cached_tokens = 0;    // prompt tokens the prefix cache served to the first step
  int steps = 0;            // search steps (each ran one request per live beam)
};

// Called once, on an engine thread (or the submitting thread when the search ends before its
// first step): the beams, or what went wrong (a step's error; cancelled after Engine::cancel).
using BeamSearchCallback = std::function<void(Expected<BeamSearchResult>)>;

// One turn of a conversation for Engine::format_chat: role, content, and for tool calling the
// assistant's tool_calls and a tool result's tool_call_id (models/chat_template.h).
using ChatTurn = ChatMessage;

struct ModelSummary {
  std::string arch;
  int vocab_size = 0;
  int max_context = 0;
  int64_t n_params = 0;
  int64_t weight_bytes = 0;
  bool has_tokenizer = false;
  // The ids that end a generation unless ignore_eos (the model's generation_config / config
  // EOS ids; with remote instances only, the tokenizer's).
  std::vector<int32_t> eos_ids;
  int hidden_size = 0;  // an embedding's size; 0 when unknown (instances in other processes)
  // Embedding requests: the pooling and normalization (EngineOptions::pooling, else the model
  // dir's sentence-transformers files, else last + normalize); pooling none when the model's
  // files ask for a pooling brigade does not run (pooling_error says which).
  Pooling pooling = Pooling::last;
  bool normalize_embeddings = true;
  std::string pooling_error;
  // A sequence classifier (a *ForSequenceClassification checkpoint, or a causal LM that
  // --hf-overrides turns into one): what classify and score requests run. Null otherwise.
  std::shared_ptr<const ClassifierHead> classifier;
  // Whether the model generates: false for a *ForSequenceClassification checkpoint (no lm_head)
  // and for an encoder; generation requests are then refused.
  bool generates = true;
  // An encoder (BERT, RoBERTa, XLM-RoBERTa: models/bert.h): it pools (the first token's or the
  // mean hidden state; cls unless its sentence-transformers files say otherwise) and classifies
  // over its first token; prompts of at most max_context tokens run whole. token_types: how many
  // token types it takes (EmbedOptions::token_type_ids; 0 for decoders).
  bool encoder = false;
  int token_types = 0;
  std::vector<LoraModule> loras;  // the LoRA adapters served at start (EngineOptions::lora_modules);
                                  // Engine::loras() says which are served now
  int max_loras = 0;              // adapter slots (0: LoRA off; EngineOptions::lora_enabled)
  int max_logprobs = 20;          // top logprobs a request may ask for (EngineOptions::max_logprobs, resolved)
  // A local instance takes images (a vision tower it runs, GenerateOptions::images): fixed-size
  // ones (Gemma 3) of image_size x image_size pixels, tokens_per_image tokens each; or
  // dynamic-resolution ones (the Qwen2-VL family, image_merge > 0): (grid_h / image_merge) *
  // (grid_w / image_merge) tokens each (Mistral 3's Pixtral: a break after each row of them too).
  // All 0 when no instance does.
  int image_size = 0;
  int tokens_per_image = 0;
  int image_merge = 0;
  bool takes_images() const { return image_size > 0 || image_merge > 0; }
};

// Why generation requests to a model that does not generate (ModelSummary::generates: a
// *ForSequenceClassification checkpoint, an encoder) are refused: unsupported with what it
// serves instead; ok when it generates.
Status check_generates(const ModelSummary& model);

struct EngineOptions {
  std::string model_path;  // overrides topology.model when non-empty
  // vLLM's --tokenizer: the tokenizer (and the chat template its tokenizer_config.json holds) from
  // this directory or file instead of the model's: a GGUF served with its original Hugging Face
  // tokenizer, a checkpoint that ships none. Empty: the model's.
  std::string tokenizer_path;
  TopologyConfig topology = default_topology();
  // Makes the executor's backend; unset: from the topology's device (cpu, cuda). Lets an embedding
  // application bring its own Backend (tests and benchmarks use a no-op backend this way).
  std::function<std::unique_ptr<Backend>()> backend_factory;
  bool progress = true;  // model loading progress on a terminal
  // The chat template to serve with instead of the model's own (models/model_chat_template.h):
  // a Jinja file's path, an inline Jinja template, or a built-in family name. Empty: the model's.
  std::string chat_template;
  // The application's station types by the name a topology's `stations:` entry gives as
  // `type:` (include/brigade/station.h). A name here takes the place of a built-in of that name.
  std::map<std::string, StationFactory> station_types;
  // Embedding requests' pooling and normalization; unset: what the model dir's
  // sentence-transformers files say (models/pooling.h read_pooling_config).
  std::optional<Pooling> pooling;
  std::optional<bool> normalize_embeddings;
  // vLLM's --hf-overrides, the keys that make a classifier of a checkpoint (models/classifier.h
  // check_hf_overrides): e.g. {"architectures": ["Qwen3ForSequenceClassification"],
  // "classifier_from_token": ["no", "yes"], "is_original_qwen3_reranker": true}. Empty: none.
  std::string hf_overrides;
  // Dynamic-resolution images (the Qwen2-VL family's processor; vLLM's --mm-processor-kwargs
  // min_pixels / max_pixels): bounds on an image's pixel count after smart_resize; 0 keeps the
  // model's preprocessor_config.json. Engine::load_image then also lowers max_pixels to what the
  // tower takes (16384 patches: 4096 tokens), so that every image it loads can run (chunked
  // prefill splits an image larger than a step over several); it logs the bounds it uses at start.
  int64_t image_min_pixels = 0;
  int64_t image_max_pixels = 0;
  // LoRA adapters every instance serves (vLLM's --enable-lora --lora-modules; models/lora.h):
  // loaded at start, at most max_loras of them, each of rank <= max_lora_rank. In-process
  // instances of dense Llama-family models without tensor parallelism.
  std::vector<LoraModule> lora_modules;
  int max_loras = 8;
  int max_lora_rank = 16;
  // Keeps max_loras adapter slots so that Engine::load_lora can add adapters while serving
  // (vLLM's --enable-lora), with or without lora_modules at start. lora_modules alone enable it too.
  bool enable_lora = false;
  bool lora_enabled() const { return enable_lora || !lora_modules.empty(); }
  // The most top logprobs a request may ask for, generated or prompt ones (vLLM's --max-logprobs,
  // 20 by default there too); -1: the whole vocabulary. More is refused (invalid_argument).
  int max_logprobs = 20;
  // Seeds the generator that draws the seed of every request that gives none (vLLM's --seed): the
  // same requests in the same order after a restart sample the same tokens. Unset: a random
  // device seeds it. A request's own GenerateOptions::sampling.seed always wins.
  std::optional<uint64_t> seed;
};

// Counters since the engine started (monotonic; read them twice and subtract for a window).
// Engine::stats() sums them over the engine's instances (gauges, counters, KV pages, tier bytes,
// roofline times, and the peaks: the instances' ceilings together); Engine::instance_stats()
// gives each instance's own.
struct EngineStats {
  uint64_t steps = 0;            // steps the executor ran
  uint64_t step_tokens = 0;      // tokens computed in those steps (prompt chunks + decodes)
  uint64_t executor_us = 0;      // executor time inside steps: forward, logits read-back, sampling
  uint64_t requests_done = 0;    // requests that ended (any finish reason)
  uint64_t prompt_tokens = 0;    // prompt tokens of admitted requests
  uint64_t generated_tokens = 0; // tokens sampled
  uint64_t preemptions = 0;      // sequences preempted to free KV pages
  // Gauges (the value now):
  int n_running = 0;             // sequences in the running set
  int n_waiting = 0;             // requests queued
  int kv_pages_used = 0;         // pages held by sequences and by the prefix cache
  int kv_pages_total = 0;
  // Prefix cache (radix tree over the KV pool):
  uint64_t cache_lookups = 0;        // admissions that consulted it
  uint64_t cache_lookup_tokens = 0;  // the tokens they looked up (vLLM's prefix_cache_queries)
  uint64_t cache_hit_tokens = 0;     // prompt tokens served from cached pages (prefill saved)
  uint64_t cache_partial_hit_tokens = 0;  // of those, rows copied from partly used pages
  uint64_t cache_in_batch_waits = 0;      // admissions that waited for another request's prefill of a
                                          // prefix they share (cache.in_batch_prefix_tokens)
                                          // (cache.partial_pages)
  uint64_t cache_loaded_tokens = 0;  // prompt tokens loaded from lower tiers
  uint64_t cache_evicted_pages = 0;
  int cache_pages = 0;               // pages the cache holds now (part of kv_pages_used)
  int cache_idle_pages = 0;          // of those, the ones no running request uses (evictable)
  // Recurrent models (state-space, hybrids): snapshots of sequences' states at page boundaries
  // that joined the cache, admissions that started from one, and how many it holds now.
  uint64_t cache_state_saves = 0;
  uint64_t cache_state_restores = 0;
  int cache_state_snapshots = 0;
  // HiCache tiers below the device (all 0 when none is configured):
  bool tiers = false;
  uint64_t tier_saved_pages = 0;     // pages sent down from the device
  uint64_t tier_host_hit_pages = 0;  // pages loaded back from host memory
  uint64_t tier_disk_hit_pages = 0;  // pages loaded back from disk
  uint64_t tier_host_bytes_in = 0, tier_host_bytes_out = 0, tier_host_bytes_used = 0;
  uint64_t tier_disk_bytes_in = 0, tier_disk_bytes_out = 0, tier_disk_bytes_used = 0;
  uint64_t tier_disk_corrupt = 0;    // disk entries that failed their checksum (dropped, recomputed)
  bool tier_disk_degraded = false;   // an I/O error turned the disk tier off (serving goes on)
  // The roofline per step (DESIGN.md §9): what the steps cost by the roofline model (bytes they
  // must move, flops they must do), the ceilings measured at start-up (0 when `roofline: false`),
  // and per bound (the ceiling that allowed the step the least time) the steps, their executor
  // time and that allowed time; allowed / executor time is how close the steps came to the roof.
  uint64_t step_flops = 0;
  uint64_t step_bytes = 0;
  double peak_bytes_per_s = 0.0;
  double peak_flops_per_s = 0.0;
  uint64_t memory_bound_steps = 0, compute_bound_steps = 0;
  uint64_t memory_bound_executor_us = 0, compute_bound_executor_us = 0;
  double memory_bound_roofline_us = 0.0, compute_bound_roofline_us = 0.0;
  // Speculative decoding (scheduler.speculative; all 0 when off): drafts sent for verification
  // and accepted (acceptance rate = accepted / draft), (sequence, step) pairs that verified drafts,
  // drafting attempts that found nothing, steps the load rule planned without drafts (the last
  // step was compute-bound; too many decoding sequences), and times a sequence stopped drafting
  // for a while because its acceptance was below min_acceptance.
  uint64_t spec_draft_tokens = 0;
  uint64_t spec_accepted_tokens = 0;
  uint64_t spec_verify_seqs = 0;
  uint64_t spec_misses = 0;
  uint64_t spec_off_compute_bound_steps = 0, spec_off_batch_steps = 0;
  uint64_t spec_seqs_turned_off = 0;
  // method draft_model: draft model forwards, the wall time in them (the scheduler's thread), and
  // the tokens whose K/V the draft computed (drafts plus what it prefilled or re-fed).
  uint64_t spec_draft_forwards = 0, spec_draft_forward_us = 0, spec_draft_fed_tokens = 0;
  // PD separation (docs/architecture.md "PD separation"; all 0 without it): sequences handed off
  // by prefill instances and received by decode instances, their KV bytes, the summed transfer
  // latency (first token at the prefill scheduler -> pages written on the decode instance; mean
  // = pd_transfer_us / pd_transfers_in) and imports that failed (those sequences recomputed).
  // pd_shm_transfers_in: of pd_transfers_in, those whose bytes came in a shared-memory segment
  // (pd.transfer shm) rather than inline or by an in-process handle.
  uint64_t pd_transfers_out = 0, pd_bytes_out = 0;
  uint64_t pd_transfers_in = 0, pd_bytes_in = 0, pd_shm_transfers_in = 0;
  uint64_t pd_transfer_us = 0;
  uint64_t pd_import_failures = 0;
};

// One instance of a data-parallel engine (TopologyConfig::instances).
struct InstanceStats {
  std::string name;
  std::string role = "both";  // both | prefill | decode (InstanceConfig::role)
  bool serving = true;  // false once its scheduler stopped (seen by the router, so always true
                        // with one instance): the router sends it nothing more
  EngineStats stats;    // this instance's own counters and gauges
  // Requests the router sent here, by the reason it chose this instance (all 0 with one
  // instance: it has no router). A decode instance's hand-offs count as load.
  uint64_t routed_cache = 0, routed_load = 0, routed_round_robin = 0;
};

// What one of the topology's stations did (Engine::station_stats), in topology order. Every
// request that reached it is, or will be, counted once in passed, released, rejected or
// cancelled, or is held now.
struct StationStats {
  std::string name;
  std::string type;
  uint64_t requests = 0;   // requests that reached the station
  uint64_t passed = 0;     // sent on at once
  uint64_t released = 0;   // held, then sent on
  uint64_t rejected = 0;   // answered with an error (at once or while held)
  uint64_t cancelled = 0;  // cancelled by the client while held
  int held = 0;            // held now
};

// What Engine::reset_prefix_cache removed, summed over the instances.
struct PrefixCacheReset {
  int freed_pages = 0;        // KV pool pages the prefix caches held, given back
  int kept_pages = 0;         // cached pages that running requests still share: they stay cached
  uint64_t host_entries = 0;  // pages dropped from the HiCache host tiers
  uint64_t disk_entries = 0;  // pages dropped from the disk tiers (with disk only)
};

class Engine {
 public:
  // Loads the model and starts the topology. Errors: a bad topology, a missing or corrupt model.
  static Expected<std::unique_ptr<Engine>> create(const EngineOptions& options);
  virtual ~Engine() = default;

  // Validates and queues a request; returns its id. on_event runs on an engine thread, once per
  // update, the last time with finish != none; it must not block for long. Parameter errors are
  // returned here; errors found later (a prompt too long once tokenized) arrive as an event with
  // finish == error.
  virtual Expected<uint64_t> submit(const GenerateOptions& request, EventCallback on_event) = 0;
  // Ends a request early (its last event has finish == abort). Unknown ids are ignored.
  virtual void cancel(uint64_t request_id) = 0;
  // Submits and waits for the whole completion.
  Expected<Completion> generate(const GenerateOptions& request);
  // Validates and starts a beam search; returns its id (Engine::cancel takes it). on_done runs
  // once. Parameter errors (and a prompt that leaves no room in the context) are returned here.
  virtual Expected<uint64_t> submit_beam_search(const BeamSearchOptions& request, BeamSearchCallback on_done) = 0;
  // Starts a beam search and waits for its beams.
  Expected<BeamSearchResult> beam_search(const BeamSearchOptions& request);
  // Validates and queues an embedding request; returns its id (Engine::cancel takes it). on_done
  // runs once, on an engine thread. Parameter errors are returned here; errors found later (a
  // prompt too long once tokenized) reach on_done.
  virtual Expected<uint64_t> submit_embed(const EmbedOptions& request, EmbedCallback on_done) = 0;
  // Submits and waits for the embedding.
  Expected<Embedding> embed(const EmbedOptions& request);
  // A classification: `request` with task classify, its outputs and the winning label.
  // unsupported when the model has no classifier.
  Expected<Classification> classify(EmbedOptions request);

  virtual const ModelSummary& model() const = 0;

  // LoRA adapters while serving (vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter;
  // EngineOptions::enable_lora). load_lora reads the adapter into a free slot of every instance
  // and returns once requests can name it; errors: unsupported when the engine was started
  // without LoRA slots or has remote instances, invalid_argument for an empty name or one
  // already loaded, out_of_resources when max_loras adapters are loaded (or a slot is still
  // draining), and read_lora_adapter's errors for the files (nothing changes then).
  // unload_lora takes the name away at once: new requests naming it are refused, requests
  // already running finish under it, and its slot (weights, cached prefixes) is freed when the
  // last of them ends (or when a later load takes the slot). not_found for a name not loaded.
  // `replace` (vLLM's load_inplace) takes a loaded name too: the new adapter loads into another
  // slot (one must be free), then takes the name in one step, so requests never find the name
  // missing; requests already running finish under the old one, which then drains as unloaded.
  // Both block the calling thread (not an engine callback's).
  virtual Status load_lora(const LoraModule& module, bool replace = false) = 0;
  virtual Status unload_lora(const std::string& name) = 0;
  // The adapters requests can name now, in slot order.
  virtual std::vector<LoraModule> loras() const = 0;

  virtual EngineStats stats() const = 0;
  // Per instance, in topology order (one entry for a single-instance engine).
  virtual std::vector<InstanceStats> instance_stats() const = 0;
  // Per station of the topology, in its order (empty without stations).
  virtual std::vector<StationStats> station_stats() const = 0;
  // Leading tokens of prompt_ids whose KV the prefix cache holds now (asks the scheduler of the
  // instance the router would send this prompt to now; 0 when the cache is off). What a request
  // with this prompt would not have to prefill.
  virtual Expected<int> cached_prefix_tokens(const std::vector<int32_t>& prompt_ids) const = 0;
  // Empties every instance's prefix cache (vLLM's /reset_prefix_cache, SGLang's /flush_cache):
  // the cached prefixes no running request shares give their pages back to the KV pool, the
  // HiCache host tiers are emptied and, with `disk`, the disk tiers too (whose pages otherwise
  // outlive restarts); the router's affinity starts over. Requests keep running; later prompts
  // are computed afresh. Errors: an instance (or node) that does not answer, or a disk tier that
  // fails to clear; the message names them, and every other part is reset all the same.
  virtual Expected<PrefixCacheReset> reset_prefix_cache(bool disk = false) = 0;
  // Renders a conversation into prompt text with the model's own Jinja template, or the configured
  // one (Jinja, or a built-in family by name; models/model_chat_template.h). The text carries
  // the template's BOS marker, so submit it with add_bos = false. not_found when the model has no
  // chat template; invalid_argument for a bad role or order, what the template refuses
  // (raise_exception) or fails on, or a template that does not parse; out_of_resources when a
  // Jinja template runs past its limits. `tools`: each a tool object's JSON text
  // ({"type": "function", "function": {...}}); unsupported for a built-in family without a tool
  // format. `template_kwargs`: empty, or a JSON object whose members become template variables
  // (vLLM's chat_template_kwargs: enable_thinking, tools_in_user_message, ...; `documents`, a list
  // of objects, is what RAG templates read, as transformers' documents argument); invalid_argument
  // when it is not an object, names a variable the render sets itself (messages, tools,
  // add_generation_prompt, bos_token, eos_token), or meets a built-in family.
  virtual Expected<std::string> format_chat(const std::vector<ChatTurn>& messages, const std::vector<std::string>& tools,
                                            bool add_generation_prompt, const std::string& template_kwargs) const = 0;
  Expected<std::string> format_chat(const std::vector<ChatTurn>& messages, const std::vector<std::string>& tools,
                                    bool add_generation_prompt) const {
    return format_chat(messages, tools, add_generation_prompt, "");
  }
  Expected<std::string> format_chat(const std::vector<ChatTurn>& messages, bool add_generation_prompt) const {
    return format_chat(messages, {}, add_generation_prompt, "");
  }
  // How the rendering ends, as vLLM's chat fields say: ChatEnding::continue_final
  // (continue_final_message) renders without the generation prompt and cuts the text right after
  // the final message's, as transformers does, so the output continues that message (an assistant
  // reply the client began); invalid_argument when the template changes that text or there are no
  // messages. `with`: render with this template (compile_chat_template's) instead of the model's.
  enum class ChatEnding { generation_prompt, none, continue_final };
  Expected<std::string> format_chat(const std::vector<ChatTurn>& messages, const std::vector<std::string>& tools,
                                    ChatEnding ending, const std::string& template_kwargs,
                                    const ChatTemplate* with = nullptr) const {
    if (ending == ChatEnding::continue_final && messages.empty())
      return invalid_argument("continue_final_message needs a final message to continue");
    const bool generation_prompt = ending == ChatEnding::generation_prompt;
    auto text = with ? with->apply(messages, tools, generation_prompt, template_kwargs)
                     : format_chat(messages, tools, generation_prompt, template_kwargs);
    if (!text || ending != ChatEnding::continue_final) return text;
    return cut_after_final_message(std::move(*text), messages.back());
  }
  // The model's chat template (what format_chat renders with; its tool_syntax() decides how tool
  // calls are parsed); the format_chat errors when there is none.
  virtual Expected<ChatTemplate> chat_template() const = 0;
  // A Jinja chat template from its text, rendering bos_token and eos_token as the model's
  // template does (vLLM's per-request chat_template); invalid_argument (with the line) when it
  // does not parse, not_found when the model has no tokenizer.
  virtual Expected<ChatTemplate> compile_chat_template(const std::string& source) const = 0;
  // The model's tokenizer, outside any request: the ids a text prompt is encoded to (add_bos as
  // in GenerateOptions; special-token text becomes its id), and the text of ids (special tokens
  // as their text). What vLLM's /tokenize and /detokenize answer. not_found when the model has no
  // tokenizer; invalid_argument for text that is not UTF-8 or an id outside the vocabulary.
  // Thread-safe; it does not wait for running requests.
  virtual Expected<std::vector<int32_t>> tokenize(const std::string& text, bool add_bos) const = 0;
  // A pair of texts as Hugging Face's tokenizer(text=a, text_pair=b) encodes it, special tokens
  // included (Tokenizer::encode_pair): what a cross-encoder scores. Errors as tokenize's, and
  // unsupported for a tokenizer whose post-processor has no pair template. token_type_ids, when
  // given, gets each id's token type as the post-processor assigns it (0 for the first segment,
  // 1 for the second where the template says so): what EmbedOptions::token_type_ids takes.
  // max_length > 0 cuts the pair to that many ids as Hugging Face's truncation=True does
  // (longest_first, special tokens kept: models/truncation.h); invalid_argument when it leaves no
  // room beside the special tokens.
  virtual Expected<std::vector<int32_t>> tokenize_pair(const std::string& a, const std::string& b,
                                                       std::vector<int32_t>* token_type_ids = nullptr,
                                                       int max_length = 0) const = 0;
  virtual Expected<std::string> detokenize(const std::vector<int32_t>& ids) const = 0;
  // Each id's string in the vocabulary, as Hugging Face's convert_ids_to_tokens gives it
  // ("Ġworld", "▁world"; vLLM's /tokenize return_token_strs). Errors as detokenize's.
  virtual Expected<std::vector<std::string>> token_strings(const std::vector<int32_t>& ids) const = 0;
  // A PNG or JPEG file's bytes as GenerateOptions::images takes them: decoded and preprocessed as
  // the model's image processor does (its preprocessor_config.json, else Gemma 3's at the
  // tower's size; exact to Pillow and transformers' Gemma3ImageProcessor). unsupported when no
  // instance takes images (or the model's processor file asks for what brigade lacks, named);
  // invalid_argument for bytes that are not a whole PNG or JPEG (the reason named). Thread-safe.
  Expected<ImagePixels> load_image(std::span<const uint8_t> bytes) const { return load_image(bytes, 1); }
  // The same for one of a prompt's `prompt_images` images, where the processor treats a prompt of
  // several images otherwise: LLaVA-OneVision's (LlavaOnevisionImageProcessor) makes each of two
  // or more its base tile alone, the image padded square (grid 0 x 0, models/anyres.h), where a
  // lone image is tiled. Other models' images do not depend on it.
  virtual Expected<ImagePixels> load_image(std::span<const uint8_t> bytes, int prompt_images) const = 0;
};

}  // namespace brigade
