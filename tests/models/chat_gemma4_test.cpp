// Gemma 4's chat templates (google/gemma-4-31B-it and its interleaved-reasoning variant) run by
// the Jinja interpreter render byte for byte what transformers' apply_chat_template renders
// (tests/fixtures/chat_gemma4/cases.json, from scripts/make_chat_gemma4_fixtures.py): system
// turns, multi-turn, tool declarations with nested schemas, calls and results, reasoning, and
// enable_thinking unset, true and false; and the template is recognised as writing gemma4 calls.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>

#include "models/chat_template_jinja.h"
#include "tests/models/chat_test_util.h"

namespace brigade {
namespace {

using ojson = nlohmann::ordered_json;

const ojson& fixtures() {
  static const ojson data = testing::load_fixture_json("chat_gemma4/cases.json");
  return data;
}

TEST(Gemma4ChatTemplate, RendersLikeTransformers) {
  const ojson& data = fixtures();
  ASSERT_FALSE(data.is_discarded()) << "tests/fixtures/chat_gemma4/cases.json: run scripts/make_chat_gemma4_fixtures.py";
  std::set<std::string> rendered;
  for (const auto& c : data["cases"]) {
    const std::string name = c["template"].get<std::string>();
    const std::string kwargs = c.contains("template_kwargs") ? c["template_kwargs"].dump() : "";
    SCOPED_TRACE(name + " / " + c["conversation"].get<std::string>() + (kwargs.empty() ? "" : " / " + kwargs));
    const std::string source = testing::chat_template_file(name);
    ASSERT_FALSE(source.empty()) << "tests/fixtures/chat_templates/templates/" << name << ".jinja is missing";
    const ojson& t = data["templates"][name];
    auto tmpl = JinjaChatTemplate::create(source, t["bos_token"].get<std::string>(), t["eos_token"].get<std::string>());
    ASSERT_TRUE(tmpl.has_value()) << tmpl.status().to_string();
    auto text = tmpl->apply(testing::case_messages(c), testing::case_tools(c), c["add_generation_prompt"].get<bool>(),
                            kwargs);
    ASSERT_TRUE(text.has_value()) << text.status().to_string();
    EXPECT_EQ(*text, c["expected"].get<std::string>());
    rendered.insert(name + "/" + c["conversation"].get<std::string>());
  }
  EXPECT_GE(rendered.size(), 20u);
}

TEST(Gemma4ChatTemplate, TeachesGemma4Calls) {
  for (const char* name : {"gemma-4", "gemma-4-interleaved"}) {
    auto tmpl = JinjaChatTemplate::create(testing::chat_template_file(name), "<bos>", "<eos>");
    ASSERT_TRUE(tmpl.has_value()) << tmpl.status().to_string();
    EXPECT_EQ(tmpl->tool_syntax(), ChatToolSyntax::gemma4) << name;
  }
}

}  // namespace
}  // namespace brigade
