#include "models/gguf_checkpoint.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "models/gguf_arcee.h"
#include "models/gguf_classic_decoders.h"
#include "models/gguf_deepseek2.h"
#include "models/gguf_kimi_linear.h"
#include "models/gguf_eog.h"
#include "models/gguf_falcon_h1.h"
#include "models/gguf_gemma.h"
#include "models/gguf_gemma4.h"
#include "models/gguf_glm4moe.h"
#include "models/gguf_gpt_decoders.h"
#include "models/gguf_gpt_oss.h"
#include "models/gguf_lfm2.h"
#include "models/gguf_llama_variants.h"
#include "models/gguf_mamba.h"
#include "models/gguf_mimo_exaone.h"
#include "models/gguf_moe.h"
#include "models/gguf_phimoe.h"
#include "models/gguf_qwen35.h"

namespace brigade {
namespace {

// Every architecture read_config accepts (its own reader is dispatched at the end of
// read_config), with what the shared keys need to know of it: whether its files may hold experts
// (llama's: Mixtral), whether llama.cpp's converter permuted q/k rows for interleaved RoPE (llama
// and LlamaModel's subclasses), whether rope.dimension_count may be less than the head
// (partial rotary: phi3 may rotate part of each head as Phi-4-mini, glm4moe, glm4 and minimax-m2
// half, Qwen3-Next / Qwen3.5 a quarter), and whether its reader reads rope.scaling itself (YaRN:
// gguf_keys.h) instead of the none / linear read here.
struct ArchRules {
  const char* name;
  const char* note = "";  // shown after the name in the supported list
  bool experts = false, permuted = false, partial_rotary = false, own_rope_scaling = false;
};
constexpr ArchRules kArchs[] = {
    {.name = "llama", .note = " (Mixtral included)", .experts = true, .permuted = true},
    {"qwen2"}, {"qwen3"},
    {.name = "qwen2moe", .experts = true}, {.name = "qwen3moe", .experts = true}, {.name = "olmoe", .experts = true},
    {.name = "ernie4_5-moe", .experts = true},
    {.name = "qwen3next", .experts = true, .partial_rotary = true}, {.name = "qwen35", .partial_rotary = true},
    {.name = "qwen35moe", .experts = true, .partial_rotary = true},
    {.name = "phi3", .partial_rotary = true}, {"gemma2"}, {"gemma3"}, {.name = "gemma4", .experts = true},
    {.name = "gpt-oss", .experts = true, .own_rope_scaling = true},
    {.name = "glm4moe", .experts = true, .partial_rotary = true},
    {"lfm2"}, {.name = "lfm2moe", .experts = true}, {"falcon-h1"}, {"mamba"}, {"mamba2"},
    {.name = "nemotron_h", .experts = true}, {.name = "nemotron_h_moe", .experts = true},
    {.name = "granitehybrid", .experts = true}, {.name = "jamba", .experts = true},
    {.name = "smollm3", .permuted = true}, {.name = "granite", .permuted = true},
    {.name = "granitemoe", .experts = true, .permuted = true},
    {.name = "minicpm", .note = " (MiniCPM 1 / 2)", .permuted = true},
    {.name = "internlm2", .permuted = true}, {.name = "olmo", .note = " (OLMo 1)", .permuted = true}, {.name = "dbrx", .experts = true}, {.name = "olmo2", .note = " (OLMo 2 and 3)", .own_rope_scaling = true},
    {"exaone4"}, {.name = "glm4", .partial_rotary = true},
    {.name = "chatglm", .note = " (GLM-4-9B, GLM-Edge)", .partial_rotary = true}, {"seed_oss"}, {"ernie4_5"}, {"hunyuan-dense"},
    {.name = "hunyuan-moe", .experts = true}, {"apertus"}, {.name = "llama4", .experts = true},
    {.name = "minimax-m2", .experts = true, .partial_rotary = true}, {"command-r"}, {"cohere2"},
    {.name = "deepseek2", .experts = true, .own_rope_scaling = true},
    {.name = "kimi-linear", .experts = true, .own_rope_scaling = true},
    {.name = "mistral4", .experts = true, .own_rope_scaling = true}, {.name = "dots1", .experts = true},
    {.name = "deepseek32", .experts = true, .own_rope_scaling = true}, {.name = "glm-dsa", .experts = true, .own_rope_scaling = true},
    {.name = "mistral3", .permuted = true, .own_rope_scaling = true}, {.name = "phimoe", .experts = true},
    {.name = "afmoe", .experts = true}, {.name = "arcee", .permuted = true, .own_rope_scaling = true},
    {"gemma"}, {"starcoder2"}, {.name = "phi2", .partial_rotary = true}, {.name = "stablelm", .partial_rotary = true},
    {.name = "mimo2", .experts = true, .partial_rotary = true}, {.name = "exaone-moe", .experts = true},
    {"jais2"}, {.name = "nemotron", .partial_rotary = true}, {"exaone"},
    {.name = "gptneox", .partial_rotary = true}, {"gpt2"}, {"starcoder"}, {"falcon"}, {"bloom"}, {"mpt"}};

const ArchRules* find_arch(const std::string& arch) {
  for (const ArchRules& r : kArchs)
    if (arch == r.name) return &r;
  return nullptr;
}

// The names of kArchs (with their notes) that `pick` selects, comma-separated.
std::string arch_names(bool (*pick)(const ArchRules&), bool notes) {
  std::string out;
  for (const ArchRules& r : kArchs) {
    if (!pick(r)) continue;
    if (!out.empty()) out += ", ";
    out += std::string(r.name) + (notes ? r.note : "");
  }
  return out;
}

// {arch}.attention.sliding_window: honoured for llama (Mistral) and phi3, as transformers does;
// 0 means none. llama.cpp's llama architecture never reads the key (full causal attention), so a
// Mistral GGUF without it runs unwindowed there and here alike; llama.cpp reads phi3's but turns
// the window off (its PR 13676), where brigade keeps transformers' window, as for the same model
// from safetensors. qwen2/qwen3 ignore it as both llama.cpp and transformers do (transformers
// applies Qwen's window only with use_sliding_window, which GGUF has no key for).
Status read_sliding_window(const GgufFile& g, const std::string& a, ModelConfig& c) {
  const std::string key = a + "attention.sliding_window";
  if ((c.arch != "llama" && c.arch != "phi3") || !g.find(key)) return Status::ok();
  BRIGADE_ASSIGN_OR_RETURN(int64_t v, g.get_int(key));
  if (v < 0 || v > INT32_MAX) return corrupt(g.path() + ": metadata '" + key + "' is out of range");
  c.sliding_window = static_cast<int>(v);
  return Status::ok();
}

// rope_freqs.weight: llama.cpp's per-frequency divisors (how its converter stores llama3 RoPE
// scaling), [rotary dims / 2] finite positive values.
Status read_rope_freqs(const GgufFile& g, const RawTensor& t, ModelConfig& c) {
  const int64_t want = c.rope_dims() / 2;
  if (t.shape.size() != 1 || t.shape[0] != want)
    return corrupt(g.path() + ": tensor 'rope_freqs.weight' has shape " + t.shape_string() + "; expected [" +
                   std::to_string(want) + "] (head_dim / 2, of the rotated dims)");
  std::vector<float> f(static_cast<size_t>(want));
  for (int64_t i = 0; i < want; ++i) {
    f[static_cast<size_t>(i)] = static_cast<float>(t.at(i));
    if (!std::isfinite(f[static_cast<size_t>(i)]) || f[static_cast<size_t>(i)] <= 0.0f)
      return corrupt(g.path() + ": tensor 'rope_freqs.weight' holds a factor that is not a positive number");
  }
  c.rope_scaling.freq_factors = std::move(f);
  return Status::ok();
}

// attention.head_count_kv, when present: one count, or one per block all the same. llama.cpp's
// loader takes either form for any architecture (get_key_or_arr), and its converter writes the list
// into dense granite files too: Granite 4.0's attention-only models (granite-4.0-micro, 1b, 350m)
// are GraniteMoeHybridForCausalLM, which GraniteHybridModel converts as granite with the per-block
// list its hybrids need. The decoder has one count for every layer, so lists that differ are refused.
Status read_kv_head_count(const GgufFile& g, const std::string& a, ModelConfig& c) {
  const std::string key = a + "attention.head_count_kv";
  const GgufValue* v = g.find(key);
  if (v == nullptr) return Status::ok();
  if (v->type != GgufType::array) return read_gguf_count(g, key, 0, c.n_kv_heads);
  if (v->numbers.size() != static_cast<size_t>(c.n_layers))
    return corrupt(g.path() + ": metadata '" + key + "' must hold one count per block (" + std::to_string(c.n_layers) + ")");
  for (double n : v->numbers) {
    if (!(n > 0.0) || n > INT32_MAX || n != std::floor(n))
      return corrupt(g.path() + ": metadata '" + key + "' holds a count that is not a whole number > 0");
    if (n != v->numbers.front())
      return unsupported(g.path() + ": metadata '" + key + "' holds different counts per block; " + a.substr(0, a.size() - 1) +
                         " files are supported with one count for every block");
  }
  c.n_kv_heads = static_cast<int>(v->numbers.front());
  return Status::ok();
}

// Granite 3's multipliers (read_gguf_granite_scales), dense (granite) or MoE (granitemoe); its
// RoPE switch, rope.scaling.finetuned (true when absent), must be on.
Status read_gguf_granite(const GgufFile& g, const std::string& a, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_gguf_granite_scales(g, a, c));
  if (const GgufValue* r = g.find(a + "rope.scaling.finetuned"); r != nullptr && r->integer == 0)
    return unsupported(g.path() + ": " + a + "rope.scaling.finetuned false: granite attention without RoPE is not supported");
  return Status::ok();
}

Status read_config(const GgufFile& g, const std::string& arch, ModelConfig& c) {
  const ArchRules* rules = find_arch(arch);
  if (!rules)
    return unsupported(g.path() + ": general.architecture '" + arch + "' is not supported; supported: " +
                       arch_names([](const ArchRules&) { return true; }, /*notes=*/true));
  c.arch = arch;
  const std::string a = arch + ".";
  // llama.cpp writes Mixtral as llama with experts (ffn_gate_exps ...); the other dense
  // architectures have no MoE form here.
  BRIGADE_ASSIGN_OR_RETURN(const bool experts, gguf_has_experts(g, arch));
  if (experts && !rules->experts)
    return unsupported(g.path() + ": " + a + "expert_count: mixture-of-experts GGUF files are supported for " +
                       arch_names([](const ArchRules& r) { return r.experts; }, /*notes=*/true) + " only");
  auto get = [&](const std::string& key, int& out) -> Status {
    BRIGADE_ASSIGN_OR_RETURN(int64_t v, g.get_int(a + key));
    if (v <= 0 || v > INT32_MAX) return corrupt(g.path() + ": metadata '" + a + key + "' is out of range");
    out = static_cast<int>(v);
    return Status::ok();
  };
  BRIGADE_RETURN_IF_ERROR(get("embedding_length", c.hidden_size));
  BRIGADE_RETURN_IF_ERROR(get("block_count", c.n_layers));
  // The Mamba family's head and MLP counts may be 0 or one per block (read_gguf_mamba).
  const bool mamba = is_gguf_mamba(arch);
  if (!mamba) BRIGADE_RETURN_IF_ERROR(get("attention.head_count", c.n_heads));
  // Qwen3.5-MoE has no dense MLP width (its converter writes one only where config.json has it).
  // (gemma4's may be one per block: read_gguf_gemma4.)
  if (!mamba && !is_gguf_gemma4(arch) && (arch != "qwen35moe" || g.find(a + "feed_forward_length")))
    BRIGADE_RETURN_IF_ERROR(get("feed_forward_length", c.intermediate_size));
  BRIGADE_RETURN_IF_ERROR(get("context_length", c.max_position));
  c.n_kv_heads = c.n_heads;
  // (LFM2's and the Mamba family's may differ per block: read_gguf_lfm2, read_gguf_mamba.)
  // (mimo2's: the sliding blocks' count and the full blocks' other: read_gguf_mimo_exaone.)
  // (kimi-linear's: 0 for its KDA blocks, read_gguf_kimi_linear; gemma4's one per layer type, read_gguf_gemma4.)
  if (!is_gguf_lfm2(arch) && !mamba && arch != "mimo2" && !is_gguf_kimi_linear(arch) && !is_gguf_gemma4(arch))
    BRIGADE_RETURN_IF_ERROR(read_kv_head_count(g, a, c));
  c.head_dim = c.n_heads > 0 ? c.hidden_size / c.n_heads : 0;
  if (g.find(a + "attention.key_length")) BRIGADE_RETURN_IF_ERROR(get("attention.key_length", c.head_dim));
  // llama.cpp's converter records the rotary width (kArchs' partial_rotary); the others rotate
  // whole heads.
  BRIGADE_ASSIGN_OR_RETURN(int64_t n_rot, g.get_int_or(a + "rope.dimension_count", c.head_dim));
  if (rules->partial_rotary && n_rot > 0 && n_rot <= c.head_dim) c.rotary_dim = static_cast<int>(n_rot);
  // (The Mamba family's attention has no positions; deepseek2's key_length is MLA's latent width,
  // its rotary part read by read_gguf_deepseek2.)
  else if (n_rot != c.head_dim && !mamba && !is_gguf_deepseek2(arch) && !is_gguf_kimi_linear(arch))
    return unsupported(g.path() + ": " + a + "rope.dimension_count " + std::to_string(n_rot) + " differs from head_dim " +
                       std::to_string(c.head_dim) + "; partial rotary embeddings are supported for " +
                       arch_names([](const ArchRules& r) { return r.partial_rotary; }, /*notes=*/false) + " only");
  BRIGADE_ASSIGN_OR_RETURN(double eps, g.get_number_or(a + "attention.layer_norm_rms_epsilon", 1e-5));
  BRIGADE_ASSIGN_OR_RETURN(double theta, g.get_number_or(a + "rope.freq_base", 10000.0));
  c.rms_eps = static_cast<float>(eps);
  c.rope_theta = static_cast<float>(theta);
  c.rope_style = rules->permuted ? RopeStyle::interleaved : RopeStyle::neox;
  if (const GgufValue* s = g.find(a + "rope.scaling.type"); s && s->str != "none" && !rules->own_rope_scaling) {
    if (s->str != "linear")
      return unsupported(g.path() + ": rope.scaling.type '" + s->str + "' is not supported in GGUF; supported: none, linear");
    BRIGADE_ASSIGN_OR_RETURN(double f, g.get_number(a + "rope.scaling.factor"));
    c.rope_scaling.type = RopeScalingType::linear;
    c.rope_scaling.factor = static_cast<float>(f);
  }
  BRIGADE_RETURN_IF_ERROR(read_sliding_window(g, a, c));
  c.qkv_bias = arch == "qwen2" || arch == "qwen2moe";
  c.qk_norm = arch == "qwen3";
  c.fused_weights = arch == "phi3";  // blk.N.attn_qkv, and ffn_up holding gate|up
  BRIGADE_ASSIGN_OR_RETURN(int64_t bos, g.get_int_or("tokenizer.ggml.bos_token_id", -1));
  c.bos_id = static_cast<int>(bos);
  // What ends generation: eos, eot, eom and the other ends llama.cpp finds (models/gguf_eog.h).
  BRIGADE_ASSIGN_OR_RETURN(c.eos_ids, gguf_end_of_generation_ids(g));
  if (is_gguf_gemma(arch)) BRIGADE_RETURN_IF_ERROR(read_gguf_gemma(g, arch, c));
  if (arch == "smollm3") {  // llama.cpp's: no RoPE in every 4th layer (n_no_rope_layer_step), tied by default
    c.nope_layers.assign(static_cast<size_t>(c.n_layers), false);
    for (int l = 0; l < c.n_layers; ++l) c.nope_layers[static_cast<size_t>(l)] = (l + 1) % 4 == 0;
  }
  if (arch == "granite" || arch == "granitemoe") BRIGADE_RETURN_IF_ERROR(read_gguf_granite(g, a, c));
  if (arch == "minicpm") {  // muP's scalings as Granite's multipliers; MiniCPM-1B / 2B's where the file has none
    c.embedding_multiplier = 12.0f;
    c.residual_multiplier = 1.4f / std::sqrt(static_cast<float>(c.n_layers));
    c.logits_scaling = static_cast<float>(c.hidden_size) / 256.0f;
    BRIGADE_RETURN_IF_ERROR(read_gguf_granite_scales(g, a, c));
  }
  if (is_gguf_gemma4(arch)) return read_gguf_gemma4(g, c);  // models/gguf_gemma4.h
  if (is_gguf_gpt_oss(arch)) return read_gguf_gpt_oss(g, c);
  if (is_gguf_glm4moe(arch)) return read_gguf_glm4moe(g, c);
  if (is_gguf_qwen35(arch)) return read_gguf_qwen35(g, arch, c);
  if (is_gguf_lfm2(arch)) return read_gguf_lfm2(g, arch, c);
  if (is_gguf_falcon_h1(arch)) return read_gguf_falcon_h1(g, c);
  if (is_gguf_llama_variant(arch)) return read_gguf_llama_variant(g, arch, c);
  if (arch == "mistral3") return read_gguf_mistral3(g, a, c);
  if (is_gguf_deepseek2(arch)) return read_gguf_deepseek2(g, c);
  if (is_gguf_kimi_linear(arch)) return read_gguf_kimi_linear(g, c);  // models/gguf_kimi_linear.h
  if (is_gguf_phimoe(arch)) return read_gguf_phimoe(g, c);  // models/gguf_phimoe.h
  if (is_gguf_arcee(arch)) return read_gguf_arcee(g, arch, c);  // models/gguf_arcee.h
  if (is_gguf_classic_decoder(arch)) return read_gguf_classic_decoder(g, arch, c);  // models/gguf_classic_decoders.h
  if (is_gguf_gpt_decoder(arch)) return read_gguf_gpt_decoder(g, arch, c);  // models/gguf_gpt_decoders.h
  if (is_gguf_mimo_exaone(arch)) return read_gguf_mimo_exaone(g, arch, c);  // models/gguf_mimo_exaone.h
  if (mamba) return read_gguf_mamba(g, arch, c);
  if (is_gguf_moe(arch) || experts) BRIGADE_RETURN_IF_ERROR(read_gguf_moe(g, arch, c));
  return Status::ok();
}

}  // namespace

std::string gguf_to_hf_name(const std::string& n, const std::string& arch) {
  static const std::map<std::string, std::string> kTop = {{"token_embd.weight", "model.embed_tokens.weight"},
                                                          {"output_norm.weight", "model.norm.weight"},
                                                          {"output.weight", "lm_head.weight"}};
  if (const std::string lfm2 = is_gguf_lfm2(arch) ? gguf_lfm2_top_name(n) : ""; !lfm2.empty()) return lfm2;
  if (const std::string f = is_gguf_falcon_h1(arch) ? gguf_falcon_h1_top_name(n) : ""; !f.empty()) return f;
  if (const std::string m = is_gguf_mamba(arch) ? gguf_mamba_name(arch, n) : ""; !m.empty()) return m;
  if (const std::string p = is_gguf_phimoe(arch) ? gguf_phimoe_name(n) : ""; !p.empty()) return p;
  if (const std::string d = is_gguf_classic_decoder(arch) ? gguf_classic_decoder_name(n) : ""; !d.empty()) return d;
  if (const std::string d = is_gguf_gpt_decoder(arch) ? gguf_gpt_decoder_name(n) : ""; !d.empty()) return d;
  if (const std::string g4 = is_gguf_gemma4(arch) ? gguf_gemma4_name(n) : ""; !g4.empty()) return g4;
  if (auto it = kTop.find(n); it != kTop.end()) return it->second;
  static const std::map<std::string, std::string> kLayer = {
      {"attn_norm.weight", "input_layernorm.weight"},   {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},     {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},     {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},         {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},         {"attn_output.bias", "self_attn.o_proj.bias"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"}, {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},      {"attn_qkv.weight", "self_attn.qkv_proj.weight"}};
  if (!n.starts_with("blk.")) return "";
  const size_t dot = n.find('.', 4);
  if (dot == std::string::npos || dot == 4 || n.find_first_not_of("0123456789", 4) != dot) return "";
  const std::string suffix = n.substr(dot + 1);
  // Gemma's sandwich norms (ffn_norm is its pre_feedforward_layernorm).
  if (const std::string gemma = is_gguf_gemma(arch) ? gguf_gemma_layer_name(suffix) : ""; !gemma.empty())
    return "model.layers." + n.substr(4, dot - 4) + "." + gemma;
  if (const std::string oss = is_gguf_gpt_oss(arch) ? gguf_gpt_oss_layer_name(suffix) : ""; !oss.empty())
    return "model.layers." + n.substr(4, dot - 4) + "." + oss;
  if (const std::string glm = is_gguf_glm4moe(arch) ? gguf_glm4moe_layer_name(suffix) : ""; !glm.empty())
    return "model.layers." + n.substr(4, dot - 4) + "." + glm;
  if (const std::string q = is_gguf_qwen35(arch) ? gguf_qwen35_layer_name(suffix) : ""; !q.empty())
    return "model.layers." + n.substr(4, dot - 4) + "." + q;
  if (const std::string lfm2 = is_gguf_lfm2(arch) ? gguf_lfm2_layer_name(suffix) : ""; !lfm2.empty())
    return "model.layers." + n.substr(4, dot - 4) + "." + lfm2;
  if (const std::string f = is_gguf_falcon_h1(arch) ? gguf_falcon_h1_layer_name(suffix) : ""; !f.empty())
    return "model.layers." + n.substr(4, dot - 4) + "." + f;
  if (const std::string v = is_gguf_llama_variant(arch) ? gguf_llama_variant_layer_name(arch, suffix) : ""; !v.empty())
    return "model.layers." + n.substr(4, dot - 4) + "." + v;
  if (const std::string d = is_gguf_deepseek2(arch) ? gguf_deepseek2_layer_name(suffix) : ""; !d.empty())
    return "model.layers." + n.substr(4, dot - 4) + "." + d;
  if (const std::string k = is_gguf_kimi_linear(arch) ? gguf_kimi_linear_layer_name(suffix) : ""; !k.empty())
    return "model.layers." + n.substr(4, dot - 4) + "." + k;
  if (const std::string af = arch == "afmoe" ? gguf_afmoe_layer_name(suffix) : ""; !af.empty())
    return "model.layers." + n.substr(4, dot - 4) + "." + af;
  if (const std::string me = is_gguf_mimo_exaone(arch) ? gguf_mimo_exaone_layer_name(suffix) : ""; !me.empty())
    return "model.layers." + n.substr(4, dot - 4) + "." + me;
  // (granitemoe's shared MLP is ungated.)
  if (const std::string moe = is_gguf_moe(arch) || arch == "llama" || is_gguf_phimoe(arch)
                                  ? gguf_moe_layer_name(suffix, arch != "granitemoe")
                                  : "";
      !moe.empty())
    return "model.layers." + n.substr(4, dot - 4) + "." + moe;
  // llama.cpp's converter writes phi3's gate_up_proj unsplit as ffn_up (ggml_swiglu splits it).
  const bool gate_up = arch == "phi3" && suffix == "ffn_up.weight";
  auto it = kLayer.find(suffix);
  if (it == kLayer.end()) return "";
  return "model.layers." + n.substr(4, dot - 4) + "." + (gate_up ? std::string("mlp.gate_up_proj.weight") : it->second);
}

Status read_gguf_checkpoint(const GgufFile& g, ModelConfig& c, std::map<std::string, RawTensor>& tensors) {
  BRIGADE_ASSIGN_OR_RETURN(std::string arch, g.get_string("general.architecture"));
  BRIGADE_RETURN_IF_ERROR(read_config(g, arch, c));
  for (const auto& t : g.tensors()) {
    const bool longrope = is_gguf_longrope_factors(t.name);  // phimoe's (models/gguf_phimoe.h)
    if (longrope && !is_gguf_phimoe(arch))
      return unsupported(g.path() + ": LongRoPE factors (" + t.name + ") are not supported in GGUF; load the Hugging "
                         "Face checkpoint (config.json with rope_scaling longrope), which brigade runs");
    const bool rope_freqs = t.name == "rope_freqs.weight" || longrope;
    const std::string name = rope_freqs ? t.name : gguf_to_hf_name(t.name, arch);
    if (name.empty()) continue;  // a tensor no supported layout uses
    // An MTP block (read_gguf_qwen35, read_gguf_deepseek2): not loaded.
    if ((is_gguf_qwen35(arch) || is_gguf_deepseek2(arch) || is_gguf_mimo_exaone(arch)) && t.name.starts_with("blk.")) {
      int64_t block = 0;
      const auto [end, ec] = std::from_chars(t.name.data() + 4, t.name.data() + t.name.size(), block);
      if (ec != std::errc() || block >= c.n_layers) continue;
    }
    RawTensor r;
    r.name = name;
    r.file = g.path();
    r.shape.assign(t.dims.rbegin(), t.dims.rend());
    r.bytes = t.bytes;
    r.dtype = t.type->dtype.value_or(DType::u8);
    if (t.type->block_elems > 1) r.ggml = t.type;
    if (rope_freqs) {
      BRIGADE_RETURN_IF_ERROR(longrope                ? read_gguf_longrope_factors(g, t.name, r, c)
                              : is_gguf_gemma4(arch) ? read_gguf_gemma4_rope_freqs(g, r, c)  // the full layers'
                                                     : read_rope_freqs(g, r, c));
      continue;
    }
    // qwen2moe's shared-expert gate is a vector in the file (ffn_gate_inp_shexp [hidden]); the
    // checkpoint's a [1, hidden] matrix.
    if (name.ends_with(".shared_expert_gate.weight") && r.shape.size() == 1) r.shape.insert(r.shape.begin(), 1);
    // ERNIE 4.5 MoE's selection bias, exp_probs_b [1, E] as its converter keeps it: the [E] it is.
    if (name.ends_with(".mlp.moe_statics.e_score_correction_bias") && r.shape.size() == 2 && r.shape[0] == 1)
      r.shape = {r.shape[1]};
    // ssm_conv1d [channels, conv_kernel]; the checkpoint's conv1d.weight [channels, 1, conv_kernel].
    if (name.ends_with(".linear_attn.conv1d.weight") && r.shape.size() == 2) r.shape.insert(r.shape.begin() + 1, 1);
    if (name.ends_with(".conv.conv.weight") && r.shape.size() == 2) r.shape.insert(r.shape.begin() + 1, 1);  // LFM2's
    if (!tensors.emplace(name, std::move(r)).second) return corrupt(g.path() + ": tensor '" + t.name + "' appears twice");
  }
  auto embed = tensors.find(tensors.count("backbone.embeddings.weight") > 0 ? "backbone.embeddings.weight"  // Mamba2's
                                                                           : "model.embed_tokens.weight");
  if (embed == tensors.end() || embed->second.shape.size() != 2)
    return corrupt(g.path() + ": tensor 'token_embd.weight' (2-D) is missing");
  c.vocab_size = static_cast<int>(embed->second.shape[0]);
  c.tie_embeddings = tensors.find("lm_head.weight") == tensors.end();
  // The float type of the weights (a default for the KV cache): the table's, f32 when quantized.
  c.dtype = embed->second.block_quantized() ? DType::f32 : embed->second.dtype;
  if (is_gguf_qwen35(arch)) BRIGADE_RETURN_IF_ERROR(check_gguf_qwen35_tensors(g, c));
  else if (is_gguf_lfm2(arch)) BRIGADE_RETURN_IF_ERROR(check_gguf_lfm2_tensors(g, c));
  else if (is_gguf_falcon_h1(arch)) BRIGADE_RETURN_IF_ERROR(finish_gguf_falcon_h1(g, tensors, c));
  else if (is_gguf_mamba(arch)) BRIGADE_RETURN_IF_ERROR(finish_gguf_mamba(g, tensors, c));
  else if (is_gguf_deepseek2(arch)) BRIGADE_RETURN_IF_ERROR(finish_gguf_deepseek2(g, tensors, c));
  else if (is_gguf_kimi_linear(arch)) BRIGADE_RETURN_IF_ERROR(finish_gguf_kimi_linear(g, tensors, c));
  else if (is_gguf_phimoe(arch)) BRIGADE_RETURN_IF_ERROR(finish_gguf_phimoe(g, c));
  else if (is_gguf_gemma4(arch)) BRIGADE_RETURN_IF_ERROR(finish_gguf_gemma4(g, tensors, c));
  else if (c.n_experts > 0) BRIGADE_RETURN_IF_ERROR(check_gguf_moe_tensors(g, c));
  else if (arch == "apertus") BRIGADE_RETURN_IF_ERROR(add_gguf_xielu_tensors(g, c.n_layers, tensors));
  else if (is_gguf_gpt_decoder(arch) || arch == "chatglm")  // q|k|v apart (chatglm's from ChatGLMModel checkpoints)
    BRIGADE_RETURN_IF_ERROR(finish_gguf_gpt_decoder(g, tensors, c));
  if (c.arch == "mamba2" || c.arch == "mamba" || c.arch == "falcon_mamba")
    return Status::ok();  // no attention, no MLP (read_gguf_mamba checked its keys)
  const Status v = c.validate();
  if (!v.is_ok()) return Status(v.code(), g.path() + ": " + v.message());
  return Status::ok();
}

}  // namespace brigade
