// BitNet b1.58 against transformers: BitNetForCausalLM (models/llama_variants_config.h, read_bitnet)
// and quant_method bitnet's ternary linears (models/quant_config.h, models/weight_quant.h) with
// their int8 inputs (Backend::quantize_rows_int8). The fixtures (scripts/make_fixtures.py
// make_bitnet: bitnet in BitLinear's packed layout, bitnet_auto and bitnet_online in
// AutoBitLinear's offline and online ones, bitnet_plain with no quantization_config) run in
// HfFixture (hf_fixture_test.cpp); here, their configs as parsed, each piece moving the logits far
// outside the tolerance when changed (the int8 inputs included), broken checkpoints and what
// brigade does not run refused by name, and what `inspect` says of them.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/in_process_communicator.h"
#include "cpu/cpu_backend.h"
#include "decoder_config_checks.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/inspect.h"
#include "models/llama.h"
#include "models/weight_quant.h"

namespace brigade {
namespace {

using testing::edited_fixture_load_error;
using testing::fixture_dir;
using testing::kLogitTol;
using testing::max_diff_with_config;
using testing::max_diff_with_rules;
using testing::parse_fixture;
using testing::StEntry;

const auto refused = testing::expect_config_refused;  // (fixture, edit, what the refusal names)

TEST(BitNet, Config) {
  auto c = parse_fixture("bitnet");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "bitnet");
  EXPECT_EQ(c->mlp_activation, MlpActivation::relu2_glu);
  EXPECT_TRUE(c->mlp_gated()) << "relu2(gate) * up";
  EXPECT_TRUE(c->sub_norms && c->tie_embeddings);
  EXPECT_FALSE(c->qkv_bias || c->o_bias);
  EXPECT_TRUE(c->quant.ternary());
  EXPECT_EQ(c->quant.describe(), "ternary weights, int8 activations, bitlinear (quant_method bitnet)");
  EXPECT_TRUE(c->quant.ternary_weight("model.layers.1.mlp.down_proj.weight"));
  EXPECT_FALSE(c->quant.ternary_weight("lm_head.weight")) << "transformers leaves the head unconverted";
  EXPECT_FALSE(c->quant.ternary_weight("model.embed_tokens.weight"));
  EXPECT_FALSE(c->quant.ternary_weight("model.layers.0.self_attn.attn_sub_norm.weight")) << "norms are no linears";
  auto aut = parse_fixture("bitnet_auto");
  ASSERT_TRUE(aut.has_value()) << aut.status().to_string();
  EXPECT_EQ(aut->quant.ternary_linear, TernaryLinear::auto_offline);
  auto online = parse_fixture("bitnet_online");
  ASSERT_TRUE(online.has_value()) << online.status().to_string();
  EXPECT_EQ(online->quant.describe(), "ternary weights, int8 activations, autobitlinear online (quant_method bitnet)");
  auto plain = parse_fixture("bitnet_plain");
  ASSERT_TRUE(plain.has_value()) << plain.status().to_string();
  EXPECT_FALSE(plain->quant.quantized()) << "no quantization_config: the linears as stored";
  EXPECT_TRUE(plain->sub_norms);
  // BitNetConfig's defaults where the Hub's config.json leaves fields out.
  auto defaults = parse_fixture("bitnet_plain", [](nlohmann::json& j) {
    for (const char* key : {"rope_parameters", "rms_norm_eps", "bos_token_id", "eos_token_id", "hidden_act",
                            "tie_word_embeddings"})
      j.erase(key);
    j["vocab_size"] = 128256;  // (Llama 3's, which the default ids index)
  });
  ASSERT_TRUE(defaults.has_value()) << defaults.status().to_string();
  EXPECT_FLOAT_EQ(defaults->rope_theta, 500000.0f);
  EXPECT_FLOAT_EQ(defaults->rms_eps, 1e-5f);
  EXPECT_EQ(defaults->bos_id, 128000);
  EXPECT_EQ(defaults->eos_ids, std::vector<int>{128001});
  EXPECT_EQ(defaults->mlp_activation, MlpActivation::relu2_glu);
  EXPECT_FALSE(defaults->tie_embeddings);
  // modules_to_not_convert: those modules' weights are plain.
  auto kept = parse_fixture("bitnet", [](nlohmann::json& j) {
    j["quantization_config"]["modules_to_not_convert"] = {"model.layers.0.mlp", "lm_head"};
  });
  ASSERT_TRUE(kept.has_value()) << kept.status().to_string();
  EXPECT_FALSE(kept->quant.ternary_weight("model.layers.0.mlp.up_proj.weight"));
  EXPECT_TRUE(kept->quant.ternary_weight("model.layers.0.self_attn.o_proj.weight"));
}

TEST(BitNet, ConfigsItDoesNotRunAreRefused) {
  refused("bitnet", [](nlohmann::json& j) { j["hidden_act"] = "silu"; }, "hidden_act 'silu' is not supported for bitnet");
  refused("bitnet", [](nlohmann::json& j) { j["head_dim"] = 8; }, "must equal hidden_size (32) for bitnet");
  refused("bitnet", [](nlohmann::json& j) { j["quantization_config"]["use_rms_norm"] = true; },
          "use_rms_norm = true (an RMSNorm inside every ternary linear) is not supported");
  refused("bitnet", [](nlohmann::json& j) { j["quantization_config"]["linear_class"] = "ternarylinear"; },
          "linear_class 'ternarylinear' must be bitlinear or autobitlinear");
  refused("bitnet", [](nlohmann::json& j) { j["quantization_config"]["quantization_mode"] = "qat"; },
          "quantization_mode 'qat' must be offline or online");
  refused("qwen3", [](nlohmann::json& j) { j["quantization_config"] = {{"quant_method", "bitnet"}}; },
          "is supported for bitnet and llama only");
}

// A checkpoint that does not hold what its quantization_config says is refused naming the tensor.
TEST(BitNet, BrokenCheckpointsAreRefusedNamingTheTensor) {
  const std::string scale = "model.layers.1.self_attn.k_proj.weight_scale";
  auto drop = [&](std::vector<StEntry>& es) { std::erase_if(es, [&](const StEntry& e) { return e.name == scale; }); };
  EXPECT_NE(edited_fixture_load_error("bitnet", drop).find("scale tensor '" + scale + "' is missing"), std::string::npos);
  auto zero = [&](std::vector<StEntry>& es) {
    StEntry& e = testing::st_entry(es, scale);
    std::fill(e.bytes.begin(), e.bytes.end(), uint8_t{0});
  };
  EXPECT_NE(edited_fixture_load_error("bitnet", zero).find("it must be finite and > 0 (BitLinear divides by it)"),
            std::string::npos);
  auto short_rows = [](std::vector<StEntry>& es) {
    StEntry& e = testing::st_entry(es, "model.layers.0.mlp.up_proj.weight");
    e.shape[0] -= 1;
    e.bytes.resize(e.bytes.size() - static_cast<size_t>(e.shape[1]));
  };
  EXPECT_NE(edited_fixture_load_error("bitnet", short_rows)
                .find("'model.layers.0.mlp.up_proj.weight' has shape [15, 32] but the config needs [16, 32] (packed"),
            std::string::npos);
  auto as = [](const char* linear, const char* mode) {
    return [=](nlohmann::json& j) {
      j["quantization_config"]["linear_class"] = linear;
      j["quantization_config"]["quantization_mode"] = mode;
    };
  };
  const auto keep = [](std::vector<StEntry>&) {};
  EXPECT_NE(edited_fixture_load_error("bitnet_auto", keep, as("bitlinear", "offline")).find("but linear_class bitlinear stores U8"),
            std::string::npos);
  EXPECT_NE(edited_fixture_load_error("bitnet", keep, as("autobitlinear", "online")).find("but quantization_mode is online"),
            std::string::npos);
}

// Every cached decode step (the int8 rows of one token at a time) against transformers' generate.
TEST(BitNet, DecodeStepsMatchTransformers) {
  for (const char* fixture : {"bitnet", "bitnet_auto", "bitnet_online", "bitnet_plain"})
    testing::expect_decode_steps_match(fixture);
}

// A fixture with its ternary linears read back as plain f32 weights (W = t * weight_scale, as
// StoredWeight stages them) under no quantization_config: the same weights without the int8 inputs.
std::unique_ptr<Model> without_int8_inputs(const std::string& fixture, Backend& backend,
                                          std::vector<std::vector<float>>& keep) {
  auto ck = Checkpoint::open(fixture_dir(fixture));
  EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
  if (!ck) return nullptr;
  std::map<std::string, RawTensor> tensors;
  for (const auto& [name, t] : (*ck)->tensors()) {
    if (name.ends_with(".weight_scale")) continue;
    if (!(*ck)->config().quant.ternary_weight(name)) {
      tensors[name] = t;
      continue;
    }
    const int64_t rows = t.dtype == DType::u8 ? 4 * t.shape[0] : t.shape[0], cols = t.shape[1];
    auto w = StoredWeight::open(**ck, name, {rows, cols});
    EXPECT_TRUE(w.has_value()) << w.status().to_string();
    if (!w) return nullptr;
    std::vector<float>& values = keep.emplace_back(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      w->read_row(0, r, 0, cols, DType::f32, reinterpret_cast<uint8_t*>(values.data() + r * cols));
    RawTensor plain = t;
    plain.dtype = DType::f32;
    plain.shape = {rows, cols};
    plain.bytes = {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)};
    tensors[name] = plain;
  }
  ModelConfig c = (*ck)->config();
  c.quant = QuantConfig{};
  auto edited = Checkpoint::from_memory((*ck)->path(), c, tensors);
  LoadOptions opts = testing::test_load_options();
  auto model = load_llama(*edited, backend, opts);
  EXPECT_TRUE(model.has_value()) << model.status().to_string();
  return model ? std::move(*model) : nullptr;
}

// The sub-norms, the gated relu2, the scale's direction and the int8 inputs each move the logits
// (so the fixtures check each); the int8 inputs by far more than the fixtures' distance from a
// rounding flip could.
TEST(BitNet, PiecesMoveTheLogits) {
  const float far = 100 * kLogitTol;
  EXPECT_GT(max_diff_with_rules("bitnet_plain", [](ModelConfig& c) { c.sub_norms = false; }), far) << "no sub-norms";
  EXPECT_GT(max_diff_with_rules("bitnet_plain", [](ModelConfig& c) { c.mlp_activation = MlpActivation::silu; }), far)
      << "SwiGLU";
  EXPECT_GT(max_diff_with_config("bitnet", [](nlohmann::json& j) { j["quantization_config"]["linear_class"] = "autobitlinear"; }),
            far)
      << "weight_scale multiplied (AutoBitLinear's rule) rather than divided (BitLinear's)";
  for (const char* fixture : {"bitnet", "bitnet_auto", "bitnet_online"}) {
    auto backend = make_cpu_backend({.n_threads = 1});
    std::vector<std::vector<float>> keep;
    auto model = without_int8_inputs(fixture, *backend, keep);
    ASSERT_NE(model, nullptr) << fixture;
    const auto cases = testing::read_fixture_cases(fixture);
    ASSERT_FALSE(cases.empty());
    EXPECT_GT(testing::run_fixture_case(*model, *backend, cases.front()).max_abs_diff, far) << fixture << ": no int8 inputs";
  }
}

// Under weights: auto a ternary linear is staged in its checkpoint's float type (a packed one's
// weight_scale's): a bf16 checkpoint's take 2 bytes a weight, as its other weights do; an explicit
// weights: f32 still wins.
TEST(BitNet, TernaryWeightsTakeTheCheckpointsFloatType) {
  const testing::TempDir dir("bitnet_bf16_scales");
  testing::write_edited_fixture("bitnet", dir, [](std::vector<StEntry>& es) {
    for (StEntry& e : es) {
      if (!e.name.ends_with(".weight_scale")) continue;
      float v;
      std::memcpy(&v, e.bytes.data(), 4);
      const uint16_t h = f32_to_bf16(v);
      e.dtype = "BF16";
      e.bytes.assign(reinterpret_cast<const uint8_t*>(&h), reinterpret_cast<const uint8_t*>(&h) + 2);
    }
  });
  auto backend = make_cpu_backend({.n_threads = 1});
  auto f32 = testing::load_or_fail(fixture_dir("bitnet"), *backend);
  auto bf16 = testing::load_or_fail(dir.str(), *backend);
  auto asked = testing::load_or_fail(dir.str(), *backend, DType::f32);
  ASSERT_TRUE(f32 && bf16 && asked);
  const ModelConfig& c = f32->config();
  const int64_t ternary = c.n_layers * (2 * int64_t{c.hidden_size} * c.hidden_size + 2 * int64_t{c.n_kv_heads} * c.head_dim * c.hidden_size +
                                        3 * int64_t{c.hidden_size} * c.intermediate_size);
  EXPECT_EQ(f32->weight_bytes() - bf16->weight_bytes(), ternary * 2) << "the ternary linears in bf16, the rest as stored";
  EXPECT_EQ(asked->weight_bytes(), f32->weight_bytes());
}

// BitNet's sub-norms and int8 inputs span whole rows, which tensor parallelism splits.
TEST(BitNet, TensorParallelismAndLoraAreRefused) {
  auto comms = make_in_process_group({2, std::chrono::seconds(10)});
  ASSERT_TRUE(comms.has_value()) << comms.status().to_string();
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions opts = testing::test_load_options();
  opts.communicator = (*comms)[0].get();
  for (const char* fixture : {"bitnet", "bitnet_plain"}) {
    auto m = Model::load(fixture_dir(fixture), *backend, opts);
    ASSERT_FALSE(m.has_value()) << fixture;
    EXPECT_NE(m.status().message().find("is not supported with tensor parallelism; run it at tp 1"), std::string::npos)
        << m.status().message();
  }
  LoadOptions lora = testing::test_load_options();
  lora.max_loras = 1;
  auto m = Model::load(fixture_dir("bitnet"), *backend, lora);
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.status().message().find("LoRA adapters are not supported with ternary (bitnet) weights"), std::string::npos)
      << m.status().message();
}

TEST(BitNet, InspectNamesIt) {
  testing::expect_inspect_names({{"bitnet", {"bitnet", "gated relu2 MLP", "norms before o_proj and down_proj",
                                             "ternary weights, int8 activations, bitlinear"}}});
  auto info = inspect_model(fixture_dir("bitnet"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  const ModelConfig& c = info->config;
  const int64_t layer = 2 * int64_t{c.hidden_size} * c.hidden_size + 2 * int64_t{c.n_kv_heads} * c.head_dim * c.hidden_size +
                        3 * int64_t{c.hidden_size} * c.intermediate_size + 2 * c.hidden_size + c.hidden_size +
                        c.intermediate_size;  // q, o, k, v, gate, up, down; two norms and the sub-norms
  EXPECT_EQ(info->n_params, int64_t{c.vocab_size} * c.hidden_size + c.hidden_size + c.n_layers * layer)
      << "packed bytes count 4 weights each; weight_scale none";
}

}  // namespace
}  // namespace brigade
