#!/usr/bin/env python3
"""Writes the LoRA reference fixtures that tests/models/lora_test.cpp and the engine/server
LoRA tests read.

Two tiny random PEFT adapters for the committed tests/fixtures/llama checkpoint, saved with PEFT's
save_pretrained (adapter_config.json + adapter_model.safetensors) into tests/fixtures/lora/<name>/:
  all_r4:    r=4, lora_alpha=8, every Llama target (q,k,v,o,gate,up,down): scale alpha/r = 2
  rslora_qv: r=4, lora_alpha=8, use_rslora (scale alpha/sqrt(r) = 4), targets q_proj, v_proj,
             down_proj only (a subset: the fused q|k|v output gets q and v rows, not k)
and for each an expected.json in the format of scripts/make_fixtures.py (transformers+PEFT fp32
logits at every prompt position, greedy continuation).

PEFT initialises lora_B to zero (the adapter starts as a no-op); the script draws A and B at
random so every adapter changes the logits clearly.

Run: python3 scripts/make_lora_fixtures.py. It re-runs itself in .brigade/fixtures-venv (the
environment of make_fixtures.py), installing peft there too on first use.
"""
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures  # noqa: E402

BASE = make_fixtures.OUT / "llama"
OUT = make_fixtures.OUT / "lora"

ADAPTERS = {
    "all_r4": dict(r=4, lora_alpha=8, use_rslora=False,
                   target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                   seed=11),
    "rslora_qv": dict(r=4, lora_alpha=8, use_rslora=True, target_modules=["q_proj", "v_proj", "down_proj"],
                      seed=12),
}


def ensure_peft():
    python = make_fixtures.VENV / "bin" / "python"
    if Path(sys.prefix).resolve() == make_fixtures.VENV.resolve():
        return
    if python.exists() and subprocess.run([str(python), "-c", "import peft"], capture_output=True).returncode != 0:
        subprocess.check_call([str(python), "-m", "pip", "install", "peft"])
    make_fixtures.ensure_venv(__file__)


def make(name, spec):
    import peft
    import torch
    import transformers
    base = transformers.LlamaForCausalLM.from_pretrained(BASE, torch_dtype=torch.float32)
    base.config._attn_implementation = "eager"
    config = peft.LoraConfig(r=spec["r"], lora_alpha=spec["lora_alpha"], use_rslora=spec["use_rslora"],
                             target_modules=spec["target_modules"], lora_dropout=0.0, bias="none",
                             task_type="CAUSAL_LM")
    model = peft.get_peft_model(base, config).eval()
    g = torch.Generator().manual_seed(spec["seed"])
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "lora_A" in pname or "lora_B" in pname:
                # A ~ N(0, 1/in), B ~ N(0, 1/r): the adapter's output is of the order of the base's.
                p.copy_(torch.randn(p.shape, generator=g) * p.shape[1] ** -0.5)
    out_dir = OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    (out_dir / "README.md").unlink(missing_ok=True)
    cfg = out_dir / "adapter_config.json"
    # The absolute path of this machine's checkout says nothing to the tests: keep it relative.
    cfg.write_text(cfg.read_text().replace(str(BASE), "tests/fixtures/llama"))
    cases = make_fixtures.run_cases(model, base.config.vocab_size, decode_logits=False)
    make_fixtures.write_expected(out_dir, "lora/" + name,
                                 f"transformers {transformers.__version__}, peft {peft.__version__}, "
                                 f"torch {torch.__version__}, LlamaForCausalLM + LoRA, fp32, eager attention, "
                                 f"seed {spec['seed']}", base.config.vocab_size, cases)


def main():
    ensure_peft()
    for name, spec in ADAPTERS.items():
        make(name, spec)


if __name__ == "__main__":
    main()
