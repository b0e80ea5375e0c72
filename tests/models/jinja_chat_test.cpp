// Real models' chat templates run by the Jinja interpreter render byte for byte what
// transformers' apply_chat_template renders (tests/fixtures/chat_templates/models.json, from
// scripts/make_chat_template_fixtures.py), refuse what those templates refuse, and the template a
// model is served with is chosen as models/model_chat_template.h says.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <ctime>
#include <set>

#include "models/chat_template_jinja.h"
#include "models/model_chat_template.h"
#include "tests/models/chat_test_util.h"
#include "tests/models/model_test_util.h"

namespace brigade {
namespace {

using ojson = nlohmann::ordered_json;

TEST(JinjaChatTemplate, RealTemplatesRenderLikeTransformers) {
  const ojson data = testing::load_fixture_json("chat_templates/models.json");
  ASSERT_FALSE(data.is_discarded()) << "tests/fixtures/chat_templates/models.json: run scripts/make_chat_template_fixtures.py";
  std::set<std::string> templates, refused;
  int n_continued = 0;
  for (const auto& c : data["cases"]) {
    const std::string name = c["template"].get<std::string>();
    // A case may pass template variables (vLLM's chat_template_kwargs; transformers' **kwargs).
    const std::string kwargs = c.contains("template_kwargs") ? c["template_kwargs"].dump() : "";
    // continue_final_message: transformers cuts the render after the final message's text.
    const bool continued = c.value("continue_final_message", false);
    SCOPED_TRACE(name + " / " + c["conversation"].get<std::string>() +
                 (c["add_generation_prompt"].get<bool>() ? " / gen" : "") + (kwargs.empty() ? "" : " / " + kwargs));
    const ojson& t = data["templates"][name];
    auto tmpl = JinjaChatTemplate::create(t["template"].get<std::string>(), t["bos_token"].get<std::string>(),
                                          t["eos_token"].get<std::string>());
    ASSERT_TRUE(tmpl.has_value()) << tmpl.status().to_string();
    jinja::RenderOptions opts;
    opts.now = [] {
      std::tm tm{};
      tm.tm_year = 124, tm.tm_mon = 6, tm.tm_mday = 26;
      return tm;
    };
    const std::vector<ChatMessage> messages = testing::case_messages(c);
    auto text = tmpl->apply(messages, testing::case_tools(c), c["add_generation_prompt"].get<bool>(), kwargs, opts);
    if (continued && text.has_value()) text = cut_after_final_message(std::move(*text), messages.back());
    if (continued && c.contains("expected")) ++n_continued;
    if (c.contains("expected")) {
      ASSERT_TRUE(text.has_value()) << text.status().to_string();
      EXPECT_EQ(*text, c["expected"].get<std::string>());
      templates.insert(name);
    } else {
      ASSERT_FALSE(text.has_value()) << "transformers raised " << c["error"].get<std::string>();
      EXPECT_EQ(text.status().code(), StatusCode::invalid_argument);
      const std::string want = c["error"].get<std::string>();
      if (want.starts_with("TemplateError: ")) {  // raise_exception: the template's own message
        EXPECT_EQ(text.status().message(), "the chat template refused the request: " + want.substr(15));
      }
      refused.insert(name);
    }
  }
  EXPECT_GE(templates.size(), 9u);
  EXPECT_GE(refused.size(), 3u);
  EXPECT_GE(n_continued, 40);
}

// transformers' continue_final_message cut where the fixtures do not reach: the text found last
// wins, a template that rewrites the message, a message of parts.
TEST(ContinueFinalMessage, CutsAfterTheLastOccurrenceOrSaysWhy) {
  EXPECT_EQ(*cut_after_final_message("<u>ok</u><a>ok</a>", {"assistant", "ok"}), "<u>ok</u><a>ok");
  EXPECT_EQ(*cut_after_final_message("<a>ok</a>", {"assistant", "ok \n"}), "<a>ok") << "trimmed by the template";
  EXPECT_EQ(*cut_after_final_message("<a>ok \n</a>", {"assistant", "ok \n"}), "<a>ok \n") << "kept by the template";
  EXPECT_EQ(*cut_after_final_message("<a>ok</a>", {"assistant", "\u3000ok\u2003"}), "<a>ok")
      << "Python's str.strip: ideographic and em spaces are whitespace";
  EXPECT_EQ(*cut_after_final_message("<a></a>", {"assistant", ""}), "<a></a>") << "nothing to find: the render stays";
  auto rewritten = cut_after_final_message("<a>OK</a>", {"assistant", "ok"});
  ASSERT_FALSE(rewritten.has_value());
  EXPECT_EQ(rewritten.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(rewritten.status().message().find("does not appear"), std::string::npos) << rewritten.status().message();

  ChatMessage parts{"assistant", "first\nsecond"};
  parts.parts = {{"text", "first"}, {"image"}, {"text", "second"}};
  EXPECT_EQ(*cut_after_final_message("[first][img][second][end]", parts), "[first][img][second") << "the last text part";
  parts.parts = {{"image"}};
  auto no_text = cut_after_final_message("[img]", parts);
  ASSERT_FALSE(no_text.has_value());
  EXPECT_NE(no_text.status().message().find("no text"), std::string::npos) << no_text.status().message();
}

TEST(JinjaChatTemplate, ToolSyntaxFollowsTheTemplate) {
  auto syntax = [](const std::string& src) { return JinjaChatTemplate::create(src, "", "")->tool_syntax(); };
  EXPECT_EQ(syntax("{{ '<tool_call>' }}"), ChatToolSyntax::hermes);
  EXPECT_EQ(syntax("{{ '<|python_tag|>' }}"), ChatToolSyntax::llama3_json);
  EXPECT_EQ(syntax("{% if m.role == 'ipython' %}{% endif %}"), ChatToolSyntax::llama3_json);
  EXPECT_EQ(syntax("{{ '[TOOL_CALLS]' }}"), ChatToolSyntax::mistral);
  EXPECT_EQ(syntax("{{ '<tool_call>' + name }}<arg_key>{{ k }}</arg_key>"), ChatToolSyntax::glm45) << "GLM's XML calls";
  EXPECT_EQ(syntax("<tool_call>\n<function={{ name }}>\n<parameter={{ k }}>\n{{ v }}\n</parameter>\n</function>"),
            ChatToolSyntax::qwen3_coder)
      << "Qwen3-Coder's and Qwen3.5's XML calls";
  EXPECT_EQ(syntax("<seed:tool_call>\n<function={{ name }}>\n<parameter={{ k }}>{{ v }}</parameter>\n</function>"),
            ChatToolSyntax::seed_oss)
      << "Seed-OSS's calls: qwen3_coder's in its own tags";
  EXPECT_EQ(syntax("{{ '<minimax:tool_call>' }}\n<invoke name=\"{{ name }}\">\n<parameter name=\"{{ k }}\">{{ v }}</parameter>"),
            ChatToolSyntax::minimax_m2)
      << "MiniMax-M2's invoke blocks";
  EXPECT_EQ(syntax("{{ '<｜tool▁calls▁begin｜>' + name + '\\n```json\\n' }}"), ChatToolSyntax::deepseek_v3);
  EXPECT_EQ(syntax("{{ '<｜tool▁calls▁begin｜>' + name + '<｜tool▁sep｜>' }}"), ChatToolSyntax::deepseek_v31);
  EXPECT_EQ(syntax("{{ '<|tool_calls_section_begin|>' }}"), ChatToolSyntax::kimi_k2);
  EXPECT_EQ(syntax("{{ '<TOOLCALL>[' }}"), ChatToolSyntax::nemotron_nano_v2);
  EXPECT_EQ(syntax("{{ '<|tools_prefix|>[' }}"), ChatToolSyntax::apertus);
  EXPECT_EQ(syntax("{{ '<|tool_call|>' + call + '<|/tool_call|>' }}"), ChatToolSyntax::phi4_mini_json);
  EXPECT_EQ(syntax("{{ ' functools[' + calls + ']' }}"), ChatToolSyntax::phi4_mini_json);
  EXPECT_EQ(syntax("<beginning_of_sentence>{{ '<tool_calls>' }}{% if r == 'ipython' %}{% endif %}"), ChatToolSyntax::minimax);
  EXPECT_EQ(syntax("<|START_ACTION|>[{\"tool_name\": \"{{ name }}\"}]<|END_ACTION|>"), ChatToolSyntax::cohere_command3)
      << "Cohere Command R7B's and A's action blocks";
  EXPECT_EQ(syntax("{{ 'plain' }}"), ChatToolSyntax::none);
}

TEST(JinjaChatTemplate, BadInputIsRefused) {
  auto t = JinjaChatTemplate::create("{% for m in messages %}{{ m.content }}{% endfor %}", "<s>", "</s>");
  ASSERT_TRUE(t.has_value());
  std::vector<ChatMessage> bad_utf8{{"user", "a\xc3"}};
  EXPECT_EQ(t->apply(bad_utf8, {}, true).status().code(), StatusCode::invalid_argument);
  std::vector<ChatMessage> bad_args{{"assistant", "", {{"id", "f", "{not json"}}}};
  EXPECT_EQ(t->apply(bad_args, {}, true).status().code(), StatusCode::invalid_argument);
  std::vector<ChatMessage> deep{{"assistant", "", {{"id", "f", std::string(1000, '[') + std::string(1000, ']')}}}};
  EXPECT_EQ(t->apply(deep, {}, true).status().code(), StatusCode::invalid_argument) << "nesting is bounded";
  std::vector<ChatMessage> ok{{"user", "x"}};
  std::vector<std::string> bad_tool{"[1]"};
  EXPECT_EQ(t->apply(ok, bad_tool, true).status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(JinjaChatTemplate::create("{% if %}", "", "").status().code(), StatusCode::invalid_argument);
  // Template variables: a JSON object that sets none of the render's own.
  for (const char* kwargs : {"[1]", "{", R"({"messages": []})", R"({"add_generation_prompt": false})"})
    EXPECT_EQ(t->apply(ok, {}, true, kwargs).status().code(), StatusCode::invalid_argument) << kwargs;
  auto with = JinjaChatTemplate::create("{{ flag }}|{{ n.k }}", "", "");
  ASSERT_TRUE(with.has_value());
  EXPECT_EQ(*with->apply(ok, {}, true, R"({"flag": false, "n": {"k": [1, "x"]}})"), "False|[1, 'x']");
}

TEST(ModelChatTemplate, ABuiltInFamilyTakesNoTemplateKwargs) {
  auto t = load_chat_template("/nonexistent", "chatml", {});
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  ASSERT_TRUE(t->family.has_value());
  const std::vector<ChatMessage> chat{{"user", "hi"}};
  EXPECT_TRUE(t->apply(chat, {}, true).has_value());
  auto refused = t->apply(chat, {}, true, R"({"enable_thinking": false})");
  EXPECT_EQ(refused.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(refused.status().message().find("Jinja template"), std::string::npos) << refused.status().message();
}

constexpr const char* kGemma =
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' + message['content'] | trim "
    "+ '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";

TEST(ModelChatTemplate, ChoosesConfiguredThenTheModelsOwnAsJinja) {
  testing::TempDir dir("chat_template_choice");
  const ChatSpecialTokens fallback{"<fb>", "</fb>"};
  const std::vector<ChatMessage> chat{{"user", " hi "}};
  // The model's template, with tokenizer_config.json's bos_token.
  testing::write_text(dir.file("tokenizer_config.json"),
                      ojson{{"chat_template", kGemma}, {"bos_token", {{"content", "<bos>"}}}, {"eos_token", "<eos>"}}.dump());
  auto t = load_chat_template(dir.str(), "", fallback);
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_FALSE(t->family.has_value());
  EXPECT_EQ(t->describe(), "Jinja (tokenizer_config.json)");
  EXPECT_EQ(*t->apply(chat, {}, true), "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n");
  // A template with a built-in family's markers (Qwen2.5's ChatML) still runs as itself: its
  // default system line is in the prompt, as transformers renders it.
  const ojson qwen = testing::chat_template_case("qwen2.5", "one_user", true);
  ASSERT_TRUE(qwen.is_object()) << "tests/fixtures/chat_templates/models.json: run scripts/make_chat_template_fixtures.py";
  testing::write_text(dir.file("tokenizer_config.json"), ojson{{"chat_template", testing::real_chat_template("qwen2.5")}}.dump());
  t = load_chat_template(dir.str(), "", fallback);
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_FALSE(t->family.has_value());
  EXPECT_EQ(t->describe(), "Jinja (tokenizer_config.json)");
  EXPECT_EQ(t->tool_syntax(), ChatToolSyntax::hermes);
  EXPECT_EQ(*t->apply(testing::case_messages(qwen), {}, true), qwen["expected"].get<std::string>());
  EXPECT_NE(qwen["expected"].get<std::string>().find("You are Qwen, created by Alibaba Cloud."), std::string::npos);
  // Configured: a family name (the built-in renderer), a file (Jinja), an inline template; a
  // missing file fails.
  t = load_chat_template(dir.str(), "llama-3", fallback);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->family, ChatFamily::llama3);
  EXPECT_EQ(t->describe(), "built-in llama-3 (--chat-template)");
  testing::write_text(dir.file("mine.jinja"), "[{{ bos_token }}{{ messages[0].content }}]\n");
  t = load_chat_template(dir.str(), dir.file("mine.jinja"), fallback);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->describe(), "Jinja (" + dir.file("mine.jinja") + ")");
  EXPECT_EQ(*t->apply(chat, {}, true), "[<fb> hi ]");
  EXPECT_EQ(*load_chat_template(dir.str(), "{{ eos_token }}", fallback)->apply(chat, {}, true), "</fb>");
  EXPECT_EQ(load_chat_template(dir.str(), dir.file("nope.jinja"), fallback).status().code(), StatusCode::not_found);
}

// Today's date as Llama 3.2's template writes it: strftime_now("%d %b %Y"), local time.
std::string today_as_llama_writes_it() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%d %b %Y", &tm);
  return buf;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

// Every real template served from a model directory (as tokenizer_config.json names it) renders
// what transformers renders, whatever family markers it has; how calls are parsed follows it.
TEST(ModelChatTemplate, ServesEveryRealTemplateAsTransformersRendersIt) {
  const ojson& data = testing::chat_template_fixtures();
  ASSERT_FALSE(data.is_discarded()) << "tests/fixtures/chat_templates/models.json: run scripts/make_chat_template_fixtures.py";
  testing::TempDir dir("chat_template_served");
  const std::string today = today_as_llama_writes_it();
  ASSERT_NE(today, "26 Jul 2024") << "the fixtures' pinned date must differ from the clock's";
  int n_compared = 0;
  for (const auto& [name, t] : data["templates"].items()) {
    const std::string source = t["template"].get<std::string>();
    // Llama 3.2's header holds strftime_now's date (the fixtures' pinned 26 Jul 2024); the
    // other templates that call it are rendered with a pinned clock in the test above.
    const bool dated = source.find("strftime_now") != std::string::npos;
    if (dated && name != "llama-3.2") continue;
    testing::write_text(dir.file("tokenizer_config.json"),
                        ojson{{"chat_template", source}, {"bos_token", t["bos_token"]}, {"eos_token", t["eos_token"]}}.dump());
    auto served = load_chat_template(dir.str(), "", {});
    ASSERT_TRUE(served.has_value()) << name << ": " << served.status().to_string();
    EXPECT_FALSE(served->family.has_value()) << name;
    for (const auto& c : data["cases"]) {
      if (c["template"] != name || !c.contains("expected")) continue;
      const std::string kwargs = c.contains("template_kwargs") ? c["template_kwargs"].dump() : "";
      SCOPED_TRACE(name + " / " + c["conversation"].get<std::string>() + " " + kwargs);
      const std::vector<ChatMessage> messages = testing::case_messages(c);
      auto text = served->apply(messages, testing::case_tools(c), c["add_generation_prompt"].get<bool>(), kwargs);
      if (c.value("continue_final_message", false) && text.has_value())
        text = cut_after_final_message(std::move(*text), messages.back());
      ASSERT_TRUE(text.has_value()) << text.status().to_string();
      const std::string expected = c["expected"].get<std::string>();
      EXPECT_EQ(*text, dated ? replace_all(expected, "Today Date: 26 Jul 2024", "Today Date: " + today) : expected);
      ++n_compared;
    }
  }
  EXPECT_GT(n_compared, 150);
  auto syntax = [&](const std::string& name) {
    return make_chat_template(testing::real_chat_template(name), name, {})->tool_syntax();
  };
  EXPECT_EQ(syntax("qwen2.5"), ChatToolSyntax::hermes);
  EXPECT_EQ(syntax("qwen3"), ChatToolSyntax::hermes);
  EXPECT_EQ(syntax("llama-3.1"), ChatToolSyntax::llama3_json);
  EXPECT_EQ(syntax("llama-3.2"), ChatToolSyntax::llama3_json);
  EXPECT_EQ(syntax("llama-2"), ChatToolSyntax::none);
  EXPECT_EQ(syntax("mistral-v0.3"), ChatToolSyntax::mistral);
  EXPECT_EQ(syntax("mistral-small-3.1"), ChatToolSyntax::mistral);
  EXPECT_EQ(syntax("deepseek-r1-distill"), ChatToolSyntax::deepseek_v3);
  EXPECT_EQ(syntax("deepseek-v3.1"), ChatToolSyntax::deepseek_v31);
  EXPECT_EQ(syntax("glm-4.6"), ChatToolSyntax::glm45);
  EXPECT_EQ(syntax("kimi-k2"), ChatToolSyntax::kimi_k2);
  EXPECT_EQ(syntax("command-r7b"), ChatToolSyntax::cohere_command3);
  EXPECT_EQ(syntax("gemma-2"), ChatToolSyntax::none);
  EXPECT_EQ(syntax("smollm2"), ChatToolSyntax::none);
}

TEST(ModelChatTemplate, ToolSyntaxNames) {
  for (ChatToolSyntax s : {ChatToolSyntax::hermes, ChatToolSyntax::llama3_json, ChatToolSyntax::mistral,
                           ChatToolSyntax::deepseek_v3, ChatToolSyntax::deepseek_v31, ChatToolSyntax::glm45,
                           ChatToolSyntax::kimi_k2, ChatToolSyntax::pythonic, ChatToolSyntax::qwen3_coder,
                           ChatToolSyntax::seed_oss, ChatToolSyntax::minimax_m2, ChatToolSyntax::cohere_command3,
                           ChatToolSyntax::granite, ChatToolSyntax::lfm2, ChatToolSyntax::jamba,
                           ChatToolSyntax::hunyuan_a13b, ChatToolSyntax::olmo3, ChatToolSyntax::phi4_mini_json,
                           ChatToolSyntax::nemotron_nano_v2, ChatToolSyntax::apertus, ChatToolSyntax::ernie45,
                           ChatToolSyntax::minimax, ChatToolSyntax::gemma4})
    EXPECT_EQ(*parse_tool_syntax(tool_syntax_name(s)), s);
  EXPECT_EQ(*parse_tool_syntax("qwen3_xml"), ChatToolSyntax::qwen3_coder);
  EXPECT_EQ(*parse_tool_syntax("glm47"), ChatToolSyntax::glm45);
  EXPECT_EQ(*parse_tool_syntax("llama4_pythonic"), ChatToolSyntax::pythonic);
  EXPECT_EQ(*parse_tool_syntax("cohere_command4"), ChatToolSyntax::cohere_command3);
  EXPECT_EQ(*parse_tool_syntax("granite4"), ChatToolSyntax::hermes);
  EXPECT_EQ(*parse_tool_syntax("nemotron_json"), ChatToolSyntax::nemotron_nano_v2);
  auto unknown = parse_tool_syntax("xlam");
  EXPECT_EQ(unknown.status().code(), StatusCode::unsupported);
  EXPECT_NE(unknown.status().message().find("kimi_k2"), std::string::npos) << "lists the parsers brigade has";
  EXPECT_FALSE(parse_tool_syntax("none").has_value());
}

TEST(ModelChatTemplate, ListFormAndTemplateFile) {
  testing::TempDir dir("chat_template_list");
  testing::write_text(dir.file("tokenizer_config.json"),
                      R"({"chat_template": [{"name": "default", "template": "plain {{ messages | length }}"},
                                            {"name": "tool_use", "template": "<tool_call>{{ tools | length }}"}]})");
  auto t = load_chat_template(dir.str(), "", {});
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  const std::vector<ChatMessage> chat{{"user", "x"}};
  const std::vector<std::string> tools{R"({"type": "function", "function": {"name": "f"}})"};
  EXPECT_EQ(*t->apply(chat, {}, true), "plain 1");
  EXPECT_EQ(*t->apply(chat, tools, true), "<tool_call>1");
  EXPECT_EQ(t->tool_syntax(), ChatToolSyntax::hermes);
  testing::write_text(dir.file("tokenizer_config.json"), R"({"chat_template": [{"name": "other", "template": "x"}]})");
  EXPECT_EQ(load_chat_template(dir.str(), "", {}).status().code(), StatusCode::corrupt);
  // chat_template.jinja beside a tokenizer_config.json without one.
  testing::write_text(dir.file("tokenizer_config.json"), "{}");
  testing::write_text(dir.file("chat_template.jinja"), "{{ messages[0].content }}!");
  EXPECT_EQ(*load_chat_template(dir.str(), "", {})->apply(chat, {}, true), "x!");
  // A processor's legacy chat_template.json (transformers still reads it), when neither of the above has one.
  testing::TempDir processor("chat_template_processor");
  testing::write_text(processor.file("tokenizer_config.json"), "{}");
  testing::write_text(processor.file("chat_template.json"), R"({"chat_template": "[INST]{{ messages[0].content }}"})");
  EXPECT_EQ(*load_chat_template(processor.str(), "", {})->apply(chat, {}, true), "[INST]x");
  testing::write_text(processor.file("chat_template.json"), R"({"template": "x"})");
  EXPECT_EQ(load_chat_template(processor.str(), "", {}).status().code(), StatusCode::corrupt);
  testing::TempDir empty("chat_template_none");
  EXPECT_EQ(load_chat_template(empty.str(), "", {}).status().code(), StatusCode::not_found);
}

}  // namespace
}  // namespace brigade
