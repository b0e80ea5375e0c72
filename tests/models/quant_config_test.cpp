// quantization_config as the Hub's FP8 checkpoints write it (DeepSeek-V3 and Qwen3-FP8's "fp8",
// RedHat's "compressed-tensors"), and the refusals of everything else, naming what was found and
// listing what is supported.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/model_config.h"
#include "models/quant_config.h"

namespace brigade {
namespace {

using json = nlohmann::json;

Expected<QuantConfig> parse(const std::string& text) { return parse_quant_config(json::parse(text)); }

// compressed-tensors' config with one group whose weights are `weights`.
std::string ct(const std::string& weights, const std::string& extra = "") {
  return R"({"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
             "config_groups": {"group_0": {"targets": ["Linear"], "weights": )" + weights + R"(,
               "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true}}},
             "ignore": ["lm_head", "re:.*mlp\\.gate$"])" + extra + "}";
}

TEST(QuantConfig, DeepSeekV3Fp8Blocks) {
  // DeepSeek-V3's config.json, verbatim.
  auto q = parse(R"({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                     "weight_block_size": [128, 128]})");
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  EXPECT_EQ(q->scaling, WeightScaling::block);
  EXPECT_EQ(q->block_rows, 128);
  EXPECT_EQ(q->block_cols, 128);
  EXPECT_EQ(q->scale_name("model.layers.0.mlp.down_proj.weight"), "model.layers.0.mlp.down_proj.weight_scale_inv");
  EXPECT_EQ(q->scale_name("model.layers.3.mlp.experts.gate_up_proj"), "model.layers.3.mlp.experts.gate_up_proj_scale_inv");
  EXPECT_EQ(q->describe(), "fp8 e4m3, 128x128 block scales (quant_method fp8)");
  EXPECT_FALSE(q->ignored("lm_head.weight"));  // lm_head is simply stored bf16 there
}

TEST(QuantConfig, ModulesToNotConvertFollowTransformersRule) {
  auto q = parse(R"({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128],
                     "modules_to_not_convert": ["lm_head", "model.layers.0.mlp"]})");
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  EXPECT_TRUE(q->ignored("lm_head.weight"));
  EXPECT_TRUE(q->ignored("model.layers.0.mlp.down_proj.weight"));  // under an ignored module
  EXPECT_FALSE(q->ignored("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_FALSE(q->ignored("model.layers.10.mlp.down_proj.weight"));
}

TEST(QuantConfig, Fp8WithoutBlocksIsPerTensor) {  // vLLM's Fp8Config / AutoFP8 checkpoints
  auto q = parse(R"({"quant_method": "fp8", "activation_scheme": "static"})");
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  EXPECT_EQ(q->scaling, WeightScaling::tensor);
  EXPECT_EQ(q->scale_name("x.weight"), "x.weight_scale");
}

TEST(QuantConfig, CompressedTensorsChannelTensorAndBlock) {
  auto ch = parse(ct(R"({"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false})"));
  ASSERT_TRUE(ch.has_value()) << ch.status().to_string();
  EXPECT_EQ(ch->scaling, WeightScaling::channel);
  EXPECT_EQ(ch->method, "compressed-tensors");
  EXPECT_EQ(ch->scale_name("x.weight"), "x.weight_scale");
  EXPECT_TRUE(ch->ignored("lm_head.weight"));
  EXPECT_TRUE(ch->ignored("model.layers.1.mlp.gate.weight"));  // "re:" matched from the start
  EXPECT_FALSE(ch->ignored("model.layers.1.mlp.gate_proj.weight"));
  auto t = parse(ct(R"({"num_bits": 8, "type": "float", "strategy": "tensor"})"));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->scaling, WeightScaling::tensor);
  auto b = parse(ct(R"({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 64]})"));
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  EXPECT_EQ(b->scaling, WeightScaling::block);
  EXPECT_EQ(b->block_cols, 64);
  EXPECT_FALSE(b->scale_is_inverse);
}

void expect_refused(const std::string& text, const std::vector<std::string>& words) {
  auto q = parse(text);
  ASSERT_FALSE(q.has_value()) << text;
  for (const auto& w : words) EXPECT_NE(q.status().message().find(w), std::string::npos) << q.status().message();
}

TEST(QuantConfig, OtherMethodsAndSchemesAreRefusedListingTheSupported) {
  expect_refused(R"({"quant_method": "awq", "bits": 4})", {"'awq'", "fp8", "compressed-tensors"});
  expect_refused(R"({"quant_method": "gptq"})", {"'gptq'", "supported"});
  expect_refused(R"({"quant_method": "fp8", "fmt": "e5m2"})", {"e5m2", "supported: e4m3"});
  expect_refused(R"({"quant_method": "fp8", "weight_block_size": [128]})", {"weight_block_size"});
  expect_refused(ct(R"({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128})"),
                 {"num_bits 4", "type 'int'", "supported"});
  expect_refused(ct(R"({"num_bits": 8, "type": "float", "strategy": "group"})"), {"'group'", "tensor, channel, block"});
  expect_refused(ct(R"({"num_bits": 8, "type": "float", "strategy": "block"})"), {"block_structure"});
  expect_refused(R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {}})",
                 {"pack-quantized", "float-quantized"});
  expect_refused(ct(R"({"num_bits": 8, "type": "float", "strategy": "channel"})", R"(, "ignore": ["re:(["])"),
                 {"not a valid regex"});
}

TEST(QuantConfig, ModelConfigCarriesItAndRefusesItNamingConfigJson) {
  const std::string base = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 300, "torch_dtype": "bfloat16")";
  auto c = parse_hf_config(base + R"(, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_TRUE(c->quant.quantized());
  EXPECT_EQ(c->dtype, DType::bf16);
  auto plain = parse_hf_config(base + "}");
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->quant.quantized());
  auto bad = parse_hf_config(base + R"(, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true}})");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("quant_method 'bitsandbytes' is not supported"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace brigade
