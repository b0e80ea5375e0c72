#!/usr/bin/env python3
"""Writes an "oracle" copy of a DeepSeek-V3 checkpoint with an MTP module, for measuring MTP
speculative decoding when every draft is accepted (the upper bound of what drafting can give).

Every layer's output is zeroed (self_attn.o_proj and every down_proj, the MTP module's too), so
the target's next token is a function f of its current token; the MTP module is made to predict
f of its input token, the token after next: eh_proj = [I 0], enorm = ones, shared_head.norm =
model.norm. The copy reads the same bytes per step as the original (same shapes, same dtypes).

    python3 bench/e2e/mtp_oracle.py SRC_DIR DST_DIR

SRC_DIR: a single-file safetensors checkpoint, e.g. from
`brigade make-model --arch deepseek_v3 --mtp-layers 1 ...` (f32, bf16 or f16). Standard library only.
"""
import json
import shutil
import struct
import sys
from pathlib import Path

ONE = {"F32": struct.pack("<f", 1.0), "BF16": b"\x80\x3f", "F16": b"\x00\x3c"}


def main():
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name != "model.safetensors" and f.is_file():
            shutil.copy(f, dst / f.name)
    config = json.loads((src / "config.json").read_text())
    mtp = f"model.layers.{config['num_hidden_layers']}."
    raw = bytearray((src / "model.safetensors").read_bytes())
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n

    def span(name):
        t = header[name]
        return base + t["data_offsets"][0], base + t["data_offsets"][1], t["dtype"], t["shape"]

    zeroed = 0
    for name in header:
        if name != "__metadata__" and (name.endswith("o_proj.weight") or "down_proj" in name):
            b, e, _, _ = span(name)
            raw[b:e] = bytes(e - b)
            zeroed += 1
    b, e, dtype, shape = span(mtp + "eh_proj.weight")  # [hidden, 2 hidden]
    hidden, size = shape[0], len(ONE[dtype])
    raw[b:e] = bytes(e - b)
    for i in range(hidden):
        at = b + (i * 2 * hidden + i) * size
        raw[at:at + size] = ONE[dtype]
    b, e, dtype, _ = span(mtp + "enorm.weight")
    raw[b:e] = ONE[dtype] * ((e - b) // len(ONE[dtype]))
    nb, ne, ndtype, _ = span("model.norm.weight")
    hb, he, hdtype, _ = span(mtp + "shared_head.norm.weight")
    assert ndtype == hdtype and ne - nb == he - hb
    raw[hb:he] = raw[nb:ne]
    (dst / "model.safetensors").write_bytes(raw)
    print(f"{dst}: {zeroed} output projections zeroed, MTP module predicts the token after next")


if __name__ == "__main__":
    main()
