#!/usr/bin/env python3
"""Writes the GGUF fixtures of llama.cpp's Gated DeltaNet architectures, made by llama.cpp's own
converter (convert_hf_to_gguf.py, conversion/qwen.py) from tiny transformers checkpoints, which
tests/models/gguf_qwen35_test.cpp loads. The checkpoints (SOURCES) are make_fixtures.py's
qwen3_5, qwen3_5_moe and qwen3_next fixtures' shapes with value heads as wide as the key heads
(llama.cpp's loader sizes them by ssm.state_size, as every real Qwen3.5 has them), made here with
seeds of their own (make_fixtures.new_model):

  gguf_qwen35        Qwen3_5ForCausalLM: 2 key heads serving 4 value heads, so the converter
                     reorders the value heads; tied embeddings; --outtype f32, with an MTP module
                     as the Hub's checkpoints carry one (random mtp.* tensors of Qwen3.5's shapes,
                     mtp_num_hidden_layers 1): the converter appends it as block 4
                     (nextn_predict_layers 1), which the model does not run
  gguf_qwen35moe     Qwen3_5MoeForCausalLM, --outtype f32 --no-mtp
  gguf_qwen3next     Qwen3NextForCausalLM (in_proj_qkvz / in_proj_ba) with experts in every layer
                     (mlp_only_layers []: llama.cpp's qwen3next has no dense MLP layer, as
                     Qwen3-Next-80B has none), --outtype f32 --no-mtp
  gguf_qwen35_q8_0   gguf_qwen35's checkpoint with every matrix of whole Q8_0 rows rounded to Q8_0
                     first (q8_0_round_trip; out_proj's in the converter's tiled column order,
                     where its blocks lie), then converted --outtype q8_0, so the file holds
                     exactly the rounded weights (checked: its Q8_0 tensors dequantize to the f32
                     conversion of the rounded checkpoint); --no-mtp.

The converter is the one in PyPI's llama-cpp-python 0.3.36 source distribution (its vendored
llama.cpp, ggml-org/llama.cpp@0c1e57098), downloaded once into .brigade/llamacpp-src; it runs
with its own gguf-py. Each checkpoint gets a toy byte-level vocabulary of vocab_size tokens
(write_toy_tokenizer) so the converter can write one; the converter does not know that
vocabulary's hash, so its pre-tokenizer is named (get_vocab_base_pre: qwen35 for Qwen3.5, qwen2
for Qwen3-Next) rather than detected.

expected.json: transformers' logits, greedy tokens and decode logits on each checkpoint
(make_fixtures.run_cases; the converter only moves the weights, takes -exp(A_log) and adds 1 to
the zero-centred norms, in f32); gguf_qwen35_q8_0's also `act_q8_max_diff` and `act_q8_greedy`
per prompt (make_gguf_fixtures.act_q8_runs: the linear layers' inputs rounded to Q8_0 as
brigade's CPU kernels round them), from which the test's tolerance derives.

Then `--llamacpp [NAME...]` runs each file in llama.cpp itself (llama-cpp-python 0.3.36 in
.brigade/llamacpp-venv, as bench/compare/vs_llamacpp.py builds it; F32 KV cache) on the fixture's
prompts and writes llamacpp.json: per prompt how far llama.cpp's logits are from expected.json,
which must stay within float noise (1e-3) for the F32 files and within 1.5 act_q8_max_diff + 1e-3
for the Q8_0 one (llama.cpp rounds the activations to Q8 as brigade does), so llama.cpp reads the
files as transformers' models and brigade's tests hold brigade to the same logits; for the Q8_0
file also llama.cpp's logits themselves (`logits`), which brigade's Q8_0 kernels are held to.

Run: python3 scripts/make_gguf_qwen35_fixtures.py [NAME...] (make_fixtures.py's virtual
environment; gguf-py's own dependencies installed on first use). CI never runs it: the fixtures
are committed.
"""
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402

LLAMACPP_PYTHON = "0.3.36"
SRC_ROOT = mf.ROOT / ".brigade" / "llamacpp-src"
LLAMACPP = SRC_ROOT / f"llama_cpp_python-{LLAMACPP_PYTHON}" / "vendor" / "llama.cpp"

# The checkpoints converted: make_fixtures.py's fixture of that name with these changes, each with
# its key and value heads of one width (linear_value_head_dim = linear_key_head_dim: llama.cpp's
# loader sizes the value heads by ssm.state_size), and a seed of its own.
SOURCES = {
    "qwen35": ("qwen3_5", {}, 3535),
    "qwen35moe": ("qwen3_5_moe", {}, 3537),
    # experts in every layer: llama.cpp's qwen3next has no dense MLP layer (nor has Qwen3-Next-80B)
    "qwen3next": ("qwen3_next", {"mlp_only_layers": []}, 3636),
}
# name: (source, --outtype, pre-tokenizer name, with an MTP module)
FIXTURES = {
    "gguf_qwen35": ("qwen35", "f32", "qwen35", True),
    "gguf_qwen35moe": ("qwen35moe", "f32", "qwen35", False),
    "gguf_qwen3next": ("qwen3next", "f32", "qwen2", False),
    "gguf_qwen35_q8_0": ("qwen35", "q8_0", "qwen35", False),
}

# Runs the converter in a fresh interpreter with the pre-tokenizer's name given: argv[1] is the
# name, the rest the converter's arguments.
CONVERT = """
import runpy, sys
sys.path.insert(0, sys.argv[1])
import conversion.base as base
pre = sys.argv[2]
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def ensure_llamacpp():
    """The converter's sources: llama-cpp-python's sdist from PyPI, unpacked once."""
    if (LLAMACPP / "convert_hf_to_gguf.py").exists():
        return
    SRC_ROOT.mkdir(parents=True, exist_ok=True)
    subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                           f"llama-cpp-python=={LLAMACPP_PYTHON}", "-d", str(SRC_ROOT)])
    with tarfile.open(SRC_ROOT / f"llama_cpp_python-{LLAMACPP_PYTHON}.tar.gz") as tar:
        tar.extractall(SRC_ROOT, filter="data")


def write_toy_tokenizer(model_dir, vocab_size):
    """A byte-level BPE of vocab_size tokens: the byte alphabet but its last two characters, one
    merge (a b -> ab: llama.cpp requires a gpt2 vocabulary's merges), filler words, and
    <|endoftext|> last (transformers' Qwen3.5 tokenizer class adds that token where a vocabulary
    lacks it)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    assert len(alphabet) == 256 and vocab_size >= 256
    vocab = {ch: i for i, ch in enumerate(alphabet[:254])}
    vocab["ab"] = 254
    for i in range(255, vocab_size - 1):
        vocab[f"tok{i}"] = i
    vocab["<|endoftext|>"] = vocab_size - 1
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b")]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True)])
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(str(model_dir))


def convert(model_dir, outfile, outtype, pre, mtp=False):
    env = dict(os.environ)
    env.pop("NO_LOCAL_GGUF", None)
    subprocess.check_call([sys.executable, "-c", CONVERT, str(LLAMACPP), pre, str(model_dir), "--outfile",
                           str(outfile), "--outtype", outtype] + ([] if mtp else ["--no-mtp"]), env=env)


def mtp_tensors(cfg):
    """A dense Qwen3.5 MTP module's tensors (Qwen3.5's checkpoints' mtp.*: fc over the normed
    embedding and hidden state, one gated-attention decoder layer, its norm), random."""
    import torch
    g = torch.Generator().manual_seed(3535)
    e, hd, h, kv, inter = (cfg["hidden_size"], cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
                           cfg["intermediate_size"])
    shapes = {"mtp.fc.weight": [e, 2 * e], "mtp.pre_fc_norm_embedding.weight": [e], "mtp.pre_fc_norm_hidden.weight": [e],
              "mtp.norm.weight": [e], "mtp.layers.0.input_layernorm.weight": [e],
              "mtp.layers.0.post_attention_layernorm.weight": [e], "mtp.layers.0.self_attn.q_proj.weight": [2 * h * hd, e],
              "mtp.layers.0.self_attn.k_proj.weight": [kv * hd, e], "mtp.layers.0.self_attn.v_proj.weight": [kv * hd, e],
              "mtp.layers.0.self_attn.o_proj.weight": [e, h * hd], "mtp.layers.0.self_attn.q_norm.weight": [hd],
              "mtp.layers.0.self_attn.k_norm.weight": [hd], "mtp.layers.0.mlp.gate_proj.weight": [inter, e],
              "mtp.layers.0.mlp.up_proj.weight": [inter, e], "mtp.layers.0.mlp.down_proj.weight": [e, inter]}
    return {k: 0.1 * torch.randn(v, generator=g) for k, v in shapes.items()}


def gguf_tensors(path):
    """name -> (ggml type name, float32 array as the file's values)."""
    sys.path.insert(0, str(LLAMACPP / "gguf-py"))
    import gguf
    import numpy as np
    out = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        data = gguf.quants.dequantize(t.data, t.tensor_type) if t.tensor_type != gguf.GGMLQuantizationType.F32 else t.data
        out[t.name] = (t.tensor_type.name, np.asarray(data, dtype=np.float32).copy())
    return out


def build_source(source, tmp, mtp=False, round_q8=False):
    """SOURCES[source] as a transformers model and its checkpoint directory in tmp (with a toy
    tokenizer; with mtp an MTP module beside the weights; with round_q8 every matrix of whole
    Q8_0 rows rounded to Q8_0 first, in the model too)."""
    import torch
    from safetensors.torch import load_file, save_file
    import make_gguf_fixtures as gf
    base, overrides, seed = SOURCES[source]
    config_cls, model_cls, kw = mf.fixtures()[base]
    kw = {**kw, **overrides, "linear_value_head_dim": kw["linear_key_head_dim"]}  # llama.cpp's dk == dv
    model = mf.new_model(config_cls, model_cls, kw, seed)
    if round_q8:
        nk, nv, dv = kw["linear_num_key_heads"], kw["linear_num_value_heads"], kw["linear_value_head_dim"]
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.dim() != 2 or p.shape[-1] % 32 != 0:
                    continue
                if name.endswith("linear_attn.out_proj.weight"):
                    # Its columns are the value heads, which the converter tiles (g r + j -> j nk + g):
                    # rounded in the file's column order, where its Q8_0 blocks lie.
                    tiled = p.reshape(p.shape[0], nk, nv // nk, dv).transpose(1, 2).reshape(p.shape)
                    rounded = gf.q8_0_round_trip(tiled.to(torch.float32))
                    p.copy_(rounded.reshape(p.shape[0], nv // nk, nk, dv).transpose(1, 2).reshape(p.shape))
                else:
                    p.copy_(gf.q8_0_round_trip(p.to(torch.float32)))
    d = Path(tmp) / source
    model.save_pretrained(d, safe_serialization=True)
    (d / "generation_config.json").unlink(missing_ok=True)
    if mtp:
        state = {**load_file(str(d / "model.safetensors")), **mtp_tensors(kw)}
        save_file(state, str(d / "model.safetensors"), metadata={"format": "pt"})
        cfg = json.loads((d / "config.json").read_text())
        cfg["mtp_num_hidden_layers"] = 1
        (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    write_toy_tokenizer(d, kw["vocab_size"])
    return model, d


def check_q8_0(path, model_dir, pre, tmp):
    """Every Q8_0 tensor of the file at path dequantizes to the f32 conversion of model_dir."""
    check = Path(tmp) / "check.gguf"
    convert(model_dir, check, "f32", pre)
    q8, f32 = gguf_tensors(path), gguf_tensors(check)
    n_q8 = 0
    for tname, (typ, values) in q8.items():
        if typ == "Q8_0":
            n_q8 += 1
            assert (values.reshape(-1) == f32[tname][1].reshape(-1)).all(), f"{tname}: Q8_0 differs from the rounded weights"
        else:
            assert typ == "F32", (tname, typ)
    assert n_q8 > 0
    return n_q8


def make(name):
    import torch
    import transformers
    import make_gguf_fixtures as gf
    source, outtype, pre, mtp = FIXTURES[name]
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model, d = build_source(source, tmp, mtp=mtp, round_q8=outtype == "q8_0")
        convert(d, out_dir / "model.gguf", outtype, pre, mtp)
        if outtype == "q8_0":
            print(f"{name}: {check_q8_0(out_dir / 'model.gguf', d, pre, tmp)} Q8_0 tensors, each exactly the rounded weights")
    vocab = model.config.vocab_size
    cases = mf.run_cases(model, vocab, decode_logits=True)
    if outtype == "q8_0":
        for c, (diff, greedy) in zip(cases, gf.act_q8_runs(model, cases)):
            c["act_q8_max_diff"], c["act_q8_greedy"] = diff, greedy
    base, _, seed = SOURCES[source]
    mf.write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, "
                      f"{type(model).__name__} ({base}'s shape, {source}), fp32, eager attention, seed {seed}"
                      f"{', weights rounded to Q8_0' if outtype == 'q8_0' else ''}; file by llama.cpp's converter "
                      f"(llama-cpp-python {LLAMACPP_PYTHON}'s), --outtype {outtype}", vocab, cases)


def llamacpp_pass(names, bound_f32=1e-3):
    """llamacpp.json per fixture (module docstring), in the llama-cpp-python venv; a float file's
    logits within bound_f32 of transformers' (more where llama.cpp's CPU kernels round, as its GELU's
    fp16 table: make_gguf_classic_fixtures.py)."""
    mf.ensure_llamacpp_venv(__file__, ["--llamacpp", *names])
    import llama_cpp
    import numpy as np
    for name in names or list(FIXTURES):
        out_dir = mf.OUT / name
        m = llama_cpp.Llama(str(out_dir / "model.gguf"), n_ctx=64, logits_all=True, verbose=False, n_threads=2,
                            type_k=0, type_v=0)
        doc = {"generator": f"llama-cpp-python {llama_cpp.__version__}", "logits_max_diff": []}
        for c in json.loads((out_dir / "expected.json").read_text())["cases"]:
            m.reset()
            m.eval(c["prompt"])
            d = float(np.abs(np.array(m.scores[:len(c["prompt"])]) - np.array(c["logits"])).max())
            bound = 1.5 * c["act_q8_max_diff"] + 1e-3 if "act_q8_max_diff" in c else bound_f32
            assert d <= bound, f"{name}: llama.cpp differs from transformers by {d} (bound {bound})"
            doc["logits_max_diff"].append(d)
            if "act_q8_max_diff" in c:  # a quantized file: llama.cpp's own logits, which brigade's kernels follow
                doc.setdefault("logits", []).append([[float(f"{v:.7g}") for v in row] for row in
                                                     np.array(m.scores[:len(c["prompt"])]).tolist()])
            print(f"{name}: prompt of {len(c['prompt'])}: llama.cpp's logits within {d:.2g} of transformers' "
                  f"(bound {bound:.2g})")
        (out_dir / "llamacpp.json").write_text(json.dumps(doc) + "\n")


def main():
    if sys.argv[1:2] == ["--llamacpp"]:
        return llamacpp_pass(sys.argv[2:])
    mf.ensure_venv(__file__)
    import importlib.util
    for module, package in (("tqdm", "tqdm"), ("yaml", "pyyaml"), ("requests", "requests")):  # gguf-py's
        if importlib.util.find_spec(module) is None:
            subprocess.check_call([sys.executable, "-m", "pip", "install", package])
    ensure_llamacpp()
    for name in sys.argv[1:] or list(FIXTURES):
        make(name)


if __name__ == "__main__":
    main()
