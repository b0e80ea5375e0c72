#!/usr/bin/env python3
"""Writes tests/fixtures/quant/quant.json, the reference that tests/core/quant_test.cpp checks
core/quant and models/ggml_quant against: llama.cpp's own gguf-py (PyPI `gguf`,
gguf.quants.dequantize / quantize, a numpy port of ggml's reference code).

  dequantize  for every ggml block type brigade reads (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
              Q4_K, Q5_K, Q6_K, MXFP4): random valid blocks (random bytes with finite f16 scales:
              a few of each sign and magnitude, one zero; MXFP4: E8M0 scales over 2^-127..2^122,
              the subnormal 0 and 1 among them) and gguf-py's dequantized f32 values.
  quantize    random rows (and a zero row, a row whose largest magnitude is negative, rows of
              repeated maxima) quantized by gguf-py to Q8_0, Q4_0, Q4_1 and MXFP4 (and for MXFP4
              rows of exact ties between two E2M1 values), which quant::quantize_row_* must match
              byte for byte.

and tests/fixtures/quant/mxfp4_hf.json, the reference for quant::repack_hf_mxfp4: random MXFP4
weights in transformers' gpt-oss layout (`_blocks` u8 [E, rows, cols / 32, 16], `_scales` u8
[E, rows, cols / 32]) and their values by transformers' own dequantizer,
transformers.integrations.mxfp4.convert_moe_packed_tensors (in f32), as [E, rows, cols] (its
result transposed back: it returns [E, cols, rows]).

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


def mxfp4_blocks(np, rng, gguf):
    """Random MXFP4 blocks: random nibbles, E8M0 scales of every range (2^(e - 127) for e in 0..249:
    the products stay finite), the f32-subnormal scales e = 0 and 1 included."""
    t = gguf.GGMLQuantizationType.MXFP4
    raw = rng.integers(0, 256, size=(8, 17), dtype=np.uint8)
    raw[:, 0] = [0, 1, 2, 127, 100, 140, 249, 121]
    values = gguf.quants.dequantize(raw.reshape(1, -1), t).reshape(-1)
    assert values.size == 8 * 32 and np.all(np.isfinite(values))
    return {"type": "MXFP4", "id": int(t.value), "bytes": raw.tobytes().hex(),
            "values": [float(v) for v in values.astype(np.float32)]}


def quantize_rows(np, rng, gguf, name):
    t = gguf.GGMLQuantizationType[name]
    rows = [rng.normal(0, 1, 96), rng.normal(0, 0.02, 64), np.zeros(32), rng.uniform(-3, 1, 32),
            np.repeat([-2.0, 2.0], 16), np.linspace(-1, 1, 64), rng.normal(0, 1, 32) * 1e-3]
    rows[3][7] = -5.0  # the largest magnitude is negative: q4_0 keeps its sign
    if name == "MXFP4":
        # absmax 1: scale 2^(125 - 127), values 0, 1/8, ..., 1.5; x between two values: ties
        # (the first, smaller code wins), and just off them.
        mids = np.array([0.0625, 0.1875, 0.3125, 0.4375, 0.625, 0.875, 1.0, 0.0])
        rows += [np.concatenate([mids, -mids, mids + 1e-3, -mids + 1e-3]), rng.normal(0, 100, 64),
                 np.exp2(rng.integers(-20, 20, 32)).astype(np.float64)]
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
    # MXFP4 from its own generator, so the rows above stay as they were.
    mx = np.random.default_rng(20261202)
    fixture["dequantize"].append(mxfp4_blocks(np, mx, gguf))
    fixture["quantize"] += quantize_rows(np, mx, gguf, "MXFP4")
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "quant.json"
    path.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
    print(f"{path}: {path.stat().st_size / 1024:.0f} KiB")
    write_mxfp4_hf(np, mx)


def write_mxfp4_hf(np, rng):
    import torch
    import transformers
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    experts, rows, cols = 2, 3, 64
    blocks = rng.integers(0, 256, size=(experts, rows, cols // 32, 16), dtype=np.uint8)
    scales = rng.integers(100, 140, size=(experts, rows, cols // 32), dtype=np.uint8)
    scales[0, 0, :] = [0, 1]  # 2^-127 and 2^-126: f32 subnormals once multiplied by 0.5
    scales[1, 2, 1] = 127
    values = convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales), dtype=torch.float32)
    values = values.transpose(1, 2).contiguous().numpy()  # [E, cols, rows] -> [E, rows, cols]
    assert values.shape == (experts, rows, cols) and np.all(np.isfinite(values))
    fixture = {"generator": f"transformers {transformers.__version__} (convert_moe_packed_tensors, f32)",
               "experts": experts, "rows": rows, "cols": cols,
               "blocks": blocks.tobytes().hex(), "scales": scales.tobytes().hex(),
               "values": [float(v) for v in values.reshape(-1)]}
    path = OUT / "mxfp4_hf.json"
    path.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
    print(f"{path}: {path.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
