#!/usr/bin/env python3
"""Writes the transformers reference fixtures that tests/models/hf_fixture_test.cpp reads.

For each architecture it builds a tiny random checkpoint with transformers (fp32), saves it with
save_pretrained (config.json + model.safetensors) into tests/fixtures/<name>/, and writes
expected.json: for a few prompts of token ids, transformers' fp32 logits at every position and the
greedy continuation (model.generate, do_sample=False). deepseek_v3_mtp and glm4_moe_mtp add
DeepSeek-V3's / GLM-4.5's MTP module to their checkpoints and hold that module's logits and
chained drafts instead (make_mtp).

Run from anywhere: python3 scripts/make_fixtures.py [NAME...] (the named fixtures, default all;
regenerating one leaves the others' bytes alone). `--embeddings NAME...` leaves the checkpoints
alone and writes tests/fixtures/<name>/embeddings.json instead: the pooled final hidden states
(AutoModel's last_hidden_state, pooled last / mean / cls, raw and L2-normalized) that
tests/models/pooling_reference_test.cpp compares with. It creates its own virtual environment in
.brigade/fixtures-venv (git-ignored) and installs torch, transformers, tokenizers, safetensors, numpy, tiktoken
and accelerate (transformers loads bitnet checkpoints only with it) from PyPI there on first use; then it re-runs itself inside that environment. CI never runs it: the
fixtures it writes are committed (a few hundred KB each).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".brigade" / "fixtures-venv"
OUT = ROOT / "tests" / "fixtures"
PACKAGES = ["torch", "transformers", "tokenizers", "safetensors", "numpy", "tiktoken", "accelerate"]


def ensure_venv(script=__file__):
    """Re-executes `script` inside VENV, creating it and installing PACKAGES when needed."""
    python = VENV / "bin" / "python"
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    if not python.exists():
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
    probe = subprocess.run([str(python), "-c", "import torch, transformers, tokenizers, safetensors, numpy, tiktoken, accelerate"],
                           capture_output=True)
    if probe.returncode != 0:
        subprocess.check_call([str(python), "-m", "pip", "install", *PACKAGES])
    os.execv(str(python), [str(python), script, *sys.argv[1:]])


def ensure_llamacpp_venv(script, args):
    """Re-executes `script` with `args` inside the llama-cpp-python venv (LLAMACPP_VENV, default
    .brigade/llamacpp-venv, built by make_grammar_fixtures.py) unless this is already it."""
    venv = Path(os.environ.get("LLAMACPP_VENV", ROOT / ".brigade" / "llamacpp-venv"))
    if Path(sys.prefix).resolve() != venv.resolve():
        os.execv(str(venv / "bin" / "python"), [str(venv / "bin" / "python"), script, *args])


# Prompts of token ids (all < 256). The long one reaches positions where RoPE scaling and a
# sliding window change the result.
PROMPTS = [
    [1, 17, 42, 99, 200, 3, 77],
    [1],
    [1] + [(i * 37 + 11) % 250 + 3 for i in range(39)],
]
N_GREEDY = 8


def prompts_for(vocab_size):
    """PROMPTS, with ids folded into [3, vocab_size) for vocabularies smaller than 256."""
    if vocab_size >= 256:
        return PROMPTS
    return [[t if t < 3 else 3 + t % (vocab_size - 3) for t in p] for p in PROMPTS]


def base_config(**kw):
    c = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
             rms_norm_eps=1e-5, rope_theta=10000.0, bos_token_id=1, eos_token_id=2,
             tie_word_embeddings=False)
    c.update(kw)
    return c


def fixtures():
    """name -> (config class name, model class name, config kwargs)."""
    return {
        "llama": ("LlamaConfig", "LlamaForCausalLM", base_config()),
        # Llama 3.1 style scaling: with head_dim 16 the 8 frequencies fall in all three bands
        # (wavelength < 64 kept, 64..256 smoothed, > 256 divided by factor).
        "llama_rope_llama3": ("LlamaConfig", "LlamaForCausalLM", base_config(
            tie_word_embeddings=True,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 256},
            max_position_embeddings=2048)),
        "llama_rope_linear": ("LlamaConfig", "LlamaForCausalLM", base_config(
            rope_scaling={"rope_type": "linear", "factor": 4.0})),
        "mistral_sliding": ("MistralConfig", "MistralForCausalLM", base_config(sliding_window=8)),
        "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", base_config(tie_word_embeddings=True)),
        "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", base_config(head_dim=32, rms_norm_eps=1e-6)),
        # The real models' shape quirks at tiny size (one layer, vocab 64: ~120 KB each).
        # TinyLlama-1.1B: 32 query heads over 4 KV heads (groups of 8), untied, theta 10000.
        "tinyllama": ("LlamaConfig", "LlamaForCausalLM", base_config(
            vocab_size=64, hidden_size=64, intermediate_size=32, num_hidden_layers=1,
            num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048)),
        # SmolLM2-135M: 9 query heads over 3 KV heads, tied embeddings, rope_theta 100000.
        "smollm2": ("LlamaConfig", "LlamaForCausalLM", base_config(
            vocab_size=64, hidden_size=72, intermediate_size=32, num_hidden_layers=1,
            num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True,
            rope_theta=100000.0, max_position_embeddings=8192)),
        # Qwen3-30B-A3B's layout at tiny size: 8 experts, top-2 renormalised (norm_topk_prob),
        # layer 1 dense through mlp_only_layers; the other sparse rule (decoder_sparse_step 2:
        # layers 1, 3, ... sparse) with top-3 of 4 experts not renormalised.
        "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", base_config(
            vocab_size=128, num_hidden_layers=3, intermediate_size=64, rms_norm_eps=1e-6,
            num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, norm_topk_prob=True,
            mlp_only_layers=[1])),
        "qwen3_moe_step": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", base_config(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, intermediate_size=48, head_dim=16,
            num_experts=4, num_experts_per_tok=3, moe_intermediate_size=24, norm_topk_prob=False,
            decoder_sparse_step=2)),
        # DeepSeek-V3's layout at tiny size: MLA with q_lora_rank, yarn RoPE whose mscale_all_dim
        # scales the softmax, interleaved rope; layer 0 dense (first_k_dense_replace), then 8
        # routed experts in 4 groups (top-2 groups by their two best sigmoid scores plus the
        # score-correction bias), top-2, renormalised, times routed_scaling_factor, one shared
        # expert. expected.json adds the logits of every cached decode step (decode_logits).
        "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", deepseek_v3_config()),
        # DeepSeek-V2-Lite's layout: q_proj (q_lora_rank null), softmax routing, two shared
        # experts; group_limited_greedy over 2 groups (V2's other top-k method) to cover groups.
        "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM", deepseek_config(
            q_lora_rank=None, n_group=2, topk_group=1, topk_method="group_limited_greedy",
            norm_topk_prob=False, n_shared_experts=2, routed_scaling_factor=1.5)),
        # V3's other rules: rope_interleave false (neox), no groups, not renormalised, every
        # layer sparse, no q_lora_rank; two layers, decode logits at every step.
        "deepseek_v3_step": ("DeepseekV3Config", "DeepseekV3ForCausalLM", deepseek_config(
            num_hidden_layers=2, q_lora_rank=None, n_group=1, topk_group=1, norm_topk_prob=False,
            first_k_dense_replace=0, rope_interleave=False, routed_scaling_factor=1.0)),
        # Phi-3-mini-4k's layout: qkv_proj and gate_up_proj fused, untied, a sliding window (2047
        # there; 8 here, so the long prompt crosses it). expected.json adds decode_logits.
        "phi3": ("Phi3Config", "Phi3ForCausalLM", phi3_config(sliding_window=8)),
        # Phi-4-mini's: partial rotary (0.75: 12 of 16 dims), tied embeddings, longrope with
        # original_max_position_embeddings 16 of 64 (factor 4, attention factor sqrt(1.5)). Prompts
        # up to 16 tokens (with their greedy tokens) run the short factors in transformers, the long
        # prompt the long ones.
        "phi3_longrope": ("Phi3Config", "Phi3ForCausalLM", phi3_config(
            tie_word_embeddings=True, partial_rotary_factor=0.75, max_position_embeddings=64,
            original_max_position_embeddings=16,
            rope_scaling={"rope_type": "longrope", "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5],
                          "long_factor": [1.0, 1.7, 3.0, 5.0, 7.5, 11.0]})),
        # Gemma 2's rules at tiny size: (1 + w) sandwich norms, embeddings times sqrt(hidden),
        # gelu_pytorch_tanh, query_pre_attn_scalar 24 (not head_dim 16), softcaps small enough to
        # bind (attention 2, logits 3), layers 0 and 2 sliding with a window of 8 (the long prompt
        # crosses it), layer 1 global. expected.json adds decode_logits.
        "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", gemma_config(
            attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"])),
        # Gemma 3 (text): (1 + w) q/k head norms, no softcaps, layers 0 and 1 sliding with
        # rope_local_base_freq 10000, layer 2 global with rope_theta 1e6 and linear scaling 4 (as
        # the 4B+ models scale by 8).
        "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", gemma_config(
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            rope_theta=1000000.0, rope_local_base_freq=10000.0,
            rope_scaling={"rope_type": "linear", "factor": 4.0})),
        # Gemma 3 4B+'s form: Gemma3ForConditionalGeneration (a tiny SigLIP tower beside the text
        # model); brigade loads its language model. The prompts are text only.
        "gemma3_mm": ("Gemma3Config", "Gemma3ForConditionalGeneration", dict(
            text_config=gemma_config(
                layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                rope_theta=1000000.0, rope_local_base_freq=10000.0,
                rope_scaling={"rope_type": "linear", "factor": 8.0}),
            vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                               num_attention_heads=2, image_size=28, patch_size=14),
            mm_tokens_per_image=4, boi_token_index=250, eoi_token_index=251, image_token_index=252)),
        # Mixtral-8x7B's layout at tiny size: Llama attention (GQA, a sliding window of 8 that the
        # long prompt crosses), every layer sparse with 4 experts of intermediate_size 64 (whole
        # Q8_0 blocks at tp 2), top-2 softmax renormalised; router_jitter_noise only in training.
        "mixtral": ("MixtralConfig", "MixtralForCausalLM", base_config(
            vocab_size=128, intermediate_size=64, num_local_experts=4, num_experts_per_tok=2,
            sliding_window=8, router_jitter_noise=0.0)),
        # gpt-oss-20b's layout at tiny size: q/k/v/o with biases, a learned attention sink per
        # head, layers alternating sliding (window 8, crossed by the long prompt) and full,
        # YaRN RoPE without truncation (factor 4 over 64 positions), every layer sparse with 4
        # experts of 96 (not the hidden size, so a transposed load shows), a router with a bias, top-2 softmaxed, and
        # the experts' clamped SwiGLU with biases; swiglu_limit 1 (7 in the real models) so the
        # clamp binds with these activations. expected.json adds decode_logits.
        "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", base_config(
            vocab_size=128, head_dim=16, intermediate_size=96, num_local_experts=4, num_experts_per_tok=2,
            sliding_window=8, layer_types=["sliding_attention", "full_attention"], swiglu_limit=1.0,
            attention_bias=True, rms_norm_eps=1e-5, max_position_embeddings=256,
            rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0,
                             "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 64})),
        # DeepSeek-V3's multi-token prediction (MTP) module beside the deepseek_v3 target cut to
        # two layers (0 dense, 1 sparse), stored as the Hub's checkpoints store it: model.layers.2.*
        # (num_nextn_predict_layers 1). transformers does not run it; expected.json holds the MTP's
        # logits at every position and a 3-draft chain by SGLang's formula (make_mtp).
        # Last in this list, so the entries above keep their seeds.
        "deepseek_v3_mtp": ("DeepseekV3Config", "DeepseekV3ForCausalLM", deepseek_v3_config(
            num_hidden_layers=2, num_nextn_predict_layers=1)),
        # Qwen1.5-MoE / Qwen2-57B-A14B's layout at tiny size: Qwen2 attention (q/k/v biases),
        # every layer sparse (as in the real models, and as llama.cpp's qwen2moe requires) with 8
        # experts of 32, top-2 not renormalised (Qwen2MoeConfig's norm_topk_prob default), and a
        # shared expert of 64 whose output a per-token sigmoid(x · shared_expert_gate) scales.
        "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", base_config(
            vocab_size=128, num_hidden_layers=3, intermediate_size=64, rms_norm_eps=1e-6, num_experts=8,
            num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=64,
            norm_topk_prob=False, mlp_only_layers=[])),
        # GLM-4.5's layout at tiny size (Glm4MoeForCausalLM): q/k/v with biases and o without,
        # per-head q/k RMSNorms (use_qk_norm), head_dim 32 over a hidden size of 64 (as 96 x 128
        # over 5120), neox RoPE on the first half of each head (partial_rotary_factor 0.5); layer
        # 0 dense (first_k_dense_replace), then 8 experts of 32 in 2 groups (top-1 group by its two
        # best sigmoid scores plus the score-correction bias), top-2 renormalised, times
        # routed_scaling_factor 2.5, and one shared expert. expected.json adds decode_logits.
        "glm4_moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM", glm4_moe_config()),
        # GLM-4.5-Air's other rules: no q/k norms, no attention biases, no groups, every layer
        # sparse, top-3 of 4 not renormalised, two shared experts, partial_rotary_factor left to
        # Glm4MoeConfig's default (0.5); the checkpoint also holds an MTP layer (model.layers.2.*,
        # num_nextn_predict_layers 1) as the Hub's do, which transformers skips (make_glm4_moe_step).
        "glm4_moe_step": ("Glm4MoeConfig", "Glm4MoeForCausalLM", base_config(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, head_dim=16, intermediate_size=48,
            n_routed_experts=4, num_experts_per_tok=3, moe_intermediate_size=24, n_shared_experts=2,
            first_k_dense_replace=0, norm_topk_prob=False, routed_scaling_factor=1.0,
            num_nextn_predict_layers=1)),
        # GLM-4.5's MTP layer (num_nextn_predict_layers 1) beside the glm4_moe target cut to two
        # layers (0 dense, 1 sparse): model.layers.2.* holds enorm, hnorm, eh_proj,
        # shared_head.norm and a whole sparse Glm4MoeDecoderLayer (q/k norms, biases, grouped
        # sigmoid routing, a shared expert), without the embed_tokens / shared_head.head copies, as
        # GLM-4.6's checkpoints leave them out. expected.json as deepseek_v3_mtp's, computed as
        # SGLang's Glm4MoeModelNextN runs the layer (make_mtp).
        "glm4_moe_mtp": ("Glm4MoeConfig", "Glm4MoeForCausalLM", glm4_moe_config(
            num_hidden_layers=2, num_nextn_predict_layers=1)),
        # Mamba2 (state-space layers): 8 heads of 16 in 2 groups, a 16-wide state, a 4-tap conv;
        # chunk_size 16 makes transformers' prefill run its chunked scan over several chunks on
        # the 40-token prompt (its decode steps run the one-token update), so the references
        # come from both of its algorithms.
        "mamba2": ("Mamba2Config", "Mamba2ForCausalLM", mamba2_config()),
        # ... with in_proj/out_proj biases, one group, tied embeddings and a 2-tap conv.
        "mamba2_bias": ("Mamba2Config", "Mamba2ForCausalLM", mamba2_config(
            use_bias=True, n_groups=1, tie_word_embeddings=True, conv_kernel=2, use_conv_bias=False)),
        # Granite 4.0-H (GraniteMoeHybrid): Mamba2 mixers and attention layers without positions,
        # each followed by a shared SwiGLU and 4 routed experts (top 2), with Granite's embedding,
        # attention, residual and logit scalings; the Hub's layer_types names.
        "granite_hybrid": ("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM", granite_hybrid_config()),
        # ... dense (Granite 4.0-H-Micro's shape: the shared MLP alone), tied embeddings.
        "granite_hybrid_dense": ("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM", granite_hybrid_config(
            num_local_experts=0, tie_word_embeddings=True, layer_types=["attention", "mamba", "mamba"])),
        # Granite 4.0's attention-only models (granite-4.0-micro, 1b, 350m: GraniteMoeHybrid with
        # every layer attention and position_embedding_type rope): RoPE over whole heads, the shared
        # MLP alone; the config's mamba_* defaults left as transformers writes them (they fit no
        # mixer here).
        "granite4_rope": ("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM", granite_hybrid_config(
            num_local_experts=0, tie_word_embeddings=True, layer_types=["attention"] * 3, mamba_n_heads=128,
            mamba_d_head="auto", position_embedding_type="rope", rope_theta=100000.0)),
        # Nemotron-H (NemotronHForCausalLM): blocks of one kind each, mixer, relu2 MLP, attention
        # without positions, MLP, mixer (the Hub's hybrid_override_pattern "M-*-M"); the mixers'
        # d_inner (6 heads of 16 = 96) is not expand * hidden, as in Nemotron-Nano-9B-v2.
        "nemotron_h": ("NemotronHConfig", "NemotronHForCausalLM", nemotron_h_config()),
        # ... with MLP and mixer projection biases, tied embeddings, attention first.
        "nemotron_h_bias": ("NemotronHConfig", "NemotronHForCausalLM", nemotron_h_config(
            hybrid_override_pattern="*M-M", mlp_bias=True, use_bias=True, tie_word_embeddings=True)),
        # Mamba1 (MambaForCausalLM, state-spaces/mamba-*-hf): d_inner 128 channels, a 16-wide state
        # per channel, time_step_rank "auto" (4), tied embeddings.
        "mamba1": ("MambaConfig", "MambaForCausalLM", dict(
            vocab_size=256, hidden_size=64, num_hidden_layers=2, state_size=16, expand=2, conv_kernel=4,
            layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=0)),
        # Falcon-Mamba: Mamba1 with weightless RMSNorms of dt, B and C; here untied, with projection
        # biases, no conv bias and time_step_rank 8.
        "falcon_mamba": ("FalconMambaConfig", "FalconMambaForCausalLM", dict(
            vocab_size=256, hidden_size=64, num_hidden_layers=2, state_size=16, expand=2, conv_kernel=3,
            time_step_rank=8, use_bias=True, use_conv_bias=False, tie_word_embeddings=False,
            layer_norm_epsilon=1e-5, mixer_rms_eps=1e-6, bos_token_id=1, eos_token_id=2, pad_token_id=0)),
        # Jamba: Mamba1 mixers with RMS-normed dt, B and C, attention without positions at layer
        # 2 of every 4, and after each a SwiGLU, or at odd layers 4 experts (top 2, unnormalized).
        "jamba": ("JambaConfig", "JambaForCausalLM", dict(
            vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, expert_layer_period=2,
            expert_layer_offset=1, attn_layer_period=4, attn_layer_offset=2, mamba_d_state=16, mamba_d_conv=4,
            mamba_expand=2, mamba_dt_rank="auto", use_mamba_kernels=False, rms_norm_eps=1e-6,
            max_position_embeddings=256, bos_token_id=1, eos_token_id=2, pad_token_id=0,
            tie_word_embeddings=False)),
        # Qwen3-Next (Qwen3NextForCausalLM): Gated DeltaNet layers (2 key heads of 16 serving 4
        # value heads of 8, so Dk != Dv and each key head serves two value heads; a 4-tap conv),
        # gated attention with q/k norms and a quarter of each head rotated at layer 1, zero-centred
        # (1 + w) RMSNorms; after each, 4 experts (top 2, renormalized) with a sigmoid-gated shared
        # expert, but layer 2 a dense SwiGLU (mlp_only_layers). The Hub's interleaved in_proj_qkvz
        # and in_proj_ba.
        "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM", qwen3_next_config()),
        # Qwen3.5 (Qwen3_5ForCausalLM, the language model of Qwen3.5-27B): the same layers with
        # in_proj_qkv, in_proj_z, in_proj_b and in_proj_a apart and a dense SwiGLU everywhere;
        # M-RoPE sections (one position per token for text), tied embeddings.
        "qwen3_5": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM", qwen3_next_config(
            layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
            tie_word_embeddings=True, num_experts=None, num_experts_per_tok=None, moe_intermediate_size=None,
            shared_expert_intermediate_size=None, mlp_only_layers=None, norm_topk_prob=None,
            rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25,
                                 mrope_section=[2, 1, 1], mrope_interleaved=True))),
        # Qwen3.5-MoE (Qwen3_5MoeForCausalLM, Qwen3.5-35B-A3B's language model): experts in every layer.
        "qwen3_5_moe": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM", qwen3_next_config(
            mlp_only_layers=None, norm_topk_prob=None, intermediate_size=None,
            rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25,
                                 mrope_section=[2, 1, 1], mrope_interleaved=True))),
        # Qwen3.5 as the Hub ships it (Qwen3_5ForConditionalGeneration: the language model under
        # model.language_model., a vision tower beside it); text-only prompts, the language model
        # of the qwen3_5 fixture's shape.
        "qwen3_5_mm": ("Qwen3_5Config", "Qwen3_5ForConditionalGeneration", dict(
            text_config=qwen3_next_config(
                layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention"],
                num_experts=None, num_experts_per_tok=None, moe_intermediate_size=None,
                shared_expert_intermediate_size=None, mlp_only_layers=None, norm_topk_prob=None,
                rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25,
                                     mrope_section=[2, 1, 1], mrope_interleaved=True)),
            vision_config=dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=64, out_hidden_size=64,
                               patch_size=4, temporal_patch_size=2, spatial_merge_size=2,
                               num_position_embeddings=16),
            image_token_id=250, video_token_id=251, vision_start_token_id=252, vision_end_token_id=253,
            tie_word_embeddings=False)),
        # YaRN context extension as Qwen's model cards describe it (factor 4 over an original 32
        # positions here, so the 40-token prompt runs past it), on Qwen3 and on Qwen3-Next (a
        # quarter of each head rotated).
        "qwen3_yarn": ("Qwen3Config", "Qwen3ForCausalLM", base_config(
            head_dim=32, rms_norm_eps=1e-6, max_position_embeddings=128,
            rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32,
                             "rope_theta": 10000.0})),
        "qwen3_next_yarn": ("Qwen3NextConfig", "Qwen3NextForCausalLM", qwen3_next_config(
            max_position_embeddings=128,
            rope_parameters=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=32, rope_theta=10000.0,
                                 partial_rotary_factor=0.25))),
        # Nemotron 3 (Nemotron-3-Nano-30B-A3B's blocks): mixer, MoE, attention, MoE; 8 relu2
        # experts of 32 in 2 groups (a token's experts from 1 group, scored by its top two), 2 per
        # token by a sigmoid router with a selection bias, renormalised and scaled by 2.5, beside a
        # relu2 shared expert of 48.
        "nemotron_h_moe": ("NemotronHConfig", "NemotronHForCausalLM", nemotron_h_config(
            hybrid_override_pattern="ME*E", n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
            moe_shared_expert_intermediate_size=48, n_group=2, topk_group=1, norm_topk_prob=True,
            routed_scaling_factor=2.5)),
        # LFM2 (Lfm2ForCausalLM, LiquidAI's LFM2-350M/700M/1.2B/2.6B): short-conv blocks (in_proj to
        # B|C|x, a causal depthwise conv of B*x over 3 taps, gated by C) beside GQA attention with
        # q/k head norms; the SwiGLU's width auto-adjusted (int(2 * 150 / 3) = 100, rounded up to a
        # multiple of 32: 128); tied embeddings.
        "lfm2": ("Lfm2Config", "Lfm2ForCausalLM", dict(
            vocab_size=256, hidden_size=64, intermediate_size=150, block_multiple_of=32,
            block_ffn_dim_multiplier=1.0, block_auto_adjust_ff_dim=True, num_hidden_layers=4,
            layer_types=["conv", "conv", "full_attention", "conv"], num_attention_heads=4, num_key_value_heads=2,
            conv_L_cache=3, conv_bias=False, norm_eps=1e-5, max_position_embeddings=256,
            rope_parameters=dict(rope_type="default", rope_theta=1000000.0), bos_token_id=1, eos_token_id=2,
            pad_token_id=0, tie_word_embeddings=True)),
        # LFM2-MoE (Lfm2MoeForCausalLM, LFM2-8B-A1B): a dense first layer, then 8 SwiGLU experts of 32,
        # 2 per token by a sigmoid router with a selection bias (expert_bias), renormalised and scaled
        # by 2; conv biases and a 4-tap conv; an untied head.
        "lfm2_moe": ("Lfm2MoeConfig", "Lfm2MoeForCausalLM", dict(
            vocab_size=256, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=4,
            num_dense_layers=1, num_experts=8, num_experts_per_tok=2, use_expert_bias=True,
            routed_scaling_factor=2.0, norm_topk_prob=True,
            layer_types=["conv", "full_attention", "conv", "conv"], num_attention_heads=4, num_key_value_heads=2,
            conv_L_cache=4, conv_bias=True, norm_eps=1e-5, max_position_embeddings=256,
            rope_parameters=dict(rope_type="default", rope_theta=1000000.0), bos_token_id=1, eos_token_id=2,
            pad_token_id=0, tie_word_embeddings=False)),
        # Falcon-H1 (FalconH1ForCausalLM, TII's Falcon-H1-0.5B ... 34B): every layer a Mamba2 mixer
        # (mamba_d_ssm 96 channels in 6 heads, not expand * hidden) beside GQA attention with RoPE
        # (head_dim 32, not hidden / heads, as Falcon-H1-0.5B's 64 for 1024 / 8),
        # their outputs summed, then a SwiGLU; the muP multipliers all set apart from 1 (the
        # embeddings, the mixer's input and its in_proj's z / x / B / C / dt columns, its output, the
        # attention's input, keys and output, the MLP's gate and down, the head); chunk 16.
        "falcon_h1": ("FalconH1Config", "FalconH1ForCausalLM", falcon_h1_config(head_dim=32)),
        # The same with the mixer's gated RMSNorm (mamba_rms_norm, gate before norm) and conv and
        # projection biases.
        "falcon_h1_norm": ("FalconH1Config", "FalconH1ForCausalLM", falcon_h1_config(
            mamba_rms_norm=True, mamba_norm_before_gate=False, mamba_proj_bias=True, projectors_bias=True,
            tie_word_embeddings=True)),
        # SmolLM3 (SmolLM3ForCausalLM, HuggingFaceTB/SmolLM3-3B): Llama with NoPE layers (every
        # no_rope_layer_interval-th layer has no RoPE; every 2nd here, 4th in SmolLM3-3B), tied.
        "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", base_config(
            num_hidden_layers=4, no_rope_layer_interval=2, rope_parameters=dict(rope_type="default", rope_theta=50000.0),
            tie_word_embeddings=True, pad_token_id=0)),
        # IBM Granite 3.x dense (GraniteForCausalLM): Llama with Granite's multipliers (embeddings,
        # each sublayer's output before its residual add, the softmax scale, the logits), tied.
        "granite": ("GraniteConfig", "GraniteForCausalLM", base_config(
            embedding_multiplier=3.0, residual_multiplier=0.5, attention_multiplier=0.2, logits_scaling=2.0,
            tie_word_embeddings=True)),
        # OLMo 2 (Olmo2ForCausalLM, allenai/OLMo-2-*): norms after the attention and the MLP only,
        # q/k norms over the whole projections; attention biases on.
        "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", base_config(attention_bias=True, pad_token_id=0)),
        # OLMo 3 (Olmo3ForCausalLM): OLMo 2's layer with a window of 8 on three of every four
        # layers, YaRN on the full-attention layers only (transformers 5 saves the two RoPEs by
        # layer type).
        "olmo3": ("Olmo3Config", "Olmo3ForCausalLM", base_config(
            num_hidden_layers=4, sliding_window=8, pad_token_id=0,
            rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=64))),
        # EXAONE 4.0 (Exaone4ForCausalLM, LGAI-EXAONE/EXAONE-4.0-32B): norms after each block, per-head
        # q/k norms, LLLG windows (8) whose full-attention layers have no RoPE; llama3 scaling.
        "exaone4": ("Exaone4Config", "Exaone4ForCausalLM", base_config(
            num_hidden_layers=4, sliding_window=8, sliding_window_pattern=4, head_dim=32, pad_token_id=0,
            rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                              original_max_position_embeddings=64))),
        # GLM-4-0414 dense (Glm4ForCausalLM, THUDM/GLM-4-9B-0414): four norms per layer, q/k/v
        # biases, gate|up fused, RoPE of adjacent pairs over half of each head.
        "glm4": ("Glm4Config", "Glm4ForCausalLM", base_config(head_dim=16, pad_token_id=0)),
        # GLM-4-9B-chat-hf / GLM-Edge (GlmForCausalLM): GLM-4-0414's attention and fused gate|up
        # on Llama's two norms per layer.
        "glm": ("GlmConfig", "GlmForCausalLM", base_config(head_dim=16, pad_token_id=0)),
        # Helium (HeliumForCausalLM, kyutai/helium-1-2b): Llama with RoPE of adjacent pairs, q/k/v
        # biases without o's (attention_bias) and MLP biases (mlp_bias).
        "helium": ("HeliumConfig", "HeliumForCausalLM", base_config(
            head_dim=16, attention_bias=True, mlp_bias=True, pad_token_id=0)),
        # Seed-OSS (SeedOssForCausalLM, ByteDance-Seed/Seed-OSS-36B): q/k/v, o and MLP biases.
        "seed_oss": ("SeedOssConfig", "SeedOssForCausalLM", base_config(
            head_dim=32, attention_bias=True, attention_out_bias=True, mlp_bias=True, pad_token_id=0)),
        # ERNIE 4.5 dense (Ernie4_5ForCausalLM, baidu/ERNIE-4.5-0.3B-PT): use_bias everywhere, RoPE
        # of adjacent pairs, tied.
        "ernie4_5": ("Ernie4_5Config", "Ernie4_5ForCausalLM", base_config(
            head_dim=16, use_bias=True, tie_word_embeddings=True, pad_token_id=0)),
        # Hunyuan dense (HunYuanDenseV1ForCausalLM, tencent/Hunyuan-7B-Instruct): q/k/v/o biases,
        # per-head q/k norms after RoPE, NTK-alpha RoPE (alpha 1000).
        "hunyuan_v1_dense": ("HunYuanDenseV1Config", "HunYuanDenseV1ForCausalLM", base_config(
            head_dim=16, attention_bias=True, pad_token_id=0,
            rope_scaling=dict(type="dynamic", alpha=1000.0, factor=1.0))),
        # OLMoE (OlmoeForCausalLM, allenai/OLMoE-1B-7B-0924): Llama's pre-norm layers with OLMo 2's
        # whole-projection q/k norms; every MLP 8 experts of 32, top 2, not renormalised.
        "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", base_config(
            intermediate_size=32, num_experts=8, num_experts_per_tok=2, norm_topk_prob=False, pad_token_id=0)),
        # OLMoE with clip_qkv (OlmoeConfig's; the released checkpoints leave it null): q and k
        # clamped after their norms, v after v_proj; at 1.0 about a third of the values clip. One
        # layer (the olmoe fixture has two) to stay small.
        "olmoe_clip": ("OlmoeConfig", "OlmoeForCausalLM", base_config(
            num_hidden_layers=1, intermediate_size=32, num_experts=8, num_experts_per_tok=2, norm_topk_prob=False,
            pad_token_id=0, clip_qkv=1.0)),
        # OLMo 1 (OlmoForCausalLM, allenai/OLMo-1B-hf, OLMo-7B-0424-hf): Llama's layers under
        # LayerNorms without weight or bias (eps 1e-5), tied like the 1B; clip_qkv as the 0424 / 0724
        # checkpoints set it (8.0 there; 1.0 here, so that about a third of q, k and v clip).
        "olmo": ("OlmoConfig", "OlmoForCausalLM", base_config(
            clip_qkv=1.0, tie_word_embeddings=True, pad_token_id=1)),
        # DBRX (DbrxForCausalLM, databricks/dbrx-instruct): its own config names (d_model, attn_config,
        # ffn_config), LayerNorms without bias, one fused Wqkv clamped to +-clip_qkv (1.0: about a
        # third clips; the Hub's 8), every layer 8 SwiGLU experts of 32 stored fused (w1, v1, w2),
        # top 2 over their L1 norm; theta 5e5 both where the Hub's config keeps it (attn_config)
        # and where transformers 5 reads it (rope_parameters).
        "dbrx": ("DbrxConfig", "DbrxForCausalLM", dict(
            d_model=64, n_heads=4, n_layers=2, max_seq_len=256, vocab_size=256, tie_word_embeddings=False,
            attn_config=dict(kv_n_heads=2, clip_qkv=1.0, rope_theta=500000.0),
            ffn_config=dict(ffn_hidden_size=32, moe_num_experts=8, moe_top_k=2, moe_normalize_expert_weights=1.0),
            rope_parameters=dict(rope_type="default", rope_theta=500000.0),
            bos_token_id=1, eos_token_id=2, pad_token_id=0)),
        # Apertus (ApertusForCausalLM, swiss-ai/Apertus-8B): per-head q/k norms, q/k/v/o biases, an
        # ungated MLP with xIELU (its alpha_p / alpha_n learned per layer), llama3 scaling.
        "apertus": ("ApertusConfig", "ApertusForCausalLM", base_config(
            attention_bias=True, pad_token_id=0,
            rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                              original_max_position_embeddings=64))),
        # Mistral Small 3.1 / 3.2 (Mistral3ForConditionalGeneration): its language model (Mistral,
        # head_dim apart from hidden / heads, theta 1e9) beside a tiny Pixtral tower brigade does
        # not load; untied (the top level's tie_word_embeddings is what transformers ties by).
        "mistral3": ("Mistral3Config", "Mistral3ForConditionalGeneration", dict(
            text_config=dict(model_type="mistral", vocab_size=256, hidden_size=64, intermediate_size=128,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                             max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=1e9, sliding_window=None,
                             bos_token_id=1, eos_token_id=2, pad_token_id=0),
            vision_config=dict(model_type="pixtral", hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                               num_attention_heads=2, head_dim=16, image_size=56, patch_size=14),
            image_token_index=10, tie_word_embeddings=False)),
        # Ministral 3 (Mistral3ForConditionalGeneration whose text_config is a Ministral3Config:
        # Ministral-3-3B/8B/14B, Devstral Small 2): Mistral's layer with YaRN and, after RoPE on every
        # layer, the query temperature 1 + beta * log(1 + floor(pos / original_max)); original_max 8
        # and beta 0.5 here so that it steps within the prompts. Tied, as the 3B.
        "ministral3": ("Mistral3Config", "Mistral3ForConditionalGeneration", dict(
            text_config=dict(model_type="ministral3", vocab_size=256, hidden_size=64, intermediate_size=128,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                             max_position_embeddings=256, rms_norm_eps=1e-5, sliding_window=None,
                             bos_token_id=1, eos_token_id=2, pad_token_id=0,
                             rope_parameters=dict(rope_type="yarn", rope_theta=1e6, factor=16.0,
                                                  original_max_position_embeddings=8, beta_fast=32.0, beta_slow=1.0,
                                                  mscale=1.0, mscale_all_dim=1.0, llama_4_scaling_beta=0.5)),
            vision_config=dict(model_type="pixtral", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                               num_attention_heads=2, head_dim=8, image_size=28, patch_size=14),
            image_token_index=10, tie_word_embeddings=True)),
        # Ministral3ForCausalLM alone, with a sliding window of 16 (Ministral3Attention passes it).
        "ministral3_text": ("Ministral3Config", "Ministral3ForCausalLM", base_config(
            head_dim=16, sliding_window=16, pad_token_id=0,
            rope_parameters=dict(rope_type="yarn", rope_theta=1e6, factor=4.0, original_max_position_embeddings=16,
                                 beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0,
                                 llama_4_scaling_beta=0.3))),
        # ERNIE 4.5 MoE (Ernie4_5_MoeForCausalLM, baidu/ERNIE-4.5-21B-A3B-PT): layer 0 dense, then
        # 8 experts of 32, top 2 chosen on softmax + e_score_correction_bias and renormalised,
        # beside one shared expert; pair-wise RoPE, tied.
        "ernie4_5_moe": ("Ernie4_5_MoeConfig", "Ernie4_5_MoeForCausalLM", base_config(
            num_hidden_layers=3, head_dim=16, moe_num_experts=8, moe_k=2, moe_intermediate_size=32,
            moe_num_shared_experts=1, moe_layer_start_index=1, tie_word_embeddings=True, pad_token_id=0)),
        # Llama 4 (Llama4ForConditionalGeneration, Llama-4-Scout / Maverick): its language model beside
        # a tiny vision tower brigade does not load. Maverick's interleaving (layers 1 and 3 sparse:
        # 4 experts of 48, top 1, sigmoid score applied to the expert's input, a shared expert; layers
        # 0 and 2 dense of intermediate_size_mlp), RoPE of adjacent pairs with llama3 scaling and
        # weightless q/k RMSNorms after it on layers 0 and 2, chunked attention (chunks of 8) there;
        # layers 1 and 3 without RoPE, full attention, their queries scaled by the temperature
        # tuning (floor_scale 4, so it moves within the prompts).
        "llama4": ("Llama4Config", "Llama4ForConditionalGeneration", dict(
            text_config=llama4_text_config(interleave_moe_layer_step=2),
            vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                               image_size=28, patch_size=14, vision_output_dim=32, projector_input_dim=32,
                               projector_output_dim=64, rope_parameters=dict(rope_type="default", rope_theta=10000.0)),
            tie_word_embeddings=False)),
        # Llama4ForCausalLM alone (the text model's names), every layer sparse, top 2 (the score on
        # each expert's input), no q/k norms, attention biases.
        "llama4_text": ("Llama4TextConfig", "Llama4ForCausalLM", llama4_text_config(
            num_experts_per_tok=2, use_qk_norm=False, attention_bias=True)),
        # MiniMax-M2 (MiniMaxM2ForCausalLM, MiniMaxAI/MiniMax-M2 / M2.1): q/k RMSNorms over the whole
        # projections before a partial RoPE (rotary_dim 16 of head_dim 32); every layer 8 experts of
        # 32, top 2 chosen on sigmoid + e_score_correction_bias (random here; zeros at init) and
        # renormalised; Mixtral's Hub names.
        "minimax_m2": ("MiniMaxM2Config", "MiniMaxM2ForCausalLM", base_config(
            head_dim=32, intermediate_size=32, num_local_experts=8, num_experts_per_tok=2, pad_token_id=0,
            rope_parameters=dict(rope_type="default", rope_theta=5000000.0, partial_rotary_factor=0.5))),
        # Command R+ (CohereForCausalLM, CohereForAI/c4ai-command-r-plus): LayerNorms without bias, the
        # attention and the MLP side by side on one norm, per-head q/k LayerNorms each with its own
        # weights (use_qk_norm), RoPE of adjacent pairs, q/k/v/o biases (attention_bias; Command R
        # has none), tied, logits x logit_scale.
        "cohere": ("CohereConfig", "CohereForCausalLM", cohere_config(
            use_qk_norm=True, attention_bias=True, logit_scale=0.25)),
        # Command R7B / Command A (Cohere2ForCausalLM, CohereLabs/c4ai-command-r7b-12-2024): Command
        # R's layer, windows of 8 on three of every four layers (sliding_window_pattern 4), the fourth
        # full attention without RoPE.
        "cohere2": ("Cohere2Config", "Cohere2ForCausalLM", cohere_config(
            num_hidden_layers=4, sliding_window=8, logit_scale=0.125, rope_theta=50000.0)),
        # IBM Granite 3.x MoE (GraniteMoeForCausalLM, ibm-granite/granite-3.1-3b-a800m): Granite's
        # multipliers, every layer 8 experts of 32 fused as input_linear / output_linear, the top 2
        # logits softmaxed among themselves; tied.
        "granitemoe": ("GraniteMoeConfig", "GraniteMoeForCausalLM", base_config(
            intermediate_size=32, num_local_experts=8, num_experts_per_tok=2, embedding_multiplier=3.0,
            residual_multiplier=0.5, attention_multiplier=0.2, logits_scaling=2.0, tie_word_embeddings=True,
            pad_token_id=0)),
        # Tencent Hunyuan MoE (HunYuanMoEV1ForCausalLM, tencent/Hunyuan-A13B-Instruct): Hunyuan dense's
        # attention (per-head q/k norms after RoPE, NTK alpha 1000), every layer 8 experts of 32, the
        # top 2 of their softmax renormalised (moe_topk as the Hub's per-layer list), beside a shared
        # SwiGLU of intermediate_size.
        "hunyuan_v1_moe": ("HunYuanMoEV1Config", "HunYuanMoEV1ForCausalLM", base_config(
            head_dim=16, intermediate_size=32, num_experts=8, moe_topk=[2, 2], pad_token_id=0,
            rope_scaling=dict(type="dynamic", alpha=1000.0, factor=1.0))),
        # GraniteMoeSharedForCausalLM (Granite's MoE with a shared expert): the same experts beside an
        # ungated shared SwiGLU of 48 (shared_mlp), untied.
        "granitemoeshared": ("GraniteMoeSharedConfig", "GraniteMoeSharedForCausalLM", base_config(
            intermediate_size=32, num_local_experts=8, num_experts_per_tok=2, shared_intermediate_size=48,
            embedding_multiplier=2.0, residual_multiplier=0.7, attention_multiplier=0.25, logits_scaling=1.5,
            pad_token_id=0)),
        # rednote-hilab dots.llm1 (Dots1ForCausalLM): Qwen3's attention (per-head q/k norms) and
        # DeepSeek-V3's MoE: layer 0 a dense SwiGLU of 96, then 8 experts of 16 in 2 groups (the top
        # group by its two best), top 2 by sigmoid + e_score_correction_bias, renormalised, times 2.5,
        # beside 2 shared experts; windows of 8 from layer max_window_layers = 2 on (transformers
        # slides them whatever use_sliding_window says); the Hub config's scoring_func / topk_method.
        "dots1": ("Dots1Config", "Dots1ForCausalLM", base_config(
            num_hidden_layers=3, intermediate_size=96, n_routed_experts=8, num_experts_per_tok=2,
            moe_intermediate_size=16, n_shared_experts=2, first_k_dense_replace=1, n_group=2, topk_group=1,
            norm_topk_prob=True, routed_scaling_factor=2.5, sliding_window=8, max_window_layers=2,
            use_sliding_window=False, scoring_func="sigmoid", topk_method="noaux_tc", moe_layer_freq=1,
            pad_token_id=0)),
        # Microsoft Phi-3.5-MoE (PhimoeForCausalLM, microsoft/Phi-3.5-MoE-instruct): Mixtral's layer
        # (a window of 8 the long prompt crosses) with q/k/v/o biases, LayerNorms with biases, a
        # biased lm_head, longrope whose cos/sin are scaled by short_mscale (1.15; the context is the
        # original one, so the short factors and mscale apply), every layer 8 experts of 32 routed by
        # sparsemixer: router_jitter_noise 0.3 (0.01 in the model) so that with these logits each
        # token's two masks drop some experts and keep others.
        "phimoe": ("PhimoeConfig", "PhimoeForCausalLM", base_config(
            intermediate_size=32, num_local_experts=8, num_experts_per_tok=2, sliding_window=8,
            attention_bias=True, lm_head_bias=True, router_jitter_noise=0.3, pad_token_id=0,
            rope_parameters=dict(rope_type="longrope", rope_theta=10000.0, original_max_position_embeddings=256,
                                 short_factor=[1.0, 1.2, 1.5, 1.9, 2.4, 3.0, 3.7, 4.5],
                                 long_factor=[1.0, 1.5, 2.5, 4.0, 6.0, 8.5, 11.5, 15.0],
                                 short_mscale=1.15, long_mscale=1.3))),
        # Arcee Trinity (AfmoeForCausalLM, arcee-ai/Trinity-Mini): per-head q/k norms, an output gate
        # (sigmoid(gate_proj x) times the attention output), windows of 8 (the long prompt crosses
        # them) with RoPE on layers 0-2, layer 3 full attention without RoPE; Gemma's four norms;
        # embeddings times sqrt(hidden) (mup_enabled, as the Hub's configs); hidden 32, heads of 8; layer
        # 0 a dense SwiGLU of 64, then 8 experts of 16, top 2 by sigmoid + expert_bias, renormalised, times route_scale
        # 2.5, beside 2 shared experts; the Hub config's route_norm / score_func / n_group fields.
        "afmoe": ("AfmoeConfig", "AfmoeForCausalLM", base_config(
            num_hidden_layers=4, hidden_size=32, head_dim=8, intermediate_size=64, num_experts=8, num_experts_per_tok=2,
            moe_intermediate_size=16, num_shared_experts=2, num_dense_layers=1, route_scale=2.5,
            route_norm=True, score_func="sigmoid", n_group=1, topk_group=1, sliding_window=8,
            global_attn_every_n_layers=4, mup_enabled=True, pad_token_id=0)),
        # Arcee AFM-4.5B (ArceeForCausalLM, arcee-ai/AFM-4.5B): Llama's layer with an ungated relu2 MLP
        # (up_proj, relu(x)^2, down_proj) and YaRN as the Hub's config has it (factor 4 here); hidden 32.
        "arcee": ("ArceeConfig", "ArceeForCausalLM", base_config(
            hidden_size=32, intermediate_size=64, head_dim=8, hidden_act="relu2", pad_token_id=0,
            rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                 original_max_position_embeddings=64, beta_fast=32.0, beta_slow=1.0))),
        # Mistral Small 4 as the Hub ships it (Mistral3ForConditionalGeneration whose text_config is
        # a Mistral4Config; llama.cpp's converter registers no Mistral4ForCausalLM): DeepSeek-V3's
        # MLA (q_lora_rank, rope_interleave) with YaRN, and on all of each query (nope and rope
        # parts, after RoPE) the temperature 1 + beta * log(1 + floor(pos / original_max)): original_max
        # 8 and beta 0.5 so that it steps within the prompts; layer 0 dense, layer 1 8 experts of 16
        # in 2 groups, softmax scores (Mistral4TopkRouter: no selection bias) with the top group by its
        # two best, top 2 renormalised, times 1.5, one shared expert. Untied, as Mistral Small 4.
        "mistral4": ("Mistral3Config", "Mistral3ForConditionalGeneration", dict(
            text_config=dict(model_type="mistral4", vocab_size=128, hidden_size=64, intermediate_size=64,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=24,
                             kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                             n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1,
                             first_k_dense_replace=1, n_group=2, topk_group=1, norm_topk_prob=True,
                             routed_scaling_factor=1.5, max_position_embeddings=256, rms_norm_eps=1e-6,
                             bos_token_id=1, eos_token_id=2, pad_token_id=0,
                             rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                                  original_max_position_embeddings=8, max_position_embeddings=256,
                                                  beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0,
                                                  llama_4_scaling_beta=0.5)),
            vision_config=dict(model_type="pixtral", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                               num_attention_heads=2, head_dim=8, image_size=28, patch_size=14),
            image_token_index=10, tie_word_embeddings=False)),
        # GLM-4.7-Flash (Glm4MoeLiteForCausalLM): DeepSeek-V3's MLA (q_lora_rank, a v_head_dim other
        # than qk_nope_head_dim as its 256 / 192) beside GLM-4.5's MoE: mlp_layer_types layer 0 dense,
        # then 8 experts of 16, top 2 by sigmoid + e_score_correction_bias, renormalised, times 1.8,
        # one shared expert; rms_norm_eps 1e-5 (the latent norms stay at transformers' 1e-6).
        # first_k_dense_replace, which transformers ignores, is what llama.cpp's converter reads.
        "glm4_moe_lite": ("Glm4MoeLiteConfig", "Glm4MoeLiteForCausalLM", base_config(
            vocab_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, intermediate_size=64,
            q_lora_rank=24, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=24,
            n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1,
            mlp_layer_types=["dense", "sparse"], first_k_dense_replace=1, routed_scaling_factor=1.8,
            norm_topk_prob=True, rms_norm_eps=1e-5, bos_token_id=0, eos_token_id=1, pad_token_id=2,
            rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
        # Xiaomi MiMo-V2-Flash (MiMoV2FlashForCausalLM): layers 0 and 3 full attention over 1 KV head,
        # layers 1-2 windows of 8 (the long prompt crosses them) over 2 KV heads (SWA layers double
        # them) with a sink logit per head; q/k heads of 24, v heads of 16, values times 0.707;
        # RoPE (halves) over the first int(24 * 0.334) = 8 dims, theta 5e4 on full and 1e4 on
        # sliding layers; layer 0 a dense SwiGLU of 96, then 8 experts of 16 in 2 groups (the top
        # group by its two best), top 2 by sigmoid + e_score_correction_bias, renormalised, times
        # 2.5, no shared experts; hidden 32.
        "mimo_v2_flash": ("MiMoV2FlashConfig", "MiMoV2FlashForCausalLM", base_config(
            num_hidden_layers=4, hidden_size=32, num_attention_heads=4, num_key_value_heads=1, head_dim=24,
            v_head_dim=16, intermediate_size=96, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16,
            n_group=2, topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5, sliding_window=8,
            attention_value_scale=0.707, pad_token_id=0,
            layer_types=["full_attention", "sliding_attention", "sliding_attention", "full_attention"],
            mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
            rope_parameters={"full_attention": dict(rope_type="default", rope_theta=50000.0, partial_rotary_factor=0.334),
                             "sliding_attention": dict(rope_type="default", rope_theta=10000.0,
                                                       partial_rotary_factor=0.334)})),
        # LG K-EXAONE (ExaoneMoeForCausalLM): EXAONE 4's attention (per-head q/k norms, windows of 8
        # with RoPE on layers 0-2, layer 3 full attention without RoPE) in a pre-norm layer (OLMoE's:
        # input_layernorm, post_attention_layernorm before the MLP); layer 0 a dense SwiGLU of 64,
        # then 8 experts of 16 in 2 groups (the top group by its two best), top 2 by sigmoid +
        # e_score_correction_bias, renormalised, times 2.5, beside one shared expert; hidden 32.
        "exaone_moe": ("ExaoneMoeConfig", "ExaoneMoeForCausalLM", base_config(
            num_hidden_layers=4, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
            intermediate_size=64, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, num_shared_experts=1,
            first_k_dense_replace=1, n_group=2, topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5,
            sliding_window=8, sliding_window_pattern=4, pad_token_id=0)),
        # DeepSeek-V3.2 (DeepseekV32ForCausalLM): V3's MLA and routing plus the DSA lightning
        # indexer (8 index heads of 64, half-split RoPE over the first 8 dims, LayerNorm'd key; 64,
        # llama.cpp's smallest Hadamard rotation of the keys, so its converter's file runs there too)
        # keeping the top 5 keys per query, fewer than the prompts, so the sparsity moves the logits.
        # make_dsa checks the choices are clear and adds transformers' dense logits (topk past the prompt).
        "deepseek_v32": ("DeepseekV32Config", "DeepseekV32ForCausalLM", deepseek_v3_config(
            num_hidden_layers=2, bos_token_id=0, eos_token_id=1, pad_token_id=2, kv_lora_rank=64,
            index_topk=5, index_head_dim=64, index_n_heads=8)),
        # GLM-5 (GlmMoeDsaForCausalLM): the indexer with interleaved RoPE, layer 1 "shared" (it reuses
        # layer 0's selection), layer 2 its own; GLM's defaults otherwise (no groups, theta 1e6).
        "glm_moe_dsa": ("GlmMoeDsaConfig", "GlmMoeDsaForCausalLM", deepseek_config(
            hidden_size=48, intermediate_size=64, q_lora_rank=24, v_head_dim=24, n_group=1, topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5,
            rms_norm_eps=1e-5, bos_token_id=0, eos_token_id=1, pad_token_id=2, first_k_dense_replace=1,
            kv_lora_rank=64, index_topk=6, index_head_dim=64, index_n_heads=8, indexer_types=["full", "shared", "full"],
            rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
        # Kimi Linear (KimiLinearForCausalLM, Kimi-Linear-48B-A3B's layers, its config names):
        # KDA at layers 1 and 3 (1-based, linear_attn_config as the Hub's: 2 heads of 16, 4-tap
        # short convs on q, k and v, the low-rank forget gate's per-channel decay, the sigmoid-gated
        # output norm) and MLA without RoPE at layer 2 (2 heads, as many as KDA's, as llama.cpp's
        # kimi-linear needs; no q_lora_rank); layer 0 a dense SwiGLU (first_k_dense_replace), then 8
        # experts in one group (the Hub's), top 2 by sigmoid + the selection bias, renormalised,
        # times 2.5, beside one shared expert; the Hub config's mla_use_nope and
        # moe_router_activation_func (which transformers keeps as attributes). kda_op.json:
        # Backend::kda's reference, transformers' recurrent_kimi_delta_attention on random inputs
        # (make_kimi_linear).
        "kimi_linear": ("KimiLinearConfig", "KimiLinearForCausalLM", dict(
            vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
            num_key_value_heads=2, q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
            v_head_dim=16, linear_attn_config=dict(head_dim=16, num_heads=2, short_conv_kernel_size=4,
                                                   full_attn_layers=[2], kda_layers=[1, 3]),
            num_experts=8, num_experts_per_token=2, moe_intermediate_size=16, num_shared_experts=1,
            first_k_dense_replace=1, num_expert_group=1, topk_group=1, moe_renormalize=True,
            routed_scaling_factor=2.5, rms_norm_eps=1e-5, model_max_length=256, bos_token_id=1, eos_token_id=2,
            pad_token_id=0, tie_word_embeddings=False, mla_use_nope=True, moe_router_activation_func="sigmoid")),
        # Gemma 1 (GemmaForCausalLM, google/gemma-2b): Gemma 2's layer without softcaps, post-norms or
        # windows: RMSNorms scaling by 1 + w, embeddings times sqrt(hidden), a gelu_pytorch_tanh gate
        # (the released configs' legacy hidden_act "gelu"), heads of 16 over hidden 32 (head_dim from
        # config.json), MQA as gemma-2b (4 heads over 1), tied.
        "gemma": ("GemmaConfig", "GemmaForCausalLM", base_config(
            hidden_size=32, intermediate_size=64, head_dim=16, num_key_value_heads=1, hidden_act="gelu", rms_norm_eps=1e-6, tie_word_embeddings=True,
            pad_token_id=0)),
        # StarCoder2 (Starcoder2ForCausalLM, bigcode/starcoder2-3b): LayerNorms with biases, biases on
        # q/k/v/o and the ungated MLP c_fc -> gelu_pytorch_tanh -> c_proj, GQA 4 over 2 (heads of 8), a
        # window of 8 on every layer (the long prompt crosses it), tied; hidden 32.
        "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", base_config(
            hidden_size=32, intermediate_size=64, sliding_window=8, use_bias=True, norm_epsilon=1e-5, hidden_act="gelu_pytorch_tanh",
            tie_word_embeddings=True, pad_token_id=0)),
        # Phi-2 (PhiForCausalLM, microsoft/phi-2): one biased LayerNorm before the attention and the MLP
        # side by side, q/k/v/dense biases, RoPE over the first int(20 * 0.4) = 8 dims of each head,
        # fc1 -> gelu_new -> fc2 with biases (4 x hidden, as llama.cpp's converter assumes), a final
        # biased LayerNorm and a biased lm_head; hidden 40 in 2 heads of 20, untied.
        "phi": ("PhiConfig", "PhiForCausalLM", base_config(
            hidden_size=40, intermediate_size=160, num_attention_heads=2, num_key_value_heads=2, partial_rotary_factor=0.4,
            hidden_act="gelu_new", layer_norm_eps=1e-5, pad_token_id=0)),
        # StableLM 2 1.6B (StableLmForCausalLM, stabilityai/stablelm-2-1_6b): biased LayerNorms, q/k/v
        # biases, RoPE over a quarter of each head (4 of 16), a SiLU-gated MLP; hidden 32, 2 heads over 1.
        "stablelm": ("StableLmConfig", "StableLmForCausalLM", base_config(
            hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1, partial_rotary_factor=0.25, use_qkv_bias=True, layer_norm_eps=1e-5, pad_token_id=0)),
        # StableLM 2 12B's layer: per-head q/k LayerNorms (each head its own weights) and the parallel
        # residual (attention and MLP both off input_layernorm), no q/k/v biases; RoPE over half of
        # each head of 8; hidden 32, GQA 4 over 2.
        "stablelm_parallel": ("StableLmConfig", "StableLmForCausalLM", base_config(
            hidden_size=32, intermediate_size=64, partial_rotary_factor=0.5, qk_layernorm=True, use_parallel_residual=True, layer_norm_eps=1e-5,
            pad_token_id=0)),
        # Jais 2 (Jais2ForCausalLM, inceptionai/Jais-2-8B-Chat): Llama's layer with biased LayerNorms,
        # q/k/v/o biases, an ungated relu2 MLP with biases (Jais2Config's defaults); hidden 32, GQA 4 over 2.
        "jais2": ("Jais2Config", "Jais2ForCausalLM", layer_norm_config(
            hidden_size=32, intermediate_size=64, hidden_act="relu2", attention_bias=True, mlp_bias=True, pad_token_id=0)),
        # Nemotron-4 / Minitron (NemotronForCausalLM, nvidia/Minitron-4B-Base): LayerNorm1P (biased,
        # scaling by 1 + w: its weights near 0 as trained), RoPE over half of each head (4 of 8), an
        # ungated relu2 MLP, no biases; hidden 32, GQA 4 over 2.
        "nemotron": ("NemotronConfig", "NemotronForCausalLM", layer_norm_config(
            hidden_size=32, intermediate_size=64, hidden_act="relu2", partial_rotary_factor=0.5,
            pad_token_id=0, eps_key="norm_eps")),
        # MiniMax-Text-01 / M1 (MiniMaxForCausalLM): lightning attention (silu(qkv_proj) per head
        # q|k|v of 8, S = exp(-slope) S + k^T v, o = q S, the RMSNorm over all heads, times
        # sigmoid(output_gate)) at layers 0 and 2, GQA softmax attention (4 heads over 2, RoPE over
        # whole heads) at 1 and 3, each then 4 Mixtral experts (top 2); the residual scalings
        # alpha (on the normed input) and beta (on the block's output) all different from 1.
        # block_size 16: the 40-token prompt runs transformers' blocked prefill over 3 blocks.
        "minimax": ("MiniMaxConfig", "MiniMaxForCausalLM", base_config(
            vocab_size=128, hidden_size=32, intermediate_size=32, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2, block_size=16,
            layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
            full_attn_alpha_factor=1.1, full_attn_beta_factor=0.9, linear_attn_alpha_factor=0.8,
            linear_attn_beta_factor=1.2, mlp_alpha_factor=0.7, mlp_beta_factor=1.3, pad_token_id=0)),
        # LongCat-Flash (LongcatFlashForCausalLM): 2 layers, each two MLA blocks (4 heads, q_lora 24,
        # latent 16, nope/rope/v 8/8/8: LoRA scalings sqrt(32/24) and sqrt(2)), two dense SwiGLUs of
        # 48 and the shortcut MoE: 8 experts of 16 and 4 zero experts, top 3 by softmax +
        # e_score_correction_bias, times 2 (make_longcat_flash checks tokens route to both kinds).
        "longcat_flash": ("LongcatFlashConfig", "LongcatFlashForCausalLM", dict(
            vocab_size=128, hidden_size=32, num_layers=2, num_attention_heads=4, num_key_value_heads=4,
            ffn_hidden_size=48, q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, head_dim=8,
            v_head_dim=8, n_routed_experts=8, zero_expert_num=4, moe_topk=3, expert_ffn_hidden_size=16,
            routed_scaling_factor=2.0, max_position_embeddings=256, rms_norm_eps=1e-5,
            rope_parameters=dict(rope_type="default", rope_theta=10000.0), bos_token_id=1, eos_token_id=2,
            pad_token_id=0, tie_word_embeddings=False)),
        # EXAONE 3.5 (ExaoneForCausalLM, LGAI-EXAONE/EXAONE-3.5-2.4B-Instruct; transformers runs it as
        # LlamaForCausalLM): the Hub's tensor names (transformer.h.N.attn.attention.q_proj, ln_1, c_fc_0
        # ...) and config names (num_layers, layer_norm_epsilon, activation_function: exaone_hub_config),
        # llama3 RoPE scaling over heads of 16 (all three bands, as llama_rope_llama3), 2 heads over 1, tied.
        "exaone": ("ExaoneConfig", "LlamaForCausalLM", base_config(
            hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True, pad_token_id=0, max_position_embeddings=2048,
            rope_parameters=dict(rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0,
                                 high_freq_factor=4.0, original_max_position_embeddings=256))),
        # FlexOlmo (FlexOlmoForCausalLM, allenai/FlexOlmo-7x7B-1T): OLMo 2's layer (no norm before the
        # attention or the MLP; each block's output RMSNormed; whole-projection q/k RMSNorms) with
        # OLMoE's experts: 4 of 16 wide, softmax top 2 not renormalised (FlexOlmoConfig's
        # norm_topk_prob false); hidden 32, GQA 4 over 2.
        "flex_olmo": ("FlexOlmoConfig", "FlexOlmoForCausalLM", base_config(
            hidden_size=32, intermediate_size=16, num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
            rms_norm_eps=1e-6, pad_token_id=0, eos_token_id=2)),
        # The MTP modules of GLM-4.7-Flash, DeepSeek-V3.2 and GLM-5 (num_nextn_predict_layers 1,
        # model.layers.2.*: enorm, hnorm, eh_proj, shared_head.norm and a sparse decoder layer of the
        # model's own class, with its own DSA indexer for V3.2 / GLM-5) beside a two-layer target
        # (0 dense, 1 sparse) at hidden 32; expected.json as deepseek_v3_mtp's (make_mtp). The DSA
        # ones keep 5 keys per query, fewer than the sequences, from seeds whose choices (the
        # module's too) are clear; GLM-5's layer 1 is "shared".
        "glm4_moe_lite_mtp": ("Glm4MoeLiteConfig", "Glm4MoeLiteForCausalLM", base_config(
            vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
            intermediate_size=64, q_lora_rank=24, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
            v_head_dim=24, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1,
            mlp_layer_types=["dense", "sparse"], first_k_dense_replace=1, routed_scaling_factor=1.8,
            norm_topk_prob=True, rms_norm_eps=1e-5, bos_token_id=0, eos_token_id=1, pad_token_id=2,
            num_nextn_predict_layers=1, rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
        "deepseek_v32_mtp": ("DeepseekV32Config", "DeepseekV32ForCausalLM", deepseek_v3_config(
            num_hidden_layers=2, hidden_size=32, intermediate_size=64, bos_token_id=0, eos_token_id=1, pad_token_id=2,
            index_topk=5, index_head_dim=32, index_n_heads=8, mlp_layer_types=["dense", "sparse"],
            num_nextn_predict_layers=1)),
        "glm_moe_dsa_mtp": ("GlmMoeDsaConfig", "GlmMoeDsaForCausalLM", deepseek_config(
            num_hidden_layers=2, hidden_size=32, intermediate_size=64, q_lora_rank=24, v_head_dim=24, n_group=1,
            topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5, rms_norm_eps=1e-5, bos_token_id=0,
            eos_token_id=1, pad_token_id=2, first_k_dense_replace=1, index_topk=5, index_head_dim=32,
            index_n_heads=8, indexer_types=["full", "shared"], mlp_layer_types=["dense", "sparse"],
            num_nextn_predict_layers=1, rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
        # The classic GPT decoders (models/gpt_decoders_config.h; make_gpt: seeds of their own, GPT_SEEDS).
        # GPT-NeoX / Pythia (GPTNeoXForCausalLM, EleutherAI/pythia-70m): query_key_value fused per head
        # [heads, 3, head_dim], biases everywhere, RoPE (NeoX halves) over rotary_pct of each head
        # (4 of 8), exact-erf gelu, the parallel residual with its two LayerNorms (x + attn(ln1(x)) +
        # mlp(ln2(x))), embed_out untied; hidden 32, 4 heads. The Hub's names rotary_pct /
        # rotary_emb_base (make_gpt writes them back as Pythia's config.json has them).
        "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", dict(
            vocab_size=256, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
            hidden_act="gelu", rotary_pct=0.5, rotary_emb_base=10000, max_position_embeddings=256, layer_norm_eps=1e-5,
            use_parallel_residual=True, bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)),
        # GPT-NeoX's sequential layer (use_parallel_residual false) without biases (attention_bias false),
        # a quarter of each head rotated (2 of 8).
        "gpt_neox_sequential": ("GPTNeoXConfig", "GPTNeoXForCausalLM", dict(
            vocab_size=256, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            hidden_act="gelu", rotary_pct=0.25, rotary_emb_base=10000, max_position_embeddings=256, layer_norm_eps=1e-5,
            use_parallel_residual=False, attention_bias=False, bos_token_id=1, eos_token_id=2, pad_token_id=0,
            tie_word_embeddings=False)),
        # GPT-J (GPTJForCausalLM, EleutherAI/gpt-j-6b): one LayerNorm before the attention and the MLP side
        # by side, q/k/v/out without biases, GPT-J's RoPE (adjacent pairs, rotate_every_two) over the
        # first rotary_dim 4 of each head of 8, fc_in -> gelu_new -> fc_out with biases (n_inner null: 4
        # x hidden), lm_head with a bias, untied; hidden 32, 4 heads.
        "gptj": ("GPTJConfig", "GPTJForCausalLM", dict(
            vocab_size=256, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=256, activation_function="gelu_new",
            layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)),
        # GPT-2 (GPT2LMHeadModel, openai-community/gpt2): Conv1D weights (stored [in, out]), c_attn q|k|v,
        # learned absolute positions (wpe) over n_positions 64, biased LayerNorms, gelu_new, tied.
        "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(
            vocab_size=256, n_embd=32, n_layer=2, n_head=4, n_positions=64, activation_function="gelu_new",
            layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=0)),
        # StarCoder 1 / SantaCoder (GPTBigCodeForCausalLM, bigcode/starcoderbase-1b): MQA (multi_query:
        # c_attn rows q [hidden], then one k and one v head), wpe over 64 positions, gelu_pytorch_tanh,
        # n_inner 64, tied; hidden 32, 4 heads of 8.
        "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", dict(
            vocab_size=256, n_embd=32, n_layer=2, n_head=4, n_inner=64, n_positions=64, multi_query=True,
            activation_function="gelu_pytorch_tanh", layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2,
            pad_token_id=0)),
        # GPTBigCode without multi_query: c_attn per head [heads, 3, head_dim], as GPT-NeoX's.
        "gpt_bigcode_mha": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", dict(
            vocab_size=256, n_embd=32, n_layer=2, n_head=4, n_inner=64, n_positions=64, multi_query=False,
            activation_function="gelu_pytorch_tanh", layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2,
            pad_token_id=0)),
        # Gemma 3n (Gemma3nForCausalLM, google/gemma-3n-E2B's text model at tiny size): AltUp over 4
        # streams, LAuReL of rank 8, per-layer embeddings of 8 per layer from a table of 200 rows
        # (ids >= 100 read row 0, as transformers does), 6 layers sliding/full with a window of 8,
        # the last 2 layers reusing layers 3 (sliding) and 2 (full)'s K/V, gaussian top-k sparsity
        # 0.95 on layers 0 and 4, per-layer MLP widths, logits soft-capped at 10, tied.
        "gemma3n": ("Gemma3nTextConfig", "Gemma3nForCausalLM", gemma3n_config()),
        # Gemma3nForConditionalGeneration's layout (model.language_model.*, embed_vision / embed_audio
        # beside it; the towers need timm, absent here): made by make_gemma3n_mm. 4 layers, the last
        # (sliding) reusing layer 1's K/V; text ids [0, 128), the embedders' [128, 144).
        "gemma3n_mm": ("Gemma3nTextConfig", "Gemma3nForCausalLM", gemma3n_config(
            vocab_size=144, vocab_size_per_layer_input=128, num_hidden_layers=4, intermediate_size=64,
            layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
            num_kv_shared_layers=1, activation_sparsity_pattern=[0.95, 0.0, 0.0, 0.0])),
        # InternLM 2 (InternLM2ForCausalLM, remote code; internlm2_5-7b-chat's layout at tiny size):
        # the LlamaForCausalLM it equals, saved under InternLM2's names with q|k|v fused per KV
        # group (make_internlm): 8 query heads over 2 KV groups, theta 1e6, dynamic NTK scaling
        # factor 2 (exact below max_position_embeddings), no biases, untied.
        "internlm2": ("LlamaConfig", "LlamaForCausalLM", base_config(
            num_attention_heads=8, num_key_value_heads=2, rope_theta=1000000.0,
            rope_scaling={"rope_type": "dynamic", "factor": 2.0})),
        # InternLM2Config's bias (its default, true): wqkv's and wo's biases; 4 heads over 4 KV
        # groups, one layer.
        "internlm2_bias": ("LlamaConfig", "LlamaForCausalLM", base_config(
            num_hidden_layers=1, num_key_value_heads=4, attention_bias=True)),
        # InternLM 3 (InternLM3ForCausalLM, remote code; internlm3-8b-instruct's layout): Llama's names
        # with head_dim 32 over hidden 64, qkv_bias for q/k/v, bias for o_proj and the MLP, dynamic
        # NTK scaling factor 6 (make_internlm writes InternLM3's config.json).
        "internlm3": ("LlamaConfig", "LlamaForCausalLM", base_config(
            head_dim=32, attention_bias=True, mlp_bias=True, rope_theta=50000000.0,
            rope_scaling={"rope_type": "dynamic", "factor": 6.0})),
        # GLM-4-9B-chat as THUDM ships it (ChatGLMModel, remote code): the GlmForCausalLM that
        # transformers' convert_glm_weights_to_hf.py makes of it, written back in ChatGLM's layout
        # (make_chatglm): 4 heads over 2 KV groups (multi_query_group_num), q/k/v biases, rope_ratio
        # 500 (theta 5e6), layernorm_epsilon 1.5625e-07 as glm-4-9b-chat's.
        "chatglm": ("GlmConfig", "GlmForCausalLM", base_config(
            head_dim=16, pad_token_id=0, rope_theta=5000000.0, rms_norm_eps=1.5625e-07)),
        # MiniCPM (MiniCPMForCausalLM, remote code; MiniCPM-2B's layout at tiny size): the
        # GraniteForCausalLM whose multipliers are MiniCPM's muP scalings (make_minicpm): scale_emb
        # 12, scale_depth 1.4 over 2 layers, dim_model_base 16 (logits / 4), tied; theta 1e4.
        "minicpm": ("GraniteConfig", "GraniteForCausalLM", base_config(
            tie_word_embeddings=True, embedding_multiplier=12.0, residual_multiplier=1.4 / 2 ** 0.5,
            logits_scaling=4.0, attention_multiplier=16 ** -0.5)),
        # MiniCPM4's longrope (max_position_embeddings equal to original_max_position_embeddings, as
        # MiniCPM4-8B's 32768: the short factors at every position, attention factor 1), untied.
        "minicpm_longrope": ("GraniteConfig", "GraniteForCausalLM", base_config(
            embedding_multiplier=12.0,
            residual_multiplier=1.4 / 2 ** 0.5, logits_scaling=4.0, attention_multiplier=16 ** -0.5,
            rope_scaling={"rope_type": "longrope", "original_max_position_embeddings": 256,
                          "short_factor": [1.0 + 0.37 * i for i in range(8)],
                          "long_factor": [2.0 + 0.5 * i for i in range(8)]})),
        # Meta's CWM (CwmForCausalLM, facebook/cwm): Llama's layer, windows of 8 on the sliding layers
        # (CwmConfig's default layer_types: layer 0 full, 1-3 sliding), llama3 scaling over 64.
        "cwm": ("CwmConfig", "CwmForCausalLM", base_config(
            num_hidden_layers=4, head_dim=16, sliding_window=8,
            rope_parameters={"rope_type": "llama3", "rope_theta": 1000000.0, "factor": 16.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 64})),
        # Karpathy's nanochat (NanoChatForCausalLM, karpathy/nanochat-d32): weightless RMSNorms (one
        # after the embeddings too), RoPE rotating the other way, weightless q/k norms after it, an
        # ungated relu² MLP (fc1, fc2), no biases, logits soft-capped at 15; 4 heads over 2 KV heads.
        "nanochat": ("NanoChatConfig", "NanoChatForCausalLM", base_config(
            hidden_act="relu2", final_logit_softcapping=15.0, rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=1,
            pad_token_id=1)),
        # IQuest-Coder-V1 (IQuestCoderForCausalLM; IQuestCoderConfig, run as LlamaForCausalLM), its
        # config.json naming its own class (make_iquestcoder).
        "iquestcoder": ("IQuestCoderConfig", "LlamaForCausalLM", base_config(head_dim=16)),
        # Upstage Solar Open (SolarOpenForCausalLM): GLM-4.5's experts in every layer (8 in 2 groups,
        # top 2 by sigmoid + selection bias within the best group, renormalised, times 2.5, one shared
        # expert) behind Llama's attention, theta 1e6.
        "solar_open": ("SolarOpenConfig", "SolarOpenForCausalLM", base_config(
            head_dim=16, moe_intermediate_size=32, n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
            n_group=2, topk_group=1, routed_scaling_factor=2.5, rope_theta=1000000.0, pad_token_id=0)),
        # OpenBMB MiniCPM 5 MoE (MiniCPM5MoeForCausalLM): DeepSeek-V3's experts (8 in 2 groups, top 2,
        # times 3.66, one shared) on the sparse layers of mlp_layer_types (dense, sparse, dense, sparse),
        # Llama's attention with a per-head output gate from q_gate_proj, theta 5e6.
        "minicpm5_moe": ("MiniCPM5MoeConfig", "MiniCPM5MoeForCausalLM", base_config(
            num_hidden_layers=4, head_dim=16, moe_intermediate_size=32, n_routed_experts=8, num_experts_per_tok=2,
            n_shared_experts=1, n_group=2, topk_group=1, routed_scaling_factor=3.66, pad_token_id=0,
            mlp_layer_types=["dense", "sparse", "dense", "sparse"])),
        # Tencent Youtu-LLM (YoutuForCausalLM, tencent/Youtu-LLM-2B): DeepSeek-V3's MLA (q_lora 32, kv_lora
        # 16, rotary 8 of adjacent pairs, nope 16, v 16) over Llama's dense SwiGLU layers, tied.
        "youtu": ("YoutuConfig", "YoutuForCausalLM", base_config(
            num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16,
            v_head_dim=16, tie_word_embeddings=True, pad_token_id=0)),
        # OpenBMB MiniCPM 3 (MiniCPM3ForCausalLM, openbmb/MiniCPM3-4B): DeepSeek-V2's MLA rotating halves
        # (q_lora 32, kv_lora 16, rotary 8, nope 16, v 16) over dense layers, muP's scalings (scale_emb 12,
        # scale_depth 1.4, dim_model_base 16), longrope's short factors (max = original 256), tied.
        "minicpm3": ("MiniCPM3Config", "MiniCPM3ForCausalLM", base_config(
            num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8,
            v_head_dim=16, scale_emb=12, scale_depth=1.4, dim_model_base=16, tie_word_embeddings=True, pad_token_id=0,
            rope_scaling={"rope_type": "longrope", "original_max_position_embeddings": 256,
                          "short_factor": [1.0, 1.3, 1.9, 2.6], "long_factor": [2.0, 2.5, 3.0, 3.5]})),
        # IBM Bamba (BambaForCausalLM, ibm-ai-platform/Bamba-9B-v2): Mamba2 mixers (8 heads of 16 in 2
        # groups, state 16) and GQA attention at layer 1 of 3, a SwiGLU of 96 after every layer, RoPE
        # over half of each head.
        "bamba": ("BambaConfig", "BambaForCausalLM", dict(
            vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, attn_layer_indices=[1], mamba_n_heads=8, mamba_n_groups=2, mamba_d_state=16,
            mamba_d_head=16, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=16, rms_norm_eps=1e-5,
            max_position_embeddings=256, bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)),
        # Ministral (MinistralForCausalLM, mistralai/Ministral-8B-Instruct-2410 in transformers' own
        # type): Mistral's layer (no biases; Qwen2's module names) with per-layer windows from
        # layer_types: 8 on layers 0 and 2, layers 1 and 3 full, so the 40-token prompt crosses it.
        "ministral": ("MinistralConfig", "MinistralForCausalLM", base_config(
            num_hidden_layers=4, head_dim=16, sliding_window=8, pad_token_id=0,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"])),
        # Google VaultGemma (VaultGemmaForCausalLM, google/vaultgemma-1b): Gemma 2 without the
        # post-attention and post-feedforward norms (input_layernorm before the attention,
        # pre_feedforward_layernorm before the MLP), its softcaps and alternating windows.
        "vaultgemma": ("VaultGemmaConfig", "VaultGemmaForCausalLM", gemma_config(
            attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"])),
        # BharatGen Param2 MoE (Param2MoeForCausalLM, bharatgenai/Param2-17B-A2.4B-Thinking): GLM-4.5's
        # layout (layer 0 dense, then sigmoid-routed experts in groups with the selection bias, shared
        # experts) under Param2MoeConfig's defaults: q/k norms on, whole heads rotated, theta 5e5, and
        # its own names for the expert counts (num_experts, num_shared_experts, use_qkv_bias).
        "param2moe": ("Param2MoeConfig", "Glm4MoeForCausalLM", dict(
            vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=256, num_experts=8, num_experts_per_tok=2,
            moe_intermediate_size=32, num_shared_experts=1, n_group=2, topk_group=1, use_qkv_bias=True,
            bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)),
        # Sarvam MoE (SarvamMoEForCausalLM, sarvamai/sarvam-30b): Param2's layout and names under
        # SarvamMoEConfig's defaults (q/k norms, whole heads rotated, theta 8e6).
        "sarvam_moe": ("SarvamMoEConfig", "Glm4MoeForCausalLM", dict(
            vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=256, num_experts=8, num_experts_per_tok=2,
            moe_intermediate_size=32, num_shared_experts=1, n_group=1, topk_group=1, use_qkv_bias=False,
            bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)),
        # Sarvam MLA (sarvamai/sarvam-105b): DeepSeek-V3's MLA and experts (q_lora_rank null, one
        # group, layer 0 dense) under SarvamMLAConfig; config.json written in its original format
        # (head_dim = kv_lora_rank + qk_rope_head_dim, q_head_dim, num_experts, num_shared_experts).
        "sarvam_mla": ("SarvamMLAConfig", "DeepseekV3ForCausalLM", {
            k: v for k, v in deepseek_config(vocab_size=256, q_lora_rank=None, num_experts=8, num_shared_experts=1,
                                             norm_topk_prob=True, routed_scaling_factor=2.5, pad_token_id=0).items()
            if k not in ("n_routed_experts", "n_shared_experts")}),
        # IBM GraniteSWA (GraniteSWAForCausalLM, ibm-granite/granite-swash-2b): Granite's multipliers
        # with a learned sink per head, a window of 8 on GraniteSWAConfig's default layer types (layer
        # 0 full, 1-3 sliding), and per-layer RoPE bases: 1e4 on the full layer, none (0) on layer 1,
        # 5e5 on layers 2 and 3.
        "granite_swa": ("GraniteSWAConfig", "GraniteSWAForCausalLM", base_config(
            num_hidden_layers=4, head_dim=16, sliding_window=8, embedding_multiplier=3.0, residual_multiplier=0.5,
            attention_multiplier=0.2, logits_scaling=2.0, tie_word_embeddings=True, pad_token_id=0,
            layer_rope_theta=[10000.0, 0, 500000.0, 500000.0])),
        # GraniteMoeSWA (GraniteMoeSWAForCausalLM, ibm-granite/granite-swash-3b-a600m): GraniteMoeShared's
        # experts (8, top 2, a shared expert of 48) under GraniteSWA's attention: sinks, a window of 8
        # on layers 1 and 2 of 3 (layer_types), every layer at rope_theta.
        "granitemoe_swa": ("GraniteMoeSWAConfig", "GraniteMoeSWAForCausalLM", base_config(
            num_hidden_layers=3, intermediate_size=32, num_local_experts=8, num_experts_per_tok=2,
            shared_intermediate_size=48, sliding_window=8, embedding_multiplier=2.0, residual_multiplier=0.7,
            attention_multiplier=0.25, logits_scaling=1.5, pad_token_id=0,
            layer_types=["full_attention", "sliding_attention", "sliding_attention"])),
        # Cohere2 MoE (Cohere2MoeForCausalLM, CohereLabs/command-a-plus-05-2026): Cohere 2's parallel
        # layer (one norm before both blocks; RoPE of adjacent pairs on the sliding layers, none on the
        # full ones but the dense prefix layer, which its pattern 1 makes full and gives RoPE),
        # head_dim 24 apart from hidden / heads, logit_scale; layer 0 a dense SwiGLU of 96
        # (first_k_dense_replace), then 8 experts of 32 (intermediate_size), the top 2 softmaxed among
        # themselves, and one shared expert averaged with them; Cohere's LayerNorm (no rms_norm_eps).
        # Windows of 8 on layers 1 and 2 (sliding_window_pattern 3 over the 3 sparse layers).
        "cohere2_moe": ("Cohere2MoeConfig", "Cohere2MoeForCausalLM", base_config(
            num_hidden_layers=4, intermediate_size=32, head_dim=24, num_experts=8, num_experts_per_tok=2,
            num_shared_experts=1, shared_expert_combination_strategy="average", expert_selection_fn="softmax",
            first_k_dense_replace=1, prefix_dense_intermediate_size=96, sliding_window=8, sliding_window_pattern=3,
            logit_scale=0.5, rms_norm_eps=None, tie_word_embeddings=True, pad_token_id=0)),
        # The same with its other rules: an RMSNorm (rms_norm_eps), sigmoid routing renormalised over
        # the top 2, two shared experts (one SwiGLU of 2 x 32) summed with them, no dense prefix,
        # untied.
        "cohere2_moe_sigmoid": ("Cohere2MoeConfig", "Cohere2MoeForCausalLM", base_config(
            num_hidden_layers=3, intermediate_size=32, head_dim=16, num_experts=8, num_experts_per_tok=2,
            num_shared_experts=2, shared_expert_combination_strategy="sum", expert_selection_fn="sigmoid",
            norm_topk_prob=True, rms_norm_eps=1e-6, sliding_window=8, sliding_window_pattern=3, logit_scale=0.25,
            pad_token_id=0)),
        # Tencent Hy3 (HYV3ForCausalLM, tencent/Hy3-preview): layer 0 a dense SwiGLU, then 8 experts
        # of 32, the top 2 by sigmoid + selection bias, renormalised, times 2.826, beside one shared
        # expert, behind Apertus's attention (per-head q/k norms); theta 11158840 (HYV3Config's).
        # Saved in the checkpoints' names (mlp.router.gate, mlp.expert_bias, mlp.shared_mlp).
        "hy_v3": ("HYV3Config", "HYV3ForCausalLM", base_config(
            num_hidden_layers=3, head_dim=16, intermediate_size=96, num_experts=8, num_experts_per_tok=2,
            num_shared_experts=1, moe_intermediate_size=32, router_scaling_factor=2.826, rope_theta=11158840.0,
            pad_token_id=0)),
        # Falcon (FalconForCausalLM; make_gpt, GPT_SEEDS): query_key_value fused per KV group, biased
        # LayerNorms, RoPE (NeoX halves) over whole heads, exact gelu; hidden 32, 4 heads of 8.
        # Falcon-7B's layer: multi_query (q rows, then one k and one v head), the attention and the
        # MLP side by side on one norm, no biases, tied.
        "falcon": ("FalconConfig", "FalconForCausalLM", dict(
            vocab_size=256, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, multi_query=True,
            parallel_attn=True, new_decoder_architecture=False, bias=False, alibi=False, max_position_embeddings=256,
            layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=0)),
        # Falcon-40B / 180B's new decoder: num_kv_heads 2 (rows [2, 2 + 2, 8]), ln_attn and ln_mlp
        # (num_ln_in_parallel_attn null: 2), ffn_hidden_size 64, theta 500, untied.
        "falcon_new": ("FalconConfig", "FalconForCausalLM", dict(
            vocab_size=256, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_kv_heads=2,
            new_decoder_architecture=True, bias=False, alibi=False, ffn_hidden_size=64, max_position_embeddings=256,
            rope_theta=500.0, layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=0,
            tie_word_embeddings=False)),
        # Falcon2-11B's: the new decoder on one norm (num_ln_in_parallel_attn 1), theta 500042.
        "falcon_one_norm": ("FalconConfig", "FalconForCausalLM", dict(
            vocab_size=256, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_kv_heads=2,
            new_decoder_architecture=True, num_ln_in_parallel_attn=1, bias=False, alibi=False,
            max_position_embeddings=256, rope_theta=500042.0, layer_norm_epsilon=1e-5, bos_token_id=1,
            eos_token_id=2, pad_token_id=0)),
        # Falcon's sequential layer (parallel_attn false: input_layernorm, then post_attention_layernorm
        # before the MLP), MHA without multi_query (rows per head [4, 3, 8]), biases everywhere,
        # gelu_new.
        "falcon_sequential": ("FalconConfig", "FalconForCausalLM", dict(
            vocab_size=256, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, multi_query=False,
            parallel_attn=False, new_decoder_architecture=False, bias=True, alibi=False, activation="gelu_new",
            max_position_embeddings=256, layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=0)),
        # BLOOM (BloomForCausalLM; make_gpt): ALiBi over 6 heads (not a power of two: BLOOM's extra
        # slopes for heads 4-5, as BLOOM-176B's 112 heads have), the embeddings' LayerNorm,
        # query_key_value per head [6, 3, 8], biases everywhere, bloom_gelu, tied; hidden 48.
        "bloom": ("BloomConfig", "BloomForCausalLM", dict(
            vocab_size=256, hidden_size=48, n_layer=2, n_head=6, layer_norm_epsilon=1e-5, bos_token_id=1,
            eos_token_id=2, pad_token_id=0)),
        # MPT (MptForCausalLM, mosaicml/mpt-7b's layer): ALiBi over 4 heads (alibi_bias_max 8),
        # LayerNorms with weights only, no biases, Wqkv q|k|v, a 4 x d_model exact-GELU MLP, tied.
        "mpt": ("MptConfig", "MptForCausalLM", dict(
            vocab_size=256, d_model=32, n_heads=4, n_layers=2, expansion_ratio=4, max_seq_len=256,
            layer_norm_epsilon=1e-5, attn_config=dict(alibi=True, alibi_bias_max=8), bos_token_id=1, eos_token_id=2,
            pad_token_id=0)),
        # MPT over 6 heads (MPT's slopes reordered for a count that is not a power of two, as MPT-30B's
        # 56), clip_qkv 1.0, softmax_scale 0.25; hidden 48. (transformers' MptModel takes
        # alibi_bias_max 8 whatever attn_config says.)
        "mpt_clip": ("MptConfig", "MptForCausalLM", dict(
            vocab_size=256, d_model=48, n_heads=6, n_layers=2, expansion_ratio=4, max_seq_len=256,
            layer_norm_epsilon=1e-5, attn_config=dict(alibi=True, alibi_bias_max=8, clip_qkv=1.0, softmax_scale=0.25),
            bos_token_id=1, eos_token_id=2, pad_token_id=0)),
        # OPT (OPTForCausalLM, facebook/opt-125m's layer): learned positions over 64 (a table of 66
        # rows, offset 2), pre-norm biased LayerNorms, q/k/v/out and fc1 / fc2 with biases, relu, tied.
        "opt": ("OPTConfig", "OPTForCausalLM", dict(
            vocab_size=256, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=4,
            max_position_embeddings=64, word_embed_proj_dim=32, do_layer_norm_before=True, bos_token_id=1,
            eos_token_id=2, pad_token_id=0)),
        # GPT-Neo (GPTNeoForCausalLM, EleutherAI/gpt-neo-125m's layer; make_gpt): learned positions over
        # 64, global and local attention alternating (attention_types [[global, local], 2]: 4 layers)
        # with a window of 8 (the prompts run to 48), unscaled scores, q/k/v without biases, gelu_new,
        # tied; hidden 32, 4 heads.
        "gpt_neo": ("GPTNeoConfig", "GPTNeoForCausalLM", dict(
            vocab_size=256, hidden_size=32, num_layers=4, num_heads=4, attention_types=[[["global", "local"], 2]],
            window_size=8, max_position_embeddings=64, intermediate_size=None, activation_function="gelu_new",
            layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=0)),
        # CodeGen (CodeGenForCausalLM, Salesforce/codegen-350M-mono's layer; make_gpt): GPT-J's parallel
        # layer with one qkv_proj whose rows are 4 blocks of q | v | k (hidden 64 over 8 heads of 8: two
        # heads per block, so both the block order and the heads within a block count), GPT-J's RoPE
        # over rotary_dim 4 of each head, gelu_new, lm_head with a bias, untied.
        "codegen": ("CodeGenConfig", "CodeGenForCausalLM", dict(
            vocab_size=256, n_embd=64, n_layer=2, n_head=8, rotary_dim=4, n_positions=256, n_ctx=256,
            activation_function="gelu_new", layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2,
            pad_token_id=0, tie_word_embeddings=False)),
        # (New fixtures go last: a fixture's seed is its index here, so one added above would reseed
        # every fixture after it.)
        # NAVER HyperCLOVA X SEED (HyperCLOVAXForCausalLM, naver-hyperclovax/HyperCLOVAX-SEED-Think-14B):
        # Granite's layer and muP scalings with Peri-LN (an RMSNorm on each sublayer's output, before
        # residual_multiplier), the logits multiplied by logits_scaling, attention_multiplier left to
        # its head_dim^-0.5 default; head_dim 24 apart from hidden / heads.
        "hyperclovax": ("HyperCLOVAXConfig", "HyperCLOVAXForCausalLM", base_config(
            head_dim=24, embedding_multiplier=3.0, residual_multiplier=0.5, logits_scaling=2.0, pad_token_id=0)),
        # The same with use_post_norm off: Granite's two norms, the rest as above.
        "hyperclovax_no_post_norm": ("HyperCLOVAXConfig", "HyperCLOVAXForCausalLM", base_config(
            embedding_multiplier=3.0, residual_multiplier=0.5, attention_multiplier=0.2, logits_scaling=2.0,
            use_post_norm=False, tie_word_embeddings=True, pad_token_id=0)),
        # Aleph Alpha Kolibri-1 (Kolibri1ForCausalLM, Aleph-Alpha/Kolibri-1): EXAONE 4's attention
        # (per-head q/k norms, windows of 8 on four of every five layers by Kolibri1Config's default
        # layer_types, the fifth full without RoPE) in GLM-4's four-norm layer; every layer 8 experts
        # of 16 beside a shared SwiGLU of 24, the top 2 of the router logits + e_score_correction_bias
        # weighted by their sigmoid, not renormalised (Qwen3MoeConfig's default).
        "kolibri1": ("Kolibri1Config", "Kolibri1ForCausalLM", windowed_shared_moe_config(num_hidden_layers=5, num_experts_per_tok=2)),
        # The same with layer_types given (layer 0 full, layer 1 sliding), renormalised, top 3.
        "kolibri1_norm": ("Kolibri1Config", "Kolibri1ForCausalLM", windowed_shared_moe_config(
            num_experts_per_tok=3, layer_types=["full_attention", "sliding_attention"], norm_topk_prob=True)),
        # SK Telecom A.X K1 (AXK1ForCausalLM, skt/A.X-K1): DeepSeek-V3's MLA (always q_lora_rank) and
        # routing (8 experts in 4 groups, top-2 groups, top 2 renormalised, times 2.5, a shared
        # expert) with an RMSNorm on each sparse layer's MoE output (post_mlp_layernorm); layers 0
        # and 2 dense by mlp_layer_types, 1 and 3 sparse.
        "axk1": ("AXK1Config", "AXK1ForCausalLM", deepseek_config(
            num_hidden_layers=4, q_lora_rank=24, n_group=4, topk_group=2, norm_topk_prob=True,
            routed_scaling_factor=2.5, mlp_layer_types=["dense", "sparse", "dense", "sparse"], pad_token_id=0)),
        # The same as the released checkpoints store it (make_axk1): no e_score_correction_bias (A.X K1
        # routes without one: transformers leaves it zero) and a post_mlp_layernorm on the dense
        # layers too, which nothing reads.
        "axk1_hub": ("AXK1Config", "AXK1ForCausalLM", deepseek_config(
            num_hidden_layers=3, q_lora_rank=24, n_group=4, topk_group=2, norm_topk_prob=True,
            routed_scaling_factor=2.5, pad_token_id=0)),
        # RecursiveSI Flint (FlintForCausalLM, RecursiveSI/flint): Qwen3-MoE's attention with a sink per
        # head on every layer, windows of 8 on FlintConfig's default sliding layers (2 and 3 of 5),
        # the full ones without RoPE; layers 0 and 1 dense (its default mlp_only_layers), then 8
        # experts of 16, the top 2 of the sigmoid renormalised, beside an ungated shared SwiGLU of 24.
        "flint": ("FlintConfig", "FlintForCausalLM", windowed_shared_moe_config(num_hidden_layers=5, num_experts_per_tok=2)),
        # The same with layer_types and mlp_only_layers given (every layer sparse), top 3 not
        # renormalised, q/k/v/o biases.
        "flint_sparse": ("FlintConfig", "FlintForCausalLM", windowed_shared_moe_config(
            num_experts_per_tok=3, layer_types=["sliding_attention", "full_attention"], mlp_only_layers=[],
            norm_topk_prob=False, attention_bias=True)),
        # BitNet b1.58 (BitNetForCausalLM, microsoft/bitnet-b1.58-2B-4T): Llama's layer with an RMSNorm
        # before o_proj and before down_proj, relu2(gate) * up; every decoder linear ternary
        # (make_bitnet) as the released checkpoint stores it: BitLinear's packed u8 codes, tied.
        "bitnet": ("BitNetConfig", "BitNetForCausalLM", bitnet_config(tie_word_embeddings=True)),
        # AutoBitLinear, offline: the codes as floats, times weight_scale.
        "bitnet_auto": ("BitNetConfig", "BitNetForCausalLM", bitnet_config()),
        # AutoBitLinear, online: the float weights, ternarized per forward.
        "bitnet_online": ("BitNetConfig", "BitNetForCausalLM", bitnet_config()),
        # No quantization_config: transformers runs the linears and activations as stored (the
        # bf16 master weights Microsoft publishes beside the packed model load so).
        "bitnet_plain": ("BitNetConfig", "BitNetForCausalLM", bitnet_config()),
        # JetBrains Mellum (MellumForCausalLM, JetBrains/Mellum2-12B-A2.5B): Qwen3-MoE's layer with windows
        # of 8 on layer_types' sliding layers and a RoPE base per layer type (MellumConfig's 500000 and
        # 10000); layer 0 dense by mlp_layer_types, then 8 experts of 16, the softmax's top 2
        # renormalised (its default).
        "mellum": ("MellumConfig", "MellumForCausalLM", mellum_config(
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
            mlp_layer_types=["dense", "sparse", "sparse", "sparse"])),
        # The same with bases 20000 and 5000, windows of 6, every layer sparse (MellumConfig's
        # default), top 3 not renormalised, q/k/v/o biases.
        "mellum_sparse": ("MellumConfig", "MellumForCausalLM", mellum_config(
            layer_types=["sliding_attention", "full_attention", "full_attention", "sliding_attention"],
            sliding_window=6, num_experts_per_tok=3, norm_topk_prob=False, attention_bias=True,
            rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 20000.0},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 5000.0}})),
    }


def internlm2_state(state, n_heads, n_kv_heads, head_dim):
    """A Llama state dict (any prefix before model. / lm_head.) under InternLM2's names, q|k|v fused
    per KV group as InternLM2Attention reads wqkv: rows [groups, heads / groups + 2, head_dim] (the
    group's query heads, then its k head and v head)."""
    import torch
    renames = [("model.embed_tokens.", "model.tok_embeddings."), (".self_attn.o_proj.", ".attention.wo."),
               (".input_layernorm.", ".attention_norm."), (".post_attention_layernorm.", ".ffn_norm."),
               (".mlp.gate_proj.", ".feed_forward.w1."), (".mlp.up_proj.", ".feed_forward.w3."),
               (".mlp.down_proj.", ".feed_forward.w2."), ("lm_head.", "output.")]
    out = {}
    for k, v in state.items():
        if ".self_attn.k_proj." in k or ".self_attn.v_proj." in k:
            continue
        if ".self_attn.q_proj." in k:
            q, kk, vv = (state[k.replace("q_proj", p)] for p in ("q_proj", "k_proj", "v_proj"))
            rest = q.shape[1:]
            fused = torch.cat([q.reshape(n_kv_heads, n_heads // n_kv_heads, head_dim, *rest),
                               kk.reshape(n_kv_heads, 1, head_dim, *rest),
                               vv.reshape(n_kv_heads, 1, head_dim, *rest)], dim=1)
            out[k.replace(".self_attn.q_proj.", ".attention.wqkv.")] = fused.reshape(-1, *rest).contiguous()
            continue
        for a, b in renames:
            k = k.replace(a, b)
        out[k] = v.contiguous()
    return out


INTERNLM_AUTO_MAP = {
    "internlm2": {"AutoConfig": "configuration_internlm2.InternLM2Config",
                  "AutoModel": "modeling_internlm2.InternLM2ForCausalLM",
                  "AutoModelForCausalLM": "modeling_internlm2.InternLM2ForCausalLM"},
    "internlm3": {"AutoConfig": "configuration_internlm3.InternLM3Config",
                  "AutoModel": "modeling_internlm3.InternLM3Model",
                  "AutoModelForCausalLM": "modeling_internlm3.InternLM3ForCausalLM"},
}


def internlm_config(kind, kw):
    """The remote-code config.json of InternLM 2 or 3 (kind) for make_fixtures' Llama kwargs kw:
    the Hub's fields (InternLM2Config's bias for both attention projections; InternLM3Config's
    qkv_bias and bias), rope_scaling in the Hub's form."""
    c = {"architectures": ["InternLM2ForCausalLM" if kind == "internlm2" else "InternLM3ForCausalLM"],
         "model_type": kind, "auto_map": INTERNLM_AUTO_MAP[kind], "torch_dtype": "float32",
         "hidden_act": "silu", "attn_implementation": "eager", "pad_token_id": 0}
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_theta", "bos_token_id",
                "eos_token_id", "tie_word_embeddings"):
        c[key] = kw[key]
    if "rope_scaling" in kw:
        c["rope_scaling"] = {("type" if kind == "internlm2" else "rope_type"): kw["rope_scaling"]["rope_type"],
                             "factor": kw["rope_scaling"]["factor"]}
    if kind == "internlm2":
        c["bias"] = kw.get("attention_bias", False)
    else:
        c.update(head_dim=kw["head_dim"], qkv_bias=kw.get("attention_bias", False), bias=kw.get("mlp_bias", False))
    return c


def write_internlm(model, kw, kind, out_dir):
    """model (a LlamaForCausalLM) saved into out_dir as InternLM 2's or 3's remote-code checkpoint."""
    from safetensors.torch import save_file
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if kind == "internlm2":
        state = internlm2_state(state, kw["num_attention_heads"], kw["num_key_value_heads"],
                                kw["hidden_size"] // kw["num_attention_heads"])
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "model.safetensors").chmod(0o644)
    (out_dir / "config.json").write_text(json.dumps(internlm_config(kind, kw), indent=2) + "\n")


def make_internlm(name, config_cls, model_cls, kw, seed):
    """internlm2 / internlm2_bias / internlm3: the LlamaForCausalLM with the same weights gives the
    logits (InternLM 2 and 3 have no transformers class; their remote code computes what Llama's
    does: same norms, RoPE of halves, SwiGLU, biases where the flags say), written in InternLM's
    layout by write_internlm."""
    import torch
    import transformers
    model = new_model(config_cls, model_cls, kw, seed)
    out_dir = OUT / name
    write_internlm(model, kw, "internlm3" if name == "internlm3" else "internlm2", out_dir)
    cases = run_cases(model, kw["vocab_size"], decode_logits=True)
    write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, "
                                  f"{model_cls} (the same weights; written in InternLM's layout), fp32, "
                                  f"eager attention, seed {seed}", kw["vocab_size"], cases)


def chatglm_state(state):
    """A GlmForCausalLM state dict under ChatGLM's names (the reverse of transformers'
    convert_glm_weights_to_hf.py): q|k|v and their biases fused into query_key_value, q rows
    first."""
    import torch
    renames = [("model.embed_tokens.", "transformer.embedding.word_embeddings."),
               ("model.norm.", "transformer.encoder.final_layernorm."), ("lm_head.", "transformer.output_layer."),
               ("model.layers.", "transformer.encoder.layers."), (".self_attn.o_proj.", ".self_attention.dense."),
               (".mlp.gate_up_proj.", ".mlp.dense_h_to_4h."), (".mlp.down_proj.", ".mlp.dense_4h_to_h.")]
    out = {}
    for k, v in state.items():
        if ".self_attn.k_proj." in k or ".self_attn.v_proj." in k:
            continue
        if ".self_attn.q_proj." in k:
            v = torch.cat([state[k.replace("q_proj", p)] for p in ("q_proj", "k_proj", "v_proj")])
            k = k.replace(".self_attn.q_proj.", ".self_attention.query_key_value.")
        for a, b in renames:
            k = k.replace(a, b)
        out[k] = v.contiguous()
    return out


def chatglm_config(kw):
    """glm-4-9b-chat's config.json fields (ChatGLMConfig) for make_fixtures' GlmConfig kwargs kw."""
    return {"architectures": ["ChatGLMModel"], "model_type": "chatglm", "torch_dtype": "float32",
            "auto_map": {"AutoConfig": "configuration_chatglm.ChatGLMConfig",
                         "AutoModel": "modeling_chatglm.ChatGLMForConditionalGeneration",
                         "AutoModelForCausalLM": "modeling_chatglm.ChatGLMForConditionalGeneration"},
            "num_layers": kw["num_hidden_layers"], "padded_vocab_size": kw["vocab_size"],
            "vocab_size": kw["vocab_size"],  # beside padded_vocab_size, as llama.cpp's converter reads both
            "hidden_size": kw["hidden_size"], "ffn_hidden_size": kw["intermediate_size"], "kv_channels": kw["head_dim"],
            "num_attention_heads": kw["num_attention_heads"], "multi_query_attention": True,
            "multi_query_group_num": kw["num_key_value_heads"], "seq_length": kw["max_position_embeddings"],
            "layernorm_epsilon": kw["rms_norm_eps"], "rope_ratio": kw["rope_theta"] / 10000.0, "original_rope": True,
            "rmsnorm": True, "post_layer_norm": True, "apply_residual_connection_post_layernorm": False,
            "add_bias_linear": False, "add_qkv_bias": True, "apply_query_key_layer_scaling": True,
            "attention_softmax_in_fp32": True, "fp32_residual_connection": False, "bias_dropout_fusion": True,
            "attention_dropout": 0.0, "hidden_dropout": 0.0, "tie_word_embeddings": False,
            "eos_token_id": kw["eos_token_id"], "pad_token_id": kw["pad_token_id"]}


def write_chatglm(model, kw, out_dir):
    """model (a GlmForCausalLM) saved into out_dir as ChatGLM's remote-code checkpoint, with the
    rotary_pos_emb.inv_freq buffer glm-4-9b-chat stores (RotaryEmbedding(kv_channels // 2) of base
    10000 * rope_ratio)."""
    import torch
    from safetensors.torch import save_file
    state = chatglm_state({k: v.contiguous() for k, v in model.state_dict().items()})
    dim = kw["head_dim"] // 2
    state["transformer.rotary_pos_emb.inv_freq"] = 1.0 / (kw["rope_theta"] ** (torch.arange(0, dim, 2).float() / dim))
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "model.safetensors").chmod(0o644)
    (out_dir / "config.json").write_text(json.dumps(chatglm_config(kw), indent=2) + "\n")


def make_chatglm(name, config_cls, model_cls, kw, seed):
    """chatglm: GlmForCausalLM's logits (ChatGLM has no transformers class; convert_glm_weights_to_hf.py
    maps its weights one to one onto GlmForCausalLM), the checkpoint in ChatGLM's layout."""
    import torch
    import transformers
    model = new_model(config_cls, model_cls, kw, seed)
    out_dir = OUT / name
    write_chatglm(model, kw, out_dir)
    cases = run_cases(model, kw["vocab_size"], decode_logits=True)
    write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, "
                                  f"{model_cls} (the same weights; written in ChatGLM's layout), fp32, "
                                  f"eager attention, seed {seed}", kw["vocab_size"], cases)


def minicpm_config(kw):
    """MiniCPM's config.json (MiniCPMConfig, remote code) for make_fixtures' GraniteConfig kwargs kw:
    the multipliers back as scale_emb, scale_depth and dim_model_base."""
    layers, hidden = kw["num_hidden_layers"], kw["hidden_size"]
    c = {"architectures": ["MiniCPMForCausalLM"], "model_type": "minicpm", "torch_dtype": "float32",
         "auto_map": {"AutoConfig": "configuration_minicpm.MiniCPMConfig",
                      "AutoModel": "modeling_minicpm.MiniCPMModel",
                      "AutoModelForCausalLM": "modeling_minicpm.MiniCPMForCausalLM"},
         "hidden_act": "silu", "attention_bias": False, "scale_emb": kw["embedding_multiplier"],
         "scale_depth": round(kw["residual_multiplier"] * layers ** 0.5, 6),
         "dim_model_base": round(hidden / kw["logits_scaling"])}
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_theta", "bos_token_id",
                "eos_token_id", "tie_word_embeddings"):
        c[key] = kw[key]
    if "rope_scaling" in kw:
        c["rope_scaling"] = kw["rope_scaling"]
    return c


def make_minicpm(name, config_cls, model_cls, kw, seed):
    """minicpm / minicpm_longrope: GraniteForCausalLM's logits (MiniCPM has no transformers class; its
    remote code's scalings are Granite's multipliers), the checkpoint under MiniCPM's config.json."""
    import torch
    import transformers
    c = minicpm_config(kw)
    assert abs(c["scale_depth"] / kw["num_hidden_layers"] ** 0.5 - kw["residual_multiplier"]) < 1e-6
    assert kw["hidden_size"] / c["dim_model_base"] == kw["logits_scaling"]
    model = new_model(config_cls, model_cls, kw, seed)
    out_dir = OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    (out_dir / "generation_config.json").unlink(missing_ok=True)
    (out_dir / "config.json").write_text(json.dumps(c, indent=2) + "\n")
    cases = run_cases(model, kw["vocab_size"], decode_logits=True)
    write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, "
                                  f"{model_cls} (the same weights; MiniCPM's config.json), fp32, eager attention, "
                                  f"seed {seed}", kw["vocab_size"], cases)


def make_iquestcoder(name, config_cls, model_cls, kw, seed):
    """make(), its config.json then naming IQuestCoderForCausalLM (the checkpoints' class; transformers
    maps model_type iquestcoder to LlamaForCausalLM)."""
    make(name, config_cls, model_cls, kw, seed)
    path = OUT / name / "config.json"
    c = json.loads(path.read_text())
    assert c["model_type"] == "iquestcoder"
    c["architectures"] = ["IQuestCoderForCausalLM"]
    path.write_text(json.dumps(c, indent=2, sort_keys=True) + "\n")


# The original checkpoints' classes and default RoPE bases of the GLM-4.5-shaped aliases whose
# config.json make_original_config rewrites.
ORIGINAL_CLASSES = {"param2moe": ("Param2MoEForCausalLM", 500000.0), "sarvam_moe": ("SarvamMoEForCausalLM", 8000000.0)}


def make_original_config(name, config_cls, model_cls, kw, seed):
    """make() (transformers runs model_type param2moe and sarvam_moe as Glm4MoeForCausalLM), its
    config.json then written as the original checkpoints' are: their class name, their names for
    the expert counts and the q/k/v bias (num_experts, num_shared_experts, use_qkv_bias), and
    without the fields whose config class defaults differ from Glm4MoeConfig's (use_qk_norm true,
    partial_rotary_factor 1.0, the RoPE base), so a reader must apply theirs. Checked: transformers
    reads the written file back to the same logits."""
    import torch
    import transformers
    make(name, config_cls, model_cls, kw, seed)
    path = OUT / name / "config.json"
    c = json.loads(path.read_text())
    cls, theta = ORIGINAL_CLASSES[name]
    assert c["model_type"] == name and c["use_qk_norm"] is True
    assert c["rope_parameters"] == {"partial_rotary_factor": 1.0, "rope_theta": theta, "rope_type": "default"}
    c["architectures"] = [cls]
    for ours, theirs in (("n_routed_experts", "num_experts"), ("n_shared_experts", "num_shared_experts"),
                         ("attention_bias", "use_qkv_bias")):
        c[theirs] = c.pop(ours)
    for key in ("use_qk_norm", "rope_parameters"):
        del c[key]
    path.write_text(json.dumps(c, indent=2, sort_keys=True) + "\n")
    ids = torch.tensor([prompts_for(kw["vocab_size"])[2]])
    with torch.no_grad():
        a = transformers.AutoModelForCausalLM.from_pretrained(OUT / name, dtype=torch.float32).eval()(ids).logits
    b = new_model(config_cls, model_cls, kw, seed)(ids).logits
    assert torch.allclose(a, b, atol=1e-5), "the rewritten config.json reads back as the same model"


def make_sarvam_mla(name, config_cls, model_cls, kw, seed):
    """make(), its config.json then in sarvam-105b's original format: SarvamMLAForCausalLM, head_dim
    as kv_lora_rank + qk_rope_head_dim (what vLLM's MLA read), q_head_dim, num_experts and
    num_shared_experts, and without n_group, topk_group and first_k_dense_replace (SarvamMLAConfig's
    defaults, 1 each, not DeepseekV3Config's). Checked: transformers reads it back to the same logits."""
    import torch
    import transformers
    make(name, config_cls, model_cls, kw, seed)
    path = OUT / name / "config.json"
    c = json.loads(path.read_text())
    assert c["model_type"] == "sarvam_mla" and c["n_group"] == c["topk_group"] == c["first_k_dense_replace"] == 1
    c["architectures"] = ["SarvamMLAForCausalLM"]
    c["head_dim"] = c["kv_lora_rank"] + c["qk_rope_head_dim"]
    c["q_head_dim"] = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    c["num_experts"] = c.pop("n_routed_experts")
    c["num_shared_experts"] = c.pop("n_shared_experts")
    for key in ("n_group", "topk_group", "first_k_dense_replace"):
        del c[key]
    path.write_text(json.dumps(c, indent=2, sort_keys=True) + "\n")
    ids = torch.tensor([PROMPTS[2]])
    with torch.no_grad():
        a = transformers.AutoModelForCausalLM.from_pretrained(OUT / name, dtype=torch.float32).eval()(ids).logits
    b = new_model(config_cls, model_cls, kw, seed)(ids).logits
    assert torch.allclose(a, b, atol=1e-5), "the rewritten config.json reads back as the same model"


def exaone_hub_config(d, model):
    """Rewrites the config.json transformers saved in `d` as the Hub's EXAONE 3.5 configs are
    (ExaoneForCausalLM, num_layers, layer_norm_epsilon, activation_function, rope_theta and
    rope_scaling at the top), then checks that transformers reads it back to `model`'s logits."""
    import torch
    import transformers
    path = Path(d) / "config.json"
    c = json.loads(path.read_text())
    c["architectures"] = ["ExaoneForCausalLM"]
    for ours, hub in (("num_hidden_layers", "num_layers"), ("rms_norm_eps", "layer_norm_epsilon"),
                      ("hidden_act", "activation_function")):
        c[hub] = c.pop(ours)
    rope = c.pop("rope_parameters")
    c["rope_theta"] = rope.pop("rope_theta")
    c["rope_scaling"] = rope
    path.write_text(json.dumps(c, indent=2) + "\n")
    back = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    ids = torch.arange(40).reshape(1, 40) % c["vocab_size"]
    with torch.no_grad():
        diff = (back(ids).logits - model(ids).logits).abs().max().item()
    assert diff == 0.0, f"the Hub-form config reads back {diff} away"


def make_exaone(name, config_cls, model_cls, kw, seed):
    """make(), with config.json in the Hub's form (exaone_hub_config)."""
    model = new_model(config_cls, model_cls, kw, seed)
    make(name, config_cls, model_cls, kw, seed, model=model)
    exaone_hub_config(OUT / name, model)


def layer_norm_config(eps_key="layer_norm_eps", **kw):
    """base_config's kwargs for a config whose norm epsilon is `eps_key` (no rms_norm_eps)."""
    c = base_config(**{eps_key: 1e-5})
    del c["rms_norm_eps"]
    c.update(kw)
    return c


def cohere_config(**kw):
    """A tiny CohereConfig's / Cohere2Config's kwargs (fixtures()): layer_norm_eps in place of
    rms_norm_eps, tied as the checkpoints are."""
    c = base_config(layer_norm_eps=1e-5, tie_word_embeddings=True, pad_token_id=0, bos_token_id=5)
    del c["rms_norm_eps"]
    c.update(kw)
    return c


def llama4_text_config(**kw):
    """A tiny Llama4TextConfig's kwargs (fixtures())."""
    c = base_config(num_hidden_layers=4, intermediate_size=48, intermediate_size_mlp=96, num_local_experts=4,
                    num_experts_per_tok=1, head_dim=16, no_rope_layer_interval=2, attention_chunk_size=8,
                    floor_scale=4, attn_scale=0.1, pad_token_id=0,
                    rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                         high_freq_factor=4.0, original_max_position_embeddings=64))
    c.update(kw)
    return c


def falcon_h1_config(**kw):
    """A tiny FalconH1Config's kwargs (fixtures())."""
    c = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, mamba_d_ssm=96, mamba_n_heads=6, mamba_d_head="auto", mamba_n_groups=2,
             mamba_d_state=16, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=16, mamba_conv_bias=True,
             mamba_proj_bias=False, mamba_rms_norm=False, projectors_bias=False, rms_norm_eps=1e-5,
             max_position_embeddings=256, rope_parameters=dict(rope_type="default", rope_theta=100000.0),
             embedding_multiplier=1.5, lm_head_multiplier=0.6, key_multiplier=0.8, attention_in_multiplier=1.2,
             attention_out_multiplier=0.9, ssm_in_multiplier=1.1, ssm_out_multiplier=0.7,
             ssm_multipliers=[0.9, 1.1, 1.2, 0.8, 1.3], mlp_multipliers=[1.1, 0.9],
             bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    c.update(kw)
    return c


def qwen3_next_config(**kw):
    """A tiny Qwen3NextConfig's kwargs (fixtures()); a None value drops the key."""
    c = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
             num_attention_heads=4, num_key_value_heads=2, head_dim=32,
             layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention"],
             linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
             linear_value_head_dim=8, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
             moe_intermediate_size=32, shared_expert_intermediate_size=48, mlp_only_layers=[2],
             norm_topk_prob=True, rms_norm_eps=1e-6, max_position_embeddings=256,
             rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25),
             bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    c.update(kw)
    return {k: v for k, v in c.items() if v is not None}


def nemotron_h_config(**kw):
    """A tiny NemotronHConfig's kwargs (fixtures())."""
    c = dict(vocab_size=256, hidden_size=64, hybrid_override_pattern="M-*-M", num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, intermediate_size=96, mlp_hidden_act="relu2",
             mamba_num_heads=6, mamba_head_dim=16, n_groups=2, ssm_state_size=16, conv_kernel=4,
             expand=2, chunk_size=16, layer_norm_epsilon=1e-5, max_position_embeddings=256,
             bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    c.update(kw)
    return c


def granite_hybrid_config(**kw):
    """A tiny GraniteMoeHybridConfig's kwargs (fixtures())."""
    c = dict(vocab_size=256, hidden_size=64, intermediate_size=32, shared_intermediate_size=48,
             num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
             num_experts_per_tok=2, layer_types=["mamba", "attention", "mamba"], mamba_n_heads=8,
             mamba_n_groups=2, mamba_d_state=16, mamba_d_head=16, mamba_d_conv=4, mamba_expand=2,
             mamba_chunk_size=16, position_embedding_type="nope", embedding_multiplier=3.0,
             logits_scaling=2.0, residual_multiplier=0.5, attention_multiplier=0.2, rms_norm_eps=1e-5,
             max_position_embeddings=256, bos_token_id=1, eos_token_id=2, pad_token_id=0,
             tie_word_embeddings=False)
    c.update(kw)
    return c


def mamba2_config(**kw):
    """A tiny Mamba2Config's kwargs (fixtures())."""
    c = dict(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_heads=8, head_dim=16, expand=2,
             n_groups=2, state_size=16, conv_kernel=4, chunk_size=16, layer_norm_epsilon=1e-5,
             bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    c.update(kw)
    return c


def glm4_moe_config(**kw):
    """The glm4_moe fixture's config (GLM-4.5's layout at tiny size; fixtures())."""
    c = base_config(
        vocab_size=128, num_hidden_layers=3, head_dim=32, intermediate_size=96, attention_bias=True,
        use_qk_norm=True, partial_rotary_factor=0.5, n_routed_experts=8, num_experts_per_tok=2,
        moe_intermediate_size=32, n_shared_experts=1, first_k_dense_replace=1, n_group=2, topk_group=1,
        norm_topk_prob=True, routed_scaling_factor=2.5)
    c.update(kw)
    return c


def phi3_config(**kw):
    """A tiny Phi3Config (pad_token_id 0: its default 32000 lies outside the vocabulary)."""
    c = base_config(pad_token_id=0)
    c.update(kw)
    return c


def gemma_config(**kw):
    """A tiny Gemma 2 / 3 config: 3 layers, head_dim 16, window 8, tied (the models' default)."""
    c = base_config(num_hidden_layers=3, head_dim=16, query_pre_attn_scalar=24, sliding_window=8,
                    rms_norm_eps=1e-6, tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh",
                    pad_token_id=0)
    c.update(kw)
    return c


def gemma3n_config(**kw):
    """A tiny Gemma 3n text config (the gemma3n fixture's); kw overrides."""
    c = base_config(vocab_size=128, hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
                    num_hidden_layers=6, head_dim=16, sliding_window=8, rms_norm_eps=1e-6, tie_word_embeddings=True,
                    hidden_activation="gelu_pytorch_tanh", pad_token_id=0,
                    intermediate_size=[64, 48, 64, 64, 32, 64],
                    layer_types=["sliding_attention", "sliding_attention", "full_attention",
                                 "sliding_attention", "sliding_attention", "full_attention"],
                    num_kv_shared_layers=2, activation_sparsity_pattern=[0.95, 0.0, 0.0, 0.0, 0.95, 0.0],
                    altup_num_inputs=4, laurel_rank=8, hidden_size_per_layer_input=8,
                    vocab_size_per_layer_input=100, final_logit_softcapping=10.0,
                    rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                     "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
    c.update(kw)
    return c


def make_gemma3n_mm(name, config_cls, model_cls, kw, seed):
    """A Gemma3nForConditionalGeneration checkpoint as the Hub lays it out: the text model's tensors
    as model.language_model.*, the vision and audio embedders (model.embed_vision / embed_audio, ids
    [128, 136) and [136, 144)) beside them, config.json a Gemma3nConfig's. The towers need timm, so
    the reference is the same weights run by Gemma3nForCausalLM (what Gemma3nModel runs for text
    ids below the vision offset). The embedders' ids' rows of the tied table are zeroed, so greedy
    decoding stays on text ids (brigade refuses the others: their embeddings are the embedders')."""
    import torch
    import transformers
    from safetensors.torch import save_file
    from transformers.models.gemma3n.modeling_gemma3n import Gemma3nMultimodalEmbedder
    model = new_model(config_cls, model_cls, kw, seed)
    with torch.no_grad():
        model.model.embed_tokens.weight[128:] = 0.0
    out_dir = OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    full = transformers.Gemma3nConfig(text_config=model.config.to_dict(),
                                      vision_config=dict(hidden_size=16, vocab_size=8, vocab_offset=128),
                                      audio_config=dict(hidden_size=16, vocab_size=8, vocab_offset=136))
    full.architectures = ["Gemma3nForConditionalGeneration"]
    tensors = {k.replace("model.", "model.language_model.", 1): v.contiguous()
               for k, v in model.state_dict().items() if k.startswith("model.")}
    torch.manual_seed(seed + 1)
    for prefix, cfg in (("model.embed_vision.", full.vision_config), ("model.embed_audio.", full.audio_config)):
        for k, v in Gemma3nMultimodalEmbedder(cfg, full.text_config).state_dict().items():
            tensors[prefix + k] = v.contiguous()
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(full.to_json_string())
    cases = run_cases(model, 128, decode_logits=True)  # prompts of text ids only
    assert all(t < 128 for c in cases for t in c["greedy"]), "greedy decoding left the text ids"
    write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, "
                                  f"{model_cls} (saved as Gemma3nForConditionalGeneration), fp32, eager attention, "
                                  f"seed {seed}", kw["vocab_size"], cases)


def windowed_shared_moe_config(**kw):
    """Kolibri-1's and Flint's fixtures' shared shape: heads of 16, windows of 8, 8 experts of 16
    beside a shared SwiGLU of 24."""
    c = base_config(head_dim=16, num_experts=8, moe_intermediate_size=16, shared_expert_intermediate_size=24,
                    sliding_window=8, pad_token_id=0)
    c.update(kw)
    return c


def bitnet_config(**kw):
    """The BitNet fixtures' config: 2 heads of 16 (their q width is hidden_size, as BitNet's
    attn_sub_norm needs), 1 KV head, an MLP of 64: small, so that few activations are quantized
    (make_bitnet's margin search)."""
    return base_config(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1, **kw)


def mellum_config(**kw):
    """The Mellum fixtures' config: 4 layers of 4 heads of 16 (2 KV heads), windows of 8, 8 experts
    of 16 (top 2), a dense MLP of 128; no rope_theta (MellumConfig reads rope_parameters per type)."""
    c = base_config(num_hidden_layers=4, head_dim=16, sliding_window=8, num_experts=8, num_experts_per_tok=2,
                    moe_intermediate_size=16, pad_token_id=0)
    del c["rope_theta"]
    c.update(kw)
    return c


def deepseek_config(**kw):
    """A tiny DeepSeek (V2 or V3) config: 4 heads, latent 32, nope/rope/v 16/8/16, 8 experts of 16."""
    c = base_config(vocab_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
                    rms_norm_eps=1e-6, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                    v_head_dim=16, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16,
                    n_shared_experts=1, first_k_dense_replace=1)
    c.update(kw)
    return c


def deepseek_v3_config(**kw):
    """The deepseek_v3 fixture's config: q_lora_rank, 8 experts in 4 groups (top-2 groups, top-2
    renormalised, times 2.5), yarn RoPE whose mscale_all_dim scales the softmax."""
    return deepseek_config(
        q_lora_rank=24, n_group=4, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0,
                         "mscale": 1.0, "mscale_all_dim": 0.7}, **kw)


def random_eager_model(out_dir, config_json, model_cls, seed):
    """Writes config_json as out_dir/config.json, reads it back with AutoConfig (eager attention in
    it and its text / vision sub-configs) and builds model_cls on it in float32, eval mode, with
    randomize's weights for the seed (torch's global seed set to it first)."""
    import json
    import torch
    import transformers
    (out_dir / "config.json").write_text(json.dumps(config_json, indent=2) + "\n")
    config = transformers.AutoConfig.from_pretrained(out_dir)
    for c in (config, config.text_config, config.vision_config):
        c._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = model_cls(config).to(torch.float32).eval()
    randomize(model, seed)
    return model


def enlarge_siglip_embeddings(embeddings, g):
    """A SigLIP tower's position embeddings N(0, 1) and patch projection N(0, 1/fan_in), drawn from
    g: large enough that an image's patches and their places matter to its features."""
    import torch
    with torch.no_grad():
        embeddings.position_embedding.weight.copy_(torch.randn(embeddings.position_embedding.weight.shape, generator=g))
        w = embeddings.patch_embedding.weight
        w.copy_(torch.randn(w.shape, generator=g) * w[0].numel() ** -0.5)


def save_state(model, out_dir, drop=()):
    """Writes model.state_dict() (less the names in drop: a tied lm_head.weight) as
    out_dir/model.safetensors, contiguous, mode 0644; returns the state written."""
    from safetensors.torch import save_file
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k not in drop}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "model.safetensors").chmod(0o644)
    return state


def randomize(model, seed):
    """Replaces every parameter with values large enough that logits differ clearly per token:
    matrices ~ N(0, 1/fan_in), biases ~ N(0, 0.1), norm weights 1 + N(0, 0.1) (N(0, 0.1) for
    Qwen3-Next's and Qwen3.5's zero-centred norms, which scale by 1 + w), embeddings N(0, 1).
    Stacked expert matrices [E, rows, fan_in] (transformers 5 keeps them fused) count as matrices;
    Command R+'s per-head q/k norm weights [heads, head_dim] as norm weights."""
    import torch
    g = torch.Generator().manual_seed(seed)
    zero_centred = model.config.model_type in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe",
                                               "nemotron")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2 and not (model.config.model_type == "cohere" and name.endswith("_norm.weight")):
                # gpt-oss keeps its experts transposed, [E, fan_in, out].
                fan_in = p.shape[-2] if model.config.model_type == "gpt_oss" and ".experts." in name else p.shape[-1]
                std = 1.0 if "embed" in name else fan_in ** -0.5
                p.copy_(torch.randn(p.shape, generator=g) * std)
            elif name.endswith("sinks"):  # gpt-oss's attention sinks: logits as large as the scores
                p.copy_(torch.randn(p.shape, generator=g))
            elif "norm" in name and zero_centred and "linear_attn.norm" not in name and "visual" not in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))  # these norms scale by 1 + w
            elif "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
        for name, b in model.named_buffers():
            # DeepSeek-V3's selection bias: a buffer, zero at init; large enough to change choices.
            # LFM2-MoE's expert_bias alike.
            if name.endswith("e_score_correction_bias") or name.endswith("expert_bias"):
                b.copy_(0.3 * torch.randn(b.shape, generator=g))


def hub_checkpoint(config_cls, model_cls, kw, seed, out):
    """A tiny random transformers model (randomize) saved into directory `out` in the Hub layout
    (save_pretrained: one tensor per expert); returns its state dict and config.json."""
    import torch
    import transformers
    from safetensors.torch import load_file
    config = getattr(transformers, config_cls)(**kw)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).to(torch.float32).eval()
    randomize(model, seed)
    model.save_pretrained(out, safe_serialization=True)
    return load_file(str(Path(out) / "model.safetensors")), json.loads((Path(out) / "config.json").read_text())


def run_cases(model, vocab_size, decode_logits, prompts=None):
    """expected.json's cases: for each prompt (prompts, default prompts_for(vocab_size)), the logits
    of every position and the greedy continuation; with decode_logits, the logits of the cached
    decode steps (step i >= 1 fed greedy token i - 1)."""
    import torch
    cases = []
    with torch.no_grad():
        for prompt in prompts if prompts is not None else prompts_for(vocab_size):
            ids = torch.tensor([prompt])
            logits = model(ids).logits[0].to(torch.float32)
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY,
                                 pad_token_id=0, eos_token_id=None, output_logits=True,
                                 return_dict_in_generate=True)
            case = {
                "prompt": prompt,
                "logits": [[float(f"{v:.7g}") for v in row.tolist()] for row in logits],
                "greedy": gen.sequences[0, len(prompt):].tolist(),
            }
            if decode_logits:
                case["decode_logits"] = [[float(f"{v:.7g}") for v in step[0].tolist()]
                                         for step in gen.logits[1:]]
            cases.append(case)
    return cases


def new_model(config_cls, model_cls, kw, seed):
    """A tiny fp32 transformers model (eager attention) with randomize()'d weights."""
    import torch
    import transformers
    config = getattr(transformers, config_cls)(**kw)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).to(torch.float32).eval()
    randomize(model, seed)
    return model


def make(name, config_cls, model_cls, kw, seed, model=None):
    import torch
    import transformers
    model = model if model is not None else new_model(config_cls, model_cls, kw, seed)
    out_dir = OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    for extra in ("generation_config.json",):
        (out_dir / extra).unlink(missing_ok=True)
    vocab_size = kw["vocab_size"] if "vocab_size" in kw else kw["text_config"]["vocab_size"]
    cases = run_cases(model, vocab_size, decode_logits=any(k in name for k in ("nanochat", "cwm", "iquestcoder", "solar", "minicpm", "youtu", "bamba", "deepseek", "axk1", "phi3", "gemma", "gpt_oss", "glm4", "mamba", "granite", "nemotron", "jamba", "qwen3_next", "qwen3_5", "lfm2", "falcon_h1", "olmo", "exaone4", "glm4", "glm", "helium", "seed_oss", "ernie4_5", "hunyuan", "apertus", "ernie", "llama4", "minimax", "cohere", "dots1", "ministral3", "ministral", "vaultgemma", "hyperclovax", "kolibri1", "flint", "bitnet", "mellum", "param2moe", "sarvam", "cohere2_moe", "hy_v3", "phimoe", "afmoe", "arcee", "mistral4", "kimi_linear", "mimo", "exaone_moe", "dsa", "deepseek_v32", "starcoder2", "phi", "stablelm", "longcat", "jais2", "exaone", "gpt", "falcon", "bloom", "mpt", "opt")))
    write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, "
                                  f"{model_cls}, fp32, eager attention, seed {seed}", vocab_size, cases)


# The GPT fixtures' seeds (fixed, so fixtures added to fixtures() before them change nothing).
GPT_SEEDS = {"gpt_neox": 3600, "gpt_neox_sequential": 3601, "gptj": 3602, "gpt2": 3603, "gpt_bigcode": 3604,
             "gpt_bigcode_mha": 3605, "falcon": 3606, "falcon_new": 3607, "falcon_one_norm": 3608,
             "falcon_sequential": 3609, "bloom": 3610, "mpt": 3611, "mpt_clip": 3612, "opt": 3613,
             "gpt_neo": 3614, "codegen": 3622}


def gpt_model(config_cls, model_cls, kw, seed):
    """new_model() with GPT-2's, GPT-J's and GPTBigCode's LayerNorms (ln_*: named without "norm", so
    randomize leaves them N(0, 0.1)) re-drawn as 1 + N(0, 0.1) and their token and position tables
    (wte, wpe) N(0, 1), as randomize draws other models' (else the logits are too small to tell
    rows apart)."""
    import torch
    model = new_model(config_cls, model_cls, kw, seed)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if ".ln_" in pname and pname.endswith(".weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif pname.endswith(("wte.weight", "wpe.weight")):
                p.copy_(torch.randn(p.shape, generator=g))
    return model


def make_gpt(name, config_cls, model_cls, kw, seed):
    """make() of gpt_model() with GPT_SEEDS' seed; GPT-NeoX's config.json with the Hub's rotary_pct /
    rotary_emb_base in place of transformers 5's rope_parameters (checked to give the same logits)."""
    import torch
    seed = GPT_SEEDS[name]
    model = gpt_model(config_cls, model_cls, kw, seed)
    make(name, config_cls, model_cls, kw, seed, model=model)
    if config_cls != "GPTNeoXConfig":
        return
    import transformers
    d = OUT / name
    cfg = json.loads((d / "config.json").read_text())
    rope = cfg.pop("rope_parameters")
    cfg["rotary_pct"] = rope["partial_rotary_factor"]
    cfg["rotary_emb_base"] = rope["rope_theta"]
    (d / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    again = transformers.GPTNeoXForCausalLM.from_pretrained(d, attn_implementation="eager").eval()
    ids = torch.tensor([prompts_for(kw["vocab_size"])[0]])
    with torch.no_grad():
        assert torch.equal(again(ids).logits, model(ids).logits), "the Hub's rotary names read back differently"


def make_axk1(name, config_cls, model_cls, kw, seed):
    """make(); for axk1_hub, the selection bias zeroed before the reference runs and then dropped
    from the file, and a post_mlp_layernorm written for each dense layer, as the released
    checkpoints have them (checked to load back into transformers with the same logits)."""
    import torch
    import transformers
    from safetensors.torch import load_file, save_file
    model = new_model(config_cls, model_cls, kw, seed)
    if name != "axk1_hub":
        return make(name, config_cls, model_cls, kw, seed, model=model)
    with torch.no_grad():
        for bname, b in model.named_buffers():
            if bname.endswith("e_score_correction_bias"):
                b.zero_()
        for pname, p in model.named_parameters():
            if pname.endswith("e_score_correction_bias"):
                p.zero_()
    make(name, config_cls, model_cls, kw, seed, model=model)
    path = OUT / name / "model.safetensors"
    tensors = {k: v for k, v in load_file(str(path)).items() if not k.endswith("e_score_correction_bias")}
    g = torch.Generator().manual_seed(seed + 1)
    for layer, kind in enumerate(model.config.mlp_layer_types):
        if kind == "dense":
            tensors[f"model.layers.{layer}.post_mlp_layernorm.weight"] = 1.0 + 0.1 * torch.randn(
                model.config.hidden_size, generator=g)
    save_file(tensors, str(path), metadata={"format": "pt"})
    again = getattr(transformers, model_cls).from_pretrained(OUT / name, attn_implementation="eager").eval()
    ids = torch.tensor([prompts_for(kw["vocab_size"])[0]])
    with torch.no_grad():
        assert torch.equal(again(ids).logits, model(ids).logits), "the Hub layout reads back differently"


BITNET_LINEARS = {"bitnet": ("bitlinear", "offline"), "bitnet_auto": ("autobitlinear", "offline"),
                  "bitnet_online": ("autobitlinear", "online")}


def make_bitnet(name, config_cls, model_cls, kw, seed):
    """A quant_method bitnet checkpoint and transformers' cases from loading it. Each decoder
    linear's weight w is ternarized as AutoBitLinear's WeightQuant does (t = clamp(round(w s), -1, 1),
    s = 1 / mean |w|) and stored as BITNET_LINEARS' class keeps it: BitLinear's packed u8 codes
    (transformers' pack_weights) with weight_scale s, which it divides by; AutoBitLinear offline's
    float codes with weight_scale 1 / s, which it multiplies by; AutoBitLinear online's float w,
    ternarized per forward. Every linear's input x is quantized to int8 per row, round(x 127 /
    max |x|), a rounding that brigade's fp32 activations, ~1e-5 (in those units) from PyTorch's,
    could flip, and one flipped element moves these tiny models' logits by ~0.1. So the cases are
    the two short prompts only (few quantized elements), and the first seed from `seed` (in steps
    of 10000) whose every quantized element, in every forward the cases run, lies 1.5e-4 or more
    from a rounding boundary (and, online, every weight code 4e-6 relative) is kept: there
    brigade must match to the usual tolerance."""
    import torch
    import torch._dynamo
    import transformers
    from safetensors.torch import load_file, save_file
    from transformers.integrations.bitnet import AutoBitLinear, BitLinear, pack_weights
    torch._dynamo.config.disable = True  # transformers' BitNet kernels are torch.compile'd: run them eagerly
    linear_class, mode = BITNET_LINEARS[name]
    out_dir = OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)

    def boundary_gap(v, relative=False):  # the smallest distance from a .5 rounding boundary
        gap = ((v - v.floor()) - 0.5).abs()
        return (gap / v.abs().clamp(min=1.0) if relative else gap).min().item()

    for attempt in range(60):
        s = seed + 10000 * attempt
        new_model(config_cls, model_cls, kw, s).save_pretrained(out_dir, safe_serialization=True)
        (out_dir / "generation_config.json").unlink(missing_ok=True)
        stored, weight_gaps, gaps = {}, [1.0], [1.0]
        for key, w in load_file(str(out_dir / "model.safetensors")).items():
            if not (key.startswith("model.layers.") and key.endswith("_proj.weight")):
                stored[key] = w
                continue
            scale = 1.0 / w.abs().mean().clamp(min=1e-5)
            weight_gaps.append(boundary_gap(w * scale, relative=True))
            t = (w * scale).round().clamp(-1, 1)
            base = key[:-len("weight")]
            if mode == "online":
                stored[key] = w
            elif linear_class == "bitlinear":
                stored[key], stored[base + "weight_scale"] = pack_weights(t.clone()), scale.reshape(1)
            else:
                stored[key], stored[base + "weight_scale"] = t.contiguous(), (1.0 / scale).reshape(1)
        save_file(stored, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
        (out_dir / "model.safetensors").chmod(0o644)
        config = json.loads((out_dir / "config.json").read_text())
        config["quantization_config"] = {"quant_method": "bitnet", "linear_class": linear_class,
                                         "quantization_mode": mode}
        (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        model = getattr(transformers, model_cls).from_pretrained(out_dir, dtype=torch.float32,
                                                                 attn_implementation="eager").eval()
        assert all(isinstance(m, (BitLinear, AutoBitLinear)) for n, m in model.named_modules()
                   if n.endswith("_proj")), "every decoder linear is a BitNet linear"
        def record(module, args):
            x = args[0].to(torch.float32)
            gaps.append(boundary_gap(x * (127.0 / x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-5))))

        for m in model.modules():
            if isinstance(m, (BitLinear, AutoBitLinear)):
                m.register_forward_pre_hook(record)
        cases = run_cases(model, config["vocab_size"], decode_logits=True, prompts=PROMPTS[:2])
        if min(gaps) >= 1.5e-4 and (mode != "online" or min(weight_gaps) >= 4e-6):
            break
    else:
        sys.exit(f"{name}: no seed in 60 keeps every int8 rounding 1.5e-4 from a boundary")
    write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, "
                                  f"{model_cls} from the bitnet checkpoint ({linear_class}, {mode}), fp32, "
                                  f"eager attention, seed {s}", config["vocab_size"], cases,
                   min_rounding_gap=min(gaps))  # (recorded: how far this fixture is from a flip)


def dsa_margins(model):
    """Records, while the model runs, the gap between the k-th and (k+1)-th best index score of
    every query that sees more than index_topk keys (the DSA indexer's top-k), so a fixture whose
    choice an fp32 rounding could flip is refused. Returns the list the gaps go into."""
    import torch
    gaps = []
    inside = []
    real_topk = torch.Tensor.topk

    def topk(self, k, *args, **kwargs):
        if inside and self.dim() == 3:
            s = self.float()
            for row in s.reshape(-1, s.shape[-1]):
                valid = row[row > -1e30].sort(descending=True).values
                if valid.numel() > k:
                    gaps.append(float(valid[k - 1] - valid[k]))
        return real_topk(self, k, *args, **kwargs)

    torch.Tensor.topk = topk
    for m in model.modules():
        if type(m).__name__.endswith("Indexer"):
            m.register_forward_pre_hook(lambda *a: inside.append(1))
            m.register_forward_hook(lambda *a: inside.clear())
    return gaps


def make_dsa(name, config_cls, model_cls, kw, seed):
    """make() for a DSA model (deepseek_v32, glm_moe_dsa), from the first seed whose indexer
    choices all clear the next key by 1e-3 (fp32 noise cannot flip them), plus `dense_logits`:
    transformers' logits of the longest prompt with every indexer keeping all keys (dense MLA),
    which the tests use to show the sparsity matters."""
    import torch
    for s in range(seed, seed + 50):
        model = new_model(config_cls, model_cls, kw, s)
        gaps = dsa_margins(model)
        make(name, config_cls, model_cls, kw, s, model=model)
        if gaps and min(gaps) >= 1e-3:
            break
        print(f"{name}: seed {s} has an index score gap of {min(gaps) if gaps else None}; next seed")
    else:
        sys.exit(f"{name}: no seed with clear indexer choices")
    print(f"{name}: seed {s}, {len(gaps)} sparse choices, smallest gap {min(gaps):.3g}")
    for m in model.modules():
        if type(m).__name__.endswith("Indexer"):
            m.index_topk = 1 << 30
    out = OUT / name / "expected.json"
    expected = json.loads(out.read_text())
    prompt = expected["cases"][-1]["prompt"]
    with torch.no_grad():
        dense = model(torch.tensor([prompt])).logits[0].to(torch.float32)
    sparse = torch.tensor(expected["cases"][-1]["logits"])
    print(f"{name}: dense vs sparse max |dlogit| {float((dense - sparse).abs().max()):.3g}")
    expected["dense_logits"] = [[float(f"{v:.7g}") for v in row.tolist()] for row in dense]
    out.write_text(json.dumps(expected, separators=(",", ":")) + "\n")


def make_longcat_flash(name, config_cls, model_cls, kw, seed):
    """make() after checking, over the prompts' forwards, that the routers pick both real and zero
    (identity) experts in every layer, so the fixture exercises both."""
    import torch
    model = new_model(config_cls, model_cls, kw, seed)
    picks = []

    def count(module, args, out):
        ids = out[2]
        picks.append((module, int((ids >= kw["n_routed_experts"]).sum()), ids.numel()))

    routers = [layer.mlp.router for layer in model.model.layers]
    hooks = [r.register_forward_hook(count) for r in routers]
    with torch.no_grad():
        for prompt in prompts_for(kw["vocab_size"]):
            model(torch.tensor([prompt]))
    for h in hooks:
        h.remove()
    for i, r in enumerate(routers):
        zero = sum(z for m, z, _ in picks if m is r)
        total = sum(t for m, _, t in picks if m is r)
        print(f"{name}: layer {i} routes {zero} of {total} picks to zero experts")
        assert 0 < zero < total, "the fixture must route some picks to zero experts and some to real ones"
    make(name, config_cls, model_cls, kw, seed, model=model)


def make_kimi_linear(name, config_cls, model_cls, kw, seed):
    """make(), then kda_op.json: Backend::kda's reference on random inputs, transformers'
    recurrent_kimi_delta_attention (its torch fallback, the rule token by token) with the decay of
    KimiLinearForgetGate (its f_a / f_b projections made identities, so f is the gate's input):
    H heads of N key and P value channels over T rows from a zero state; raw q, k, v (before the
    L2 norm), f (before dt_bias), A_log [H], dt_bias [H N] and beta's logits, the outputs o
    [T, H, P] and the final state [H, N, P]."""
    import torch
    import transformers
    from transformers.models.kimi_linear import modeling_kimi_linear as mk
    make(name, config_cls, model_cls, kw, seed)
    h, nk, pv, t = 2, 8, 6, 7
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, t, h, nk, generator=g), torch.randn(1, t, h, nk, generator=g)
    v = torch.randn(1, t, h, pv, generator=g)
    f = torch.randn(1, t, h * nk, generator=g)
    beta_logits = torch.randn(1, t, h, generator=g)
    config = transformers.KimiLinearConfig(hidden_size=nk, linear_attn_config=dict(head_dim=nk, num_heads=h))
    gate = mk.KimiLinearForgetGate(config)
    gate.f_a_proj, gate.f_b_proj = torch.nn.Identity(), torch.nn.Identity()
    with torch.no_grad():
        gate.A_log.copy_(torch.rand(1, 1, h, 1, generator=g) * 2.0 - 1.0)
        gate.dt_bias.copy_(torch.randn(h * nk, generator=g))
        decay = gate(f)
        o, state = mk.recurrent_kimi_delta_attention(q, k, v, decay, torch.sigmoid(beta_logits), initial_state=None,
                                                     output_final_state=True, use_qk_l2norm_in_kernel=True)
    flat = lambda x: [float(f"{y:.8g}") for y in x.reshape(-1).tolist()]
    out = {"generator": f"transformers {transformers.__version__} recurrent_kimi_delta_attention, KimiLinearForgetGate",
           "heads": h, "key_dim": nk, "value_dim": pv, "rows": t, "q": flat(q), "k": flat(k), "v": flat(v), "f": flat(f),
           "beta": flat(beta_logits), "a_log": flat(gate.A_log.detach()), "dt_bias": flat(gate.dt_bias.detach()),
           "out": flat(o), "state": flat(state)}
    (OUT / name / "kda_op.json").write_text(json.dumps(out, separators=(",", ":")) + "\n")


def make_minimax(name, config_cls, model_cls, kw, seed):
    """make(), then lightning_op.json: Backend::lightning_attention's reference on random inputs,
    transformers' MiniMaxLightningAttention with qkv_proj made the identity (so qkv is silu of the
    input): H heads of D over T rows from a zero state, in blocks of 4 (its blocked prefill), then
    `decode` more rows one at a time from its cache (its recurrent branch). Raw qkv [T + decode, H,
    3 D] (before the SiLU), the slope of layer `layer` of `layers`, the outputs o before its norm
    (a hook on the norm's input) [T + decode, H D] and the final state [H, D (key), D (value)]."""
    import torch
    import transformers
    from transformers.models.minimax import modeling_minimax as mm
    make(name, config_cls, model_cls, kw, seed)
    h, d, t, dec, layer, layers = 3, 8, 11, 3, 1, 4
    config = transformers.MiniMaxConfig(hidden_size=3 * h * d, num_attention_heads=h, head_dim=d, block_size=4,
                                        num_hidden_layers=layers, num_key_value_heads=h,
                                        layer_types=["linear_attention"] * layers)
    attn = mm.MiniMaxLightningAttention(config, layer).eval()
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, t + dec, 3 * h * d, generator=g)
    seen = []
    attn.norm.register_forward_hook(lambda mod, inp, out: seen.append(inp[0].detach().clone()))
    cache = mm.MiniMaxCache()
    with torch.no_grad():
        attn.qkv_proj.weight.copy_(torch.eye(3 * h * d))
        attn(x[:, :t], None, None, cache=cache)
        for i in range(t, t + dec):
            _, state = attn(x[:, i:i + 1], None, None, cache=cache)
    o = torch.cat(seen, dim=1)
    flat = lambda y: [float(f"{v:.8g}") for v in y.reshape(-1).tolist()]
    out = {"generator": f"transformers {transformers.__version__} MiniMaxLightningAttention (block_size 4, then its cache)",
           "heads": h, "head_dim": d, "rows": t, "decode_rows": dec, "layer": layer, "layers": layers,
           "slope": flat(attn.slope_rate), "qkv": flat(x), "out": flat(o), "state": flat(state[0])}
    (OUT / name / "lightning_op.json").write_text(json.dumps(out, separators=(",", ":")) + "\n")


def make_glm4_moe_step(name, config_cls, model_cls, kw, seed):
    """make(), then the MTP layer GLM-4.5's checkpoints store after the last layer
    (model.layers.{L}.*: eh_proj, enorm, hnorm, shared_head.norm and a whole decoder layer with its
    experts), random, added to model.safetensors. transformers ignores it
    (_keys_to_ignore_on_load_unexpected), so the expected logits are those of the L layers."""
    import torch
    from safetensors.torch import load_file, save_file
    make(name, config_cls, model_cls, kw, seed)
    path = OUT / name / "model.safetensors"
    tensors = load_file(str(path))
    layers = kw["num_hidden_layers"]
    g = torch.Generator().manual_seed(seed)
    extra = {}
    for key, t in tensors.items():
        if key.startswith("model.layers.0."):
            extra[key.replace("model.layers.0.", f"model.layers.{layers}.", 1)] = torch.randn(t.shape, generator=g)
    h = kw["hidden_size"]
    mtp = f"model.layers.{layers}."
    extra[mtp + "eh_proj.weight"] = torch.randn((h, 2 * h), generator=g)
    for norm in ("enorm.weight", "hnorm.weight", "shared_head.norm.weight"):
        extra[mtp + norm] = torch.ones(h)
    tensors.update(extra)
    save_file(tensors, str(path), metadata={"format": "pt"})
    print(f"{name}: {len(extra)} MTP tensors added")


def write_expected(out_dir, name, generator, vocab_size, cases, **fields):
    """Writes a fixture's expected.json (what the C++ HfFixture tests read) and reports its size;
    `fields` go between vocab_size and cases."""
    expected = {"generator": generator, "vocab_size": vocab_size, **fields, "cases": cases}
    (out_dir / "expected.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")
    size = sum(f.stat().st_size for f in out_dir.iterdir())
    print(f"{name}: {size / 1024:.0f} KiB")


N_DRAFT = 3  # chained MTP drafts recorded per case


def make_mtp(name, config_cls, model_cls, kw, seed):
    """The target (deepseek_v3, glm4_moe, glm4_moe_lite, deepseek_v32 or glm_moe_dsa; num_hidden_layers
    L = 2) with one MTP module in the same model.safetensors under model.layers.{L}. as the Hub's
    checkpoints ship it: enorm.weight, hnorm.weight [hidden], eh_proj.weight [hidden, 2 hidden], a
    sparse decoder layer under its usual names (as save_pretrained writes layer 1: one tensor per
    expert; for V3.2 / GLM-5 with its own self_attn.indexer.*), shared_head.norm.weight [hidden]
    and, for DeepSeek-V3 / V3.2 only, embed_tokens.weight and shared_head.head.weight
    (model.embed_tokens and lm_head copied; GLM-4.6 stores neither). transformers ignores these tensors.

    The reference is SGLang's DeepseekModelNextN (deepseek_nextn.py; Glm4MoeModelNextN in
    glm4_moe_nextn.py is the same formula over a Glm4MoeDecoderLayer; vLLM's deepseek_mtp.py /
    glm4_moe_lite_mtp.py over the model's decoder layer at index L), mtp_forward below. For the
    sequence t = prompt + the target's N_GREEDY greedy tokens (n tokens), expected.json's case
    holds mtp_logits [n - 1][V] (position i reads t_{i+1} and the target's final-norm hidden
    state h_i) and the chain of N_DRAFT drafts from the last position: d_1 = argmax of
    mtp_logits[n - 2]; draft k + 1 appends position n - 2 + k reading (d_k, the MTP's own
    post-norm output g there) and reruns the module over the whole extended sequence;
    chain_logits[k] are the logits draft k + 1 is the argmax of (chain_logits[0] = mtp_logits[n - 2]).
    A DSA model takes the first seed from `seed` whose indexer choices (the target's and the
    module's) all clear the next key by 1e-3 (dsa_margins)."""
    import torch
    import transformers
    dsa = "index_topk" in kw
    for s in range(seed, seed + (50 if dsa else 1)):
        model = new_model(config_cls, model_cls, kw, s)
        mtp = new_mtp_module(model, s + 1)
        gaps = dsa_margins(torch.nn.ModuleList([model, mtp])) if dsa else None
        cases = []
        try:
            with torch.no_grad():
                for prompt in prompts_for(model.config.vocab_size):
                    if len(prompt) >= 2:  # the MTP reads the token after each position
                        cases.append(mtp_case(model, mtp, prompt))
        except AssertionError:  # a tie among index scores broke mtp_case's causality check
            if not dsa:
                raise
            gaps.append(0.0)
        if not dsa or (gaps and min(gaps) >= 1e-3):
            break
        print(f"{name}: seed {s} has an index score gap of {min(gaps) if gaps else None}; next seed")
    else:
        sys.exit(f"{name}: no seed with clear indexer choices")
    if dsa:
        print(f"{name}: seed {s}, {len(gaps)} sparse choices, smallest gap {min(gaps):.3g}")
    out_dir = OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    (out_dir / "generation_config.json").unlink(missing_ok=True)
    save_mtp_module(model, mtp, out_dir)
    top = {row.index(max(row)) for c in cases for row in c["mtp_logits"]}
    assert len(top) > 1, f"degenerate MTP: every position's argmax is {top}"
    nextn = "Glm4MoeModelNextN" if model.config.model_type == "glm4_moe" else "DeepseekModelNextN"
    write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, "
                                  f"{model_cls} target (fp32, eager attention, seed {s}) and its MTP "
                                  f"module (seed {s + 1}) computed as SGLang's {nextn}",
                   model.config.vocab_size, cases, n_draft=N_DRAFT)


# Per model_type: the transformers module, its decoder layer, RMSNorm and sparse MLP classes.
MTP_LAYERS = {
    "deepseek_v3": ("deepseek_v3", "DeepseekV3DecoderLayer", "DeepseekV3RMSNorm", "DeepseekV3MoE"),
    "glm4_moe": ("glm4_moe", "Glm4MoeDecoderLayer", "Glm4MoeRMSNorm", "Glm4MoeMoE"),
    "glm4_moe_lite": ("glm4_moe_lite", "Glm4MoeLiteDecoderLayer", "Glm4MoeLiteRMSNorm", "Glm4MoeLiteMoE"),
    "deepseek_v32": ("deepseek_v32", "DeepseekV32DecoderLayer", "DeepseekV32RMSNorm", "DeepseekV32MoE"),
    "glm_moe_dsa": ("glm_moe_dsa", "GlmMoeDsaDecoderLayer", "GlmMoeDsaRMSNorm", "GlmMoeDsaMoE"),
}


def with_mtp_layer(c):
    """A copy of config `c` with one more layer, the MTP module's: num_hidden_layers L + 1 and its
    per-layer lists extended (mlp_layer_types "sparse", GLM-5's indexer_types "full", layer_types
    "full_attention": the Hub's MTP layers are sparse and run their own indexer)."""
    import copy
    e = copy.deepcopy(c)
    e.num_hidden_layers = c.num_hidden_layers + 1
    for key, value in (("mlp_layer_types", "sparse"), ("indexer_types", "full"), ("layer_types", "full_attention")):
        if getattr(c, key, None) is not None:
            setattr(e, key, list(getattr(c, key)) + [value])
    return e


def new_mtp_module(model, seed):
    """The MTP module for `model` (MTP_LAYERS), randomize()'d: enorm, hnorm, eh_proj,
    shared_head.norm and the decoder layer `layer` (the model's own decoder layer class at index
    L = num_hidden_layers, sparse). The embedding and head are the target's."""
    import importlib
    import torch
    c = model.config
    module, layer_cls, norm_cls, sparse = MTP_LAYERS[c.model_type]
    mod = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    Layer, Norm = getattr(mod, layer_cls), getattr(mod, norm_cls)
    h = c.hidden_size
    torch.manual_seed(seed)
    mtp = torch.nn.ModuleDict({
        "enorm": Norm(h, eps=c.rms_norm_eps),
        "hnorm": Norm(h, eps=c.rms_norm_eps),
        "eh_proj": torch.nn.Linear(2 * h, h, bias=False),
        "layer": Layer(with_mtp_layer(c), layer_idx=c.num_hidden_layers),
        "shared_head": torch.nn.ModuleDict({"norm": Norm(h, eps=c.rms_norm_eps)}),
    })
    assert type(mtp["layer"].mlp).__name__ == sparse
    mtp.config = c  # randomize reads config.model_type
    randomize(mtp, seed)
    return mtp.to(torch.float32).eval()


def mtp_module_tensors(model, mtp):
    """The MTP module's tensors as the Hub's checkpoints name them, under model.layers.{L}.: the
    decoder layer named by save_pretrained itself (a copy of the target with L + 1 layers whose
    last one is `layer`: one tensor per expert), then enorm, hnorm, eh_proj and shared_head.norm."""
    import tempfile
    from safetensors.torch import load_file
    c = model.config
    pre = f"model.layers.{c.num_hidden_layers}."
    shell = type(model)(with_mtp_layer(c))
    shell.model.layers[c.num_hidden_layers] = mtp["layer"]
    with tempfile.TemporaryDirectory() as tmp:
        shell.save_pretrained(tmp, safe_serialization=True)
        tensors = {k: v for k, v in load_file(str(Path(tmp) / "model.safetensors")).items() if k.startswith(pre)}
    for key in ("enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight"):
        tensors[pre + key] = mtp.state_dict()[key].detach().clone().contiguous()
    return tensors


def save_mtp_module(model, mtp, out_dir):
    """Adds the MTP module (mtp_module_tensors) to out_dir/model.safetensors under model.layers.{L}.,
    then reads the layer back with from_pretrained to check the names round-trip."""
    import torch
    from safetensors.torch import load_file, save_file
    c = model.config
    pre = f"model.layers.{c.num_hidden_layers}."
    path = out_dir / "model.safetensors"
    tensors = load_file(str(path))
    tensors.update(mtp_module_tensors(model, mtp))
    if c.model_type.startswith("deepseek"):  # GLM-4.6's checkpoints leave these copies out
        tensors[pre + "embed_tokens.weight"] = tensors["model.embed_tokens.weight"].clone()
        tensors[pre + "shared_head.head.weight"] = tensors["lm_head.weight"].clone()
    save_file(tensors, str(path), metadata={"format": "pt"})
    e = with_mtp_layer(c)
    lists = {k: getattr(e, k) for k in ("mlp_layer_types", "indexer_types", "layer_types") if getattr(e, k, None) is not None}
    reread = type(model).from_pretrained(out_dir, num_hidden_layers=e.num_hidden_layers, dtype=torch.float32, **lists)
    want = mtp["layer"].state_dict()
    got = reread.model.layers[c.num_hidden_layers].state_dict()
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want), "MTP layer names"


def mtp_forward(model, mtp, next_tokens, prev):
    """SGLang's DeepseekModelNextN (or Glm4MoeModelNextN) over positions 0..m-1 (causal, RoPE at those positions):
    x_i = eh_proj([enorm(embed(next_tokens[i])); hnorm(prev[i])]), y = the decoder layer over x,
    g = shared_head.norm(y), logits = the target's lm_head(g). prev [m, hidden]: the target's
    final-norm hidden states, or for chained drafts the MTP's own g. Returns (g, logits [m, V])."""
    import torch
    from transformers.masking_utils import create_causal_mask
    ids = torch.tensor([next_tokens])
    e = mtp["enorm"](model.model.embed_tokens(ids))
    x = mtp["eh_proj"](torch.cat([e, mtp["hnorm"](prev[None])], dim=-1))
    pos = torch.arange(len(next_tokens))[None]
    # As DeepseekV3Model.forward (Glm4MoeModel.forward) calls its layers.
    mask = create_causal_mask(config=model.config, inputs_embeds=x, attention_mask=None, cache=None, position_ids=pos)
    assert mask is not None  # eager attention is causal only through this mask
    y = mtp["layer"](x, attention_mask=mask, position_ids=pos, position_embeddings=model.model.rotary_emb(x, pos))
    if isinstance(y, tuple):  # GLM-5's layer also returns its indexer's choice
        y = y[0]
    g = mtp["shared_head"]["norm"](y[0])
    return g, model.lm_head(g)


def mtp_case(model, mtp, prompt):
    """One expected.json case (make_mtp); checks causality: the MTP over a sequence
    one token shorter, and each chain step's earlier rows, give the same logits."""
    import torch
    fmt = lambda rows: [[float(f"{v:.8g}") for v in row.tolist()] for row in rows]
    ids = torch.tensor([prompt])
    tokens = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=N_GREEDY,
                            min_new_tokens=N_GREEDY, pad_token_id=0, eos_token_id=None)[0].tolist()
    hidden = model.model(torch.tensor([tokens])).last_hidden_state[0]
    nexts, prevs = tokens[1:], hidden[:-1]
    g, logits = mtp_forward(model, mtp, nexts, prevs)
    mtp_logits = logits
    shorter = model.model(torch.tensor([tokens[:-1]])).last_hidden_state[0]
    assert torch.allclose(mtp_forward(model, mtp, tokens[1:-1], shorter[:-1])[1], mtp_logits[:-1], rtol=0, atol=1e-5)
    drafts, chain = [], []
    for _ in range(N_DRAFT):
        drafts.append(int(logits[-1].argmax()))
        chain.append(logits[-1])
        nexts, prevs = nexts + [drafts[-1]], torch.cat([prevs, g[-1:]])
        g, logits = mtp_forward(model, mtp, nexts, prevs)
        assert torch.allclose(logits[:len(mtp_logits)], mtp_logits, rtol=0, atol=1e-5)
    return {"tokens": tokens, "target_greedy_from": len(prompt), "mtp_logits": fmt(mtp_logits),
            "chain_drafts": drafts, "chain_logits": fmt(chain)}


def make_gpt_oss_mxfp4(name="gpt_oss_mxfp4"):
    """The gpt_oss fixture as the Hub ships gpt-oss (quant_method mxfp4): every expert matrix
    quantized to MXFP4 by gguf-py's reference quantizer (ggml's block_mxfp4: E8M0 scale byte,
    element j and j + 16 in byte j) and repacked into transformers' layout, W [rows, cols] as
    <name>_blocks u8 [rows, cols / 32, 16] (element 2k in the low nibble of byte k, 2k + 1 in
    the high one) and <name>_scales u8 [rows, cols / 32] (the same E8M0 byte: transformers
    computes fp4 * 2^(s - 127), ggml kvalue (2 fp4) * 2^(e - 128)); rows are the output features,
    so gate_up's are gate/up interleaved. The rest of the tensors as in gpt_oss. The reference is
    transformers loading this directory, which dequantizes MXFP4 on the CPU."""
    import numpy as np
    import torch
    import transformers
    from safetensors.numpy import load_file, save_file
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "gguf"]) if not _has("gguf") else None
    import gguf
    src, out_dir = OUT / "gpt_oss", OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors = load_file(str(src / "model.safetensors"))
    config = json.loads((src / "config.json").read_text())

    def hf_mxfp4(w):  # w [E, rows, cols] f32 -> (blocks [E, rows, cols/32, 16], scales [E, rows, cols/32])
        e, rows, cols = w.shape
        q = gguf.quants.quantize(np.ascontiguousarray(w.reshape(-1, cols)), gguf.GGMLQuantizationType.MXFP4)
        q = q.reshape(e * rows * (cols // 32), 17)
        scales, qs = q[:, 0], q[:, 1:]
        codes = np.concatenate([qs & 0x0F, qs >> 4], axis=1)  # ggml: element j, then j + 16
        blocks = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
        return blocks.reshape(e, rows, cols // 32, 16), scales.reshape(e, rows, cols // 32).astype(np.uint8)

    stored = {}
    for key, value in tensors.items():
        if key.endswith("experts.gate_up_proj") or key.endswith("experts.down_proj"):
            blocks, scales = hf_mxfp4(np.ascontiguousarray(value.transpose(0, 2, 1)))  # [E, in, out] -> [E, out, in]
            stored[key + "_blocks"], stored[key + "_scales"] = blocks, scales
        else:
            stored[key] = value
    save_file(stored, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    config["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    model = transformers.GptOssForCausalLM.from_pretrained(out_dir, dtype=torch.float32,
                                                           attn_implementation="eager").eval()
    # The dequantized experts are gguf-py's dequantization of the same blocks (the layouts agree).
    for key, value in tensors.items():
        if key.endswith("experts.gate_up_proj") or key.endswith("experts.down_proj"):
            w = value.transpose(0, 2, 1)
            q = gguf.quants.quantize(np.ascontiguousarray(w.reshape(-1, w.shape[-1])), gguf.GGMLQuantizationType.MXFP4)
            want = gguf.quants.dequantize(q, gguf.GGMLQuantizationType.MXFP4).reshape(w.shape).transpose(0, 2, 1)
            got = model.state_dict()[key].to(torch.float32).numpy()
            assert np.array_equal(got, want), key
    cases = run_cases(model, config["vocab_size"], decode_logits=True)
    # What brigade's native MXFP4 kernels add: their inputs rounded to Q8_0 blocks (as ggml's
    # quantize_row_q8_0_ref), every expert's gate_up and down input; per case the logits' move
    # and that run's greedy tokens (act_q8_max_diff / act_q8_greedy, as the GGUF fixtures).
    for case, (diff, greedy) in zip(cases, gpt_oss_act_q8_runs(model, cases)):
        case["act_q8_max_diff"], case["act_q8_greedy"] = diff, greedy
    write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, "
                                  f"GptOssForCausalLM from the mxfp4 checkpoint (dequantized to fp32 by transformers), "
                                  f"experts quantized by gguf-py {getattr(gguf, '__version__', '')} MXFP4, eager attention",
                   config["vocab_size"], cases)


def q8_0_round_trip(x):
    """x with its last dimension rounded to Q8_0 blocks of 32 (ggml's quantize_row_q8_0_ref)."""
    import torch
    b = x.reshape(*x.shape[:-1], -1, 32)
    d = b.abs().amax(dim=-1, keepdim=True) / 127.0
    inv = torch.where(d > 0, 1.0 / d, torch.zeros_like(d))
    return (torch.round(b * inv) * d.to(torch.float16).to(torch.float32)).reshape(x.shape)


def gpt_oss_experts_q8_forward(self, hidden_states, router_indices=None, routing_weights=None):
    """GptOssExperts.forward with both matmuls' inputs rounded to Q8_0, token by token, slot by slot."""
    import torch
    out = torch.zeros_like(hidden_states)
    for t in range(hidden_states.shape[0]):
        x = q8_0_round_trip(hidden_states[t])
        for j in range(router_indices.shape[1]):
            e = int(router_indices[t, j])
            act = self._apply_gate(x @ self.gate_up_proj[e] + self.gate_up_proj_bias[e])
            y = q8_0_round_trip(act) @ self.down_proj[e] + self.down_proj_bias[e]
            out[t] += y * routing_weights[t, j]
    return out


def gpt_oss_act_q8_runs(model, cases):
    """Per case: (max |logit change|, greedy tokens) with the experts' inputs rounded to Q8_0."""
    import types
    import torch
    experts = [m for m in model.modules() if type(m).__name__ == "GptOssExperts"]
    assert experts
    for m in experts:
        m.forward = types.MethodType(gpt_oss_experts_q8_forward, m)
    out = []
    with torch.no_grad():
        for c in cases:
            ids = torch.tensor([c["prompt"]])
            logits = model(ids).logits[0].to(torch.float32)
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=N_GREEDY,
                                 min_new_tokens=N_GREEDY, pad_token_id=0, eos_token_id=None)
            out.append((float((logits - torch.tensor(c["logits"])).abs().max()), gen[0, len(c["prompt"]):].tolist()))
    for m in experts:
        del m.forward
    return out


def _has(module):
    import importlib.util
    return importlib.util.find_spec(module) is not None


EMBED_PROMPTS = PROMPTS + [[1, 5, 9, 200, 31, 31, 8, 250, 4, 66, 17, 3, 120, 45, 91, 2, 77, 18, 140, 60]]


def write_embeddings(name):
    """embeddings.json for an existing fixture: per prompt, AutoModel's last_hidden_state (the
    final norm's output, fp32) pooled as sentence-transformers does: last token, mean over the
    prompt, first (cls) token; each raw and divided by its L2 norm (torch.nn.functional.normalize)."""
    import torch
    import transformers
    out_dir = OUT / name
    model = transformers.AutoModel.from_pretrained(out_dir, torch_dtype=torch.float32,
                                                   attn_implementation="eager").eval()
    fmt = lambda t: [float(f"{v:.8g}") for v in t.tolist()]
    cases = []
    with torch.no_grad():
        for prompt in EMBED_PROMPTS:
            ids = torch.tensor([prompt])
            hidden = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0]
            pooled = {"last": hidden[-1], "mean": hidden.mean(dim=0), "cls": hidden[0]}
            cases.append({"prompt": prompt,
                          "raw": {k: fmt(v) for k, v in pooled.items()},
                          "normalized": {k: fmt(torch.nn.functional.normalize(v, dim=0)) for k, v in pooled.items()}})
    doc = {"generator": f"transformers {transformers.__version__}, torch {torch.__version__}, "
                        f"AutoModel ({type(model).__name__}) last_hidden_state, fp32, eager attention",
           "hidden_size": model.config.hidden_size, "cases": cases}
    (out_dir / "embeddings.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{name}/embeddings.json: {len(cases)} prompts")


def main():
    """python3 scripts/make_fixtures.py [NAME...]: the named fixtures, or all of them;
    --embeddings NAME...: the named fixtures' embeddings.json."""
    ensure_venv()
    names = sys.argv[1:]
    if names[:1] == ["--embeddings"]:
        for name in names[1:] or ["qwen3"]:
            write_embeddings(name)
        return
    unknown = set(names) - set(fixtures()) - {"gpt_oss_mxfp4"}
    if unknown:
        sys.exit(f"unknown fixtures {sorted(unknown)}; known: {', '.join(fixtures())}, gpt_oss_mxfp4")
    for seed, (name, (config_cls, model_cls, kw)) in enumerate(fixtures().items()):
        if not names or name in names:
            maker = {"deepseek_v3_mtp": make_mtp, "glm4_moe_mtp": make_mtp, "glm4_moe_step": make_glm4_moe_step,
                     "glm4_moe_lite_mtp": make_mtp, "deepseek_v32_mtp": make_mtp, "glm_moe_dsa_mtp": make_mtp,
                     "kimi_linear": make_kimi_linear, "exaone": make_exaone,
                     **{n: make_gpt for n in GPT_SEEDS},
                     "longcat_flash": make_longcat_flash,
                     "minimax": make_minimax,
                     "gemma3n_mm": make_gemma3n_mm,
                     "deepseek_v32": make_dsa, "glm_moe_dsa": make_dsa,
                     **{n: make_internlm for n in ("internlm2", "internlm2_bias", "internlm3")},
                     "chatglm": make_chatglm, "minicpm": make_minicpm, "minicpm_longrope": make_minicpm,
                     "iquestcoder": make_iquestcoder, "param2moe": make_original_config,
                     "sarvam_moe": make_original_config, "sarvam_mla": make_sarvam_mla,
                     "axk1": make_axk1, "axk1_hub": make_axk1,
                     **{n: make_bitnet for n in BITNET_LINEARS}}.get(name, make)
            maker(name, config_cls, model_cls, kw, 1000 + seed)
    if not names or "gpt_oss_mxfp4" in names:  # from the gpt_oss fixture written above
        make_gpt_oss_mxfp4()


if __name__ == "__main__":
    main()
