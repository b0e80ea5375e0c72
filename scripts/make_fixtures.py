#!/usr/bin/env python3
"""Writes the transformers reference fixtures that tests/models/hf_fixture_test.cpp reads.

For each architecture it builds a tiny random checkpoint with transformers (fp32), saves it with
save_pretrained (config.json + model.safetensors) into tests/fixtures/<name>/, and writes
expected.json: for a few prompts of token ids, transformers' fp32 logits at every position and the
greedy continuation (model.generate, do_sample=False).

Run from anywhere: python3 scripts/make_fixtures.py [NAME...] (the named fixtures, default all;
regenerating one leaves the others' bytes alone). `--embeddings NAME...` leaves the checkpoints
alone and writes tests/fixtures/<name>/embeddings.json instead: the pooled final hidden states
(AutoModel's last_hidden_state, pooled last / mean / cls, raw and L2-normalized) that
tests/models/pooling_reference_test.cpp compares with. It creates its own virtual environment in
.brigade/fixtures-venv (git-ignored) and installs torch, transformers, tokenizers, safetensors and numpy from
PyPI there on first use; then it re-runs itself inside that environment. CI never runs it: the
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
PACKAGES = ["torch", "transformers", "tokenizers", "safetensors", "numpy"]


def ensure_venv(script=__file__):
    """Re-executes `script` inside VENV, creating it and installing PACKAGES when needed."""
    python = VENV / "bin" / "python"
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    if not python.exists():
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
    probe = subprocess.run([str(python), "-c", "import torch, transformers, tokenizers, safetensors, numpy"],
                           capture_output=True)
    if probe.returncode != 0:
        subprocess.check_call([str(python), "-m", "pip", "install", *PACKAGES])
    os.execv(str(python), [str(python), script, *sys.argv[1:]])


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
        "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", deepseek_config(
            q_lora_rank=24, n_group=4, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5,
            rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                             "original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0,
                             "mscale": 1.0, "mscale_all_dim": 0.7})),
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
    }


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


def deepseek_config(**kw):
    """A tiny DeepSeek (V2 or V3) config: 4 heads, latent 32, nope/rope/v 16/8/16, 8 experts of 16."""
    c = base_config(vocab_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
                    rms_norm_eps=1e-6, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                    v_head_dim=16, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16,
                    n_shared_experts=1, first_k_dense_replace=1)
    c.update(kw)
    return c


def randomize(model, seed):
    """Replaces every parameter with values large enough that logits differ clearly per token:
    matrices ~ N(0, 1/fan_in), biases ~ N(0, 0.1), norm weights 1 + N(0, 0.1), embeddings N(0, 1).
    Stacked expert matrices [E, rows, fan_in] (transformers 5 keeps them fused) count as matrices."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                # gpt-oss keeps its experts transposed, [E, fan_in, out].
                fan_in = p.shape[-2] if model.config.model_type == "gpt_oss" and ".experts." in name else p.shape[-1]
                std = 1.0 if "embed" in name else fan_in ** -0.5
                p.copy_(torch.randn(p.shape, generator=g) * std)
            elif name.endswith("sinks"):  # gpt-oss's attention sinks: logits as large as the scores
                p.copy_(torch.randn(p.shape, generator=g))
            elif "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
        for name, b in model.named_buffers():
            # DeepSeek-V3's selection bias: a buffer, zero at init; large enough to change choices.
            if name.endswith("e_score_correction_bias"):
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


def run_cases(model, vocab_size, decode_logits):
    """expected.json's cases: for each prompt, the logits of every position and the greedy
    continuation; with decode_logits, the logits of the cached decode steps (step i >= 1 fed
    greedy token i - 1)."""
    import torch
    cases = []
    with torch.no_grad():
        for prompt in prompts_for(vocab_size):
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


def make(name, config_cls, model_cls, kw, seed):
    import torch
    import transformers
    config = getattr(transformers, config_cls)(**kw)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).to(torch.float32).eval()
    randomize(model, seed)
    out_dir = OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    for extra in ("generation_config.json",):
        (out_dir / extra).unlink(missing_ok=True)
    vocab_size = kw["vocab_size"] if "vocab_size" in kw else kw["text_config"]["vocab_size"]
    cases = run_cases(model, vocab_size, decode_logits=any(k in name for k in ("deepseek", "phi3", "gemma", "gpt_oss")))
    write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, "
                                  f"{model_cls}, fp32, eager attention, seed {seed}", vocab_size, cases)


def write_expected(out_dir, name, generator, vocab_size, cases):
    """Writes a fixture's expected.json (what the C++ HfFixture tests read) and reports its size."""
    expected = {"generator": generator, "vocab_size": vocab_size, "cases": cases}
    (out_dir / "expected.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")
    size = sum(f.stat().st_size for f in out_dir.iterdir())
    print(f"{name}: {size / 1024:.0f} KiB")


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
            make(name, config_cls, model_cls, kw, 1000 + seed)
    if not names or "gpt_oss_mxfp4" in names:  # from the gpt_oss fixture written above
        make_gpt_oss_mxfp4()


if __name__ == "__main__":
    main()
