#include "models/inspect.h"

#include <algorithm>
#include <cstdio>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "models/alias_configs.h"
#include "models/checkpoint.h"
#include "models/config_json.h"
#include "models/mapped_file.h"
#include "models/state_space.h"

namespace brigade {
namespace {

// A checkpoint directory whose config.json brigade reads as another architecture's
// (models/alias_configs.h; GraniteSWA as Granite, by model_type): " (config.json: <its class>,
// model_type <its type>)", to stand beside the architecture it runs as; else empty.
std::string read_as_note(const ModelInfo& m) {
  if (m.format != "safetensors" || m.config.multimodal_text) return {};
  auto text = read_text_file((std::filesystem::path(m.path) / "config.json").string());
  if (!text) return {};
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) return {};
  const std::string cls = config_architecture(j), type = config_model_type(j);
  nlohmann::json aliased = j;
  if (!apply_alias_config(aliased).is_ok()) return {};
  const bool rewritten = config_architecture(aliased) != cls || config_model_type(aliased) != type;
  if (!rewritten && type != "granite_swa" && type != "granitemoe_swa") return {};
  std::string note = " (config.json: ";
  if (!cls.empty()) note += cls + (type.empty() ? "" : ", ");
  if (!type.empty()) note += "model_type " + type;
  return note + ")";
}

// DeepSeek's routing rule in one line: scoring, bias, groups, scaling and shared experts.
std::string deepseek_routing(const ModelConfig& c) {
  char scale[32];
  std::snprintf(scale, sizeof(scale), "%g", static_cast<double>(c.routed_scaling_factor));
  std::string r = c.moe_scoring == MoeScoring::sigmoid ? "sigmoid" : "softmax";
  if (c.moe_score_bias)
    r += c.moe_select_on_logits ? ", chosen by logits + e_score_correction_bias" : " + e_score_correction_bias (selection only)";
  if (c.moe_group_score != MoeGroupScore::none)
    r += std::string(", groups ") + std::to_string(c.topk_group) + " of " + std::to_string(c.n_group) + " by " +
         (c.moe_group_score == MoeGroupScore::max ? "max" : "top-2 sum");
  r += std::string(", routed_scaling_factor ") + scale + ", shared experts " + std::to_string(c.n_shared_experts);
  return r;
}

// The parameters a stored tensor of `numel` elements holds: fp8 and int4 scales, zero points,
// g_idx and shapes are not parameters of the model; an int4 layer's packed int32s hold 8 each.
int64_t quant_params(const QuantConfig& q, const std::string& name, const RawTensor& t) {
  const int64_t numel = t.numel();
  if (!q.quantized()) return numel;
  if (q.ternary())  // packed ternary linears hold 4 weights a byte; their weight_scale is no parameter
    return name.ends_with(".weight_scale") ? 0 : q.ternary_weight(name) && t.dtype == DType::u8 ? 4 * numel : numel;
  if (q.mxfp4()) return name.ends_with("_blocks") ? 2 * numel : name.ends_with("_scales") ? 0 : numel;
  if (name.ends_with("_scale_inv") || name.ends_with("_scale")) return 0;
  if (!q.int4()) return numel;
  for (const char* aux : {".qzeros", ".scales", ".g_idx", ".weight_zero_point", ".weight_shape", ".weight_g_idx"})
    if (name.ends_with(aux)) return 0;
  return name.ends_with(".qweight") || name.ends_with(".weight_packed") ? 8 * numel : numel;
}

}  // namespace

Expected<ModelInfo> inspect_model(const std::string& path) {
  BRIGADE_ASSIGN_OR_RETURN(auto ck, Checkpoint::open(path));
  ModelInfo info;
  info.path = path;
  info.format = ck->format();
  info.config = ck->config();
  const QuantConfig& q = ck->config().quant;
  for (const auto& [name, t] : ck->tensors()) {
    ++info.n_tensors;
    info.n_params += quant_params(q, name, t);
    info.n_bytes += static_cast<int64_t>(t.bytes.size());
    ++info.n_tensors_by_dtype[t.type_name()];
    info.n_bytes_by_dtype[t.type_name()] += static_cast<int64_t>(t.bytes.size());
  }
  // The state-space models load a stored lm_head even where the config says tied (models/state_space.h).
  if (!info.config.ssm_layers.empty() && info.config.tie_embeddings && ck->tensors().count("lm_head.weight") > 0)
    info.config.tie_embeddings = false;
  return info;
}

std::string format_model_info(const ModelInfo& m) {
  auto human = [](double v, const char* unit) {
    const char* prefixes[] = {"", "K", "M", "G", "T"};
    int i = 0;
    while (v >= 1000.0 && i < 4) { v /= 1000.0; ++i; }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.2f %s%s", v, prefixes[i], unit);
    return std::string(buf);
  };
  const ModelConfig& c = m.config;
  std::string s;
  s += "path:          " + m.path + "\n";
  s += "format:        " + m.format + "\n";
  const char* whole = c.arch == "qwen3_5_text"       ? "Qwen3_5ForConditionalGeneration"
                      : c.arch == "qwen3_5_moe_text" ? "Qwen3_5MoeForConditionalGeneration"
                      : c.vision.kind == VisionKind::qwen2_5_vl ? "Qwen2_5_VLForConditionalGeneration"
                      : c.vision.kind == VisionKind::qwen2_vl ? "Qwen2VLForConditionalGeneration"
                      : c.vision.kind == VisionKind::qwen3_vl ? "Qwen3VLForConditionalGeneration"
                      : c.vision.kind == VisionKind::llava && c.vision.anyres.onevision() ? "LlavaOnevisionForConditionalGeneration"
                      : c.vision.kind == VisionKind::llava && c.vision.anyres.on() ? "LlavaNextForConditionalGeneration"
                      : c.vision.kind == VisionKind::llava ? "LlavaForConditionalGeneration"
                      : c.vision.kind == VisionKind::internvl ? "InternVLForConditionalGeneration"
                      : c.vision.kind == VisionKind::idefics3 ? "Idefics3ForConditionalGeneration or SmolVLMForConditionalGeneration"
                      : c.vision.kind == VisionKind::aya_vision ? "AyaVisionForConditionalGeneration"
                      : c.vision.kind == VisionKind::paligemma ? "PaliGemmaForConditionalGeneration"
                      : c.vision.kind == VisionKind::glm4v && c.arch == "glm4_moe" ? "Glm4vMoeForConditionalGeneration"
                      : c.vision.kind == VisionKind::glm4v ? "Glm4vForConditionalGeneration"
                      : c.arch == "llama" || c.arch == "ministral3" || c.arch == "mistral4" ? "Mistral3ForConditionalGeneration"
                      : c.arch == "llama4_text"               ? "Llama4ForConditionalGeneration"
                      : c.arch == "gemma3n_text"              ? "Gemma3nForConditionalGeneration"
                      : c.arch == "gemma4_text"               ? "Gemma4ForConditionalGeneration"
                                                              : "Gemma3ForConditionalGeneration";
  s += "architecture:  " + c.arch + (c.multimodal_text ? std::string(" (the language model of ") + whole + ")" : "") +
       read_as_note(m) + "\n";
  if (c.vision.present() && c.vision.kind == VisionKind::pixtral) {
    const VisionConfig& v = c.vision;
    s += "vision:        Pixtral " + std::to_string(v.n_layers) + " layers, hidden " + std::to_string(v.hidden_size) +
         ", images of any size in " + std::to_string(v.patch_size) + "-pixel patches, a token per " +
         std::to_string(v.merge) + "x" + std::to_string(v.merge) + " patches, each row of tokens then [IMG_BREAK] (" +
         std::to_string(v.image_break_token) + "), the last [IMG_END] (" + std::to_string(v.eoi_token) +
         ") (image token " + std::to_string(v.image_token) + "; 1D positions; the CPU backend runs it at tp 1)\n";
  } else if (c.vision.present() && c.vision.kind == VisionKind::internvl) {
    const VisionConfig& v = c.vision;
    s += "vision:        InternViT " + std::to_string(v.n_layers) + " layers (" +
         std::to_string(v.feature_layers.front()) + " run), hidden " + std::to_string(v.hidden_size) +
         (v.rms_norm ? ", RMSNorm" : ", LayerNorm") + (v.qk_norm ? ", qk norm" : "") + ", tiles of " +
         std::to_string(v.image_size) + " pixels in " + std::to_string(v.patch_size) + "-pixel patches, " +
         std::to_string(v.image_tokens(v.patches_per_side(), v.patches_per_side())) +
         " tokens a tile (pixel shuffle " + std::to_string(v.merge) + "x" + std::to_string(v.merge) + ") between <img> and </img> (image token " +
         std::to_string(v.image_token) + "; 1D positions; the CPU backend runs it at tp 1)\n";
  } else if (c.vision.present() && c.vision.kind == VisionKind::idefics3) {
    const VisionConfig& v = c.vision;
    s += "vision:        SigLIP-style " + std::to_string(v.n_layers) + " layers, hidden " + std::to_string(v.hidden_size) +
         ", tiles of " + std::to_string(v.image_size) + " pixels in " + std::to_string(v.patch_size) + "-pixel patches, " +
         std::to_string(v.image_tokens(v.patches_per_side(), v.patches_per_side())) + " tokens a tile (pixel shuffle " +
         std::to_string(v.merge) + "x" + std::to_string(v.merge) +
         "); an image is its tiles, each after <fake_token_around_image> and its <row_R_col_C>, then the global tile "
         "(image token " + std::to_string(v.image_token) + "; 1D positions; the CPU backend runs it at tp 1)\n";
  } else if (c.vision.present() && c.vision.kind == VisionKind::aya_vision) {
    const VisionConfig& v = c.vision;
    s += "vision:        SigLIP " + std::to_string(v.n_layers) + " layers (" + std::to_string(v.feature_layers.front()) +
         " run), hidden " + std::to_string(v.hidden_size) + ", GotOcr2's tiles of " + std::to_string(v.image_size) +
         " pixels in " + std::to_string(v.patch_size) + "-pixel patches, " +
         std::to_string(v.image_tokens(v.patches_per_side(), v.patches_per_side())) + " tokens a tile (pixel shuffle " +
         std::to_string(v.merge) + "x" + std::to_string(v.merge) + ", SwiGLU projector of " +
         std::to_string(v.merger_intermediate) + "); an image is <|START_OF_IMG|>, TILE_k / TILE_GLOBAL before each "
         "tile's run, <|END_OF_IMG|> (image token " + std::to_string(v.image_token) +
         "; 1D positions; the CPU backend runs it at tp 1)\n";
  } else if (c.vision.present() && c.vision.kind == VisionKind::gemma4) {
    const VisionConfig& v = c.vision;
    s += "vision:        Gemma 4 " + std::to_string(v.n_layers) + " layers, hidden " + std::to_string(v.hidden_size) +
         ", images of any size in " + std::to_string(v.patch_size) + "-pixel patches, a token per " +
         std::to_string(v.merge) + "x" + std::to_string(v.merge) + " patches between <|image> (" +
         std::to_string(v.boi_token) + ") and <image|> (" + std::to_string(v.eoi_token) + ") (image token " +
         std::to_string(v.image_token) + "; 1D positions; " +
         (v.bidirectional ? "the sliding layers see the whole image" : "causal") +
         "; the CPU backend runs it at tp 1)\n";
  } else if (c.vision.present() && c.vision.kind == VisionKind::llava) {
    const VisionConfig& v = c.vision;
    std::string layers;
    for (int l : v.feature_layers) layers += (layers.empty() ? "" : ",") + std::to_string(l);
    s += std::string("vision:        ") + (v.class_token ? "CLIP " : "SigLIP ") + std::to_string(v.n_layers) +
         " layers, hidden " + std::to_string(v.hidden_size) + ", " + std::to_string(v.image_size) + "-pixel images in " +
         std::to_string(v.patch_size) + "-pixel patches, hidden_states[" + layers + "], ";
    if (v.anyres.on()) {
      std::string pins;
      for (const auto& [h, w] : v.anyres.pinpoints) pins += (pins.empty() ? "" : " ") + std::to_string(h) + "x" + std::to_string(w);
      s += "images of any size as a base tile and the tiles of the best of " + pins + " (height x width), up to " +
           std::to_string(anyres_max_tokens(v.anyres)) + " tokens per image with image_newline";
      if (v.anyres.onevision())
        s += ", resized to about " + std::to_string(v.anyres.max_area) + " tiles' features (anyres_max_" +
             std::to_string(v.anyres.max_area) + "); " + std::to_string(anyres_tokens(v.anyres, 0, 0)) +
             " tokens for each image of a prompt with several";
    } else {
      s += std::to_string(v.image_tokens(v.patches_per_side(), v.patches_per_side())) + " tokens per image";
    }
    s += " (image token " + std::to_string(v.image_token) + "; the CPU backend runs it at tp 1)\n";
  } else if (!c.vision_off.empty()) {
    s += "vision:        off (text only): " + c.vision_off + "\n";
  } else if (c.vision.present() && c.vision.dynamic()) {
    const VisionConfig& v = c.vision;
    s += "vision:        " + std::string(whole).substr(0, std::string(whole).find("For")) + " ViT " +
         std::to_string(v.n_layers) + " layers, hidden " + std::to_string(v.hidden_size) + ", images of any size in " +
         std::to_string(v.patch_size) + "-pixel patches, a token per " + std::to_string(v.merge) + "x" +
         std::to_string(v.merge) + " patches (image token " + std::to_string(v.image_token) +
         "; M-RoPE sections " + std::to_string(c.mrope_section.size() == 3 ? c.mrope_section[0] : 0) + "/" +
         std::to_string(c.mrope_section.size() == 3 ? c.mrope_section[1] : 0) + "/" +
         std::to_string(c.mrope_section.size() == 3 ? c.mrope_section[2] : 0) +
         (c.mrope_interleaved ? " interleaved" : "") +
         (v.deepstack_layers.empty() ? std::string()
                                     : "; DeepStack features into the first " + std::to_string(v.deepstack_layers.size()) +
                                           " layers") +
         "; the CPU backend runs it at tp 1)\n";
  } else if (c.vision.present()) {
    const VisionConfig& v = c.vision;
    s += "vision:        SigLIP " + std::to_string(v.n_layers) + " layers, hidden " + std::to_string(v.hidden_size) +
         ", " + std::to_string(v.image_size) + "x" + std::to_string(v.image_size) + " images in " +
         std::to_string(v.patch_size) + "-pixel patches, " + std::to_string(v.tokens_per_image) +
         " tokens per image (image token " + std::to_string(v.image_token) + "; the CPU backend runs it at tp 1)\n";
  }
  if (c.prefix_lm)
    s += "attention:     the prompt attends to all of itself, the generated tokens causally (PaliGemma's prefix; "
         "the CPU backend)\n";
  s += "layers:        " + std::to_string(c.n_layers) + "\n";
  s += "hidden:        " + std::to_string(c.hidden_size) + " (intermediate " + std::to_string(c.intermediate_size) + ")\n";
  if (c.n_attention_layers() > 0)
    s += "heads:         " + std::to_string(c.n_heads) + " q, " + std::to_string(c.n_kv_heads) + " kv, head_dim " +
         std::to_string(c.head_dim) + "\n";
  s += "vocab:         " + std::to_string(c.vocab_size) + "\n";
  s += "max position:  " + std::to_string(c.max_position) + "\n";
  if (const auto& g = c.gemma3n; g.altup_inputs > 0) {  // models/gemma3n.h
    const auto sparse = std::count_if(g.sparsity.begin(), g.sparsity.end(), [](float x) { return x > 0.0f; });
    s += "gemma3n:       AltUp " + std::to_string(g.altup_inputs) + " streams (active " + std::to_string(g.altup_active) +
         "), LAuReL rank " + std::to_string(g.laurel_rank) + ", per-layer inputs of " + std::to_string(g.per_layer_dim) +
         " from a table of " + std::to_string(g.per_layer_vocab) + " rows (read from the file per token), K/V in " +
         std::to_string(g.n_kv_layers()) + " of " + std::to_string(c.n_layers) + " layers (the last " +
         std::to_string(c.n_layers - g.n_kv_layers()) + " reuse them), activation sparsity in " + std::to_string(sparse) +
         " layers\n";
  }
  if (const auto& g = c.gemma4; g.full_head_dim > 0) {  // models/gemma4.h
    s += "gemma4:        full layers " + std::to_string(c.n_heads) + " q, " + std::to_string(g.full_kv_heads) +
         " kv, head_dim " + std::to_string(g.full_head_dim) + (g.k_eq_v ? " (K = V)" : "") + ", RoPE on " +
         std::to_string(static_cast<int>(g.full_rope_partial * 100.0f + 0.5f)) + "% of their pairs; K/V in " +
         std::to_string(g.n_kv_layers()) + " of " + std::to_string(c.n_layers) + " layers" +
         (g.per_layer_dim > 0 ? ", per-layer inputs of " + std::to_string(g.per_layer_dim) : std::string()) +
         (g.moe ? ", " + std::to_string(c.n_experts) + " experts (top " + std::to_string(c.n_experts_per_tok) +
                      ") beside the MLP"
                : std::string()) +
         "\n";
  }
  auto num = [](float v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(v));
    return std::string(buf);
  };
  if (c.arch == "modernbert") {  // models/modernbert.h
    const int n_local = static_cast<int>(std::count(c.sliding_layers.begin(), c.sliding_layers.end(), true));
    s += "encoder:       every token sees the prompt (run whole, uncached); pre-norm LayerNorm (eps " + num(c.rms_eps) +
         (c.norm_bias ? ", biases" : ", no biases") + "), gated gelu MLP, RoPE; " +
         std::to_string(c.n_layers - n_local) + " global layers (theta " + num(c.rope_theta) + "), " +
         std::to_string(n_local) + " local (+-" + std::to_string(c.sliding_window) + " tokens, theta " +
         num(c.rope_local_theta) + "), no token types\n";
  } else if (c.encoder) {  // models/bert.h: no RoPE, no decoder, no lm_head
    s += "encoder:       every token sees the whole prompt (run whole, uncached); post-norm LayerNorm (eps " +
         num(c.rms_eps) + "), " + (c.mlp_activation == MlpActivation::gelu ? "gelu" : "gelu_tanh") +
         " MLP, learned positions" +
         (c.position_offset > 0 ? " from " + std::to_string(c.position_offset) + " (padding ids skipped)" : "") + ", " +
         (c.type_vocab_size == 0 ? std::string("no token types")
                                 : std::to_string(c.type_vocab_size) + " token type" + (c.type_vocab_size == 1 ? "" : "s")) +
         "\n";
  }
  if (c.recurrent() && c.ssm.mamba1()) {  // Mamba1: a [N] state per channel
    const SsmLayout& l = c.ssm.layout;
    s += "ssm:           Mamba1 mixers in " +
         std::to_string(std::count(c.ssm_layers.begin(), c.ssm_layers.end(), true)) + " of " +
         std::to_string(c.n_layers) + " layers: " + std::to_string(l.d_inner()) + " channels, state " +
         std::to_string(l.state_size) + ", conv of " + std::to_string(l.conv_kernel) + " taps" +
         (c.ssm.conv_bias ? " with bias" : "") + ", time-step rank " + std::to_string(c.ssm.dt_rank) +
         (c.ssm.proj_bias ? ", in/out_proj biases" : "") +
         (c.ssm.bcdt_norm_eps > 0.0f ? ", dt/B/C RMS-normed (eps " + num(c.ssm.bcdt_norm_eps) + ")" : "") + "; a " +
         human(static_cast<double>(recurrent_state_bytes(c)), "B") + " state per sequence (the prefix cache keeps snapshots)\n";
  } else if (c.recurrent() && c.ssm.short_conv) {  // LFM2: the conv's last K - 1 products per channel
    const SsmLayout& l = c.ssm.layout;
    s += "ssm:           short convolutions in " +
         std::to_string(std::count(c.ssm_layers.begin(), c.ssm_layers.end(), true)) + " of " +
         std::to_string(c.n_layers) + " layers: " + std::to_string(l.d_inner()) + " channels, C * conv(B * x) of " +
         std::to_string(l.conv_kernel) + " taps" + (c.ssm.conv_bias ? " with biases" : "") + "; a " +
         human(static_cast<double>(recurrent_state_bytes(c)), "B") +
         " state per sequence (the prefix cache keeps snapshots); attention with q/k norms in the others\n";
  } else if (c.recurrent() && c.ssm.gated_delta) {  // Qwen3-Next / Qwen3.5: a [P, N] state per value head
    const SsmLayout& l = c.ssm.layout;
    s += "ssm:           Gated DeltaNet in " +
         std::to_string(std::count(c.ssm_layers.begin(), c.ssm_layers.end(), true)) + " of " +
         std::to_string(c.n_layers) + " layers: " + std::to_string(l.n_heads) + " value heads of " +
         std::to_string(l.head_dim) + ", " + std::to_string(l.n_groups) + " key heads of " +
         std::to_string(l.state_size) + (l.tiled_heads && l.n_groups < l.n_heads ? " (value heads tiled, as llama.cpp orders them)" : "") +
         ", conv of " + std::to_string(l.conv_kernel) + " taps; a " +
         human(static_cast<double>(recurrent_state_bytes(c)), "B") +
         " state per sequence (the prefix cache keeps snapshots); gated attention in the others\n";
  } else if (c.recurrent() && c.ssm.kda) {  // Kimi Linear: a [P, N] state per head, decays per key channel
    const SsmLayout& l = c.ssm.layout;
    s += "ssm:           KDA in " + std::to_string(std::count(c.ssm_layers.begin(), c.ssm_layers.end(), true)) + " of " +
         std::to_string(c.n_layers) + " layers: " + std::to_string(l.n_heads) + " heads of " +
         std::to_string(l.head_dim) + ", a decay per key channel, conv of " + std::to_string(l.conv_kernel) + " taps; a " +
         human(static_cast<double>(recurrent_state_bytes(c)), "B") +
         " state per sequence (the prefix cache keeps snapshots); MLA without RoPE in the others\n";
  } else if (c.recurrent()) {  // models/state_space.h: a state per sequence instead of K/V pages
    const SsmLayout& l = c.ssm.layout;
    const int n_ssm = static_cast<int>(std::count(c.ssm_layers.begin(), c.ssm_layers.end(), true));
    const int64_t state = recurrent_state_bytes(c);
    s += "ssm:           Mamba2 mixers in " + std::to_string(n_ssm) + " of " + std::to_string(c.n_layers) + " layers: " +
         std::to_string(l.n_heads) + " heads of " + std::to_string(l.head_dim) + ", " + std::to_string(l.n_groups) +
         " group" + (l.n_groups == 1 ? "" : "s") + ", state " + std::to_string(l.state_size) + ", conv of " +
         std::to_string(l.conv_kernel) + " taps" + (c.ssm.conv_bias ? " with bias" : "") +
         (c.ssm.proj_bias ? ", in/out_proj biases" : "") +
         (c.ssm.dt_max > 0.0f || c.ssm.dt_min > 0.0f ? ", dt in [" + num(c.ssm.dt_min) + ", " + num(c.ssm.dt_max) + "]" : "") +
         "; a " + human(static_cast<double>(state), "B") + " state per sequence (the prefix cache keeps snapshots)" +
         (c.parallel_attention ? "; attention beside the mixer in every layer, their outputs summed" : "") + "\n";
  }
  if (c.parallel_attention) {  // Falcon-H1's muP multipliers, folded into the weights at load
    const ModelConfig::MupMultipliers& mu = c.mup;
    s += "muP:           embeddings x" + num(c.embedding_multiplier) + ", head x" + num(1.0f / c.logits_scaling) +
         ", mixer in x" + num(mu.ssm_in) + " (z/x/B/C/dt x" + num(mu.ssm_rows[0]) + "/" + num(mu.ssm_rows[1]) + "/" +
         num(mu.ssm_rows[2]) + "/" + num(mu.ssm_rows[3]) + "/" + num(mu.ssm_rows[4]) + "), out x" + num(mu.ssm_out) +
         "; attention in x" + num(mu.attn_in) + ", keys x" + num(mu.key) + ", out x" + num(mu.attn_out) + "; MLP gate x" +
         num(mu.mlp_gate) + ", down x" + num(mu.mlp_down) + " (folded into the weights)\n";
  }
  if (!c.mlp_layers.empty()) {  // Nemotron-H: a block of one kind per layer
    std::string pattern;
    for (int l = 0; l < c.n_layers; ++l)
      pattern += c.ssm_layers[static_cast<size_t>(l)]   ? 'M'
                 : c.is_moe_layer(l)                    ? 'E'
                 : c.mlp_layers[static_cast<size_t>(l)] ? '-'
                                                        : '*';
    // The legend of the kinds present.
    std::string legend;
    const auto add = [&](char kind, const std::string& what) {
      if (pattern.find(kind) != std::string::npos) legend += (legend.empty() ? "" : ", ") + std::string(1, kind) + " " + what;
    };
    add('M', "Mamba2 mixer");
    add('*', "attention");
    add('-', "relu2 MLP of " + std::to_string(c.intermediate_size) + (c.mlp_bias ? " with biases" : ""));
    add('E', std::to_string(c.n_experts_per_tok) + " of " + std::to_string(c.n_experts) + " relu2 experts of " +
                 std::to_string(c.moe_intermediate_size) + " (sigmoid routing, " + std::to_string(c.n_group) +
                 " groups) and a shared one of " + std::to_string(c.shared_width()));
    s += "blocks:        " + pattern + " (" + legend + ")\n";
  }
  if (c.nope && c.n_attention_layers() > 0) s += "rope:          none (attention layers without positions)\n";
  if (c.arch == "granitemoehybrid") {  // Granite 4.0-H's scalings
    s += "granite:       embeddings x " + num(c.embedding_multiplier) + ", sublayer outputs x " +
         num(c.residual_multiplier) + ", logits / " + num(c.logits_scaling) + "; a shared SwiGLU of " +
         std::to_string(c.shared_width()) + " in every layer\n";
  } else if (c.learned_positions) {  // GPT-2's, GPTBigCode's, OPT's
    s += "positions:     learned absolute (model.embed_positions), " + std::to_string(c.max_position) + ", no RoPE\n";
  } else if (!c.alibi_slopes.empty()) {  // BLOOM's, MPT's
    std::string slopes;
    for (size_t h = 0; h < c.alibi_slopes.size() && h < 4; ++h) slopes += (h ? ", " : "") + num(c.alibi_slopes[h]);
    s += "positions:     ALiBi, slopes " + slopes + (c.alibi_slopes.size() > 4 ? ", ..." : "") + "; no RoPE\n";
  } else if (!c.encoder && !c.nope && c.n_attention_layers() > 0) {
  if (c.arch == "granite" || c.arch == "granitemoe" || c.arch == "granitemoeshared" || c.arch == "hyperclovax") {
    // Granite 3's scalings in the Llama decoder (HyperCLOVA X's logits multiplied: logit_scale's line)
    s += "granite:       embeddings x " + num(c.embedding_multiplier) + ", sublayer outputs x " + num(c.residual_multiplier);
    if (c.logits_scaling > 0.0f) s += ", logits / " + num(c.logits_scaling);
    s += "\n";
  }
  char theta[32];
  std::snprintf(theta, sizeof(theta), "%g", static_cast<double>(c.rope_theta));
  s += std::string("rope:          theta ") + theta +
       (c.rope_style == RopeStyle::neox ? ", neox" : ", interleaved") + (c.rope_reversed ? ", reversed (nanochat)" : "");
  if (c.rope_scaling.type != RopeScalingType::none) {
    char factor[32];
    std::snprintf(factor, sizeof(factor), "%g", static_cast<double>(c.rope_scaling.factor));
    s += std::string(", scaling ") + rope_scaling_name(c.rope_scaling.type) + " x" + factor;
    if (c.rope_scaling.type == RopeScalingType::longrope)
      s += std::string(c.rope_scaling.longrope_long ? " (long" : " (short") + " factors, original context " +
           std::to_string(c.rope_scaling.original_max_position) + ")";
  }
  if (c.rope_dims() < c.head_dim) s += ", rotary dims " + std::to_string(c.rope_dims()) + " of " + std::to_string(c.head_dim);
  if (!c.rope_scaling.freq_factors.empty()) s += ", per-frequency factors (rope_freqs)";
  if (c.rope_local_theta > 0.0f) s += "; sliding layers theta " + num(c.rope_local_theta) + " unscaled";
  if (std::count(c.nope_layers.begin(), c.nope_layers.end(), true) > 0) {  // SmolLM3's
    std::string nope;
    for (int l = 0; l < c.n_layers; ++l)
      if (c.nope_layers[static_cast<size_t>(l)]) nope += (nope.empty() ? "" : ",") + std::to_string(l);
    s += "; no RoPE in layers " + nope;
  }
  s += "\n";
  }
  std::string attn;
  if (c.qkv_bias) attn += ", qkv bias";
  if (c.o_bias) attn += ", o bias";
  if (c.qk_norm)
    attn += std::string(c.qk_norm_whole ? ", q/k norm over all heads" : c.layer_norms ? ", q/k LayerNorm per head (its own weights)" : ", q/k norm") +
            (c.qk_norm_weightless ? " without weights on the RoPE layers" : "") + (c.qk_norm_after_rope ? " after RoPE" : "");
  if (c.clip_qkv > 0.0f) attn += ", q/k/v clamped to +-" + num(c.clip_qkv);
  if (c.attention_chunk > 0) {
    int n_chunked = 0;
    for (int l = 0; l < c.n_layers; ++l) n_chunked += c.layer_chunk(l) > 0 ? 1 : 0;
    attn += ", chunks of " + std::to_string(c.attention_chunk) + " on " + std::to_string(n_chunked) + " of " +
            std::to_string(c.n_layers) + " layers";
  }
  if (c.attn_temperature_floor > 0.0f)
    attn += std::string(", query temperature on ") + (c.attn_temperature_all_layers ? "every layer" : "the NoPE layers") +
            " (floor_scale " + num(c.attn_temperature_floor) + ", attn_scale " + num(c.attn_temperature_scale) +
            (c.attn_temperature_offset != 1.0f ? ", positions + " + num(c.attn_temperature_offset) : "") + ")";
  if (c.attn_sinks) attn += c.sinks_sliding_only ? ", a sink logit per head (sliding layers)" : ", a sink logit per head";
  if (c.n_kv_heads_full > 0)  // MiMo-V2-Flash (models/widened_attention.h)
    attn += ", full layers' " + std::to_string(c.n_kv_heads_full) + " KV heads repeated to " + std::to_string(c.n_kv_heads);
  if (c.v_head_width > 0) attn += ", v heads of " + std::to_string(c.v_head_width) + " zero-padded";
  if (c.attn_value_scale != 1.0f) attn += ", values x " + num(c.attn_value_scale);
  if (c.attn_gate) attn += ", output gate sigmoid(gate_proj x)";
  if (c.fused_weights) attn += ", q|k|v and gate|up stored fused";
  if (c.sliding_window > 0) {
    attn += ", sliding window " + std::to_string(c.sliding_window);
    int n_sliding = 0;
    for (int l = 0; l < c.n_layers; ++l) n_sliding += c.layer_window(l) > 0 ? 1 : 0;
    if (n_sliding < c.n_layers) attn += " on " + std::to_string(n_sliding) + " of " + std::to_string(c.n_layers) + " layers";
  }
  if (c.attn_softcap > 0.0f) attn += ", score softcap " + num(c.attn_softcap);
  if (!c.is_mla() && c.attn_scale > 0.0f) attn += ", softmax scale " + num(c.attn_scale);
  if (c.is_mla()) {
    char scale[32];
    std::snprintf(scale, sizeof(scale), "%g", static_cast<double>(c.attn_scale));
    attn += ", MLA: kv_lora_rank " + std::to_string(c.kv_lora_rank) + ", q_lora_rank " +
            (c.q_lora_rank > 0 ? std::to_string(c.q_lora_rank) : std::string("none (q_proj)")) + ", qk nope/rope " +
            std::to_string(c.qk_nope_head_dim) + "/" + std::to_string(c.qk_rope_head_dim) + ", v " +
            std::to_string(c.v_head_dim) + ", softmax scale " + scale + "; KV cache: one latent of " +
            std::to_string(c.kv_lora_rank + c.qk_rope_head_dim) + " per token and layer";
  }
  if (!attn.empty()) s += "attention:     " + attn.substr(2) + "\n";
  if (c.n_experts > 0) {
    std::string dense;
    for (int l = 0; l < c.n_layers; ++l) {
      if (c.is_moe_layer(l)) continue;
      dense += dense.empty() ? " (dense: " : ",";
      dense += std::to_string(l);
    }
    if (!dense.empty()) dense += ")";
    s += "experts:       " + std::to_string(c.n_experts) + " per sparse layer, top-" + std::to_string(c.n_experts_per_tok);
    s += c.norm_topk_prob ? " renormalised" : " not renormalised";
    s += ", expert intermediate " + std::to_string(c.moe_intermediate_size);
    if (c.moe_biases) s += ", router and expert biases";
    if (c.swiglu_limit > 0.0f)
      s += ", clamped SwiGLU (limit " + num(c.swiglu_limit) + ", alpha " + num(c.swiglu_alpha) + ")";
    if (c.shared_gate) s += ", a shared expert of " + std::to_string(c.shared_width()) + " gated by sigmoid(x · w)";
    if (c.moe_weight_on_input)
      s += ", sigmoid score on the expert's input, a shared expert of " + std::to_string(c.shared_width());
    else if (!c.shared_gate && c.shared_expert_intermediate_size > 0)  // Granite's and Hunyuan's shared MLP
      s += ", an ungated shared SwiGLU of " + std::to_string(c.shared_width());
    s += "\n";
    if (c.is_mla() || c.arch == "glm4_moe" || c.arch == "dots1" || c.arch == "mimo_v2_flash" || c.arch == "exaone_moe" ||
        c.arch == "kolibri1")
      s += "routing:       " + deepseek_routing(c) + "\n";
    if (c.arch == "minimax_m2" || c.arch == "flint")
      s += std::string("routing:       sigmoid") + (c.moe_score_bias ? " + e_score_correction_bias (selection only)" : "") +
           "\n";
    if (c.arch == "lfm2_moe" || c.arch == "afmoe")
      s += std::string("routing:       sigmoid") + (c.moe_score_bias ? " + expert_bias (selection only)" : "") +
           (c.arch == "afmoe" ? ", renormalised" : "") + ", routed_scaling_factor " + num(c.routed_scaling_factor) +
           (c.n_shared_experts > 0 ? ", shared experts " + std::to_string(c.n_shared_experts) : "") + "\n";
    s += "sparse layers: " + std::to_string(c.n_moe_layers()) + " of " + std::to_string(c.n_layers) + dense + "\n";
    if (c.n_mtp_layers > 0)
      s += "mtp modules:   " + std::to_string(c.n_mtp_layers) +
           " (num_nextn_predict_layers; speculative method mtp drafts with the first)\n";
  }
  if (c.quant.quantized()) {
    s += "quantization:  " + c.quant.describe() +
         (c.quant.int4() ? ", Q4_0 (symmetric) or Q4_1 on the CPU where groups of 32k with f16 scales hold them, else "
                           "dequantized at load"
         : c.quant.mxfp4() ? ", kept MXFP4 on the CPU (repacked into ggml's blocks), else dequantized at load"
                           : ", dequantized at load");
    for (size_t i = 0; i < c.quant.ignore.size(); ++i) s += (i ? ", " : "; unquantized: ") + c.quant.ignore[i];
    s += "\n";
  }
  if (!c.encoder &&
      (c.sandwich_norms || c.post_norms || (c.mlp_bias && c.mlp_layers.empty()) ||
       c.mlp_activation != MlpActivation::silu || c.embed_scale > 0.0f || c.final_softcap > 0.0f || c.layer_norms ||
       c.parallel_blocks || c.logit_scale > 0.0f || c.embed_norm)) {
    std::string g;
    if (c.norms_weightless && !c.layer_norms) g += ", RMSNorms without weight";
    if (c.embed_norm) g += c.layer_norms ? ", a LayerNorm of the embeddings before layer 0" : ", an RMSNorm of the embeddings before layer 0";
    if (c.layer_norms)
      g += std::string(c.norms_weightless ? ", LayerNorms without weight or bias"
                       : c.norm_bias        ? ", LayerNorms with biases"
                                            : ", LayerNorms without bias") +
           " (eps " + num(c.rms_eps) + ")";
    if (c.parallel_blocks) g += c.parallel_mlp_norm ? ", attention and MLP side by side, each on its own norm"
                                                    : ", attention and MLP side by side on one norm";
    if (c.logit_scale > 0.0f) g += ", logits x " + num(c.logit_scale);
    if (c.norm_offset != 0.0f) g += ", norms scale by " + num(c.norm_offset) + " + w";
    if (c.sandwich_norms) g += ", post-attention and post-MLP norms";
    if (c.post_norms) g += ", norms after the attention and the MLP only";
    if (c.mlp_bias && c.mlp_layers.empty()) g += ", MLP biases";
    if (c.embed_scale > 0.0f) g += ", embeddings x " + num(c.embed_scale);
    if (c.mlp_activation == MlpActivation::gelu_tanh) g += c.mlp_ungated ? ", ungated gelu_tanh MLP" : ", gelu_tanh MLP";
    if (c.mlp_activation == MlpActivation::xielu) g += ", ungated xIELU MLP (learned per layer)";
    if (c.mlp_activation == MlpActivation::relu2) g += ", ungated relu2 MLP";
    if (c.mlp_activation == MlpActivation::relu2_glu) g += ", gated relu2 MLP";
    if (c.sub_norms) g += ", norms before o_proj and down_proj";
    if (c.mlp_activation == MlpActivation::gelu) g += ", ungated gelu (erf) MLP";
    if (c.mlp_activation == MlpActivation::relu) g += ", ungated relu MLP";
    if (c.arch == "afmoe" && c.embedding_multiplier > 0.0f) g += ", embeddings x " + num(c.embedding_multiplier) + " (muP)";
    if (c.final_softcap > 0.0f) g += ", logit softcap " + num(c.final_softcap);
    if (c.lm_head_bias) g += ", lm_head bias";
    s += "decoder:       " + g.substr(2) + "\n";
  }
  if (!c.encoder) s += std::string("tied embed:    ") + (c.tie_embeddings ? "yes" : "no") + "\n";
  s += "parameters:    " + human(static_cast<double>(m.n_params), "") + " (" + std::to_string(m.n_params) + ")\n";
  s += "weight bytes:  " + human(static_cast<double>(m.n_bytes), "B") + "\n";
  s += "tensors:       " + std::to_string(m.n_tensors);
  for (const auto& [dt, n] : m.n_tensors_by_dtype) {
    s += ", " + std::to_string(n) + " " + dt;
    if (m.n_tensors_by_dtype.size() > 1) s += " (" + human(static_cast<double>(m.n_bytes_by_dtype.at(dt)), "B") + ")";
  }
  return s + "\n";
}


}  // namespace brigade
