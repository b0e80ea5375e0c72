// Chat templates of the built-in families, written out in C++: the prompt text a family's
// tokenizer_config.json "chat_template" renders for a list of messages. They render only when
// named explicitly (`--chat-template llama-3`); a model's own template always runs as Jinja
// (models/chat_template_jinja.h, chosen by models/model_chat_template.h).
// The text includes the family's BOS/EOS markers as special-token text, so encode it with
// add_bos = false (the tokenizers turn special-token text into ids).
//
//   llama-2:  <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] ...
//   llama-3:  <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>...
//   chatml:   <|im_start|>{role}\n{content}<|im_end|>\n...   (Qwen2/Qwen3; no default system)
//   deepseek: <｜begin▁of▁sentence｜>{system}\n\nUser: {user}\n\nAssistant: {assistant}<｜end▁of▁sentence｜>...
//   harmony:  gpt-oss (OpenAI's harmony format, models/chat_template_harmony.h):
//             <|start|>system<|message|>{identity, dates, Reasoning: effort, channels}<|end|>
//             <|start|>developer<|message|># Instructions\n\n{system}<|end|><|start|>user<|message|>..
// Contents are trimmed of surrounding whitespace for llama-2 and llama-3, as their templates do.
//
// Tool calling (OpenAI `tools`, assistant `tool_calls`, `role: tool` results) is rendered by the
// families that have a tool format, as their Hugging Face templates render it (given the tools as
// the client sent them and each call's arguments as a parsed object, as vLLM passes them):
//   chatml:  Qwen2.5's "hermes" format: a "# Tools" system block listing the tools inside
//            <tools></tools>, calls as <tool_call>\n{"name": .., "arguments": ..}\n</tool_call>,
//            results as <tool_response> blocks in a user turn. Unlike Qwen2.5 no default system
//            text is added when there is no system message (as Qwen3's template does).
//   llama-3: Llama 3.1's JSON tool calling: the date system header, the tools (indented JSON) in
//            the first user message, a call as {"name": .., "parameters": ..}, a result as an
//            `ipython` turn holding the content as a JSON string. One call per assistant turn.
//   harmony: the tools as TypeScript-like types in the developer message's `namespace functions`,
//            calls as commentary messages to=functions.NAME ending <|call|>, results as
//            <|start|>functions.NAME to=assistant<|channel|>commentary<|message|>..<|end|>.
// llama-2 and deepseek have no tool format here and refuse them (unsupported).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace brigade {

enum class ChatFamily { llama2, llama3, chatml, deepseek, harmony };

// How a model writes tool calls in its output (what the server parses; vLLM's
// --tool-call-parser names in parentheses):
//   hermes        <tool_call>{"name", "arguments"}</tool_call> (Qwen2.5, Qwen3)
//   llama3_json   a bare {"name", "parameters"} object (Llama 3.1/3.2)
//   mistral       [TOOL_CALLS][{"name", "arguments"}, ...] (v0.3) or [TOOL_CALLS]name[ARGS]{..} (v11+)
//   deepseek_v3   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{..}\n```<｜tool▁call▁end｜>..
//   deepseek_v31  the same section, each call name<｜tool▁sep｜>{..}
//   glm45         <tool_call>name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>..</tool_call> (GLM-4.5/4.6)
//   qwen3_coder   <tool_call>\n<function=name>\n<parameter=k>\nv\n</parameter>..</function>\n</tool_call>
//   seed_oss      (Seed-OSS) qwen3_coder's calls between <seed:tool_call> and </seed:tool_call>
//                 (Qwen3-Coder, Qwen3.5)
//   kimi_k2       <|tool_calls_section_begin|><|tool_call_begin|>functions.name:i<|tool_call_argument_begin|>{..}<|tool_call_end|>..
//   openai        gpt-oss's harmony: <|start|>assistant<|channel|>commentary to=functions.name
//                 <|constrain|>json<|message|>{..}<|call|> (server/harmony_parser.h)
//   pythonic      [name(key=value, ...), ...] (Llama 3.2/4 pythonic templates; only by name: no
//                 template detection)
//   minimax_m2    <minimax:tool_call><invoke name="NAME"><parameter name="K">V</parameter>..</invoke>..
//                 </minimax:tool_call> (MiniMax-M2 / M2.1 / M2.5)
//   cohere_command3  <|START_ACTION|>[{"tool_call_id": "0", "tool_name": NAME, "parameters": {..}}, ..]
//                 <|END_ACTION|> (Command R7B, Command A; also Command A Reasoning's, vLLM's cohere_command4)
//   granite       (IBM Granite 3.x) the whole output <|tool_call|>[{"name", "arguments"}, ..] (the marker optional)
//   lfm2          (LiquidAI LFM2 / LFM2.5) <|tool_call_start|>[name(key=value, ..), ..]<|tool_call_end|>
//   jamba         (AI21 Jamba) <tool_calls>[{"name", "arguments"}, ..]</tool_calls>; only by name
//   hunyuan_a13b  (Hunyuan-A13B) the same blocks as jamba; only by name
//   phi4_mini_json  (Phi-4-mini, FireFunction v2) the whole output functools[{"name", "arguments"}, ..],
//                 or <|tool_call|>{"name", "arguments"}<|/tool_call|> blocks (llama.cpp's Phi-4-mini template)
//   olmo3         (OLMo 3) name(key=value, ..) calls one a line, optionally in <function_calls>
//                 .. </function_calls>; only by name
//   nemotron_nano_v2  (NVIDIA Nemotron-Nano-v2) <TOOLCALL>[{"name", "arguments"}, ..]</TOOLCALL>
//   apertus       (Swiss AI Apertus) <|tools_prefix|>[{NAME: {..}}, ..]<|tools_suffix|>
//   minimax       (MiniMax-M1 / Text-01) <tool_calls>\n{"name", "arguments"}\n..</tool_calls>, one
//                 call a line (read by jamba's parser, which takes either form)
//   ernie45       (Baidu ERNIE 4.5) hermes's <tool_call> blocks; <response> .. </response> around the
//                 answer dropped; only by name
//   gemma4        (Google Gemma 4) <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1,..}<tool_call|> blocks:
//                 bare keys, strings between <|"|> delimiters, numbers, true/false, null, nested {..} and [..]
// none: the template has no call syntax brigade parses (tools are refused).
enum class ChatToolSyntax {
  none, hermes, llama3_json, mistral, deepseek_v3, deepseek_v31, glm45, kimi_k2, pythonic, openai, qwen3_coder,
  seed_oss, minimax_m2, cohere_command3, granite, lfm2, jamba, hunyuan_a13b, olmo3, phi4_mini_json, nemotron_nano_v2,
  apertus, ernie45, minimax, gemma4
};

// vLLM's parser name of a syntax ("none" for none), and back: each name above, "glm47" (GLM-4.7
// writes the GLM-4.5 syntax without the newline, which glm45 reads too), "llama4_pythonic" (as
// pythonic, which reads Llama 4's <|python_start|> wrapper), "qwen3_xml" (vLLM's other parser of
// the qwen3_coder syntax), "cohere_command4" (Command A Reasoning: the same action blocks, its
// answer in <|START_TEXT|> rather than <|START_RESPONSE|>, which cohere_command3 reads too),
// "granite4" (Granite 4.0's <tool_call>{..}</tool_call> blocks: hermes), "nemotron_json" (vLLM's
// NemotronJSONToolParser, the same <TOOLCALL> parser as nemotron_nano_v2);
// unsupported listing the names for any other.
const char* tool_syntax_name(ChatToolSyntax syntax);
Expected<ChatToolSyntax> parse_tool_syntax(const std::string& name);

struct ChatToolCall {
  std::string id;         // the client's id (no supported template renders it)
  std::string name;       // the function called
  std::string arguments;  // the arguments object as JSON text (OpenAI's `arguments` string)
};

// A part of a message's content: "text" (with its text) or "image" (an image the request
// carries; the template writes the model's image marker for it).
struct ChatPart {
  std::string type;
  std::string text = {};
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool" ("developer": harmony only)
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // assistant: the calls it made
  std::string tool_call_id = {};              // tool: the call this result answers
  // Not empty when the content has images: its parts in order (content then holds the texts
  // joined), which a Jinja template sees as the list [{type: text, text}, {type: image}] that
  // transformers passes; the built-in families take no images.
  std::vector<ChatPart> parts = {};
  // assistant: the turn's reasoning as the client sent it back (`reasoning_content`, or vLLM's
  // newer `reasoning`); unset when the message has none. Jinja templates read it as
  // message.reasoning_content, .reasoning and .thinking (the names real templates use); the
  // harmony rendering writes it as gpt-oss's template writes `thinking` (an analysis message).
  std::optional<std::string> reasoning = {};
};

// "llama-2", "llama-3", "chatml" (alias "qwen"), "deepseek", "harmony" (alias "gpt-oss");
// unsupported listing them otherwise.
Expected<ChatFamily> parse_chat_family(const std::string& name);
const char* chat_family_name(ChatFamily family);

// Renders messages; add_generation_prompt appends the opening of the assistant's turn. `tools`:
// each one tool object's JSON text ({"type": "function", "function": {...}}), keys in the order
// the client sent them (the templates print them). invalid_argument for an unknown role, a system
// message that is not first, invalid UTF-8, a call's arguments that are not a JSON object, or what
// the family's template refuses (Llama 3.1: several calls in one turn, tools without a user
// message); unsupported for tools, calls or results given to a family without a tool format.
// What the harmony rendering takes besides the messages (the other families take nothing).
struct ChatRenderOptions {
  std::string reasoning_effort;  // low, medium or high; empty: medium (gpt-oss's default)
  std::string date;              // "Current date:" (YYYY-MM-DD); empty: today's (UTC)
};

Expected<std::string> apply_chat_template(ChatFamily family, std::span<const ChatMessage> messages,
                                          std::span<const std::string> tools, bool add_generation_prompt,
                                          const ChatRenderOptions& options = {});
Expected<std::string> apply_chat_template(ChatFamily family, std::span<const ChatMessage> messages,
                                          bool add_generation_prompt);

// Whether the family renders tools and parses calls (chatml, llama-3, harmony).
bool chat_family_has_tools(ChatFamily family);

}  // namespace brigade
