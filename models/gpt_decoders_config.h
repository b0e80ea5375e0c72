// Internal to models/: the classic GPT decoders, read into ModelConfig by parse_hf_config
// (models/model_config.cpp, through read_classic_decoder) and run by the Llama decoder
// (models/llama.h):
//   gpt_neox (GPTNeoXForCausalLM: Pythia, GPT-NeoX-20B; GPTNeoXConfig): biased LayerNorms
//     (layer_norm_eps), q/k/v and dense biases with attention_bias (true by default), RoPE in
//     NeoX halves over rotary_pct of each head (rope_parameters' partial_rotary_factor in
//     transformers 5; 0.25 by default) with base rotary_emb_base, an ungated biased MLP
//     dense_h_to_4h -> hidden_act -> dense_4h_to_h, use_parallel_residual (true by default:
//     x + attn(ln1(x)) + mlp(ln2(x)), parallel_blocks with parallel_mlp_norm), embed_out untied;
//   gptj (GPTJForCausalLM: GPT-J 6B; GPTJConfig): one biased LayerNorm before the attention and the
//     MLP side by side (parallel_blocks), q/k/v/out without biases, GPT-J's RoPE (adjacent pairs:
//     rotate_every_two, RopeStyle::interleaved) over rotary_dim of each head at base 10000,
//     fc_in -> activation_function -> fc_out with biases, lm_head with a bias;
//   codegen (CodeGenForCausalLM: CodeGen 350M ... 16B mono / multi / nl; CodeGenConfig): GPT-J's layer with
//     one fused qkv_proj, whose rows are 4 blocks (mp_num) of q | v | k, hidden / 4 rows each, split
//     at open; untied, rotary_dim 64 by default; older checkpoints' attn.causal_mask buffers skipped;
//   gpt2 (GPT2LMHeadModel; GPT2Config) and gpt_bigcode (GPTBigCodeForCausalLM: StarCoder 1,
//     SantaCoder, WizardCoder; GPTBigCodeConfig): learned absolute positions (wpe:
//     learned_positions, no RoPE), biased LayerNorms ln_1 / ln_2 / ln_f, c_attn's fused q|k|v
//     and c_proj with biases, c_fc -> activation_function -> c_proj with biases, tied by default;
//     GPT-2's Conv1D weights stored [in, out]; GPTBigCode's multi_query (true by default) one
//     k/v head (MQA), else c_attn per head as GPT-NeoX's.
//   falcon (FalconForCausalLM: Falcon-7B / 40B / 180B, Falcon2-11B; FalconConfig; also the RW
//     remote code's RWForCausalLM configs, model_type RefinedWebModel / RefinedWeb): biased
//     LayerNorms (layer_norm_epsilon), query_key_value fused per KV group [kv heads, query heads per
//     group + 2, head_dim] (multi_query: one k/v head; new_decoder_architecture: num_kv_heads),
//     dense, dense_h_to_4h -> activation (exact gelu by default) -> dense_4h_to_h, all with `bias`;
//     RoPE (NeoX halves) over the whole head; parallel_attn (true by default, always with the new
//     decoder) puts the attention and MLP side by side on input_layernorm, or on ln_attn / ln_mlp
//     (the new decoder's num_ln_in_parallel_attn 2, its default: parallel_mlp_norm); tied by
//     default. ALiBi (Falcon-RW) is refused;
//   bloom (BloomForCausalLM: BLOOM, BLOOMZ; BloomConfig): ALiBi (ModelConfig::alibi_slopes, BLOOM's
//     slopes), the embeddings' own LayerNorm (word_embeddings_layernorm: embed_norm), biased
//     LayerNorms and projections, query_key_value per head [heads, 3, head_dim], the tanh GELU, tied;
//   mpt (MptForCausalLM, the Hub's MPTForCausalLM: MPT-7B / 30B; MptConfig): ALiBi (MPT's slopes,
//     attn_config.alibi_bias_max), LayerNorms with a weight only, no biases, Wqkv q|k|v one after the
//     other, attn_config's clip_qkv and softmax_scale, a 4 x d_model exact-GELU MLP, tied;
//   opt (OPTForCausalLM: OPT-125m ... 66B; OPTConfig): learned positions offset by two rows (the
//     first two dropped at open), biased LayerNorms (self_attn_layer_norm, final_layer_norm) and
//     projections (enable_bias), fc1 -> relu -> fc2, tied; OPT-350m's post-norm layer and
//     project_in / project_out refused.
// Their config.json names (n_embd, n_layer, n_head, n_positions, n_inner, activation_function;
// Falcon's n_embed, n_head_kv, num_kv_heads, ffn_hidden_size, activation; BLOOM's n_embed; MPT's d_model,
// n_heads, n_layers, max_seq_len; OPT's ffn_dim) are copied under the common ones first
// (apply_gpt_config_names); hidden_act / activation_function one of gelu (exact erf), gelu_new,
// gelu_fast, gelu_pytorch_tanh (the tanh form), and OPT's relu (BLOOM's and MPT's are fixed).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

bool is_gpt_decoder(const std::string& arch);

// ALiBi's slopes for n heads as transformers computes them: BLOOM's (_get_alibi_slopes), MPT's
// (build_mpt_alibi_tensor with alibi_bias_max `bias_max`). Also what the GGUF readers use.
std::vector<float> bloom_alibi_slopes(int n);
std::vector<float> mpt_alibi_slopes(int n, float bias_max);

// GPT-2's, GPT-J's and GPTBigCode's config names copied under the common ones where those are
// absent (n_embd as hidden_size, n_layer, n_head, n_positions as max_position_embeddings, n_inner
// as intermediate_size (null: 4 * n_embd), activation_function as hidden_act), their class
// defaults where config.json has none (max positions, GPT-2's and GPTBigCode's tied head),
// GPTBigCode's multi_query as num_key_value_heads (1, else n_head), GPT-NeoX's rotary_emb_base as
// rope_theta, Falcon's names and defaults (models/gpt_decoders_config.cpp: apply_falcon_config_names).
// Any other config is left unchanged.
void apply_gpt_config_names(nlohmann::json& j);

// What the architecture adds to the Llama decoder (c.arch one of the above, the common fields read
// already). Refuses by name what the decoder does not run: another activation, GPT-J's
// rotary_dim null, GPT-2's scale_attn_by_inverse_layer_idx, scale_attn_weights false,
// add_cross_attention, a quantization_config, Falcon's alibi.
Status read_gpt_decoder(const nlohmann::json& j, ModelConfig& c);

// A checkpoint of one of them, its tensors under the Llama decoder's names (model.embed_tokens,
// model.embed_positions, model.embed_norm (BLOOM's), model.layers.N.input_layernorm,
// self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.up_proj / down_proj, model.norm,
// lm_head), with or without the transformer. / gpt_neox. / model. prefix (the Hub's GPT-2 and BLOOM
// have none, OPT's decoder.*); the causal-mask buffers (attn.bias, masked_bias) and NeoX's
// rotary_emb.inv_freq dropped; OPT's position table without its first two rows (a view). A fused
// q|k|v becomes q_proj, k_proj and v_proj: views of its rows where they are contiguous
// (GPTBigCode's MQA, MPT's Wqkv, Falcon-7B's), else copies into `arena` (GPT-NeoX's, BLOOM's and
// GPTBigCode-MHA's heads interleaved [heads, 3, head_dim], Falcon's KV groups); GPT-2's Conv1D
// weights [in, out] are transposed into `arena`. The caller
// keeps `arena` alive as long as the tensors (models/checkpoint.h). corrupt naming a fused tensor
// whose shape does not fit the config.
Expected<std::map<std::string, RawTensor>> gpt_decoder_tensors(const ModelConfig& c,
                                                               std::map<std::string, RawTensor> tensors,
                                                               std::vector<std::vector<uint8_t>>& arena);

}  // namespace brigade
