// The reasoning splitter: vLLM's parsers' results (deepseek_r1, qwen3, seed_oss, Cohere's, Mistral's,
// granite, hunyuan_a13b, ernie45, gemma4) for
// whole outputs, and the same result however the output is cut into streamed pieces.
#include "server/reasoning_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace brigade::server {
namespace {

struct Case {
  const char* name;
  ReasoningKind kind;
  std::string prompt, output, reasoning, content;
};

// Expected splits follow vLLM's DeepSeekR1ReasoningParser / Qwen3ReasoningParser (tags dropped,
// nothing trimmed, an unclosed block is all reasoning) and where the prompt leaves the output.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"qwen3_writes_the_block", ReasoningKind::qwen3, "<|im_start|>assistant\n",
       "<think>\nLet me think.\n</think>\n\nThe answer is 4.", "\nLet me think.\n", "\n\nThe answer is 4."},
      {"qwen3_thinking_off_in_the_prompt", ReasoningKind::qwen3, "<|im_start|>assistant\n<think>\n\n</think>\n\n",
       "Hi there </think> stays", "", "Hi there </think> stays"},
      {"qwen3_block_opened_by_the_prompt", ReasoningKind::qwen3, "<|im_start|>assistant\n<think>\n",
       "steps</think>answer", "steps", "answer"},
      {"qwen3_no_block", ReasoningKind::qwen3, "<|im_start|>assistant\n", "Just an answer.", "", "Just an answer."},
      {"qwen3_blanks_before_the_tag", ReasoningKind::qwen3, "assistant\n", "\n <think>x</think>y", "x", "y"},
      {"qwen3_tag_later_is_content", ReasoningKind::qwen3, "assistant\n", "a<think>b</think>c", "",
       "a<think>b</think>c"},
      {"qwen3_cut_while_thinking", ReasoningKind::qwen3, "assistant\n", "<think>still thinking", "still thinking", ""},
      {"qwen3_cut_inside_the_close_tag", ReasoningKind::qwen3, "assistant\n", "<think>abc</thi", "abc</thi", ""},
      {"qwen3_empty_block", ReasoningKind::qwen3, "assistant\n", "<think></think>answer", "", "answer"},
      {"qwen3_not_the_tag", ReasoningKind::qwen3, "assistant\n", "<thinking> is a word", "", "<thinking> is a word"},
      {"qwen3_lone_angle", ReasoningKind::qwen3, "assistant\n", "<", "", "<"},
      {"qwen3_only_blanks", ReasoningKind::qwen3, "assistant\n", "\n\n", "", "\n\n"},
      {"qwen3_earlier_turn_closed", ReasoningKind::qwen3,
       "<think>old</think>old answer<|im_end|>\n<|im_start|>assistant\n", "new", "", "new"},
      {"qwen3_utf8", ReasoningKind::qwen3, "assistant\n", "<think>Zürich? 東京</think>→ Zürich", "Zürich? 東京",
       "→ Zürich"},
      {"r1_thinks_without_the_open_tag", ReasoningKind::deepseek_r1, "<｜Assistant｜>",
       "reasoning here</think>\n\nanswer", "reasoning here", "\n\nanswer"},
      {"r1_repeats_the_tag_of_the_prompt", ReasoningKind::deepseek_r1, "<｜Assistant｜><think>\n", "<think>\nxyz</think>ans",
       "\nxyz", "ans"},
      {"r1_never_closes", ReasoningKind::deepseek_r1, "<｜Assistant｜>", "all reasoning", "all reasoning", ""},
      {"r1_block_closed_by_the_prompt", ReasoningKind::deepseek_r1, "<｜Assistant｜><think>\n\n</think>\n\n",
       "direct answer", "", "direct answer"},
      {"r1_close_tag_twice", ReasoningKind::deepseek_r1, "<｜Assistant｜>", "a</think>b</think>c", "a",
       "b</think>c"},
      // Seed-OSS (vLLM's seed_oss: R1's rule with <seed:think> tags; <think> is text to it).
      {"seed_writes_the_block", ReasoningKind::seed_oss, "<seed:bos>assistant\n",
       "<seed:think>Let me count.</seed:think>There are 3.", "Let me count.", "There are 3."},
      {"seed_thinks_without_the_open_tag", ReasoningKind::seed_oss, "<seed:bos>assistant\n", "steps</seed:think>ans",
       "steps", "ans"},
      {"seed_never_closes", ReasoningKind::seed_oss, "<seed:bos>assistant\n", "<seed:think>cut", "cut", ""},
      {"seed_block_closed_by_the_prompt", ReasoningKind::seed_oss,
       "<seed:bos>assistant\n<seed:think></seed:think>\n", "direct <think>x</think>", "", "direct <think>x</think>"},
      {"seed_cut_inside_the_close_tag", ReasoningKind::seed_oss, "assistant\n", "a</seed:thi", "a</seed:thi", ""},
      {"seed_think_tags_are_text", ReasoningKind::seed_oss, "assistant\n", "<think>a</think>b</seed:think>c",
       "<think>a</think>b", "c"},
      // MiniMax-M2 (vLLM's minimax_m2_append_think): nothing split, `<think>` put before the
      // output whatever it holds (a client sends the thinking back whole).
      {"minimax_append_think", ReasoningKind::minimax_append_think, "]~b]ai\n", "plan</think>\n\nanswer", "",
       "<think>plan</think>\n\nanswer"},
      {"minimax_append_think_empty", ReasoningKind::minimax_append_think, "]~b]ai\n", "", "", "<think>"},
      // Cohere Command R7B / A (vLLM's cohere_command3 / cohere_command4): qwen3's rule over
      // <|START_THINKING|> blocks; the answer's markers (and Cohere's other markers) leave both
      // fields, the action block is the tool-call parser's.
      {"cohere_plan_then_action", ReasoningKind::cohere_command, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
       "<|START_THINKING|>I will call get_time.<|END_THINKING|><|START_ACTION|>[{\"tool_name\": \"get_time\"}]<|END_ACTION|>",
       "I will call get_time.", "<|START_ACTION|>[{\"tool_name\": \"get_time\"}]<|END_ACTION|>"},
      {"cohere_answer_only", ReasoningKind::cohere_command, "<|CHATBOT_TOKEN|>", "<|START_RESPONSE|>It is 4.<|END_RESPONSE|>",
       "", "It is 4."},
      {"cohere_thinks_then_answers", ReasoningKind::cohere_command, "<|CHATBOT_TOKEN|>",
       "<|START_THINKING|>2 + 2<|END_THINKING|><|START_RESPONSE|>4<|END_RESPONSE|>", "2 + 2", "4"},
      {"cohere_command_a_text", ReasoningKind::cohere_command, "<|CHATBOT_TOKEN|>",
       "<|START_THINKING|>x<|END_THINKING|><|START_TEXT|>y<|END_TEXT|><|END_OF_TURN_TOKEN|>", "x", "y"},
      {"cohere_block_opened_by_the_prompt", ReasoningKind::cohere_command, "<|CHATBOT_TOKEN|><|START_THINKING|>",
       "plan<|END_THINKING|><|START_RESPONSE|>a<|END_RESPONSE|>", "plan", "a"},
      {"cohere_history_block_closed", ReasoningKind::cohere_command,
       "<|CHATBOT_TOKEN|><|START_THINKING|><|END_THINKING|><|START_ACTION|>[]<|END_ACTION|><|END_OF_TURN_TOKEN|>"
       "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
       "<|START_RESPONSE|>done<|END_RESPONSE|>", "", "done"},
      {"cohere_markers_in_the_reasoning", ReasoningKind::cohere_command, "<|CHATBOT_TOKEN|>",
       "<|START_THINKING|>a<|START_THINKING|>b<|END_OF_TURN_TOKEN|><|END_THINKING|>c<|START_TEXT|>", "ab", "c"},
      {"cohere_cut_while_thinking", ReasoningKind::cohere_command, "<|CHATBOT_TOKEN|>", "<|START_THINKING|>still <|START_RESP",
       "still <|START_RESP", ""},
      {"cohere_think_tags_are_text", ReasoningKind::cohere_command, "<|CHATBOT_TOKEN|>", "<think>x</think> <|",
       "", "<think>x</think> <|"},
      // Magistral / Ministral 3 Reasoning (vLLM's mistral): qwen3's rule over [THINK] blocks.
      {"mistral_writes_the_block", ReasoningKind::mistral, "[/INST]", "[THINK]Two and two.[/THINK]It is 4.",
       "Two and two.", "It is 4."},
      {"mistral_no_block", ReasoningKind::mistral, "[/INST]", "It is 4.", "", "It is 4."},
      {"mistral_block_opened_by_the_prompt", ReasoningKind::mistral, "[/INST][THINK]", "sum[/THINK]4", "sum", "4"},
      {"mistral_cut_while_thinking", ReasoningKind::mistral, "[/INST]", "[THINK]still [/THI", "still [/THI", ""},
      {"mistral_earlier_turn_closed", ReasoningKind::mistral, "[THINK]a[/THINK]b</s>[INST]q[/INST]", "new", "",
       "new"},
      {"mistral_think_tags_are_text", ReasoningKind::mistral, "[/INST]", "<think>x</think>[", "", "<think>x</think>["},
      // IBM Granite 3.2 (vLLM's granite): its two plain-text phrases, "Here is" or "Here's".
      {"granite_thought_and_response", ReasoningKind::granite, "<|start_of_role|>assistant<|end_of_role|>",
       "Here is my thought process:\nAdd.\nHere is my response:\nIt is 4.", "\nAdd.\n", "\nIt is 4."},
      {"granite_heres", ReasoningKind::granite, "", "Here's my thought process: a Here's my response: b", " a ", " b"},
      {"granite_no_thought", ReasoningKind::granite, "", "It is 4. Here is my response: 4", "", "It is 4. Here is my response: 4"},
      // vLLM's whole-output regex finds the phrases anywhere; its streaming only at the start (as here).
      {"granite_thought_later_is_content", ReasoningKind::granite, "", "Sure. Here is my thought process: x", "",
       "Sure. Here is my thought process: x"},
      {"granite_cut_while_thinking", ReasoningKind::granite, "", "Here is my thought process: hmm Here is", " hmm Here is", ""},
      {"granite_prompt_quoting_the_phrase", ReasoningKind::granite, "Write 'Here is my thought process:' first.", "4", "",
       "4"},
      {"granite_partial_phrase", ReasoningKind::granite, "", "Here is my", "", "Here is my"},
      // Hunyuan-A13B (vLLM's hunyuan_a13b): <think>\n..\n</think>\n<answer>\n..\n</answer>.
      {"hunyuan_think_and_answer", ReasoningKind::hunyuan_a13b, "<|extra_0|>",
       "<think>\nAdd.\n</think>\n<answer>\nIt is 4.\n</answer>", "Add.", "It is 4."},
      {"hunyuan_fast_think", ReasoningKind::hunyuan_a13b, "<|extra_0|>", "<think>\n\n</think>\n<answer>\nHi\n</answer>", "",
       "Hi"},
      {"hunyuan_answer_only", ReasoningKind::hunyuan_a13b, "<|extra_0|>", "Hi\n</answer>", "", "Hi"},
      {"hunyuan_no_answer_end", ReasoningKind::hunyuan_a13b, "<|extra_0|>", "<think>\nA\n</think>\n<answer>\nB", "A", "B"},
      {"hunyuan_prompt_closed_the_block", ReasoningKind::hunyuan_a13b, "<|extra_0|><think>\n\n</think>\n<answer>\n",
       "Hi\n</answer>", "", "Hi"},
      {"hunyuan_cut_while_thinking", ReasoningKind::hunyuan_a13b, "<|extra_0|>", "<think>\nhmm\n</thi", "hmm\n</thi", ""},
      // ERNIE 4.5 thinking (vLLM's ernie45): deepseek_r1's rule, <response> markers and the newlines
      // after </think> and </response> dropped.
      {"ernie45_response_block", ReasoningKind::ernie45, "<|im_start|>assistant\n",
       "abc\n</think>\n\n<response>\ndef\n</response>\n", "abc\n", "\ndef\n"},
      {"ernie45_plain_answer", ReasoningKind::ernie45, "<|im_start|>assistant\n", "abc\n</think>\ndef", "abc\n", "def"},
      {"ernie45_writes_the_open_tag", ReasoningKind::ernie45, "", "<think>abc</think>def", "abc", "def"},
      {"ernie45_cut_while_thinking", ReasoningKind::ernie45, "", "abc</thi", "abc</thi", ""},
      {"ernie45_prompt_closed_the_block", ReasoningKind::ernie45, "<think>\n\n</think>\n\n", "\n<response>hi</response>", "",
       "hi"},
      // Gemma 4 (vLLM's gemma4): <|channel>thought\n .. <channel|>, the "thought\n" label dropped; the
      // thinking prompt ends "<|turn>model\n", the non-thinking one with an empty closed channel.
      {"gemma4_thinks", ReasoningKind::gemma4, "<|turn>model\n",
       "<|channel>thought\nI'm\nthinking<channel|>Hello, world!\nWhat's up?", "I'm\nthinking",
       "Hello, world!\nWhat's up?"},
      {"gemma4_thinking_off", ReasoningKind::gemma4, "<|turn>model\n<|channel>thought\n<channel|>", "Plain answer.", "",
       "Plain answer."},
      {"gemma4_no_channel", ReasoningKind::gemma4, "<|turn>model\n", "Just text <channel|> stays", "",
       "Just text <channel|> stays"},
      {"gemma4_cut_while_thinking", ReasoningKind::gemma4, "<|turn>model\n", "<|channel>thought\nstill", "still", ""},
      // A forced close right after the label (thinking_token_budget 0): no reasoning (vLLM's would
      // be "thought", the label it strips only with its newline).
      {"gemma4_label_then_close", ReasoningKind::gemma4, "<|turn>model\n", "<|channel>thought<channel|>ok", "", "ok"},
      {"gemma4_cut_after_the_label", ReasoningKind::gemma4, "<|turn>model\n", "<|channel>thought", "", ""},
      {"gemma4_before_a_call", ReasoningKind::gemma4, "<|turn>model\n",
       "<|channel>thought\nCall it.<channel|><|tool_call>call:f{}<tool_call|>", "Call it.", "<|tool_call>call:f{}<tool_call|>"},
  };
  return all;
}

ReasoningParse run(const Case& c, const std::vector<std::string>& pieces) {
  ReasoningSplitter s(c.kind, c.prompt);
  ReasoningParse all;
  for (const std::string& p : pieces) {
    ReasoningParse r = s.feed(p);
    all.reasoning += r.reasoning;
    all.content += r.content;
  }
  ReasoningParse tail = s.finish();
  all.reasoning += tail.reasoning;
  all.content += tail.content;
  return all;
}

TEST(ReasoningSplitter, SplitsWholeOutputsAsVllm) {
  for (const Case& c : cases()) {
    const ReasoningParse r = run(c, {c.output});
    EXPECT_EQ(r.reasoning, c.reasoning) << c.name;
    EXPECT_EQ(r.content, c.content) << c.name;
  }
}

TEST(ReasoningSplitter, AnyCutGivesTheSameSplit) {
  for (const Case& c : cases()) {
    std::vector<std::string> bytes;
    for (char ch : c.output) bytes.emplace_back(1, ch);
    ReasoningParse r = run(c, bytes);
    EXPECT_EQ(r.reasoning, c.reasoning) << c.name << " byte by byte";
    EXPECT_EQ(r.content, c.content) << c.name << " byte by byte";
    for (size_t i = 0; i <= c.output.size(); ++i) {
      for (size_t j = i; j <= c.output.size(); ++j) {
        r = run(c, {c.output.substr(0, i), c.output.substr(i, j - i), c.output.substr(j)});
        EXPECT_EQ(r.reasoning, c.reasoning) << c.name << " cut at " << i << ", " << j;
        EXPECT_EQ(r.content, c.content) << c.name << " cut at " << i << ", " << j;
      }
    }
  }
}

// Streaming releases text as soon as it cannot be a tag: a client sees the reasoning as it comes.
TEST(ReasoningSplitter, HoldsBackOnlyWhatMayBeATag) {
  ReasoningSplitter s(ReasoningKind::qwen3, "assistant\n");
  EXPECT_EQ(s.feed("\n<th").reasoning, "");
  ReasoningParse r = s.feed("ink>Step one. </");
  EXPECT_EQ(r.reasoning, "Step one. ");
  EXPECT_FALSE(s.reasoning_done());
  r = s.feed("think>Done");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "Done");
  EXPECT_TRUE(s.reasoning_done());
  r = s.feed(" now.");
  EXPECT_EQ(r.content, " now.");
  EXPECT_EQ(s.finish().content, "");
}

TEST(ReasoningSplitter, ParserNames) {
  EXPECT_EQ(*parse_reasoning_kind("deepseek_r1"), ReasoningKind::deepseek_r1);
  EXPECT_EQ(*parse_reasoning_kind("deepseek-r1"), ReasoningKind::deepseek_r1);
  EXPECT_EQ(*parse_reasoning_kind("qwen3"), ReasoningKind::qwen3);
  EXPECT_EQ(*parse_reasoning_kind("deepseek_v3"), ReasoningKind::qwen3);
  EXPECT_EQ(*parse_reasoning_kind("glm45"), ReasoningKind::qwen3);
  EXPECT_EQ(*parse_reasoning_kind("none"), ReasoningKind::none);
  EXPECT_EQ(*parse_reasoning_kind("auto", {.think_close = true}), ReasoningKind::qwen3);
  EXPECT_EQ(*parse_reasoning_kind("auto", {}), ReasoningKind::none);
  // gpt-oss: harmony's channels (server/harmony_parser.h), picked by auto before `</think>`.
  EXPECT_EQ(*parse_reasoning_kind("openai_gptoss"), ReasoningKind::openai_gptoss);
  EXPECT_EQ(*parse_reasoning_kind("auto", {.harmony_channel = true}), ReasoningKind::openai_gptoss);
  EXPECT_EQ(*parse_reasoning_kind("auto", {.think_close = true, .harmony_channel = true}), ReasoningKind::openai_gptoss);
  // Seed-OSS: by name, or by auto where the vocabulary has `</seed:think>` and no `</think>`.
  EXPECT_EQ(*parse_reasoning_kind("seed_oss"), ReasoningKind::seed_oss);
  EXPECT_EQ(*parse_reasoning_kind("auto", {.seed_close = true}), ReasoningKind::seed_oss);
  EXPECT_EQ(*parse_reasoning_kind("auto", {.think_close = true, .seed_close = true}), ReasoningKind::qwen3);
  // Cohere's: by auto where the vocabulary has `<|END_THINKING|>` and none of the tags above.
  EXPECT_EQ(*parse_reasoning_kind("auto", {.cohere_close = true}),
            ReasoningKind::cohere_command);
  EXPECT_EQ(*parse_reasoning_kind("auto", {.think_close = true, .cohere_close = true}), ReasoningKind::qwen3);
  EXPECT_EQ(*parse_reasoning_kind("auto", {.seed_close = true, .cohere_close = true}), ReasoningKind::seed_oss);
  // MiniMax-M2: minimax_m2 is R1's rule (the model writes only `</think>`); append_think its own.
  EXPECT_EQ(*parse_reasoning_kind("minimax_m2"), ReasoningKind::deepseek_r1);
  EXPECT_EQ(*parse_reasoning_kind("minimax_m2_append_think"), ReasoningKind::minimax_append_think);
  EXPECT_EQ(*parse_reasoning_kind("cohere_command3"), ReasoningKind::cohere_command);
  EXPECT_EQ(*parse_reasoning_kind("cohere-command4"), ReasoningKind::cohere_command);
  // Mistral's: by name, or by auto where the vocabulary has `[/THINK]` and none of the tags above.
  EXPECT_EQ(*parse_reasoning_kind("mistral"), ReasoningKind::mistral);
  // Gemma 4's: by name, or by auto where the vocabulary has `<|channel>` and `<channel|>` (after
  // harmony's `<|channel|>`, before `</think>`); its tags are the splitter's and the thinking
  // budget's markers.
  EXPECT_EQ(*parse_reasoning_kind("gemma4"), ReasoningKind::gemma4);
  EXPECT_EQ(*parse_reasoning_kind("auto", {.gemma_channel = true}), ReasoningKind::gemma4);
  EXPECT_EQ(*parse_reasoning_kind("auto", {.think_close = true, .gemma_channel = true}), ReasoningKind::gemma4);
  EXPECT_EQ(*parse_reasoning_kind("auto", {.harmony_channel = true, .gemma_channel = true}),
            ReasoningKind::openai_gptoss);
  EXPECT_EQ(reasoning_open_tag(ReasoningKind::gemma4), "<|channel>");
  EXPECT_EQ(reasoning_close_tag(ReasoningKind::gemma4), "<channel|>");
  EXPECT_EQ(*parse_reasoning_kind("granite"), ReasoningKind::granite);
  EXPECT_EQ(*parse_reasoning_kind("hunyuan_a13b"), ReasoningKind::hunyuan_a13b);
  EXPECT_EQ(*parse_reasoning_kind("ernie45"), ReasoningKind::ernie45);
  EXPECT_EQ(*parse_reasoning_kind("glm47"), ReasoningKind::qwen3);
  EXPECT_EQ(*parse_reasoning_kind("mimo"), ReasoningKind::qwen3);
  EXPECT_EQ(*parse_reasoning_kind("auto", {.mistral_close = true}),
            ReasoningKind::mistral);
  EXPECT_EQ(*parse_reasoning_kind("auto", {.think_close = true, .mistral_close = true}), ReasoningKind::qwen3);
  auto bad = parse_reasoning_kind("r1");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(bad.status().message().find("valid: deepseek_r1, qwen3"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace brigade::server
