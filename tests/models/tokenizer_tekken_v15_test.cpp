// A v15 tekken tokenizer (Mistral Small 4's generation: [MODEL_SETTINGS] and a model_settings_builder
// for reasoning_effort) and the chat template mistral-common writes for it, against
// MistralTokenizer.encode_chat_completion (what vLLM's tokenizer_mode mistral encodes):
// tests/fixtures/tokenizers/tekken_v15/ (scripts/make_tekken_v15_fixtures.py) holds the template
// and, per conversation and reasoning_effort (unset, "none", "high"), mistral-common's prompt text
// and ids, or that it refuses the effort ("medium", "low": not in the builder's values). The
// tekken.json is tekken_json's with the patch vectors.json names.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "models/chat_template.h"
#include "models/model_chat_template.h"
#include "models/tokenizer.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::escaped;
using testing::read_json;

const std::string kFixtures = std::string(BRIGADE_FIXTURES) + "/tokenizers/";

// A directory as Mistral ships one: the patched tekken.json and the template.
struct V15Dir {
  V15Dir() {
    const json patch = vectors()["patch"];
    json t = read_json(kFixtures + "tekken_json/tekken.json");
    t["config"]["version"] = patch["version"];
    for (json& s : t["special_tokens"]) {
      const std::string rank = std::to_string(s["rank"].get<int>());
      if (patch["names"].contains(rank)) s["token_str"] = patch["names"][rank];
    }
    t["model_settings_builder"] = patch["model_settings_builder"];
    std::ofstream(dir.file("tekken.json"), std::ios::binary) << t.dump();
    fs::copy_file(kFixtures + "tekken_v15/chat_template.jinja", dir.file("chat_template.jinja"));
  }
  static const json& vectors() {
    static const json v = read_json(kFixtures + "tekken_v15/vectors.json");
    return v;
  }
  testing::TempDir dir{"tekken_v15"};
};

TEST(TekkenV15, ModelSettingsAndReasoningEffortAsMistralCommon) {
  const V15Dir d;
  auto tok = Tokenizer::load(d.dir.str());
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  EXPECT_EQ((*tok)->token_to_piece(36), "[MODEL_SETTINGS]");
  const ChatSpecialTokens names{(*tok)->token_to_piece((*tok)->bos_id()), (*tok)->token_to_piece((*tok)->eos_ids().at(0))};
  auto t = load_chat_template(d.dir.str(), "", names);
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  size_t n_rendered = 0, n_refused = 0;
  for (const json& c : V15Dir::vectors()["chats"]) {
    std::vector<ChatMessage> messages;
    for (const json& m : c["messages"]) messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    const std::string effort = c["reasoning_effort"].is_null() ? "" : c["reasoning_effort"].get<std::string>();
    SCOPED_TRACE("reasoning_effort " + (effort.empty() ? std::string("unset") : effort));
    const std::string vars = effort.empty() ? "" : json{{"reasoning_effort", effort}}.dump();
    auto prompt = t->apply(messages, {}, /*add_generation_prompt=*/true, vars);
    if (c.value("refused", false)) {
      ASSERT_FALSE(prompt.has_value()) << *prompt;
      EXPECT_NE(prompt.status().message().find("reasoning_effort"), std::string::npos) << prompt.status().message();
      ++n_refused;
      continue;
    }
    ASSERT_TRUE(prompt.has_value()) << prompt.status().to_string();
    EXPECT_EQ(*prompt, c["text"].get<std::string>());
    auto ids = (*tok)->encode(*prompt, /*add_bos=*/false);
    ASSERT_TRUE(ids.has_value());
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << escaped(*prompt);
    ++n_rendered;
  }
  EXPECT_EQ(n_rendered, 6u);
  EXPECT_EQ(n_refused, 2u);
}

// Assistant turns sent back with their reasoning (reasoning_content, or reasoning): the template
// writes it as [THINK]..[/THINK] before the answer, as mistral-common encodes a ThinkChunk.
TEST(TekkenV15, ReasoningOfEarlierTurnsAsMistralCommonThinkChunks) {
  const V15Dir d;
  auto tok = Tokenizer::load(d.dir.str());
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  const ChatSpecialTokens names{(*tok)->token_to_piece((*tok)->bos_id()), (*tok)->token_to_piece((*tok)->eos_ids().at(0))};
  auto t = load_chat_template(d.dir.str(), "", names);
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  size_t n = 0;
  for (const json& c : V15Dir::vectors()["reasoning_chats"]) {
    std::vector<ChatMessage> messages;
    for (const json& m : c["messages"]) {
      ChatMessage msg{m["role"].get<std::string>(), m["content"].get<std::string>()};
      for (const char* key : {"reasoning_content", "reasoning"})
        if (m.contains(key)) msg.reasoning = m[key].get<std::string>();
      messages.push_back(msg);
    }
    const std::string vars = c["reasoning_effort"].is_null() ? "" : json{{"reasoning_effort", c["reasoning_effort"]}}.dump();
    auto prompt = t->apply(messages, {}, /*add_generation_prompt=*/true, vars);
    ASSERT_TRUE(prompt.has_value()) << prompt.status().to_string();
    EXPECT_EQ(*prompt, c["text"].get<std::string>());
    EXPECT_NE(prompt->find("[THINK]"), std::string::npos);
    auto ids = (*tok)->encode(*prompt, /*add_bos=*/false);
    ASSERT_TRUE(ids.has_value());
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << escaped(*prompt);
    ++n;
  }
  EXPECT_EQ(n, 2u);
}

}  // namespace
}  // namespace brigade
