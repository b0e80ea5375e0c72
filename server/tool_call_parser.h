// Model output → OpenAI tool calls, incrementally: the same parser serves streaming (each piece
// of generated text as it comes) and whole responses (all text, then finish()). Every parser
// gives the same content and calls however the text is split.
//
//   hermes       (chatml / Qwen): <tool_call>{"name": .., "arguments": {..}}</tool_call>, any
//                number, anywhere in the text. A block whose JSON is malformed (or lacks a string
//                "name" and an object "arguments") stays in the content, tags and all; a final
//                block without its closing tag still counts when its JSON is whole. Whitespace
//                at the end of content is held until more content comes, and is dropped when
//                calls were made (so the content is the same however the text is split).
//   llama3_json  (llama-3): the whole output is one or more {"name": .., "parameters": {..}}
//                objects ("arguments" accepted too), separated by ';' or whitespace, optionally
//                after <|python_tag|>; anything else (or any malformed object) and the whole
//                output is content. Held until the end once it starts with '{' or the tag.
//   mistral      [TOOL_CALLS] then a JSON array of {"name", "arguments"} objects (or one such
//                object; pre-v11 tokenizers), or [TOOL_CALLS]name[ARGS]{..} per call, optionally
//                name[CALL_ID]id[ARGS] (v11+). Calls may be anywhere; a malformed one stays
//                content, [TOOL_CALLS] and all.
//   deepseek_v3  <｜tool▁calls▁begin｜> then calls <｜tool▁call▁begin｜>BODY<｜tool▁call▁end｜>
//                (whitespace between), then <｜tool▁calls▁end｜>. BODY is V3's
//                function<｜tool▁sep｜>name\n```json\n{..}\n``` or V3.1's name<｜tool▁sep｜>{..}
//                (both read either). A malformed call stays content, its markers and all.
//   kimi_k2      <|tool_calls_section_begin|> then <|tool_call_begin|>functions.NAME:IDX
//                <|tool_call_argument_begin|>{..}<|tool_call_end|> calls, then
//                <|tool_calls_section_end|>. The model's "functions.NAME:IDX" is the call's id.
//   glm45        <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>..</tool_call>
//                blocks, as hermes's. A value is a string when the tool's parameters schema
//                types the key "string" (taken as written), else JSON when it parses (trimmed),
//                else the trimmed text (as vLLM's glm45, without its Python-literal step).
//   qwen3_coder  (Qwen3-Coder, Qwen3.5): <tool_call><function=NAME><parameter=K>V</parameter>..
//                </function></tool_call> blocks, as hermes's (newlines around the parts as the
//                templates write them). A parameter ends at </parameter>, the next <parameter=
//                or </function>; one newline is dropped from each end of its value. Values as
//                vLLM's qwen3_coder types them by the tool's schema: null for "null"; the text for
//                string types or keys the schema does not list; integer and number types parsed
//                (a whole float as an integer), else the text; booleans true for "true" (any
//                case), else false; objects and arrays (and other types) JSON, else a Python
//                literal, else the text.
//   seed_oss     (Seed-OSS): qwen3_coder's calls, values typed alike, between <seed:tool_call> and
//                </seed:tool_call> (vLLM's seed_oss).
//   minimax_m2   (MiniMax-M2): <minimax:tool_call> then <invoke name="NAME"> blocks of
//                <parameter name="K">V</parameter> (names quoted or not) up to </invoke>, then
//                </minimax:tool_call>. Values as vLLM's minimax_m2 types them (trimmed): null for
//                null / none / nil (any case); else by the types the tool's schema allows for the
//                key (type, a list of types, enum values' types, anyOf / oneOf / allOf), tried
//                integer, number (a whole one as an integer), boolean (true/1/yes/on,
//                false/0/no/off), object or array (JSON), string; a key the schema does not list
//                is a string; nothing that fits: JSON, else the text.
//   cohere_command3  (Command R7B, Command A; vLLM's cohere_command3 and cohere_command4):
//                <|START_ACTION|>[{"tool_call_id": .., "tool_name": NAME, "parameters": {..}}, ..]
//                <|END_ACTION|> blocks anywhere in the text, one call per item (the model's
//                tool_call_id dropped: the server gives OpenAI ids). A malformed block stays
//                content, its markers and all. Outside the blocks Cohere's answer markers
//                (<|START_RESPONSE|>, <|END_RESPONSE|>, Command A Reasoning's <|START_TEXT|>,
//                <|END_TEXT|>) and turn markers are dropped, and so are a plan's <|START_THINKING|>
//                and <|END_THINKING|> (its text stays content) when no reasoning parser took the
//                plan out (server/cohere_markers.h).
//   pythonic     (Llama 3.2/4 pythonic templates): the whole output is a Python list of calls with
//                keyword arguments, [f(a=1, b="x"), g()], optionally in <|python_start|> ..
//                <|python_end|>; values are Python literals (as vLLM's ast.literal_eval reads
//                them; no expressions). Held like llama3_json from a first '['; all calls or all content.
//   granite      (IBM Granite 3.x): the whole output is <|tool_call|> (or Granite 3.1's <tool_call>, or
//                neither) then a JSON array of {"name", "arguments"} objects; anything else (or any
//                malformed item) and the whole output is content. Held like llama3_json from a
//                first '[' or marker.
//   lfm2         (LiquidAI LFM2 / LFM2.5): <|tool_call_start|>[f(a=1), g()]<|tool_call_end|> blocks
//                anywhere in the text, each a pythonic list (values Python literals, or JSON's
//                true / false / null as llama.cpp reads them); a malformed block stays content.
//   jamba        (AI21 Jamba; also vLLM's hunyuan_a13b): <tool_calls>[{"name", "arguments"}, ..]
//                </tool_calls> blocks anywhere in the text; a malformed block stays content.
//   phi4_mini_json  (Phi-4-mini, FireFunction v2): the whole output is functools then a JSON array
//                of {"name", "arguments" (or "parameters")} objects, or (llama.cpp's Phi-4-mini template)
//                <|tool_call|>{"name", "arguments"}<|/tool_call|> blocks, whitespace between; else all
//                content (vLLM's finds functools anywhere and drops the text around it; it has no
//                <|tool_call|> form). Held from a first 'f' or '<' of a marker.
//   nemotron_nano_v2  (NVIDIA Nemotron-Nano-v2): <TOOLCALL>[{"name", "arguments"}, ..]</TOOLCALL>
//                blocks anywhere in the text, as jamba's (a single object without the brackets too,
//                as vLLM's nemotron_nano_v2 reads it).
//   apertus      (Apertus): <|tools_prefix|>[{NAME: {..}}, ..]<|tools_suffix|> blocks anywhere in the
//                text, each item an object of one key, the function's name, whose value is the
//                arguments object.
//   ernie45      (ERNIE 4.5): hermes's <tool_call>{..}</tool_call> blocks; outside them the answer's
//                <response> and </response> markers are dropped (and the newlines after </response>).
//   olmo3        (OLMo 3): the whole output is pythonic calls, one a line (or comma-separated),
//                optionally inside <function_calls> .. </function_calls>; values Python literals
//                or JSON's true / false / null. Held from a first '<' of the marker or a first
//                word followed by '('; all calls or all content.
//   gemma4       (Gemma 4): <|tool_call>call:NAME{ARGS}<tool_call|> blocks anywhere in the text (NAME of
//                letters, digits, '_', '-', '.'). ARGS as Gemma 4's template writes them: key:value pairs,
//                bare keys (or <|"|>key<|"|>), strings between <|"|> delimiters taken as written, nested
//                {..} and [..], true / false, null / none / nil (any case), integers, numbers with a '.'
//                (Python's float()), anything else the bare text (vLLM's gemma4 reading; arguments in
//                json.dumps form, keys in the model's order). A block without its <tool_call|> (the
//                output cut off) stays content, as vLLM's whole-output parse leaves it; a stray
//                <|tool_response> (the model's stop after calls) is dropped.
//   openai       (gpt-oss's harmony): commentary messages addressed to=functions.NAME, the body
//                the arguments as written (streamed as it comes); final-channel text is content,
//                the analysis channel is dropped (server/harmony_parser.h has the rules; with the
//                openai_gptoss reasoning parser the server reads calls and reasoning in one pass).
//   forced_named (tool_choice naming a function): all the output is that call's arguments,
//                streamed as it comes.
//   forced_array (tool_choice "required"): the output is a JSON array of {"name", <key>} calls;
//                each call goes out when its object is complete.
// The tagged syntaxes (hermes, mistral, deepseek_v3, kimi_k2, glm45, qwen3_coder, seed_oss, minimax_m2,
// cohere_command3, lfm2, jamba, nemotron_nano_v2, apertus, ernie45, gemma4) release a call when its end
// marker arrives (or at the end of the output, when the text up to there is a whole call), text
// outside calls as it comes (a possible partial marker held back). Arguments of a parsed call
// are rewritten as Python's json.dumps writes them (vLLM's form); forced_named passes the
// model's text through.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::server {

// One piece of a call: the first for an index carries its name (and maybe all its arguments);
// later ones append to the arguments.
struct ToolCallDelta {
  int index = 0;
  std::string name;       // non-empty on the call's first delta only
  std::string arguments;  // JSON text (a piece of it for forced_named)
  std::string id;         // on the first delta: the id the model wrote (kimi_k2, mistral's [CALL_ID]), or empty
};

struct ToolParse {
  std::string content;  // text released as the message's content
  std::vector<ToolCallDelta> calls;
};

enum class ToolParserKind {
  hermes, llama3_json, mistral, deepseek_v3, kimi_k2, glm45, qwen3_coder, seed_oss, minimax_m2, cohere_command3,
  pythonic, granite, lfm2, jamba, phi4_mini_json, olmo3, nemotron_nano_v2, apertus, ernie45, gemma4, openai,
  forced_named, forced_array
};

// A tool the request offers: its name and its parameters JSON schema's text ("" when absent).
struct ToolFunction {
  std::string name;
  std::string parameters;  // in the body's key order
};

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  // The next piece of generated text; returns what may be released now (text that could still
  // turn out to be a call is held back).
  virtual ToolParse feed(std::string_view text) = 0;
  // The output ended: releases or resolves what is held. Call once, after the last feed.
  virtual ToolParse finish() = 0;
  // Calls started so far.
  virtual int n_calls() const = 0;
};

// named: the function (forced_named); key: the arguments member of forced_array's objects
// ("arguments" or "parameters"). max_calls: calls after that many are dropped
// (parallel_tool_calls false: 1). functions: the request's tools (glm45 types values by them).
std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolParserKind kind, int max_calls, std::string named = "",
                                                      std::string key = "arguments",
                                                      std::vector<ToolFunction> functions = {});

// The end of the JSON value starting at s[from] (an object, array or string; brackets counted
// outside strings), exclusive; npos when s ends first. Syntax is not checked.
size_t json_value_end(std::string_view s, size_t from);

}  // namespace brigade::server
