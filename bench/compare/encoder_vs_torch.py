"""A BERT-base- or ModernBERT-base-shaped encoder embedding token ids: `brigade serve`'s
/v1/embeddings against PyTorch (transformers' BertModel / ModernBertModel, the same weights, the
same thread count) on the same machine, in the same run, and both against the machine's f32 GEMM
rate that brigade measures at start.

  .brigade/fixtures-venv/bin/python bench/compare/encoder_vs_torch.py [--arch bert|modernbert]
      [--threads 2] [--tokens 128] [--batch 32] [--requests 4] [--repeats 3]

Makes the checkpoint on first use, random weights (seed 0), f32, with sentence-transformers files
(cls pooling, no Normalize): bert (.brigade/models/bert-base-random) is transformers' BertModel
with bert-base's shape (12 layers, hidden 768, 12 heads, intermediate 3072, vocab 30522, 512
positions; 110M parameters); modernbert (.brigade/models/modernbert-base-random) is ModernBertModel
with ModernBERT-base's (22 layers, hidden 768, 12 heads, a gated GELU MLP of 1152, vocab 50368,
local windows of 128 with every third layer global; 149M parameters). Each brigade request embeds `batch` inputs of `tokens` ids (the
scheduler packs as many whole prompts per step as max_step_tokens holds); torch runs each batch
as one padded-free [batch, tokens] forward under inference_mode. Best of `repeats` per side,
sides interleaved. Reports tokens/s, brigade / torch, and each as a fraction of the GEMM ceiling
(flops per token: 2 per linear weight plus attention's 4 * keys seen * hidden per layer: the
prompt, or on ModernBERT's local layers at most local_attention + 1 of it).
Needs torch and transformers (scripts/make_fixtures.py's venv) and build/tools/brigade.
"""
import argparse
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("BRIGADE_BIN", os.path.join(ROOT, "build", "tools", "brigade"))
ARCHS = {
    "bert": dict(dir="bert-base-random", shape=dict(
        vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
        max_position_embeddings=512, type_vocab_size=2)),
    "modernbert": dict(dir="modernbert-base-random", shape=dict(
        vocab_size=50368, hidden_size=768, num_hidden_layers=22, num_attention_heads=12, intermediate_size=1152,
        max_position_embeddings=8192, local_attention=128, global_attn_every_n_layers=3)),
}


def model_dir(arch):
    return os.path.join(ROOT, ".brigade", "models", ARCHS[arch]["dir"])


def load_torch(arch, path):
    import transformers
    if arch == "bert":
        return transformers.BertModel.from_pretrained(path, add_pooling_layer=False).eval()
    return transformers.ModernBertModel.from_pretrained(path).eval()


def make_model(arch):
    import torch
    import transformers
    MODEL = model_dir(arch)
    if os.path.exists(os.path.join(MODEL, "model.safetensors")):
        return
    torch.manual_seed(0)
    shape = ARCHS[arch]["shape"]
    if arch == "bert":
        model = transformers.BertModel(transformers.BertConfig(**shape), add_pooling_layer=False).eval()
    else:
        model = transformers.ModernBertModel(transformers.ModernBertConfig(**shape)).eval()
    model.save_pretrained(MODEL, safe_serialization=True)
    with open(os.path.join(MODEL, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}], f)
    os.makedirs(os.path.join(MODEL, "1_Pooling"), exist_ok=True)
    with open(os.path.join(MODEL, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": 768, "pooling_mode_cls_token": True}, f)


def flops_per_token(arch, tokens):
    shape = ARCHS[arch]["shape"]
    h, inter, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    if arch == "bert":
        return 2 * layers * (4 * h * h + 2 * h * inter) + layers * 4 * tokens * h
    every, window = shape["global_attn_every_n_layers"], shape["local_attention"]
    n_global = len([l for l in range(layers) if l % every == 0])
    keys = n_global * tokens + (layers - n_global) * min(tokens, window + 1)  # (an upper bound near the edges)
    return 2 * layers * (4 * h * h + 3 * h * inter) + 4 * keys * h


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/embeddings", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", choices=sorted(ARCHS), default="bert")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--step-tokens", type=int, default=512)
    a = ap.parse_args()
    make_model(a.arch)
    MODEL = model_dir(a.arch)
    inputs = [[(i * 7919 + j * 104729) % 30000 + 100 for j in range(a.tokens)] for i in range(a.batch)]
    n_tokens = a.requests * a.batch * a.tokens

    # brigade first: its GEMM probe at start must not share the cores with torch's threads.
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as topo:
        topo.write(f"model: {MODEL}\ninstances:\n  - name: i0\n    scheduler:\n      max_step_tokens: {a.step_tokens}\n"
                   f"    executors:\n      - device: cpu\n        threads: {a.threads}\n")
    proc = subprocess.Popen([BIN, "--log-level", "info", "serve", "--topology", topo.name, "--port", "0", "--served-model-name", "m"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = re.search(r":(\d+) ", proc.stdout.readline()).group(1)
        import torch
        torch.set_num_threads(a.threads)
        model = load_torch(a.arch, MODEL)
        post(port, {"model": "m", "input": inputs[:2]})  # warm up
        best_b, best_t = 1e9, 1e9
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            for _ in range(a.requests):
                post(port, {"model": "m", "input": inputs})
            best_b = min(best_b, time.perf_counter() - t0)
            t0 = time.perf_counter()
            with torch.inference_mode():
                for _ in range(a.requests):
                    model(input_ids=torch.tensor(inputs)).last_hidden_state[:, 0]
            best_t = min(best_t, time.perf_counter() - t0)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    peak = re.search(r"ceilings ([0-9.]+) GB/s, ([0-9.]+) GFLOP/s", err)
    gflops = float(peak.group(2)) if peak else float("nan")
    fpt = flops_per_token(a.arch, a.tokens)
    torch_name = "torch BertModel" if a.arch == "bert" else "torch ModernBertModel"
    rows = [("brigade /v1/embeddings", n_tokens / best_b), (torch_name, n_tokens / best_t)]
    print(f"{a.arch}-base shape, {a.requests} x {a.batch} inputs of {a.tokens} tokens, {a.threads} threads, "
          f"f32 GEMM ceiling {gflops:.1f} GFLOP/s (brigade's probe)")
    print("| side | tokens/s | GFLOP/s | of the GEMM ceiling |")
    print("|---|---|---|---|")
    for name, tps in rows:
        print(f"| {name} | {tps:.0f} | {tps * fpt * 1e-9:.1f} | {tps * fpt * 1e-9 / gflops:.2f} |")
    print(f"brigade / torch: {rows[0][1] / rows[1][1]:.2f}x")


if __name__ == "__main__":
    main()
