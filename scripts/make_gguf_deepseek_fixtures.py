#!/usr/bin/env python3
"""Writes the GGUF fixtures of llama.cpp's `deepseek2` architecture (DeepSeek-V2 / V2-Lite,
DeepSeek-V3 / R1, Kimi-K2), made by llama.cpp's own converter (conversion/deepseek.py
DeepseekV2Model, which DeepseekV3ForCausalLM also registers) from the tiny transformers checkpoints
of make_fixtures.py's deepseek_v2 and deepseek_v3 fixtures (tests/fixtures/deepseek_v2, deepseek_v3:
model.safetensors copied as it is, config.json with HUB_FIELDS added), and for the Q8_0 file a fresh
model of deepseek_v3's shape (Q8_SOURCE), each with a toy byte-level vocabulary of their 128 ids:

  gguf_deepseek_v2       DeepSeek-V2-Lite's shape: no q_lora_rank (q_proj), kv_lora_rank 32, 4 heads
                         of nope 16 + rope 8, v 16; layer 0 a dense SwiGLU of 128, layers 1-2 8
                         experts of 16, top 2 of the softmax (not renormalised) times 1.5, two
                         shared experts; n_group 2, topk_group 1; --outtype f32, pre deepseek-llm
  gguf_deepseek_v3       DeepSeek-V3's: q_lora_rank 24, sigmoid routing with the selection bias
                         (exp_probs_b), renormalised, times 2.5, n_group 4 / topk_group 2, one
                         shared expert; YaRN factor 4 over 64 positions, mscale_all_dim 0.7;
                         --outtype f32, pre deepseek-v3
  gguf_deepseek_v3_q8_0  deepseek_v3's shape with q_lora_rank, qk_nope_head_dim, v_head_dim and
                         moe_intermediate_size 32 (a fresh model, seed 3540), --outtype q8_0: every
                         matrix's rows are whole Q8_0 blocks, so every one is Q8_0 (the converter
                         falls back to F16 for the others: with the fixture's widths of 16 and 24,
                         q_b, k_b and the experts' down would be F16); norms and the selection bias
                         F32

What the converter writes (llama.cpp ggml-org/llama.cpp@0c1e57098, vendored in llama-cpp-python
0.3.36: conversion/base.py TextModel.set_gguf_parameters, conversion/deepseek.py), keys under
deepseek2.: block_count 3 (the MTP layer of deepseek_v3's config, num_nextn_predict_layers 1, is
not in its checkpoint; the converter would skip it: skip_mtp), context_length 256,
embedding_length 64, feed_forward_length 128, attention.head_count 4, attention.head_count_kv 1
(MLA as MQA), attention.layer_norm_rms_epsilon 1e-6, rope.freq_base 1e4, expert_count 8,
expert_used_count 2, expert_group_count / expert_group_used_count (n_group, topk_group),
expert_gating_func (2 sigmoid: V3's scoring_func; V2's config has no scoring_func, so none: the
loader's default, softmax), leading_dense_block_count 1, vocab_size 128, q_lora_rank (V3 only),
kv_lora_rank 32, attention.key_length 40 and value_length 32 (the latent's: kv_lora_rank + rope,
kv_lora_rank), attention.key_length_mla 24 and value_length_mla 16 (per head: nope + rope, v),
expert_feed_forward_length 16, expert_shared_count, expert_weights_scale (routed_scaling_factor),
expert_weights_norm (V3 only: written only when true), rope.dimension_count 8, and for V3
rope.scaling.type yarn, factor 4, original_context_length 64, yarn_beta_fast 32, yarn_beta_slow 1,
rope.scaling.yarn_log_multiplier 0.07 (0.1 x mscale_all_dim, which the loader divides by 0.1 again).
Tensors: the HF names mapped, kv_b_proj split per head into attn_k_b [H, R, nope] (the K rows
transposed) and attn_v_b [H, v, R] (ggml ne innermost first: [nope, R, H], [R, v, H]), the experts
stacked (ffn_{gate,up,down}_exps), e_score_correction_bias as exp_probs_b.bias, shared experts as
ffn_*_shexp; nothing permuted (llama.cpp rotates deepseek2 with LLAMA_ROPE_TYPE_NORM, adjacent
pairs, as transformers' DeepSeek-V2 and V3 with rope_interleave).

The reference (expected.json) is llama.cpp itself on each file (llama-cpp-python 0.3.36 in
.brigade/llamacpp-venv, F32 KV cache): every prompt position's logits, the greedy continuation and
the logits of each cached decode step. It differs from transformers' logits on the same weights
(tests/fixtures/deepseek_v*/expected.json; llamacpp.json's transformers_max_diff records how far)
where llama.cpp's deepseek2 runs its own rules, which brigade's GGUF reader follows:
  - expert groups are always scored by the sum of their two best experts (build_moe_ffn), also
    for softmax routing, where DeepSeek-V2's group_limited_greedy takes a group's best one;
  - YaRN's cos/sin factor is mscale(factor, mscale) / mscale(factor, mscale_all_dim) with mscale
    taken equal to mscale_all_dim (llama-context.cpp: the file has no mscale), i.e. 1 when
    yarn_log_multiplier is there, where transformers has mscale 1 (the fixture's) over
    mscale(4, 0.7); the softmax scale is mscale(factor, mscale_all_dim)^2 / sqrt(nope + rope) as
    transformers'.
DeepSeek-V3's config.json on the Hub has scoring_func sigmoid, which transformers 5's DeepseekV3Config
does not write; without it the converter writes no expert_gating_func and llama.cpp routes by softmax,
so HUB_FIELDS adds it. llama.cpp's loader requires attention.q_lora_rank unless block_count is one
of V2-Lite's (27, 26, 48): the 3-layer V2 file gets q_lora_rank 0 (CONVERT_NO_Q_LORA), with which
llama.cpp takes attn_q as it does for V2-Lite's own files (which have no such key; brigade reads
both).
For the Q8_0 file, expected.json is llama.cpp's run of an F32 copy of its values (dequantized.gguf,
written by the first pass and deleted by the second: the reference for brigade reading every block
right), and llamacpp.json's `quantized` holds llama.cpp's run of the Q8_0 file itself (which rounds
the activations of each product to Q8_0: 0.70, 0.038 and 0.094 from the F32 copy's on the three
prompts). llamacpp.json also holds llama.cpp's tokenization of a few strings (tokenize) and, for the
copied checkpoints, how far llama.cpp is from transformers' logits (transformers_max_diff: V2 0.42,
1e-06, 0.93, V3 0.21, 1.3e-06, 1.6, the rules above; the one-token prompt, where neither rule acts,
agrees).

Run: python3 scripts/make_gguf_deepseek_fixtures.py [NAME...] (make_fixtures.py's virtual
environment), then python3 scripts/make_gguf_deepseek_fixtures.py --llamacpp [NAME...] (the
llama.cpp environment). CI never runs it: the fixtures are committed.
"""
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
import make_gguf_lfm2_fixtures as lfm2  # noqa: E402
import make_gguf_qwen35_fixtures as q35  # noqa: E402

# name: (source, --outtype, pre-tokenizer name)
FIXTURES = {
    "gguf_deepseek_v2": ("deepseek_v2", "f32", "deepseek-llm"),
    "gguf_deepseek_v3": ("deepseek_v3", "f32", "deepseek-v3"),
    "gguf_deepseek_v3_q8_0": ("deepseek_v3_q8", "q8_0", "deepseek-v3"),
}
# config.json fields added to a source's: the Hub configs' scoring_func, the converter's only source
# of expert_gating_func (without it llama.cpp routes DeepSeek-V3 by softmax; transformers' V3 always
# by sigmoid).
HUB_FIELDS = {"deepseek_v3": {"scoring_func": "sigmoid"}, "deepseek_v3_q8": {"scoring_func": "sigmoid"}}
# deepseek_v3_q8: make_fixtures.py's deepseek_v3 shape (a fresh model, this seed) with every width
# a multiple of Q8_0's 32-element blocks, so that every matrix is Q8_0 (module docstring).
Q8_SOURCE = ("deepseek_v3", {"q_lora_rank": 32, "qk_nope_head_dim": 32, "v_head_dim": 32, "moe_intermediate_size": 32},
             3540)
# make_gguf_qwen35_fixtures.CONVERT with deepseek2.attention.q_lora_rank 0 written where config.json's
# q_lora_rank is null: llama.cpp's loader requires the key unless block_count is one of
# DeepSeek-V2-Lite's (27, 26, 48), and with it 0 takes attn_q as V2-Lite's files do (module docstring).
CONVERT_NO_Q_LORA = """
import runpy, sys
sys.path.insert(0, sys.argv[1])
import conversion.base as base
import conversion.deepseek as deepseek
pre = sys.argv[2]
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
set_params = deepseek.DeepseekV2Model.set_gguf_parameters
def set_gguf_parameters(self):
    set_params(self)
    if self.hparams.get("q_lora_rank") is None:
        self.gguf_writer.add_q_lora_rank(0)
deepseek.DeepseekV2Model.set_gguf_parameters = set_gguf_parameters
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
TOKENIZE = [("Hello world, abab 12345!", False), ("a b\nab  ba", True), ("x=1+2; y = x * 3.5", False)]


def write_toy_tokenizer(model_dir, vocab_size):
    """A byte-level BPE of vocab_size (< 256) tokens: the space and newline characters (Ġ, Ċ), the
    byte alphabet's first others, one merge (a b -> ab) and <|endoftext|> last; llama.cpp maps
    bytes outside it to nothing, which the prompts (token ids) never meet."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    alphabet = ["Ġ", "Ċ"] + [c for c in sorted(pre_tokenizers.ByteLevel.alphabet()) if c not in ("Ġ", "Ċ")]
    vocab = {ch: i for i, ch in enumerate(alphabet[:vocab_size - 3])}
    vocab["ab"] = vocab_size - 3
    vocab["ba"] = vocab_size - 2
    vocab["<|endoftext|>"] = vocab_size - 1
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b"), ("b", "a")]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True)])
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(str(model_dir))


def copy_checkpoint(source, d, fields):
    """make_fixtures.py's checkpoint `source` (config.json and model.safetensors) copied into the new
    directory d, config.json with `fields` added; returns that config."""
    d.mkdir()
    for f in ("config.json", "model.safetensors"):
        shutil.copy(mf.OUT / source / f, d / f)
    cfg = {**json.loads((d / "config.json").read_text()), **fields}
    (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return cfg


def make(name):
    """FIXTURES[name]: the converter's file of the source checkpoint."""
    source, outtype, pre = FIXTURES[name]
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / source
        if source == "deepseek_v3_q8":
            base, overrides, seed = Q8_SOURCE
            config_cls, model_cls, kw = mf.fixtures()[base]
            mf.new_model(config_cls, model_cls, {**kw, **overrides}, seed).save_pretrained(d, safe_serialization=True)
            (d / "generation_config.json").unlink(missing_ok=True)
            cfg = {**json.loads((d / "config.json").read_text()), **HUB_FIELDS.get(source, {})}
            (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        else:
            cfg = copy_checkpoint(source, d, HUB_FIELDS.get(source, {}))
        write_toy_tokenizer(d, cfg["vocab_size"])
        lfm2.convert(d, out_dir / "model.gguf", outtype, pre, snippet=CONVERT_NO_Q_LORA)
    print(f"{name}: model.gguf {(out_dir / 'model.gguf').stat().st_size / 1024:.0f} KiB")
    if outtype != "f32":
        write_dequantized(out_dir / "model.gguf", out_dir / DEQUANTIZED)


# The F32 copy of a quantized fixture's file that --llamacpp reads and deletes (module docstring).
DEQUANTIZED = "dequantized.gguf"


def write_dequantized(src, dst):
    """src's metadata and tensors, each as the F32 values its stored blocks hold."""
    sys.path.insert(0, str(q35.LLAMACPP / "gguf-py"))
    import gguf
    import numpy as np
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), reader.fields[gguf.Keys.General.ARCHITECTURE].contents())
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), field.types[0], sub_type=sub_type)
    for t in reader.tensors:
        writer.add_tensor(t.name, np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def llamacpp_cases(m, prompts):
    """expected.json's cases from llama.cpp's Llama `m`: every prompt position's logits, the greedy
    continuation of mf.N_GREEDY tokens and the logits of the decode steps fed greedy[i - 1]."""
    import numpy as np
    cases = []
    for prompt in prompts:
        m.reset()
        m.eval(prompt)
        logits = np.array(m.scores[:len(prompt)], dtype=np.float32)
        greedy, decode = [int(logits[-1].argmax())], []
        while len(greedy) < mf.N_GREEDY:
            m.eval([greedy[-1]])
            row = np.array(m.scores[m.n_tokens - 1], dtype=np.float32)
            decode.append(row)
            greedy.append(int(row.argmax()))
        rows = lambda a: [[float(f"{v:.7g}") for v in r.tolist()] for r in a]  # noqa: E731
        cases.append({"prompt": prompt, "logits": rows(logits), "greedy": greedy, "decode_logits": rows(decode)})
    return cases


def llamacpp_pass(names, fixtures=FIXTURES):
    """expected.json and llamacpp.json per fixture of `fixtures` (module docstring), in the
    llama-cpp-python venv."""
    import llama_cpp
    import numpy as np
    for name in names or list(fixtures):
        source, outtype = fixtures[name][:2]
        out_dir = mf.OUT / name
        load = lambda f: llama_cpp.Llama(str(out_dir / f), n_ctx=64, logits_all=True, verbose=False,  # noqa: E731
                                         n_threads=2, type_k=0, type_v=0)
        m = load("model.gguf")
        prompts = mf.prompts_for(128)
        cases = llamacpp_cases(m, prompts)
        doc = {"generator": f"llama-cpp-python {llama_cpp.__version__}"}
        if outtype != "f32":  # expected.json from the F32 copy; llama.cpp's own run of the file beside it
            doc["quantized"] = cases
            cases = llamacpp_cases(load(DEQUANTIZED), prompts)
            (out_dir / DEQUANTIZED).unlink()
            about = f"the F32 copy of model.gguf's values ({DEQUANTIZED}, not kept)"
        else:
            about = "model.gguf"
        mf.write_expected(out_dir, name, f"llama-cpp-python {llama_cpp.__version__} (llama.cpp's deepseek2) on {about}: "
                          f"{source}'s checkpoint by llama.cpp's converter, --outtype {outtype}; F32 KV cache", 128, cases)
        if (mf.OUT / source / "expected.json").exists():
            hf = json.loads((mf.OUT / source / "expected.json").read_text())["cases"]
            doc["transformers_max_diff"] = [float(np.abs(np.array(c["logits"]) - np.array(h["logits"])).max())
                                            for c, h in zip(cases, hf)]
        doc["tokenize"] = [{"text": t, "add_bos": b, "ids": m.tokenize(t.encode(), add_bos=b, special=False)}
                           for t, b in TOKENIZE]
        (out_dir / "llamacpp.json").write_text(json.dumps(doc) + "\n")
        if "transformers_max_diff" in doc:
            print(f"{name}: llama.cpp's logits {', '.join(f'{d:.2g}' for d in doc['transformers_max_diff'])} from "
                  f"transformers' ({source})")


def main(script=__file__, fixtures=FIXTURES, make_one=make):
    """`script` [NAME...] makes the files of `fixtures` (make_one), `script` --llamacpp [NAME...]
    their llama.cpp references."""
    if sys.argv[1:2] == ["--llamacpp"]:
        mf.ensure_llamacpp_venv(script, sys.argv[1:])
        return llamacpp_pass(sys.argv[2:], fixtures)
    mf.ensure_venv(script)
    q35.ensure_llamacpp()
    for name in sys.argv[1:] or list(fixtures):
        make_one(name)


if __name__ == "__main__":
    main()
