#!/usr/bin/env python3
"""Writes tests/fixtures/beam_search/stories260K.json: transformers' beam search on the real
stories260K checkpoint, which tests/actors/engine_beam_search_test.cpp compares brigade's
Engine::beam_search with.

The llama2.c checkpoint (../shared/testdata/models/stories260K.bin) is loaded into a transformers
LlamaForCausalLM: the same weights, with wq and wk rows permuted from llama2.c's interleaved RoPE
pairs to transformers' rotate-half halves (what llama2.c's own export does). The conversion is
checked first: greedy decoding from BOS must give run.c's 64 reference tokens (testdata README).
Then each case runs model.generate(num_beams=W, num_return_sequences=W, do_sample=False) and
records every returned beam's generated tokens (the end id included when one ended it) and its
score (sequences_scores).

Run from anywhere: python3 scripts/make_beam_fixtures.py. It uses make_fixtures.py's virtual
environment (.brigade/fixtures-venv: torch, transformers). CI never runs it: the fixture is
committed.
"""
import json
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures  # noqa: E402

make_fixtures.ensure_venv(__file__)

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINT = ROOT.parent / "shared" / "testdata" / "models" / "stories260K.bin"
OUT = ROOT / "tests" / "fixtures" / "beam_search" / "stories260K.json"

# run.c's greedy continuation of BOS (../shared/testdata/README.md).
RUNC_GREEDY = [int(t) for t in """461 461 401 401 401 461 378 455 473 456 435 299 362 409 283 264 283 452 288 13 431
431 431 431 431 431 431 431 431 431 431 431 431 293 430 417 363 416 315 342 418 424 400 442 402 303 266 299 374 466
396 303 271 362 390 469 306 469 423 314 347 305 356 333""".split()]

# (name, prompt ids, beams, max_new_tokens, length_penalty, early_stopping, end ids). The model's
# EOS is 2, which these prompts never reach; the other end ids are tokens some beams choose
# mid-way (found by running the search without them), so that beams end at different lengths
# and compete with running ones under each early_stopping rule and length penalty.
P2 = [1, 461, 461, 401, 401, 401, 461, 378]
P3 = [1, 264, 283, 452, 288]
CASES = [
    ("bos_w4_length_only", [1], 4, 24, 1.0, False, [2]),
    ("bos_w4_ends", [1], 4, 24, 1.0, False, [2, 264]),
    ("bos_w3_never_lp0", [1], 3, 20, 0.0, "never", [2, 283]),
    ("bos_w3_never_lp1", [1], 3, 20, 1.0, "never", [2, 283]),
    ("bos_w6_early", [1], 6, 24, 1.0, True, [2, 393]),
    ("p2_w5_early_lp2", P2, 5, 16, 2.0, True, [2, 306]),
    ("p2_w4_heuristic", P2, 4, 24, 1.0, False, [2, 277]),
    ("p3_w2_lp_neg", P3, 2, 24, -0.5, False, [2, 299]),
    ("p3_w4_three_ends", P3, 4, 24, 1.0, False, [2, 299, 340]),
    ("long_prompt_w8", [1] + RUNC_GREEDY[:40], 8, 12, 1.0, False, [2, 303]),
]


def read_llama2c(path):
    raw = path.read_bytes()
    dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    data = torch.frombuffer(bytearray(raw[28:]), dtype=torch.float32)
    head = dim // n_heads
    kv_dim = n_kv_heads * head
    at = 0

    def take(*shape):
        nonlocal at
        n = 1
        for s in shape:
            n *= s
        t = data[at:at + n].reshape(*shape).clone()
        at += n
        return t

    w = {"emb": take(vocab, dim), "rms_att": take(n_layers, dim), "wq": take(n_layers, dim, dim),
         "wk": take(n_layers, kv_dim, dim), "wv": take(n_layers, kv_dim, dim), "wo": take(n_layers, dim, dim),
         "rms_ffn": take(n_layers, dim), "w1": take(n_layers, hidden, dim), "w2": take(n_layers, dim, hidden),
         "w3": take(n_layers, hidden, dim), "rms_final": take(dim)}
    at += seq_len * head  # freq_cis_real and freq_cis_imag, [seq_len, head / 2] each
    w["cls"] = w["emb"] if shared else take(vocab, dim)
    cfg = dict(dim=dim, hidden=hidden, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads, vocab=vocab,
               seq_len=seq_len, shared=shared)
    return cfg, w


def interleaved_to_halves(w, n_heads):
    """Rows of a q/k projection from llama2.c's (x[2i], x[2i+1]) pairs to rotate-half's halves."""
    out_dim, in_dim = w.shape
    return w.view(n_heads, out_dim // n_heads // 2, 2, in_dim).transpose(1, 2).reshape(out_dim, in_dim)


def to_transformers(cfg, w):
    config = LlamaConfig(vocab_size=cfg["vocab"], hidden_size=cfg["dim"], intermediate_size=cfg["hidden"],
                         num_hidden_layers=cfg["n_layers"], num_attention_heads=cfg["n_heads"],
                         num_key_value_heads=cfg["n_kv_heads"], max_position_embeddings=cfg["seq_len"],
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=cfg["shared"],
                         bos_token_id=1, eos_token_id=2, torch_dtype=torch.float32)
    model = LlamaForCausalLM(config).eval()
    sd = {"model.embed_tokens.weight": w["emb"], "model.norm.weight": w["rms_final"], "lm_head.weight": w["cls"]}
    for i in range(cfg["n_layers"]):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = w["rms_att"][i]
        sd[p + "post_attention_layernorm.weight"] = w["rms_ffn"][i]
        sd[p + "self_attn.q_proj.weight"] = interleaved_to_halves(w["wq"][i], cfg["n_heads"])
        sd[p + "self_attn.k_proj.weight"] = interleaved_to_halves(w["wk"][i], cfg["n_kv_heads"])
        sd[p + "self_attn.v_proj.weight"] = w["wv"][i]
        sd[p + "self_attn.o_proj.weight"] = w["wo"][i]
        sd[p + "mlp.gate_proj.weight"] = w["w1"][i]
        sd[p + "mlp.down_proj.weight"] = w["w2"][i]
        sd[p + "mlp.up_proj.weight"] = w["w3"][i]
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not k.endswith("rotary_emb.inv_freq")]
    assert not missing and not unexpected, (missing, unexpected)
    return model


def generated_beams(model, prompt, beams, max_new, length_penalty, early_stopping, ends):
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, num_beams=beams,
                         num_return_sequences=beams, max_new_tokens=max_new, length_penalty=length_penalty,
                         early_stopping=early_stopping, eos_token_id=ends, pad_token_id=ends[0],
                         return_dict_in_generate=True, output_scores=True)
    result = []
    for seq, score in zip(out.sequences.tolist(), out.sequences_scores.tolist()):
        gen = seq[len(prompt):]
        end = next((i for i, t in enumerate(gen) if t in ends), None)
        if end is not None:
            gen = gen[:end + 1]  # the padding after an ended beam is ends[0] again
        result.append({"tokens": gen, "score": score})
    return result


def main():
    cfg, w = read_llama2c(CHECKPOINT)
    model = to_transformers(cfg, w)
    bos = torch.tensor([[1]])
    greedy = model.generate(bos, attention_mask=torch.ones_like(bos), do_sample=False, max_new_tokens=64,
                            eos_token_id=None, pad_token_id=0)[0, 1:].tolist()
    assert greedy == RUNC_GREEDY, f"the conversion is wrong: transformers' greedy {greedy} is not run.c's"
    cases = []
    for name, prompt, beams, max_new, lp, early, ends in CASES:
        got = generated_beams(model, prompt, beams, max_new, lp, early, ends)
        cases.append({"name": name, "prompt": prompt, "beam_width": beams, "max_new_tokens": max_new,
                      "length_penalty": lp, "early_stopping": early, "end_ids": ends, "beams": got})
        print(name, [(len(b["tokens"]), b["tokens"][-1] in ends, round(b["score"], 4)) for b in got])
    doc = {"transformers": transformers.__version__, "torch": torch.__version__, "checkpoint": "stories260K.bin",
           "cases": cases}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
