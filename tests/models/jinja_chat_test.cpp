// Real models' chat templates run by the Jinja interpreter render byte for byte what
// transformers' apply_chat_template renders (tests/fixtures/chat_templates/models.json, from
// scripts/make_chat_template_fixtures.py), refuse what those templates refuse, and the template a
// model is served with is chosen as models/model_chat_template.h says.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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
  for (const auto& c : data["cases"]) {
    const std::string name = c["template"].get<std::string>();
    SCOPED_TRACE(name + " / " + c["conversation"].get<std::string>() +
                 (c["add_generation_prompt"].get<bool>() ? " / gen" : ""));
    const ojson& t = data["templates"][name];
    auto tmpl = JinjaChatTemplate::create(t["template"].get<std::string>(), t["bos_token"].get<std::string>(),
                                          t["eos_token"].get<std::string>());
    ASSERT_TRUE(tmpl.has_value()) << tmpl.status().to_string();
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) messages.push_back(testing::openai_message(m));
    std::vector<std::string> tools;
    if (c["tools"].is_array())
      for (const auto& tool : c["tools"]) tools.push_back(tool.dump());
    jinja::RenderOptions opts;
    opts.now = [] {
      std::tm tm{};
      tm.tm_year = 124, tm.tm_mon = 6, tm.tm_mday = 26;
      return tm;
    };
    auto text = tmpl->apply(messages, tools, c["add_generation_prompt"].get<bool>(), opts);
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
}

TEST(JinjaChatTemplate, MistralTemplatesAreNotTakenForLlama2) {
  const ojson data = testing::load_fixture_json("chat_templates/models.json");
  ASSERT_FALSE(data.is_discarded());
  for (const char* name : {"mistral-v0.3", "mistral-small-3.1"}) {
    auto t = make_chat_template(data["templates"][name]["template"].get<std::string>(), "test", {}, false);
    ASSERT_TRUE(t.has_value()) << name;
    EXPECT_FALSE(t->family.has_value()) << name << " must render as its own Jinja";
  }
}

TEST(JinjaChatTemplate, ToolSyntaxFollowsTheTemplate) {
  auto syntax = [](const std::string& src) { return JinjaChatTemplate::create(src, "", "")->tool_syntax(); };
  EXPECT_EQ(syntax("{{ '<tool_call>' }}"), ChatToolSyntax::hermes);
  EXPECT_EQ(syntax("{{ '<|python_tag|>' }}"), ChatToolSyntax::llama3_json);
  EXPECT_EQ(syntax("{% if m.role == 'ipython' %}{% endif %}"), ChatToolSyntax::llama3_json);
  EXPECT_EQ(syntax("{{ '[TOOL_CALLS]' }}"), ChatToolSyntax::none);
  EXPECT_EQ(syntax("{{ '<tool_call>' + name }}<arg_key>{{ k }}</arg_key>"), ChatToolSyntax::none) << "GLM's XML calls";
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
}

constexpr const char* kGemma =
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' + message['content'] | trim "
    "+ '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";

TEST(ModelChatTemplate, ChoosesConfiguredThenBuiltInThenJinja) {
  testing::TempDir dir("chat_template_choice");
  const ChatSpecialTokens fallback{"<fb>", "</fb>"};
  const std::vector<ChatMessage> chat{{"user", " hi "}};
  // A template of no built-in family: the interpreter, with tokenizer_config.json's bos_token.
  testing::write_text(dir.file("tokenizer_config.json"),
                      ojson{{"chat_template", kGemma}, {"bos_token", {{"content", "<bos>"}}}, {"eos_token", "<eos>"}}.dump());
  auto t = load_chat_template(dir.str(), "", fallback);
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_FALSE(t->family.has_value());
  EXPECT_EQ(t->describe(), "Jinja (tokenizer_config.json)");
  EXPECT_EQ(*t->apply(chat, {}, true), "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n");
  // A built-in family's markers: the built-in rendering.
  testing::write_text(dir.file("tokenizer_config.json"), R"({"chat_template": "{{'<|im_start|>' + m}}"})");
  t = load_chat_template(dir.str(), "", fallback);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->family, ChatFamily::chatml);
  EXPECT_EQ(t->describe(), "built-in chatml (detected in tokenizer_config.json)");
  EXPECT_EQ(t->tool_syntax(), ChatToolSyntax::hermes);
  // Configured: a family name, a file (always Jinja), an inline template; a missing file fails.
  EXPECT_EQ(load_chat_template(dir.str(), "llama-3", fallback)->family, ChatFamily::llama3);
  testing::write_text(dir.file("mine.jinja"), "[{{ bos_token }}{{ messages[0].content }}]\n");
  t = load_chat_template(dir.str(), dir.file("mine.jinja"), fallback);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->describe(), "Jinja (" + dir.file("mine.jinja") + ")");
  EXPECT_EQ(*t->apply(chat, {}, true), "[<fb> hi ]");
  EXPECT_EQ(*load_chat_template(dir.str(), "{{ eos_token }}", fallback)->apply(chat, {}, true), "</fb>");
  EXPECT_EQ(load_chat_template(dir.str(), dir.file("nope.jinja"), fallback).status().code(), StatusCode::not_found);
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
  testing::TempDir empty("chat_template_none");
  EXPECT_EQ(load_chat_template(empty.str(), "", {}).status().code(), StatusCode::not_found);
}

}  // namespace
}  // namespace brigade
