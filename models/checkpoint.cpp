#include "models/checkpoint.h"

#include "models/fused_rows.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "models/classic_decoders_config.h"
#include "models/alias_configs.h"
#include "models/chatglm_config.h"
#include "models/dbrx_config.h"
#include "models/fused_rows.h"
#include "models/internlm_config.h"
#include "models/gemma_config.h"
#include "models/gpt_decoders_config.h"
#include "models/idefics3_config.h"
#include "models/internvl_config.h"
#include "models/qwen_vl_config.h"
#include "models/generation_config.h"
#include "models/gguf_checkpoint.h"
#include "models/llama2c.h"
#include "models/safetensors.h"
#include "models/torch_checkpoint.h"
#include "models/state_space_config.h"

namespace brigade {

namespace fs = std::filesystem;

namespace {

// The shard files a sharded checkpoint's index names ({"weight_map": {tensor: file}}), each once,
// in the order first named.
Expected<std::vector<std::string>> index_shards(const fs::path& index_path) {
  BRIGADE_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path.string()));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return corrupt(index_path.string() + ": not a JSON object with a \"weight_map\" object");
  std::vector<std::string> shards;
  std::set<std::string> seen;
  for (const auto& [name, shard] : j["weight_map"].items()) {
    if (!shard.is_string()) return corrupt(index_path.string() + ": weight_map['" + name + "'] is not a file name");
    const std::string s = shard.get<std::string>();
    if (s.find('/') != std::string::npos || s == "..")
      return corrupt(index_path.string() + ": shard name '" + s + "' must be a plain file name");
    if (seen.insert(s).second) shards.push_back(s);
  }
  if (shards.empty()) return corrupt(index_path.string() + ": weight_map is empty");
  return shards;
}

using Renames = std::span<const std::pair<const char*, const char*>>;

// The architectures whose checkpoints name tensors other than as the Llama decoder reads them, by
// plain substitution (renamed_tensors): nanochat's ungated MLP's fc1 / fc2 as up / down; Flint's
// and Kolibri-1's Hub names as transformers' conversion mapping renames them. Empty for the others.
Renames tensor_renames(const std::string& arch) {
  static constexpr std::pair<const char*, const char*> kNanochat[] = {{".mlp.fc1.", ".mlp.up_proj."},
                                                                      {".mlp.fc2.", ".mlp.down_proj."}};
  static constexpr std::pair<const char*, const char*> kFlint[] = {{".self_attn.softmax_offset", ".self_attn.sinks"}};
  static constexpr std::pair<const char*, const char*> kKolibri1[] = {
      {".moe.router.expert_bias", ".mlp.gate.e_score_correction_bias"},
      {".post_attn_norm.", ".post_self_attn_layernorm."},
      {".post_ffn_norm.", ".post_mlp_layernorm."}};
  if (arch == "nanochat") return kNanochat;
  if (arch == "flint") return kFlint;
  if (arch == "kolibri1") return kKolibri1;
  return {};
}

}  // namespace

Expected<std::unique_ptr<Checkpoint>> Checkpoint::open(const std::string& path) {
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  ck->path_ = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    BRIGADE_RETURN_IF_ERROR(ck->open_directory());
    return ck;
  }
  if (!fs::exists(path, ec)) return not_found("model path not found: " + path);
  if (path.ends_with(".safetensors"))
    return invalid_argument(path + ": pass the model directory (with config.json), not the .safetensors file");
  if (path.ends_with(".gguf")) {
    BRIGADE_ASSIGN_OR_RETURN(auto gguf, GgufFile::open(path));
    ck->format_ = "gguf";
    BRIGADE_RETURN_IF_ERROR(read_gguf_checkpoint(*gguf, ck->config_, ck->tensors_));
    ck->files_.push_back(gguf->file());
    return ck;
  }
  BRIGADE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  ck->format_ = "llama2.c";
  BRIGADE_RETURN_IF_ERROR(read_llama2c(file, ck->config_, ck->tensors_));
  ck->files_.push_back(std::move(file));
  return ck;
}

Status Checkpoint::open_directory() {
  const fs::path dir(path_);
  format_ = "safetensors";
  const fs::path config_path = dir / "config.json";
  BRIGADE_ASSIGN_OR_RETURN(std::string config_text, read_text_file(config_path.string()));
  auto cfg = parse_hf_config(config_text);
  if (!cfg) return Status(cfg.status().code(), config_path.string() + ": " + cfg.status().message());
  config_ = std::move(*cfg);
  // generation_config.json's EOS ids end a generation too (vLLM's update_from_generation_config).
  BRIGADE_RETURN_IF_ERROR(add_generation_eos(path_, config_.eos_ids));

  // Safetensors first, as transformers and vLLM prefer them; torch.save's pytorch_model.bin
  // (models/torch_checkpoint.h) where a repository has only those.
  std::vector<std::string> shard_names;
  std::error_code ec;
  if (fs::exists(dir / "model.safetensors.index.json", ec)) {
    BRIGADE_ASSIGN_OR_RETURN(shard_names, index_shards(dir / "model.safetensors.index.json"));
  } else if (fs::exists(dir / "model.safetensors", ec)) {
    shard_names.push_back("model.safetensors");
  } else if (fs::exists(dir / "pytorch_model.bin.index.json", ec)) {
    format_ = "pytorch";
    BRIGADE_ASSIGN_OR_RETURN(shard_names, index_shards(dir / "pytorch_model.bin.index.json"));
  } else if (fs::exists(dir / "pytorch_model.bin", ec)) {
    format_ = "pytorch";
    shard_names.push_back("pytorch_model.bin");
  } else {
    return not_found(path_ + ": no model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
                     "pytorch_model.bin.index.json in the directory");
  }
  for (const auto& s : shard_names) {
    BRIGADE_ASSIGN_OR_RETURN(auto file, MappedFile::open((dir / s).string()));
    if (format_ == "pytorch")
      BRIGADE_RETURN_IF_ERROR(read_torch_checkpoint(file, tensors_, derived_));
    else
      BRIGADE_RETURN_IF_ERROR(read_safetensors(file, tensors_));
    files_.push_back(std::move(file));
  }
  // ERNIE 4.5 MoE's selection bias is stored [1, E] (one group): read as the [E] it is.
  if (config_.arch == "ernie4_5_moe")
    for (auto& [name, t] : tensors_)
      if (name.ends_with(".mlp.moe_statics.e_score_correction_bias") && t.shape.size() == 2 && t.shape[0] == 1)
        t.shape = {t.shape[1]};
  // StarCoder2's and Phi's MLP / output names as the Llama decoder reads them.
  tensors_ = classic_decoder_tensors(config_.arch, std::move(tensors_));
  if (config_.arch == "dbrx") {  // the fused Wqkv and experts as views (models/dbrx_config.h)
    BRIGADE_ASSIGN_OR_RETURN(tensors_, dbrx_tensors(config_, std::move(tensors_)));
  }
  if (config_.arch == "glm") {  // ChatGLM's names and its query_key_value (models/chatglm_config.h)
    BRIGADE_ASSIGN_OR_RETURN(tensors_, chatglm_tensors(int64_t{config_.n_heads} * config_.head_dim,
                                                       int64_t{config_.n_kv_heads} * config_.head_dim, std::move(tensors_)));
  }
  if (config_.arch == "glm4_moe" && has_sarvam_layout(tensors_)) {  // Param2 MoE's names (models/alias_configs.h)
    BRIGADE_ASSIGN_OR_RETURN(tensors_, sarvam_layout_tensors(config_, std::move(tensors_)));
  }
  if (config_.arch == "glm4_moe") tensors_ = hy_v3_tensors(std::move(tensors_));  // Hy3's names, where they are
  if (config_.arch == "glm4_moe" && config_.attn_gate) {  // MiniCPM 5's q|gate per head (models/alias_configs.h)
    BRIGADE_ASSIGN_OR_RETURN(tensors_, split_q_gate_proj(config_, std::move(tensors_), derived_));
  }
  if (const Renames renames = tensor_renames(config_.arch); !renames.empty())
    tensors_ = renamed_tensors(std::move(tensors_), renames);
  // A.X K1's released checkpoints route without a selection bias (transformers leaves it zero).
  if (config_.arch == "axk1" && std::none_of(tensors_.begin(), tensors_.end(), [](const auto& kv) {
        return kv.first.ends_with(".e_score_correction_bias");
      }))
    config_.moe_score_bias = false;
  if (config_.arch == "internlm2") {  // InternLM2's names and its wqkv per KV group (models/internlm_config.h)
    BRIGADE_ASSIGN_OR_RETURN(tensors_, internlm2_tensors(config_, std::move(tensors_), derived_));
  }
  if (is_gpt_decoder(config_.arch)) {  // GPT-2's Conv1D and the fused q|k|v as the Llama decoder reads them
    BRIGADE_ASSIGN_OR_RETURN(tensors_, gpt_decoder_tensors(config_, std::move(tensors_), derived_));
  }
  // Qwen3.5's language model sits where Qwen-VL's does (model.language_model.); Mistral 3's where
  // Gemma 3's does, its Pixtral tower included (vision_tower.*, multi_modal_projector.*), and so
  // does LLaVA's (its CLIP / SigLIP tower's vision_tower.vision_model.* too), and Aya Vision's.
  const bool qwen_layout = (config_.vision.dynamic() && config_.vision.kind != VisionKind::pixtral &&
                           config_.vision.kind != VisionKind::llava && config_.vision.kind != VisionKind::gemma4 &&
                           config_.vision.kind != VisionKind::aya_vision) ||
                           is_gated_delta(config_.arch);
  if (config_.vision.kind == VisionKind::internvl)  // either InternVL layout (models/internvl_config.h)
    tensors_ = internvl_tensors(std::move(tensors_));
  else if (config_.vision.kind == VisionKind::idefics3)  // model.text_model.* and the tower (models/idefics3_config.h)
    tensors_ = idefics3_tensors(std::move(tensors_));
  else if (config_.multimodal_text)
    tensors_ = qwen_layout ? qwen_vl_tensors(std::move(tensors_)) : gemma3_tensors(std::move(tensors_));
  return Status::ok();
}

Expected<RawTensor> Checkpoint::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return not_found(path_ + ": tensor '" + name + "' is missing from the checkpoint");
  return it->second;
}

Expected<RawTensor> Checkpoint::tensor(const std::string& name, const std::vector<int64_t>& shape) const {
  BRIGADE_ASSIGN_OR_RETURN(RawTensor t, tensor(name));
  if (t.shape != shape) {
    RawTensor want;
    want.shape = shape;
    return corrupt(t.file + ": tensor '" + name + "' has shape " + t.shape_string() + " but the config needs " +
                   want.shape_string());
  }
  return t;
}

}  // namespace brigade
