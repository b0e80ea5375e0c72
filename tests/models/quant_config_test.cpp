// quantization_config as the Hub's FP8 checkpoints write it (DeepSeek-V3 and Qwen3-FP8's "fp8",
// RedHat's "compressed-tensors") and its int4 ones (AutoGPTQ / GPTQModel's "gptq", AutoAWQ's "awq",
// compressed-tensors pack-quantized), and the refusals of everything else, naming what was found and
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
  expect_refused(R"({"quant_method": "bitsandbytes", "load_in_4bit": true})",
                 {"'bitsandbytes'", "fp8", "compressed-tensors", "'gptq'", "'awq'"});
  expect_refused(R"({"quant_method": "fp8", "fmt": "e5m2"})", {"e5m2", "supported: e4m3"});
  expect_refused(R"({"quant_method": "fp8", "weight_block_size": [128]})", {"weight_block_size"});
  expect_refused(ct(R"({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128})"),
                 {"num_bits 4", "type 'int'", "supported"});
  expect_refused(ct(R"({"num_bits": 8, "type": "float", "strategy": "group"})"), {"'group'", "tensor, channel, block"});
  expect_refused(ct(R"({"num_bits": 8, "type": "float", "strategy": "block"})"), {"block_structure"});
  expect_refused(R"({"quant_method": "compressed-tensors", "format": "marlin-24", "config_groups": {}})",
                 {"marlin-24", "float-quantized, naive-quantized, pack-quantized"});
  expect_refused(R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {}})",
                 {"config_groups"});
  expect_refused(ct(R"({"num_bits": 8, "type": "float", "strategy": "channel"})", R"(, "ignore": ["re:(["])"),
                 {"not a valid regex"});
}

// The configs as AutoGPTQ, GPTQModel, AutoAWQ and llm-compressor write them.
TEST(QuantConfig, Int4GptqAwqAndPackQuantized) {
  auto gptq = parse(R"({"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": true, "static_groups": false,
                        "sym": true, "true_sequential": true, "model_name_or_path": null, "model_file_base_name": "model",
                        "quant_method": "gptq", "checkpoint_format": "gptq"})");
  ASSERT_TRUE(gptq.has_value()) << gptq.status().to_string();
  EXPECT_TRUE(gptq->int4());
  EXPECT_EQ(gptq->packing, Int4Packing::gptq);
  EXPECT_EQ(gptq->group_size, 128);
  EXPECT_TRUE(gptq->symmetric && gptq->act_order && gptq->zero_plus_one);
  EXPECT_EQ(gptq->describe(), "int4, groups of 128, symmetric, act-order (quant_method gptq)");
  auto v2 = parse(R"({"bits": 4, "group_size": -1, "sym": false, "desc_act": false, "quant_method": "gptq",
                      "format": "gptq_v2", "meta": {"quantizer": ["gptqmodel:2.0.0"]}})");
  ASSERT_TRUE(v2.has_value()) << v2.status().to_string();
  EXPECT_FALSE(v2->zero_plus_one);
  EXPECT_EQ(v2->describe(), "int4, per-channel scales, zero points (quant_method gptq)");

  auto awq = parse(R"({"quant_method": "awq", "zero_point": true, "group_size": 128, "bits": 4, "version": "gemm",
                       "modules_to_not_convert": ["visual"]})");
  ASSERT_TRUE(awq.has_value()) << awq.status().to_string();
  EXPECT_EQ(awq->packing, Int4Packing::awq);
  EXPECT_FALSE(awq->symmetric);
  EXPECT_EQ(awq->ignore, std::vector<std::string>{"visual"});
  auto awq_old = parse(R"({"quant_method": "awq", "zero_point": true, "q_group_size": 64, "w_bit": 4, "version": "GEMM"})");
  ASSERT_TRUE(awq_old.has_value()) << awq_old.status().to_string();
  EXPECT_EQ(awq_old->group_size, 64);

  auto ct = parse(R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
                      "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": null, "output_activations": null,
                        "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": true,
                                    "dynamic": false, "actorder": "group", "observer": "minmax"}}},
                      "ignore": ["lm_head"]})");
  ASSERT_TRUE(ct.has_value()) << ct.status().to_string();
  EXPECT_EQ(ct->packing, Int4Packing::pack_quantized);
  EXPECT_TRUE(ct->act_order);
  EXPECT_EQ(ct->describe(), "int4, groups of 128, symmetric, act-order (quant_method compressed-tensors)");
}

TEST(QuantConfig, Int4VariantsBrigadeDoesNotReadAreRefusedByName) {
  expect_refused(R"({"quant_method": "gptq", "bits": 8, "group_size": 128})", {"bits 8", "supported:", "bits 4"});
  expect_refused(R"({"quant_method": "gptq", "bits": 4, "checkpoint_format": "marlin"})", {"'marlin'", "gptq_v2"});
  expect_refused(R"({"quant_method": "gptq", "bits": 4, "is_marlin_format": true})", {"'marlin'"});
  expect_refused(R"({"quant_method": "gptq", "bits": 4, "dynamic": {"-:.*lm_head": {}}})", {"'dynamic'"});
  expect_refused(R"({"quant_method": "gptq", "bits": 4, "group_size": 0})", {"group_size 0"});
  expect_refused(R"({"quant_method": "awq", "bits": 4, "version": "gemv"})", {"version 'gemv'", "supported: gemm"});
  expect_refused(R"({"quant_method": "awq", "bits": 4, "zero_point": false})", {"zero_point false"});
  expect_refused(R"({"quant_method": "awq", "bits": 3})", {"bits 3"});
  const std::string pack = R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g": {
                               "targets": ["Linear"], "weights": )";
  expect_refused(pack + R"({"num_bits": 8, "type": "int", "strategy": "channel"}}}})", {"num_bits 8", "pack-quantized"});
  expect_refused(pack + R"({"num_bits": 4, "type": "int", "strategy": "tensor_group", "group_size": 16}}}})",
                 {"'tensor_group'", "group, channel"});
  expect_refused(pack + R"({"num_bits": 4, "type": "int", "strategy": "group"}}}})", {"group_size"});
  expect_refused(pack + R"({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128},
                            "input_activations": {"num_bits": 8, "type": "int", "strategy": "token"}}}})",
                 {"W4A8", "W4A16"});
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
