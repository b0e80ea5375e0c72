// ModelConfig: the architecture facts of a checkpoint, parsed from Hugging Face config.json
// (or a llama2.c header). Fields follow config.json's names where one exists.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/dtype.h"
#include "core/status.h"
#include "models/quant_config.h"
#include "models/rope_scaling.h"
#include "models/vision_config.h"

namespace brigade {

// The MLP's activation: SwiGLU's silu gate, Gemma's gelu_tanh gate (gelu_pytorch_tanh), an
// encoder's ungated GELU, exact (erf: BERT's "gelu") or tanh-approximated ("gelu_new"), or
// Apertus's ungated xIELU (up_proj, xIELU with the layer's learned parameters, down_proj;
// Backend::xielu), or Arcee AFM's ungated relu2 (up_proj, relu(x)^2, down_proj; Backend::relu_squared),
// or BitNet's gated relu2 (relu(gate)^2 * up; Backend::relu2_mul).
enum class MlpActivation : uint8_t { silu, gelu_tanh, gelu, xielu, relu2, relu, relu2_glu };

// A Mamba2 mixer's shape and options (config.json of Mamba2ForCausalLM: num_heads, head_dim,
// n_groups, state_size, conv_kernel, expand, use_conv_bias, use_bias, time_step_limit), or a
// Mamba1 mixer's (dt_rank > 0).
struct SsmConfig {
  SsmLayout layout;
  bool conv_bias = true;   // conv1d.bias
  bool proj_bias = false;  // in_proj.bias and out_proj.bias
  bool gated_norm = true;  // mixer.norm: Mamba2RMSNormGated over y * silu(z); false: the gate alone
  float dt_min = 0.0f;     // time_step_limit: dt clamped after softplus (dt_max <= 0: unbounded)
  float dt_max = 0.0f;
  // Mamba1 mixers (MambaForCausalLM, FalconMamba): x_proj's time-step rank (layout: d_inner heads
  // of 1 channel, one group; 0: Mamba2 mixers), and FalconMamba's weightless RMSNorm of dt, B
  // and C after x_proj (its epsilon, mixer_rms_eps; 0: none).
  int dt_rank = 0;
  float bcdt_norm_eps = 0.0f;
  // Gated DeltaNet layers (Qwen3-Next, Qwen3.5; Backend::gated_delta): the layout's H value heads
  // of P channels and G key heads of N, a conv over q|k|v without bias.
  bool gated_delta = false;
  // LFM2's short-conv blocks (Backend::short_conv): the layout's d_inner heads of one channel (d_inner =
  // hidden), no state beyond the conv's K - 1 rows (state_size 0); conv_bias and proj_bias both
  // the config's conv_bias.
  bool short_conv = false;
  // Kimi Linear's KDA layers (Backend::kda; models/kimi_linear.h): the layout's H heads of P
  // value and N = P key channels (n_groups = H), a conv over q|k|v without bias.
  bool kda = false;
  // MiniMax's lightning attention layers (Backend::lightning_attention; models/minimax.h): the
  // layout's H heads of D = P = N channels, no conv (conv_kernel 1, no conv state).
  bool lightning = false;
  bool mamba1() const { return dt_rank > 0; }
  bool present() const { return layout.n_heads > 0; }
};

struct ModelConfig {
  std::string arch;             // "llama", "qwen2", "qwen3", "qwen3_moe", "qwen2_moe", "mixtral", "phi3", "gemma2", "gemma3_text",
                                // "gpt_oss", "glm4_moe", "smollm3", "granite", "granitemoe", "granitemoeshared", "olmo", "olmo2", "olmo3", "exaone4", "glm4",
                                // "seed_oss", "ernie4_5", "hunyuan_v1_dense", "hunyuan_v1_moe", "olmoe", "apertus", "ernie4_5_moe",
                                // "llama4_text", "minimax_m2", "cohere", "cohere2", "dots1", "phimoe", "afmoe", "arcee",
                                // "gemma", "starcoder2", "phi", "stablelm", "mimo_v2_flash", "exaone_moe", "kolibri1", "dbrx",
                                // "hyperclovax" and more (llama_variants_config.h)
                                // (the decoder they share: llama.h),
                                // "deepseek_v2", "deepseek_v3", "mistral4", "glm4_moe_lite", "axk1" and more (MLA:
                                // models/deepseek.h),
                                // "bert" or "roberta" (encoders: models/bert.h)
  int hidden_size = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;             // hidden_size / n_heads unless config.json says otherwise
  int intermediate_size = 0;
  int vocab_size = 0;
  int max_position = 0;         // max_position_embeddings: the longest context
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::neox;
  int rotary_dim = 0;           // dims of each head RoPE rotates, head_dim * partial_rotary_factor (phi3, glm4_moe);
                                // 0 = head_dim (rope_dims())
  RopeScaling rope_scaling;     // folded into the RoPE frequencies at load (rope_scaling.h)
  bool tie_embeddings = false;  // lm_head is the token embedding (no lm_head.weight stored)
  bool seq_cls = false;         // a *ForSequenceClassification checkpoint: score.weight instead of an lm_head
                                // (models/classifier.h); tie_embeddings is set so the decoder needs none
  bool attention_bias = false;  // config.json's attention_bias (llama: q/k/v and o biases)
  bool qkv_bias = false;        // q/k/v projections carry biases (qwen2; llama attention_bias)
  bool o_bias = false;          // o projection carries a bias (llama attention_bias)
  bool qk_norm = false;         // per-head RMSNorm of q and k before RoPE (qwen3)
  bool qk_norm_whole = false;   // with qk_norm: one RMSNorm over q_proj's whole output and one over k_proj's
                                // (OLMo 2 / 3: q_norm [n_heads * head_dim], k_norm [n_kv_heads * head_dim])
  bool qk_norm_after_rope = false;  // with qk_norm: the norms after RoPE (Hunyuan's query_/key_layernorm)
  float clip_qkv = 0.0f;        // > 0: q, k and v clamped to [-clip_qkv, clip_qkv] after their projections (and
                                // OLMoE's q/k norms), before RoPE (OLMo's and OLMoE's clip_qkv); 0 = none
  bool qk_norm_weightless = false;  // with qk_norm: per-head RMSNorms without weights (none stored), on the layers
                                    // with RoPE only (Llama 4's use_qk_norm; with qk_norm_after_rope)
  bool attn_gate = false;       // AFMoE: the attention output times sigmoid(self_attn.gate_proj · x) [H * hd]
                                // before o_proj (Backend::sigmoid_mul), x the attention's normed input
  // Cohere's Command R family (cohere, cohere2; read_cohere in models/llama_variants_config.cpp):
  // every norm of the decoder a LayerNorm (mean-centred, a weight, no bias; its eps in rms_eps)
  // rather than an RMSNorm (layer_norms), the q/k norms (qk_norm, Command R+'s use_qk_norm) then
  // per-head LayerNorms with each head's own weights (q_norm [n_heads, head_dim], k_norm
  // [n_kv_heads, head_dim]); the attention and the MLP both reading the layer's one normed input,
  // both outputs added to the residual (parallel_blocks; input_layernorm only); the logits times
  // logit_scale (0 = none).
  bool layer_norms = false;
  bool norms_weightless = false;  // OLMo 1 (OlmoLayerNorm): the decoder's LayerNorms have neither weight nor
                                  // bias (none stored; unit weights made at load); nanochat's RMSNorms likewise
  bool embed_norm = false;        // nanochat: a weightless RMSNorm of the embeddings before layer 0; with
                                  // layer_norms, BLOOM's word_embeddings_layernorm (model.embed_norm.weight
                                  // and .bias, a LayerNorm)
  bool rope_reversed = false;     // nanochat: rotate_half as cat(x2, -x1), the rotation by minus the angle
                                  // (inv_freq negated at load)
  bool parallel_blocks = false;
  float logit_scale = 0.0f;
  // Phi-3.5-MoE (phimoe; models/phimoe_config.h): every decoder norm (input_layernorm,
  // post_attention_layernorm, model.norm) also adds a bias (.bias [hidden], after the LayerNorm or,
  // in llama.cpp's GGUF graph, the RMSNorm); the logits a bias (lm_head.bias [vocab]; lm_head_bias).
  bool norm_bias = false;
  bool lm_head_bias = false;
  // The classic GPT decoders (models/gpt_decoders_config.h). learned_positions: GPT-2's and
  // GPTBigCode's learned absolute positions, a table model.embed_positions.weight [max_position,
  // hidden] whose row pos is added to each token's embedding (no RoPE; positions past max_position
  // are refused by the step check). parallel_mlp_norm: with parallel_blocks, the MLP reads its own
  // norm of the layer's input (post_attention_layernorm) rather than the attention's (GPT-NeoX's
  // use_parallel_residual: x + attn(ln1(x)) + mlp(ln2(x))).
  bool learned_positions = false;
  bool parallel_mlp_norm = false;
  // ALiBi (BLOOM's and MPT's slopes, one per attention head, from their config readers): every
  // layer's scores gain slope[h] * (key position - query position) (AttentionMeta::alibi_slopes);
  // no RoPE. Empty = none.
  std::vector<float> alibi_slopes;
  bool fused_weights = false;   // q|k|v and gate|up stored as one tensor each (phi3: self_attn.qkv_proj,
                                // mlp.gate_up_proj) rather than q/k/v_proj and gate/up_proj
  int sliding_window = 0;       // 0 = none
  int attention_chunk = 0;      // Llama 4's attention_chunk_size: the chunked_layers attend within chunks of it
                                // (AttentionMeta::chunk); 0 = none
  std::vector<bool> chunked_layers;  // layer_types' "chunked_attention" layers; empty = none
  // The query temperature (Backend::attention_temperature): Llama 4's attn_temperature_tuning on its NoPE
  // layers (floor_scale, attn_scale, offset 1), Ministral 3's llama_4_scaling_beta on every layer
  // (original_max_position_embeddings, the beta, offset 0: attn_temperature_all_layers); floor 0 = none.
  float attn_temperature_floor = 0.0f;
  float attn_temperature_scale = 0.0f;
  float attn_temperature_offset = 1.0f;
  bool attn_temperature_all_layers = false;
  int bos_id = -1;              // -1 = none
  std::vector<int> eos_ids;
  DType dtype = DType::f32;     // element type of the weights as stored (torch_dtype; fp8 checkpoints: of the
                                // unquantized tensors)
  QuantConfig quant;            // quantization_config: FP8 linear weights and their scales (none by default)
  // Mixture of experts (qwen3_moe, qwen2_moe, mixtral, gpt_oss). n_experts == 0: every layer is a dense MLP.
  int n_experts = 0;                 // num_experts (transformers 5 writes num_local_experts)
  int n_experts_per_tok = 0;         // num_experts_per_tok: k of the top-k routing
  int moe_intermediate_size = 0;     // each expert's SwiGLU width
  bool norm_topk_prob = false;       // renormalise the k routing weights to sum to 1
  bool experts_transposed = false;   // Qwen3-VL-MoE's Hub layout: mlp.experts.gate_up_proj [E, hidden, 2 I]
                                     // and down_proj [E, I, hidden] (transformers 5's in memory: [E, 2 I,
                                     // hidden], [E, hidden, I])
  int decoder_sparse_step = 1;       // layer l is sparse when (l + 1) % step == 0 ...
  std::vector<int> mlp_only_layers;  // ... and l is not listed here
  // gpt-oss: the router and every expert's gate|up and down carry biases, and the experts'
  // SwiGLU is clamped (MoeExpertMlp in core/backend.h); swiglu_limit 0 = plain SwiGLU.
  bool moe_biases = false;
  bool moe_weight_on_input = false;  // Llama 4: the routing weight scales the expert's input (MoeExpertMlp)
  float swiglu_limit = 0.0f;
  float swiglu_alpha = 1.0f;
  bool attn_sinks = false;           // a learned sink logit per query head (self_attn.sinks; AttentionMeta::sinks)
  // MiMo-V2-Flash (models/mimo_exaone_config.h): the decoder runs one KV head count and one head
  // width for every layer, so a full-attention layer's n_kv_heads_full stored KV heads (0: every
  // layer stores n_kv_heads) load each repeated n_kv_heads / n_kv_heads_full times, and v heads of
  // v_head_width (0: head_dim) load zero-padded to head_dim, o_proj's columns alike
  // (models/widened_attention.h); v_proj's rows times attn_value_scale; the sinks (attn_sinks) on
  // the sliding layers only with sinks_sliding_only.
  int n_kv_heads_full = 0;
  int v_head_width = 0;
  float attn_value_scale = 1.0f;
  bool sinks_sliding_only = false;
  // qwen2_moe: one shared expert of shared_expert_intermediate_size every token runs, its output
  // scaled by sigmoid(x · mlp.shared_expert_gate) (shared_gate); 0 = none, or DeepSeek's
  // n_shared_experts * moe_intermediate_size (shared_width()).
  int shared_expert_intermediate_size = 0;
  bool shared_gate = false;

  // DeepSeek-V2/V3 (MLA attention, MoE with shared experts; models/deepseek.h). head_dim is
  // qk_rope_head_dim there (the rotary part), as transformers sets it.
  int q_lora_rank = 0;               // 0 (null): q_proj; else q_a_proj -> q_a_layernorm -> q_b_proj
  int kv_lora_rank = 0;              // R, the latent the KV cache holds; 0 = not MLA
  float mla_norm_eps = 1e-6f;        // q_a_layernorm's and kv_a_layernorm's (transformers builds them at 1e-6;
                                     // llama.cpp's deepseek2 takes layer_norm_rms_epsilon)
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  // DeepSeek Sparse Attention (deepseek_v32, glm_moe_dsa; models/dsa_indexer.h): each MLA layer's
  // lightning indexer (n_heads index heads of head_dim) keeps every query's `topk` best keys.
  struct DsaConfig {
    int n_heads = 0;   // index_n_heads; 0 = no indexer (dense MLA)
    int head_dim = 0;  // index_head_dim: [rope part (qk_rope_head_dim) | the rest]
    int topk = 0;      // index_topk
    RopeStyle rope_style = RopeStyle::neox;  // V3.2: halves; GLM-5: adjacent pairs
    std::vector<bool> shared;  // per layer: reuses the previous full layer's choice (GLM-5's indexer_types "shared")
    bool share_for_mtp = false;  // index_share_for_mtp_iteration (GLM-5.x): draft steps reuse a choice (not run)
    bool enabled() const { return n_heads > 0; }
  } dsa;
  int n_shared_experts = 0;          // a dense SwiGLU of n_shared_experts * moe_intermediate_size (shared_width)
  int n_zero_experts = 0;            // LongCat-Flash's zero_expert_num: identity experts routed beside the n_experts
                                     // (ids [n_experts, n_experts + this); Backend::moe_identity_experts)
  int first_k_dense_replace = 0;     // layers [0, k) keep the dense MLP
  int n_mtp_layers = 0;              // num_nextn_predict_layers: MTP modules stored after the layers
  int n_group = 1;                   // expert groups of the group-limited routing
  int topk_group = 1;                // groups a token may choose from
  MoeScoring moe_scoring = MoeScoring::softmax;
  float router_jitter = 0.0f;        // sparsemixer's router_jitter_noise (MoeRouting::jitter_eps; phimoe)
  MoeGroupScore moe_group_score = MoeGroupScore::none;
  bool moe_score_bias = false;       // e_score_correction_bias (V3) shifts the selection
  bool moe_select_on_logits = false; // Kolibri-1: the selection ranks logits + bias (MoeRouting::select_on_logits)
  bool moe_post_norm = false;        // A.X K1: an RMSNorm (post_mlp_layernorm) on each sparse layer's MoE
                                     // output, before its residual add (models/deepseek.h)
  bool relu2_experts = false;        // Nemotron 3: experts and shared expert up_proj, relu2, down_proj (no gate)
  float routed_scaling_factor = 1.0f;
  float attn_scale = 0.0f;           // softmax scale: MLA's incl. yarn's mscale, Gemma's query_pre_attn_scalar^-0.5;
                                     // 0 = 1/sqrt(head_dim)

  // Gemma 2 / Gemma 3 text (models/gemma_config.h), run by the Llama decoder.
  float norm_offset = 0.0f;          // added to every RMSNorm weight at load (Gemma: 1, its norms scale by 1 + w)
  bool sandwich_norms = false;       // post_attention_layernorm normalises the attention output, and
                                     // pre_/post_feedforward_layernorm wrap the MLP (Gemma; GLM-4's and
                                     // Kolibri-1's post_self_attn_ / post_attention_ / post_mlp_layernorm;
                                     // HyperCLOVA X's post_norm1 / post_norm2)
  bool post_norms = false;           // no norm before the attention or the MLP: post_attention_layernorm
                                     // normalises the attention's output and post_feedforward_layernorm the
                                     // MLP's, each before its residual add (OLMo 2 / 3, EXAONE 4)
  float embed_scale = 0.0f;          // > 0: the embeddings are multiplied by it (Gemma: sqrt(hidden_size)); 0 = none
  MlpActivation mlp_activation = MlpActivation::silu;
  float attn_softcap = 0.0f;         // attn_logit_softcapping (AttentionMeta::softcap); 0 = none
  float final_softcap = 0.0f;        // final_logit_softcapping of the logits; 0 = none
  std::vector<bool> sliding_layers;  // layer_types: the layers sliding_window applies to; empty = all of them
  std::vector<bool> nope_layers;     // SmolLM3's no_rope_layers: the layers whose attention has no RoPE; empty = none
  float rope_local_theta = 0.0f;     // > 0: the sliding layers' RoPE base, unscaled (Gemma 3's
                                     // rope_local_base_freq); 0 = every layer uses rope_theta and rope_scaling
  // Gemma 3n (gemma3n_text; models/gemma3n.h, read by models/gemma3n_config.cpp): its own decoder
  // over the Gemma fields above (embed_scale, final_softcap, sliding_layers, rope_local_theta).
  struct Gemma3nFields {
    int altup_inputs = 0;              // altup_num_inputs: the parallel streams; 0 = not Gemma 3n
    int altup_active = 0;              // altup_active_idx: the stream the layer computes on
    bool altup_correct_scale = true;   // the corrected active stream times correct_output_scale
    int laurel_rank = 0;               // LAuReL's low rank (linear_left / linear_right)
    int per_layer_dim = 0;             // hidden_size_per_layer_input
    int per_layer_vocab = 0;           // vocab_size_per_layer_input: ids at or past it read row 0
    int text_vocab_end = 0;            // a Gemma3nForConditionalGeneration's first vision / audio id (their
                                       // embeddings are the towers' embedders'); 0 = every id is text
    std::vector<int> intermediate;     // per layer MLP width (intermediate_size holds the widest)
    std::vector<float> sparsity;       // activation_sparsity_pattern, per layer (0 = dense)
    std::vector<int> kv_layer;         // per layer: the K/V cache layer it writes or (num_kv_shared_layers'
                                       // last layers) reads; cache layers number n_kv_layers()
    int n_kv_layers() const {
      return kv_layer.empty() ? 0 : *std::max_element(kv_layer.begin(), kv_layer.end()) + 1;
    }
    bool shares_kv(int l) const { return l > 0 && kv_layer[static_cast<size_t>(l)] < l; }
  } gemma3n;
  // Gemma 4 (gemma4_text; models/gemma4.h, read by models/gemma4_config.cpp): its own decoder over
  // the Gemma fields above (embed_scale, final_softcap, sliding_layers; the sliding layers'
  // geometry in n_kv_heads / head_dim and RoPE base in rope_local_theta, the full layers' in
  // these fields and rope_theta).
  struct Gemma4Fields {
    int full_head_dim = 0;             // the full_attention layers' head_dim (global_head_dim); 0 = not Gemma 4
    int full_kv_heads = 0;             // and their KV heads (num_global_key_value_heads under attention_k_eq_v)
    bool k_eq_v = false;               // attention_k_eq_v: a full layer's V is its k_proj output (no v_proj)
    float full_rope_partial = 1.0f;    // the full layers' proportional RoPE: pairs rotated (of head_dim / 2)
    float full_rope_factor = 1.0f;     // and its factor (inv_freq / factor); "default": 1 and 1
    int per_layer_dim = 0;             // hidden_size_per_layer_input; 0 = no per-layer inputs (31B, 26B-A4B)
    int per_layer_vocab = 0;           // vocab_size_per_layer_input: ids at or past it read row 0
    std::vector<int> tower_tokens;     // a Gemma4ForConditionalGeneration's image, video and audio placeholder
                                       // ids (refused but where a loaded vision tower fills the image's); empty = none
    int pad_token = 0;                 // text pad_token_id: what transformers embeds at those placeholders
    std::vector<int> kv_layer;         // as Gemma3nFields::kv_layer (num_kv_shared_layers)
    std::vector<int> intermediate;     // per layer MLP width (use_double_wide_mlp doubles the K/V-reusing layers')
    bool moe = false;                  // enable_moe_block: the experts beside the dense MLP in every layer
    int n_kv_layers() const {
      return kv_layer.empty() ? 0 : *std::max_element(kv_layer.begin(), kv_layer.end()) + 1;
    }
    bool shares_kv(int l) const { return kv_layer[static_cast<size_t>(l)] < l; }
  } gemma4;
  // PaliGemma's prefix-LM attention: a sequence's prompt (its images, <bos>, the text and "\n")
  // attends to all of itself, the tokens after it causally. The scheduler runs a prompt whole in
  // one step from position 0 (SchedulerLimits::prompt_whole: never a prefix-cache match, a
  // recomputed sequence's prompt cut at its end), so the model takes a sequence's rows that begin
  // at position 0 as its whole prompt (prefix_lm_until, models/step_check.h).
  bool prefix_lm = false;
  bool multimodal_text = false;      // a Gemma3ForConditionalGeneration, Qwen2-VL-family or Qwen3.5 checkpoint:
                                     // its language model's tensors load as the text model's (Gemma3ForCausalLM,
                                     // Qwen2ForCausalLM, Qwen3_5ForCausalLM), and `vision` describes its tower
                                     // (none for Qwen3.5: served text-only)
  std::vector<int> mrope_section;    // M-RoPE (the Qwen2-VL family; models/mrope.h): the frequency pairs
                                     // rotated by the temporal, height and width positions; empty = none
  bool mrope_interleaved = false;    // Qwen3-VL: the sections interleave over the pairs (RopeConfig::interleaved)
  VisionConfig vision;               // the vision tower and projector (models/gemma3_vision.h); absent
                                     // (!present()) for text-only checkpoints
  std::string vision_off;            // why a checkpoint's tower is not run (Mistral 3's Pixtral refused by
                                     // field, or a language model that takes no images); empty otherwise

  // Encoders (BERT, RoBERTa, XLM-RoBERTa; models/bert_config.h): every token of a prompt attends
  // to every other, so a prompt runs whole in one step and nothing of it is cached; post-norm
  // layers with LayerNorm (eps in rms_eps), biases everywhere and an ungated MLP (mlp_activation
  // gelu or gelu_tanh); learned absolute positions, the first at position_offset (RoBERTa's
  // padding_idx + 1, BERT's 0), and type_vocab_size token types (a pair's second segment is
  // type 1 where there are 2). They compute no logits: they pool (embeddings) and classify.
  // ModernBERT (arch modernbert; models/modernbert_config.h) is an encoder too, of its own kind:
  // pre-norm, RoPE instead of learned positions, a gated GELU MLP, and local layers
  // (sliding_layers) that see |i - j| <= sliding_window on either side.
  bool encoder = false;
  int type_vocab_size = 0;
  int position_offset = 0;

  // State-space layers (Mamba2 mixers; models/state_space.h): layer l is a mixer where ssm_layers[l]
  // (all of them for Mamba2ForCausalLM; empty: none), each with a recurrent state per sequence
  // in place of K/V pages (the scheduler then caches no prefix: a state holds the whole past).
  SsmConfig ssm;
  std::vector<bool> ssm_layers;
  // Hybrids whose MLPs are layers of their own (Nemotron-H's "-" blocks, and Nemotron 3's "E"
  // MoE blocks, which is_moe_layer tells apart): layer l is one where mlp_layers[l] (empty:
  // none); the layers neither ssm nor mlp are attention. mlp_bias: their
  // up/down projections carry biases. nope: the attention layers have no positions (no RoPE:
  // Granite 4.0-H, Nemotron-H).
  std::vector<bool> mlp_layers;
  bool mlp_bias = false;  // also the Llama decoder's: gate/up and down biases (config.json's mlp_bias; Ernie 4.5's use_bias)
  // The Llama decoder's MLP without a gate: up_proj, mlp_activation, down_proj (StarCoder2's c_fc /
  // c_proj and Phi's fc1 / fc2 with gelu_tanh; their biases with mlp_bias, up_proj's alone). Apertus's
  // xielu and Arcee's relu2 MLPs are ungated whatever this says (mlp_gated()).
  bool mlp_ungated = false;
  // BitNet (BitNetAttention, BitNetMLP): an RMSNorm of the attention's output before o_proj
  // (attn_sub_norm, over the q width) and of act(gate) * up before down_proj (ffn_sub_norm).
  bool sub_norms = false;
  bool nope = false;
  // IBM Granite's scalings (0 = none; Granite 4.0-H's, and Granite 3's in the Llama decoder): the
  // embeddings times embedding_multiplier, each sublayer's output times residual_multiplier before
  // its residual add, the logits divided by logits_scaling.
  float embedding_multiplier = 0.0f;
  float residual_multiplier = 0.0f;
  float logits_scaling = 0.0f;
  // Falcon-H1: every layer runs attention beside its mixer (parallel_attention; their outputs
  // summed), and its muP multipliers, folded into the weights at load (1 = none): the mixer's
  // input (ssm_in) and in_proj's z, x, B, C and dt rows (ssm_rows), its output (ssm_out); the
  // attention's input (attn_in), keys (key) and output (attn_out); the MLP's gate and down. The
  // embeddings' and the head's are embedding_multiplier and 1 / logits_scaling.
  bool parallel_attention = false;
  struct MupMultipliers {
    float ssm_in = 1.0f, ssm_out = 1.0f, attn_in = 1.0f, attn_out = 1.0f, key = 1.0f, mlp_gate = 1.0f, mlp_down = 1.0f;
    std::array<float, 5> ssm_rows = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  } mup;

  // MiniMax-Text-01 / M1 (models/minimax.h): after a lightning attention, a softmax attention
  // and an MLP block (index 0, 1, 2) the residual is alpha * the block's normed input + beta * its
  // output (MiniMaxDecoderLayer's *_alpha_factor / *_beta_factor).
  std::array<float, 3> block_alpha = {1.0f, 1.0f, 1.0f}, block_beta = {1.0f, 1.0f, 1.0f};

  bool is_mla() const { return kv_lora_rank > 0; }
  // Whether some layer keeps a recurrent state per sequence (ssm_layers).
  bool recurrent() const { return std::find(ssm_layers.begin(), ssm_layers.end(), true) != ssm_layers.end(); }
  // Layers with attention (and K/V pages): those that are neither state-space mixers nor MLPs
  // (with parallel_attention, the mixers' layers too).
  int n_attention_layers() const {
    return n_layers - (parallel_attention ? 0 : static_cast<int>(std::count(ssm_layers.begin(), ssm_layers.end(), true))) -
           static_cast<int>(std::count(mlp_layers.begin(), mlp_layers.end(), true));
  }
  // The sliding window of layer l's attention (0 = full attention).
  int layer_window(int l) const {
    return sliding_layers.empty() || sliding_layers[static_cast<size_t>(l)] ? sliding_window : 0;
  }
  // The attention chunk of layer l (0 = none).
  int layer_chunk(int l) const {
    return static_cast<size_t>(l) < chunked_layers.size() && chunked_layers[static_cast<size_t>(l)] ? attention_chunk : 0;
  }
  // The routing rule of the sparse layers (its bias tensor, a weight, is left empty).
  MoeRouting moe_routing() const;
  // The shared experts' SwiGLU width every token of a sparse layer runs (0: none).
  int64_t shared_width() const {
    return shared_expert_intermediate_size > 0 ? int64_t{shared_expert_intermediate_size}
                                               : int64_t{n_shared_experts} * moe_intermediate_size;
  }

  // Whether layer l runs the experts block rather than the dense MLP: Qwen3MoeDecoderLayer's rule,
  // and DeepSeek's l >= first_k_dense_replace.
  bool is_moe_layer(int l) const;
  int n_moe_layers() const;

  // Whether the Llama decoder's dense MLP has a gate (gate|up, act(gate) * up, down).
  bool mlp_gated() const {
    return !mlp_ungated && mlp_activation != MlpActivation::xielu && mlp_activation != MlpActivation::relu2;
  }
  QkvLayout qkv_layout() const { return {n_heads, n_kv_heads, head_dim}; }
  int rope_dims() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  // What the logits are multiplied by: Cohere's logit_scale, or 1 / Granite's logits_scaling (1: neither).
  float logits_multiplier() const {
    if (logit_scale > 0.0f) return logit_scale;
    return logits_scaling > 0.0f ? 1.0f / logits_scaling : 1.0f;
  }
  // Checks the numbers fit together (heads divide, sizes positive); says which one does not.
  Status validate() const;
};

// The causal-LM architecture a *ForSequenceClassification name runs on, by transformers' names
// (Qwen3ForSequenceClassification -> Qwen3ForCausalLM; Gemma3TextForSequenceClassification ->
// Gemma3ForCausalLM); any other name as it is.
std::string causal_architecture(const std::string& arch);

// Parses config.json text. Unknown architectures are rejected with the list of supported ones.
Expected<ModelConfig> parse_hf_config(const std::string& json_text);

}  // namespace brigade
