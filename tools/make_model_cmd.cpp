// `brigade make-model`: writes a synthetic checkpoint in the exact Hugging Face layout.
#include <cstdio>

#include "models/make_model.h"
#include "tools/commands.h"

namespace brigade::tools {

void add_make_model_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("make-model", "Write a synthetic checkpoint (deterministic random weights)");
  auto spec = std::make_shared<SyntheticModelSpec>();
  auto out = std::make_shared<std::string>();
  auto dtype = std::make_shared<std::string>("bf16");
  cmd->add_option("--arch", spec->arch, "Architecture: llama, qwen2, qwen3, qwen3_moe, qwen2_moe, mixtral, phi3, gpt_oss, glm4_moe, deepseek_v2, deepseek_v3, mamba2, mamba, nemotron_h, qwen3_5")->capture_default_str();
  cmd->add_option("--hidden", spec->hidden_size, "Hidden size")->capture_default_str();
  cmd->add_option("--layers", spec->n_layers, "Layers")->capture_default_str();
  cmd->add_option("--heads", spec->n_heads, "Attention heads")->capture_default_str();
  cmd->add_option("--kv-heads", spec->n_kv_heads, "KV heads (GQA)")->capture_default_str();
  cmd->add_option("--head-dim", spec->head_dim, "Head dim (0 = hidden / heads)")->capture_default_str();
  cmd->add_option("--intermediate", spec->intermediate_size, "MLP intermediate size")->capture_default_str();
  cmd->add_option("--vocab", spec->vocab_size, "Vocabulary size")->capture_default_str();
  cmd->add_option("--experts", spec->n_experts, "MoE archs: (routed) experts per sparse layer")->capture_default_str();
  cmd->add_option("--experts-per-tok", spec->n_experts_per_tok, "MoE archs: experts each token is routed to (top-k)")
      ->capture_default_str();
  cmd->add_option("--moe-intermediate", spec->moe_intermediate_size, "qwen3_moe, qwen2_moe, glm4_moe, deepseek: each expert's MLP width")
      ->capture_default_str();
  cmd->add_flag("--no-norm-topk-prob{false},--norm-topk-prob", spec->norm_topk_prob,
                "qwen3_moe, qwen2_moe, glm4_moe, deepseek_v3: renormalise the top-k routing weights (norm_topk_prob)");
  cmd->add_option("--decoder-sparse-step", spec->decoder_sparse_step, "qwen3_moe, qwen2_moe: layer l is sparse when (l+1) % step == 0")
      ->capture_default_str();
  cmd->add_option("--mlp-only-layers", spec->mlp_only_layers, "qwen3_moe, qwen2_moe: layers that keep a dense MLP");
  cmd->add_option("--q-lora-rank", spec->q_lora_rank, "deepseek: q_lora_rank (0 = null: q_proj, as V2-Lite)")
      ->capture_default_str();
  cmd->add_option("--kv-lora-rank", spec->kv_lora_rank, "deepseek: kv_lora_rank (the cached latent)")->capture_default_str();
  cmd->add_option("--qk-nope-head-dim", spec->qk_nope_head_dim, "deepseek: qk_nope_head_dim")->capture_default_str();
  cmd->add_option("--qk-rope-head-dim", spec->qk_rope_head_dim, "deepseek: qk_rope_head_dim")->capture_default_str();
  cmd->add_option("--v-head-dim", spec->v_head_dim, "deepseek: v_head_dim")->capture_default_str();
  cmd->add_option("--shared-experts", spec->n_shared_experts, "deepseek, glm4_moe: n_shared_experts; qwen2_moe: its shared expert is this many experts wide")->capture_default_str();
  cmd->add_option("--first-k-dense", spec->first_k_dense_replace, "deepseek, glm4_moe: first_k_dense_replace (dense layers)")
      ->capture_default_str();
  cmd->add_option("--n-group", spec->n_group, "deepseek, glm4_moe: expert groups (n_group)")->capture_default_str();
  cmd->add_option("--topk-group", spec->topk_group, "deepseek, glm4_moe: groups a token may use (topk_group)")->capture_default_str();
  cmd->add_option("--routed-scaling-factor", spec->routed_scaling_factor, "deepseek, glm4_moe: routed_scaling_factor")
      ->capture_default_str();
  cmd->add_option("--mtp-layers", spec->n_mtp_layers,
                  "deepseek_v3, glm4_moe: MTP modules (num_nextn_predict_layers), written after the layers as "
                  "model.layers.{layers + j} in DeepSeek-V3's / GLM-4.5's layout")
      ->capture_default_str();
  cmd->add_option("--ssm-groups", spec->ssm_groups,
                  "mamba2, nemotron_h: n_groups (B and C shared by heads / groups heads); qwen3_5: linear_num_key_heads")
      ->capture_default_str();
  cmd->add_option("--ssm-state", spec->ssm_state, "mamba2, mamba, nemotron_h: state_size; qwen3_5: linear_key_head_dim")
      ->capture_default_str();
  cmd->add_option("--conv-kernel", spec->conv_kernel, "mamba2, mamba, nemotron_h, qwen3_5: conv_kernel (taps of the causal conv)")
      ->capture_default_str();
  cmd->add_option("--ssm-heads", spec->ssm_heads, "nemotron_h: mamba_num_heads; qwen3_5: linear_num_value_heads (0 = --heads)")
      ->capture_default_str();
  cmd->add_option("--ssm-head-dim", spec->ssm_head_dim, "nemotron_h: mamba_head_dim; qwen3_5: linear_value_head_dim")
      ->capture_default_str();
  cmd->add_option("--layer-pattern", spec->layer_pattern,
                  "nemotron_h: one block per layer, M mixer, * attention, - relu2 MLP (default: M-M-M*- repeated; "
                  "its length sets the layers)");
  cmd->add_option("--max-position", spec->max_position, "Context length")->capture_default_str();
  cmd->add_option("--dtype", *dtype, "f32, bf16 or f16 (fp8 checkpoints: of the unquantized tensors)")->capture_default_str();
  cmd->add_option("--seed", spec->seed, "Weight seed")->capture_default_str();
  cmd->add_option("--fp8-block", spec->fp8_block,
                  "FP8 checkpoint as DeepSeek-V3 / Qwen3-FP8 ship them: linear weights F8_E4M3 with a "
                  "weight_scale_inv per NxN block (quant_method fp8); 0 = not quantized")
      ->capture_default_str();
  cmd->add_option("--fp8-compressed", spec->fp8_compressed,
                  "FP8 checkpoint in compressed-tensors' layout (RedHat *-FP8): weight_scale per channel or tensor")
      ->check(CLI::IsMember({"channel", "tensor"}));
  cmd->add_flag("--untied{false},--tied", spec->tie_embeddings, "Separate lm_head (default: tied to the embedding)");
  cmd->add_option("--out", *out, "Output directory")->required();
  cmd->callback([=, &run] {
    run = [=] {
      auto t = parse_dtype(*dtype);
      if (!t) return fail(invalid_argument("--dtype '" + *dtype + "' is not one of: f32, bf16, f16"));
      SyntheticModelSpec s = *spec;
      s.dtype = *t;
      Status st = write_synthetic_model(s, *out);
      if (!st.is_ok()) return fail(st);
      std::printf("wrote %s\n", out->c_str());
      return 0;
    };
  });
}

}  // namespace brigade::tools
