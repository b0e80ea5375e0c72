#include "models/model.h"

#include "models/bert.h"
#include "models/modernbert.h"
#include "models/state_space.h"
#include "models/checkpoint.h"
#include "models/deepseek.h"
#include "models/gemma3n.h"
#include "models/gemma4.h"
#include "models/llama.h"
#include "models/llama_variants_config.h"
#include "models/longcat_flash.h"
#include "models/synthetic_source.h"

namespace brigade {

void StepBatch::clear() {
  tokens.clear();
  positions.clear();
  slots.clear();
  q_start.clear();
  ctx_len.clear();
  block_table.clear();
  max_blocks = 0;
  logit_rows.clear();
  hidden_rows.clear();
  hidden = Tensor();
  device_tokens = Tensor();
  prev_hidden = Tensor();
  aux_rows.clear();
  aux_hidden = Tensor();
  lora.clear();
  images.clear();
  rope_delta.clear();
  state_slots.clear();
  state_from.clear();
  state_save.clear();
  state_save_rows.clear();
}

Expected<std::unique_ptr<Model>> Model::load(const std::string& path, Backend& backend, const LoadOptions& options) {
  // "synthetic:<shape>" (models/synthetic_source.h): random weights made in memory, no file.
  if (is_synthetic_spec(path)) return load_synthetic(path, backend, options);
  BRIGADE_ASSIGN_OR_RETURN(auto checkpoint, Checkpoint::open(path));
  const std::string& arch = checkpoint->config().arch;
  if (options.mtp && (arch == "mimo_v2_flash" || arch == "longcat_flash"))
    return unsupported(path + ": speculative method mtp does not run " + arch + "'s MTP layers yet (" +
                       (arch == "mimo_v2_flash" ? "model.mtp.layers.*: a sliding-window attention layer with a dense MLP"
                                                : "model.mtp.*: LongCat-Flash's own MTP block") +
                       "); it runs deepseek_v2, deepseek_v3, glm4_moe, glm4_moe_lite, deepseek_v32 and glm_moe_dsa's");
  if (options.mtp && arch != "deepseek_v3" && arch != "deepseek_v2" && arch != "glm4_moe" && arch != "glm4_moe_lite" &&
      arch != "deepseek_v32" && arch != "glm_moe_dsa")
    return unsupported(path + ": '" + arch + "' has no MTP module to draft with (speculative method mtp runs "
                       "the num_nextn_predict_layers module of deepseek_v2, deepseek_v3, glm4_moe, glm4_moe_lite, "
                       "deepseek_v32 and glm_moe_dsa)");
  // EAGLE-3 heads (models/eagle3_head.h) beside the decoders checked against a reference whose
  // aux hidden states vLLM captures the same way (the residual entering a layer); gpt_oss's
  // heads need norm_before_fc, Llama 4's and the others' are not checked.
  const bool eagle3_target = arch == "llama" || arch == "qwen2" || arch == "qwen3" || arch == "qwen3_moe";
  if (!options.eagle3.empty() && (options.mtp || !eagle3_target))
    return unsupported(path + ": an EAGLE-3 draft head runs on a llama, qwen2, qwen3 or qwen3_moe target without an "
                       "MTP module (this one is '" + arch + "'" + (options.mtp ? ", with mtp" : "") + ")");
  // qwen2 (q/k/v biases) and qwen3 (q/k head norms) are the Llama decoder with optional pieces.
  // qwen3_moe is qwen3 with sparse expert blocks in some layers (models/moe_block.h), qwen2_moe
  // qwen2 with them and a gated shared expert, mixtral llama with one in every layer; phi3 stores q|k|v and gate|up fused and may rotate part of
  // each head. gemma2 / gemma3_text add sandwich norms, gelu, soft-capping and per-layer windows
  // and RoPE bases (models/gemma_config.h); gpt_oss attention sinks and biased, clamped experts;
  // glm4_moe (GLM-4.5/4.6) qwen2's biases or qwen3's norms, half-rotated heads and DeepSeek-V3's
  // sigmoid-routed experts with a shared one.
  if (arch == "llama" || arch == "qwen2" || arch == "qwen3" || arch == "qwen3_moe" || arch == "qwen2_moe" ||
      arch == "mixtral" || arch == "phi3" || arch == "gemma2" || arch == "vaultgemma" || arch == "gemma3_text" || arch == "gpt_oss" ||
      arch == "glm4_moe" || arch == "smollm3" || arch == "granite" || arch == "granitemoe" ||
      arch == "granitemoeshared" || is_llama_variant(arch))  // and OLMo 2 / 3, EXAONE 4,
    return load_llama(*checkpoint, backend, options);  // GLM-4, Seed-OSS, ERNIE 4.5, Hunyuan (llama_variants_config.h)
  // AltUp, LAuReL, per-layer inputs and K/V shared across layers (models/gemma3n.h).
  if (arch == "gemma3n_text") return load_gemma3n(std::move(checkpoint), backend, options);
  // Two attention geometries, K/V sharing, per-layer inputs, MoE beside the MLP (models/gemma4.h).
  if (arch == "gemma4_text") return load_gemma4(std::move(checkpoint), backend, options);
  // MLA attention and the MoE with shared experts (models/deepseek.h).
  // Mistral Small 4 (mistral4) and GLM-4.7-Flash (glm4_moe_lite) are DeepSeek-V3's layer.
  // DeepSeek-V3.2 (deepseek_v32) and GLM-5 (glm_moe_dsa) add DSA's indexer (models/dsa_indexer.h).
  // Youtu-LLM (youtu) and MiniCPM 3 (minicpm3) are DeepSeek's attention over dense layers.
  const bool mla = arch == "deepseek_v2" || arch == "deepseek_v3" || arch == "mistral4" || arch == "glm4_moe_lite" ||
                   arch == "deepseek_v32" || arch == "glm_moe_dsa" || arch == "youtu" || arch == "minicpm3" ||
                   arch == "axk1";
  if (mla && options.lora_enabled())
    return unsupported(path + ": LoRA adapters are not supported for " + arch + " (MLA attention); they run on the "
                       "dense Llama-family decoders (llama, qwen2, qwen3, phi3)");
  if (mla) return load_deepseek(*checkpoint, backend, options);
  // Two MLA blocks, two dense MLPs and a shortcut MoE with zero experts per layer (models/longcat_flash.h).
  if (arch == "longcat_flash") return load_longcat_flash(*checkpoint, backend, options);
  // State-space layers (models/state_space.h).
  if (arch == "mamba" || arch == "falcon_mamba" || arch == "mamba2" || arch == "granitemoehybrid" || arch == "bamba" ||
      arch == "nemotron_h" || arch == "jamba" || arch == "qwen3_next" || arch == "qwen3_5_text" ||
      arch == "qwen3_5_moe_text" || arch == "lfm2" || arch == "lfm2_moe" ||
      arch == "falcon_h1" || arch == "kimi_linear" ||  // (Kimi Linear: KDA and MLA layers, models/kimi_linear.h)
      arch == "minimax")  // (MiniMax-Text-01 / M1: lightning and softmax attention, models/minimax.h)
    return load_state_space(*checkpoint, backend, options);
  // Encoders: ModernBERT (models/modernbert.h); BERT, RoBERTa, XLM-RoBERTa, NomicBERT (models/bert.h).
  if (arch == "modernbert") return load_modernbert(*checkpoint, backend, options);
  if (checkpoint->config().encoder) return load_bert(*checkpoint, backend, options);
  return unsupported(path + ": architecture '" + arch + "' has no implementation; supported: llama, qwen2, qwen3, "
                     "qwen3_moe, qwen2_moe, mixtral, phi3, gemma2, gemma3_text, gemma3n_text, gemma4_text, gpt_oss, glm4_moe, smollm3, granite, "
                     "olmo2, olmo3, exaone4, glm4, seed_oss, ernie4_5, ernie4_5_moe, hunyuan_v1_dense, olmoe, apertus, "
                     "deepseek_v2, deepseek_v3, mistral4, glm4_moe_lite, deepseek_v32, glm_moe_dsa, youtu, minicpm3, longcat_flash, "
                     "the encoders bert, roberta, nomic_bert, modernbert, and mamba, falcon_mamba, mamba2, granitemoehybrid, bamba, nemotron_h, jamba, "
                     "qwen3_next, qwen3_5_text, qwen3_5_moe_text, lfm2, lfm2_moe, falcon_h1, kimi_linear, minimax");
}

}  // namespace brigade
