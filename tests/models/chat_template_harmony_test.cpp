// The built-in harmony rendering (gpt-oss): the complete prompts of OpenAI's harmony guide
// (openai/harmony docs/format.md, "Function calling"), byte for byte, the reasoning effort and
// the tool schemas' TypeScript-like types as the harmony renderer writes them, and bad input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <vector>

#include "models/chat_template.h"
#include "models/chat_template_harmony.h"
#include "models/chat_template_jinja.h"
#include "models/model_chat_template.h"

namespace brigade {
namespace {

// The guide's three functions (its Python example's ToolDescription parameters).
const std::vector<std::string> kGuideTools = {
    R"({"type": "function", "function": {"name": "get_location", "description": "Gets the location of the user."}})",
    R"({"type": "function", "function": {"name": "get_current_weather", "description": "Gets the current weather in the provided location.",
        "parameters": {"type": "object", "properties": {
          "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
          "format": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
        "required": ["location"]}}})",
    R"({"type": "function", "function": {"name": "get_multiple_weathers", "description": "Gets the current weather in the provided list of locations.",
        "parameters": {"type": "object", "properties": {
          "locations": {"type": "array", "items": {"type": "string"}, "description": "List of city and state, e.g. [\"San Francisco, CA\", \"New York, NY\"]"},
          "format": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
        "required": ["locations"]}}})"};

const ChatRenderOptions kGuideOptions{"high", "2025-06-28"};

// The guide's "complete input example including the definition of two functions" (quoted):
//   <|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
//   Knowledge cutoff: 2024-06
//   Current date: 2025-06-28
//
//   Reasoning: high
//
//   # Valid channels: analysis, commentary, final. Channel must be included for every message.
//   Calls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># Instructions
//
//   Use a friendly tone.
//
//   # Tools
//
//   ## functions
//
//   namespace functions {
//
//   // Gets the location of the user.
//   type get_location = () => any;
//
//   // Gets the current weather in the provided location.
//   type get_current_weather = (_: {
//   // The city and state, e.g. San Francisco, CA
//   location: string,
//   format?: "celsius" | "fahrenheit", // default: celsius
//   }) => any;
//
//   // Gets the current weather in the provided list of locations.
//   type get_multiple_weathers = (_: {
//   // List of city and state, e.g. ["San Francisco, CA", "New York, NY"]
//   locations: string[],
//   format?: "celsius" | "fahrenheit", // default: celsius
//   }) => any;
//
//   } // namespace functions<|end|><|start|>user<|message|>What is the weather like in SF?<|end|><|start|>assistant
const std::string kGuidePrompt =
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n"
    "Current date: 2025-06-28\n\n"
    "Reasoning: high\n\n"
    "# Valid channels: analysis, commentary, final. Channel must be included for every message.\n"
    "Calls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># Instructions\n\n"
    "Use a friendly tone.\n\n"
    "# Tools\n\n"
    "## functions\n\n"
    "namespace functions {\n\n"
    "// Gets the location of the user.\n"
    "type get_location = () => any;\n\n"
    "// Gets the current weather in the provided location.\n"
    "type get_current_weather = (_: {\n"
    "// The city and state, e.g. San Francisco, CA\n"
    "location: string,\n"
    "format?: \"celsius\" | \"fahrenheit\", // default: celsius\n"
    "}) => any;\n\n"
    "// Gets the current weather in the provided list of locations.\n"
    "type get_multiple_weathers = (_: {\n"
    "// List of city and state, e.g. [\"San Francisco, CA\", \"New York, NY\"]\n"
    "locations: string[],\n"
    "format?: \"celsius\" | \"fahrenheit\", // default: celsius\n"
    "}) => any;\n\n"
    "} // namespace functions<|end|><|start|>user<|message|>What is the weather like in SF?<|end|>";

std::string render(const std::vector<ChatMessage>& m, const std::vector<std::string>& tools,
                   const ChatRenderOptions& o = kGuideOptions) {
  auto s = apply_chat_template(ChatFamily::harmony, m, tools, true, o);
  EXPECT_TRUE(s.has_value()) << s.status().to_string();
  return s ? *s : "";
}

TEST(ChatTemplateHarmony, RendersTheGuidesFunctionCallingPrompt) {
  const std::vector<ChatMessage> m = {{"system", "Use a friendly tone."}, {"user", "What is the weather like in SF?"}};
  EXPECT_EQ(render(m, kGuideTools), kGuidePrompt + "<|start|>assistant");
  // A developer message is the instructions too.
  EXPECT_EQ(render({{"developer", "Use a friendly tone."}, m[1]}, kGuideTools), kGuidePrompt + "<|start|>assistant");
}

TEST(ChatTemplateHarmony, RendersTheGuidesCallAndResult) {
  // The guide's input "with the complete content" after the call (quoted from its end):
  //   ...<|start|>user<|message|>What is the weather like in SF?<|end|><|start|>assistant<|channel|>analysis<|message|>
  //   Need to use function get_weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather
  //   <|constrain|>json<|message|>{"location":"San Francisco"}<|call|><|start|>functions.get_weather to=assistant
  //   <|channel|>commentary<|message|>{"sunny": true, "temperature": 20}<|end|><|start|>assistant
  // (no line breaks; the space before <|constrain|> is the guide's).
  std::vector<ChatMessage> m = {{"system", "Use a friendly tone."}, {"user", "What is the weather like in SF?"}};
  m.push_back({"assistant", "Need to use function get_weather.", {{"call_1", "get_weather", R"({"location":"San Francisco"})"}}});
  m.push_back({"tool", R"({"sunny": true, "temperature": 20})", {}, "call_1"});
  EXPECT_EQ(render(m, kGuideTools),
            kGuidePrompt +
                "<|start|>assistant<|channel|>analysis<|message|>Need to use function get_weather.<|end|>"
                "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                "{\"location\":\"San Francisco\"}<|call|>"
                "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{\"sunny\": true, \"temperature\": 20}<|end|>"
                "<|start|>assistant");
}

TEST(ChatTemplateHarmony, ChatWithoutToolsOrInstructions) {
  // The guide's multi-turn example: an earlier answer is a final message (its analysis dropped),
  // ending <|end|> in history. Without tools the channels line has no "Calls to these tools".
  const std::vector<ChatMessage> m = {{"user", "What is 2 + 2?"}, {"assistant", "2 + 2 = 4."}, {"user", "What about 9 / 2?"}};
  EXPECT_EQ(render(m, {}, {"", "2025-06-28"}),
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
            "Knowledge cutoff: 2024-06\nCurrent date: 2025-06-28\n\nReasoning: medium\n\n"
            "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"
            "<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|end|>"
            "<|start|>user<|message|>What about 9 / 2?<|end|><|start|>assistant");
  // Instructions alone: the guide's developer message "# Instructions\n\n{instructions}".
  const std::string with_system = render({{"system", "Be brief."}, {"user", "Hi"}}, {}, {"low", "2025-01-02"});
  EXPECT_NE(with_system.find("Reasoning: low\n\n"), std::string::npos) << with_system;
  EXPECT_NE(with_system.find("<|end|><|start|>developer<|message|># Instructions\n\nBe brief.<|end|><|start|>user<|message|>Hi<|end|>"),
            std::string::npos)
      << with_system;
  // No generation prompt.
  auto closed = apply_chat_template(ChatFamily::harmony, m, {}, false, {"", "2025-06-28"});
  ASSERT_TRUE(closed.has_value());
  EXPECT_TRUE(closed->ends_with("What about 9 / 2?<|end|>"));
}

TEST(ChatTemplateHarmony, SeveralCallsAndResultsByPlace) {
  std::vector<ChatMessage> m = {{"user", "Weather and time?"}};
  m.push_back({"assistant", "", {{"a", "get_weather", R"({"city": "Oslo"})"}, {"b", "get_time", "{}"}}});
  m.push_back({"tool", "rain", {}, ""});  // no id: the first call's result
  m.push_back({"tool", "noon", {}, "b"});
  const std::string s = render(m, {}, {"", "2025-06-28"});
  EXPECT_NE(s.find("<|start|>user<|message|>Weather and time?<|end|>"
                   "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}<|call|>"
                   "<|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}<|call|>"
                   "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>rain<|end|>"
                   "<|start|>functions.get_time to=assistant<|channel|>commentary<|message|>noon<|end|><|start|>assistant"),
            std::string::npos)
      << s;
}

TEST(ChatTemplateHarmony, AChainOfThoughtIsDroppedOnceAnswered) {
  std::vector<ChatMessage> m = {{"user", "Weather?"}};
  m.push_back({"assistant", "Need get_weather.", {{"a", "get_weather", "{}"}}});
  m.push_back({"tool", "rain", {}, "a"});
  const std::string pending = render(m, {}, {"", "2025-06-28"});
  EXPECT_NE(pending.find("<|channel|>analysis<|message|>Need get_weather.<|end|>"), std::string::npos) << pending;
  m.push_back({"assistant", "It rains."});
  m.push_back({"user", "Thanks"});
  const std::string answered = render(m, {}, {"", "2025-06-28"});
  EXPECT_EQ(answered.find("Need get_weather."), std::string::npos) << answered;
  EXPECT_NE(answered.find("<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}<|call|>"
                          "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>rain<|end|>"
                          "<|start|>assistant<|channel|>final<|message|>It rains.<|end|>"),
            std::string::npos)
      << answered;
}

TEST(ChatTemplateHarmony, TheConfiguredFamilyTakesReasoningEffort) {
  auto t = load_chat_template("", "harmony", {});
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_EQ(t->tool_syntax(), ChatToolSyntax::openai);
  const std::vector<ChatMessage> m = {{"user", "Hi"}};
  auto high = t->apply(m, {}, true, R"({"reasoning_effort": "high"})");
  ASSERT_TRUE(high.has_value()) << high.status().to_string();
  EXPECT_NE(high->find("\n\nReasoning: high\n\n"), std::string::npos) << *high;
  EXPECT_FALSE(t->apply(m, {}, true, R"({"reasoning_effort": "max"})").has_value());
  EXPECT_FALSE(t->apply(m, {}, true, R"({"enable_thinking": false})").has_value());
  // The other built-in families ignore it.
  auto llama = load_chat_template("", "llama-3", {});
  ASSERT_TRUE(llama.has_value());
  EXPECT_EQ(*llama->apply(m, {}, true, R"({"reasoning_effort": "high"})"), *llama->apply(m, {}, true));
}

TEST(ChatTemplateHarmony, SchemaTypesAsTheHarmonyRendererWritesThem) {
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "n": {"type": "integer", "default": 3},
      "ratio": {"type": ["number", "null"]},
      "flag": {"type": "boolean", "nullable": true},
      "name": {"type": "string", "default": "x", "title": "Name", "examples": ["a", "b"]},
      "nested": {"type": "object", "description": "Inner.", "properties": {"k": {"type": "string"}}, "required": ["k"]},
      "any": {},
      "list": {"type": "array"},
      "choice": {"description": "One of two.", "oneOf": [{"type": "string"}, {"type": "number", "description": "A count."}]}},
    "required": ["n"]})");
  EXPECT_EQ(harmony_typescript(schema, ""),
            "{\n"
            "n: number, // default: 3\n"
            "ratio?: number | null,\n"
            "flag?: boolean | null,\n"
            "// Name\n//\n// Examples:\n// - \"a\"\n// - \"b\"\n"
            "name?: string, // default: \"x\"\n"
            "// Inner.\n"
            "nested?:     // Inner.\n{\n    k: string,\n    },\n"
            "any?: any,\n"
            "list?: Array<any>,\n"
            "// One of two.\n"
            "choice?:\n"
            " | string\n"
            " | number // A count.\n"
            ",\n"
            "}");
}

TEST(ChatTemplateHarmony, GptOssOwnTemplateTeachesTheOpenAISyntax) {
  // Lines of gpt-oss's chat_template.jinja (openai/gpt-oss-120b, llama.cpp's models/templates copy):
  // the call and the result it renders.
  const std::string excerpt =
      R"({{- "<|start|>assistant to=" }}
            {{- "functions." + tool_call.name + "<|channel|>commentary " }}
        {{- "<|start|>functions." + last_tool_call.name }}
        {{- " to=assistant<|channel|>commentary<|message|>" + message.content|tojson + "<|end|>" }})";
  EXPECT_EQ(detect_tool_syntax(excerpt), ChatToolSyntax::openai);
  EXPECT_EQ(detect_tool_syntax("{{ '<|channel|>final<|message|>' }}"), ChatToolSyntax::none);
}

TEST(ChatTemplateHarmony, BadInputIsRefused) {
  const std::vector<ChatMessage> chat = {{"user", "Hi"}};
  EXPECT_EQ(apply_chat_template(ChatFamily::harmony, chat, {}, true, {"extreme", ""}).status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(apply_chat_template(ChatFamily::harmony, chat, std::vector<std::string>{"not json"}, true).status().code(),
            StatusCode::invalid_argument);
  const std::vector<ChatMessage> orphan = {{"user", "Hi"}, {"tool", "42"}};
  EXPECT_EQ(apply_chat_template(ChatFamily::harmony, orphan, {}, true).status().code(), StatusCode::invalid_argument);
  const std::vector<ChatMessage> bad_args = {{"user", "Hi"}, {"assistant", "", {{"a", "f", "[1]"}}}};
  EXPECT_EQ(apply_chat_template(ChatFamily::harmony, bad_args, {}, true).status().code(), StatusCode::invalid_argument);
  const std::vector<ChatMessage> late = {{"user", "Hi"}, {"developer", "x"}};
  EXPECT_EQ(apply_chat_template(ChatFamily::harmony, late, {}, true).status().code(), StatusCode::invalid_argument);
  // developer is harmony's role only.
  EXPECT_EQ(apply_chat_template(ChatFamily::chatml, std::vector<ChatMessage>{{"developer", "x"}}, true).status().code(),
            StatusCode::invalid_argument);
  EXPECT_EQ(*parse_chat_family("gpt-oss"), ChatFamily::harmony);
  EXPECT_STREQ(chat_family_name(ChatFamily::harmony), "harmony");
  EXPECT_EQ(*parse_tool_syntax("openai"), ChatToolSyntax::openai);
}

}  // namespace
}  // namespace brigade
