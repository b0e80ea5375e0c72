// int4 weight-only checkpoints (scripts/make_int4_fixtures.py: GPTQ, AWQ and compressed-tensors
// pack-quantized layers packed by the packages' own code, with transformers' fp32 logits on their
// exact dequantization):
//   - weights f32: every layer dequantized, so the logits match transformers within fp32 noise;
//   - weights auto: symmetric groups of 32 with f16-exact scales are repacked to Q4_0 (bit for bit:
//     the Q4_0 rows decode to the f32 dequantization), groups of 32k with zero points (AWQ,
//     compressed-tensors asymmetric) to Q4_1 (d and codes exact, the offset -s * z rounded once to
//     f16: measured), and run on the CPU's Q4_0 / Q4_1 kernels, whose int8 activations move the
//     logits by about the fixture's act_q8_max_diff; act-order groups dequantize to f32 and match
//     as above;
//   - inspect reports the quantization and the unpacked parameter count;
//   - missing, misshapen and corrupt packed tensors fail the load naming the tensor.
// (The engine serving them: tests/actors/engine_int4_test.cpp.)
// (Tensor-parallel and expert-parallel ranks of them: tensor_parallel_test.cpp; the configs:
// quant_config_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "core/quant.h"
#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "model_test_util.h"
#include "models/checkpoint.h"
#include "models/inspect.h"
#include "models/load_progress.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::kLogitTol;
using testing::read_fixture_cases;
using testing::run_fixture_case;
using testing::StEntry;
using testing::TempDir;

// What each fixture's linear layers repack to under weights auto on the CPU: Q4_0 where every
// group is symmetric (groups of 32, f16 or bf16 scales), Q4_1 where groups of 32k have zero points
// (AWQ's groups of 32, compressed-tensors' asymmetric channels), f32 for act-order (g_idx splits
// the blocks).
DType repacks_to(const std::string& fixture) {
  if (fixture == "qwen3_gptq_g32" || fixture == "llama_ct_w4a16" || fixture == "qwen3_moe_ct_w4a16") return DType::q4_0;
  if (fixture == "qwen3_awq_g32" || fixture == "qwen3_ct_w4a16_asym") return DType::q4_1;
  return DType::f32;
}

// act_q8_max_diff / act_q8_greedy of each case (make_gguf_fixtures.py's measure).
std::vector<std::pair<double, std::vector<int32_t>>> act_q8(const std::string& fixture) {
  const auto j = nlohmann::json::parse(read_text_file(fixture_dir(fixture) + "/expected.json").value());
  std::vector<std::pair<double, std::vector<int32_t>>> out;
  for (const auto& c : j.at("cases"))
    out.emplace_back(c.at("act_q8_max_diff").get<double>(), c.at("act_q8_greedy").get<std::vector<int32_t>>());
  return out;
}

class Int4Fixture : public ::testing::TestWithParam<std::string> {};

TEST_P(Int4Fixture, DequantizedToF32MatchesTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(fixture_dir(GetParam()), *backend, DType::f32);
  ASSERT_NE(model, nullptr);
  for (const auto& fc : read_fixture_cases(GetParam())) {
    const auto run = run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kLogitTol) << "prompt of " << fc.prompt.size();
    EXPECT_EQ(run.greedy, fc.greedy) << "prompt of " << fc.prompt.size();
    RecordProperty("f32_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(run.max_abs_diff));
  }
}

// Auto: Q4_0 or Q4_1 where the groups hold them (within twice the reference's own int8-activation
// error, greedy following it), else f32 (as above).
TEST_P(Int4Fixture, AutoMatchesTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(fixture_dir(GetParam()), *backend);
  ASSERT_NE(model, nullptr);
  const DType type = repacks_to(GetParam());
  const bool native = type != DType::f32 && backend->supports_weight_dtype(type);
  const auto cases = read_fixture_cases(GetParam());
  const auto act = act_q8(GetParam());
  ASSERT_EQ(cases.size(), act.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto run = run_fixture_case(*model, *backend, cases[i]);
    const double bound = native ? 2.0 * act[i].first + kLogitTol : kLogitTol;
    EXPECT_LE(run.max_abs_diff, bound) << "prompt of " << cases[i].prompt.size();
    if (native) EXPECT_TRUE(testing::greedy_follows(run, cases[i], {cases[i].greedy, act[i].second}, bound));
    else EXPECT_EQ(run.greedy, cases[i].greedy);
    RecordProperty("auto_max_abs_diff_" + std::to_string(cases[i].prompt.size()), std::to_string(run.max_abs_diff));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Int4Fixture,
                         ::testing::Values("qwen3_gptq_g32", "llama_gptq_act_order", "qwen3_awq_g32", "llama_ct_w4a16",
                                           "qwen3_ct_w4a16_asym", "qwen3_moe_ct_w4a16"),
                         [](const auto& p) { return p.param; });

// The Q4_0 rows decode to exactly the values the f32 load holds (d = the group's scale, nibble = q).
TEST(Int4Checkpoint, Q4_0RepackIsBitExact) {
  auto backend = make_cpu_backend({.n_threads = 1});
  if (!backend->supports_weight_dtype(DType::q4_0)) GTEST_SKIP() << "the backend has no Q4_0 kernels";
  for (const std::string fixture : {"qwen3_gptq_g32", "llama_ct_w4a16"}) {
    auto ck = Checkpoint::open(fixture_dir(fixture));
    ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
    WeightLoader automatic(**ck, *backend, std::nullopt), f32(**ck, *backend, DType::f32);
    for (const auto& [name, rows, cols] : std::vector<std::tuple<std::string, int64_t, int64_t>>{
             {"model.layers.0.self_attn.k_proj.weight", 32, 64}, {"model.layers.1.mlp.down_proj.weight", 64, 128}}) {
      auto q = automatic.matrix(name, rows, cols);
      auto f = f32.matrix(name, rows, cols);
      ASSERT_TRUE(q.has_value() && f.has_value()) << fixture << " " << name;
      ASSERT_EQ(q->tensor.dtype, DType::q4_0) << fixture << " " << name;
      ASSERT_EQ(f->tensor.dtype, DType::f32);
      std::vector<float> row(static_cast<size_t>(cols));
      const size_t row_bytes = dtype_bytes(DType::q4_0, cols);
      int64_t nonzero = 0;
      for (int64_t r = 0; r < rows; ++r) {
        quant::dequantize_row(static_cast<const uint8_t*>(q->tensor.data) + r * row_bytes, DType::q4_0, row.data(), cols);
        const float* want = static_cast<const float*>(f->tensor.data) + r * cols;
        for (int64_t c = 0; c < cols; ++c) nonzero += want[c] != 0.0f;
        ASSERT_EQ(std::memcmp(row.data(), want, static_cast<size_t>(cols) * 4), 0) << fixture << " " << name << " row " << r;
      }
      EXPECT_GT(nonzero, rows * cols / 2);
    }
    // a column slice on a block boundary stays Q4_0 (a tensor-parallel rank's o_proj)
    auto half = automatic.matrix("model.layers.0.self_attn.o_proj.weight", 64, 64, {}, {32, 32});
    ASSERT_TRUE(half.has_value());
    EXPECT_EQ(half->tensor.dtype, DType::q4_0);
  }
}

// Q4_1 rows (AWQ's groups of 32 and compressed-tensors' asymmetric channels) against the f32 load
// (s * (q - z) exactly): d and the codes are exact, so every element of a block is off by the same
// amount, the offset's one f16 rounding: |m - (-s z)| <= 2^-11 |s z| (half an f16 ulp), at most
// s / 128 for z <= 16. The model's weight bytes are 20 per 32 elements of each packed layer.
TEST(Int4Checkpoint, Q4_1RepackIsExactButForTheOffsetsRounding) {
  auto backend = make_cpu_backend({.n_threads = 1});
  if (!backend->supports_weight_dtype(DType::q4_1)) GTEST_SKIP() << "the backend has no Q4_1 kernels";
  for (const std::string fixture : {"qwen3_awq_g32", "qwen3_ct_w4a16_asym"}) {
    auto ck = Checkpoint::open(fixture_dir(fixture));
    ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
    WeightLoader automatic(**ck, *backend, std::nullopt), f32(**ck, *backend, DType::f32);
    double worst_in_steps = 0.0;  // the largest |error| / d over every element
    for (const auto& [name, rows, cols] : std::vector<std::tuple<std::string, int64_t, int64_t>>{
             {"model.layers.0.self_attn.k_proj.weight", 32, 64}, {"model.layers.1.mlp.down_proj.weight", 64, 128},
             {"model.layers.1.mlp.gate_proj.weight", 128, 64}}) {
      auto q = automatic.matrix(name, rows, cols);
      auto f = f32.matrix(name, rows, cols);
      ASSERT_TRUE(q.has_value() && f.has_value()) << fixture << " " << name;
      ASSERT_EQ(q->tensor.dtype, DType::q4_1) << fixture << " " << name;
      const size_t row_bytes = dtype_bytes(DType::q4_1, cols);
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        const auto* blocks = reinterpret_cast<const quant::BlockQ4_1*>(static_cast<const uint8_t*>(q->tensor.data) + r * row_bytes);
        quant::dequantize_row(blocks, DType::q4_1, row.data(), cols);
        const float* want = static_cast<const float*>(f->tensor.data) + r * cols;
        for (int64_t b = 0; b < cols / 32; ++b) {
          const float d = f16_to_f32(blocks[b].d), m = f16_to_f32(blocks[b].m);
          // -s z from the f32 values: code 0 decodes to m; an element x with code c is d * c - s z.
          const int code0 = blocks[b].qs[0] & 15;
          const double offset = static_cast<double>(want[b * 32]) - static_cast<double>(d) * code0;
          ASSERT_LE(std::fabs(m - offset), std::ldexp(std::fabs(offset), -11) + std::ldexp(1.0, -25)) << fixture << " " << name << " row " << r;
          for (int64_t j = 0; j < 32; ++j) {
            const int64_t c = b * 32 + j;
            const double err = std::fabs(static_cast<double>(row[static_cast<size_t>(c)]) - want[c]);
            // the same offset error on every element, up to the f32 rounding of d * q + m
            ASSERT_LE(err, std::fabs(m - offset) + 2 * std::numeric_limits<float>::epsilon() * (std::fabs(want[c]) + std::fabs(m)))
                << fixture << " " << name << " row " << r << " col " << c;
            if (d > 0) worst_in_steps = std::max(worst_in_steps, err / d);
          }
        }
      }
    }
    EXPECT_LE(worst_in_steps, 1.0 / 128 + 1e-6) << fixture;
    RecordProperty("q4_1_max_error_in_steps_" + fixture, std::to_string(worst_in_steps));

    // weight_bytes: each packed layer's elements at 20 bytes per 32 where the bf16 load has 2 bytes
    // each; the rest (16-bit tables, f32 norms) the same in both.
    auto bf16_model = testing::load_or_fail(fixture_dir(fixture), *backend, DType::bf16);
    auto auto_model = testing::load_or_fail(fixture_dir(fixture), *backend);
    ASSERT_TRUE(bf16_model && auto_model);
    int64_t packed = 0;  // int4 elements: 8 per packed int32
    for (const auto& [name, t] : (*ck)->tensors())
      if (name.ends_with(".qweight") || name.ends_with(".weight_packed")) packed += 8 * t.numel();
    ASSERT_GT(packed, 0);
    EXPECT_EQ(bf16_model->weight_bytes() - auto_model->weight_bytes(), packed * 2 - packed / 32 * 20) << fixture;
  }
}

// What each layout loads as: Q4_0 where exact and no other type is asked for; Q4_1 where groups
// of 32k with zero points hold it (or weights: q4_1 is asked for).
TEST(Int4Checkpoint, WeightsOptionChoosesTheType) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto type_of = [&](const std::string& fixture, std::optional<DType> want) {
    auto ck = Checkpoint::open(fixture_dir(fixture));
    EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
    WeightLoader w(**ck, *backend, want);
    auto m = w.matrix("model.layers.0.mlp.up_proj.weight", 128, 64);
    EXPECT_TRUE(m.has_value()) << m.status().to_string();
    return m ? m->tensor.dtype : DType::u8;
  };
  const bool q4 = backend->supports_weight_dtype(DType::q4_0);
  EXPECT_EQ(type_of("qwen3_gptq_g32", std::nullopt), q4 ? DType::q4_0 : DType::f32);
  EXPECT_EQ(type_of("qwen3_gptq_g32", DType::bf16), DType::bf16);
  const bool q41 = backend->supports_weight_dtype(DType::q4_1);
  EXPECT_EQ(type_of("qwen3_awq_g32", std::nullopt), q41 ? DType::q4_1 : DType::f32);
  EXPECT_EQ(type_of("llama_gptq_act_order", std::nullopt), DType::f32);
  EXPECT_EQ(type_of("qwen3_ct_w4a16_asym", std::nullopt), q41 ? DType::q4_1 : DType::f32);
  EXPECT_EQ(type_of("qwen3_awq_g32", DType::f32), DType::f32);
  if (backend->supports_weight_dtype(DType::q8_0)) {
    EXPECT_EQ(type_of("qwen3_awq_g32", DType::q8_0), DType::q8_0);
  }
  if (q4 && q41) {
    EXPECT_EQ(type_of("qwen3_awq_g32", DType::q4_0), DType::q4_0) << "f32, then quantized to q4_0";
    EXPECT_EQ(type_of("qwen3_gptq_g32", DType::q4_1), DType::q4_1) << "Q4_0 blocks written as Q4_1";
    EXPECT_EQ(type_of("llama_gptq_act_order", DType::q4_1), DType::q4_1) << "f32, then quantized to q4_1";
  }

  // weights: q8_0 requantizes the dequantized values, within the fixture's reference closely.
  auto model = testing::load_or_fail(fixture_dir("qwen3_awq_g32"), *backend, DType::q8_0);
  ASSERT_NE(model, nullptr);
  const auto fc = read_fixture_cases("qwen3_awq_g32").front();
  EXPECT_LT(run_fixture_case(*model, *backend, fc).max_abs_diff, 0.2f);
}

// `fixture` rewritten by `edit` / `edit_config` into an equivalent checkpoint of another variant
// loads (weights f32) to transformers' logits of the original.
void expect_variant_matches(const std::string& fixture, const std::function<void(std::vector<StEntry>&)>& edit,
                            const std::function<void(nlohmann::json&)>& edit_config) {
  const TempDir dir("int4_variant");
  testing::write_edited_fixture(fixture, dir, edit, edit_config);
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(dir.str(), *backend, DType::f32);
  ASSERT_NE(model, nullptr);
  for (const auto& fc : read_fixture_cases(fixture)) {
    const auto run = run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kLogitTol) << fixture << ", prompt of " << fc.prompt.size();
    EXPECT_EQ(run.greedy, fc.greedy) << fixture;
  }
}

// GPTQModel's gptq_v2 stores the zero points themselves (the original format stores zero - 1):
// qwen3_gptq_g32 with every qzeros nibble + 1 under checkpoint_format gptq_v2 is the same model.
TEST(Int4Checkpoint, GptqV2ZeroPointsAreStoredAsThey) {
  expect_variant_matches(
      "qwen3_gptq_g32",
      [](std::vector<StEntry>& es) {
        for (StEntry& e : es) {
          if (!e.name.ends_with(".qzeros")) continue;
          for (size_t i = 0; i < e.bytes.size(); i += 4) {
            uint32_t w;
            std::memcpy(&w, e.bytes.data() + i, 4);
            ASSERT_EQ(w, 0x77777777u) << e.name << ": a symmetric fixture stores zero 8 as 7";
            w += 0x11111111u;
            std::memcpy(e.bytes.data() + i, &w, 4);
          }
        }
      },
      [](nlohmann::json& j) { j["quantization_config"]["checkpoint_format"] = "gptq_v2"; });
}

// Older compressed-tensors wrote asymmetric zero points unpacked, int8 [rows, groups]: the packed
// ones of qwen3_ct_w4a16_asym ([ceil(rows / 8), groups] int32, nibble = zero + 8) rewritten so.
TEST(Int4Checkpoint, CompressedTensorsInt8ZeroPointsAreReadToo) {
  expect_variant_matches(
      "qwen3_ct_w4a16_asym",
      [](std::vector<StEntry>& es) {
        for (StEntry& e : es) {
          if (!e.name.ends_with(".weight_zero_point")) continue;
          ASSERT_EQ(e.dtype, "I32");
          const int64_t groups = e.shape[1], rows = e.shape[0] * 8;
          std::vector<uint8_t> unpacked(static_cast<size_t>(rows * groups));
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t g = 0; g < groups; ++g) {
              uint32_t w;
              std::memcpy(&w, e.bytes.data() + static_cast<size_t>((r / 8) * groups + g) * 4, 4);
              unpacked[static_cast<size_t>(r * groups + g)] = static_cast<uint8_t>(static_cast<int>((w >> (4 * (r % 8))) & 15u) - 8);
            }
          }
          e = {e.name, "I8", {rows, groups}, unpacked};
        }
      },
      {});
}

TEST(Int4Checkpoint, InspectAndLoadProgressReportTheQuantization) {
  auto info = inspect_model(fixture_dir("llama_gptq_act_order"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  const std::string text = format_model_info(*info);
  EXPECT_NE(text.find("quantization:  int4, groups of 32, zero points, act-order (quant_method gptq), Q4_0 "
                      "(symmetric) or Q4_1 on the CPU where groups of 32k"), std::string::npos) << text;
  EXPECT_GT(info->n_tensors_by_dtype.at("i32"), 0);
  auto backend = make_cpu_backend({.n_threads = 1});
  for (const std::string fixture : {"llama_gptq_act_order", "qwen3_awq_g32", "qwen3_ct_w4a16_asym"}) {
    auto i = inspect_model(fixture_dir(fixture));
    ASSERT_TRUE(i.has_value());
    auto whole = testing::load_or_fail(fixture_dir(fixture), *backend);
    ASSERT_NE(whole, nullptr);
    EXPECT_EQ(i->n_params, whole->n_params()) << fixture << ": packed int32s hold 8 each; scales are no parameters";
  }
  auto ck = Checkpoint::open(fixture_dir("llama_ct_w4a16"));
  ASSERT_TRUE(ck.has_value());
  EXPECT_EQ(load_progress_name(**ck),
            fixture_dir("llama_ct_w4a16") + " (int4, groups of 32, symmetric (quant_method compressed-tensors))");
}

using testing::st_entry;

std::string load_error(const std::string& fixture, const std::function<void(std::vector<StEntry>&)>& edit,
                       const std::function<void(nlohmann::json&)>& edit_config = {}) {
  return testing::edited_fixture_load_error(fixture, edit, edit_config);
}

void expect_has(const std::string& msg, const std::string& what) { EXPECT_NE(msg.find(what), std::string::npos) << msg; }

TEST(Int4Checkpoint, MissingMisshapenOrCorruptPackedTensorsFailNamingThem) {
  const std::string m = "model.layers.1.self_attn.o_proj";
  auto drop = [](const std::string& name) {
    return [name](std::vector<StEntry>& es) { std::erase_if(es, [&](const StEntry& e) { return e.name == name; }); };
  };
  expect_has(load_error("qwen3_gptq_g32", drop(m + ".qzeros")), "tensor '" + m + ".qzeros' of int4 layer '" + m + "' is missing");
  expect_has(load_error("qwen3_gptq_g32", [&](auto& es) {
               StEntry& e = st_entry(es, m + ".qweight");
               e.shape = {e.shape[1], e.shape[0]};  // [8, 64] stored as [64, 8]
             }),
             "'" + m + ".qweight' has shape [64, 8] but int4 layer '" + m + "' needs [8, 64]");
  expect_has(load_error("qwen3_awq_g32", [&](auto& es) { st_entry(es, m + ".scales").dtype = "I32"; st_entry(es, m + ".scales").shape = {2, 32}; }),
             "'" + m + ".scales' is i32; int4 layer '" + m + "' needs it f16 or bf16 or f32");
  expect_has(load_error("qwen3_awq_g32", [&](auto& es) {
               const uint16_t nan = 0x7e00;  // f16 NaN
               std::memcpy(st_entry(es, m + ".scales").bytes.data() + 6, &nan, 2);
             }),
             "scales must be finite");
  expect_has(load_error("llama_gptq_act_order", [&](auto& es) {
               const int32_t g = 7;  // 64 columns in groups of 32: 2 groups
               std::memcpy(st_entry(es, m + ".g_idx").bytes.data() + 4 * 5, &g, 4);
             }),
             "'" + m + ".g_idx' holds group 7 at column 5; the layer has 2 groups");
  expect_has(load_error("llama_ct_w4a16", [&](auto& es) {
               const int64_t wrong = 65;
               std::memcpy(st_entry(es, m + ".weight_shape").bytes.data() + 8, &wrong, 8);
             }),
             "'" + m + ".weight_shape' says [64, 65] but the config needs [64, 64]");
  expect_has(load_error("qwen3_ct_w4a16_asym", drop(m + ".weight_zero_point")), m + ".weight_zero_point");
  // a truncated file: the packed tensor's bytes run past the end
  expect_has(load_error("llama_ct_w4a16", [&](auto& es) { st_entry(es, m + ".weight_packed").bytes.resize(100); }),
             m + ".weight_packed");
}

TEST(Int4Checkpoint, ConfigsThatContradictTheTensorsAreRefused) {
  // the config's groups disagree with the stored scales
  expect_has(load_error("qwen3_gptq_g32", [](auto&) {}, [](nlohmann::json& j) { j["quantization_config"]["group_size"] = 16; }),
             ".qzeros' has shape [2, 8] but int4 layer 'model.layers.0.self_attn.q_proj' needs [4, 8]");
  // an fp8 config over int4 tensors: the layers are not where fp8 looks
  expect_has(load_error("llama_ct_w4a16", [](auto&) {}, [](nlohmann::json& j) { j.erase("quantization_config"); }),
             "model.layers.0.self_attn.q_proj.weight");
}

}  // namespace
}  // namespace brigade
