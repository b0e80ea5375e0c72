#!/usr/bin/env python3
"""Writes the FP8 checkpoint fixtures that tests/models (hf_fixture_test.cpp, fp8_checkpoint_test.cpp,
weight_quant_test.cpp, tensor_parallel_test.cpp) and tests/gpu/fp8_checkpoint_test.cpp read.

Each fixture is a tiny random transformers model (as scripts/make_fixtures.py builds them) whose
linear weights are stored the way the Hub's FP8 checkpoints store them, in
tests/fixtures/<name>/ (config.json with quantization_config + model.safetensors), and
expected.json with the logits and greedy tokens of the dequantized model (fp32, eager attention):

  qwen3_fp8_block     quant_method "fp8" (Qwen3-*-FP8, DeepSeek-V3): F8_E4M3 weights with F32
                      weight_scale_inv per 32x32 block, modules_to_not_convert [lm_head]. The
                      reference is transformers itself loading the fp8 checkpoint on the CPU
                      (its FineGrainedFP8 quantizer dequantizes there: weight = q * scale_inv).
  glm4_moe_fp8_block  the same method with 32x32 blocks on GLM-4.5's layout (make_fixtures.py's
                      glm4_moe config): q/k/v/o, the dense MLP, every expert and the shared expert.
  deepseek_v3_fp8_block  the same method with 24x40 blocks, so blocks end mid-matrix at the tail
                      (as DeepSeek-V3's 576-row kv_a_proj_with_mqa does with 128). transformers
                      refuses such grids, so the reference dequantizes in torch exactly as
                      DeepSeek's weight_dequant does (block (i, j) covers rows [i br, min((i+1) br,
                      rows)), likewise columns) and runs the fp32 model on those weights.
  llama_ct_channel    quant_method "compressed-tensors", weights num_bits 8 float, strategy
                      channel (BF16 weight_scale [rows, 1]); ignore [lm_head].
  llama_ct_tensor     the same with strategy tensor (F32 weight_scale [1]).
For compressed-tensors the reference is transformers with the compressed-tensors package
decompressing the checkpoint (run_compressed=False: weight = q * scale in the fp32 model); the
script also prints how far transformers' default run_compressed=True (fp8 activations per token,
what vLLM computes) is from it. transformers' dequantized weights are checked equal to the
script's own torch dequantization rounded to the scales' dtype (transformers multiplies in it);
with F32 scales its logits are the reference (checked within 1e-4 of the script's), with BF16
scales (llama_ct_channel) and for deepseek the script's exact fp32 product is.
Quantization itself follows transformers' FineGrainedFP8 quantizer (scale = 448 / amax per
block, q = clamp(w * scale).to(float8_e4m3fn), stored scale_inv = 1 / scale) and
compressed-tensors' (scale = amax / 448, q = clamp(w / scale)). Tensors that stay unquantized are
stored BF16, as in the real checkpoints.

Also writes tests/fixtures/fp8/e4m3.json: torch.float8_e4m3fn's f32 value of every byte.

Run: python3 scripts/make_fp8_fixtures.py [NAME...] (make_fixtures.py's virtual environment, plus
accelerate and compressed-tensors from PyPI).
"""
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402

FP8_MAX = 448.0


def fixtures():
    """name -> (config class, model class, config kwargs, quantization_config)."""
    fp8 = lambda br, bc: {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                          "weight_block_size": [br, bc], "modules_to_not_convert": ["lm_head"]}
    ct = lambda strategy: {
        "quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": strategy, "symmetric": True, "dynamic": False,
                        "group_size": None, "block_structure": None},
            "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "symmetric": True,
                                  "dynamic": True},
            "output_activations": None}},
        "ignore": ["lm_head"], "kv_cache_scheme": None}
    return {
        "qwen3_fp8_block": ("Qwen3Config", "Qwen3ForCausalLM", mf.base_config(head_dim=32, rms_norm_eps=1e-6),
                            fp8(32, 32)),
        "deepseek_v3_fp8_block": ("DeepseekV3Config", "DeepseekV3ForCausalLM", mf.deepseek_config(
            q_lora_rank=24, n_group=4, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5,
            rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                             "original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0,
                             "mscale": 1.0, "mscale_all_dim": 0.7}), fp8(24, 40)),
        "llama_ct_channel": ("LlamaConfig", "LlamaForCausalLM", mf.base_config(), ct("channel")),
        "llama_ct_tensor": ("LlamaConfig", "LlamaForCausalLM", mf.base_config(), ct("tensor")),
        # GLM-4.5-FP8 / GLM-4.5-Air-FP8's method (the DeepSeek-V3 one, 128x128 blocks there) on the
        # glm4_moe fixture's layout: attention, dense MLP, every expert and the shared expert fp8;
        # the router, its selection bias and lm_head not. Last here, so the entries above keep
        # their seeds.
        "glm4_moe_fp8_block": ("Glm4MoeConfig", "Glm4MoeForCausalLM", mf.fixtures()["glm4_moe"][2], fp8(32, 32)),
    }


def is_linear_weight(name):
    """The nn.Linear weights of these architectures (not embeddings, norms, lm_head or routers)."""
    return name.endswith("_proj.weight") or name.endswith("_proj_with_mqa.weight")


def quant_block(w, br, bc):
    """transformers' FineGrainedFP8 quantization, the grid padded at the tail: (q, scale_inv)."""
    import torch
    rows, cols = w.shape
    nr, nc = -(-rows // br), -(-cols // bc)
    pad = torch.zeros(nr * br, nc * bc, dtype=torch.float32)
    pad[:rows, :cols] = w
    blocks = pad.reshape(nr, br, nc, bc).permute(0, 2, 1, 3)
    scale = FP8_MAX / blocks.abs().amax(dim=(-1, -2))
    q = (blocks * scale[..., None, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    q = q.permute(0, 2, 1, 3).reshape(nr * br, nc * bc)[:rows, :cols].contiguous()
    return q, scale.reciprocal().to(torch.float32).contiguous()


def dequant_block(q, scale_inv, br, bc):
    """DeepSeek's weight_dequant: every element times its block's scale_inv, in fp32."""
    rows, cols = q.shape
    s = scale_inv.repeat_interleave(br, 0)[:rows].repeat_interleave(bc, 1)[:, :cols]
    return q.float() * s


def quant_ct(w, strategy, scale_dtype):
    """compressed-tensors' float8 quantization: (q, weight_scale) with scale = amax / 448."""
    import torch
    amax = w.abs().amax(dim=1, keepdim=True) if strategy == "channel" else w.abs().amax().reshape(1)
    scale = (amax / FP8_MAX).to(scale_dtype)
    q = (w / scale.float()).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale.contiguous()


def quantize(state, quant):
    """The checkpoint's tensors (fp8 weights + scales, the rest BF16) and the dequantized fp32 ones."""
    import torch
    stored, dequant = {}, {}
    for name, w in state.items():
        if not is_linear_weight(name):
            stored[name] = w.to(torch.bfloat16).contiguous()
            dequant[name] = stored[name].float()
        elif quant["quant_method"] == "fp8":
            br, bc = quant["weight_block_size"]
            stored[name], stored[name + "_scale_inv"] = quant_block(w.float(), br, bc)
            dequant[name] = dequant_block(stored[name], stored[name + "_scale_inv"], br, bc)
        else:
            strategy = quant["config_groups"]["group_0"]["weights"]["strategy"]
            scale_dtype = torch.bfloat16 if strategy == "channel" else torch.float32
            stored[name], stored[name + "_scale"] = quant_ct(w.float(), strategy, scale_dtype)
            dequant[name] = stored[name].float() * stored[name + "_scale"].float()
    return stored, dequant


def load_fp32(model_cls, path, quantization_config=None):
    import torch
    import transformers
    kw = {"quantization_config": quantization_config} if quantization_config is not None else {}
    model = getattr(transformers, model_cls).from_pretrained(path, dtype=torch.float32, attn_implementation="eager", **kw)
    return model.eval()


def check_weights(model, stored, dequant):
    """Asserts that transformers' dequantized linear weights are ours rounded to the scales' dtype
    (the dtype it multiplies in); returns that dtype."""
    import torch
    scale_dtype = next(v.dtype for k, v in stored.items() if k.endswith("_scale") or k.endswith("_scale_inv"))
    params = dict(model.named_parameters())
    checked = 0
    for name, w in dequant.items():
        if is_linear_weight(name) and name in params:
            assert torch.equal(params[name].detach(), w.to(scale_dtype).float()), name
            checked += 1
    assert checked > 0
    print(f"transformers' dequantized weights equal ours ({checked} checked, {scale_dtype})")
    return scale_dtype


def max_logit_diff(a, b):
    return max(abs(x - y) for ca, cb in zip(a, b) for ra, rb in zip(ca["logits"], cb["logits"]) for x, y in zip(ra, rb))


def make(name, config_cls, model_cls, kw, quant, seed):
    import torch
    import transformers
    from safetensors.torch import save_file
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        state, config_json = mf.hub_checkpoint(config_cls, model_cls, kw, seed, tmp)
        stored, dequant = quantize(state, quant)
        save_file(dequant, str(Path(tmp) / "model.safetensors"), metadata={"format": "pt"})
        reference = mf.run_cases(load_fp32(model_cls, tmp), kw["vocab_size"], "deepseek" in name or "glm4" in name)
    config_json["dtype"] = "bfloat16"
    config_json["quantization_config"] = quant
    (out_dir / "config.json").write_text(json.dumps(config_json, indent=2, sort_keys=True) + "\n")
    save_file(stored, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    generator = "dequantized in torch (float8_e4m3fn) as the quantizer defines"
    ct = quant["quant_method"] == "compressed-tensors"
    try:
        # compressed-tensors: run_compressed=False decompresses the weights (q * scale) into the
        # fp32 model; the default run_compressed=True also quantizes activations per token to fp8.
        qc = transformers.CompressedTensorsConfig(run_compressed=False) if ct else None
        theirs = load_fp32(model_cls, str(out_dir), qc)
        scale_dtype = check_weights(theirs, stored, dequant)
        if scale_dtype == torch.float32:
            got = mf.run_cases(theirs, kw["vocab_size"], "deepseek" in name or "glm4" in name)
            diff = max_logit_diff(got, reference)
            print(f"{name}: transformers loading the fp8 checkpoint itself: max |logit diff| {diff:.3g}")
            assert diff < 1e-4, diff
            reference = got
            generator = ("transformers + compressed-tensors decompressing the checkpoint (run_compressed=False)" if ct
                         else "transformers' FineGrainedFP8 quantizer dequantizing the fp8 checkpoint on the CPU")
        else:  # transformers rounds q * scale to the scale's dtype; vLLM and brigade keep it exact
            generator = ("dequantized in torch in fp32 (q * scale); transformers + compressed-tensors "
                         "decompresses to the same weights rounded to bf16 (checked)")
        if ct:
            fake = mf.run_cases(load_fp32(model_cls, str(out_dir)), kw["vocab_size"], False)
            print(f"{name}: with fp8 activations (run_compressed=True): max |logit diff| "
                  f"{max_logit_diff(fake, reference):.3g}")
    except Exception as e:  # noqa: BLE001 (reported: transformers refuses block grids with a partial tail)
        print(f"{name}: transformers cannot load the fp8 checkpoint itself: {type(e).__name__}: {str(e)[:200]}")
        if "deepseek" not in name and "glm4" not in name:
            raise
    mf.write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, {model_cls}, "
                                     f"fp32, eager attention, seed {seed}; weights {generator}",
                      kw["vocab_size"], reference)


def write_e4m3_table():
    import torch
    values = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).to(torch.float32).tolist()
    out = mf.OUT / "fp8"
    out.mkdir(parents=True, exist_ok=True)
    table = {"generator": f"torch {torch.__version__}: torch.arange(256, dtype=uint8).view(float8_e4m3fn).float()",
             "values": [v if v == v else "nan" for v in values]}
    (out / "e4m3.json").write_text(json.dumps(table) + "\n")


EXTRA_PACKAGES = ["accelerate", "compressed-tensors"]  # transformers' FP8 and compressed-tensors loaders


def ensure_extra_packages():
    import importlib.util
    import subprocess
    if not all(importlib.util.find_spec(m) for m in ("accelerate", "compressed_tensors")):
        subprocess.check_call([sys.executable, "-m", "pip", "install", *EXTRA_PACKAGES])


def main():
    mf.ensure_venv(__file__)
    ensure_extra_packages()
    names = sys.argv[1:]
    unknown = set(names) - set(fixtures()) - {"e4m3"}
    if unknown:
        sys.exit(f"unknown fixtures {sorted(unknown)}; known: e4m3, {', '.join(fixtures())}")
    if not names or "e4m3" in names:
        write_e4m3_table()
    for seed, (name, (config_cls, model_cls, kw, quant)) in enumerate(fixtures().items()):
        if not names or name in names:
            make(name, config_cls, model_cls, kw, quant, 2000 + seed)


if __name__ == "__main__":
    main()
