#!/usr/bin/env python3
"""Writes tests/fixtures/quant/quant.json, the reference that tests/core/quant_test.cpp checks
core/quant and models/ggml_quant against: llama.cpp's own gguf-py (PyPI `gguf`,
gguf.quants.dequantize / quantize, a numpy port of ggml's reference code).

  dequantize  for every ggml block type brigade reads (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
              Q4_K, Q5_K, Q6_K): random valid blocks (random bytes with finite f16 scales: a few
              of each sign and magnitude, one zero) and gguf-py's dequantized f32 values.
  quantize    random rows (and a zero row, a row whose largest magnitude is negative, rows of
              repeated maxima) quantized by gguf-py to Q8_0, Q4_0 and Q4_1, which
              quant::quantize_row_* must match byte for byte.

Run: python3 scripts/make_quant_fixtures.py (make_fixtures.py's virtual environment, plus `gguf`
from PyPI, installed on first use).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
from make_gguf_fixtures import ensure_extras  # noqa: E402

OUT = mf.OUT / "quant"

# (name, byte offsets of the block's f16 scales)
TYPES = [("Q4_0", [0]), ("Q4_1", [0, 2]), ("Q5_0", [0]), ("Q5_1", [0, 2]), ("Q8_0", [0]),
         ("Q2_K", [80, 82]), ("Q3_K", [108]), ("Q4_K", [0, 2]), ("Q5_K", [0, 2]), ("Q6_K", [208])]


def random_blocks(np, rng, gguf, name, scale_offsets):
    t = gguf.GGMLQuantizationType[name]
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[t]
    n_blocks = 6 if block_elems == 32 else 3
    raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    for b in range(n_blocks):
        for k, off in enumerate(scale_offsets):
            # Finite f16 scales of both signs over several magnitudes; block 0's first is zero.
            v = 0.0 if b == 0 and k == 0 else rng.choice([-1.0, 1.0]) * 10.0 ** rng.uniform(-4, 0)
            raw[b, off:off + 2] = np.frombuffer(np.float16(v).tobytes(), dtype=np.uint8)
    values = gguf.quants.dequantize(raw.reshape(1, -1), t).reshape(-1)
    assert values.size == n_blocks * block_elems and np.all(np.isfinite(values))
    return {"type": name, "id": int(t.value), "bytes": raw.tobytes().hex(),
            "values": [float(v) for v in values.astype(np.float32)]}


def quantize_rows(np, rng, gguf, name):
    t = gguf.GGMLQuantizationType[name]
    rows = [rng.normal(0, 1, 96), rng.normal(0, 0.02, 64), np.zeros(32), rng.uniform(-3, 1, 32),
            np.repeat([-2.0, 2.0], 16), np.linspace(-1, 1, 64), rng.normal(0, 1, 32) * 1e-3]
    rows[3][7] = -5.0  # the largest magnitude is negative: q4_0 keeps its sign
    out = []
    for r in rows:
        x = np.asarray(r, dtype=np.float32).reshape(1, -1)
        q = gguf.quants.quantize(x, t)
        out.append({"type": name, "input": [float(v) for v in x.reshape(-1)], "bytes": q.tobytes().hex()})
    return out


def main():
    mf.ensure_venv(__file__)
    ensure_extras("gguf")
    import gguf
    import gguf.quants  # noqa: F401
    import numpy as np
    from importlib.metadata import version
    rng = np.random.default_rng(20261201)
    fixture = {
        "generator": f"gguf-py {version('gguf')} (gguf.quants)",
        "dequantize": [random_blocks(np, rng, gguf, n, offs) for n, offs in TYPES],
        "quantize": (quantize_rows(np, rng, gguf, "Q8_0") + quantize_rows(np, rng, gguf, "Q4_0") +
                     quantize_rows(np, rng, gguf, "Q4_1")),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "quant.json"
    path.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
    print(f"{path}: {path.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
