#!/usr/bin/env python3
"""Writes the GGUF fixtures of llama.cpp's LFM2 architectures (lfm2, lfm2moe), made by llama.cpp's
own converter (convert_hf_to_gguf.py, conversion/lfm2.py) from tiny transformers checkpoints. The
checkpoints (SOURCES) are make_fixtures.py's lfm2 and lfm2_moe fixtures' shapes, made here with
seeds of their own (make_fixtures.new_model), the MoE one cut to what llama.cpp's lfm2moe runs:

  gguf_lfm2       Lfm2ForCausalLM as make_fixtures.py's lfm2: layers conv, conv, full_attention,
                  conv; a 3-tap short conv without biases; GQA (4 heads over 2) with q/k head
                  norms; the SwiGLU auto-adjusted from intermediate_size 150 to 128 (the converter
                  writes feed_forward_length 128 itself, from the block_* keys config.json
                  already holds); tied embeddings; --outtype f32
  gguf_lfm2moe    Lfm2MoeForCausalLM as make_fixtures.py's lfm2_moe (layers conv,
                  full_attention, conv, conv; a 4-tap conv; layer 0 a dense SwiGLU of 96, then 8
                  experts of 32, 2 per token by a sigmoid router with a selection bias,
                  expert_bias, renormalised) but with conv_bias false, routed_scaling_factor 1.0
                  and tied embeddings; --outtype f32.

Why the MoE source differs from make_fixtures.py's lfm2_moe (llama.cpp 0c1e57098: the converter's
conversion/lfm2.py and gguf-py, and src/models/lfm2.cpp / lfm2moe.cpp, which share one graph):
  - conv biases: the converter squeezes every 'conv.conv' tensor's dimension 1 and so fails on
    the conv's 1-D bias (IndexError; tried when this script was written); the loader has no
    shortconv bias tensors either, nor does the graph add any;
  - an untied head: gguf-py's tensor list for LFM2MOE has no OUTPUT, so the converter stops at
    lm_head.weight ("Can not map tensor"; tried); the C++ loader itself would take an
    output.weight (TENSOR_NOT_REQUIRED, else token_embd.weight), as LFM2's does;
  - routed_scaling_factor: the converter writes no expert_weights_scale and lfm2moe's loader reads
    none, so hparams.expert_weights_scale stays 0, which build_moe_ffn takes as "no scaling"
    (tried with 2.0: llama.cpp's logits 18.7 off transformers' on the 7-token prompt);
  - norm_topk_prob: the graph always renormalises the chosen experts' sigmoid weights (norm_w
    true; the sum clamped below at 6.1e-5 where transformers adds 1e-6), so it stays true (tried
    with false: 11.9 off).
config.json needs nothing added: transformers 5 saves every key the converter reads
(block_auto_adjust_ff_dim, block_ffn_dim_multiplier, block_multiple_of, intermediate_size,
layer_types, conv_L_cache, norm_eps; moe_intermediate_size, num_dense_layers, num_experts,
num_experts_per_tok), and save_pretrained writes the experts one tensor each (experts.E.w1/w2/w3),
which the converter stacks into ffn_{gate,up,down}_exps. The converter writes head_count_kv per
layer (0 for the conv layers, which is how the loader tells them apart), feed_forward_length as a
scalar (lfm2: 128, overwriting the 150 its base class writes first; lfm2moe: 96, the dense
layer's), the final norm (model.embedding_norm) as token_embd_norm, expert_bias as
blk.N.exp_probs_b.bias, and expert_gating_func 2 (sigmoid) for lfm2moe.

The converter is make_gguf_qwen35_fixtures.py's: the one in PyPI's llama-cpp-python 0.3.36 source
distribution (its vendored llama.cpp, ggml-org/llama.cpp@0c1e57098), in .brigade/llamacpp-src,
run with its own gguf-py. Each checkpoint gets that script's toy byte-level vocabulary of
vocab_size (256) tokens (write_toy_tokenizer); the converter does not know its hash, so the
pre-tokenizer is named: lfm2 (LiquidAI's LFM2 / LFM2.5 tokenizers' name, which llama.cpp's vocab
loader runs as its llama3 pre-tokenizer).

expected.json: transformers' logits, greedy tokens and decode logits on each checkpoint
(make_fixtures.run_cases; the converter only renames, squeezes the conv weights from
[hidden, 1, L] to [hidden, L] and stacks the experts, in f32).

Then `--llamacpp [NAME...]` runs each file in llama.cpp itself (llama-cpp-python 0.3.36 in
.brigade/llamacpp-venv; F32 KV cache; make_gguf_qwen35_fixtures.llamacpp_pass) on the fixture's
prompts and writes llamacpp.json: per prompt how far llama.cpp's logits are from expected.json,
which must stay within 1e-3. Measured (prompts of 7, 1 and 40 tokens):
  gguf_lfm2     2.5e-05, 8.9e-06, 3.7e-05
  gguf_lfm2moe  2.4e-05, 1.7e-05, 2.9e-05

Run: python3 scripts/make_gguf_lfm2_fixtures.py [NAME...], then
python3 scripts/make_gguf_lfm2_fixtures.py --llamacpp [NAME...] (make_fixtures.py's virtual
environment; gguf-py's own dependencies installed on first use). CI never runs it: the fixtures
are committed.
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
import make_gguf_qwen35_fixtures as q35  # noqa: E402

# The checkpoints converted: make_fixtures.py's fixture of that name with these changes, and a seed
# of its own.
SOURCES = {
    "lfm2": ("lfm2", {}, 2121),
    # what llama.cpp's converter and lfm2moe run: no conv biases, no routed scaling, a tied head
    # (module docstring)
    "lfm2moe": ("lfm2_moe", {"conv_bias": False, "routed_scaling_factor": 1.0, "tie_word_embeddings": True}, 2123),
}
# name: (source, --outtype, pre-tokenizer name)
FIXTURES = {
    "gguf_lfm2": ("lfm2", "f32", "lfm2"),
    "gguf_lfm2moe": ("lfm2moe", "f32", "lfm2"),
}


def convert(model_dir, outfile, outtype, pre, snippet=None):
    """make_gguf_qwen35_fixtures.convert without --no-mtp, which the converter refuses for
    classes without supports_mtp_export, as LFM2's are; `snippet` the Python that runs the
    converter (make_gguf_qwen35_fixtures.CONVERT by default)."""
    env = dict(os.environ)
    env.pop("NO_LOCAL_GGUF", None)
    subprocess.check_call([sys.executable, "-c", snippet or q35.CONVERT, str(q35.LLAMACPP), pre, str(model_dir),
                           "--outfile", str(outfile), "--outtype", outtype], env=env)


def build_source(sources, source, tmp, new_model=None):
    """sources[source] (base fixture, overrides, seed) as a transformers model (new_model's,
    make_fixtures.new_model by default) and its checkpoint directory in tmp (with a toy tokenizer)."""
    base, overrides, seed = sources[source]
    config_cls, model_cls, kw = mf.fixtures()[base]
    kw = {**kw, **overrides}
    model = (new_model or mf.new_model)(config_cls, model_cls, kw, seed)
    d = Path(tmp) / source
    model.save_pretrained(d, safe_serialization=True)
    (d / "generation_config.json").unlink(missing_ok=True)
    q35.write_toy_tokenizer(d, kw["vocab_size"])
    return model, d


def make(sources, fixtures, name, build=build_source, conv=convert):
    """fixtures[name] (source, --outtype, pre-tokenizer): the converter's file of the source and
    transformers' expected.json (`build` and `conv` as build_source and convert)."""
    import torch
    import transformers
    source, outtype, pre = fixtures[name]
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model, d = build(sources, source, tmp)
        conv(d, out_dir / "model.gguf", outtype, pre)
    vocab = model.config.vocab_size
    cases = mf.run_cases(model, vocab, decode_logits=True)
    base, overrides, seed = sources[source]
    changes = "".join(f", {k} {v}" for k, v in overrides.items())
    mf.write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, "
                      f"{type(model).__name__} ({base}'s shape{changes}), fp32, eager attention, seed {seed}; "
                      f"file by llama.cpp's converter (llama-cpp-python {q35.LLAMACPP_PYTHON}'s), --outtype {outtype}",
                      vocab, cases)


def run(sources, fixtures, script, build=build_source, conv=convert):
    """The command line of `script` (this one, or another fixture script reusing it): its fixtures
    named in argv (all by default) made by make(.., build, conv), or --llamacpp [NAME...] in the
    llama.cpp environment."""
    if sys.argv[1:2] == ["--llamacpp"]:
        mf.ensure_llamacpp_venv(script, sys.argv[1:])
        return q35.llamacpp_pass(sys.argv[2:] or list(fixtures))
    mf.ensure_venv(script)
    import importlib.util
    # gguf-py's, sentencepiece, which LlamaModel.set_vocab imports before it looks for a
    # tokenizer.model, and protobuf, which InternLM2Model.set_vocab reads the model proto with
    def missing(module):
        try:
            return importlib.util.find_spec(module) is None
        except ModuleNotFoundError:  # a dotted name whose parent is absent
            return True
    for module, package in (("tqdm", "tqdm"), ("yaml", "pyyaml"), ("requests", "requests"),
                            ("sentencepiece", "sentencepiece"), ("google.protobuf", "protobuf")):
        if missing(module):
            subprocess.check_call([sys.executable, "-m", "pip", "install", package])
    q35.ensure_llamacpp()
    for name in sys.argv[1:] or list(fixtures):
        make(sources, fixtures, name, build, conv)


def main():
    run(SOURCES, FIXTURES, __file__)


if __name__ == "__main__":
    main()
