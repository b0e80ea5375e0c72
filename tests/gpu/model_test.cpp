// Whole-model check: a small synthetic Llama, the same shape as qwen3_moe (8 experts, all
// taken, one dense layer), as mixtral (8 experts, all taken, every layer sparse) and as
// deepseek_v3 (MLA, shared expert, first layer dense), written by write_synthetic_model and
// loaded on the CPU and on the GPU; a
// mixed prefill step and greedy decode steps give the same logits within bf16 tolerance and the
// same greedy tokens wherever the CPU's choice is decisive.
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "models/make_model.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/models/hf_fixture.h"
#include "tests/models/model_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

// Logits after 4 layers of bf16 activations (about 8 roundings of the residual stream per layer)
// stay within a few percent of the f32-activation CPU run.
constexpr double kLogitsTol = 4e-2;

struct Side {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> kv;
};

Side load(Backend& b, const std::string& dir, bool mtp = false) {
  LoadOptions o;
  o.max_batch_tokens = 256;
  o.progress = false;
  o.mtp = mtp;
  auto m = Model::load(dir, b, o);
  EXPECT_TRUE(m.has_value()) << m.status().to_string();
  Side s;
  s.model = std::move(*m);
  auto kv = KvCache::allocate(b, s.model->kv_layout(64, 16, DType::bf16));
  EXPECT_TRUE(kv.has_value()) << kv.status().to_string();
  s.kv = std::make_unique<KvCache>(std::move(*kv));
  return s;
}

// small_gpu_moe_model's shape as `arch`, every layer's 8 experts taken by every token: with
// top-k < E, bf16 router logits would pick another expert than the CPU's f32 ones wherever two
// are within ~1% (a few routings per run), and one such token is past the logits tolerance. The
// selection itself is compared exactly in GpuMoe.RouteMatchesCpu (and, for the grouped, biased
// choice, GpuMla.DeepseekRoutingMatchesCpu); here the router, its weights and every expert run.
SyntheticModelSpec every_expert(const std::string& arch) {
  SyntheticModelSpec spec = small_gpu_moe_model(11);
  spec.arch = arch;
  spec.n_experts = 8;
  spec.n_experts_per_tok = 8;
  if (arch != "qwen3_moe") spec.mlp_only_layers.clear();  // qwen3_moe keeps layer 2 dense
  return spec;
}

SyntheticModelSpec spec_for(const std::string& arch) {
  if (arch == "qwen3_moe") return every_expert(arch);
  SyntheticModelSpec spec = every_expert(arch);
  if (arch == "deepseek_v3") {  // MLA (q_lora_rank 64, latent 128, rope 32), a shared expert
    spec.q_lora_rank = 64;
    spec.kv_lora_rank = 128;
    spec.qk_nope_head_dim = 32;
    spec.qk_rope_head_dim = 32;
    spec.v_head_dim = 32;
    spec.routed_scaling_factor = 2.5f;
  } else if (arch == "mixtral") {  // block_sparse_moe, w1 / w3 / w2, experts intermediate_size wide
    spec.intermediate_size = spec.moe_intermediate_size;
  } else if (arch == "glm4_moe") {  // q/k/v biases and norms, half-rotated heads, layer 0 dense
    spec.routed_scaling_factor = 2.5f;
  } else {
    return small_gpu_model(11);
  }
  return spec;
}

class GpuModel : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuModel, LogitsAndGreedyTokensMatchCpu) {
  BRIGADE_REQUIRE_GPU();
  testing::TempDir dir("gpu_model");
  const SyntheticModelSpec spec = spec_for(GetParam());
  ASSERT_TRUE(write_synthetic_model(spec, dir.str()).is_ok());
  Side c = load(cpu(), dir.str()), g = load(*gpu(), dir.str());
  const int vocab = spec.vocab_size, page_size = 16, pages_per_seq = 16;

  std::mt19937 rng(12);
  std::vector<int32_t> p0(30), p1(45);
  for (auto& t : p0) t = static_cast<int32_t>(rng() % vocab);
  for (auto& t : p1) t = static_cast<int32_t>(rng() % vocab);
  StepBatch prefill = testing::make_step({{0, p0, 0, true}, {1, p1, 0, false}}, page_size, pages_per_seq);
  const auto lc = testing::run_step(*c.model, cpu(), *c.kv, prefill);
  const auto lg = testing::run_step(*g.model, *gpu(), *g.kv, prefill);
  EXPECT_LT(rel_error(lg, lc), kLogitsTol);

  // Greedy decode of both sequences, fed the CPU's tokens on both sides so contexts stay equal.
  int32_t t0 = testing::argmax(lc.data() + (lc.size() - 2 * vocab), vocab);
  int32_t t1 = testing::argmax(lc.data() + (lc.size() - vocab), vocab);
  int n0 = 30, n1 = 45, decisive = 0, steps = 16;
  for (int step = 0; step < steps; ++step) {
    StepBatch b = testing::make_step({{0, {t0}, n0, false}, {1, {t1}, n1, false}}, page_size, pages_per_seq);
    const auto dc = testing::run_step(*c.model, cpu(), *c.kv, b);
    const auto dg = testing::run_step(*g.model, *gpu(), *g.kv, b);
    EXPECT_LT(rel_error(dg, dc), kLogitsTol) << "step " << step;
    int32_t next[2];
    for (int r = 0; r < 2; ++r) {
      const float* rc = dc.data() + r * vocab;
      const float* rg = dg.data() + r * vocab;
      const int best = testing::argmax(rc, vocab);
      float second = -1e30f, max_diff = 0.0f;
      for (int i = 0; i < vocab; ++i) {
        if (i != best) second = std::max(second, rc[i]);
        max_diff = std::max(max_diff, std::abs(rc[i] - rg[i]));
      }
      // Only a margin larger than twice the largest logit difference makes the argmax decisive.
      if (rc[best] - second > 2 * max_diff) {
        ++decisive;
        EXPECT_EQ(testing::argmax(rg, vocab), best) << "step " << step << " row " << r;
      }
      next[r] = best;
    }
    t0 = next[0];
    t1 = next[1];
    ++n0;
    ++n1;
  }
  EXPECT_GE(decisive, steps / 2);  // a quarter of the 2 * steps choices at least were decisive

  // The device argmax agrees with the host argmax of the same GPU logits.
  const auto lgt = put(*gpu(), DType::f32, {2, vocab}, std::vector<float>(lg.end() - 2 * vocab, lg.end()));
  const auto tok = empty(*gpu(), DType::i32, {2});
  gpu()->argmax(lgt.tensor, tok.tensor);
  const auto dev = get(*gpu(), tok.tensor);
  EXPECT_EQ(static_cast<int>(dev[0]), testing::argmax(lg.data() + (lg.size() - 2 * vocab), vocab));
  EXPECT_EQ(static_cast<int>(dev[1]), testing::argmax(lg.data() + (lg.size() - vocab), vocab));
}

INSTANTIATE_TEST_SUITE_P(Archs, GpuModel, ::testing::Values("llama", "qwen3_moe", "deepseek_v3", "mixtral", "glm4_moe"));

// `name`'s fixture with every expert taken (a copy in `into`): num_experts_per_tok is the expert
// count (and every group of GLM-4.5's), so bf16 near-ties in the routing cannot flip a choice.
std::string every_expert_copy(const testing::TempDir& into, const std::string& name) {
  std::filesystem::create_directories(into.file(name));
  std::filesystem::copy_file(testing::fixture_dir(name) + "/model.safetensors", into.file(name) + "/model.safetensors");
  auto config = nlohmann::json::parse(*read_text_file(testing::fixture_dir(name) + "/config.json"));
  nlohmann::json& text = config.contains("text_config") ? config["text_config"] : config;  // Llama 4's wrapper
  for (const char* key : {"num_local_experts", "num_experts", "n_routed_experts"})
    if (text.contains(key)) text["num_experts_per_tok"] = text[key];
  if (text.contains("n_group")) text["topk_group"] = text["n_group"];  // glm4_moe, mistral4: every group too
  if (text.value("enable_moe_block", false)) text["top_k_experts"] = text["num_experts"];  // Gemma 4's name of it
  if (text.contains("num_expert_group")) text["topk_group"] = text["num_expert_group"];  // kimi_linear's name of it
  if (text.contains("zero_expert_num"))  // longcat_flash: its moe_topk over the real and zero experts alike
    text["moe_topk"] = text["n_routed_experts"].get<int>() + text["zero_expert_num"].get<int>();
  // DSA (deepseek_v32, glm_moe_dsa): every key kept, so bf16 near-ties of the index scores cannot
  // flip a choice; the indexer, its key cache and the listed attention still run (GpuDsa.* checks the choice).
  if (text.contains("index_topk")) text["index_topk"] = text["max_position_embeddings"];
  testing::write_text(into.file(name) + "/config.json", config.dump());
  return into.file(name);
}

// The GPU's prefill of `name`'s long prompt (the checkpoint at `dir`) and its decode steps equal
// the CPU's within bf16 tolerance.
void expect_fixture_matches_cpu(const std::string& name, const std::string& dir) {
  SCOPED_TRACE(name);
  Side c = load(cpu(), dir), g = load(*gpu(), dir);
  const testing::FixtureCase fc = testing::read_fixture_cases(name).back();
  StepBatch prefill = testing::make_step({{0, fc.prompt, 0, true}}, 16, 16);
  EXPECT_LT(rel_error(testing::run_step(*g.model, *gpu(), *g.kv, prefill), testing::run_step(*c.model, cpu(), *c.kv, prefill)),
            kLogitsTol);
  int n = static_cast<int>(fc.prompt.size());
  for (const int32_t t : fc.greedy) {
    StepBatch b = testing::make_step({{0, {t}, n++, false}}, 16, 16);
    EXPECT_LT(rel_error(testing::run_step(*g.model, *gpu(), *g.kv, b), testing::run_step(*c.model, cpu(), *c.kv, b)),
              kLogitsTol);
  }
}

// Gemma 2 (soft-capped scores and logits, alternating windows), Gemma 3 (q/k norms, local and
// global RoPE), Gemma 3n (AltUp, LAuReL, per-layer inputs, K/V reused across layers, gaussian
// top-k: the Backend::supports_altup ops) and gpt-oss (attention sinks, YaRN, biased experts with the clamped SwiGLU) from
// the transformers fixtures: the GPU's prefill of the long prompt (past the window) and its
// decode steps equal the CPU's within bf16 tolerance. Qwen2-MoE (its sigmoid-gated shared
// expert) and GLM-4.5 (half-rotated heads with q/k norms and biases, sigmoid routing with the
// selection bias and scaling, a shared expert) too, and DeepSeek-V3's descendants: Mistral Small 4
// (MLA with its query temperature on the latent and rope parts of q, softmax groups) and
// GLM-4.7-Flash (MLA, v wider than nope, sigmoid routing); LongCat-Flash (two scaled MLA blocks per
// layer, the shortcut MoE with zero experts: Backend::moe_identity_experts). The MoE fixtures run with every expert taken, as the synthetic models above: the
// gpt_oss router logits hold near-ties (0.005 apart) that bf16 activations would flip, moving the
// logits by about 1 (not an error of either backend).
TEST(GpuModel, GemmaAndGptOssFixturesMatchCpu) {
  BRIGADE_REQUIRE_GPU();
  testing::TempDir every_expert("gpu_every_expert");
  for (const char* name : {"gemma2", "gemma3", "gemma3n", "gemma3n_mm"})
    expect_fixture_matches_cpu(name, testing::fixture_dir(name));
  for (const char* name : {"gpt_oss", "qwen2_moe", "glm4_moe", "mistral4", "glm4_moe_lite", "deepseek_v32", "glm_moe_dsa",
                           "longcat_flash", "axk1", "axk1_hub"})
    expect_fixture_matches_cpu(name, every_expert_copy(every_expert, name));
}

// Gemma 4's fixture `name` at the released head sizes, written into `into`: sliding heads 256
// wide (the fixture's 16 x 16), full heads 512 (per_layer_config's 32 x 16, Hub's
// global_head_dim), every attention tensor (q/k/v/o projections, q/k norms) drawn anew at its
// widened shape, the rest as stored; the MoE block with every expert taken (see every_expert).
// q/k norm weights in [0.15, 0.35] keep the scores (softmax scale 1 over unit-RMS heads) within a
// few units, as trained ones are.
void write_wide_gemma4(const testing::TempDir& into, const std::string& name) {
  constexpr int kWiden = 16;
  std::mt19937 rng(41);
  auto widen = [&](std::vector<testing::StEntry>& entries) {
    for (testing::StEntry& e : entries) {
      if (e.name.find(".self_attn.") == std::string::npos) continue;
      const bool norm = e.name.find("_norm.") != std::string::npos;
      e.shape[e.name.find(".o_proj.") != std::string::npos ? 1 : 0] *= kWiden;
      const int64_t n = e.shape[0] * (norm ? 1 : e.shape[1]);
      const float bound = norm ? 0.0f : std::sqrt(3.0f / static_cast<float>(e.shape[1]));  // unit-variance outputs
      const std::vector<float> v = norm ? random_values(rng, n, 0.15f, 0.35f) : random_values(rng, n, -bound, bound);
      e.dtype = "F32";
      e.bytes.resize(v.size() * sizeof(float));
      std::memcpy(e.bytes.data(), v.data(), e.bytes.size());
    }
  };
  testing::write_edited_fixture(name, into, widen, [](nlohmann::json& c) {
    c["head_dim"] = c["head_dim"].get<int>() * kWiden;
    for (nlohmann::json& shape : c["per_layer_config"])  // layer index -> its head_dim (full layers)
      if (shape.contains("head_dim")) shape["head_dim"] = shape["head_dim"].get<int>() * kWiden;
    if (c.value("enable_moe_block", false)) c["top_k_experts"] = c["num_experts"];
  });
}

// Gemma 4 (models/gemma4.h) on CUDA: its transformers fixtures as stored (31B-like with K = V,
// E2B-like with per-layer inputs and shared K/V, 26B-A4B-like with the MoE block's gelu experts
// and per-expert scale, every expert taken), then at the released head sizes (write_wide_gemma4:
// 256-wide sliding and 512-wide full layers, attention.cu's two buckets in one model, the KV
// pool of two shapes): the long prompt's prefill and the decode steps within bf16 tolerance of
// the CPU's, which the fixtures check against transformers.
TEST(GpuModel, Gemma4FixturesMatchCpu) {
  BRIGADE_REQUIRE_GPU();
  testing::TempDir every_expert("gpu_every_expert_gemma4");
  expect_fixture_matches_cpu("gemma4_dense", testing::fixture_dir("gemma4_dense"));
  expect_fixture_matches_cpu("gemma4_e2b", testing::fixture_dir("gemma4_e2b"));
  expect_fixture_matches_cpu("gemma4_moe", every_expert_copy(every_expert, "gemma4_moe"));
  for (const char* name : {"gemma4_dense", "gemma4_e2b", "gemma4_moe"}) {
    SCOPED_TRACE("wide");
    testing::TempDir wide(std::string("gpu_wide_") + name);
    write_wide_gemma4(wide, name);
    expect_fixture_matches_cpu(name, wide.str());
  }
}

// The wide Gemma 4s (write_wide_gemma4) as the executor's device path runs them: decode steps of
// two sequences inside Backend::begin_step / end_step, so the step with 256- and 512-wide layers
// (their own shapes, RoPE tables and KV pools; the split count fixed, so the 512-wide splits
// run) is captured once and replayed. Every step's logits within bf16 tolerance of the CPU's eager
// step; the first step runs eagerly, the second captures, the rest replay.
TEST(GpuModel, WideGemma4DecodeStepsReplayAsGraphs) {
  BRIGADE_REQUIRE_GPU();
  for (const char* name : {"gemma4_dense", "gemma4_moe"}) {
    SCOPED_TRACE(name);
    testing::TempDir wide(std::string("gpu_wide_graph_") + name);
    write_wide_gemma4(wide, name);
    Side c = load(cpu(), wide.str()), g = load(*gpu(), wide.str());
    const int vocab = c.model->config().vocab_size, steps = 8;
    std::mt19937 rng(9);
    std::vector<int32_t> p0(21), p1(40);
    for (auto& t : p0) t = static_cast<int32_t>(rng() % vocab);
    for (auto& t : p1) t = static_cast<int32_t>(rng() % vocab);
    StepBatch prefill = testing::make_step({{0, p0, 0, false}, {1, p1, 0, false}}, 16, 16);
    const auto lc = testing::run_step(*c.model, cpu(), *c.kv, prefill);
    EXPECT_LT(rel_error(testing::run_step(*g.model, *gpu(), *g.kv, prefill), lc), kLogitsTol);
    int32_t t0 = testing::argmax(lc.data(), vocab), t1 = testing::argmax(lc.data() + vocab, vocab);
    int n0 = 21, n1 = 40;
    const OwnedTensor logits = empty(*gpu(), DType::f32, {2, vocab});  // one address: one graph
    const CudaGraphStats before = gpu()->graph_stats();
    for (int step = 0; step < steps; ++step) {
      const StepBatch b = testing::make_step({{0, {t0}, n0++, false}, {1, {t1}, n1++, false}}, 16, 16);
      const auto dc = testing::run_step(*c.model, cpu(), *c.kv, b);
      gpu()->begin_step(4242);
      const Status st = g.model->forward(b, *g.kv, logits.tensor);
      gpu()->end_step();
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      EXPECT_LT(rel_error(get(*gpu(), logits.tensor), dc), kLogitsTol) << "step " << step;
      t0 = testing::argmax(dc.data(), vocab);
      t1 = testing::argmax(dc.data() + vocab, vocab);
    }
    const CudaGraphStats after = gpu()->graph_stats();
    EXPECT_EQ(after.captures - before.captures, 1);
    EXPECT_EQ(after.replays - before.replays, steps - 1);
  }
}

// The Llama decoder's newer relatives (models/llama_variants_config.h) from their transformers
// fixtures: OLMo 3's post norms, whole-width q/k norms (qk_head_norm's whole kernel), windows and
// YaRN; EXAONE 4's NoPE full layers; GLM-4's half-rotated pairs and fused gate|up; Seed-OSS's and
// ERNIE 4.5's biases; Hunyuan's norms after RoPE; Apertus's xIELU; OLMoE's experts (every one
// taken, as above); Llama 4's chunked attention, weightless q/k norms, query temperature and
// experts weighted on their inputs, MiniMax-M2's whole-width q/k norms before a partial RoPE and
// its biased sigmoid routing (every expert taken); Cohere's LayerNorms (layer_norm's kernel),
// parallel blocks, per-head q/k LayerNorms (Command R+) and Command R7B's windows and NoPE layers;
// Granite 3 MoE's fused experts and shared MLP (every expert taken); dots.llm1's q/k norms,
// window and DeepSeek-V3 routing beside shared experts (every expert and group taken); Ministral
// 3's query temperature on every layer (offset 0) and window; Arcee AFM's relu2 MLP and YaRN;
// AFMoE's output gate (sigmoid_mul), NoPE full layer, windows and biased sigmoid routing beside
// shared experts (every expert taken); MiMo-V2-Flash's widened KV heads, zero-padded v heads, value
// scale and sinks on its sliding layers, K-EXAONE's NoPE full layer and shared expert (every expert taken);
// Gemma 1's gelu gate, StarCoder2's and Phi-2's ungated gelu_tanh MLP with biases and biased
// LayerNorms (Phi's parallel blocks and lm_head bias), StableLM's partial RoPE and StableLM 2 12B's
// per-head q/k LayerNorms stored one tensor per head; Jais 2's and Nemotron's ungated relu2 MLP and
// biased LayerNorms (Nemotron's 1 + w, partial RoPE), EXAONE 3.5's llama3 RoPE, FlexOlmo's post-norms
// with experts; BitNet's sub-norms and gated relu2 (bitnet_plain: the ternary fixtures' int8 inputs
// round differently from bf16 activations, so their ops are checked alone, GpuSsm.Relu2MulAndQuantizeRowsInt8).
TEST(GpuModel, LlamaVariantsFixturesMatchCpu) {
  BRIGADE_REQUIRE_GPU();
  testing::TempDir every_expert("gpu_every_expert_variants");
  // Phi-3.5-MoE as stored: sparsemixer routes exactly 2 experts (no every-expert copy); its
  // LayerNorms' and lm_head's biases.
  for (const char* name : {"olmo3", "exaone4", "glm4", "seed_oss", "ernie4_5", "hunyuan_v1_dense", "apertus", "cohere",
                           "cohere2", "phimoe", "ministral3", "ministral3_text", "arcee", "gemma", "starcoder2", "phi",
                           "stablelm", "stablelm_parallel", "jais2", "nemotron", "exaone", "bitnet_plain"})
    expect_fixture_matches_cpu(name, testing::fixture_dir(name));
  for (const char* name : {"olmoe", "llama4", "llama4_text", "minimax_m2", "granitemoe", "granitemoeshared",
                           "hunyuan_v1_moe", "dots1", "afmoe", "mimo_v2_flash", "exaone_moe", "kolibri1", "flint", "mellum", "flex_olmo"})
    expect_fixture_matches_cpu(name, every_expert_copy(every_expert, name));
}

// The classic GPT decoders (models/gpt_decoders_config.h): GPT-NeoX's parallel residual with two
// LayerNorms and partial RoPE (and the sequential one), GPT-J's interleaved partial RoPE and
// lm_head bias, GPT-2's learned positions, GPTBigCode's MQA and MHA, Falcon's MQA, new decoder
// (grouped K/V, one or two norms) and sequential layer, GPT-Neo's local layers and unscaled
// scores, OPT's offset positions and relu MLP, BLOOM's and MPT's ALiBi (attention.cu's scores)
// (Backend::clamp); their ungated GELU MLPs (Backend::gelu / gelu_tanh: gpu/row_ops.cu's gelu_kernel).
TEST(GpuModel, ClassicGptDecodersMatchCpu) {
  BRIGADE_REQUIRE_GPU();
  for (const char* name : {"gpt_neox", "gpt_neox_sequential", "gptj", "gpt2", "gpt_bigcode", "gpt_bigcode_mha", "falcon",
                           "falcon_new", "falcon_one_norm", "falcon_sequential", "opt", "gpt_neo", "bloom", "mpt",
                           "mpt_clip"})
    expect_fixture_matches_cpu(name, testing::fixture_dir(name));
}

// The state-space and hybrid models (models/state_space.h) from their transformers fixtures on
// the CUDA state-space ops (gpu/ssm.cu): the long prompt and its first half prefilled in one step
// (two sequences, two state slots, two lengths), then decode steps of both, the first fed
// transformers' greedy tokens and the second the CPU's. Every step's logits within bf16
// tolerance of the CPU's, and the GPU's greedy token the CPU's wherever the CPU's margin is
// larger than twice the largest logit difference (decisive); most choices are.
void expect_recurrent_fixture_matches_cpu(const std::string& name, const std::string& dir) {
  SCOPED_TRACE(name);
  LoadOptions o;
  o.max_batch_tokens = 256;
  o.progress = false;
  o.state_slots = 2;
  Side sides[2];
  for (int i = 0; i < 2; ++i) {
    Backend& b = i == 0 ? static_cast<Backend&>(cpu()) : static_cast<Backend&>(*gpu());
    auto m = Model::load(dir, b, o);
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    sides[i].model = std::move(*m);
    auto kv = KvCache::allocate(b, sides[i].model->kv_layout(64, 16, DType::bf16));
    ASSERT_TRUE(kv.has_value()) << kv.status().to_string();
    sides[i].kv = std::make_unique<KvCache>(std::move(*kv));
  }
  Side &c = sides[0], &g = sides[1];
  const int vocab = c.model->config().vocab_size;
  const testing::FixtureCase fc = testing::read_fixture_cases(name).back();
  const std::vector<int32_t> half(fc.prompt.begin(), fc.prompt.begin() + static_cast<long>(fc.prompt.size() / 2 + 1));
  int n0 = static_cast<int>(fc.prompt.size()), n1 = static_cast<int>(half.size()), decisive = 0, choices = 0;
  StepBatch b = testing::make_step({{0, fc.prompt, 0, false}, {1, half, 0, false}}, 16, 16);
  int32_t t1 = 0;
  for (size_t step = 0; step < fc.greedy.size(); ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    const auto lc = testing::run_step(*c.model, cpu(), *c.kv, b), lg = testing::run_step(*g.model, *gpu(), *g.kv, b);
    EXPECT_LT(rel_error(lg, lc), kLogitsTol);
    for (int r = 0; r < 2; ++r) {
      const float* rc = lc.data() + r * vocab;
      const float* rg = lg.data() + r * vocab;
      const int best = testing::argmax(rc, vocab);
      float second = -1e30f, max_diff = 0.0f;
      for (int i = 0; i < vocab; ++i) {
        if (i != best) second = std::max(second, rc[i]);
        max_diff = std::max(max_diff, std::abs(rc[i] - rg[i]));
      }
      ++choices;
      if (rc[best] - second > 2 * max_diff) {
        ++decisive;
        EXPECT_EQ(testing::argmax(rg, vocab), best) << "row " << r;
      }
      if (r == 1) t1 = best;
    }
    b = testing::make_step({{0, {fc.greedy[step]}, n0++, false}, {1, {t1}, n1++, false}}, 16, 16);
  }
  EXPECT_GE(2 * decisive, choices);
}

// Every state-space family's fixtures: Mamba1 and FalconMamba (ssm_conv, ssm_scan_diag), Mamba2
// (ssm_scan with its grouped norm; with biases), Nemotron-H (Mamba2 mixers, attention without
// positions, relu2 MLPs), Granite 4.0-H (Mamba2 mixers beside attention; dense and with experts),
// Falcon-H1 (a mixer and RoPE attention side by side), Jamba (Mamba1 mixers, experts), LFM2 and
// LFM2-MoE (short_conv), Qwen3.5 and Qwen3-Next / Qwen3.5-MoE (gated_delta, the gated
// attention's sigmoid_mul), Kimi Linear (kda, MLA without RoPE, DeepSeek-V3's routing), MiniMax (lightning_attention,
// the residual scalings, Mixtral's experts). The MoE fixtures run with every expert taken (see every_expert).
// Nemotron 3's relu2 experts run on the CPU only (supports_relu2_experts), so nemotron_h_moe is not here.
TEST(GpuModel, StateSpaceFixturesMatchCpu) {
  BRIGADE_REQUIRE_GPU();
  testing::TempDir every_expert("gpu_every_expert_ssm");
  for (const char* name : {"mamba1", "falcon_mamba", "mamba2", "mamba2_bias", "nemotron_h", "nemotron_h_bias",
                           "granite_hybrid_dense", "falcon_h1", "falcon_h1_norm", "lfm2", "qwen3_5"})
    expect_recurrent_fixture_matches_cpu(name, testing::fixture_dir(name));
  for (const char* name : {"granite_hybrid", "jamba", "lfm2_moe", "qwen3_next", "qwen3_5_moe", "kimi_linear", "minimax"})
    expect_recurrent_fixture_matches_cpu(name, every_expert_copy(every_expert, name));
}

// The MTP module of `spec` given one MTP layer, GPU against CPU (MtpModuleMatchesCpu).
void run_mtp_module_check(SyntheticModelSpec spec) {
  testing::TempDir dir("gpu_mtp");
  spec.n_mtp_layers = 1;
  ASSERT_TRUE(write_synthetic_model(spec, dir.str()).is_ok());
  Side c = load(cpu(), dir.str(), true), g = load(*gpu(), dir.str(), true);
  ASSERT_EQ(g.model->n_mtp_layers(), 1);
  const int vocab = spec.vocab_size, n = 40, hidden = spec.hidden_size;
  std::mt19937 rng(5);
  std::vector<int32_t> tokens(n + 1);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % vocab);
  std::vector<std::vector<float>> out;
  for (Side* side : {&c, &g}) {
    Backend& b = side == &c ? static_cast<Backend&>(cpu()) : static_cast<Backend&>(*gpu());
    const DType act = b.activation_dtype();
    auto h = b.allocate(dtype_bytes(act, int64_t{n} * hidden));
    auto g_out = b.allocate(dtype_bytes(act, hidden));
    auto g_next = b.allocate(dtype_bytes(act, hidden));
    ASSERT_TRUE(h && g_out && g_next);
    StepBatch target = testing::make_step({{0, std::vector<int32_t>(tokens.begin(), tokens.begin() + n), 0, true}}, 16, 16);
    target.logit_rows.clear();
    for (int r = 0; r < n; ++r) target.hidden_rows.push_back(r);
    target.hidden = h->view(act, {n, hidden});
    ASSERT_TRUE(side->model->forward(target, *side->kv, Tensor()).is_ok());
    StepBatch m = testing::make_step({{0, std::vector<int32_t>(tokens.begin() + 1, tokens.end()), 0, true}}, 16, 16);
    m.prev_hidden = target.hidden;
    m.hidden_rows = {n - 1};
    m.hidden = g_out->view(act, {1, hidden});
    auto logits = b.allocate(sizeof(float) * static_cast<size_t>(n) * vocab);
    ASSERT_TRUE(logits);
    ASSERT_TRUE(side->model->forward_mtp(m, *side->kv, logits->view(DType::f32, {n, vocab})).is_ok());
    std::vector<float> host(static_cast<size_t>(n) * vocab);
    b.download(host.data(), logits->view(DType::f32, {n, vocab}));
    // One chained draft at position n, fed a fixed token and the module's output at n - 1.
    StepBatch chain = testing::make_step({{0, {7}, n, true}}, 16, 16);
    chain.prev_hidden = m.hidden;
    chain.hidden_rows = {0};
    chain.hidden = g_next->view(act, {1, hidden});
    ASSERT_TRUE(side->model->forward_mtp(chain, *side->kv, logits->view(DType::f32, {1, vocab})).is_ok());
    std::vector<float> row(static_cast<size_t>(vocab));
    b.download(row.data(), logits->view(DType::f32, {1, vocab}));
    host.insert(host.end(), row.begin(), row.end());
    out.push_back(std::move(host));
  }
  EXPECT_LT(rel_error(out[1], out[0]), kLogitsTol);
}

// DeepSeek-V3's and GLM-4.5's MTP modules (Model::forward_mtp) on the GPU: over the target's own
// hidden states of a 40-token prompt (every row's logits), then a chained draft fed the module's
// own output, the GPU's logits equal the CPU's within bf16 tolerance (every expert taken, as above).
TEST(GpuModel, MtpModuleMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  for (const std::string arch : {"deepseek_v3", "glm4_moe"}) {
    SCOPED_TRACE(arch);
    run_mtp_module_check(spec_for(arch));
  }
}

}  // namespace
}  // namespace brigade
