// Model output → OpenAI `reasoning_content` and `content`, incrementally (vLLM's
// `--reasoning-parser`, SGLang's "separate reasoning"): thinking models write their reasoning
// between `<think>` and `</think>`, then the answer. The same splitter serves streaming (each
// piece of text as it comes) and whole responses (all text, then finish()), and gives the same
// result however the text is cut into pieces.
//
// Where the output starts is read from the prompt, since templates open or close the block
// themselves (Qwen3 with enable_thinking=false ends the prompt with `<think>\n\n</think>\n\n`;
// DeepSeek-R1 and QwQ end it with `<think>\n`):
//   - the prompt's last `<think>` is still open: the output starts in the reasoning;
//   - else deepseek_r1: the output starts in the reasoning (R1 may think without writing
//     `<think>`), unless the prompt ends with a closed block (`</think>` then whitespace);
//   - else qwen3: the output is content, unless (after whitespace) it starts with `<think>`.
// The reasoning runs to the first `</think>`; both tags are dropped and nothing is trimmed (as
// vLLM: content after `</think>\n\n` keeps its newlines). Output that ends inside the reasoning
// (max_tokens) is all reasoning, with no content.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "server/cohere_markers.h"

namespace brigade::server {

// openai_gptoss: gpt-oss's harmony channels (server/harmony_parser.h), not `<think>` blocks: the
// server splits those with a HarmonyParser, never with a ReasoningSplitter. seed_oss: Seed-OSS's
// `<seed:think>` ... `</seed:think>` blocks, by deepseek_r1's rule (vLLM's seed_oss: the model
// may think without writing the open tag). minimax_append_think (vLLM's minimax_m2_append_think):
// nothing is split; the output is all content with `<think>` put before it, so that a client
// sending the message back gives MiniMax-M2 its thinking whole (the constraint waits for
// `</think>` by deepseek_r1's rule). cohere_command (vLLM's cohere_command3 and cohere_command4):
// Cohere Command R7B's and A's `<|START_THINKING|>` ... `<|END_THINKING|>` plans, by qwen3's rule
// (the generation prompt leaves the model to open the block); both fields have Cohere's other
// markers removed (server/cohere_markers.h: the answer's `<|START_RESPONSE|>` or `<|START_TEXT|>`
// and their ends, turn markers), since the server keeps special tokens' text for this kind.
// mistral (vLLM's mistral): Magistral's and Ministral 3 Reasoning's `[THINK]` ... `[/THINK]`
// blocks, by qwen3's rule; both are special tokens of Mistral's tokenizers, so the server keeps
// special tokens' text for this kind too. Unlike vLLM's parser, text before a `[THINK]` makes the
// rest content (tags and all), and a `[/THINK]` without its `[THINK]` stays in the content.
// granite (vLLM's granite; IBM Granite 3.2's thinking): the output opens "Here is my thought
// process:" (or "Here's ..."), then the reasoning, then "Here is my response:" (or "Here's ...") and
// the answer; plain text, not special tokens, so only the output is read (the prompt's text is not:
// a system prompt may quote the phrases), by qwen3's rule. hunyuan_a13b (vLLM's hunyuan_a13b):
// Hunyuan-A13B's "<think>\n" .. "\n</think>\n<answer>\n" .. "\n</answer>", by qwen3's rule; the
// answer's closing "\n</answer>" is dropped from the content (text after it stays content, as
// vLLM's streaming gives it). ernie45 (vLLM's ernie45): ERNIE 4.5 thinking models' `<think>` ..
// `</think>` by deepseek_r1's rule, then the answer, optionally in `<response>` .. `</response>`:
// both markers are dropped, and so are the newlines right after `</think>` and after
// `</response>` (vLLM's streaming rules; its whole-output parse keeps the newline after
// `</think>` when there is no `<response>`). gemma4 (vLLM's gemma4): Gemma 4's thought channel,
// `<|channel>` then the label "thought" and a newline (dropped with the tag, as vLLM strips
// "thought\n"; the label alone too, where vLLM would keep it as reasoning), the reasoning up to
// `<channel|>`, by qwen3's rule (its template opens no block: with enable_thinking false it ends
// the prompt with an empty, closed one); both tags are special tokens of Gemma 4's tokenizer, so
// the server keeps special tokens' text for this kind.
enum class ReasoningKind {
  none, deepseek_r1, qwen3, openai_gptoss, seed_oss, minimax_append_think, cohere_command, mistral, granite,
  hunyuan_a13b, ernie45, gemma4
};

// The tags that open and close a kind's block: `<think>` and `</think>`, or Seed-OSS's, or Cohere's
// (granite: "Here is my thought process:" and "Here is my response:"; "Here's" is read too).
std::string_view reasoning_open_tag(ReasoningKind kind);
std::string_view reasoning_close_tag(ReasoningKind kind);

// Which reasoning tags a model's vocabulary holds as single tokens (what `auto` reads).
struct ReasoningVocab {
  bool think_close = false;       // `</think>`
  bool harmony_channel = false;   // gpt-oss's `<|channel|>`
  bool seed_close = false;        // `</seed:think>`
  bool cohere_close = false;      // `<|END_THINKING|>` (Command R7B, Command A)
  bool mistral_close = false;     // `[/THINK]` (Magistral, Ministral 3)
  bool gemma_channel = false;     // Gemma 4's `<|channel>` and `<channel|>`
};

// A `--reasoning-parser` name: deepseek_r1 (also QwQ, and minimax_m2: MiniMax-M2 writes only
// `</think>`), qwen3, deepseek_v3 and glm45 (qwen3's rule: they think only when the template opens
// the block or the model writes `<think>`), seed_oss, minimax_m2_append_think, cohere_command3 and
// cohere_command4 (both cohere_command), mistral, gemma4, openai_gptoss, none. `auto`, from the
// vocabulary: openai_gptoss when it has harmony's `<|channel|>`, else gemma4 when it has Gemma 4's
// `<|channel>` and `<channel|>`, else qwen3's rule when it has `</think>`, else seed_oss when it
// has `</seed:think>`, else cohere_command when it has `<|END_THINKING|>`, else mistral when it has
// `[/THINK]`, else none. Also granite, hunyuan_a13b, ernie45 (by name only: their tags are plain
// text, or `<think>` as qwen3's), and vLLM's aliases of brigade's rules glm47 (qwen3's, as glm45)
// and mimo (qwen3's). invalid_argument lists the valid names.
Expected<ReasoningKind> parse_reasoning_kind(std::string_view name, const ReasoningVocab& vocab = {});

// Where a model's output starts, read from the prompt as above (kind: a `<think>` kind, or
// seed_oss with its own tags).
enum class ReasoningStart {
  maybe,      // content, unless it opens with `<think>` (after blanks)
  reasoning,  // inside the block
  content,    // the prompt closed the block
};
// kind must not be none.
ReasoningStart reasoning_start(ReasoningKind kind, std::string_view prompt);
// The prompt ends with a closed block (the kind's close tag, then blanks): Qwen3's
// enable_thinking=false.
bool prompt_closes_reasoning(std::string_view prompt, ReasoningKind kind = ReasoningKind::qwen3);

struct ReasoningParse {
  std::string reasoning;  // text released as reasoning_content
  std::string content;    // text released as content
};

class ReasoningSplitter {
 public:
  // kind: a `<think>` kind (not none, not openai_gptoss).
  ReasoningSplitter(ReasoningKind kind, std::string_view prompt);

  // The next piece of generated text; returns what may be released now (a piece that could
  // still be the start of a tag is held back).
  ReasoningParse feed(std::string_view text);
  // The output ended: releases what is held. Call once, after the last feed.
  ReasoningParse finish();
  // The reasoning block has been closed (what comes now is content).
  bool reasoning_done() const { return state_ == State::content; }

 private:
  enum class State {
    maybe,      // qwen3 before any non-blank text: `<think>` may still open the block
    reasoning,  // inside the block: up to `</think>`
    content,    // after the block, or no block: everything
  };
  // Text released to out.reasoning (reasoning) or out.content: Cohere's without its markers; flush:
  // the end of the field's text (what the marker filter holds goes too).
  void release(ReasoningParse& out, bool reasoning, std::string_view text, bool flush = false);

  State state_;
  std::vector<std::string_view> opens_, closes_;  // the kind's tags (any of these)
  bool released_ = false;  // some text has been released (a leading `<think>` is no longer looked for)
  bool ended_ = false;     // finish() was called: no more text comes
  std::string held_;       // text not yet released: blanks, or a possible tag's start
  std::optional<cohere::MarkerFilter> markers_;  // cohere_command: removes its markers from both fields
  std::optional<cohere::MarkerFilter> answer_markers_;  // hunyuan_a13b, ernie45: from the content only
};

}  // namespace brigade::server
