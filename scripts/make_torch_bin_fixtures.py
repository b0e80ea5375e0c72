#!/usr/bin/env python3
"""Writes the torch.save fixtures (pytorch_model.bin) that tests/models/torch_checkpoint_test.cpp
reads: checkpoints of make_fixtures.py's fixtures saved by torch itself, in the layouts the Hub's
older repositories hold, and a few small files of every storage type and of what brigade refuses.

  opt_bin            make_fixtures.py's opt as one pytorch_model.bin (torch >= 1.6's ZIP
                     container), as transformers 4's save_pretrained(safe_serialization=False)
                     wrote it: the state dict without the tied lm_head
  gpt2_bin_legacy    its gpt2 in torch < 1.6's legacy stream (_use_new_zipfile_serialization=False)
                     with the Hub's gpt2 layout of 2019: names without "transformer.", and each
                     layer's attn.bias (a bool [1, 1, n, n] causal mask) and attn.masked_bias (a
                     float scalar) buffers
  qwen2_bin_sharded  its qwen2 (tied embeddings) in two shards and pytorch_model.bin.index.json,
                     with what torch.save keeps of views: lm_head.weight sharing the embedding's
                     storage (as transformers 4 saved tied weights in .bin files), layer 0's
                     q_proj.weight saved as a transposed view (strides (1, rows)), layer 1's k_proj
                     and v_proj as two slices of one storage (the second at an offset), and
                     model.norm.weight as float64
  eagle3/head_bin    the EAGLE-3 head eagle3/head (make_eagle3_fixtures.py) as pytorch_model.bin, the
                     file the Hub's EAGLE-3 heads ship (yuhuili/EAGLE3-*: its d2t int64 and t2d
                     bool buffers included)
  lora/all_r4_bin    the LoRA adapter lora/all_r4 (make_lora_fixtures.py) as adapter_model.bin, as
                     PEFT saved adapters before safetensors
  torch_bin_misc     dtypes.bin (ZIP) and dtypes_legacy.bin (legacy): one tensor per storage type
                     brigade reads (float32, float16, bfloat16, float64, int64, int32, int8, uint8,
                     bool, float8_e4m3fn: _rebuild_tensor_v3 over an UntypedStorage, ZIP only) plus
                     a 0-d, an empty, a 5-d, an expanded (stride 0), a transposed and an offset
                     tensor, and values.json with every tensor's values as torch reads them back;
                     unsupported_dtype.bin (an int16 tensor); and the refused pickles:
                     system_call.bin (a value whose __reduce__ is os.system), module.bin (a whole
                     nn.Linear), nested.bin ({"model": state_dict, "step": 3}), subclass_float.bin
                     (tensors, plus a float value that is not one), forged_size.bin (a storage
                     whose claimed size wraps onto its record's: make_forged_size)

Every checkpoint directory is checked here: transformers 5's from_pretrained loads it (torch.load
with weights_only=True) and gives the logits of the source fixture's expected.json, which the C++
test compares brigade with. Run: python3 scripts/make_torch_bin_fixtures.py (re-runs itself in
.brigade/fixtures-venv). The output is committed; CI never runs this.
"""
import json
import os
import shutil
import sys
from collections import OrderedDict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures  # noqa: E402

make_fixtures.ensure_venv(__file__)

import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

OUT = make_fixtures.OUT


def source_state_dict(name):
    model = AutoModelForCausalLM.from_pretrained(OUT / name, dtype=torch.float32)
    return model, OrderedDict((k, v.detach().clone()) for k, v in model.state_dict().items())


def fresh_dir(name, source):
    d = OUT / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    shutil.copy(OUT / source / "config.json", d / "config.json")
    return d


def check_logits(directory, source):
    """transformers reads `directory` to exactly `source`'s parameters, and runs it to the logits
    of `source`'s expected.json (within fp32 noise: a strided weight takes another GEMM path)."""
    expected = json.loads((OUT / source / "expected.json").read_text())
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
    model.eval()
    reference = AutoModelForCausalLM.from_pretrained(OUT / source, dtype=torch.float32).state_dict()
    for name, t in model.state_dict().items():
        if name in reference:
            assert torch.equal(t, reference[name]), f"{directory}: {name} differs from {source}'s"
    worst = 0.0
    with torch.no_grad():
        for case in expected["cases"]:
            logits = model(torch.tensor([case["prompt"]])).logits[0]
            worst = max(worst, (logits - torch.tensor(case["logits"])).abs().max().item())
    assert worst < 1e-4, f"{directory}: transformers' logits differ from {source}'s expected.json by {worst}"
    print(f"{directory.name}: transformers reads it to {source}'s weights (expected.json within {worst:.2e})")


def make_opt_bin():
    model, sd = source_state_dict("opt")
    tied = getattr(model, "_tied_weights_keys", None) or {}
    for k in list(tied) if isinstance(tied, (dict, list)) else []:
        sd.pop(k, None)
    sd.pop("lm_head.weight", None)
    d = fresh_dir("opt_bin", "opt")
    torch.save(sd, d / "pytorch_model.bin")
    check_logits(d, "opt")


def make_gpt2_bin_legacy():
    model, sd = source_state_dict("gpt2")
    cfg = model.config
    n = cfg.n_positions
    out = OrderedDict()
    for k, v in sd.items():
        if k == "lm_head.weight":
            continue
        out[k.removeprefix("transformer.")] = v
    mask = torch.tril(torch.ones((n, n), dtype=torch.bool)).view(1, 1, n, n)
    for i in range(cfg.n_layer):
        out[f"h.{i}.attn.bias"] = mask
        out[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    d = fresh_dir("gpt2_bin_legacy", "gpt2")
    torch.save(out, d / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    check_logits(d, "gpt2")


def make_qwen2_bin_sharded():
    model, sd = source_state_dict("qwen2")
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]  # one storage, two names
    q = "model.layers.0.self_attn.q_proj.weight"
    sd[q] = sd[q].t().contiguous().t()  # same values, column-major storage
    assert not sd[q].is_contiguous()
    k, v = "model.layers.1.self_attn.k_proj.weight", "model.layers.1.self_attn.v_proj.weight"
    kv = torch.cat([sd[k], sd[v]])
    sd[k], sd[v] = kv[: sd[k].shape[0]], kv[sd[k].shape[0]:]
    sd["model.norm.weight"] = sd["model.norm.weight"].double()
    names = list(sd)
    first = {"model.embed_tokens.weight", "lm_head.weight"} | set(names[: len(names) // 2])
    shards = [OrderedDict((n, sd[n]) for n in names if n in first),
              OrderedDict((n, sd[n]) for n in names if n not in first)]
    d = fresh_dir("qwen2_bin_sharded", "qwen2")
    weight_map = {}
    total = 0
    for i, shard in enumerate(shards):
        file = f"pytorch_model-{i + 1:05d}-of-{len(shards):05d}.bin"
        torch.save(shard, d / file)
        for n, t in shard.items():
            weight_map[n] = file
            total += t.numel() * t.element_size()
    (d / "pytorch_model.bin.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2) + "\n")
    check_logits(d, "qwen2")


class SystemCall:
    def __reduce__(self):
        return (os.system, ("echo this command must never run",))


def make_forged_size(d):
    """forged_size.bin: a stored ZIP in torch's layout whose pickle (written by hand, protocol 2)
    says its one DoubleStorage holds 2**61 + 6 elements; 8 bytes each wrap modulo 2**64 to the 48
    bytes the record holds. torch.load refuses it too."""
    import struct
    import zipfile
    n = 2 ** 61 + 6
    big = b"\x8a\x08" + struct.pack("<Q", n)  # LONG1 of 8 bytes
    pickle = (b"\x80\x02}X\x01\x00\x00\x00w" b"ctorch._utils\n_rebuild_tensor_v2\n("
              b"(X\x07\x00\x00\x00storage" b"ctorch\nDoubleStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpu"
              + big + b"tQK\x00" + big + b"\x85K\x01\x85\x89}tRs.")
    with zipfile.ZipFile(d / "forged_size.bin", "w", zipfile.ZIP_STORED) as z:
        z.writestr("forged_size/data.pkl", pickle)
        z.writestr("forged_size/byteorder", "little")
        z.writestr("forged_size/data/0", bytes(48))
    try:
        torch.load(d / "forged_size.bin", weights_only=True)
    except Exception:  # noqa: BLE001
        return
    raise AssertionError("torch.load read forged_size.bin")


def make_misc():
    d = OUT / "torch_bin_misc"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    g = torch.Generator().manual_seed(3620)
    base = torch.randn(2, 3, generator=g)
    tensors = OrderedDict()
    tensors["f32"] = base
    tensors["f16"] = base.half()
    tensors["bf16"] = base.bfloat16()
    tensors["f64"] = base.double() * 1e-3
    tensors["i64"] = torch.tensor([[-(2 ** 40), -1, 0], [1, 7, 2 ** 40]], dtype=torch.int64)
    tensors["i32"] = torch.tensor([-(2 ** 30), -5, 0, 5, 2 ** 30], dtype=torch.int32)
    tensors["i8"] = torch.tensor([-128, -1, 0, 1, 127], dtype=torch.int8)
    tensors["u8"] = torch.tensor([0, 1, 128, 255], dtype=torch.uint8)
    tensors["bool"] = torch.tensor([True, False, True])
    tensors["f8e4m3"] = torch.tensor([0.5, -1.0, 2.0, 448.0], dtype=torch.float8_e4m3fn)
    tensors["scalar"] = torch.tensor(1.25)
    tensors["empty"] = torch.zeros(0, 4)
    tensors["rank5"] = torch.arange(2 * 3 * 2 * 2 * 2, dtype=torch.float32).reshape(2, 3, 2, 2, 2)
    tensors["expanded"] = torch.tensor([1.0, 2.0, 3.0]).expand(2, 3)
    tensors["column"] = base.t()  # a transposed view of f32's storage
    tensors["row1"] = base[1]     # a view at an offset into it
    torch.save(tensors, d / "dtypes.bin")
    # The legacy stream has no float8 (torch writes it through _rebuild_tensor_v3 and an
    # UntypedStorage, which torch.load cannot read back from a legacy file).
    legacy = OrderedDict((k, v) for k, v in tensors.items() if k != "f8e4m3")
    torch.save(legacy, d / "dtypes_legacy.bin", _use_new_zipfile_serialization=False)
    values = {}
    for name, t in tensors.items():
        values[name] = {"shape": list(t.shape), "values": t.float().flatten().tolist()
                        if t.dtype not in (torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool)
                        else t.long().flatten().tolist()}
    (d / "values.json").write_text(json.dumps(values, indent=1) + "\n")
    torch.save({"w": torch.zeros(2, dtype=torch.int16)}, d / "unsupported_dtype.bin")
    torch.save({"w": torch.zeros(2), "x": SystemCall()}, d / "system_call.bin")
    torch.save(torch.nn.Linear(2, 2), d / "module.bin")
    torch.save({"model": {"w": torch.zeros(2)}, "step": 3}, d / "nested.bin")
    torch.save({"w": torch.ones(2), "scale": 0.5}, d / "subclass_float.bin")
    # torch itself refuses what brigade refuses, and reads what it reads.
    for bad in ("system_call.bin", "module.bin"):
        try:
            torch.load(d / bad, weights_only=True)
            raise AssertionError(f"torch.load(weights_only=True) read {bad}")
        except Exception as e:  # noqa: BLE001
            assert "weights_only" in str(e) or "Unsupported" in str(e), e
    for good, saved in (("dtypes.bin", tensors), ("dtypes_legacy.bin", legacy)):
        back = torch.load(d / good, weights_only=True)
        assert list(back) == list(saved), good
        for name, t in saved.items():
            assert torch.equal(back[name].float(), t.float()), (good, name)
    make_forged_size(d)
    print(f"{d.name}: {sorted(p.name for p in d.iterdir())}")


def resave_single_file(source, name, st_file, bin_file, configs):
    """`source`'s st_file as bin_file (torch.save of the same tensors), beside copies of `configs`;
    torch.load(weights_only=True) reads it back to exactly the safetensors' tensors."""
    from safetensors.torch import load_file
    src, d = OUT / source, OUT / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    for c in configs:
        shutil.copy(src / c, d / c)
    tensors = load_file(src / st_file)
    torch.save(OrderedDict(sorted(tensors.items())), d / bin_file)
    back = torch.load(d / bin_file, weights_only=True)
    assert set(back) == set(tensors) and all(torch.equal(back[k], tensors[k]) for k in tensors), name
    print(f"{name}: {len(tensors)} tensors of {source}/{st_file}")


def main():
    resave_single_file("eagle3/head", "eagle3/head_bin", "model.safetensors", "pytorch_model.bin", ["config.json"])
    resave_single_file("lora/all_r4", "lora/all_r4_bin", "adapter_model.safetensors", "adapter_model.bin",
                       ["adapter_config.json"])
    make_opt_bin()
    make_gpt2_bin_legacy()
    make_qwen2_bin_sharded()
    make_misc()


if __name__ == "__main__":
    main()
