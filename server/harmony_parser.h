// gpt-oss's "harmony" output → reasoning, content and tool calls, incrementally (vLLM's
// `--reasoning-parser openai_gptoss` and `--tool-call-parser openai`). The model writes messages
//
//   <|channel|>analysis<|message|>..<|end|><|start|>assistant<|channel|>final<|message|>..<|return|>
//   ..<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{..}<|call|>
//
// (the prompt ends with `<|start|>assistant`, so the first header has no role; the recipient may
// also stand in the role part: `<|start|>assistant to=functions.NAME<|channel|>commentary ..`).
// The header (role, ` to=RECIPIENT`, `<|channel|>CHANNEL`, a content type such as
// `<|constrain|>json`) runs to `<|message|>`; the body to `<|end|>`, `<|return|>` or `<|call|>`
// (or a `<|start|>` the model wrote without ending the message). Bodies go:
//   - analysis channel (and messages to built-in tools, `to=browser.*`, `to=python`): reasoning;
//   - final channel, commentary without a recipient (a preamble), no or another channel: content;
//   - to=functions.NAME: a call (NAME, the body as its arguments, streamed as it comes) when calls
//     are enabled, else content (as vLLM without a tool parser);
// so the harmony tokens and headers never reach either field. A second message into the same
// field is joined to the first with "\n" (as vLLM joins them). Text the detokenizer keeps of the
// special tokens is what the parser reads, so the request must not skip special tokens.
//
// An output that does not start like a harmony header (a constrained answer: plain JSON) is all
// content. Output cut short (max_tokens) keeps what it has in the field its message was in; a
// header cut short is dropped. The result is the same however the text is cut into pieces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_parser.h"

namespace brigade::server {

struct HarmonyParse {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> calls;  // as ToolCallParser's: the name on a call's first delta
};

// Whether the prompt began the body of a final-channel message (a template that writes
// `<|start|>assistant<|channel|>final<|message|>`): the output is then the answer from its first
// token, and a constrained answer is not delayed (routes.cpp, delay_constraint).
bool harmony_prompt_opens_final(std::string_view prompt);

class HarmonyParser {
 public:
  // prompt: where the output starts (an open `<|start|>assistant` header, or a message whose body
  // the prompt began). calls: messages to functions.NAME become calls, at most max_calls (later
  // ones are dropped); else their bodies are content.
  HarmonyParser(std::string_view prompt, bool calls, int max_calls);

  // The next piece of generated text; returns what may be released now (a possible marker's
  // start is held back).
  HarmonyParse feed(std::string_view text);
  // The output ended: releases what is held. Call once, after the last feed.
  HarmonyParse finish();
  int n_calls() const { return n_calls_; }

 private:
  enum class State { header, body, raw };
  enum class Route { reasoning, content, call, drop };
  // Moves over buf_ once; false when it needs more text.
  bool step(HarmonyParse& out);
  void open_message(std::string_view header, HarmonyParse& out);
  void emit(std::string_view text, HarmonyParse& out);

  bool calls_;
  int max_calls_;
  int n_calls_ = 0;
  State state_ = State::header;
  Route route_ = Route::content;
  bool first_header_ = true;  // still in the header the prompt opened (the output may be plain text)
  bool opened_ = false;       // the current message has released body text
  bool said_reasoning_ = false, said_content_ = false;  // a field has text (the next message adds "\n")
  std::string prompt_header_;  // the header text the prompt wrote (the role, maybe a recipient)
  std::string buf_;
};

}  // namespace brigade::server
