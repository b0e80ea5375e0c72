#!/usr/bin/env python3
"""brigade against llama.cpp on the same GGUF files, on this machine, in one run.

For each weight type it writes a GGUF file of TinyLlama-1.1B's shape (llama architecture, dim 2048,
22 layers, 32 heads / 4 KV heads, FFN 5632, Llama 2's 32000-token SentencePiece vocabulary copied
from ../shared/testdata/tokenizers/ggml-vocab-llama-spm.gguf) with random weights in that type, then
measures, with the same number of threads:
  - llama.cpp (through llama-cpp-python, built from source with GGML_NATIVE): a 16-token prompt,
    then 64 decode steps of one token each; and a 512-token prompt (prefill, n_batch 512;
    --prefill-tokens N: N tokens, still 512 per batch);
  - brigade: build/bench/bench_engine --model FILE (batch-1 decode after a 16-token prompt, and the
    512-token prefill, --prefill-len N), which also reports each against the machine's measured
    ceilings.
It prints decode and prefill tokens/s side by side and the ratio brigade / llama.cpp.

Type gpt_oss_mxfp4 is a gpt-oss-20b layer instead (gpt-oss architecture: hidden 2880, 64 heads of 64
over 8 KV heads with sinks, biases, 128-token windows on alternate layers, YaRN; 32 experts of 2880,
top 4, MXFP4 with biases as llama.cpp's converter writes them; attention, router and tables Q8_0 /
F32) with --layers of them (default 2 for it: 0.9 GB) and the same 32000-token vocabulary: a decode
step reads 4 of 32 experts, so it measures the MoE path, not the dense one.

Type glm4moe_q4_k_m is GLM-4.5-Air's layers (glm4moe architecture: hidden 4096, 96 heads of 128 over
8 KV heads with q/k/v biases, half of each head rotated; layer 0 dense (FFN 10944), then 128
experts of 1408, top 8 by sigmoid with the selection bias, renormalised, and one shared expert;
Q4_K_M's mix: Q4_K with Q6_K attn_v, the down projections (1408 and 10944 columns, not whole Q6_K
blocks) in llama-quantize's fallback Q8_0, routers F32) with --layers of them
(default 2: one dense, one sparse, 1.6 GB): a decode step reads 8 of 128 experts plus the shared one.

Usage: python3 bench/compare/vs_llamacpp.py [--types q4_0,q8_0,q4_k_m,q5_k_m,gpt_oss_mxfp4,glm4moe_q4_k_m] [--threads 2] [--layers 22]
                                           [--prefill-tokens 2048]
The first run creates .brigade/llamacpp-venv (git-ignored) with llama-cpp-python (compiles
llama.cpp: ~10 minutes on 2 cores), gguf and numpy, then re-runs itself inside it. The model files go
to .brigade/bench-gguf/ (about 0.6-1.2 GB each). Build brigade first (scripts/build.sh).
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".brigade" / "llamacpp-venv"
OUT = ROOT / ".brigade" / "bench-gguf"
VOCAB = ROOT.parent / "shared" / "testdata" / "tokenizers" / "ggml-vocab-llama-spm.gguf"
PACKAGES = ["llama-cpp-python", "gguf", "numpy"]


def ensure_venv():
    python = VENV / "bin" / "python"
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    if not python.exists():
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
    probe = subprocess.run([str(python), "-c", "import llama_cpp, gguf, numpy"], capture_output=True)
    if probe.returncode != 0:
        env = dict(os.environ, CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF")
        subprocess.check_call([str(python), "-m", "pip", "install", "-q", *PACKAGES], env=env)
    os.execv(str(python), [str(python), __file__, *sys.argv[1:]])


SHAPE = dict(dim=2048, ffn=5632, heads=32, kv_heads=4, vocab=32000)


def random_blocks(np, rng, qtype, rows, cols):
    """rows x cols elements of `qtype` as raw blocks: random codes, small positive f16 scales."""
    import gguf
    block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    nblocks = rows * cols // block
    data = rng.integers(0, 256, size=(nblocks, nbytes), dtype=np.uint8)
    scale = np.frombuffer(np.float16(0.004).tobytes(), dtype=np.uint8)
    T = gguf.GGMLQuantizationType
    if qtype in (T.Q4_0, T.Q8_0):
        data[:, 0:2] = scale
    elif qtype in (T.Q4_K, T.Q5_K):
        data[:, 0:2] = scale
        data[:, 2:4] = scale
    elif qtype == T.Q6_K:
        data[:, 208:210] = np.frombuffer(np.float16(0.0003).tobytes(), dtype=np.uint8)
    else:
        raise ValueError(qtype)
    return data.reshape(rows, cols // block * nbytes)


def mxfp4_blocks(np, rng, rows, cols):
    """rows x cols MXFP4 blocks (ggml's: an E8M0 byte, then 16 bytes of two E2M1 codes): random
    codes, scale 2^-8 (values up to 0.023)."""
    data = rng.integers(0, 256, size=(rows * cols // 32, 17), dtype=np.uint8)
    data[:, 0] = 119
    return data.reshape(rows, cols // 32 * 17)


def add_llama_vocab(w):
    """VOCAB's 32000-token SentencePiece vocabulary (Llama 2's: <unk> 0, <s> 1, </s> 2) into writer w."""
    import gguf
    vocab = gguf.GGUFReader(str(VOCAB))
    for key, add in (("tokenizer.ggml.model", w.add_tokenizer_model), ("tokenizer.ggml.tokens", w.add_token_list),
                     ("tokenizer.ggml.scores", w.add_token_scores), ("tokenizer.ggml.token_type", w.add_token_types)):
        add(vocab.fields[key].contents())
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


GPT_OSS = dict(dim=2880, heads=64, kv_heads=8, head_dim=64, experts=32, used=4, window=128, vocab=32000)


def write_gpt_oss(path, layers):
    """gpt_oss_mxfp4: gpt-oss-20b's layers (GPT_OSS) as llama.cpp's converter writes them."""
    import gguf
    import numpy as np
    T = gguf.GGMLQuantizationType
    g = GPT_OSS
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), "gpt-oss")
    d, e, hd = g["dim"], g["experts"], g["head_dim"]
    w.add_name("brigade-bench-gpt-oss-mxfp4")
    w.add_block_count(layers)
    w.add_context_length(131072)
    w.add_embedding_length(d)
    w.add_feed_forward_length(d)
    w.add_head_count(g["heads"])
    w.add_head_count_kv(g["kv_heads"])
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(32.0)
    w.add_rope_scaling_orig_ctx_len(4096)
    w.add_rope_freq_base(150000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_expert_count(e)
    w.add_expert_used_count(g["used"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_sliding_window(g["window"])
    w.add_expert_feed_forward_length(d)
    add_llama_vocab(w)

    def q8(name, rows, cols):
        w.add_tensor(name, random_blocks(np, rng, T.Q8_0, rows, cols), raw_dtype=T.Q8_0)

    def f32(name, *shape, scale=0.01):
        w.add_tensor(name, (scale * rng.standard_normal(shape)).astype(np.float32))

    q8("token_embd.weight", g["vocab"], d)
    q, kv = g["heads"] * hd, g["kv_heads"] * hd
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(d, dtype=np.float32))
        for name, rows, cols in [("attn_q", q, d), ("attn_k", kv, d), ("attn_v", kv, d), ("attn_output", d, q)]:
            q8(p + name + ".weight", rows, cols)
            f32(p + name + ".bias", rows)
        f32(p + "attn_sinks.weight", g["heads"], scale=1.0)
        w.add_tensor(p + "post_attention_norm.weight", np.ones(d, dtype=np.float32))
        f32(p + "ffn_gate_inp.weight", e, d, scale=0.05)
        f32(p + "ffn_gate_inp.bias", e)
        for name in ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"):
            w.add_tensor(p + name + ".weight", mxfp4_blocks(np, rng, e * d, d).reshape(e, d, -1), raw_dtype=T.MXFP4)
            f32(p + name + ".bias", e, d)
    w.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    q8("output.weight", g["vocab"], d)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


GLM_AIR = dict(dim=4096, heads=96, kv_heads=8, head_dim=128, rot=64, ffn=10944, experts=128, used=8, expert_ffn=1408,
               vocab=32000)


def write_glm4moe(path, layers):
    """glm4moe_q4_k_m: GLM-4.5-Air's layers (GLM_AIR) as llama.cpp's converter and llama-quantize's
    Q4_K_M write them, the first dense (leading_dense_block_count 1)."""
    import gguf
    import numpy as np
    T = gguf.GGMLQuantizationType
    g = GLM_AIR
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), "glm4moe")
    d, e, hd, fe = g["dim"], g["experts"], g["head_dim"], g["expert_ffn"]
    w.add_name("brigade-bench-glm-4.5-air-q4_k_m")
    w.add_block_count(layers)
    w.add_context_length(131072)
    w.add_embedding_length(d)
    w.add_feed_forward_length(g["ffn"])
    w.add_head_count(g["heads"])
    w.add_head_count_kv(g["kv_heads"])
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_expert_used_count(g["used"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_dimension_count(g["rot"])
    w.add_expert_count(e)
    w.add_expert_feed_forward_length(fe)
    w.add_expert_shared_count(1)
    w.add_leading_dense_block_count(1)
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_expert_weights_scale(1.0)
    w.add_expert_weights_norm(True)
    add_llama_vocab(w)

    def blocks(name, t, rows, cols, stack=None):
        data = random_blocks(np, rng, t, rows * (stack or 1), cols)
        w.add_tensor(name, data.reshape(stack, rows, -1) if stack else data, raw_dtype=t)

    def f32(name, *shape, scale=0.01):
        w.add_tensor(name, (scale * rng.standard_normal(shape)).astype(np.float32))

    blocks("token_embd.weight", T.Q4_K, g["vocab"], d)
    q, kv = g["heads"] * hd, g["kv_heads"] * hd
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(d, dtype=np.float32))
        for name, rows, cols, t in [("attn_q", q, d, T.Q4_K), ("attn_k", kv, d, T.Q4_K), ("attn_v", kv, d, T.Q6_K)]:
            blocks(p + name + ".weight", t, rows, cols)
            f32(p + name + ".bias", rows)
        blocks(p + "attn_output.weight", T.Q4_K, d, q)
        w.add_tensor(p + "post_attention_norm.weight", np.ones(d, dtype=np.float32))
        if i == 0:
            blocks(p + "ffn_gate.weight", T.Q4_K, g["ffn"], d)
            blocks(p + "ffn_up.weight", T.Q4_K, g["ffn"], d)
            blocks(p + "ffn_down.weight", T.Q8_0, d, g["ffn"])  # 10944 columns: Q6_K's fallback
            continue
        f32(p + "ffn_gate_inp.weight", e, d, scale=0.05)
        f32(p + "exp_probs_b.bias", e)
        blocks(p + "ffn_gate_exps.weight", T.Q4_K, fe, d, stack=e)
        blocks(p + "ffn_up_exps.weight", T.Q4_K, fe, d, stack=e)
        blocks(p + "ffn_down_exps.weight", T.Q8_0, d, fe, stack=e)  # 1408 columns: Q6_K's fallback
        blocks(p + "ffn_gate_shexp.weight", T.Q4_K, fe, d)
        blocks(p + "ffn_up_shexp.weight", T.Q4_K, fe, d)
        blocks(p + "ffn_down_shexp.weight", T.Q8_0, d, fe)
    w.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    blocks("output.weight", T.Q6_K, g["vocab"], d)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_model(path, kind, layers):
    import gguf
    import numpy as np
    if kind == "gpt_oss_mxfp4":
        return write_gpt_oss(path, layers)
    if kind == "glm4moe_q4_k_m":
        return write_glm4moe(path, layers)
    T = gguf.GGMLQuantizationType
    # Per tensor role: (embedding, attn q/k/o + ffn gate/up, attn v + ffn down, output)
    mix = {
        "q4_0": (T.Q4_0, T.Q4_0, T.Q4_0, T.Q4_0),
        "q8_0": (T.Q8_0, T.Q8_0, T.Q8_0, T.Q8_0),
        # llama.cpp's Q4_K_M keeps attn_v / ffn_down (some layers) and output at Q6_K.
        "q4_k_m": (T.Q4_K, T.Q4_K, T.Q6_K, T.Q6_K),
        # and Q5_K_M the same with Q5_K for the rest.
        "q5_k_m": (T.Q5_K, T.Q5_K, T.Q6_K, T.Q6_K),
    }[kind]
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), "llama")
    d, f, h, kvh = SHAPE["dim"], SHAPE["ffn"], SHAPE["heads"], SHAPE["kv_heads"]
    w.add_name(f"brigade-bench-tinyllama-{kind}")
    w.add_context_length(2048)
    w.add_embedding_length(d)
    w.add_block_count(layers)
    w.add_feed_forward_length(f)
    w.add_head_count(h)
    w.add_head_count_kv(kvh)
    w.add_rope_dimension_count(d // h)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    add_llama_vocab(w)
    kv = d // h * kvh
    w.add_tensor("token_embd.weight", random_blocks(np, rng, mix[0], SHAPE["vocab"], d), raw_dtype=mix[0])
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(d, dtype=np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(d, dtype=np.float32))
        for name, rows, cols, t in [("attn_q", d, d, mix[1]), ("attn_k", kv, d, mix[1]), ("attn_v", kv, d, mix[2]),
                                    ("attn_output", d, d, mix[1]), ("ffn_gate", f, d, mix[1]),
                                    ("ffn_up", f, d, mix[1]), ("ffn_down", d, f, mix[2])]:
            w.add_tensor(p + name + ".weight", random_blocks(np, rng, t, rows, cols), raw_dtype=t)
    w.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    w.add_tensor("output.weight", random_blocks(np, rng, mix[3], SHAPE["vocab"], d), raw_dtype=mix[3])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llamacpp_run(path, threads, decode_tokens, prefill_tokens):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=str(path), n_threads=threads, n_threads_batch=threads,
                          n_ctx=max(1024, prefill_tokens + 16), n_batch=512, verbose=False)
    prompt = [1] + [100 + (i * 17) % 20000 for i in range(15)]
    best_decode = 0.0
    for _ in range(2):  # the first pass warms the mapping and the threads
        llm.reset()
        llm.eval(prompt)
        t0 = time.perf_counter()
        for i in range(decode_tokens):
            llm.eval([200 + (i * 31) % 20000])
        best_decode = max(best_decode, decode_tokens / (time.perf_counter() - t0))
    long_prompt = [1] + [100 + (i * 17) % 20000 for i in range(prefill_tokens - 1)]
    best_prefill = 0.0
    for _ in range(2):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(long_prompt)
        best_prefill = max(best_prefill, len(long_prompt) / (time.perf_counter() - t0))
    return {"decode_tokens_per_s": best_decode, "prefill_tokens_per_s": best_prefill,
            "version": getattr(llama_cpp, "__version__", "?")}


def brigade_run(path, threads, decode_tokens, prefill_tokens):
    exe = ROOT / "build" / "bench" / "bench_engine"
    out = OUT / (path.stem + ".brigade.json")
    subprocess.check_call([str(exe), "--model", str(path), "--threads", str(threads), "--decode-tokens",
                           str(decode_tokens), "--prefill-len", str(prefill_tokens), "--json", str(out)],
                          stdout=subprocess.DEVNULL)
    r = json.loads(out.read_text())
    b1 = next(d for d in r["decode"] if d["batch"] == 1)
    return {"decode_tokens_per_s": b1["tokens_per_s"], "decode_fraction_of_roofline": b1["fraction"],
            "prefill_tokens_per_s": r["prefill"]["tokens_per_s"], "prefill_fraction": r["prefill"]["fraction"],
            "decode_batch_32_tokens_per_s": next(d for d in r["decode"] if d["batch"] == 32)["tokens_per_s"],
            "read_bandwidth_gbps": r["machine"]["read_bandwidth_gbps"]}


def main():
    ensure_venv()
    ap = argparse.ArgumentParser()
    ap.add_argument("--types", default="q4_0,q8_0,q4_k_m,q5_k_m")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--layers", type=int, default=None)  # 22 (TinyLlama), 2 for gpt_oss_mxfp4 and glm4moe_q4_k_m
    ap.add_argument("--decode-tokens", type=int, default=64)
    # The prefill prompt; both take it 512 tokens at a time (llama.cpp's n_batch, brigade's step).
    ap.add_argument("--prefill-tokens", type=int, default=512)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for kind in a.types.split(","):
        oss, glm = kind == "gpt_oss_mxfp4", kind == "glm4moe_q4_k_m"
        layers = a.layers if a.layers is not None else 2 if oss or glm else 22
        path = OUT / (f"gpt-oss-{layers}l-mxfp4.gguf" if oss else f"glm-4.5-air-{layers}l-q4_k_m.gguf" if glm
                      else f"tinyllama-{layers}l-{kind}.gguf")
        if not path.exists():
            print(f"writing {path}", file=sys.stderr)
            write_model(path, kind, layers)
        ours = brigade_run(path, a.threads, a.decode_tokens, a.prefill_tokens)
        theirs = llamacpp_run(path, a.threads, a.decode_tokens, a.prefill_tokens)
        results.append({"type": kind, "file_mb": path.stat().st_size / 1e6, "brigade": ours, "llama.cpp": theirs})
    print(f"threads {a.threads}, TinyLlama-1.1B shape ({a.layers or 22} layers; gpt_oss_mxfp4: gpt-oss-20b layers, "
          f"glm4moe_q4_k_m: GLM-4.5-Air layers, {a.layers or 2}), llama-cpp-python "
          f"{results[0]['llama.cpp']['version'] if results else '?'}, prefill of {a.prefill_tokens} tokens")
    print(f"{'type':8} {'MB':>7} | {'decode tok/s':>12} {'llama.cpp':>10} {'ratio':>6} {'of roof':>7} | "
          f"{'prefill tok/s':>13} {'llama.cpp':>10} {'ratio':>6}")
    for r in results:
        b, l = r["brigade"], r["llama.cpp"]
        print(f"{r['type']:8} {r['file_mb']:7.0f} | {b['decode_tokens_per_s']:12.2f} {l['decode_tokens_per_s']:10.2f} "
              f"{b['decode_tokens_per_s'] / l['decode_tokens_per_s']:6.2f} {b['decode_fraction_of_roofline']:7.2f} | "
              f"{b['prefill_tokens_per_s']:13.1f} {l['prefill_tokens_per_s']:10.1f} "
              f"{b['prefill_tokens_per_s'] / l['prefill_tokens_per_s']:6.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
