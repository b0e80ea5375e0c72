#!/usr/bin/env python3
"""Writes the GGUF fixture of Kimi Linear as llama.cpp's own converter writes it (llama.cpp
vendored in llama-cpp-python 0.3.36: conversion/kimi_linear.py's KimiLinearModel), from
make_fixtures.py's tiny transformers checkpoint kimi_linear (model.safetensors and config.json
copied, the dense layer's block_sparse_moe.{gate,up,down}_proj renamed mlp.* as the Hub's
checkpoints name them: transformers 5 saves every layer's MLP under block_sparse_moe, which the
converter cannot map) with a toy byte-level vocabulary of its 128 ids
(make_gguf_deepseek_fixtures.write_toy_tokenizer; pre-tokenizer gpt-2):

  gguf_kimi_linear   KimiLinearForCausalLM (3 layers: KDA, MLA without RoPE, KDA; 2 KDA heads of
                     16 and 2 MLA heads, nope/rope/v 16/8/16, latent 32; layer 0 a dense SwiGLU,
                     then 8 experts of 16, top 2 by sigmoid + the selection bias, renormalised,
                     times 2.5, beside one shared expert); --outtype f32

What the converter writes: arch `kimi-linear`; attention.head_count_kv one count per block, 0 for
the KDA blocks (which llama.cpp marks recurrent) and 1 for MLA (MQA over the latent);
ssm.conv_kernel, kda.head_dim, attention.kv_lora_rank, key_length (kv_lora_rank + rope) and
key_length_mla / value_length_mla, rope.dimension_count (qk_rope_head_dim); the experts' counts,
expert_feed_forward_length, expert_shared_count, leading_dense_block_count,
expert_weights_scale, expert_gating_func (from moe_router_activation_func, the Hub config's
field make_fixtures.py keeps). Tensors: the KDA blocks' attn_q / attn_k / attn_v, ssm_conv1d_q /
_k / _v (ne [K, 1, H D, 1]), ssm_f_a, ssm_f_b, ssm_beta (b_proj), ssm_a (A = -exp(A_log), the
exponent taken), ssm_dt.bias (dt_bias), ssm_g_a, ssm_g_b, ssm_norm (o_norm), attn_output; the MLA
blocks' attn_q, attn_kv_a_mqa, attn_kv_a_norm, attn_k_b (W_UK transposed per head), attn_v_b,
attn_output; the experts stacked as ffn_gate_exps / ffn_up_exps / ffn_down_exps, the router
ffn_gate_inp, exp_probs_b.bias, ffn_*_shexp. llama.cpp runs the KDA heads as attention.head_count
heads (so the fixture's KDA and MLA head counts are equal, as Kimi-Linear-48B's 32 and 32) and
its MLA without RoPE, as transformers.

The reference (expected.json) is llama.cpp itself on the file (llama-cpp-python 0.3.36 in
.brigade/llamacpp-venv, F32 KV cache): every prompt position's logits, the greedy continuation and
the logits of each cached decode step (make_gguf_deepseek_fixtures.llamacpp_cases). llamacpp.json
records how far its logits are from transformers' on the checkpoint (transformers_max_diff).

Run: python3 scripts/make_gguf_kimi_linear_fixtures.py (make_fixtures.py's virtual environment),
then python3 scripts/make_gguf_kimi_linear_fixtures.py --llamacpp (the llama.cpp environment). CI
never runs it: the fixture is committed.
"""
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
import make_gguf_deepseek_fixtures as ds  # noqa: E402
import make_gguf_lfm2_fixtures as lfm2  # noqa: E402

# name: (source fixture, --outtype, pre-tokenizer name)
FIXTURES = {"gguf_kimi_linear": ("kimi_linear", "f32", "gpt-2")}


def hub_dense_names(path):
    """The dense layers' block_sparse_moe.{gate,up,down}_proj in `path` renamed mlp.* (module docstring)."""
    from safetensors.torch import load_file, save_file
    tensors = load_file(str(path))
    dense = (".block_sparse_moe.gate_proj.", ".block_sparse_moe.up_proj.", ".block_sparse_moe.down_proj.")
    renamed = {next((k.replace(".block_sparse_moe.", ".mlp.") for p in dense if p in k), k): v for k, v in tensors.items()}
    save_file(renamed, str(path), metadata={"format": "pt"})


def make(name):
    """FIXTURES[name]: the converter's file of the source checkpoint."""
    source, outtype, pre = FIXTURES[name]
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / source
        cfg = ds.copy_checkpoint(source, d, {})
        hub_dense_names(d / "model.safetensors")
        ds.write_toy_tokenizer(d, cfg["vocab_size"])
        lfm2.convert(d, out_dir / "model.gguf", outtype, pre)
    print(f"{name}: model.gguf {(out_dir / 'model.gguf').stat().st_size / 1024:.0f} KiB")


def llamacpp_pass(names):
    """expected.json and llamacpp.json per fixture, in the llama-cpp-python venv."""
    import llama_cpp
    import numpy as np
    for name in names or list(FIXTURES):
        source, outtype = FIXTURES[name][:2]
        out_dir = mf.OUT / name
        m = llama_cpp.Llama(str(out_dir / "model.gguf"), n_ctx=64, logits_all=True, verbose=False, n_threads=2,
                            type_k=0, type_v=0)
        cases = ds.llamacpp_cases(m, mf.prompts_for(128))
        mf.write_expected(out_dir, name, f"llama-cpp-python {llama_cpp.__version__} (llama.cpp's kimi-linear) on "
                          f"model.gguf: {source}'s checkpoint by llama.cpp's converter, --outtype {outtype}; F32 KV cache",
                          128, cases)
        hf = json.loads((mf.OUT / source / "expected.json").read_text())["cases"]
        diff = [float(np.abs(np.array(c["logits"]) - np.array(h["logits"])).max()) for c, h in zip(cases, hf)]
        doc = {"generator": f"llama-cpp-python {llama_cpp.__version__}", "transformers_max_diff": diff}
        (out_dir / "llamacpp.json").write_text(json.dumps(doc) + "\n")
        print(f"{name}: llama.cpp's logits {', '.join(f'{d:.2g}' for d in diff)} from transformers' ({source})")


def main():
    if sys.argv[1:2] == ["--llamacpp"]:
        mf.ensure_llamacpp_venv(__file__, sys.argv[1:])
        return llamacpp_pass(sys.argv[2:])
    mf.ensure_venv(__file__)
    for name in sys.argv[1:] or list(FIXTURES):
        make(name)


if __name__ == "__main__":
    main()
