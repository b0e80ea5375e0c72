#include "models/model_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "models/bert_config.h"
#include "models/modernbert_config.h"
#include "models/classic_decoders_config.h"
#include "models/alias_configs.h"
#include "models/chatglm_config.h"
#include "models/dbrx_config.h"
#include "models/state_space_config.h"
#include "models/config_json.h"
#include "models/deepseek_config.h"
#include "models/kimi_linear_config.h"
#include "models/longcat_flash_config.h"
#include "models/minimax_config.h"
#include "models/gemma_config.h"
#include "models/gpt_decoders_config.h"
#include "models/gemma3n_config.h"
#include "models/paligemma_config.h"
#include "models/gemma4_config.h"
#include "models/arcee_config.h"
#include "models/llama_variants_config.h"
#include "models/aya_vision_config.h"
#include "models/idefics3_config.h"
#include "models/internvl_config.h"
#include "models/llava_config.h"
#include "models/phimoe_config.h"
#include "models/glm4v_config.h"
#include "models/qwen_vl_config.h"

namespace brigade {
namespace {

using json = nlohmann::json;

constexpr const char* kSupported =
    "LlamaForCausalLM (model_type llama), MistralForCausalLM (mistral), Qwen2ForCausalLM (qwen2), "
    "Qwen3ForCausalLM (qwen3), Qwen2MoeForCausalLM (qwen2_moe), Qwen3MoeForCausalLM (qwen3_moe), "
    "MixtralForCausalLM (mixtral), "
    "DeepseekV2ForCausalLM (deepseek_v2), DeepseekV3ForCausalLM (deepseek_v3), Mistral4ForCausalLM (mistral4), "
    "Glm4MoeLiteForCausalLM (glm4_moe_lite), DeepseekV32ForCausalLM (deepseek_v32), GlmMoeDsaForCausalLM (glm_moe_dsa), "
    "Phi3ForCausalLM (phi3), "
    "Gemma2ForCausalLM (gemma2), VaultGemmaForCausalLM (vaultgemma), Gemma3ForCausalLM (gemma3_text), Gemma3ForConditionalGeneration (gemma3: its "
    "language model), Gemma3nForCausalLM (gemma3n_text), Gemma3nForConditionalGeneration (gemma3n: its language "
    "model), Gemma4ForCausalLM (gemma4_text), Gemma4ForConditionalGeneration (gemma4: its language model), GptOssForCausalLM (gpt_oss), Glm4MoeForCausalLM (glm4_moe), Qwen2VLForConditionalGeneration "
    "(qwen2_vl), Qwen2_5_VLForConditionalGeneration (qwen2_5_vl); encoders: BertModel (bert), RobertaModel "
    "(roberta), XLMRobertaModel (xlm-roberta) and their ForMaskedLM / ForSequenceClassification, ModernBertModel "
    "(modernbert), ModernBertForMaskedLM, ModernBertForSequenceClassification, NomicBertModel (nomic_bert); state-space: "
    "Mamba2ForCausalLM (mamba2), MambaForCausalLM (mamba), FalconMambaForCausalLM (falcon_mamba); hybrids: "
    "GraniteMoeHybridForCausalLM (granitemoehybrid), BambaForCausalLM (bamba), NemotronHForCausalLM (nemotron_h), JambaForCausalLM (jamba), "
    "Qwen3NextForCausalLM (qwen3_next), Qwen3_5ForCausalLM (qwen3_5_text), Qwen3_5MoeForCausalLM (qwen3_5_moe_text), "
    "Lfm2ForCausalLM (lfm2), Lfm2MoeForCausalLM (lfm2_moe), FalconH1ForCausalLM (falcon_h1), KimiLinearForCausalLM (kimi_linear), LongcatFlashForCausalLM (longcat_flash), MiniMaxForCausalLM (minimax), SmolLM3ForCausalLM "
    "(smollm3), GraniteForCausalLM (granite), GraniteMoeForCausalLM (granitemoe), GraniteMoeSharedForCausalLM "
    "(granitemoeshared), GraniteSWAForCausalLM (granite_swa), GraniteMoeSWAForCausalLM (granitemoe_swa), HyperCLOVAXForCausalLM (hyperclovax), Cohere2MoeForCausalLM (cohere2_moe), YoutuForCausalLM (youtu), AXK1ForCausalLM (axk1), MiniCPM3ForCausalLM (minicpm3), IQuestCoderForCausalLM (as llama), SolarOpenForCausalLM, MiniCPM5MoeForCausalLM, Param2MoEForCausalLM (param2moe) and SarvamMoEForCausalLM (sarvam_moe; as glm4_moe), HYV3ForCausalLM (hy_v3; as glm4_moe), SarvamMLAForCausalLM (sarvam_mla; as deepseek_v3), MinistralForCausalLM (ministral), CwmForCausalLM (cwm), DbrxForCausalLM (dbrx), InternLM2ForCausalLM (internlm2), InternLM3ForCausalLM (internlm3), MiniCPMForCausalLM (minicpm), OlmoForCausalLM (olmo), Olmo2ForCausalLM (olmo2), Olmo3ForCausalLM (olmo3), Exaone4ForCausalLM "
    "(exaone4), Glm4ForCausalLM (glm4), GlmForCausalLM (glm; also the remote-code ChatGLMModel layout), HeliumForCausalLM (helium), SeedOssForCausalLM (seed_oss), Ernie4_5ForCausalLM (ernie4_5), "
    "HunYuanDenseV1ForCausalLM (hunyuan_v1_dense), HunYuanMoEV1ForCausalLM (hunyuan_v1_moe), OlmoeForCausalLM (olmoe), ApertusForCausalLM (apertus), "
    "Ernie4_5_MoeForCausalLM (ernie4_5_moe), "
    "Mistral3ForConditionalGeneration (mistral3: its language model and Pixtral tower), LlavaForConditionalGeneration (llava: a llama / mistral / qwen2 language model and a CLIP or SigLIP tower), LlavaNextForConditionalGeneration (llava_next: the same with anyres tiles), LlavaOnevisionForConditionalGeneration (llava_onevision: a qwen2 language model, SigLIP, anyres tiles resized to anyres_max_N), InternVLForConditionalGeneration (internvl: a qwen2 / qwen3 / qwen3_moe / llama language model and InternViT; also the remote-code InternVLChatModel layout, whose language model may be InternLM2's), Idefics3ForConditionalGeneration (idefics3: a llama language model and a SigLIP-style tower over tiles; Idefics3, SmolVLM), SmolVLMForConditionalGeneration (smolvlm: the same; SmolVLM2's images), AyaVisionForConditionalGeneration (aya_vision: a cohere2 / cohere language model and a SigLIP tower over GotOcr2's tiles), PaliGemmaForConditionalGeneration (paligemma: a gemma / gemma2 language model whose prompt attends to all of itself, and a SigLIP tower), Ministral3ForCausalLM (ministral3), "
    "Llama4ForCausalLM (llama4_text), "
    "Llama4ForConditionalGeneration (llama4: its language model, text only), MiniMaxM2ForCausalLM (minimax_m2), "
    "CohereForCausalLM (cohere), Cohere2ForCausalLM (cohere2), Dots1ForCausalLM (dots1), PhimoeForCausalLM (phimoe), "
    "AfmoeForCausalLM (afmoe), ArceeForCausalLM (arcee), NanoChatForCausalLM (nanochat), GemmaForCausalLM (gemma), Starcoder2ForCausalLM (starcoder2), "
    "PhiForCausalLM (phi), StableLmForCausalLM (stablelm), MiMoV2FlashForCausalLM (mimo_v2_flash), "
    "ExaoneMoeForCausalLM (exaone_moe), Kolibri1ForCausalLM (kolibri1), FlintForCausalLM (flint), BitNetForCausalLM (bitnet), MellumForCausalLM (mellum), Jais2ForCausalLM (jais2), NemotronForCausalLM (nemotron), "
    "ExaoneForCausalLM (exaone), FlexOlmoForCausalLM (flex_olmo), GPTNeoXForCausalLM (gpt_neox), "
    "GPTJForCausalLM (gptj), GPT2LMHeadModel (gpt2), GPTBigCodeForCausalLM (gpt_bigcode), FalconForCausalLM (falcon; "
    "also RWForCausalLM), BloomForCausalLM (bloom), MptForCausalLM (mpt), OPTForCausalLM (opt), GPTNeoForCausalLM (gpt_neo), "
    "CodeGenForCausalLM (codegen)";

// DeepSeek's MLA family (models/deepseek.h): V2, V3 and its descendants Mistral Small 4, GLM-4.7-Flash,
// A.X K1 and Youtu-LLM.
bool is_deepseek(const std::string& arch) {
  return arch == "deepseek_v2" || arch == "deepseek_v3" || arch == "mistral4" || arch == "glm4_moe_lite" || arch == "axk1" ||
         arch == "deepseek_v32" || arch == "glm_moe_dsa" ||  // these two with DSA's indexer
         arch == "youtu" || arch == "minicpm3";  // Youtu-LLM, MiniCPM 3: MLA over dense layers
}

// GLM-4.5 / 4.6 (Glm4MoeForCausalLM): GQA attention beside DeepSeek-V3's MoE (models/deepseek_config.h).
bool is_glm4_moe(const std::string& arch) { return arch == "glm4_moe"; }
// GLM-4.5's and dots.llm1's (Dots1ForCausalLM) experts: DeepSeek-V3's routing (validate_grouped_moe).
bool has_grouped_moe(const std::string& arch) {
  return is_glm4_moe(arch) || arch == "dots1" || arch == "mimo_v2_flash" || arch == "exaone_moe" || arch == "kolibri1";
}

// The architectures whose MoE fields read_moe parses (DeepSeek's: models/deepseek_config.h).
bool is_sparse_moe(const std::string& arch) {
  return arch == "qwen3_moe" || arch == "qwen2_moe" || arch == "mixtral" || arch == "gpt_oss" || arch == "qwen3_next" ||
         arch == "qwen3_5_moe_text" || arch == "olmoe" || arch == "ernie4_5_moe" || arch == "llama4_text" ||
         arch == "minimax_m2" || arch == "granitemoe" || arch == "granitemoeshared" || arch == "hunyuan_v1_moe" ||
         arch == "phimoe" || arch == "afmoe" || arch == "flex_olmo" || arch == "dbrx" || arch == "cohere2_moe" ||
         arch == "flint" || arch == "mellum";
}

// Which family a config describes: architectures[0] wins, model_type otherwise. A
// *ForSequenceClassification architecture is its family's decoder under a classifier head
// (models/classifier.h): `seq_cls` says so.
Expected<std::string> detect_arch(const json& j, bool& seq_cls) {
  const std::string named = config_architecture(j);  // as config.json names it
  const std::string arch_name = causal_architecture(named);
  seq_cls = arch_name != named;
  if (seq_cls && (arch_name.starts_with("Deepseek") || arch_name == "Mistral4ForCausalLM" ||
                  arch_name == "Glm4MoeLiteForCausalLM"))
    return unsupported("config.json: architecture '" + named +
                       "' is not supported: sequence classification runs on the Llama-family decoders (llama, "
                       "mistral, qwen2, qwen3, qwen2_moe, qwen3_moe, mixtral, phi3, gemma2, gemma3_text, gpt_oss, "
                       "glm4_moe)");
  const std::string model_type = config_model_type(j);
  if (arch_name == "LlamaForCausalLM" || arch_name == "MistralForCausalLM") return std::string("llama");
  if (arch_name == "Qwen2ForCausalLM") return std::string("qwen2");
  if (arch_name == "Qwen3ForCausalLM") return std::string("qwen3");
  if (arch_name == "Qwen3MoeForCausalLM") return std::string("qwen3_moe");
  if (arch_name == "Qwen2MoeForCausalLM") return std::string("qwen2_moe");
  if (arch_name == "MixtralForCausalLM") return std::string("mixtral");
  if (arch_name == "DeepseekV2ForCausalLM") return std::string("deepseek_v2");
  if (arch_name == "DeepseekV3ForCausalLM") return std::string("deepseek_v3");
  if (arch_name == "Mistral4ForCausalLM") return std::string("mistral4");
  if (arch_name == "Glm4MoeLiteForCausalLM") return std::string("glm4_moe_lite");
  if (arch_name == "DeepseekV32ForCausalLM") return std::string("deepseek_v32");
  if (arch_name == "GlmMoeDsaForCausalLM") return std::string("glm_moe_dsa");
  if (arch_name == "YoutuForCausalLM" || (arch_name.empty() && model_type == "youtu")) return std::string("youtu");
  if (arch_name == "AXK1ForCausalLM" || (arch_name.empty() && model_type == "axk1")) return std::string("axk1");
  if (arch_name == "MiniCPM3ForCausalLM" || (arch_name.empty() && model_type == "minicpm3")) return std::string("minicpm3");
  if (arch_name == "Phi3ForCausalLM") return std::string("phi3");
  if (arch_name == "Gemma2ForCausalLM") return std::string("gemma2");
  if (arch_name == "VaultGemmaForCausalLM") return std::string("vaultgemma");
  if (arch_name == "Gemma3ForCausalLM") return std::string("gemma3_text");
  if (arch_name == "GptOssForCausalLM") return std::string("gpt_oss");
  if (arch_name == "Glm4MoeForCausalLM") return std::string("glm4_moe");
  if (arch_name == "Qwen3NextForCausalLM") return std::string("qwen3_next");
  if (arch_name == "Qwen3_5ForCausalLM") return std::string("qwen3_5_text");
  if (arch_name == "Qwen3_5MoeForCausalLM") return std::string("qwen3_5_moe_text");
  if (arch_name == "SmolLM3ForCausalLM") return std::string("smollm3");
  if (arch_name == "GraniteForCausalLM") return std::string("granite");
  if (arch_name == "GraniteMoeForCausalLM") return std::string("granitemoe");
  if (arch_name == "GraniteMoeSharedForCausalLM") return std::string("granitemoeshared");
  // GraniteSWA / GraniteMoeSWA: Granite's and GraniteMoeShared's layers with windows, sinks and
  // per-layer RoPE bases (read_granite_swa, by model_type).
  if (arch_name == "GraniteSWAForCausalLM" || (arch_name.empty() && model_type == "granite_swa")) return std::string("granite");
  if (arch_name == "GraniteMoeSWAForCausalLM" || (arch_name.empty() && model_type == "granitemoe_swa"))
    return std::string("granitemoeshared");
  if (std::string v = llama_variant_arch(arch_name, model_type); !v.empty()) return v;
  if (arch_name.empty()) {
    if (model_type == "llama" || model_type == "mistral") return std::string("llama");
    if (model_type == "qwen2" || model_type == "qwen3" || model_type == "qwen3_moe" || model_type == "qwen2_moe" ||
        model_type == "mixtral" ||
        model_type == "deepseek_v2" || model_type == "deepseek_v3" || model_type == "phi3" || model_type == "gemma2" || model_type == "vaultgemma" ||
        model_type == "gemma3_text" || model_type == "gpt_oss" || model_type == "glm4_moe" ||
        model_type == "qwen3_next" || model_type == "qwen3_5_text" || model_type == "qwen3_5_moe_text" ||
        model_type == "smollm3" || model_type == "granite" || model_type == "granitemoe" ||
        model_type == "granitemoeshared" || model_type == "mistral4" || model_type == "glm4_moe_lite" ||
        model_type == "deepseek_v32" || model_type == "glm_moe_dsa")
      return model_type;
  }
  const std::string what = !named.empty() ? "architecture '" + named + "'"
                         : !model_type.empty() ? "model_type '" + model_type + "'"
                                               : std::string("no architectures/model_type");
  return unsupported("config.json: " + what + " is not supported; supported: " + kSupported);
}

// RoPE theta and scaling: "rope_theta" + "rope_scaling" (transformers < 5), or one
// "rope_parameters" object holding rope_theta and rope_type (transformers >= 5). phi3 also reads
// partial_rotary_factor (top level, or in either object as transformers 5 writes it) and
// longrope's original_max_position_embeddings (top level unless in the object; Phi3Config's
// default 4096); glm4_moe reads partial_rotary_factor too, 0.5 when absent (Glm4MoeConfig's
// default: GLM-4.5 rotates the first half of each head), as do glm4 (GLM-4-0414) and glm. Hunyuan's
// "dynamic" scaling with an alpha stretches the base instead (read_ntk_alpha). Needs head_dim and
// max_position read.
Status read_rope(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_float(j, "rope_theta", c.rope_theta));
  const bool glm = is_glm4_moe(c.arch) || c.arch == "glm4" || c.arch == "glm";  // Glm4Config's, GlmConfig's default 0.5 too
  // PhiConfig's, StableLmConfig's and NemotronConfig's defaults too.
  float partial = glm || c.arch == "phi" || c.arch == "nemotron" ? 0.5f
                  : is_gated_delta(c.arch) || c.arch == "stablelm" ? 0.25f : 1.0f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "partial_rotary_factor", partial));
  std::string where = "config.json: rope_scaling";
  double ntk_alpha = 0.0;
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_object()) return corrupt(std::string("config.json: ") + key + " must be an object");
    BRIGADE_RETURN_IF_ERROR(read_float(*it, "rope_theta", c.rope_theta));
    BRIGADE_RETURN_IF_ERROR(read_float(*it, "partial_rotary_factor", partial));
    if (!it->contains("rope_type") && !it->contains("type")) continue;
    if (c.arch == "hunyuan_v1_dense" || c.arch == "hunyuan_v1_moe") {  // Hunyuan's "dynamic" with alpha: the base stretched below, nothing scaled
      BRIGADE_ASSIGN_OR_RETURN(const double alpha, read_ntk_alpha(*it));
      if (alpha > 0.0) {
        ntk_alpha = alpha;
        continue;
      }
    }
    where = std::string("config.json: ") + key;
    BRIGADE_ASSIGN_OR_RETURN(c.rope_scaling, parse_rope_scaling(it->dump(), where));
  }
  if (ntk_alpha > 0.0) BRIGADE_RETURN_IF_ERROR(stretch_rope_base(ntk_alpha, c));
  if (c.arch != "phi3" && c.arch != "phimoe" && c.arch != "minimax_m2" && !glm && !is_gated_delta(c.arch) &&
      c.arch != "phi" && c.arch != "stablelm" && c.arch != "nemotron" && c.arch != "minicpm" && c.arch != "minicpm3")
    return Status::ok();
  if (!(partial > 0.0f && partial <= 1.0f))
    return invalid_argument("config.json: partial_rotary_factor must be in (0, 1] (got " + std::to_string(partial) + ")");
  c.rotary_dim = static_cast<int>(static_cast<float>(c.head_dim) * partial);  // int(head_dim * factor)
  if (c.rope_scaling.type != RopeScalingType::longrope) return Status::ok();
  if (c.rope_scaling.original_max_position <= 0) {
    c.rope_scaling.original_max_position = 4096;
    BRIGADE_RETURN_IF_ERROR(read_int(j, "original_max_position_embeddings", c.rope_scaling.original_max_position, false));
  }
  return finish_longrope(c.rope_scaling, c.max_position, c.rope_dims(), where);
}

// SmolLM3 (LlamaAttention with per-layer NoPE): attention_bias on q/k/v and o; no_rope_layers (1 =
// RoPE, 0 = none; absent: every no_rope_layer_interval-th layer, 4 by default, has none); its
// sliding window (use_sliding_window) refused by name.
Status read_smollm3(const json& j, ModelConfig& c) {
  c.qkv_bias = c.o_bias = c.attention_bias;
  bool sliding = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_sliding_window", sliding));
  if (sliding) return unsupported("config.json: use_sliding_window = true is not supported for smollm3");
  c.sliding_window = 0;
  c.nope_layers.assign(static_cast<size_t>(c.n_layers), false);
  if (auto it = j.find("no_rope_layers"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->size() != static_cast<size_t>(c.n_layers))
      return corrupt("config.json: no_rope_layers must list one flag per layer (" + std::to_string(c.n_layers) + ")");
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_number_integer() && !(*it)[i].is_boolean())
        return corrupt("config.json: no_rope_layers must hold 0 or 1 per layer");
      c.nope_layers[i] = (*it)[i].is_boolean() ? !(*it)[i].get<bool>() : (*it)[i].get<int>() == 0;
    }
    return Status::ok();
  }
  int interval = 4;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "no_rope_layer_interval", interval, false));
  if (interval < 1) return invalid_argument("config.json: no_rope_layer_interval must be >= 1");
  for (int l = 0; l < c.n_layers; ++l) c.nope_layers[static_cast<size_t>(l)] = (l + 1) % interval == 0;
  return Status::ok();
}

// IBM Granite 3.x dense (GraniteForCausalLM: LlamaAttention with Granite's multipliers):
// attention_bias on q/k/v and o; embedding_multiplier, residual_multiplier, attention_multiplier
// (the softmax scale) and logits_scaling (GraniteConfig's defaults 1), each a positive number.
Status read_granite(const json& j, ModelConfig& c) {
  c.qkv_bias = c.o_bias = c.attention_bias;
  c.sliding_window = 0;
  float embedding = 1.0f, residual = 1.0f, attention = 1.0f, logits = 1.0f;
  for (auto [key, v] : {std::pair{"embedding_multiplier", &embedding}, {"residual_multiplier", &residual},
                        {"attention_multiplier", &attention}, {"logits_scaling", &logits}}) {
    BRIGADE_RETURN_IF_ERROR(read_float(j, key, *v));
    if (!(*v > 0.0f) || !std::isfinite(*v))
      return invalid_argument(std::string("config.json: ") + key + " must be a positive number");
  }
  c.embedding_multiplier = embedding;
  c.residual_multiplier = residual;
  c.attn_scale = attention;
  c.logits_scaling = logits;
  return Status::ok();
}

// HyperCLOVA X SEED (hyperclovax: HyperCLOVAXForCausalLM, naver-hyperclovax/HyperCLOVAX-SEED-Think-14B):
// Granite's layer and scalings (read_granite; attention_multiplier head_dim^-0.5 where absent or
// null, as HyperCLOVAXConfig resolves it), the logits multiplied by logits_scaling rather than
// divided (Cohere's logit_scale), and Peri-LN (use_post_norm, true by default): an RMSNorm on each
// sublayer's output before residual_multiplier and its residual add, Gemma's four norms
// (sandwich_norms) under post_norm1 / post_norm2.
Status read_hyperclovax(json j, ModelConfig& c) {
  if (auto it = j.find("attention_multiplier"); it == j.end() || it->is_null())
    j["attention_multiplier"] = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  BRIGADE_RETURN_IF_ERROR(read_granite(j, c));
  c.logit_scale = c.logits_scaling;
  c.logits_scaling = 0.0f;
  c.sandwich_norms = true;
  return read_bool(j, "use_post_norm", c.sandwich_norms);
}

// GraniteSWA (granite_swa, ibm-granite/granite-swash-2b) and GraniteMoeSWA (granitemoe_swa): a learned
// sink per head (gpt-oss's: one more logit in each row's softmax, transformers' sigmoid(lse - sink)
// scaling), a window (128 by default; null: none) on the layers layer_types calls sliding (by
// default all but every fourth from layer 0), and layer_rope_theta: each layer's RoPE base, 0 for
// none (NoPE). brigade keeps one base for the full layers and one for the sliding ones (the
// sliding layers' unscaled), so other mixes are refused by name.
Status read_granite_swa(const json& j, ModelConfig& c) {
  c.attn_sinks = true;
  BRIGADE_RETURN_IF_ERROR(read_window_or_null(j, c, 128));
  if (auto it = j.find("layer_types"); it != j.end() && !it->is_null()) {
    BRIGADE_RETURN_IF_ERROR(read_layer_types(j, c, 1));
  } else {
    c.sliding_layers.assign(static_cast<size_t>(c.n_layers), false);
    for (int l = 0; l < c.n_layers; ++l) c.sliding_layers[static_cast<size_t>(l)] = l % 4 != 0;
  }
  const auto it = j.find("layer_rope_theta");
  if (it == j.end() || it->is_null()) return Status::ok();  // every layer at rope_theta
  if (!it->is_array() || it->size() != static_cast<size_t>(c.n_layers))
    return invalid_argument("config.json: layer_rope_theta must list one RoPE base per layer (" + std::to_string(c.n_layers) + ")");
  c.nope_layers.assign(static_cast<size_t>(c.n_layers), false);
  const auto slides = [&](int l) { return c.sliding_layers[static_cast<size_t>(l)]; };  // by type, window or not
  double full = 0.0, sliding = 0.0;
  for (int l = 0; l < c.n_layers; ++l) {
    const json& t = (*it)[static_cast<size_t>(l)];
    if (!t.is_number() || !(t.get<double>() >= 0.0) || !std::isfinite(t.get<double>()))
      return invalid_argument("config.json: layer_rope_theta[" + std::to_string(l) + "] must be a number >= 0 (0: no RoPE)");
    const double theta = t.get<double>();
    if (theta == 0.0) {
      c.nope_layers[static_cast<size_t>(l)] = true;
      continue;
    }
    double& kind = slides(l) ? sliding : full;
    if (kind != 0.0 && kind != theta)
      return unsupported("config.json: layer_rope_theta gives the " + std::string(slides(l) ? "sliding" : "full") +
                         " layers more than one RoPE base (" + t.dump() + " at layer " + std::to_string(l) +
                         "); brigade keeps one for the full layers and one for the sliding ones");
    kind = theta;
  }
  if (full > 0.0) c.rope_theta = static_cast<float>(full);
  if (sliding > 0.0 && sliding != full) {
    if (c.rope_scaling.type != RopeScalingType::none)
      return unsupported("config.json: layer_rope_theta gives the sliding layers their own RoPE base under rope_type '" +
                         std::string(rope_scaling_name(c.rope_scaling.type)) +
                         "', which brigade applies to the full layers' base only");
    if (full > 0.0) c.rope_local_theta = static_cast<float>(sliding);
    else c.rope_theta = static_cast<float>(sliding);  // every RoPE layer slides
    // Without a window the sliding layers attend as the full ones, but keep their own base, which
    // the decoder picks by a layer's window: one no position reaches past does.
    if (full > 0.0 && c.sliding_window == 0) c.sliding_window = c.max_position;
  }
  return Status::ok();
}

// The per-architecture pieces of attention: biases, q/k norms and the sliding window.
Status read_attention_shape(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_bias", c.attention_bias));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
  if (c.arch == "smollm3") return read_smollm3(j, c);
  if (c.arch == "granite" || c.arch == "granitemoe" || c.arch == "granitemoeshared") {
    BRIGADE_RETURN_IF_ERROR(read_granite(j, c));
    const std::string type = config_model_type(j);
    return type == "granite_swa" || type == "granitemoe_swa" ? read_granite_swa(j, c) : Status::ok();
  }
  if (c.arch == "hyperclovax") return read_hyperclovax(j, c);
  if (is_llama_variant(c.arch)) return read_llama_variant(j, c);  // models/llama_variants_config.h
  if (c.arch == "llama" || c.arch == "mixtral") {  // MixtralAttention is LlamaAttention's, without biases
    if (c.arch == "mixtral" && c.attention_bias)
      return unsupported("config.json: attention_bias = true is not part of mixtral and is not supported");
    c.qkv_bias = c.o_bias = c.attention_bias;
    return Status::ok();
  }
  if (is_gemma(c.arch)) return read_gemma(j, c);
  if (c.arch == "gpt_oss") {  // GptOssAttention: q/k/v/o biases (attention_bias, true by default), sinks
    c.attention_bias = true;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_bias", c.attention_bias));
    c.qkv_bias = c.o_bias = c.attention_bias;
    c.attn_sinks = true;
    c.sliding_window = 128;
    BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
    return read_layer_types(j, c, 2);
  }
  if (c.arch == "phi3") {  // Phi3Attention: qkv_proj and o_proj without biases; the window applies
    c.fused_weights = true;
    return Status::ok();
  }
  if (is_glm4_moe(c.arch)) {  // Glm4MoeAttention: q/k/v biases (attention_bias), o without; optional q/k norms
    c.qkv_bias = c.attention_bias;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_qk_norm", c.qk_norm));
    c.sliding_window = 0;  // Glm4MoeModel's mask has no window
    return Status::ok();
  }
  if (is_deepseek(c.arch)) {
    if (c.attention_bias)
      return unsupported("config.json: attention_bias = true is not supported for " + c.arch + "; set it to false");
    c.sliding_window = 0;
    return Status::ok();
  }
  // Qwen2/3 store a sliding_window size but use it only when use_sliding_window is true, and then
  // only from layer max_window_layers on, which the shared decoder does not model.
  bool use_sliding = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_sliding_window", use_sliding));
  if (use_sliding)
    return unsupported("config.json: use_sliding_window = true is not supported for " + c.arch +
                       "; set it to false (full attention)");
  c.sliding_window = 0;
  if (c.arch == "qwen2" || c.arch == "qwen2_moe") {
    c.qkv_bias = true;  // Qwen2Attention (and Qwen2MoeAttention): q/k/v with bias, o without
  } else {              // qwen3, qwen3_moe
    c.qk_norm = true;
    c.qkv_bias = c.o_bias = c.attention_bias;
  }
  return Status::ok();
}

// MixtralConfig's expert fields: num_local_experts (default 8) experts of intermediate_size,
// num_experts_per_tok (default 2), every layer sparse, the k softmax weights always renormalised
// (MixtralSparseMoeBlock). router_jitter_noise only perturbs training; output_router_logits and
// router_aux_loss_coef only add a loss.
// Experts as wide as the dense MLP (intermediate_size; no moe_intermediate_size): `count_key`
// of them (default `experts`), num_experts_per_tok chosen (default `k`).
Status read_intermediate_width_experts(const json& j, ModelConfig& c, const char* count_key, int experts, int k) {
  c.n_experts = experts;
  c.n_experts_per_tok = k;
  BRIGADE_RETURN_IF_ERROR(read_int(j, count_key, c.n_experts, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts_per_tok", c.n_experts_per_tok, false));
  c.moe_intermediate_size = c.intermediate_size;
  return Status::ok();
}

// IBM Granite 3.x MoE (GraniteMoeConfig, GraniteMoeSharedConfig): every layer num_local_experts
// (8) experts of intermediate_size, the top num_experts_per_tok (2) logits softmaxed among
// themselves (GraniteMoeTopKRouter: the softmax over all of them renormalised over the k); the
// shared model's shared_intermediate_size (0: none) an ungated shared SwiGLU every token runs
// (shared_mlp).
Status read_granite_moe(const json& j, ModelConfig& c) {
  c.norm_topk_prob = true;
  BRIGADE_RETURN_IF_ERROR(read_intermediate_width_experts(j, c, "num_local_experts", 8, 2));
  if (c.arch != "granitemoeshared") return Status::ok();
  c.shared_expert_intermediate_size = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "shared_intermediate_size", c.shared_expert_intermediate_size, false));
  if (c.shared_expert_intermediate_size < 0) return invalid_argument("config.json: shared_intermediate_size must be >= 0");
  return Status::ok();
}

// One value for every layer: an int, or a list of ints all equal (Hunyuan's per-layer fields);
// absent: `out` as it is.
Status read_uniform_int(const json& j, const char* key, int& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (it->is_number_integer()) {
    out = it->get<int>();
    return Status::ok();
  }
  if (!it->is_array() || it->empty()) return invalid_argument(std::string("config.json: ") + key + " must be an integer or a list");
  for (const json& v : *it) {
    if (!v.is_number_integer()) return invalid_argument(std::string("config.json: ") + key + " must list integers");
    if (v != it->front())
      return unsupported(std::string("config.json: ") + key + " differing between layers (" + it->dump() +
                         ") is not supported; the released checkpoints use one value");
  }
  out = it->front().get<int>();
  return Status::ok();
}

// Tencent Hunyuan MoE (HunYuanMoEV1Config, Hunyuan-A13B): every layer num_experts experts, the top
// moe_topk of their softmax renormalised (HunYuanMoEV1Gate), beside a shared SwiGLU of
// intermediate_size (shared_mlp) every token runs; the experts moe_intermediate_size wide where
// the config says (as vLLM reads it), else intermediate_size (transformers 5's). Per-layer lists
// must hold one value. Refused by name: use_mixed_mlp_moe false (no shared MLP, which
// transformers always builds), num_shared_expert other than 1, use_cla (cross-layer attention).
Status read_hunyuan_moe(const json& j, ModelConfig& c) {
  c.n_experts = 1;
  c.n_experts_per_tok = 1;
  BRIGADE_RETURN_IF_ERROR(read_uniform_int(j, "num_experts", c.n_experts));
  BRIGADE_RETURN_IF_ERROR(read_uniform_int(j, "moe_topk", c.n_experts_per_tok));
  c.moe_intermediate_size = c.intermediate_size;
  BRIGADE_RETURN_IF_ERROR(read_uniform_int(j, "moe_intermediate_size", c.moe_intermediate_size));
  int shared = 1;
  BRIGADE_RETURN_IF_ERROR(read_uniform_int(j, "num_shared_expert", shared));
  bool mixed = true, cla = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_mixed_mlp_moe", mixed));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_cla", cla));
  if (!mixed || shared != 1)
    return unsupported("config.json: hunyuan_v1_moe without one shared MLP per layer (use_mixed_mlp_moe false or "
                       "num_shared_expert != 1) is not supported");
  if (cla) return unsupported("config.json: use_cla (cross-layer attention) is not supported for hunyuan_v1_moe");
  c.shared_expert_intermediate_size = c.intermediate_size;
  c.shared_gate = false;
  c.norm_topk_prob = true;
  return Status::ok();
}

Status read_mixtral_moe(const json& j, ModelConfig& c) {
  c.norm_topk_prob = true;
  return read_intermediate_width_experts(j, c, "num_local_experts", 8, 2);
}

// Qwen3MoeConfig's expert fields. The experts' count is `num_experts` in the Hub's configs and
// `num_local_experts` in what transformers 5 writes (its attribute_map aliases the two).
// Qwen2MoeConfig's are the same, with its defaults (60 experts, top 4, 1408 wide, norm_topk_prob
// false), plus one shared expert of shared_expert_intermediate_size (Qwen2MoeSparseMoeBlock:
// scaled by sigmoid(x · shared_expert_gate)), which does not exist in Qwen3-MoE.
// GptOssConfig's expert fields: num_local_experts (default 128) experts of intermediate_size,
// num_experts_per_tok (default 4; the Hub's configs also write experts_per_token), every layer
// sparse. GptOssTopKRouter adds a bias to the router logits and softmaxes the top k of them,
// which is the softmax over all experts renormalised over the k (norm_topk_prob). The experts'
// gate|up and down carry biases, and their SwiGLU is clamped (swiglu_limit, swiglu_alpha:
// MoeExpertMlp).
Status read_gpt_oss_moe(const json& j, ModelConfig& c) {
  c.n_experts = 128;
  c.n_experts_per_tok = 4;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_local_experts", c.n_experts, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "experts_per_token", c.n_experts_per_tok, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts_per_tok", c.n_experts_per_tok, false));
  c.moe_intermediate_size = c.intermediate_size;
  c.norm_topk_prob = true;
  c.moe_biases = true;
  c.swiglu_limit = 7.0f;
  c.swiglu_alpha = 1.702f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "swiglu_limit", c.swiglu_limit));
  BRIGADE_RETURN_IF_ERROR(read_float(j, "swiglu_alpha", c.swiglu_alpha));
  if (!(c.swiglu_limit > 0.0f) || !std::isfinite(c.swiglu_limit) || !std::isfinite(c.swiglu_alpha))
    return invalid_argument("config.json: swiglu_limit must be a positive number and swiglu_alpha a number");
  return Status::ok();
}

// Qwen2/3-MoE's norm_topk_prob, decoder_sparse_step and mlp_only_layers (which layers are sparse).
Status read_sparse_layers(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "norm_topk_prob", c.norm_topk_prob));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "decoder_sparse_step", c.decoder_sparse_step, false));
  if (auto it = j.find("mlp_only_layers"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return corrupt("config.json: mlp_only_layers must be a list of layer indices");
    for (const auto& e : *it) {
      if (!e.is_number_integer()) return corrupt("config.json: mlp_only_layers must hold integers");
      c.mlp_only_layers.push_back(e.get<int>());
    }
  }
  return Status::ok();
}

// JetBrains Mellum (MellumConfig, Qwen3MoeConfig's fields): num_local_experts (64) experts of
// moe_intermediate_size (896), the softmax's top num_experts_per_tok (8) renormalised with
// norm_topk_prob (true), no shared expert; the layers mlp_layer_types calls "dense" (default none)
// a SwiGLU of intermediate_size.
Status read_mellum_moe(const json& j, ModelConfig& c) {
  c.n_experts = 64;
  c.n_experts_per_tok = 8;
  c.moe_intermediate_size = 896;
  c.norm_topk_prob = true;
  BRIGADE_RETURN_IF_ERROR(read_int(j, j.contains("num_experts") ? "num_experts" : "num_local_experts", c.n_experts, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts_per_tok", c.n_experts_per_tok, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "moe_intermediate_size", c.moe_intermediate_size, false));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "norm_topk_prob", c.norm_topk_prob));
  c.decoder_sparse_step = 1;
  return read_dense_mlp_layers(j, c, 0);
}

// FlintConfig's experts (over Qwen2MoeConfig): num_experts (256) of moe_intermediate_size (512),
// the top num_experts_per_tok (6) of the router logits' sigmoid, renormalised with norm_topk_prob
// (true), beside one ungated shared SwiGLU of shared_expert_intermediate_size (1024) every token
// runs; the layers of mlp_only_layers ([0, 1] by default) dense, the others as decoder_sparse_step
// says (1: all).
Status read_flint_moe(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_experts_beside_shared(j, c, 256, 6, 512, 1024));
  c.norm_topk_prob = true;
  c.moe_scoring = MoeScoring::sigmoid;
  if (auto it = j.find("mlp_only_layers"); it == j.end() || it->is_null()) c.mlp_only_layers = {0, 1};
  return read_sparse_layers(j, c);
}

// OlmoeConfig's expert fields: num_experts (default 64) experts of intermediate_size (it has no
// moe_intermediate_size), num_experts_per_tok (default 8), every layer sparse, the softmax top k
// renormalised only with norm_topk_prob (default false: OLMoE-1B-7B's). FlexOlmoConfig's the
// same, its defaults 7 and 5.
Status read_olmoe_moe(const json& j, ModelConfig& c) {
  const bool flex = c.arch == "flex_olmo";
  BRIGADE_RETURN_IF_ERROR(read_intermediate_width_experts(j, c, "num_experts", flex ? 7 : 64, flex ? 5 : 8));
  c.norm_topk_prob = false;
  return read_bool(j, "norm_topk_prob", c.norm_topk_prob);
}

// Ernie4_5_MoeConfig's expert fields (num_experts / num_experts_per_tok are its aliases of
// moe_num_experts / moe_k): layer l is sparse when (l + 1) % moe_layer_interval == 0 and l is in
// [moe_layer_start_index, moe_layer_end_index] (-1: the last layer); softmax routing whose top k
// are chosen on the probabilities plus moe_statics.e_score_correction_bias and renormalised
// (divided by max(sum, moe_norm_min): the same for any sum a softmax's top k can have), and
// moe_num_shared_experts shared experts of moe_intermediate_size each, every token.
Status read_ernie_moe(const json& j, ModelConfig& c) {
  c.n_experts = 64;
  c.n_experts_per_tok = 6;
  c.moe_intermediate_size = 1536;
  c.n_shared_experts = 2;
  for (const char* key : {"moe_num_experts", "num_experts"}) BRIGADE_RETURN_IF_ERROR(read_int(j, key, c.n_experts, false));
  for (const char* key : {"moe_k", "num_experts_per_tok"}) BRIGADE_RETURN_IF_ERROR(read_int(j, key, c.n_experts_per_tok, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "moe_intermediate_size", c.moe_intermediate_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "moe_num_shared_experts", c.n_shared_experts, false));
  int start = 1, end = -1;
  c.decoder_sparse_step = 1;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "moe_layer_start_index", start, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "moe_layer_end_index", end, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "moe_layer_interval", c.decoder_sparse_step, false));
  if (start < 0 || c.n_shared_experts < 0)
    return invalid_argument("config.json: moe_layer_start_index and moe_num_shared_experts must be >= 0");
  if (end == -1) end = c.n_layers - 1;
  c.first_k_dense_replace = start;
  for (int l = std::max(end + 1, 0); l < c.n_layers; ++l) c.mlp_only_layers.push_back(l);
  c.moe_scoring = MoeScoring::softmax;
  c.moe_score_bias = true;
  c.norm_topk_prob = true;
  return Status::ok();
}

Status read_moe(const json& j, ModelConfig& c) {
  if (c.arch == "mixtral") return read_mixtral_moe(j, c);
  if (c.arch == "phimoe") {  // PhimoeConfig's defaults: 16 experts, 2 per token (models/phimoe_config.h)
    BRIGADE_RETURN_IF_ERROR(read_intermediate_width_experts(j, c, "num_local_experts", 16, 2));
    return read_phimoe_routing(j, c);
  }
  if (c.arch == "ernie4_5_moe") return read_ernie_moe(j, c);
  if (c.arch == "afmoe") return read_afmoe_moe(j, c);  // models/arcee_config.h
  if (c.arch == "olmoe" || c.arch == "flex_olmo") return read_olmoe_moe(j, c);
  if (c.arch == "minimax_m2") return read_intermediate_width_experts(j, c, "num_local_experts", 256, 8);
  if (c.arch == "granitemoe" || c.arch == "granitemoeshared") return read_granite_moe(j, c);
  if (c.arch == "hunyuan_v1_moe") return read_hunyuan_moe(j, c);
  if (c.arch == "flint") return read_flint_moe(j, c);
  if (c.arch == "mellum") return read_mellum_moe(j, c);
  if (c.arch == "gpt_oss") return read_gpt_oss_moe(j, c);
  if (c.arch != "qwen3_moe" && c.arch != "qwen2_moe" && c.arch != "qwen3_next" && c.arch != "qwen3_5_moe_text")
    return Status::ok();
  // Qwen3-Next's and Qwen3.5-MoE's blocks are Qwen2-MoE's (a sigmoid-gated shared expert);
  // Qwen3.5-MoE always renormalizes the top k.
  const bool gated_shared = c.arch != "qwen3_moe", qwen2 = c.arch == "qwen2_moe";
  if (gated_shared) c.shared_gate = true;
  if (c.arch == "qwen3_next" || c.arch == "qwen3_5_moe_text") c.norm_topk_prob = true;
  if (qwen2) {  // Qwen2MoeConfig's defaults (Qwen1.5-MoE-A2.7B's numbers)
    c.n_experts = 60;
    c.n_experts_per_tok = 4;
    c.moe_intermediate_size = 1408;
    c.shared_expert_intermediate_size = 5632;
    c.norm_topk_prob = false;
    c.shared_gate = true;
  }
  const bool has_num_experts = j.contains("num_experts") && !j["num_experts"].is_null();
  BRIGADE_RETURN_IF_ERROR(read_int(j, has_num_experts ? "num_experts" : "num_local_experts", c.n_experts, !qwen2));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts_per_tok", c.n_experts_per_tok, !qwen2));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "moe_intermediate_size", c.moe_intermediate_size, !qwen2));
  if (c.arch != "qwen3_5_moe_text")  // its experts fill every layer and always renormalize
    BRIGADE_RETURN_IF_ERROR(read_sparse_layers(j, c));
  if (gated_shared) {
    BRIGADE_RETURN_IF_ERROR(read_int(j, "shared_expert_intermediate_size", c.shared_expert_intermediate_size, !qwen2));
    if (c.shared_expert_intermediate_size <= 0)
      return invalid_argument("config.json: shared_expert_intermediate_size must be > 0 (" + c.arch + "'s shared expert)");
    return Status::ok();
  }
  if (auto it = j.find("shared_expert_intermediate_size"); it != j.end() && it->is_number() && it->get<double>() > 0)
    return unsupported("config.json: a shared expert (shared_expert_intermediate_size) is not part of qwen3_moe "
                       "and is not supported; Qwen2MoeForCausalLM (qwen2_moe) has one");
  return Status::ok();
}

// The experts' numbers fit together; names the field that does not.
Status validate_moe(const ModelConfig& c) {
  if (!is_sparse_moe(c.arch)) return Status::ok();
  const std::string e = std::to_string(c.n_experts), k = std::to_string(c.n_experts_per_tok);
  const std::string experts = c.arch == "mixtral" || c.arch == "phimoe" || c.arch == "gpt_oss" || c.arch == "llama4_text" || c.arch == "minimax_m2" ||
                                          c.arch == "granitemoe" || c.arch == "granitemoeshared" || c.arch == "mellum"
                                  ? "num_local_experts"
                                  : "num_experts";  // olmoe's too
  if (c.n_experts < 1) return invalid_argument("model config: " + experts + " must be >= 1 (got " + e + ")");
  if (c.n_experts_per_tok < 1 || c.n_experts_per_tok > c.n_experts)
    return invalid_argument("model config: num_experts_per_tok must be in [1, " + experts + " = " + e + "] (got " + k +
                            ")");
  if (c.moe_intermediate_size < 1)
    return invalid_argument("model config: moe_intermediate_size must be > 0 (got " +
                            std::to_string(c.moe_intermediate_size) + ")");
  if (c.decoder_sparse_step < 1)
    return invalid_argument("model config: decoder_sparse_step must be >= 1 (got " +
                            std::to_string(c.decoder_sparse_step) + ")");
  for (int l : c.mlp_only_layers)
    if (l < 0 || l >= c.n_layers)
      return invalid_argument("model config: mlp_only_layers entry " + std::to_string(l) +
                              " is not a layer index in [0, " + std::to_string(c.n_layers) + ")");
  return Status::ok();
}

}  // namespace

std::string causal_architecture(const std::string& arch) {
  constexpr std::string_view kSeqCls = "ForSequenceClassification";
  if (!arch.ends_with(kSeqCls) || arch.size() == kSeqCls.size()) return arch;
  const std::string base = arch.substr(0, arch.size() - kSeqCls.size());
  return (base == "Gemma3Text" ? std::string("Gemma3") : base) + "ForCausalLM";
}

bool ModelConfig::is_moe_layer(int l) const {
  if (n_experts <= 0 || decoder_sparse_step < 1 || l < first_k_dense_replace) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), l) != mlp_only_layers.end()) return false;
  return (l + 1) % decoder_sparse_step == 0;
}

MoeRouting ModelConfig::moe_routing() const {
  MoeRouting r;
  r.k = n_experts_per_tok;
  r.scoring = moe_scoring;
  r.normalize = norm_topk_prob;
  r.n_group = n_group;
  r.topk_group = topk_group;
  r.group_score = moe_group_score;
  r.scale = routed_scaling_factor;
  r.jitter_eps = router_jitter;
  r.select_on_logits = moe_select_on_logits;
  return r;
}

int ModelConfig::n_moe_layers() const {
  int n = 0;
  for (int l = 0; l < n_layers; ++l) n += is_moe_layer(l) ? 1 : 0;
  return n;
}

Status ModelConfig::validate() const {
  auto positive = [](const char* name, int v) -> Status {
    if (v <= 0) return invalid_argument(std::string("model config: ") + name + " must be > 0 (got " + std::to_string(v) + ")");
    return Status::ok();
  };
  BRIGADE_RETURN_IF_ERROR(positive("hidden_size", hidden_size));
  BRIGADE_RETURN_IF_ERROR(positive("num_hidden_layers", n_layers));
  BRIGADE_RETURN_IF_ERROR(positive("num_attention_heads", n_heads));
  BRIGADE_RETURN_IF_ERROR(positive("num_key_value_heads", n_kv_heads));
  BRIGADE_RETURN_IF_ERROR(positive("head_dim", head_dim));
  if (arch != "qwen3_5_moe_text") BRIGADE_RETURN_IF_ERROR(positive("intermediate_size", intermediate_size));
  BRIGADE_RETURN_IF_ERROR(positive("vocab_size", vocab_size));
  BRIGADE_RETURN_IF_ERROR(positive("max_position_embeddings", max_position));
  if (n_heads % n_kv_heads != 0)
    return invalid_argument("model config: num_attention_heads (" + std::to_string(n_heads) +
                            ") must be a multiple of num_key_value_heads (" + std::to_string(n_kv_heads) + ")");
  if (head_dim % 2 != 0)
    return invalid_argument("model config: head_dim must be even for RoPE (got " + std::to_string(head_dim) + ")");
  if (!(rms_eps > 0.0f) || !std::isfinite(rms_eps))
    return invalid_argument(std::string("model config: ") + (layer_norms ? "layer_norm_eps" : "rms_norm_eps") +
                            " must be a positive number");
  if (!(rope_theta > 0.0f) || !std::isfinite(rope_theta))
    return invalid_argument("model config: rope_theta must be a positive number");
  if (sliding_window < 0) return invalid_argument("model config: sliding_window must be >= 0");
  if (!alibi_slopes.empty() && alibi_slopes.size() != static_cast<size_t>(n_heads))
    return invalid_argument("model config: ALiBi needs one slope per attention head (" + std::to_string(n_heads) +
                            "), got " + std::to_string(alibi_slopes.size()));
  if (mlp_activation == MlpActivation::relu && !mlp_ungated)
    return invalid_argument("model config: the relu activation is OPT's ungated MLP's (no gated relu MLP)");
  if (!sliding_layers.empty() && sliding_layers.size() != static_cast<size_t>(n_layers))
    return invalid_argument("model config: layer_types must list one type per layer");
  if (rotary_dim < 0 || rotary_dim > head_dim || rope_dims() % 2 != 0)
    return invalid_argument("model config: the rotary dims (head_dim * partial_rotary_factor = " +
                            std::to_string(rope_dims()) + ") must be even and at most head_dim");
  if (!rope_scaling.freq_factors.empty() && rope_scaling.freq_factors.size() != static_cast<size_t>(rope_dims() / 2))
    return invalid_argument("model config: rope frequency factors must number rotary dims / 2 = " +
                            std::to_string(rope_dims() / 2));
  if (bos_id >= vocab_size) return invalid_argument("model config: bos_token_id is outside the vocabulary");
  for (int e : eos_ids)
    if (e < 0 || e >= vocab_size)
      return invalid_argument("model config: eos_token_id " + std::to_string(e) + " is outside the vocabulary");
  if (is_deepseek(arch)) return validate_deepseek(*this);
  if (has_grouped_moe(arch)) return validate_grouped_moe(*this);
  return validate_moe(*this);
}

Expected<ModelConfig> parse_hf_config(const std::string& json_text) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  // Python's json.dumps writes inf as a bare Infinity (Mamba2's time_step_limit).
  if (j.is_discarded()) j = json::parse(quote_python_floats(json_text), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt("config.json is not a valid JSON object");
  if (is_mamba2(j)) return read_mamba2_config(j);  // state-space layers (models/state_space_config.h)
  if (is_granite_hybrid(j)) return read_granite_hybrid_config(j);  // mixers and attention (the same)
  if (is_bamba(j)) return read_bamba_config(j);  // Granite 4.0-H's mixers under Jamba's names
  if (is_nemotron_h(j)) return read_nemotron_h_config(j);
  if (is_mamba1(j)) return read_mamba1_config(j);
  if (is_jamba(j)) return read_jamba_config(j);
  if (is_lfm2(j)) return read_lfm2_config(j);
  if (is_falcon_h1(j)) return read_falcon_h1_config(j);
  if (is_kimi_linear(j)) return read_kimi_linear_config(j);  // KDA and MLA layers (models/kimi_linear_config.h)
  if (is_longcat_flash(j)) return read_longcat_flash_config(j);  // two MLA blocks per layer (models/longcat_flash.h)
  if (is_minimax(j)) return read_minimax_config(j);  // lightning and softmax attention (models/minimax_config.h)
  if (is_qwen3_5_multimodal(j)) return read_qwen3_5_multimodal(j);  // with M-RoPE and its tower (the same)
  if (is_gemma3n(j)) return read_gemma3n_config(j);  // AltUp, LAuReL, per-layer inputs (models/gemma3n_config.h)
  if (is_gemma4(j)) return read_gemma4_config(j);  // two attention geometries, MoE beside the MLP (models/gemma4_config.h)
  if (is_gemma3_multimodal(j)) {  // its language model, text only (models/gemma_config.h)
    BRIGADE_ASSIGN_OR_RETURN(json text, gemma3_text_config(j));
    BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(text.dump()));
    c.multimodal_text = true;
    BRIGADE_ASSIGN_OR_RETURN(c.vision, read_gemma3_vision(j, c.vocab_size));
    return c;
  }
  if (is_paligemma(j)) {  // its Gemma / Gemma 2 language model, its tower, the prefix attention (models/paligemma_config.h)
    BRIGADE_ASSIGN_OR_RETURN(json text, paligemma_text_config(j));
    BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(text.dump()));
    c.multimodal_text = true;
    c.prefix_lm = true;
    BRIGADE_ASSIGN_OR_RETURN(c.vision, read_paligemma_vision(j, c.vocab_size, c.hidden_size));
    return c;
  }
  if (is_llama4(j)) {  // its language model, text only (models/llama_variants_config.h)
    BRIGADE_ASSIGN_OR_RETURN(json text, llama4_text_config(j));
    BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(text.dump()));
    c.multimodal_text = true;
    return c;
  }
  if (is_mistral3(j)) {  // its language model and its Pixtral tower (models/llama_variants_config.h)
    BRIGADE_ASSIGN_OR_RETURN(json text, mistral3_text_config(j));
    BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(text.dump()));
    c.multimodal_text = true;
    // A tower brigade does not run leaves the language model served as text (vision_off says why).
    if (c.arch == "mistral4") {
      c.vision_off = "Mistral Small 4's language model (MLA) takes no image embeddings here";
      return c;
    }
    auto tower = read_pixtral_vision(j, c.vocab_size, c.hidden_size, c.rms_eps);
    if (tower) c.vision = *tower;
    else c.vision_off = tower.status().message();
    return c;
  }
  if (is_glm4v(j)) {  // GLM-4.1V / 4.5V: GLM-4's or GLM-4.5's layers with M-RoPE, and the GLM tower (models/glm4v_config.h)
    std::vector<int> mrope;
    BRIGADE_ASSIGN_OR_RETURN(json text, glm4v_text_config(j, &mrope));
    BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(text.dump()));
    c.multimodal_text = true;
    BRIGADE_RETURN_IF_ERROR(check_mrope_section(mrope, c.rope_dims(), "rope_parameters"));
    c.mrope_section = std::move(mrope);
    BRIGADE_ASSIGN_OR_RETURN(c.vision, read_glm4v_vision(j, c.vocab_size, is_glm4v_moe(j)));
    return c;
  }
  if (is_internvl(j) || is_internvl_chat(j)) {  // its language model and InternViT (models/internvl_config.h)
    BRIGADE_ASSIGN_OR_RETURN(json text, internvl_text_config(j));
    BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(text.dump()));
    c.multimodal_text = true;
    BRIGADE_ASSIGN_OR_RETURN(c.vision, read_internvl_vision(j, c.vocab_size));
    return c;
  }
  if (is_aya_vision(j)) {  // its Cohere / Cohere2 language model and its tiled SigLIP tower (models/aya_vision_config.h)
    BRIGADE_ASSIGN_OR_RETURN(json text, aya_vision_text_config(j));
    BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(text.dump()));
    c.multimodal_text = true;
    BRIGADE_ASSIGN_OR_RETURN(c.vision, read_aya_vision(j, c.vocab_size, c.hidden_size));
    return c;
  }
  if (is_idefics3(j)) {  // its Llama language model and its tiled SigLIP-style tower (models/idefics3_config.h)
    BRIGADE_ASSIGN_OR_RETURN(json text, idefics3_text_config(j));
    BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(text.dump()));
    c.multimodal_text = true;
    BRIGADE_ASSIGN_OR_RETURN(c.vision, read_idefics3_vision(j, c.vocab_size));
    return c;
  }
  if (is_llava(j)) {  // its language model and its CLIP / SigLIP tower (models/llava_config.h)
    BRIGADE_ASSIGN_OR_RETURN(json text, llava_text_config(j));
    BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(text.dump()));
    c.multimodal_text = true;
    BRIGADE_ASSIGN_OR_RETURN(c.vision, read_llava_vision(j, c.vocab_size));
    return c;
  }
  if (is_qwen_vl(j)) {  // its language model, with M-RoPE, and its tower (models/qwen_vl_config.h)
    std::vector<int> mrope;
    bool interleaved = false;
    BRIGADE_ASSIGN_OR_RETURN(json text, qwen_vl_text_config(j, &mrope, &interleaved));
    BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(text.dump()));
    c.multimodal_text = true;
    BRIGADE_RETURN_IF_ERROR(check_mrope_section(mrope, c.rope_dims(), "rope_scaling"));
    c.mrope_section = std::move(mrope);
    c.mrope_interleaved = interleaved;
    c.experts_transposed = is_qwen3_vl_moe(j);
    BRIGADE_ASSIGN_OR_RETURN(c.vision, read_qwen_vl_vision(j, c.vocab_size, qwen_vl_kind(j)));
    if (static_cast<int>(c.vision.deepstack_layers.size()) > c.n_layers)
      return invalid_argument("config.json: vision_config.deepstack_visual_indexes has " +
                              std::to_string(c.vision.deepstack_layers.size()) + " taps for " +
                              std::to_string(c.n_layers) + " decoder layers (one layer takes each)");
    return c;
  }
  if (is_bert_family(j)) return read_bert_config(j);  // encoders (models/bert_config.h)
  if (is_modernbert(j)) return read_modernbert_config(j);  // (models/modernbert_config.h)
  apply_exaone3_config_names(j);  // models/classic_decoders_config.h
  apply_gpt_config_names(j);      // models/gpt_decoders_config.h
  apply_dbrx_config_names(j);     // models/dbrx_config.h
  BRIGADE_RETURN_IF_ERROR(apply_chatglm_config(j));  // models/chatglm_config.h: as GlmForCausalLM
  BRIGADE_RETURN_IF_ERROR(apply_alias_config(j));    // models/alias_configs.h: IQuestCoder, Solar Open
  // MiniCPM3Config's head_dim is qk_rope_head_dim (its RoPE's width, which longrope's factors count);
  // the Hub's config.json may leave it out.
  if (config_architecture(j) == "MiniCPM3ForCausalLM" && !j.contains("head_dim"))
    j["head_dim"] = j.contains("qk_rope_head_dim") ? j["qk_rope_head_dim"] : json(32);
  bool seq_cls = false;
  BRIGADE_ASSIGN_OR_RETURN(std::string arch, detect_arch(j, seq_cls));
  ModelConfig c;
  c.arch = arch;
  c.seq_cls = seq_cls;
  c.rope_style = RopeStyle::neox;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "hidden_size", c.hidden_size, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_hidden_layers", c.n_layers, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_attention_heads", c.n_heads, true));
  c.n_kv_heads = c.n_heads;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_key_value_heads", c.n_kv_heads, false));
  if (c.n_heads > 0) c.head_dim = c.arch == "mellum" ? 128 : c.hidden_size / c.n_heads;  // MellumConfig's 128
  BRIGADE_RETURN_IF_ERROR(read_int(j, "head_dim", c.head_dim, false));
  // Qwen3.5-MoE has no dense MLP, so no intermediate_size.
  BRIGADE_RETURN_IF_ERROR(read_int(j, "intermediate_size", c.intermediate_size, c.arch != "qwen3_5_moe_text"));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "vocab_size", c.vocab_size, true));
  c.max_position = c.arch == "phimoe" || c.arch == "mellum" ? 131072 : 2048;  // PhimoeConfig's default 4096 * 32, MellumConfig's
  BRIGADE_RETURN_IF_ERROR(read_int(j, "max_position_embeddings", c.max_position, false));
  c.rms_eps = c.arch == "bitnet" ? 1e-5f : 1e-6f;  // BitNetConfig's
  BRIGADE_RETURN_IF_ERROR(read_float(j, "rms_norm_eps", c.rms_eps));
  if (c.arch == "bitnet") c.rope_theta = 500000.0f;  // BitNetConfig's default_theta
  BRIGADE_RETURN_IF_ERROR(read_rope(j, c));
  // Gemma2Config / Gemma3TextConfig and SmolLM3Config tie by default; the Hub's configs may omit the field.
  c.tie_embeddings = is_gemma(c.arch) || c.arch == "smollm3" || c.arch == "ernie4_5" ||
                     c.arch == "ernie4_5_moe" || c.arch == "youtu" || c.arch == "minicpm3";  // Ernie4_5(_Moe)Config's, YoutuConfig's, MiniCPM3Config's too
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "tie_word_embeddings", c.tie_embeddings));
  // A classifier checkpoint stores score.weight, no lm_head: the decoder's head is its embedding,
  // so every path that computes logits stays well-formed; the engine refuses to generate with it.
  if (c.seq_cls) c.tie_embeddings = true;
  BRIGADE_RETURN_IF_ERROR(read_attention_shape(j, c));
  BRIGADE_RETURN_IF_ERROR(read_moe(j, c));
  if (is_deepseek(c.arch)) BRIGADE_RETURN_IF_ERROR(read_deepseek(j, c));
  if (is_glm4_moe(c.arch)) BRIGADE_RETURN_IF_ERROR(read_glm4_moe(j, c));
  if (c.arch == "dots1") BRIGADE_RETURN_IF_ERROR(read_dots1(j, c));
  if (is_gated_delta(c.arch)) BRIGADE_RETURN_IF_ERROR(read_gated_delta(j, c));  // models/state_space_config.h
  // YaRN (transformers' _compute_yarn_parameters: the given factor, attention_factor from it
  // unless set): DeepSeek's and gpt-oss's own, and the context extension Qwen's model cards
  // describe (rope_type yarn, factor 4, original_max_position_embeddings 32768) for the Llama,
  // Qwen2/3 (MoE) decoders and Qwen3-Next / Qwen3.5.
  const bool yarn_ok = is_deepseek(c.arch) || c.arch == "gpt_oss" || c.arch == "llama" || c.arch == "qwen2" ||
                       c.arch == "qwen3" || c.arch == "qwen2_moe" || c.arch == "qwen3_moe" || is_gated_delta(c.arch) ||
                       c.arch == "smollm3" || is_llama_variant(c.arch);
  if (c.rope_scaling.type == RopeScalingType::yarn && !yarn_ok)
    return unsupported("config.json: rope_type 'yarn' is supported for llama, qwen2, qwen3, qwen2_moe, qwen3_moe, "
                       "qwen3_next, qwen3_5, smollm3, olmo2, olmo3, exaone4, glm4, seed_oss, ernie4_5, "
                       "hunyuan_v1_dense, deepseek_v2/v3 and gpt_oss; " + c.arch +
                       " supports default, linear, dynamic, llama3" + (c.arch == "phi3" ? ", longrope" : ""));
  if (c.rope_scaling.type == RopeScalingType::longrope && c.arch != "phi3" && c.arch != "phimoe" && c.arch != "minicpm" &&
      c.arch != "minicpm3")
    return unsupported("config.json: rope_type 'longrope' is supported for phi3, phimoe, minicpm and minicpm3 only; " + c.arch +
                       " supports default, linear, dynamic, llama3" + (is_deepseek(c.arch) ? ", yarn" : ""));
  // Absent ids take transformers' LlamaConfig defaults (bos 1, eos 2; Qwen configs have none);
  // null means none.
  // MixtralConfig's, Ministral3Config's and PhimoeConfig's are Llama's.
  const bool llama_defaults = c.arch == "llama" || c.arch == "mixtral" || c.arch == "ministral3" || c.arch == "phimoe";
  c.bos_id = !j.contains("bos_token_id") && llama_defaults ? 1 : -1;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "bos_token_id", c.bos_id, false));
  if (!j.contains("eos_token_id") && llama_defaults) c.eos_ids = {2};
  if (c.arch == "cwm" || c.arch == "youtu" || c.arch == "bitnet") {  // CwmConfig's, YoutuConfig's, BitNetConfig's (Llama 3's ids)
    if (!j.contains("bos_token_id")) c.bos_id = 128000;
    if (!j.contains("eos_token_id")) c.eos_ids = c.arch == "cwm" ? std::vector<int>{128001, 128008, 128009} : std::vector<int>{128001};
  }
  BRIGADE_RETURN_IF_ERROR(read_eos(j, c.eos_ids));
  // LlamaMLP's mlp_bias (Seed-OSS's and Helium's read with their attention; Ernie 4.5's is use_bias); no other
  // family of the Llama decoder has MLP biases.
  bool mlp_bias = c.mlp_bias;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "mlp_bias", mlp_bias));
  if (mlp_bias && c.arch != "llama" && c.arch != "seed_oss" && c.arch != "helium" && c.arch != "ernie4_5" && c.arch != "starcoder2" &&
      c.arch != "phi" && c.arch != "jais2" && c.arch != "nemotron" &&
      c.arch != "exaone" && c.arch != "internlm3" && !is_gpt_decoder(c.arch))  // (the last ones: their own use_bias / always / mlp_bias / bias)
    return unsupported("config.json: mlp_bias = true is not supported for " + c.arch + "; set it to false");
  if (c.arch == "llama") c.mlp_bias = mlp_bias;
  BRIGADE_RETURN_IF_ERROR(read_dtype(j, c.dtype));
  if (auto q = j.find("quantization_config"); q != j.end() && !q->is_null()) {
    BRIGADE_ASSIGN_OR_RETURN(c.quant, parse_quant_config(*q));
    if (c.quant.mxfp4() && c.arch != "gpt_oss")
      return unsupported("config.json: quantization_config quant_method 'mxfp4' is supported for gpt_oss only (its "
                         "experts); " + c.arch + " has none stored so");
    if (c.quant.ternary() && c.arch != "bitnet" && c.arch != "llama")
      return unsupported("config.json: quantization_config " + c.quant.describe() + " is supported for bitnet and "
                         "llama only (the Llama decoder quantizes their ternary linears' inputs); not for " + c.arch);
    if (c.quant.int4() && is_deepseek(c.arch))
      return unsupported("config.json: quantization_config " + c.quant.describe() + " is not supported for " + c.arch +
                         " (MLA attention); int4 checkpoints load for llama, qwen2, qwen3, qwen3_moe, phi3, gemma2 and "
                         "gemma3_text");
  }
  BRIGADE_RETURN_IF_ERROR(c.validate());
  return c;
}

}  // namespace brigade
