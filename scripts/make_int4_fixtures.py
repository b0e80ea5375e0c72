#!/usr/bin/env python3
"""Writes the int4 weight-only checkpoint fixtures that tests/models/int4_checkpoint_test.cpp (and
hf_fixture_test.cpp, tensor_parallel_test.cpp) read.

Each fixture is a tiny random transformers model (as scripts/make_fixtures.py builds them) saved in
the Hub layout (one tensor per expert), whose linear layers (every *_proj.weight; not the
embeddings, norms, lm_head or MoE routers, which stay BF16 as in the real checkpoints) are
quantized round-to-nearest per group and packed by the quantization packages' OWN packing code:

  qwen3_gptq_g32        quant_method gptq, sym, group 32, desc_act false, the original format
                        (stored zero 7 = 8 - 1). Packed by auto-gptq 0.7.1's QuantLinear.pack
                        (nn_modules/qlinear/qlinear_cuda.py); dequantized by that module's own
                        torch path (its forward on the CPU: scales[g_idx] * (q - (zero + 1))).
  llama_gptq_act_order  gptq, sym false (zero points), group 32, desc_act true: g_idx from a random
                        column permutation as GPTQ's act-order makes it; checkpoint_format gptq.
  qwen3_awq_g32         quant_method awq, version gemm, group 32, zero points. Packed by AutoAWQ
                        0.2.9's WQLinear_GEMM.from_linear (awq/modules/linear/gemm.py, the 0,2,4,6,
                        1,3,5,7 nibble order); dequantized by awq.utils.packing_utils.dequantize_gemm.
  llama_ct_w4a16        compressed-tensors pack-quantized, symmetric, group 32, BF16 scales
                        (RedHat *-quantized.w4a16): scales from compressed_tensors' calculate_qparams,
                        packed by its PackedQuantizationCompressor.
  qwen3_ct_w4a16_asym   the same, asymmetric with strategy channel (packed weight_zero_point).
  qwen3_moe_ct_w4a16    qwen3_moe with every expert's and attention's projections quantized as
                        llama_ct_w4a16 (the routers stay BF16).

Neither AutoGPTQ nor AutoAWQ installs on a CPU-only machine with today's torch, and transformers runs
their checkpoints only on a GPU, so the script takes the two pure-Python modules it needs from the
packages' own distributions (pip download, no dependencies, into .brigade/int4-pkgs) and imports
them without the packages' __init__ (which pull in CUDA extensions). For every packed layer, the
package's dequantizer must give exactly s * (q - z) computed in fp32 from the script's integer codes
(asserted), and the reference is transformers' fp32 model (eager attention) on those dequantized
weights. For compressed-tensors, transformers itself loads the packed checkpoint
(CompressedTensorsConfig(run_compressed=False) decompresses it); its weights are checked equal to the
exact fp32 product rounded to the scales' dtype (it multiplies in BF16), and the exact product is the
reference (what brigade computes; BF16 rounding would move logits by ~1e-3).

expected.json also records, per case, act_q8_max_diff and act_q8_greedy (as make_gguf_fixtures.py
does): how far the logits move when the Linear layers' inputs are rounded to Q8_0 blocks, the
error of the CPU's Q4_0 kernels on the fixtures whose groups repack exactly to Q4_0.

Run: python3 scripts/make_int4_fixtures.py [NAME...] (make_fixtures.py's virtual environment plus
accelerate and compressed-tensors from PyPI, and the two package sources above; Python 3.11 for
auto-gptq's wheel).
"""
import importlib.util
import json
import subprocess
import sys
import tempfile
import types
import zipfile
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
import make_fp8_fixtures as fp8  # noqa: E402

PKGS = mf.ROOT / ".brigade" / "int4-pkgs"
AUTO_GPTQ = "auto-gptq==0.7.1"
AUTOAWQ = "autoawq==0.2.9"
GROUP = 32


def ct_config(strategy, symmetric, group_size):
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
            "config_groups": {"group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 4, "type": "int", "strategy": strategy, "symmetric": symmetric,
                            "dynamic": False, "group_size": group_size, "actorder": None, "observer": "minmax"},
                "input_activations": None, "output_activations": None}},
            "ignore": ["lm_head"], "kv_cache_scheme": None}


def fixtures():
    """name -> (config class, model class, config kwargs, quantization_config)."""
    gptq = lambda sym, desc_act: {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "sym": sym,
                                  "desc_act": desc_act, "damp_percent": 0.01, "true_sequential": True,
                                  "checkpoint_format": "gptq", "static_groups": False}
    awq = {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True, "version": "gemm",
           "modules_to_not_convert": None}
    moe = mf.base_config(head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                         decoder_sparse_step=1, norm_topk_prob=True, mlp_only_layers=[])
    return {
        "qwen3_gptq_g32": ("Qwen3Config", "Qwen3ForCausalLM", mf.base_config(head_dim=16, rms_norm_eps=1e-6),
                           gptq(True, False)),
        "llama_gptq_act_order": ("LlamaConfig", "LlamaForCausalLM", mf.base_config(), gptq(False, True)),
        "qwen3_awq_g32": ("Qwen3Config", "Qwen3ForCausalLM", mf.base_config(head_dim=16), awq),
        "llama_ct_w4a16": ("LlamaConfig", "LlamaForCausalLM", mf.base_config(), ct_config("group", True, GROUP)),
        "qwen3_ct_w4a16_asym": ("Qwen3Config", "Qwen3ForCausalLM", mf.base_config(head_dim=16),
                                ct_config("channel", False, None)),
        "qwen3_moe_ct_w4a16": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", moe, ct_config("group", True, GROUP)),
    }


def is_linear_weight(name):
    return name.endswith("_proj.weight")


# --- the packages' own modules ---------------------------------------------------------------

def fetch(spec, binary):
    """The distribution file of `spec` in PKGS (pip download, no dependencies)."""
    PKGS.mkdir(parents=True, exist_ok=True)
    name = spec.split("==")[0].replace("-", "_")
    have = [p for p in PKGS.iterdir() if p.name.lower().replace("-", "_").startswith(name) and p.is_file()]
    if not have:
        subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(PKGS), spec,
                               "--only-binary" if binary else "--no-binary", ":all:"])
        have = [p for p in PKGS.iterdir() if p.name.lower().replace("-", "_").startswith(name) and p.is_file()]
    return have[0]


def package_root(spec, binary, top):
    """The directory holding package `top` unpacked from `spec`'s distribution."""
    dist = fetch(spec, binary)
    out = PKGS / dist.name.split(".tar")[0].split(".whl")[0]
    if not out.exists():
        if dist.suffix == ".whl":
            zipfile.ZipFile(dist).extractall(out)
        else:
            with tarfile.open(dist) as t:
                t.extractall(out)
    return next(p.parent for p in out.rglob(top) if p.is_dir() and (p / "__init__.py").exists())


def import_without_init(root, dotted):
    """Imports module `dotted` from `root` with every enclosing package an empty namespace (their
    __init__ files import CUDA extensions and whole model zoos)."""
    parts = dotted.split(".")
    for i in range(1, len(parts)):
        pkg = ".".join(parts[:i])
        if pkg not in sys.modules:
            m = types.ModuleType(pkg)
            m.__path__ = [str(root.joinpath(*parts[:i]))]
            sys.modules[pkg] = m
    spec = importlib.util.spec_from_file_location(dotted, root.joinpath(*parts[:-1], parts[-1] + ".py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[dotted] = mod
    spec.loader.exec_module(mod)
    return mod


# --- round-to-nearest codes (the integers every packer is given) -------------------------------

def rtn(w, group, sym, scale_dtype):
    """Per row and group of `group` input columns (-1: the whole row): (scale [rows, groups] in
    scale_dtype's values, zero [rows, groups] int in [1, 15], q [rows, cols] int in [0, 15]) with
    w ~ scale * (q - zero); sym: zero 8 and scale = amax / 7.5 (GPTQ's sym rule)."""
    import torch
    rows, cols = w.shape
    g = cols if group < 0 else group
    wg = w.reshape(rows, cols // g, g)
    if sym:
        scale = wg.abs().amax(dim=-1) / 7.5
        zero = torch.full_like(scale, 8.0)
    else:
        lo = wg.amin(dim=-1).clamp(max=0.0)
        hi = wg.amax(dim=-1).clamp(min=0.0)
        scale = (hi - lo) / 15.0
        # AutoGPTQ's original format stores zero - 1 as uint32: a zero of 0 would wrap and spill into
        # the other nibbles (its known bug), so zeros stay in [1, 15].
        zero = torch.round(-lo / scale).clamp(1, 15)
    scale = scale.to(scale_dtype).float()
    q = torch.clamp(torch.round(wg / scale[..., None]) + zero[..., None], 0, 15).reshape(rows, cols)
    return scale, zero, q


def expand(t, g_idx):
    """[rows, groups] -> [rows, cols] by each column's group."""
    return t[:, g_idx.long()]


# --- packers ------------------------------------------------------------------------------------

def pack_gptq(ag, w, sym, desc_act, seed):
    """auto-gptq's QuantLinear.pack of w's RTN codes; (tensors, dequantized by auto-gptq)."""
    import torch
    rows, cols = w.shape
    g_idx = torch.arange(cols, dtype=torch.int32) // GROUP
    if desc_act:  # GPTQ's act-order: groups follow a permutation of the columns
        perm = torch.randperm(cols, generator=torch.Generator().manual_seed(seed))
        g_idx = torch.empty(cols, dtype=torch.int32)
        g_idx[perm] = torch.arange(cols, dtype=torch.int32) // GROUP
    # codes per column group: quantize each group's columns together
    scale = torch.zeros(rows, cols // GROUP)
    zero = torch.zeros(rows, cols // GROUP)
    q = torch.zeros(rows, cols)
    for gi in range(cols // GROUP):
        idx = (g_idx == gi).nonzero().flatten()
        s, z, qq = rtn(w[:, idx], -1, sym, torch.float16)
        scale[:, gi], zero[:, gi], q[:, idx] = s[:, 0], z[:, 0], qq
    exact = (q - expand(zero, g_idx)) * expand(scale, g_idx)
    linear = torch.nn.Linear(cols, rows, bias=False)
    linear.weight.data = exact.clone()
    mod = ag.QuantLinear(4, GROUP, cols, rows, False, weight_dtype=torch.float32)
    mod.pack(linear, scale.clone(), zero.clone(), g_idx.clone())
    with torch.no_grad():  # the module's own dequantization (its CPU path), in fp32
        theirs = mod(torch.eye(cols)).t().contiguous()
    assert torch.equal(theirs, exact), "auto-gptq's dequantization differs from s * (q - z)"
    tensors = {"qweight": mod.qweight, "qzeros": mod.qzeros, "scales": mod.scales.to(torch.float16),
               "g_idx": mod.g_idx.to(torch.int32)}
    return tensors, exact


def pack_awq(awq, w):
    """AutoAWQ's WQLinear_GEMM.from_linear of w's RTN codes; (tensors, dequantized by AutoAWQ)."""
    import torch
    rows, cols = w.shape
    s, z, q = rtn(w, GROUP, False, torch.float16)
    g = torch.arange(cols) // GROUP
    exact = (q - expand(z, g)) * expand(s, g)
    linear = torch.nn.Linear(cols, rows, bias=False)
    linear.weight.data = exact.clone()
    mod = awq.gemm.WQLinear_GEMM.from_linear(linear, 4, GROUP, scales=s.t().contiguous(), zeros=z.t().contiguous())
    theirs = awq.packing.dequantize_gemm(mod.qweight, mod.qzeros, mod.scales.float(), 4, GROUP).t()
    assert torch.equal(theirs, exact), "AutoAWQ's dequantization differs from s * (q - z)"
    return {"qweight": mod.qweight, "qzeros": mod.qzeros, "scales": mod.scales.to(torch.float16)}, exact


def pack_ct(w, quant):
    """compressed-tensors' PackedQuantizationCompressor over calculate_qparams' scales; (tensors,
    the exact fp32 product of its codes)."""
    import torch
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from compressed_tensors.quantization.utils import calculate_qparams
    wargs = quant["config_groups"]["group_0"]["weights"]
    args = QuantizationArgs(**{k: v for k, v in wargs.items() if k != "observer"})
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    rows, cols = w.shape
    g = cols if args.group_size is None else args.group_size
    wg = w.reshape(rows, cols // g, g)
    scale, zp = calculate_qparams(wg.amin(dim=-1), wg.amax(dim=-1), args)
    scale = scale.to(torch.bfloat16)
    zp = torch.round(zp).to(torch.int8)
    state = {"weight": w.to(torch.bfloat16), "weight_scale": scale}
    if not args.symmetric:
        state["weight_zero_point"] = zp
    out = PackedQuantizationCompressor.compress(state, scheme)
    back = PackedQuantizationCompressor.decompress(dict(out, weight_scale=scale.float()), scheme)["weight"]
    return {k: v.contiguous() for k, v in out.items()}, back.float()


# --- fixtures -----------------------------------------------------------------------------------

def quantize(state, quant, seed):
    """The checkpoint's tensors (packed layers, the rest BF16) and the dequantized fp32 state."""
    import torch
    stored, dequant = {}, {}
    method = quant["quant_method"]
    ag = awq = None
    if method == "gptq":
        ag = import_without_init(package_root(AUTO_GPTQ, True, "auto_gptq"), "auto_gptq.nn_modules.qlinear.qlinear_cuda")
    if method == "awq":
        root = package_root(AUTOAWQ, False, "awq")
        awq = types.SimpleNamespace(gemm=import_without_init(root, "awq.modules.linear.gemm"),
                                    packing=import_without_init(root, "awq.utils.packing_utils"))
    for i, (name, w) in enumerate(sorted(state.items())):
        if not is_linear_weight(name):
            stored[name] = w.to(torch.bfloat16).contiguous()
            dequant[name] = stored[name].float()
            continue
        # The reference runs fp32 from BF16 weights, as a BF16 checkpoint would be quantized.
        w = w.to(torch.bfloat16).float()
        module = name[:-len(".weight")]
        if method == "gptq":
            tensors, dequant[name] = pack_gptq(ag, w, quant["sym"], quant["desc_act"], seed + i)
        elif method == "awq":
            tensors, dequant[name] = pack_awq(awq, w)
        else:
            tensors, dequant[name] = pack_ct(w, quant)
        for k, v in tensors.items():
            stored[f"{module}.{k}"] = v.contiguous()
    return stored, dequant


def check_ct_weights(model, dequant):
    """transformers + compressed-tensors decompress the checkpoint to our exact weights rounded to
    BF16 (the scales' dtype, which it multiplies in)."""
    import torch
    params = dict(model.named_parameters())
    checked = 0
    for name, w in dequant.items():
        if is_linear_weight(name) and name in params:
            assert torch.equal(params[name].detach().float(), w.to(torch.bfloat16).float()), name
            checked += 1
    assert checked > 0
    print(f"transformers' decompressed weights equal ours rounded to bf16 ({checked} checked)")


def make(name, config_cls, model_cls, kw, quant, seed):
    import torch
    import transformers
    from safetensors.torch import save_file
    import make_gguf_fixtures as mg
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        state, config_json = mf.hub_checkpoint(config_cls, model_cls, kw, seed, tmp)
        stored, dequant = quantize(state, quant, seed)
        save_file(dequant, str(Path(tmp) / "model.safetensors"), metadata={"format": "pt"})
        reference = getattr(transformers, model_cls).from_pretrained(tmp, dtype=torch.float32,
                                                                     attn_implementation="eager").eval()
        cases = mf.run_cases(reference, kw["vocab_size"], False)
        for c, (d, greedy) in zip(cases, mg.act_q8_runs(reference, cases, lambda n: not n.endswith("lm_head"))):
            c["act_q8_max_diff"] = d
            c["act_q8_greedy"] = greedy
    config_json["dtype"] = "bfloat16"
    config_json["quantization_config"] = quant
    (out_dir / "config.json").write_text(json.dumps(config_json, indent=2, sort_keys=True) + "\n")
    save_file(stored, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    method = quant["quant_method"]
    if method == "compressed-tensors":
        try:
            theirs = getattr(transformers, model_cls).from_pretrained(
                str(out_dir), dtype=torch.float32, attn_implementation="eager",
                quantization_config=transformers.CompressedTensorsConfig(run_compressed=False)).eval()
            check_ct_weights(theirs, dequant)
        except Exception as e:  # noqa: BLE001 (reported: the packed per-expert layout of an MoE)
            print(f"{name}: transformers cannot load the packed checkpoint itself: {type(e).__name__}: {str(e)[:300]}")
            if "moe" not in name:
                raise
        packer = f"compressed-tensors {importlib.metadata.version('compressed-tensors')}'s pack-quantized compressor"
    else:
        packer = {"gptq": f"{AUTO_GPTQ}'s QuantLinear.pack", "awq": f"{AUTOAWQ}'s WQLinear_GEMM.from_linear"}[method]
    mf.write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, {model_cls}, "
                                     f"fp32, eager attention, seed {seed}; weights packed by {packer}, the reference "
                                     f"on their exact fp32 dequantization s * (q - z)", kw["vocab_size"], cases)


def main():
    mf.ensure_venv(__file__)
    fp8.ensure_extra_packages()  # accelerate and compressed-tensors, as for the fp8 fixtures
    import importlib.metadata  # noqa: F401 (used in make)
    names = sys.argv[1:]
    unknown = set(names) - set(fixtures())
    if unknown:
        sys.exit(f"unknown fixtures {sorted(unknown)}; known: {', '.join(fixtures())}")
    for seed, (name, (config_cls, model_cls, kw, quant)) in enumerate(fixtures().items()):
        if not names or name in names:
            make(name, config_cls, model_cls, kw, quant, 4000 + seed)


if __name__ == "__main__":
    main()
