// generation_config.json (models/generation_config.h): the sampling settings vLLM takes as request
// defaults, --generation-config's modes and --override-generation-config, and its eos_token_id
// joining config.json's in the checkpoint's EOS ids.
#include "models/generation_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "hf_fixture.h"
#include "models/checkpoint.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::TempDir;
using testing::write_text;

// Qwen2.5-7B-Instruct's generation_config.json, as the Hub has it.
constexpr const char* kQwen = R"({
  "bos_token_id": 151643, "pad_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
  "repetition_penalty": 1.05, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "transformers_version": "4.37.0"})";

TEST(GenerationConfig, SamplingSettingsAsVllmTakesThem) {
  auto d = parse_generation_defaults(nlohmann::json::parse(kQwen), "g");
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->temperature, 0.7f);
  EXPECT_EQ(d->top_p, 0.8f);
  EXPECT_EQ(d->top_k, 20);
  EXPECT_EQ(d->repetition_penalty, 1.05f);
  EXPECT_FALSE(d->min_p.has_value());
  EXPECT_FALSE(d->max_tokens.has_value());
  EXPECT_EQ(d->describe(), "temperature=0.7 top_p=0.8 top_k=20 repetition_penalty=1.05");
  // max_new_tokens is max_tokens; top_k -1 is off (0); nulls are absent; values equal to
  // transformers 4's defaults are kept as written.
  auto m = parse_generation_defaults(
      nlohmann::json::parse(R"({"max_new_tokens": 2048, "top_k": -1, "min_p": null, "temperature": 1.0})"), "g");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->max_tokens, 2048);
  EXPECT_EQ(m->top_k, 0);
  EXPECT_FALSE(m->min_p.has_value());
  EXPECT_EQ(m->temperature, 1.0f);
  // Only EOS and BOS: nothing to default.
  auto none = parse_generation_defaults(nlohmann::json::parse(R"({"bos_token_id": 1, "eos_token_id": 2})"), "g");
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
}

TEST(GenerationConfig, BadValuesAreRefusedByName) {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"temperature": -0.1})", "temperature -0.1 is out of range [0, inf)"},
      {R"({"top_p": 0})", "top_p 0 is out of range (0, 1]"},
      {R"({"top_p": "high"})", "top_p must be a number"},
      {R"({"top_k": 2.5})", "top_k must be an integer"},
      {R"({"min_p": 1})", "min_p must be in [0, 1)"},
      {R"({"repetition_penalty": 0})", "repetition_penalty 0 is out of range (0, inf)"},
      {R"({"max_new_tokens": 0})", "max_new_tokens 0 is out of range"},
  };
  for (const auto& [text, what] : bad) {
    auto d = parse_generation_defaults(nlohmann::json::parse(text), "generation_config.json");
    ASSERT_FALSE(d.has_value()) << text;
    EXPECT_EQ(d.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(d.status().message().find(what), std::string::npos) << d.status().message();
    EXPECT_EQ(d.status().message().rfind("generation_config.json: ", 0), 0u) << d.status().message();
  }
}

TEST(GenerationConfig, ModesAndOverrides) {
  const TempDir model("gen_model"), other("gen_other");
  write_text(model.file("generation_config.json"), kQwen);
  write_text(other.file("generation_config.json"), R"({"temperature": 0.2, "max_new_tokens": 64})");
  auto aut = resolve_generation_defaults(model.str(), "auto", "");
  ASSERT_TRUE(aut.has_value()) << aut.status().to_string();
  EXPECT_EQ(aut->temperature, 0.7f);
  auto vllm = resolve_generation_defaults(model.str(), "vllm", "");
  ASSERT_TRUE(vllm.has_value());
  EXPECT_TRUE(vllm->empty()) << "vllm: brigade's (vLLM's) own defaults";
  auto dir = resolve_generation_defaults(model.str(), other.str(), "");
  ASSERT_TRUE(dir.has_value()) << dir.status().to_string();
  EXPECT_EQ(dir->temperature, 0.2f);
  EXPECT_EQ(dir->max_tokens, 64);
  EXPECT_FALSE(dir->top_k.has_value()) << "the other directory's file alone";
  auto over = resolve_generation_defaults(model.str(), "auto", R"({"temperature": 0.5, "max_new_tokens": 10})");
  ASSERT_TRUE(over.has_value()) << over.status().to_string();
  EXPECT_EQ(over->temperature, 0.5f);
  EXPECT_EQ(over->top_p, 0.8f) << "keys the override leaves out stay";
  EXPECT_EQ(over->max_tokens, 10);
  auto on_vllm = resolve_generation_defaults(model.str(), "vllm", R"({"top_k": 5})");
  ASSERT_TRUE(on_vllm.has_value());
  EXPECT_EQ(on_vllm->describe(), "top_k=5");
  // A GGUF or llama2.c file has no generation_config.json: nothing under auto.
  auto file = resolve_generation_defaults(fixture_dir("gguf_bloom") + "/model.gguf", "auto", "");
  ASSERT_TRUE(file.has_value()) << file.status().to_string();
  EXPECT_TRUE(file->empty());

  auto missing = resolve_generation_defaults(model.str(), model.str() + "/nowhere", "");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.status().message().find("is not auto, vllm or a directory holding a generation_config.json"),
            std::string::npos);
  auto not_object = resolve_generation_defaults(model.str(), "auto", "[1]");
  ASSERT_FALSE(not_object.has_value());
  EXPECT_NE(not_object.status().message().find("--override-generation-config: not a JSON object"), std::string::npos);
  auto bad_value = resolve_generation_defaults(model.str(), "auto", R"({"top_p": 7})");
  ASSERT_FALSE(bad_value.has_value());
  EXPECT_NE(bad_value.status().message().find("--override-generation-config: top_p 7 is out of range"), std::string::npos);
  write_text(model.file("generation_config.json"), "{not json");
  auto corrupt_file = resolve_generation_defaults(model.str(), "auto", "");
  ASSERT_FALSE(corrupt_file.has_value());
  EXPECT_EQ(corrupt_file.status().code(), StatusCode::corrupt);
  EXPECT_NE(corrupt_file.status().message().find("generation_config.json: not a JSON object"), std::string::npos);
}

// generation_config.json's eos_token_id joins config.json's (the llama fixture's 2) in the
// checkpoint's EOS ids, each once, in the file's order after config.json's; a malformed one is
// refused naming the file.
TEST(GenerationConfig, EosIdsJoinTheCheckpointsOwn) {
  const TempDir dir("gen_eos");
  for (const char* f : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(fixture_dir("llama") + "/" + f, dir.file(f));
  auto plain = Checkpoint::open(dir.str());
  ASSERT_TRUE(plain.has_value()) << plain.status().to_string();
  EXPECT_EQ((*plain)->config().eos_ids, std::vector<int>{2});
  write_text(dir.file("generation_config.json"), R"({"bos_token_id": 1, "eos_token_id": [7, 2, 9]})");
  auto merged = Checkpoint::open(dir.str());
  ASSERT_TRUE(merged.has_value()) << merged.status().to_string();
  EXPECT_EQ((*merged)->config().eos_ids, (std::vector<int>{2, 7, 9}));
  write_text(dir.file("generation_config.json"), R"({"eos_token_id": 5})");
  EXPECT_EQ((*Checkpoint::open(dir.str()))->config().eos_ids, (std::vector<int>{2, 5}));
  write_text(dir.file("generation_config.json"), R"({"eos_token_id": "</s>"})");
  auto bad = Checkpoint::open(dir.str());
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.status().code(), StatusCode::corrupt);
  EXPECT_NE(bad.status().message().find("generation_config.json: eos_token_id must be a token id"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace brigade
