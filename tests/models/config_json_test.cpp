// config.json's family tests (models/config_json.h): config_architecture, config_model_type and
// config_names_class, which every wrapper's is_* reader (InternVL, LLaVA, Idefics3, Aya Vision,
// Mistral 3, Llama 4, Gemma 3, GLM-4V, DBRX, MiniMax, the state-space families...) goes through.
// The class named in architectures decides, as the dispatch on architectures[0] does; model_type
// counts only without one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/config_json.h"
#include "models/idefics3_config.h"
#include "models/llava_config.h"

namespace brigade {
namespace {

using json = nlohmann::json;

TEST(ConfigJson, ArchitectureIsTheFirstStringOrEmpty) {
  EXPECT_EQ(config_architecture(json{{"architectures", {"A", "B"}}}), "A");
  EXPECT_EQ(config_architecture(json::object()), "");
  EXPECT_EQ(config_architecture(json{{"architectures", json::array()}}), "");
  EXPECT_EQ(config_architecture(json{{"architectures", {7}}}), "");
  EXPECT_EQ(config_architecture(json{{"architectures", "A"}}), "");  // a string, not a list
}

TEST(ConfigJson, ModelTypeOrTheFallback) {
  EXPECT_EQ(config_model_type(json{{"model_type", "llama"}}), "llama");
  EXPECT_EQ(config_model_type(json{{"model_type", "llama"}}, "qwen2"), "llama");
  EXPECT_EQ(config_model_type(json::object()), "");
  EXPECT_EQ(config_model_type(json::object(), "qwen2"), "qwen2");
  EXPECT_EQ(config_model_type(json{{"model_type", nullptr}}, "qwen2"), "qwen2");
  EXPECT_EQ(config_model_type(json{{"model_type", 3}}, "qwen2"), "qwen2");
}

TEST(ConfigJson, TheArchitectureDecidesThenTheModelType) {
  const auto names = [](const json& j) { return config_names_class(j, {"AForX", "BForX"}, {"a", "b"}); };
  EXPECT_TRUE(names(json{{"architectures", {"AForX"}}}));
  EXPECT_TRUE(names(json{{"architectures", {"BForX"}}, {"model_type", "other"}}));
  // A class named decides, whatever model_type says.
  EXPECT_FALSE(names(json{{"architectures", {"OtherForX"}}, {"model_type", "a"}}));
  EXPECT_FALSE(names(json{{"architectures", {"OtherForX", "AForX"}}}));  // the first class only
  // Without a class: model_type, any of the types.
  EXPECT_TRUE(names(json{{"model_type", "a"}}));
  EXPECT_TRUE(names(json{{"model_type", "b"}, {"architectures", json::array()}}));
  EXPECT_FALSE(names(json{{"model_type", "AForX"}}));  // a class name is not a type
  EXPECT_FALSE(names(json::object()));
  EXPECT_FALSE(names(json{{"architectures", {1}}, {"model_type", 2}}));
}

TEST(ConfigJson, FamilyReadersFollowTheRule) {
  EXPECT_TRUE(is_idefics3(json{{"architectures", {"SmolVLMForConditionalGeneration"}}}));
  EXPECT_TRUE(is_idefics3(json{{"model_type", "smolvlm"}}));
  EXPECT_FALSE(is_idefics3(json{{"architectures", {"LlamaForCausalLM"}}, {"model_type", "idefics3"}}));
  // LLaVA's readers nest: OneVision is a LLaVA-NeXT is a LLaVA.
  const json onevision = {{"model_type", "llava_onevision"}};
  EXPECT_TRUE(is_llava_onevision(onevision));
  EXPECT_TRUE(is_llava_next(onevision));
  EXPECT_TRUE(is_llava(onevision));
  const json next = {{"architectures", {"LlavaNextForConditionalGeneration"}}};
  EXPECT_FALSE(is_llava_onevision(next));
  EXPECT_TRUE(is_llava(next));
}

}  // namespace
}  // namespace brigade
