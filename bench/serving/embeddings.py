"""Embeddings against prefill on one `brigade serve`: the time of POST /v1/embeddings for a
prompt against POST /v1/completions with max_tokens 1 on the same prompt (the same prefill plus
one sampled token), alternating, best of N each; and a batch of inputs in one request.

  python3 bench/serving/embeddings.py --model PATH [--pooling mean] [--tokens 500] [--repeats 5]

Runs build/tools/brigade serve itself (BRIGADE_BIN overrides) with the radix cache off (every
request computes its prompt); needs the `openai` package (scripts/python-env.sh's venv).
"""
import argparse
import os
import re
import subprocess
import tempfile
import time

import openai

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("BRIGADE_BIN", os.path.join(ROOT, "build", "tools", "brigade"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--pooling", default="mean")
    ap.add_argument("--tokens", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    a = ap.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as topo:
        topo.write(f"model: {a.model}\ninstances:\n  - name: i0\n    cache:\n      radix: false\n")
    proc = subprocess.Popen([BIN, "serve", "--topology", topo.name, "--port", "0", "--pooling", a.pooling,
                             "--served-model-name", "m"], stdout=subprocess.PIPE, text=True)
    try:
        port = re.search(r":(\d+) ", proc.stdout.readline()).group(1)
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=600)
        ids = [(i * 7919) % 30000 + 100 for i in range(a.tokens)]
        c.embeddings.create(model="m", input=ids[:16])  # warm up
        best = {"embed": 1e9, "prefill": 1e9, "batch": 1e9}
        for _ in range(a.repeats):
            t = time.perf_counter()
            c.embeddings.create(model="m", input=ids, encoding_format="float")
            best["embed"] = min(best["embed"], time.perf_counter() - t)
            t = time.perf_counter()
            c.completions.create(model="m", prompt=ids, max_tokens=1, temperature=0)
            best["prefill"] = min(best["prefill"], time.perf_counter() - t)
            t = time.perf_counter()
            c.embeddings.create(model="m", input=[[x + k for x in ids] for k in range(a.batch)])
            best["batch"] = min(best["batch"], time.perf_counter() - t)
        n = a.tokens
        print(f"{a.pooling}, {n} tokens: embeddings {n / best['embed']:.0f} tok/s, completion max_tokens 1 "
              f"{n / best['prefill']:.0f} tok/s ({best['prefill'] / best['embed']:.2f}x); batch of {a.batch}: "
              f"{a.batch * n / best['batch']:.0f} tok/s")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        os.unlink(topo.name)


if __name__ == "__main__":
    main()
