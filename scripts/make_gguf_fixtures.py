#!/usr/bin/env python3
"""Writes the quantized GGUF model fixtures that tests/models/gguf_quant_test.cpp reads:
tests/fixtures/<name>/model.gguf (written with llama.cpp's gguf-py, PyPI `gguf`) and
expected.json with transformers' logits for it. transformers loads the file itself
(from_pretrained(dir, gguf_file=...), which dequantizes every tensor with gguf-py and undoes
llama.cpp's q/k row permutation), so the reference shares no code with brigade.

  gguf_llama_q4_k_m  llama laid out as llama.cpp's Q4_K_M: Q4_K token_embd, attn_q/k/output and
                     ffn_gate/up; Q6_K attn_v, ffn_down and output.
  gguf_qwen2_q4_0    qwen2 (q/k/v biases) of the 32-element types, quantized from random float
                     weights by gguf-py's quantize: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (token_embd Q8_0).
  gguf_qwen3_k       qwen3 (q/k norms) with the other K-quants: Q2_K, Q3_K, Q5_K, Q6_K, and a Q6_K
                     token_embd tied to the lm_head (no output.weight).
  gguf_qwen3moe_q4_k_m  qwen3moe (q/k norms; MOE below: 4 experts, top 2) as llama.cpp's Q4_K_M lays
                     out an MoE file: F32 router (llama-quantize keeps ffn_gate_inp), Q4_K gate/up
                     experts, Q6_K down experts; layer 1 mixes Q8_0 gate, Q4_K up and Q4_K down. Its
                     act_q8 runs round the experts' inputs too (transformers' experts are not Linear
                     modules), and it has decode_logits. transformers' GGUF loader does not read
                     expert_feed_forward_length, so moe_intermediate_size is set as llama.cpp reads it.
  gguf_mixtral_q8_0  make_fixtures.py's mixtral checkpoint as llama.cpp writes Mixtral (arch llama
                     with experts; MIXTRAL_TYPES below: Q8_0 / Q4_0 experts, quantized by gguf-py from
                     its weights); transformers' GGUF loader cannot read Mixtral (it would load a
                     dense llama), so the reference is transformers' Mixtral with gguf-py's round
                     trip of every quantized tensor, and the window off as llama.cpp runs it.
  gguf_llama_mxfp4   llama whose linear layers are MXFP4 (gpt-oss's expert type; gguf-py quantizes
                     random float weights), but layer 0's attn_v Q8_0 (a q|k|v of two types) and a
                     Q8_0 token_embd; MXFP4 output.
  gguf_gpt_oss       make_fixtures.py's gpt_oss_mxfp4 checkpoint (gpt-oss with MXFP4 experts, as the Hub
                     ships it) as llama.cpp's converter writes gpt-oss (write_gpt_oss_gguf), with a toy
                     o200k-style vocabulary and the gpt-oss chat template; decode_logits. The reference
                     is transformers' GptOss from that checkpoint with the SwiGLU clamp at 7, as
                     llama.cpp runs every gpt-oss file (the checkpoint's 1.0 is not in the file),
                     and the file's routers, redrawn away from ties (GPT_OSS_ROUTER).
  gguf_qwen2moe      make_fixtures.py's qwen2_moe checkpoint as llama.cpp's converter writes qwen2moe
                     (write_qwen2moe_gguf: F32, the experts stacked, the shared expert and its gate as
                     ffn_*_shexp), with gguf_gpt_oss's toy byte-level vocabulary (pre-tokenizer qwen2);
                     the reference is that checkpoint's expected.json (the same weights exactly), which
                     llama.cpp's logits are checked against (--llamacpp).
  gguf_gemma2        gemma2 / gemma3 as llama.cpp's converter writes them (GEMMA below), with
  gguf_gemma3        decode_logits; transformers' GGUF loader leaves some settings at the config
                     class's defaults (the soft-caps, query_pre_attn_scalar, gemma3's rope scaling),
                     so those are set as llama.cpp reads the file and recorded in the generator.

gguf-py cannot make K-quants (quantize raises NotImplementedError for them), so those tensors are
random valid blocks (random bytes with finite f16 scales sized for values of about 0.1, the
mins set to cancel each sub-block's mean): the model need not be meaningful, only the same in both runtimes. Rows are 256 elements (K-quant
super-blocks): hidden 256, 4 heads of 64 and 2 KV heads (qwen3: 2 of 128 and 1), intermediate
256, 2 layers, vocab 256.

expected.json also records, per prompt, `act_q8_max_diff`: how far the logits move when every
linear layer's input is rounded to Q8_0 (int8 per block of 32, d = absmax / 127, as llama.cpp's
CPU kernels quantize activations) in the same transformers run, and `act_q8_greedy`, that run's
greedy tokens. That is the error native quantized kernels are expected to add, and the test's
tolerance for them is derived from it.

Also writes tests/fixtures/quantized_weights/bounds.json (weights_option_bounds): the same
measure for `weights: q8_0`, `q4_0` and `q4_1` on make_fixtures.py's llama, qwen2, qwen3,
qwen3_moe and mixtral checkpoints (their MoE experts quantized too, as brigade quantizes them).

Run: python3 scripts/make_gguf_fixtures.py [NAME...]; then `--llamacpp` for the Gemma and gpt-oss
fixtures' llamacpp.json (llama.cpp's tokenization, and a check of its logits); `--bench PATH [NAME]` writes a fixture's
layout at ~110M parameters for benchmarks instead (make_fixtures.py's virtual environment,
plus `gguf` and `accelerate` from PyPI, installed on first use).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402

HIDDEN, INTER, LAYERS, VOCAB = 256, 256, 2, 256


def heads(arch):
    """(heads, kv heads, head_dim): transformers' GGUF loader ignores qwen3's attention.key_length
    and takes Qwen3Config's default head_dim, 128 (as the real Qwen3 models have)."""
    return (2, 1, 128) if arch == "qwen3" else (4, 2, 64)

# Per K-type: byte offsets of the f16 scales, and their magnitude for values of about 0.1.
K_SCALES = {"Q2_K": ([80, 82], 1.5e-2), "Q3_K": ([108], 2.5e-3), "Q4_K": ([0, 2], 4e-3),
            "Q5_K": ([0, 2], 4e-3), "Q6_K": ([208], 7.5e-5)}


def pack_k4_scales(np, sc, m):
    """Q4_K/Q5_K's scales[12] of eight 6-bit scales sc and mins m ([n, 8] each), ggml's packing."""
    s = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    s[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    s[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    return s


def zero_mean_scales(np, rng, type_name, raw):
    """Sets the scales of the types with mins (x = d * sc * q - dmin * m, q >= 0) so that each
    sub-block's min is about its mean (m = sc * mean(q)), as a quantizer of zero-mean weights
    would: a random network with biased weights has activations too large to compare."""
    n = raw.shape[0]
    if type_name == "Q2_K":  # 16 bytes: scale in the low nibble, min in the high; q in 0..3
        sc = rng.integers(1, 11, size=(n, 16))
        raw[:, 0:16] = sc | (np.rint(1.5 * sc).clip(0, 15).astype(np.int64) << 4)
    elif type_name in ("Q4_K", "Q5_K"):  # q in 0..15 or 0..31
        top = 15.5 if type_name == "Q5_K" else 7.5
        sc = rng.integers(1, int(63 / top) + 1, size=(n, 8))
        m = np.rint(top * sc).clip(0, 63).astype(np.int64)
        raw[:, 4:16] = pack_k4_scales(np, sc, m)


def layout(name):
    """name -> (arch, {gguf tensor suffix or top-level name: ggml type name}, tied)."""
    if name == "gguf_llama_q4_k_m":
        return "llama", {"token_embd": "Q4_K", "output": "Q6_K", "attn_q": "Q4_K", "attn_k": "Q4_K",
                         "attn_v": "Q6_K", "attn_output": "Q4_K", "ffn_gate": "Q4_K", "ffn_up": "Q4_K",
                         "ffn_down": "Q6_K"}, False
    if name == "gguf_qwen2_q4_0":
        return "qwen2", {"token_embd": "Q8_0", "output": "Q4_0", "attn_q": "Q4_0", "attn_k": "Q4_1",
                         "attn_v": "Q8_0", "attn_output": "Q5_0", "ffn_gate": "Q4_0", "ffn_up": "Q5_1",
                         "ffn_down": "Q5_0", "blk.1.ffn_down": "Q5_1", "blk.1.attn_output": "Q4_1"}, False
    if name == "gguf_qwen3_k":
        return "qwen3", {"token_embd": "Q6_K", "attn_q": "Q2_K", "attn_k": "Q3_K", "attn_v": "Q5_K",
                         "attn_output": "Q3_K", "ffn_gate": "Q5_K", "ffn_up": "Q2_K", "ffn_down": "Q6_K"}, True
    if name == "gguf_qwen3moe_q4_k_m":
        return "qwen3moe", {"token_embd": "Q4_K", "output": "Q6_K", "attn_q": "Q4_K", "attn_k": "Q4_K",
                            "attn_v": "Q6_K", "attn_output": "Q4_K", "ffn_gate_exps": "Q4_K", "ffn_up_exps": "Q4_K",
                            "ffn_down_exps": "Q6_K", "blk.1.ffn_gate_exps": "Q8_0",
                            "blk.1.ffn_down_exps": "Q4_K"}, False
    if name == "gguf_llama_mxfp4":
        return "llama", {"token_embd": "Q8_0", "output": "MXFP4", "attn_q": "MXFP4", "attn_k": "MXFP4",
                         "attn_v": "MXFP4", "blk.0.attn_v": "Q8_0", "attn_output": "MXFP4", "ffn_gate": "MXFP4",
                         "ffn_up": "MXFP4", "ffn_down": "MXFP4"}, False
    raise KeyError(name)


NAMES = ["gguf_llama_q4_k_m", "gguf_qwen2_q4_0", "gguf_qwen3_k", "gguf_gemma2", "gguf_gemma3", "gguf_qwen3moe_q4_k_m",
         "gguf_mixtral_q8_0", "gguf_llama_mxfp4", "gguf_gpt_oss", "gguf_qwen2moe", "gguf_glm4moe"]

# gguf_mixtral_q8_0: make_fixtures.py's mixtral checkpoint (its weights, not random blocks) as
# llama.cpp's converter (LlamaModel) writes Mixtral: arch llama with expert_count and
# expert_used_count, q/k rows permuted, the router ffn_gate_inp F32, the experts stacked. Its rows
# of 64 rule out K-quants, so gguf-py quantizes: the ggml type per tensor (blk.1's experts differ).
# llama.cpp's llama never reads a sliding window (nor does the converter write Mixtral's), so the
# reference runs the checkpoint without one.
MIXTRAL_TYPES = {"token_embd": "Q8_0", "output": "Q8_0", "attn_q": "Q8_0", "attn_k": "Q4_0", "attn_v": "Q8_0",
                 "attn_output": "Q4_0", "ffn_gate_exps": "Q8_0", "ffn_up_exps": "Q4_0", "ffn_down_exps": "Q8_0",
                 "blk.1.ffn_gate_exps": "Q4_0", "blk.1.ffn_down_exps": "Q4_0"}

# The experts of gguf_qwen3moe_q4_k_m: count, used per token, width (a whole K-quant super-block,
# so that ffn_down_exps' rows can be Q4_K / Q6_K), the dense feed_forward_length the converter
# writes beside it (unused by qwen3moe), the router's weight scale (router logits of about 16)
# and the smallest gap between any token's k-th and (k+1)-th router logit that the fixture's
# weights must show (else the next seed is drawn), so that no expert choice is near a tie.
MOE = dict(experts=4, used=2, inter=256, dense_inter=512, router_std=1.0, min_margin=0.3)

# Gemma fixtures, laid out as llama.cpp's convert_hf_to_gguf.py (Gemma2Model / Gemma3Model) writes
# them: norms stored as 1 + w, q/k rows unpermuted, no output.weight (tied). Each: sizes, the ggml
# type per tensor, and the metadata the converter writes (None: a key it leaves out).
#   gguf_gemma2  2 layers (layer 0 sliding, 1 global), heads of 256 (query_pre_attn_scalar 256 as
#                in transformers' default), window 8, soft-caps 5 (attention) and 3 (final) that
#                bite; Q8_0, Q4_0, Q4_K, Q6_K.
#   gguf_gemma3  6 layers (the 6th global), heads of 128 (llama.cpp's softmax scale 1/sqrt(128),
#                where transformers' loader would take query_pre_attn_scalar 256), q/k norms,
#                window 8, global RoPE base 1e6 with linear scaling 8, local base 10000; Q8_0,
#                Q4_0, Q4_1, Q5_0, Q5_1.
GEMMA = {
    "gguf_gemma2": dict(arch="gemma2", hidden=128, inter=256, layers=2, heads=(2, 1, 256), window=8,
                        attn_softcap=5.0, final_softcap=3.0, freq_base=None, rope_scale=None,
                        types={"token_embd": "Q8_0", "attn_q": "Q4_0", "attn_k": "Q8_0", "attn_v": "Q8_0",
                               "attn_output": "Q4_K", "ffn_gate": "Q4_0", "ffn_up": "Q8_0", "ffn_down": "Q6_K"}),
    "gguf_gemma3": dict(arch="gemma3", hidden=128, inter=128, layers=6, heads=(2, 1, 128), window=8,
                        attn_softcap=None, final_softcap=None, freq_base=1e6, rope_scale=8.0,
                        types={"token_embd": "Q8_0", "attn_q": "Q4_0", "attn_k": "Q4_1", "attn_v": "Q8_0",
                               "attn_output": "Q5_0", "ffn_gate": "Q4_0", "ffn_up": "Q5_1", "ffn_down": "Q4_0",
                               "blk.5.attn_q": "Q8_0"}),
}


def gemma_vocab():
    """A toy vocabulary (VOCAB pieces) of Gemma's form: <pad> <eos> <bos> <unk>, the turn markers as
    control tokens, then SentencePiece pieces ("\u2581" for a space) with falling scores."""
    sp = "\u2581"
    pieces = ["\n", sp] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + \
             [chr(c) for c in range(ord("A"), ord("Z") + 1)] + list("0123456789!?.,:'-")
    pieces += ["user", "model", "Hello", sp + "there", sp + "the", sp + "is", "He", "ll", "llo", "er", "th", "re",
               "in", "an", "on", "at", "en", "es", "or", "ou", "it", "is", "he", "ha", "ma", "us"]
    pieces += [sp + chr(c) for c in range(ord("a"), ord("z") + 1)] + [sp + chr(c) for c in range(ord("A"), ord("Z") + 1)]
    pieces += [a + b for a in "etaoinsrhldcu" for b in "etaoinsrhldcu" if a + b not in pieces]
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    tokens = (specials + pieces)[:VOCAB]
    types = [3, 3, 3, 2, 3, 3] + [1] * (len(tokens) - len(specials))
    scores = [0.0] * len(specials) + [-float(i) for i in range(len(tokens) - len(specials))]
    assert len(tokens) == VOCAB and len(set(tokens)) == VOCAB
    return tokens, scores, types


def add_gemma_vocab(gguf, w):
    """The tokenizer.ggml.* keys as Gemma2Model.set_vocab writes them (_set_vocab_sentencepiece,
    SpecialVocab, add_space_prefix false), with tests/fixtures/chat_templates' gemma-2 template."""
    tokens, scores, types = gemma_vocab()
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template((mf.OUT / "chat_templates" / "templates" / "gemma-2.jinja").read_text())
    w.add_add_space_prefix(False)


def write_gemma_gguf(np, gguf, rng, name, path):
    """The Gemma fixture `name` at `path`, keys and tensors in the order of llama.cpp's converter."""
    g = GEMMA[name]
    heads, kv_heads, head_dim = g["heads"]
    hidden, inter, layers, types = g["hidden"], g["inter"], g["layers"], g["types"]
    w = gguf.GGUFWriter(str(path), g["arch"])
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(inter)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    if g["freq_base"] is not None:
        w.add_rope_freq_base(g["freq_base"])
    if g["rope_scale"] is not None:  # TextModel.set_gguf_parameters for rope_scaling linear
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(g["rope_scale"])
    if g["attn_softcap"] is not None:
        w.add_attn_logit_softcapping(g["attn_softcap"])
    if g["final_softcap"] is not None:
        w.add_final_logit_softcapping(g["final_softcap"])
    w.add_sliding_window(g["window"])
    add_gemma_vocab(gguf, w)

    def matrix(gguf_name, key, rows, cols):
        data, t = quantized(np, gguf, rng, types.get(key, types[key.split(".")[-1]]), rows, cols)
        w.add_tensor(gguf_name, data, raw_dtype=t)

    def norm(gguf_name, n):  # Gemma's w (scale 1 + w), stored + 1 as the converter does
        w.add_tensor(gguf_name, (0.1 * rng.standard_normal(n)).astype(np.float32) + np.float32(1))

    matrix("token_embd.weight", "token_embd", VOCAB, hidden)
    for l in range(layers):
        p = f"blk.{l}."
        shapes = {"attn_q": (heads * head_dim, hidden), "attn_k": (kv_heads * head_dim, hidden),
                  "attn_v": (kv_heads * head_dim, hidden), "attn_output": (hidden, heads * head_dim),
                  "ffn_gate": (inter, hidden), "ffn_up": (inter, hidden), "ffn_down": (hidden, inter)}
        norm(p + "attn_norm.weight", hidden)
        for part, (rows, cols) in shapes.items():
            matrix(p + part + ".weight", p + part, rows, cols)
        if g["arch"] == "gemma3":
            norm(p + "attn_q_norm.weight", head_dim)
            norm(p + "attn_k_norm.weight", head_dim)
        norm(p + "post_attention_norm.weight", hidden)
        norm(p + "ffn_norm.weight", hidden)
        norm(p + "post_ffw_norm.weight", hidden)
    norm("output_norm.weight", hidden)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gemma_reference_config(name, out_dir):
    """transformers' config of a Gemma fixture: what its GGUF loader reads (sizes, key_length as
    head_dim, rms eps, rope.freq_base, sliding_window), plus what it leaves at Gemma2Config /
    Gemma3TextConfig's defaults though the file or llama.cpp's rules say otherwise: the soft-caps
    (keys it does not map), query_pre_attn_scalar (llama.cpp: key_length below 27B) and gemma3's
    rope.scaling (linear, for the global layers). Returns (config, {field: value set})."""
    import transformers
    g = GEMMA[name]
    cfg = transformers.AutoConfig.from_pretrained(str(out_dir), gguf_file="model.gguf")
    overrides = {"query_pre_attn_scalar": g["heads"][2]}
    if g["arch"] == "gemma2":
        overrides["attn_logit_softcapping"] = g["attn_softcap"]
        overrides["final_logit_softcapping"] = g["final_softcap"]
    for k, v in overrides.items():
        setattr(cfg, k, v)
    if g["rope_scale"] is not None:
        full = dict(cfg.rope_parameters["full_attention"])
        assert full.get("rope_type", "default") == "default", f"the loader read rope scaling now: {full}"
        full.update(rope_type="linear", factor=g["rope_scale"])
        cfg.rope_parameters["full_attention"] = full
        overrides["rope_parameters.full_attention"] = full
    assert cfg.sliding_window == g["window"] and cfg.head_dim == g["heads"][2], "the loader's own reading"
    return cfg, overrides


def random_k_blocks(np, gguf, rng, type_name, rows, cols):
    t = gguf.GGMLQuantizationType[type_name]
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[t]
    n = rows * cols // block_elems
    raw = rng.integers(0, 256, size=(n, block_bytes), dtype=np.uint8)
    zero_mean_scales(np, rng, type_name, raw)
    offsets, mag = K_SCALES[type_name]
    d = (mag * rng.uniform(0.5, 1.5, n)).astype(np.float16)
    for off in offsets:  # dmin = d, so that the mins cancel the mean
        raw[:, off:off + 2] = d.view(np.uint8).reshape(n, 2)
    return raw.reshape(rows, cols // block_elems * block_bytes)


def quantized(np, gguf, rng, type_name, rows, cols):
    """(uint8 [rows, row bytes], ggml type) of a random [rows, cols] weight of type_name."""
    t = gguf.GGMLQuantizationType[type_name]
    if type_name in K_SCALES:
        return random_k_blocks(np, gguf, rng, type_name, rows, cols), t
    w = (0.1 * rng.standard_normal((rows, cols))).astype(np.float32)
    return gguf.quants.quantize(w, t), t


def write_gguf(np, gguf, rng, name, path, dims=None):
    """The fixture `name` at `path`; dims (hidden, intermediate, layers, vocab, (heads, kv heads,
    head_dim)) override the fixtures' sizes (--bench)."""
    arch, types, tied = layout(name)
    HIDDEN, INTER, LAYERS, VOCAB, (HEADS, KV_HEADS, HEAD_DIM) = dims or (  # noqa: N806
        globals()["HIDDEN"], globals()["INTER"], globals()["LAYERS"], globals()["VOCAB"], heads(arch))
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(256)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(MOE["dense_inter"] if arch == "qwen3moe" else INTER)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(VOCAB)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    if arch == "qwen3moe":  # Qwen2MoeModel.set_gguf_parameters
        w.add_expert_count(MOE["experts"])
        w.add_expert_used_count(MOE["used"])
        w.add_expert_feed_forward_length(MOE["inter"])

    def matrix(gguf_name, key, rows, cols):
        data, t = quantized(np, gguf, rng, types[key], rows, cols)
        w.add_tensor(gguf_name, data, raw_dtype=t)

    def experts(gguf_name, key, rows, cols):  # [E, rows, cols], each expert's matrix quantized alike
        data, t = quantized(np, gguf, rng, types[key], MOE["experts"] * rows, cols)
        w.add_tensor(gguf_name, data.reshape(MOE["experts"], rows, -1), raw_dtype=t)

    def vector(gguf_name, n, around):
        w.add_tensor(gguf_name, (around + 0.1 * rng.standard_normal(n)).astype(np.float32))

    matrix("token_embd.weight", "token_embd", VOCAB, HIDDEN)
    for l in range(LAYERS):
        p = f"blk.{l}."
        vector(p + "attn_norm.weight", HIDDEN, 1.0)
        vector(p + "ffn_norm.weight", HIDDEN, 1.0)
        shapes = {"attn_q": (HEADS * HEAD_DIM, HIDDEN), "attn_k": (KV_HEADS * HEAD_DIM, HIDDEN),
                  "attn_v": (KV_HEADS * HEAD_DIM, HIDDEN), "attn_output": (HIDDEN, HEADS * HEAD_DIM),
                  "ffn_gate": (INTER, HIDDEN), "ffn_up": (INTER, HIDDEN), "ffn_down": (HIDDEN, INTER)}
        if arch == "qwen3moe":  # the router, then the stacked experts, in the converter's order
            for dense in ("ffn_gate", "ffn_up", "ffn_down"):
                del shapes[dense]
        for part, (rows, cols) in shapes.items():
            matrix(p + part + ".weight", p + part if p + part in types else part, rows, cols)
        if arch == "qwen3moe":
            router = MOE["router_std"] * rng.standard_normal((MOE["experts"], HIDDEN))
            w.add_tensor(p + "ffn_gate_inp.weight", router.astype(np.float32))
            inter = MOE["inter"]
            for part, (rows, cols) in (("ffn_gate_exps", (inter, HIDDEN)), ("ffn_down_exps", (HIDDEN, inter)),
                                       ("ffn_up_exps", (inter, HIDDEN))):
                experts(p + part + ".weight", p + part if p + part in types else part, rows, cols)
        if arch == "qwen2":
            for part, n in (("attn_q", HEADS * HEAD_DIM), ("attn_k", KV_HEADS * HEAD_DIM),
                            ("attn_v", KV_HEADS * HEAD_DIM)):
                vector(p + part + ".bias", n, 0.0)
        if arch in ("qwen3", "qwen3moe"):
            vector(p + "attn_q_norm.weight", HEAD_DIM, 1.0)
            vector(p + "attn_k_norm.weight", HEAD_DIM, 1.0)
    vector("output_norm.weight", HIDDEN, 1.0)
    if not tied:
        matrix("output.weight", "output", VOCAB, HIDDEN)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def q8_0_round_trip(x):
    """x with its last dimension rounded to Q8_0 blocks of 32 (ggml's quantize_row_q8_0_ref)."""
    import torch
    b = x.reshape(*x.shape[:-1], -1, 32)
    d = b.abs().amax(dim=-1, keepdim=True) / 127.0
    inv = torch.where(d > 0, 1.0 / d, torch.zeros_like(d))
    q = torch.round(b * inv)  # ties away from zero in ggml; exact ties do not occur in float data
    return (q * d.to(torch.float16).to(torch.float32)).reshape(x.shape)


def generate_greedy(model, prompt):
    import torch
    ids = torch.tensor([prompt])
    gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=mf.N_GREEDY,
                         min_new_tokens=mf.N_GREEDY, pad_token_id=0, eos_token_id=None)
    return gen[0, len(prompt):].tolist()


def experts_q8_forward(self, hidden_states, top_k_index, top_k_weights):
    """Qwen3MoeExperts.forward / MixtralExperts.forward (transformers 5: gate_up_proj [E, 2I, d],
    down_proj [E, d, I]) with both matmuls' inputs rounded to Q8_0, token by token, slot by slot;
    down_proj's only where `down_q8` (default True) says it runs quantized."""
    import torch
    out = torch.zeros_like(hidden_states)
    down_in = q8_0_round_trip if getattr(self, "down_q8", True) else (lambda v: v)
    for t in range(hidden_states.shape[0]):
        x = q8_0_round_trip(hidden_states[t])
        for j in range(top_k_index.shape[1]):
            e = int(top_k_index[t, j])
            gate, up = torch.nn.functional.linear(x, self.gate_up_proj[e]).chunk(2, dim=-1)
            y = torch.nn.functional.linear(down_in(self.act_fn(gate) * up), self.down_proj[e])
            out[t] += y * top_k_weights[t, j]
    return out


def act_q8_runs(model, cases, linear=lambda name: True):
    """Per case: (max |logit change|, greedy tokens) when the inputs of the Linear layers that
    `linear(name)` selects, and of every MoE expert, are rounded to Q8_0."""
    import types
    import torch
    hooks = [m.register_forward_pre_hook(lambda _m, args: (q8_0_round_trip(args[0]),) + args[1:])
             for name, m in model.named_modules() if isinstance(m, torch.nn.Linear) and linear(name)]
    patched = [m for m in model.modules() if type(m).__name__ in ("Qwen3MoeExperts", "MixtralExperts")]
    for m in patched:
        m.forward = types.MethodType(experts_q8_forward, m)
    out = []
    with torch.no_grad():
        for c in cases:
            logits = model(torch.tensor([c["prompt"]])).logits[0].to(torch.float32)
            out.append((float((logits - torch.tensor(c["logits"])).abs().max()), generate_greedy(model, c["prompt"])))
    for h in hooks:
        h.remove()
    for m in patched:
        del m.forward
    return out


def moe_reference_config(out_dir):
    """transformers' config of the qwen3moe fixture: what its GGUF loader reads, plus
    moe_intermediate_size (expert_feed_forward_length, which it does not map). Returns (config,
    {field: value set})."""
    import transformers
    cfg = transformers.AutoConfig.from_pretrained(str(out_dir), gguf_file="model.gguf")
    assert cfg.num_experts == MOE["experts"] and cfg.num_experts_per_tok == MOE["used"] and cfg.norm_topk_prob, \
        "the loader's own reading, norm_topk_prob as llama.cpp"
    assert cfg.decoder_sparse_step == 1 and not cfg.mlp_only_layers, "every layer sparse, as llama.cpp"
    cfg.moe_intermediate_size = MOE["inter"]
    return cfg, {"moe_intermediate_size": MOE["inter"]}


def router_margin(model, cases):
    """The smallest gap, over every token and sparse layer of the cases' prompts, between the k-th
    and the (k+1)-th largest router logit: how far from a tie the expert choice is."""
    import torch
    gaps = []

    def hook(m, args, out):
        top = torch.topk(out[0], m.top_k + 1, dim=-1).values
        gaps.append(float((top[:, -2] - top[:, -1]).min()))
    hooks = [m.register_forward_hook(hook) for m in model.modules() if type(m).__name__.endswith("TopKRouter")]
    with torch.no_grad():
        for c in cases:
            model(torch.tensor([c["prompt"]]))
    for h in hooks:
        h.remove()
    return min(gaps)


def llama_permute(np, w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: q/k rows from Hugging Face's rotate-half order to
    ggml's interleaved pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_mixtral_gguf(np, gguf, torch, path):
    """gguf_mixtral_q8_0 (MIXTRAL_TYPES) from tests/fixtures/mixtral; returns the reference model:
    transformers' Mixtral from that checkpoint, window off, with every tensor the file quantizes
    replaced by gguf-py's dequantization of it (rows are quantized independently, so the q/k
    permutation commutes with the round trip)."""
    import transformers
    src = mf.OUT / "mixtral"
    model = transformers.AutoModelForCausalLM.from_pretrained(str(src), dtype=torch.float32, sliding_window=None,
                                                              attn_implementation="eager").eval()
    cfg = model.config
    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    head_dim = cfg.hidden_size // heads
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]) if getattr(cfg, "rope_parameters", None)
                         else float(cfg.rope_theta))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    w.add_bos_token_id(cfg.bos_token_id)
    w.add_eos_token_id(cfg.eos_token_id)
    w.add_expert_count(cfg.num_local_experts)
    w.add_expert_used_count(cfg.num_experts_per_tok)

    def put(gguf_name, key, param, stored=None):
        """param's tensor quantized as the file stores it (after `stored`, e.g. the q/k permutation,
        which commutes with the row-wise round trip), and param set to its round trip."""
        t = gguf.GGMLQuantizationType[MIXTRAL_TYPES[key]]
        x = param.detach().numpy().astype(np.float32)
        x2 = x.reshape(-1, x.shape[-1])
        q = gguf.quants.quantize(stored(x2) if stored else x2, t)
        w.add_tensor(gguf_name, q.reshape(*x.shape[:-1], -1), raw_dtype=t)
        param.data = torch.from_numpy(gguf.quants.dequantize(gguf.quants.quantize(x2, t), t).reshape(x.shape).copy())

    def f32(gguf_name, param):
        w.add_tensor(gguf_name, param.detach().numpy().astype(np.float32))

    put("token_embd.weight", "token_embd", model.model.embed_tokens.weight)
    for l, layer in enumerate(model.model.layers):
        p = f"blk.{l}."
        key = lambda part: p + part if p + part in MIXTRAL_TYPES else part  # noqa: E731
        attn, moe = layer.self_attn, layer.mlp
        f32(p + "attn_norm.weight", layer.input_layernorm.weight)
        put(p + "attn_q.weight", key("attn_q"), attn.q_proj.weight, lambda x: llama_permute(np, x, heads))
        put(p + "attn_k.weight", key("attn_k"), attn.k_proj.weight, lambda x: llama_permute(np, x, kv_heads))
        put(p + "attn_v.weight", key("attn_v"), attn.v_proj.weight)
        put(p + "attn_output.weight", key("attn_output"), attn.o_proj.weight)
        f32(p + "ffn_norm.weight", layer.post_attention_layernorm.weight)
        f32(p + "ffn_gate_inp.weight", moe.gate.weight)
        inter = cfg.intermediate_size
        gate_up = moe.experts.gate_up_proj  # [E, 2I, d]: each expert's gate rows, then its up rows
        gate = torch.nn.Parameter(gate_up.data[:, :inter].clone())
        up = torch.nn.Parameter(gate_up.data[:, inter:].clone())
        put(p + "ffn_gate_exps.weight", key("ffn_gate_exps"), gate)
        put(p + "ffn_down_exps.weight", key("ffn_down_exps"), moe.experts.down_proj)
        put(p + "ffn_up_exps.weight", key("ffn_up_exps"), up)
        gate_up.data = torch.cat([gate.data, up.data], dim=1)
    f32("output_norm.weight", model.model.norm.weight)
    put("output.weight", "output", model.lm_head.weight)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model


def make_mixtral(name):
    import gguf
    import numpy as np
    import torch
    import transformers
    from importlib.metadata import version
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    model = write_mixtral_gguf(np, gguf, torch, out_dir / "model.gguf")
    cases = mf.run_cases(model, model.config.vocab_size, decode_logits=True)
    for c, (d, greedy) in zip(cases, act_q8_runs(model, cases, lambda n: not n.endswith(".gate"))):
        c["act_q8_max_diff"] = d
        c["act_q8_greedy"] = greedy
        print(f"{name}: prompt of {len(c['prompt'])}: Q8_0 activations move the logits by {d:.4f}")
    mf.write_expected(out_dir, name, f"transformers {transformers.__version__} MixtralForCausalLM from "
                                     f"tests/fixtures/mixtral (sliding_window None) with gguf-py {version('gguf')}'s "
                                     f"quantize/dequantize round trip of every tensor the file quantizes, torch "
                                     f"{torch.__version__}, fp32, eager attention", model.config.vocab_size, cases)


# gguf_gpt_oss's vocabulary: 128 ids (the checkpoint's vocab_size) of a byte-level BPE as
# o200k_harmony lays one out (tokenizer.ggml.pre gpt-4o): the printable ASCII bytes, space and
# newline in GPT-2's byte-to-unicode spelling, GPT_OSS_MERGES' tokens, then harmony's special
# tokens (control type). Text made only of these bytes tokenizes in both runtimes.
GPT_OSS_MERGES = ["Ġ t", "h e", "Ġt he", "i n", "e r", "a n", "o n", "Ġ a", "r e", "a s", "s t", "e n", "a l",
                  "Ġ s", "Ġ w", "o r", "Ġ c", "Ġ i", "i s", "Ġ h", "a t", "Ġ o", "u s"]
# gguf_gpt_oss's routers are drawn anew (std: router logits of about 16 on the RMS-normed inputs)
# until no token's k-th and (k+1)-th router logit, over every prompt and its greedy continuation
# and both layers, are within min_margin: the checkpoint's own routers have ties within 0.005,
# which int8 activations (brigade's or llama.cpp's MXFP4 kernels) can flip, moving logits by ~1.
GPT_OSS_ROUTER = dict(std=2.0, min_margin=0.3, attempts=80)
GPT_OSS_SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>", "<|start|>",
                    "<|end|>", "<|message|>", "<|call|>"]


def gpt_oss_vocab():
    tokens = [chr(c) for c in range(ord("!"), ord("~") + 1)] + ["Ġ", "Ċ"]
    tokens += [m.replace(" ", "") for m in GPT_OSS_MERGES]
    tokens += GPT_OSS_SPECIALS
    types = [1] * (len(tokens) - len(GPT_OSS_SPECIALS)) + [3] * len(GPT_OSS_SPECIALS)
    assert len(tokens) == 128 and len(set(tokens)) == len(tokens)
    return tokens, types


def add_toy_bpe_vocab(w, pre):
    """gpt_oss_vocab as tokenizer.ggml.* (model gpt2, the given pre-tokenizer, GPT_OSS_MERGES)."""
    tokens, types = gpt_oss_vocab()
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(GPT_OSS_MERGES)
    return tokens


def add_hf_sizes(w, cfg):
    """The sizes TextModel.set_gguf_parameters writes first from a config.json, in its order."""
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])


def gpt_oss_mxfp4_to_ggml(np, blocks, scales):
    """The Hub's MXFP4 (blocks u8 [..., nb, 16]: element 2k in byte k's low nibble, 2k + 1 in its
    high one; scales u8 [..., nb]) as ggml's block_mxfp4 rows [..., nb * 17] (the E8M0 byte, then
    qs[j] = element j | element j + 16 << 4): what GptOssModel.repack_mxfp4 writes."""
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)
    qs = (codes[..., :16] | (codes[..., 16:] << 4)).astype(np.uint8)
    out = np.concatenate([scales[..., None].astype(np.uint8), qs], axis=-1)
    return out.reshape(*blocks.shape[:-2], -1)


def write_gpt_oss_gguf(np, gguf, path, routers):
    """gguf_gpt_oss from tests/fixtures/gpt_oss_mxfp4, keys and tensors in the order of llama.cpp's
    converter (conversion/gpt_oss.py GptOssModel, --outtype f32): the MXFP4 experts repacked
    bit for bit and split out of gate_up_proj (gate rows 2j, up rows 2j + 1), biases alike, the
    sinks as attn_sinks.weight, the router as ffn_gate_inp; every other tensor F32. routers[l]:
    layer l's router (weight [E, hidden], bias [E]) in place of the checkpoint's (GPT_OSS_ROUTER)."""
    from safetensors.numpy import load_file
    src = mf.OUT / "gpt_oss_mxfp4"
    cfg = json.loads((src / "config.json").read_text())
    t = load_file(str(src / "model.safetensors"))
    rope = cfg["rope_parameters"]
    w = gguf.GGUFWriter(str(path), "gpt-oss")
    add_hf_sizes(w, cfg)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rope["factor"])
    w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    w.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
    w.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])
    w.add_rope_freq_base(rope["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_expert_count(cfg["num_local_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_sliding_window(cfg["sliding_window"])
    w.add_expert_feed_forward_length(cfg["intermediate_size"])
    tokens = add_toy_bpe_vocab(w, "gpt-4o")
    w.add_bos_token_id(tokens.index("<|startoftext|>"))
    w.add_eos_token_id(tokens.index("<|return|>"))
    w.add_pad_token_id(tokens.index("<|endoftext|>"))
    w.add_chat_template((mf.OUT / "chat_templates" / "templates" / "gpt-oss.jinja").read_text())

    def f32(name, x):
        w.add_tensor(name, np.ascontiguousarray(x, dtype=np.float32))

    def mxfp4(name, key, rows):  # rows: which of the stored rows (gate ::2, up 1::2, down all)
        q = gpt_oss_mxfp4_to_ggml(np, t[key + "_blocks"][:, rows], t[key + "_scales"][:, rows])
        w.add_tensor(name, np.ascontiguousarray(q), raw_dtype=gguf.GGMLQuantizationType.MXFP4)

    f32("token_embd.weight", t["model.embed_tokens.weight"])
    for l in range(cfg["num_hidden_layers"]):
        p, h = f"blk.{l}.", f"model.layers.{l}."
        f32(p + "attn_norm.weight", t[h + "input_layernorm.weight"])
        for part, proj in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj"), ("attn_output", "o_proj")):
            f32(p + part + ".weight", t[h + f"self_attn.{proj}.weight"])
            f32(p + part + ".bias", t[h + f"self_attn.{proj}.bias"])
        f32(p + "attn_sinks.weight", t[h + "self_attn.sinks"])
        f32(p + "post_attention_norm.weight", t[h + "post_attention_layernorm.weight"])
        f32(p + "ffn_gate_inp.weight", routers[l][0])
        f32(p + "ffn_gate_inp.bias", routers[l][1])
        gate_up = h + "mlp.experts.gate_up_proj"
        mxfp4(p + "ffn_gate_exps.weight", gate_up, slice(0, None, 2))
        mxfp4(p + "ffn_up_exps.weight", gate_up, slice(1, None, 2))
        mxfp4(p + "ffn_down_exps.weight", h + "mlp.experts.down_proj", slice(None))
        f32(p + "ffn_gate_exps.bias", t[gate_up + "_bias"][:, 0::2])
        f32(p + "ffn_up_exps.bias", t[gate_up + "_bias"][:, 1::2])
        f32(p + "ffn_down_exps.bias", t[h + "mlp.experts.down_proj_bias"])
    f32("output_norm.weight", t["model.norm.weight"])
    f32("output.weight", t["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gpt_oss_reference(torch, transformers, truncate=False):
    """transformers' GptOss from tests/fixtures/gpt_oss_mxfp4 as llama.cpp reads gguf_gpt_oss:
    the SwiGLU clamp at 7 (LLM_FFN_SWIGLU_OAI_MOE), the routers the file holds; YaRN unrounded
    (the Hub's truncate: false), or rounded as llama.cpp always rounds it (truncate=True: the
    --llamacpp check)."""
    import gguf
    import numpy as np
    src = mf.OUT / "gpt_oss_mxfp4"
    cfg = transformers.AutoConfig.from_pretrained(str(src))
    cfg.swiglu_limit = 7.0
    cfg.rope_parameters = dict(cfg.rope_parameters, truncate=truncate)
    model = transformers.GptOssForCausalLM.from_pretrained(str(src), config=cfg, dtype=torch.float32,
                                                           attn_implementation="eager").eval()
    stored = {t.name: np.array(t.data) for t in gguf.GGUFReader(str(mf.OUT / "gguf_gpt_oss" / "model.gguf")).tensors}
    for l, layer in enumerate(model.model.layers):
        layer.mlp.router.weight.data = torch.from_numpy(stored[f"blk.{l}.ffn_gate_inp.weight"].copy())
        layer.mlp.router.bias.data = torch.from_numpy(stored[f"blk.{l}.ffn_gate_inp.bias"].copy())
    return model


def make_gpt_oss(name):
    import gguf
    import numpy as np
    import torch
    import transformers
    from importlib.metadata import version
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "model.gguf"
    cfg = json.loads((mf.OUT / "gpt_oss_mxfp4" / "config.json").read_text())
    e, hidden = cfg["num_local_experts"], cfg["hidden_size"]
    rng = np.random.default_rng(NAMES.index(name) + 7000)
    for attempt in range(GPT_OSS_ROUTER["attempts"]):
        routers = [((GPT_OSS_ROUTER["std"] * rng.standard_normal((e, hidden))).astype(np.float32),
                    (0.1 * rng.standard_normal(e)).astype(np.float32)) for _ in range(cfg["num_hidden_layers"])]
        write_gpt_oss_gguf(np, gguf, path, routers)
        model = gpt_oss_reference(torch, transformers)
        margin = router_margin(model, [{"prompt": p + generate_greedy(model, p)} for p in mf.prompts_for(cfg["vocab_size"])])
        print(f"{name}: routers #{attempt}: smallest router margin (k-th vs (k+1)-th logit) {margin:.3f}")
        if margin >= GPT_OSS_ROUTER["min_margin"]:
            break
    else:
        sys.exit(f"{name}: no routers with margins >= {GPT_OSS_ROUTER['min_margin']}")
    # The file's experts, dequantized by gguf-py, are the reference's weights exactly (the repack
    # loses nothing); its float tensors are the checkpoint's.
    reader = gguf.GGUFReader(str(path))
    sd = model.state_dict()
    for rt in reader.tensors:
        if rt.tensor_type != gguf.GGMLQuantizationType.MXFP4:
            continue
        l, part = rt.name.split(".")[1], rt.name.split(".")[2]
        got = gguf.quants.dequantize(np.array(rt.data), rt.tensor_type)  # [E, rows, cols]
        ref = sd[f"model.layers.{l}.mlp.experts." + ("down_proj" if part == "ffn_down_exps" else "gate_up_proj")]
        ref = ref.to(torch.float32).numpy().transpose(0, 2, 1)  # transformers keeps [E, in, out]
        want = {"ffn_gate_exps": ref[:, 0::2], "ffn_up_exps": ref[:, 1::2], "ffn_down_exps": ref}[part]
        assert np.array_equal(got.reshape(want.shape), want), rt.name
    cases = mf.run_cases(model, model.config.vocab_size, decode_logits=True)
    for c, (d, greedy) in zip(cases, mf.gpt_oss_act_q8_runs(model, cases)):
        c["act_q8_max_diff"], c["act_q8_greedy"] = d, greedy
        print(f"{name}: prompt of {len(c['prompt'])}: Q8_0 expert inputs move the logits by {d:.4f}")
    mf.write_expected(out_dir, name, f"transformers {transformers.__version__} GptOssForCausalLM from "
                                     f"tests/fixtures/gpt_oss_mxfp4 with swiglu_limit 7.0 (llama.cpp's fixed clamp), "
                                     f"rope truncate false, torch {torch.__version__}, fp32, eager attention; the file "
                                     f"written with gguf-py {version('gguf')}", model.config.vocab_size, cases)


def make_qwen2moe(name):
    """gguf_qwen2moe from tests/fixtures/qwen2_moe, keys and tensors as llama.cpp's converter
    (Qwen2MoeModel, --outtype f32) writes them: q/k/v biases, the router ffn_gate_inp, the experts
    stacked (ffn_gate_exps and ffn_up_exps [E, I, d], ffn_down_exps [E, d, I]), the shared expert as ffn_{gate,up,down}_shexp and its gate
    as the vector ffn_gate_inp_shexp [d]. Writes expected.json: the checkpoint's, unchanged."""
    import gguf
    import numpy as np
    from safetensors.numpy import load_file
    src, out_dir = mf.OUT / "qwen2_moe", mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((src / "config.json").read_text())
    t = load_file(str(src / "model.safetensors"))
    w = gguf.GGUFWriter(str(out_dir / "model.gguf"), "qwen2moe")
    add_hf_sizes(w, cfg)
    w.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_expert_count(cfg["num_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    tokens = add_toy_bpe_vocab(w, "qwen2")
    w.add_eos_token_id(tokens.index("<|endoftext|>"))

    def f32(gguf_name, x):
        w.add_tensor(gguf_name, np.ascontiguousarray(x, dtype=np.float32))

    f32("token_embd.weight", t["model.embed_tokens.weight"])
    for l in range(cfg["num_hidden_layers"]):
        p, h = f"blk.{l}.", f"model.layers.{l}."
        f32(p + "attn_norm.weight", t[h + "input_layernorm.weight"])
        for part, proj in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj")):
            f32(p + part + ".weight", t[h + f"self_attn.{proj}.weight"])
            f32(p + part + ".bias", t[h + f"self_attn.{proj}.bias"])
        f32(p + "attn_output.weight", t[h + "self_attn.o_proj.weight"])
        f32(p + "ffn_norm.weight", t[h + "post_attention_layernorm.weight"])
        f32(p + "ffn_gate_inp.weight", t[h + "mlp.gate.weight"])
        for part in ("gate", "up", "down"):  # save_pretrained's per-expert tensors, stacked
            f32(p + f"ffn_{part}_exps.weight",
                np.stack([t[h + f"mlp.experts.{e}.{part}_proj.weight"] for e in range(cfg["num_experts"])]))
        f32(p + "ffn_gate_inp_shexp.weight", t[h + "mlp.shared_expert_gate.weight"].reshape(-1))
        for part in ("gate", "up", "down"):
            f32(p + f"ffn_{part}_shexp.weight", t[h + f"mlp.shared_expert.{part}_proj.weight"])
    f32("output_norm.weight", t["model.norm.weight"])
    f32("output.weight", t["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    (out_dir / "expected.json").write_text((src / "expected.json").read_text())
    print(f"{name}: {(out_dir / 'model.gguf').stat().st_size / 1024:.0f} KiB")


def glm4moe_reference(torch, transformers):
    """transformers' Glm4Moe from tests/fixtures/glm4_moe as llama.cpp reads gguf_glm4moe: without
    expert groups (n_group 1, topk_group 1), which llama.cpp's glm4moe neither writes nor runs."""
    src = mf.OUT / "glm4_moe"
    cfg = transformers.AutoConfig.from_pretrained(str(src))
    cfg.n_group, cfg.topk_group = 1, 1
    return transformers.Glm4MoeForCausalLM.from_pretrained(str(src), config=cfg, dtype=torch.float32,
                                                           attn_implementation="eager").eval()


def make_glm4moe(name):
    """gguf_glm4moe from tests/fixtures/glm4_moe, keys and tensors as llama.cpp's converter
    (conversion/glm.py Glm4MoeModel, --outtype f32) writes them: block_count counting the MTP layer
    (nextn_predict_layers 1), rope.dimension_count head_dim * partial_rotary_factor, the experts'
    counts, shared count, leading dense blocks, sigmoid gating, weights scale and norm; q/k/v
    biases, attn_{q,k}_norm, post_attention_norm (the norm before the MLP), layer 0's dense MLP,
    then per sparse layer the router ffn_gate_inp, the selection bias exp_probs_b.bias, the
    experts stacked and the shared expert as ffn_*_shexp; the MTP layer blk.3 (GLM-4.5's MTP
    module, make_fixtures.py's new_mtp_module over the reference below: a sparse layer's tensors
    and nextn.{eh_proj,enorm,hnorm,shared_head_norm}; the converter's optional nextn.embed_tokens
    and shared_head_head copies left out, as a GLM-4.6 source has none). The toy vocabulary with
    pre-tokenizer glm4 (llama.cpp: no BOS, whole-word tokens before merges), eos, eot and eom as
    GLM's _set_vocab_glm sets them (here <|endoftext|>, <|end|>, <|call|>), and a bos with
    add_bos_token true that the glm4 pre-tokenizer drops. Writes expected.json: transformers on the
    checkpoint without expert groups (glm4moe_reference), every decode step's logits too; and
    mtp.json: the MTP module's teacher-forced logits and draft chains over that reference
    (make_fixtures.py mtp_case, SGLang's Glm4MoeModelNextN), in deepseek_v3_mtp's format."""
    from importlib.metadata import version
    import gguf
    import numpy as np
    import torch
    import transformers
    from safetensors.numpy import load_file
    src, out_dir = mf.OUT / "glm4_moe", mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((src / "config.json").read_text())
    t = load_file(str(src / "model.safetensors"))
    layers, mtp = cfg["num_hidden_layers"], 1
    model = glm4moe_reference(torch, transformers)
    module = mf.new_mtp_module(model, 2024)
    t.update({k: v.numpy() for k, v in mf.mtp_module_tensors(model, module).items()})
    w = gguf.GGUFWriter(str(out_dir / "model.gguf"), "glm4moe")
    add_hf_sizes(w, dict(cfg, num_hidden_layers=layers + mtp))
    w.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_rope_dimension_count(int(cfg["head_dim"] * cfg["rope_parameters"]["partial_rotary_factor"]))
    w.add_expert_count(cfg["n_routed_experts"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_expert_shared_count(cfg["n_shared_experts"])
    w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_expert_weights_scale(cfg["routed_scaling_factor"])
    w.add_expert_weights_norm(cfg["norm_topk_prob"])
    w.add_nextn_predict_layers(mtp)
    tokens = add_toy_bpe_vocab(w, "glm4")
    w.add_bos_token_id(tokens.index("<|startoftext|>"))
    w.add_add_bos_token(True)
    w.add_eos_token_id(tokens.index("<|endoftext|>"))
    w.add_eot_token_id(tokens.index("<|end|>"))
    w.add_eom_token_id(tokens.index("<|call|>"))

    def f32(gguf_name, x):
        w.add_tensor(gguf_name, np.ascontiguousarray(x, dtype=np.float32))

    def sparse_mlp(p, h, noise):
        f32(p + "ffn_gate_inp.weight", noise(t[h + "mlp.gate.weight"]))
        f32(p + "exp_probs_b.bias", noise(t[h + "mlp.gate.e_score_correction_bias"]))
        for part in ("gate", "up", "down"):  # save_pretrained's per-expert tensors, stacked
            f32(p + f"ffn_{part}_exps.weight", noise(
                np.stack([t[h + f"mlp.experts.{e}.{part}_proj.weight"] for e in range(cfg["n_routed_experts"])])))
        for part in ("gate", "up", "down"):
            f32(p + f"ffn_{part}_shexp.weight", noise(t[h + f"mlp.shared_experts.{part}_proj.weight"]))

    def layer(l, h, noise=lambda x: x):
        p = f"blk.{l}."
        f32(p + "attn_norm.weight", noise(t[h + "input_layernorm.weight"]))
        for part, proj in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj")):
            f32(p + part + ".weight", noise(t[h + f"self_attn.{proj}.weight"]))
            f32(p + part + ".bias", noise(t[h + f"self_attn.{proj}.bias"]))
        f32(p + "attn_output.weight", noise(t[h + "self_attn.o_proj.weight"]))
        f32(p + "attn_q_norm.weight", noise(t[h + "self_attn.q_norm.weight"]))
        f32(p + "attn_k_norm.weight", noise(t[h + "self_attn.k_norm.weight"]))
        f32(p + "post_attention_norm.weight", noise(t[h + "post_attention_layernorm.weight"]))
        if h + "mlp.gate.weight" in t:
            sparse_mlp(p, h, noise)
        else:
            for part in ("gate", "up", "down"):
                f32(p + f"ffn_{part}.weight", t[h + f"mlp.{part}_proj.weight"])

    f32("token_embd.weight", t["model.embed_tokens.weight"])
    for l in range(layers):
        layer(l, f"model.layers.{l}.")
    # The MTP layer: its decoder layer's tensors under the usual names, and its own.
    at = f"model.layers.{layers}."
    layer(layers, at)
    for own, hf in (("eh_proj", "eh_proj"), ("enorm", "enorm"), ("hnorm", "hnorm"), ("shared_head_norm", "shared_head.norm")):
        f32(f"blk.{layers}.nextn.{own}.weight", t[at + hf + ".weight"])
    f32("output_norm.weight", t["model.norm.weight"])
    f32("output.weight", t["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    cases = mf.run_cases(model, model.config.vocab_size, decode_logits=True)
    generator = (f"transformers {transformers.__version__} Glm4MoeForCausalLM from tests/fixtures/glm4_moe with "
                 f"n_group 1, topk_group 1 (llama.cpp's glm4moe has no expert groups), torch {torch.__version__}, "
                 f"fp32, eager attention; the file written with gguf-py {version('gguf')}")
    mf.write_expected(out_dir, name, generator, model.config.vocab_size, cases)
    with torch.no_grad():
        mtp_cases = [mf.mtp_case(model, module, p) for p in mf.prompts_for(model.config.vocab_size) if len(p) >= 2]
    top = {row.index(max(row)) for c in mtp_cases for row in c["mtp_logits"]}
    assert len(top) > 1, f"degenerate MTP: every position's argmax is {top}"
    doc = {"generator": generator + "; its MTP module (seed 2024) computed as SGLang's Glm4MoeModelNextN",
           "vocab_size": model.config.vocab_size, "n_draft": mf.N_DRAFT, "cases": mtp_cases}
    (out_dir / "mtp.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{name}: {(out_dir / 'model.gguf').stat().st_size / 1024:.0f} KiB")


def gpt_oss_truncated_logits():
    """--gpt-oss-truncated: per gguf_gpt_oss prompt, transformers' logits with YaRN rounded as
    llama.cpp rounds it, as JSON on stdout (the --llamacpp pass, which runs in llama.cpp's venv,
    asks for them)."""
    import torch
    import transformers
    model = gpt_oss_reference(torch, transformers, truncate=True)
    out = []
    with torch.no_grad():
        for c in json.loads((mf.OUT / "gguf_gpt_oss" / "expected.json").read_text())["cases"]:
            out.append(model(torch.tensor([c["prompt"]])).logits[0].tolist())
    print(json.dumps(out))


def make(name):
    import gguf
    import numpy as np
    import torch
    import transformers
    from importlib.metadata import version
    rng = np.random.default_rng(NAMES.index(name) + 7000)
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "model.gguf"
    extra, gemma = {}, name in GEMMA
    moe = layout(name)[0] == "qwen3moe" if not gemma else False
    for attempt in range(50 if moe else 1):
        if gemma:
            write_gemma_gguf(np, gguf, rng, name, path)
            extra["config"], overrides = gemma_reference_config(name, out_dir)
        else:
            write_gguf(np, gguf, rng, name, path)
        if moe:
            extra["config"], overrides = moe_reference_config(out_dir)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(out_dir), gguf_file="model.gguf", dtype=torch.float32, attn_implementation="eager", **extra).eval()
        if not moe:
            break
        # Expert choices far from ties on every prompt and greedy continuation, so that rounding
        # (of the reference's Q8_0 run, or of brigade's kernels) moves logits, not routes.
        margin = router_margin(model, [{"prompt": p + generate_greedy(model, p)} for p in mf.prompts_for(VOCAB)])
        print(f"{name}: weights #{attempt}: smallest router margin (k-th vs (k+1)-th logit) {margin:.3f}")
        if margin >= MOE["min_margin"]:
            break
        rng = np.random.default_rng(NAMES.index(name) + 7000 + 1000 * (attempt + 1))
    else:
        sys.exit(f"{name}: no weights with router margins >= {MOE['min_margin']}")
    cases = mf.run_cases(model, VOCAB, decode_logits=gemma or moe)
    for c, (d, greedy) in zip(cases, act_q8_runs(model, cases)):
        c["act_q8_max_diff"] = d
        c["act_q8_greedy"] = greedy
        scale = max(abs(v) for row in c["logits"] for v in row)
        print(f"{name}: prompt of {len(c['prompt'])}: max |logit| {scale:.3f}, Q8_0 activations move "
              f"them by {d:.4f} ({100 * d / scale:.2f}%)")
    settings = f", config set as llama.cpp reads the file: {json.dumps(overrides)}" if gemma or moe else ""
    mf.write_expected(out_dir, name, f"transformers {transformers.__version__} from_pretrained(gguf_file) "
                                     f"(gguf-py {version('gguf')} dequantization), torch {torch.__version__}, fp32, "
                                     f"eager attention{settings}", VOCAB, cases)


def ensure_extras(*modules):
    """pip-installs the PyPI packages of these modules into the running venv when missing."""
    import importlib.util
    import subprocess
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        subprocess.check_call([sys.executable, "-m", "pip", "install", *missing])


# The safetensors fixtures of make_fixtures.py that `weights: q8_0 / q4_0 / q4_1` is checked on.
WEIGHTS_FIXTURES = ["llama", "qwen2", "qwen3", "qwen3_moe", "mixtral"]


def quantize_experts(gguf, np, torch, model, t):
    """The routed experts of a MoE model (transformers 5 keeps each layer's stacked: gate_up_proj
    [E, 2I, d], down_proj [E, d, I]) quantized by gguf-py as brigade's `weights:` quantizes them:
    by rows of whole 32-blocks, so down_proj only when I is a multiple of 32 (else it stays
    float, and so do its inputs; qwen3_moe's I is 16). The router stays float."""
    for m in model.modules():
        if type(m).__name__ not in ("Qwen3MoeExperts", "MixtralExperts"):
            continue
        m.down_q8 = m.down_proj.shape[-1] % 32 == 0
        for p in (m.gate_up_proj, m.down_proj) if m.down_q8 else (m.gate_up_proj,):
            w = p.detach().numpy().astype(np.float32)
            p.data = torch.from_numpy(gguf.quants.dequantize(gguf.quants.quantize(w, t), t).copy())


def weights_option_bounds():
    """tests/fixtures/quantized_weights/bounds.json: for each of WEIGHTS_FIXTURES and q8_0, q4_0,
    q4_1, per prompt, how far transformers' logits move when the linear layers (not embedding, lm_head
    or MoE routers) and the MoE experts (quantize_experts) are quantized by gguf-py and
    dequantized, and their inputs rounded to Q8_0, as brigade's `weights: q8_0` computes on the
    CPU (the bound of its test), and that model's greedy tokens (<type>_greedy)."""
    import gguf
    import numpy as np
    import torch
    import transformers
    bounds = {}
    for name in WEIGHTS_FIXTURES:
        cases = json.loads((mf.OUT / name / "expected.json").read_text())["cases"]
        for qtype in ("Q8_0", "Q4_0", "Q4_1", "MXFP4"):
            model = transformers.AutoModelForCausalLM.from_pretrained(
                str(mf.OUT / name), dtype=torch.float32, attn_implementation="eager").eval()
            t = gguf.GGMLQuantizationType[qtype]
            linear = lambda mod_name: not mod_name.endswith("lm_head") and not mod_name.endswith(".gate")  # noqa: E731
            for mod_name, m in model.named_modules():
                if isinstance(m, torch.nn.Linear) and linear(mod_name):
                    w = m.weight.detach().numpy().astype(np.float32)
                    m.weight.data = torch.from_numpy(gguf.quants.dequantize(gguf.quants.quantize(w, t), t).copy())
            quantize_experts(gguf, np, torch, model, t)
            runs = act_q8_runs(model, cases, linear)
            bounds.setdefault(name, {})[qtype.lower()] = [d for d, _ in runs]
            bounds[name][qtype.lower() + "_greedy"] = [g for _, g in runs]
            print(f"weights {qtype.lower()} on {name}: logits move by {', '.join(f'{d:.4f}' for d, _ in runs)}")
    out = mf.OUT / "quantized_weights"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bounds.json").write_text(json.dumps({
        "generator": f"transformers {transformers.__version__}, gguf-py quantize/dequantize, Q8_0 activations",
        "bounds": bounds}, indent=1) + "\n")


def write_bench(path, name):
    """--bench PATH [NAME]: the fixture layout NAME (default gguf_llama_q4_k_m) at the default
    synthetic model's size (hidden 768, 12 layers, 12 heads of 64, 4 KV heads, intermediate 2048,
    vocab 32000: ~110M parameters), for docs/perf.md's decode measurements; no reference.
    gguf_qwen3moe_q4_k_m: 8 experts of 768 (Qwen3-30B-A3B's expert width), top 2, in place of the
    dense MLP: ~240M parameters, a quarter of the experts' active per token."""
    import gguf
    import numpy as np
    if layout(name)[0] == "qwen3moe":
        MOE.update(experts=8, inter=768)
    write_gguf(np, gguf, np.random.default_rng(1), name, Path(path), (768, 2048, 12, 32000, (12, 4, 64)))
    print(f"{path}: {Path(path).stat().st_size / 2**20:.1f} MiB")


# Strings llama.cpp tokenizes on the Gemma fixtures' vocabulary (with add_bos): a chat prompt as the
# gemma-2 template renders it (its own <bos>), and plain text.
TOKENIZE = [("<bos><start_of_turn>user\nHello there!<end_of_turn>\n<start_of_turn>model\n", False),
            ("Hello there! He is the user.", True), ("  two  spaces\nand a new line", True),
            ("<start_of_turn>model\nHi<end_of_turn>", True)]


# Strings llama.cpp tokenizes on gguf_gpt_oss's vocabulary (no BOS: the gpt-4o pre-tokenizer adds
# none): a harmony prompt and reply (special tokens parsed), and text that exercises o200k's
# pattern (case changes inside words, contractions in either case, digit runs of 1-3, '/' after
# punctuation, runs of newlines and spaces).
GPT_OSS_TOKENIZE = [("<|start|>user<|message|>Hello there!<|end|><|start|>assistant", False),
                    ("<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>"
                     "Hi<|return|>", False),
                    ("HelloWorld isn't WE'LL camelCaseABC 1234567 a/b.//\n\n  x\n y", False),
                    ("the other is as it was", False)]

# gguf_glm4moe's: the same, and a prompt asking for BOS, which the glm4 pre-tokenizer drops.
GLM4_TOKENIZE = GPT_OSS_TOKENIZE + [("the other is as it was", True)]


def eog_ids(llama_cpp, m):
    """The ids llama.cpp ends generation at (llama_vocab_is_eog) in m's vocabulary."""
    vocab = llama_cpp.llama_model_get_vocab(m.model)
    return [i for i in range(llama_cpp.llama_vocab_n_tokens(vocab)) if llama_cpp.llama_vocab_is_eog(vocab, i)]


# Vocabularies (gpt_oss_vocab's pieces, then these control tokens) whose end-of-generation tokens
# llama.cpp decides by the keys and by the tokens' texts (--eog): (name, specials, {key: special}).
# a: ChatML's <|im_end|> named eos, every other listed end besides, Qwen's FIM tokens, no eot or
#    eom key (found by text), <|end|> without harmony's <|return|> (so it stays an end), tokens
#    that look special but end nothing; b: harmony's ends with <|end|> named eot (dropped:
#    <|return|> and <|call|> exist), </s> beside <|tool_response> (dropped); c: solar-open's
#    <|calls|> and <|flush|> (dropping <|end|>), eom and fim_pad named by key, Kimi's [EOT] and [EOS].
EOG_VOCABS = [
    ("a", ["<|im_start|>", "<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "</s>", "<|eom_id|>", "<EOT>",
           "[EOS]", "<|end_of_text|>", "<eos>", "<turn|>", "<|fim_prefix|>", "<|fim_pad|>", "<|repo_name|>",
           "<|file_sep|>", "<｜end▁of▁sentence｜>", "[e~[", "<end_of_utterance>", "<|endoftext|>", "<|user|>"],
     {"eos": "<|im_end|>"}),
    ("b", ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|call|>", "<|end|>", "<|start|>", "</s>",
           "<|tool_response>", "<|observation|>"],
     {"eos": "<|return|>", "eot": "<|end|>"}),
    ("c", ["<|calls|>", "<|flush|>", "<|end|>", "[EOT]", "[EOS]", "<|observation|>", "<|user|>", "<PAD>", "_<EOT>"],
     {"eos": "[EOS]", "eom": "<|observation|>", "fim_pad": "<|user|>"}),
]


def eog_pass():
    """--eog: tests/fixtures/gguf_vocab_eog/{a,b,c}.gguf (EOG_VOCABS: vocabulary-only llama files,
    model gpt2) and llamacpp.json: per file, the ids llama.cpp's vocabulary ends generation at
    (run in the llama-cpp-python venv, as --llamacpp)."""
    mf.ensure_llamacpp_venv(__file__, ["--eog"])
    import gguf
    import llama_cpp
    out_dir = mf.OUT / "gguf_vocab_eog"
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = {"generator": f"llama-cpp-python {llama_cpp.__version__} (vocab_only), files by gguf-py", "files": {}}
    for name, specials, keys in EOG_VOCABS:
        base, _ = gpt_oss_vocab()
        tokens = [t for t in base if t not in GPT_OSS_SPECIALS] + specials
        types = [1] * (len(tokens) - len(specials)) + [3] * len(specials)
        path = out_dir / f"{name}.gguf"
        w = gguf.GGUFWriter(str(path), "llama")
        add_hf_sizes(w, dict(num_hidden_layers=1, max_position_embeddings=64, hidden_size=64, intermediate_size=128,
                             num_attention_heads=4, num_key_value_heads=4))
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("gpt-2")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(GPT_OSS_MERGES)
        for key, text in keys.items():
            w.add_uint32(f"tokenizer.ggml.{key}_token_id", tokens.index(text))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        m = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
        doc["files"][name] = {"eog": eog_ids(llama_cpp, m), "texts": [tokens[i] for i in eog_ids(llama_cpp, m)]}
        print(f"gguf_vocab_eog/{name}.gguf: llama.cpp ends at {doc['files'][name]['texts']}")
    (out_dir / "llamacpp.json").write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")


def llamacpp_mtp(llama_cpp, path, mtp_cases):
    """llama.cpp's own MTP graph (llama_model_glm4_moe::graph_mtp, a context of type MTP beside the
    target's, driven as common/speculative.cpp's draft-mtp drives it) over each mtp.json case:
    the target over the whole sequence gives every row's final-norm hidden state
    (llama_get_embeddings_nextn); the MTP context then reads token t_{i+1} with hidden state h_i at
    position i for every i, and chains N_DRAFT drafts from the last row, each fed the previous
    draft and the module's own output there (llama_get_embeddings_nextn_ith). Flash attention off
    and an F32 KV cache, as the logits pass. Returns per case the chain's drafts and how far the
    logits are from mtp.json's. The nextn entry points are C++ symbols of libllama (llama-ext.h,
    not bound by llama-cpp-python), called by their mangled names."""
    import ctypes
    import numpy as np
    L = llama_cpp
    lib = L.llama_cpp._lib
    def fn(name, args, res):
        f = getattr(lib, name)
        f.argtypes, f.restype = args, res
        return f
    set_nextn = fn("_Z26llama_set_embeddings_nextnP13llama_contextbb", [ctypes.c_void_p, ctypes.c_bool, ctypes.c_bool], None)
    get_nextn = fn("_Z26llama_get_embeddings_nextnP13llama_context", [ctypes.c_void_p], ctypes.POINTER(ctypes.c_float))
    get_nextn_ith = fn("_Z30llama_get_embeddings_nextn_ithP13llama_contexti", [ctypes.c_void_p, ctypes.c_int32],
                       ctypes.POINTER(ctypes.c_float))
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    mp.load_mtp = True
    model = L.llama_model_load_from_file(str(path).encode(), mp)
    assert model and L.llama_model_n_layer_nextn(model) == 1
    n_embd, n_vocab = L.llama_model_n_embd(model), L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))

    def context(other=None):
        cp = L.llama_context_default_params()
        cp.n_ctx = cp.n_batch = cp.n_ubatch = 128
        cp.n_threads = cp.n_threads_batch = 2
        cp.type_k = cp.type_v = 0
        cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED
        if other is not None:
            cp.ctx_type, cp.ctx_other = L.LLAMA_CONTEXT_TYPE_MTP, other
        ctx = L.llama_init_from_model(model, cp)
        assert ctx
        set_nextn(ctx, True, other is not None)
        return ctx

    def logits(ctx, i):
        return np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, i), shape=(n_vocab,)).copy()

    out = []
    for case in mtp_cases:
        toks, n = case["tokens"], len(case["tokens"])
        tgt = context()
        ids = (L.llama_token * n)(*toks)
        assert L.llama_decode(tgt, L.llama_batch_get_one(ids, n)) == 0
        hidden = np.ctypeslib.as_array(get_nextn(tgt), shape=(n * n_embd,)).reshape(n, n_embd).copy()
        dft = context(tgt)
        batch = L.llama_batch_ext_init(dft)
        rows = []  # alive until each llama_process has read them

        def add(token, pos, h):
            idx = L.llama_batch_ext_add_token(batch, 0, token)
            rows.append(np.ascontiguousarray(h, dtype=np.float32))
            embd = L.llama_embd(rows[-1].ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 1, n_embd)
            assert idx >= 0 and L.llama_batch_ext_set_pos(batch, idx, (L.llama_pos * 1)(pos))
            assert L.llama_batch_ext_set_embd_token(batch, idx, embd) and L.llama_batch_ext_set_output_logits(batch, idx, True)

        for i in range(n - 1):
            add(toks[i + 1], i, hidden[i])
        assert L.llama_process(dft, L.LLAMA_PROCESS_TYPE_DECODE, batch) == 0
        teacher = np.array([logits(dft, i) for i in range(n - 1)])
        chain, last = [teacher[-1]], n - 2
        for k in range(1, len(case["chain_drafts"])):
            h = np.ctypeslib.as_array(get_nextn_ith(dft, last), shape=(n_embd,)).copy()
            L.llama_batch_ext_clear(batch)
            add(int(np.argmax(chain[-1])), n - 2 + k, h)
            assert L.llama_process(dft, L.LLAMA_PROCESS_TYPE_DECODE, batch) == 0
            chain.append(logits(dft, 0))
            last = 0
        out.append({"chain_drafts": [int(np.argmax(row)) for row in chain],
                    "mtp_logits_max_diff": float(np.abs(teacher - np.array(case["mtp_logits"])).max()),
                    "chain_logits_max_diff": float(np.abs(np.array(chain) - np.array(case["chain_logits"])).max())})
        L.llama_batch_ext_free(batch)
        L.llama_free(dft)
        L.llama_free(tgt)
    L.llama_model_free(model)
    return out


def llamacpp_pass(names):
    """--llamacpp [NAME...]: tests/fixtures/<gemma or gpt-oss fixture>/llamacpp.json from llama.cpp
    itself (llama-cpp-python, in the venv make_grammar_fixtures.py uses: LLAMACPP_VENV, default
    .brigade/llamacpp-venv): its tokenization of TOKENIZE / GPT_OSS_TOKENIZE (special tokens
    parsed) and, per prompt, how far its logits (F32 KV cache) are from transformers' in
    expected.json, which must stay within its own quantized activations' error (about
    act_q8_max_diff): llama.cpp reads the file as the settings transformers was given say. For
    gguf_gpt_oss the bound holds against transformers with YaRN's range rounded as llama.cpp rounds
    it (gpt_oss_truncated_logits, run in make_fixtures.py's venv); the distance to expected.json
    (unrounded, as the Hub's config says) is recorded beside it, and so are llama.cpp's logits.
    gguf_glm4moe's also holds llama.cpp's MTP drafts over mtp.json's cases (llamacpp_mtp), whose
    logits must be within 1e-4 of mtp.json's."""
    import subprocess
    mf.ensure_llamacpp_venv(__file__, ["--llamacpp", *names])
    import llama_cpp
    import numpy as np
    for name in names or list(GEMMA) + ["gguf_gpt_oss", "gguf_qwen2moe", "gguf_glm4moe"]:
        out_dir = mf.OUT / name
        gpt_oss = name == "gguf_gpt_oss"
        m = llama_cpp.Llama(str(out_dir / "model.gguf"), n_ctx=64, logits_all=True, verbose=False, n_threads=2,
                            type_k=0, type_v=0)
        doc = {"generator": f"llama-cpp-python {llama_cpp.__version__}", "tokenize": [], "logits_max_diff": [],
               "eog": eog_ids(llama_cpp, m)}
        texts = {"gguf_gpt_oss": GPT_OSS_TOKENIZE, "gguf_qwen2moe": GPT_OSS_TOKENIZE, "gguf_glm4moe": GLM4_TOKENIZE}
        for text, add_bos in texts.get(name, TOKENIZE):
            doc["tokenize"].append({"text": text, "add_bos": add_bos,
                                    "ids": m.tokenize(text.encode(), add_bos=add_bos, special=True)})
        cases = json.loads((out_dir / "expected.json").read_text())["cases"]
        rounded = None
        if gpt_oss:
            python = mf.VENV / "bin" / "python"
            rounded = json.loads(subprocess.run([str(python), __file__, "--gpt-oss-truncated"], check=True,
                                                capture_output=True, text=True).stdout)
            doc["unrounded_yarn_logits_max_diff"] = []
        for i, c in enumerate(cases):
            m.reset()
            m.eval(c["prompt"])
            got = np.array(m.scores[:len(c["prompt"])])
            ref = np.array(rounded[i] if gpt_oss else c["logits"])
            d = float(np.abs(got - ref).max())
            bound = 1.5 * c["act_q8_max_diff"] + 1e-3 if "act_q8_max_diff" in c else 1e-3  # F32 files: float noise
            assert d <= bound, f"{name}: llama.cpp differs from transformers by {d}"
            doc["logits_max_diff"].append(d)
            print(f"{name}: prompt of {len(c['prompt'])}: llama.cpp's logits within {d:.4f} of transformers' "
                  f"(bound {bound:.4f})")
            if gpt_oss:  # llama.cpp's own logits too: brigade run with llama.cpp's rounding is held to them
                doc.setdefault("logits", []).append([[float(f"{v:.7g}") for v in row] for row in got.tolist()])
                u = float(np.abs(got - np.array(c["logits"])).max())
                doc["unrounded_yarn_logits_max_diff"].append(u)
                print(f"{name}: prompt of {len(c['prompt'])}: {u:.4f} from transformers' with YaRN unrounded")
        if (out_dir / "mtp.json").exists():
            doc["mtp"] = llamacpp_mtp(llama_cpp, out_dir / "model.gguf",
                                      json.loads((out_dir / "mtp.json").read_text())["cases"])
            for c in doc["mtp"]:
                d = max(c["mtp_logits_max_diff"], c["chain_logits_max_diff"])
                assert d <= 1e-4, f"{name}: llama.cpp's MTP differs from mtp.json by {d}"
                print(f"{name}: llama.cpp's MTP within {d:.2g} of mtp.json, drafts {c['chain_drafts']}")
        (out_dir / "llamacpp.json").write_text(json.dumps(doc) + "\n")


def main():
    if sys.argv[1:2] == ["--llamacpp"]:
        llamacpp_pass(sys.argv[2:])
        return
    if sys.argv[1:2] == ["--eog"]:
        eog_pass()
        return
    mf.ensure_venv(__file__)
    ensure_extras("gguf", "accelerate")
    if sys.argv[1:2] == ["--gpt-oss-truncated"]:
        gpt_oss_truncated_logits()
        return
    if sys.argv[1:2] == ["--bench"]:
        write_bench(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "gguf_llama_q4_k_m")
        return
    names = sys.argv[1:] or NAMES + ["quantized_weights"]
    unknown = set(names) - set(NAMES) - {"quantized_weights"}
    if unknown:
        sys.exit(f"unknown fixtures {sorted(unknown)}; known: {', '.join(NAMES)}, quantized_weights")
    for name in names:
        if name == "quantized_weights":
            weights_option_bounds()
        elif name == "gguf_mixtral_q8_0":
            make_mixtral(name)
        elif name == "gguf_gpt_oss":
            make_gpt_oss(name)
        elif name == "gguf_qwen2moe":
            make_qwen2moe(name)
        elif name == "gguf_glm4moe":
            make_glm4moe(name)
        else:
            make(name)


if __name__ == "__main__":
    main()
