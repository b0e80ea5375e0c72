#!/usr/bin/env python3
"""Writes the GGUF fixtures of llama.cpp's Gated DeltaNet architectures, made by llama.cpp's own
converter (convert_hf_to_gguf.py, conversion/qwen.py) from make_fixtures.py's checkpoints, which
tests/models/gguf_qwen35_test.cpp loads:

  gguf_qwen35        tests/fixtures/qwen3_5 (Qwen3_5ForCausalLM: 2 key heads serving 4 value
                     heads, so the converter reorders the value heads; tied embeddings), --outtype f32,
                     with an MTP module as the Hub's checkpoints carry one (random mtp.* tensors of
                     Qwen3.5's shapes, mtp_num_hidden_layers 1): the converter appends it as block 4
                     (nextn_predict_layers 1), which the model does not run
  gguf_qwen35moe     tests/fixtures/qwen3_5_moe (Qwen3_5MoeForCausalLM), --outtype f32 --no-mtp
  gguf_qwen3next     a Qwen3NextForCausalLM of tests/fixtures/qwen3_next's shape (in_proj_qkvz /
                     in_proj_ba) but experts in every layer (mlp_only_layers []: llama.cpp's
                     qwen3next has no dense MLP layer, as Qwen3-Next-80B has none), made here
                     (make_fixtures.new_model, seed 3636) with its expected.json (run_cases),
                     --outtype f32 --no-mtp
  gguf_qwen35_q8_0   tests/fixtures/qwen3_5 with every weight the converter quantizes rounded to
                     Q8_0 first (q8_0_round_trip, in the checkpoint's layout), then converted
                     --outtype q8_0, so the file holds exactly the rounded weights (checked: its
                     Q8_0 tensors dequantize to the f32 conversion of the rounded checkpoint); --no-mtp.

The converter is the one in PyPI's llama-cpp-python 0.3.36 source distribution (its vendored
llama.cpp, ggml-org/llama.cpp@0c1e57098), downloaded once into .brigade/llamacpp-src; it runs
with its own gguf-py. Each checkpoint gets a toy byte-level vocabulary of vocab_size tokens
(write_toy_tokenizer) so the converter can write one; the converter does not know that
vocabulary's hash, so its pre-tokenizer is named (get_vocab_base_pre: qwen35 for Qwen3.5, qwen2
for Qwen3-Next) rather than detected.

expected.json: the F32 files' is their checkpoint's (the same weights: the converter only moves
them, takes -exp(A_log) and adds 1 to the zero-centred norms, in f32). gguf_qwen35_q8_0's is
transformers' Qwen3_5ForCausalLM on the rounded checkpoint, with `act_q8_max_diff` and
`act_q8_greedy` per prompt (make_gguf_fixtures.act_q8_runs: the linear layers' inputs rounded
to Q8_0 as brigade's CPU kernels round them), from which the test's tolerance derives.

Run: python3 scripts/make_gguf_qwen35_fixtures.py [NAME...] (make_fixtures.py's virtual
environment; gguf-py's own dependencies installed on first use). CI never runs it: the fixtures
are committed.
"""
import json
import os
import shutil
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

# name: (source checkpoint, --outtype, pre-tokenizer name, with an MTP module)
FIXTURES = {
    "gguf_qwen35": ("qwen3_5", "f32", "qwen35", True),
    "gguf_qwen35moe": ("qwen3_5_moe", "f32", "qwen35", False),
    "gguf_qwen3next": ("qwen3_next_sparse", "f32", "qwen2", False),
    "gguf_qwen35_q8_0": ("qwen3_5", "q8_0", "qwen35", False),
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


def staged_checkpoint(tmp, src, state=None, mtp=False):
    """src's config.json and weights (state, when given, replacing them) with a toy tokenizer;
    with mtp, an MTP module beside them."""
    from safetensors.torch import load_file, save_file
    d = Path(tmp) / src
    d.mkdir(parents=True)
    cfg = json.loads((mf.OUT / src / "config.json").read_text())
    if mtp:
        state = {**(state if state is not None else load_file(str(mf.OUT / src / "model.safetensors"))), **mtp_tensors(cfg)}
        cfg["mtp_num_hidden_layers"] = 1
    (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    if state is None:
        shutil.copy(mf.OUT / src / "model.safetensors", d)
    else:
        save_file(state, str(d / "model.safetensors"), metadata={"format": "pt"})
    write_toy_tokenizer(d, cfg["vocab_size"])
    return d


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


def make_q8_0(name, src, pre):
    """gguf_qwen35_q8_0: the weights the converter quantizes (its --outtype q8_0 choice, read from
    a first conversion) rounded to Q8_0 in the checkpoint, then converted; expected.json from
    transformers on the rounded checkpoint."""
    import torch
    import transformers
    from safetensors.torch import load_file
    import make_gguf_fixtures as gf
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    state = load_file(str(mf.OUT / src / "model.safetensors"))
    with tempfile.TemporaryDirectory() as tmp:
        # Every matrix of whole Q8_0 rows is rounded: the check below fails if the converter
        # quantizes one that was not (a rounded one it keeps F32 holds the rounded values).
        q8_names = {k for k, v in state.items() if v.dim() == 2 and v.shape[-1] % 32 == 0}
        rounded = {k: (gf.q8_0_round_trip(v.to(torch.float32)) if k in q8_names else v).contiguous()
                   for k, v in state.items()}
        conv_dir = staged_checkpoint(tmp, src, rounded)
        convert(conv_dir, out_dir / "model.gguf", "q8_0", pre)
        check = Path(tmp) / "check.gguf"
        convert(conv_dir, check, "f32", pre)
        q8, f32 = gguf_tensors(out_dir / "model.gguf"), gguf_tensors(check)
        n_q8 = 0
        for tname, (typ, values) in q8.items():
            if typ == "Q8_0":
                n_q8 += 1
                assert (values.reshape(-1) == f32[tname][1].reshape(-1)).all(), f"{tname}: Q8_0 differs from the rounded weights"
            else:
                assert typ == "F32", (tname, typ)
        assert n_q8 > 0
        print(f"{name}: {n_q8} Q8_0 tensors, each exactly the rounded checkpoint's")
        model = transformers.AutoModelForCausalLM.from_pretrained(str(conv_dir), dtype=torch.float32,
                                                                  attn_implementation="eager").eval()
    cases = []
    with torch.no_grad():
        for c in json.loads((mf.OUT / src / "expected.json").read_text())["cases"]:
            logits = model(torch.tensor([c["prompt"]])).logits[0]
            cases.append({"prompt": c["prompt"], "logits": [[float(f"{v:.7g}") for v in row] for row in logits.tolist()],
                          "greedy": gf.generate_greedy(model, c["prompt"])})
    for c, (d, greedy) in zip(cases, gf.act_q8_runs(model, cases)):
        c["act_q8_max_diff"], c["act_q8_greedy"] = d, greedy
    expected = {"generator": f"transformers {transformers.__version__}, torch {torch.__version__}, "
                             f"{src} with Q8_0-rounded weights, fp32, eager attention; file by llama.cpp's converter "
                             f"(llama-cpp-python {LLAMACPP_PYTHON}'s)",
                "vocab_size": json.loads((mf.OUT / src / "config.json").read_text())["vocab_size"], "cases": cases}
    (out_dir / "expected.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")
    print(f"{name}: {(out_dir / 'model.gguf').stat().st_size / 1024:.0f} KiB")


def make_qwen3_next_sparse(name, tmp):
    """gguf_qwen3next's checkpoint (a directory in tmp) and expected.json."""
    import torch
    import transformers
    kw = {**mf.fixtures()["qwen3_next"][2], "mlp_only_layers": []}
    model = mf.new_model("Qwen3NextConfig", "Qwen3NextForCausalLM", kw, 3636)
    d = Path(tmp) / "qwen3_next_sparse"
    model.save_pretrained(d, safe_serialization=True)
    (d / "generation_config.json").unlink(missing_ok=True)
    write_toy_tokenizer(d, kw["vocab_size"])
    cases = mf.run_cases(model, kw["vocab_size"], decode_logits=True)
    mf.write_expected(mf.OUT / name, name, f"transformers {transformers.__version__}, torch {torch.__version__}, "
                      "Qwen3NextForCausalLM (experts in every layer), fp32, eager attention, seed 3636; file by "
                      f"llama.cpp's converter (llama-cpp-python {LLAMACPP_PYTHON}'s), --outtype f32",
                      kw["vocab_size"], cases)
    return d


def make(name):
    src, outtype, pre, mtp = FIXTURES[name]
    if outtype == "q8_0":
        return make_q8_0(name, src, pre)
    if src == "qwen3_next_sparse":
        (mf.OUT / name).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            convert(make_qwen3_next_sparse(name, tmp), mf.OUT / name / "model.gguf", outtype, pre)
        print(f"{name}: {(mf.OUT / name / 'model.gguf').stat().st_size / 1024:.0f} KiB")
        return
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        convert(staged_checkpoint(tmp, src, mtp=mtp), out_dir / "model.gguf", outtype, pre, mtp)
    expected = json.loads((mf.OUT / src / "expected.json").read_text())
    expected["generator"] += f"; file by llama.cpp's converter (llama-cpp-python {LLAMACPP_PYTHON}'s), --outtype {outtype}"
    (out_dir / "expected.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")
    print(f"{name}: {(out_dir / 'model.gguf').stat().st_size / 1024:.0f} KiB")


def main():
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
