// make-model writes Hugging Face-layout files deterministically from a seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include <cmath>

#include "cpu/cpu_backend.h"
#include "model_test_util.h"
#include "models/checkpoint.h"
#include "models/make_model.h"
#include "models/model_chat_template.h"
#include "models/model_config.h"
#include "models/synthetic_tokenizer.h"
#include "tests/models/chat_test_util.h"

namespace brigade {
namespace {

SyntheticModelSpec spec(uint64_t seed) {
  SyntheticModelSpec s;
  s.hidden_size = 32;
  s.n_layers = 1;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.intermediate_size = 40;
  s.vocab_size = 400;
  s.max_position = 128;
  s.dtype = DType::f16;
  s.seed = seed;
  return s;
}

TEST(MakeModel, DeterministicFromSeed) {
  testing::TempDir a("mm_a"), b("mm_b"), c("mm_c");
  ASSERT_TRUE(write_synthetic_model(spec(1), a.str()).is_ok());
  ASSERT_TRUE(write_synthetic_model(spec(1), b.str()).is_ok());
  ASSERT_TRUE(write_synthetic_model(spec(2), c.str()).is_ok());
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    EXPECT_EQ(testing::read_bytes(a.file(f)), testing::read_bytes(b.file(f))) << f;
  EXPECT_NE(testing::read_bytes(a.file("model.safetensors")), testing::read_bytes(c.file("model.safetensors")));
}

TEST(MakeModel, HuggingFaceLayout) {
  testing::TempDir dir("mm_layout");
  ASSERT_TRUE(write_synthetic_model(spec(1), dir.str()).is_ok());
  const auto config = nlohmann::json::parse(testing::read_bytes(dir.file("config.json")));
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_EQ(config["torch_dtype"], "float16");
  EXPECT_EQ(config["num_key_value_heads"], 2);
  EXPECT_EQ(config["tie_word_embeddings"], true);
  EXPECT_EQ(config["rms_norm_eps"].dump(), "1e-05");
  auto parsed = parse_hf_config(config.dump());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->head_dim, 8);

  // Safetensors: metadata format "pt" (transformers requires it), 8-byte aligned data, tensors
  // contiguous and covering the data area exactly.
  const auto bytes = testing::read_bytes(dir.file("model.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, e] : header.items())
    if (name != "__metadata__") ranges.emplace_back(e["data_offsets"][0], e["data_offsets"][1]);
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (auto [begin, end] : ranges) { EXPECT_EQ(begin, at); at = end; }
  EXPECT_EQ(8 + n + at, bytes.size());
  EXPECT_FALSE(header.contains("lm_head.weight"));  // tied
  EXPECT_TRUE(header.contains("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_EQ(header["model.layers.0.self_attn.k_proj.weight"]["shape"], nlohmann::json::array({16, 32}));
  EXPECT_EQ(header["model.layers.0.self_attn.k_proj.weight"]["dtype"], "F16");
}

TEST(MakeModel, TokenizerJsonIsWellFormedBpe) {
  testing::TempDir dir("mm_tok");
  ASSERT_TRUE(write_synthetic_model(spec(1), dir.str()).is_ok());
  const auto j = nlohmann::json::parse(testing::read_bytes(dir.file("tokenizer.json")));
  for (const char* key : {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                          "post_processor", "decoder", "model"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["pre_tokenizer"]["type"], "ByteLevel");
  EXPECT_EQ(j["pre_tokenizer"]["add_prefix_space"], false);
  EXPECT_EQ(j["pre_tokenizer"]["use_regex"], true);
  const auto& vocab = j["model"]["vocab"];
  ASSERT_EQ(vocab.size(), 400u);
  std::set<int> ids;
  for (const auto& [tok, id] : vocab.items()) ids.insert(id.get<int>());
  EXPECT_EQ(ids.size(), 400u);
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), 399);
  std::set<std::string> made;
  for (const auto& m : j["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    const std::string a = s.substr(0, s.find(' ')), b = s.substr(s.find(' ') + 1);
    EXPECT_TRUE(vocab.contains(a) && vocab.contains(b)) << s;
    EXPECT_TRUE(made.insert(a + b).second) << "merge result repeated: " << s;
  }
  EXPECT_EQ(made.size(), 400u - 259u);
  EXPECT_EQ(j["added_tokens"][1]["content"], "<s>");
  EXPECT_EQ(j["added_tokens"][1]["id"], 1);
}

// The checkpoint in `dir` (vocabulary 400) loads on the CPU and one step of 3 tokens gives
// finite logits.
void expect_loads_and_runs(const std::string& dir, const std::string& what) {
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions opts;
  opts.max_batch_tokens = 16;
  opts.progress = false;
  auto model = Model::load(dir, *backend, opts);
  ASSERT_TRUE(model.has_value()) << what << ": " << model.status().to_string();
  auto kv = KvCache::allocate(*backend, (*model)->kv_layout(2, 16, DType::f32));
  ASSERT_TRUE(kv.has_value());
  const auto logits = testing::run_step(**model, *backend, *kv, testing::make_step({{0, {1, 5, 9}, 0, false}}, 16, 2));
  ASSERT_EQ(logits.size(), 400u);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v)) << what;
}

// Every supported architecture: its own config.json and tensors, loaded and run by Model::load.
TEST(MakeModel, EveryArchitectureLoadsAndRuns) {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    testing::TempDir dir(std::string("mm_") + arch);
    SyntheticModelSpec s = spec(3);
    s.arch = arch;
    s.head_dim = std::string(arch) == "qwen3" ? 16 : 0;  // qwen3: head_dim independent of hidden/heads
    ASSERT_TRUE(write_synthetic_model(s, dir.str()).is_ok()) << arch;
    auto ck = Checkpoint::open(dir.str());
    ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
    EXPECT_EQ((*ck)->config().arch, arch);
    EXPECT_EQ((*ck)->config().qkv_bias, std::string(arch) == "qwen2");
    EXPECT_EQ((*ck)->config().qk_norm, std::string(arch) == "qwen3");
    EXPECT_EQ((*ck)->tensors().count("model.layers.0.self_attn.q_proj.bias"), std::string(arch) == "qwen2" ? 1u : 0u);
    EXPECT_EQ((*ck)->tensors().count("model.layers.0.self_attn.k_norm.weight"), std::string(arch) == "qwen3" ? 1u : 0u);

    expect_loads_and_runs(dir.str(), arch);
  }
}

// Each family gets its real chat template (the text models.json's references were rendered
// from), and the model serves it: the prompt is transformers' rendering.
TEST(MakeModel, WritesTheFamilysRealChatTemplate) {
  const std::vector<std::pair<const char*, const char*>> families = {
      {"llama", "llama-2"}, {"qwen2", "qwen2.5"}, {"qwen3", "qwen3"}, {"qwen3_moe", "qwen3"},
      {"qwen2_moe", "qwen2.5"}, {"glm4_moe", "glm-4.6"}, {"deepseek_v2", "deepseek-v3.1"},
      {"deepseek_v3", "deepseek-v3.1"}};
  for (const auto& [arch, name] : families) {
    SCOPED_TRACE(arch);
    EXPECT_EQ(std::string(synthetic_chat_template(arch).name), name);
    const std::string real = testing::real_chat_template(name);
    ASSERT_FALSE(real.empty()) << "tests/fixtures/chat_templates/models.json: run scripts/make_chat_template_fixtures.py";
    EXPECT_EQ(synthetic_chat_template(arch).text, real);
  }
  for (const char* arch : {"llama", "qwen2"}) {
    testing::TempDir dir(std::string("mm_chat_") + arch);
    SyntheticModelSpec s = spec(1);
    s.arch = arch;
    ASSERT_TRUE(write_synthetic_model(s, dir.str()).is_ok());
    auto served = load_chat_template(dir.str(), "", {});
    ASSERT_TRUE(served.has_value()) << served.status().to_string();
    EXPECT_EQ(served->describe(), "Jinja (tokenizer_config.json)");
    const auto c = testing::chat_template_case(synthetic_chat_template(arch).name, "system_multi_turn", true);
    ASSERT_TRUE(c.contains("expected"));
    EXPECT_EQ(*served->apply(testing::case_messages(c), {}, true), c["expected"].get<std::string>());
  }
}

TEST(MakeModel, RejectsBadSpecs) {
  testing::TempDir dir("mm_bad");
  SyntheticModelSpec s = spec(1);
  s.vocab_size = 100;
  EXPECT_EQ(write_synthetic_model(s, dir.str()).code(), StatusCode::invalid_argument);
  s = spec(1);
  s.n_kv_heads = 3;
  EXPECT_EQ(write_synthetic_model(s, dir.str()).code(), StatusCode::invalid_argument);
  s = spec(1);
  s.arch = "gpt2";
  EXPECT_EQ(write_synthetic_model(s, dir.str()).code(), StatusCode::invalid_argument);
  s = spec(1);
  s.arch = "deepseek_v3";
  s.n_group = 3;  // does not divide the 8 experts
  const Status groups = write_synthetic_model(s, dir.str());
  EXPECT_EQ(groups.code(), StatusCode::invalid_argument);
  EXPECT_NE(groups.message().find("n_group"), std::string::npos) << groups.to_string();
}

// deepseek_v2 / v3 as make-model writes them: the Hub's config names, MLA tensors (q_proj or the
// q_a/q_b pair), the V3 selection bias, shared experts and the dense first layer; they load and
// run, and a missing tensor is named in the error.
TEST(MakeModel, DeepseekLayoutLoadsAndRuns) {
  for (const char* arch : {"deepseek_v2", "deepseek_v3"}) {
    testing::TempDir dir(std::string("mm_") + arch);
    SyntheticModelSpec s = spec(2);
    s.arch = arch;
    s.n_layers = 2;
    s.q_lora_rank = std::string(arch) == "deepseek_v3" ? 16 : 0;
    s.n_group = 2;
    s.topk_group = 1;
    ASSERT_TRUE(write_synthetic_model(s, dir.str()).is_ok()) << arch;
    auto ck = Checkpoint::open(dir.str());
    ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
    const ModelConfig& c = (*ck)->config();
    EXPECT_EQ(c.arch, arch);
    EXPECT_EQ(c.q_lora_rank, s.q_lora_rank);
    EXPECT_EQ(c.kv_lora_rank, s.kv_lora_rank);
    EXPECT_FALSE(c.is_moe_layer(0));
    EXPECT_TRUE(c.is_moe_layer(1));
    const auto& t = (*ck)->tensors();
    EXPECT_EQ(t.count("model.layers.0.self_attn.q_a_proj.weight"), s.q_lora_rank > 0 ? 1u : 0u);
    EXPECT_EQ(t.count("model.layers.0.self_attn.q_proj.weight"), s.q_lora_rank > 0 ? 0u : 1u);
    EXPECT_EQ(t.count("model.layers.1.mlp.gate.e_score_correction_bias"), std::string(arch) == "deepseek_v3" ? 1u : 0u);
    EXPECT_EQ(t.count("model.layers.1.mlp.shared_experts.down_proj.weight"), 1u);
    EXPECT_EQ(t.count("model.layers.0.mlp.experts.0.up_proj.weight"), 0u);

    expect_loads_and_runs(dir.str(), arch);
  }
  // The same checkpoint without one layer's kv_b_proj: the load names it.
  testing::TempDir dir("mm_ds_cut");
  SyntheticModelSpec s = spec(2);
  s.arch = "deepseek_v3";
  s.n_layers = 2;
  s.dtype = DType::bf16;
  ASSERT_TRUE(write_synthetic_model(s, dir.str()).is_ok());
  auto ck = Checkpoint::open(dir.str());
  ASSERT_TRUE(ck.has_value());
  std::vector<testing::StEntry> entries;
  for (const auto& [name, t] : (*ck)->tensors())
    if (name != "model.layers.1.self_attn.kv_b_proj.weight")
      entries.push_back({name, "BF16", t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())});
  testing::write_safetensors_file(dir.file("model.safetensors"), entries);
  auto backend = make_cpu_backend({.n_threads = 1});
  auto missing = Model::load(dir.str(), *backend, LoadOptions{.progress = false});
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.status().message().find("model.layers.1.self_attn.kv_b_proj.weight"), std::string::npos)
      << missing.status().message();
}

// deepseek_v3 and glm4_moe with --mtp-layers 1: num_nextn_predict_layers 1 and the MTP module
// under model.layers.{n_layers}: its decoder layer named and shaped as the sparse layer 1, enorm,
// hnorm, eh_proj [h, 2h], shared_head.norm, and copies of the embedding and lm_head; it loads
// with LoadOptions::mtp. FP8 quantizes the module's layer but not eh_proj; other archs and
// negative counts are refused naming the flag.
TEST(MakeModel, MtpModulesInTheHubLayout) {
  testing::TempDir dir("mm_ds_mtp");
  SyntheticModelSpec s = spec(4);
  for (const std::string arch : {"glm4_moe", "deepseek_v3"}) {
    s = spec(4);
    s.arch = arch;
    s.n_layers = 2;
    s.q_lora_rank = 16;
    s.tie_embeddings = false;
    s.n_mtp_layers = 1;
    ASSERT_TRUE(write_synthetic_model(s, dir.str()).is_ok()) << arch;
    const auto config = nlohmann::json::parse(testing::read_bytes(dir.file("config.json")));
    EXPECT_EQ(config["num_nextn_predict_layers"], 1);
    EXPECT_EQ(config["num_hidden_layers"], 2);
    auto ck = Checkpoint::open(dir.str());
    ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
    const auto& t = (*ck)->tensors();
    const int64_t h = s.hidden_size, v = s.vocab_size;
    const std::map<std::string, std::vector<int64_t>> own = {
        {"embed_tokens.weight", {v, h}}, {"enorm.weight", {h}}, {"hnorm.weight", {h}},
        {"eh_proj.weight", {h, 2 * h}}, {"shared_head.norm.weight", {h}}, {"shared_head.head.weight", {v, h}}};
    std::map<std::string, std::vector<int64_t>> want;  // below "model.layers.2."
    for (const auto& [name, shape] : own) want[name] = shape;
    const std::string sparse = "model.layers.1.";
    for (const auto& [name, tensor] : t)
      if (name.starts_with(sparse)) want[name.substr(sparse.size())] = tensor.shape;
    ASSERT_TRUE(want.count("mlp.experts.7.down_proj.weight") && want.count("mlp.gate.e_score_correction_bias") &&
                want.count(arch == "glm4_moe" ? "self_attn.q_norm.weight" : "self_attn.q_a_proj.weight") &&
                want.count("mlp.shared_experts.up_proj.weight"));
    std::map<std::string, std::vector<int64_t>> got;
    for (const auto& [name, tensor] : t)
      if (name.starts_with("model.layers.2.")) got[name.substr(15)] = tensor.shape;
    EXPECT_EQ(got, want);
    auto same_bytes = [&](const std::string& a, const std::string& b) {
      return std::equal(t.at(a).bytes.begin(), t.at(a).bytes.end(), t.at(b).bytes.begin(), t.at(b).bytes.end());
    };
    EXPECT_TRUE(same_bytes("model.layers.2.embed_tokens.weight", "model.embed_tokens.weight"));
    EXPECT_TRUE(same_bytes("model.layers.2.shared_head.head.weight", "lm_head.weight"));
    EXPECT_FALSE(same_bytes("model.layers.2.self_attn.o_proj.weight", "model.layers.1.self_attn.o_proj.weight"));
    EXPECT_FALSE(t.count("model.layers.3.enorm.weight"));
    expect_loads_and_runs(dir.str(), arch + " with an MTP module");
    auto backend = make_cpu_backend({.n_threads = 1});
    LoadOptions opts;
    opts.max_batch_tokens = 16;
    opts.progress = false;
    opts.mtp = true;
    auto with = Model::load(dir.str(), *backend, opts);
    ASSERT_TRUE(with.has_value()) << with.status().to_string();
    EXPECT_EQ((*with)->n_mtp_layers(), 1) << arch;
  }

  testing::TempDir fp8("mm_ds_mtp_fp8");
  s.fp8_block = 16;
  s.dtype = DType::bf16;
  ASSERT_TRUE(write_synthetic_model(s, fp8.str()).is_ok());
  auto q = Checkpoint::open(fp8.str());
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  EXPECT_EQ((*q)->tensors().at("model.layers.2.eh_proj.weight").dtype, DType::bf16);
  EXPECT_FALSE((*q)->tensors().count("model.layers.2.eh_proj.weight_scale_inv"));
  EXPECT_TRUE((*q)->tensors().count("model.layers.2.mlp.experts.0.up_proj.weight_scale_inv"));

  testing::TempDir none("mm_ds_no_mtp");  // the default: no module
  s = spec(4);
  s.arch = "deepseek_v3";
  s.n_layers = 2;
  ASSERT_TRUE(write_synthetic_model(s, none.str()).is_ok());
  EXPECT_EQ(nlohmann::json::parse(testing::read_bytes(none.file("config.json")))["num_nextn_predict_layers"], 0);
  auto plain = Checkpoint::open(none.str());
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE((*plain)->tensors().count("model.layers.2.input_layernorm.weight"));

  for (const char* arch : {"deepseek_v2", "llama", "qwen3_moe"}) {
    s.arch = arch;
    s.n_mtp_layers = 1;
    const Status st = write_synthetic_model(s, dir.str());
    EXPECT_EQ(st.code(), StatusCode::invalid_argument) << arch;
    EXPECT_NE(st.message().find("--mtp-layers"), std::string::npos) << st.message();
  }
  s.arch = "deepseek_v3";
  s.n_mtp_layers = -1;
  EXPECT_EQ(write_synthetic_model(s, dir.str()).code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace brigade
