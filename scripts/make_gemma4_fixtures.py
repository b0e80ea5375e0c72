"""Writes the Gemma 4 language-model fixtures that tests/models/hf_fixture_test.cpp reads
(tests/fixtures/gemma4_*), as make_fixtures.py writes the others: a tiny random Gemma4ForCausalLM
(transformers, fp32, eager attention), saved with save_pretrained, and expected.json with its
logits of every prompt position, its cached decode logits and its greedy continuation.

  gemma4_dense   31B-like: attention_k_eq_v, the full layers' global_head_dim twice the sliding
                 head_dim with fewer KV heads (num_global_key_value_heads), proportional RoPE with
                 partial_rotary_factor 0.25, a 2:1 sliding/full pattern, a sliding window (8) the
                 longest prompt passes, final_logit_softcapping.
  gemma4_e2b     E2B-like: per-layer inputs, num_kv_shared_layers with use_double_wide_mlp, no k_eq_v.
  gemma4_moe     26B-A4B-like: the MoE block (8 experts, top-2) beside the dense MLP, k_eq_v.
  gemma4_mm      gemma4_dense's weights saved as a Gemma4ForConditionalGeneration (the text model's
                 tensors under model.language_model., config.json a Gemma4Config without towers):
                 the reference is the same weights run by Gemma4ForCausalLM.

randomize() (make_fixtures.py) leaves the router's scale and per_expert_scale at 0.1 N(0, 1) like
other vectors, and layer_scalar (a buffer) at 1: they are set here to 1 + 0.2 N(0, 1), so each
shows in the logits. Run: python3 scripts/make_gemma4_fixtures.py [NAME...] (reuses make_fixtures.py's
virtual environment).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402

SEEDS = {"gemma4_dense": 4400, "gemma4_e2b": 4401, "gemma4_moe": 4402, "gemma4_mm": 4400}
ROPE = {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}


def gemma4_config(**kw):
    """A tiny Gemma 4 text config; kw overrides."""
    c = mf.base_config(vocab_size=128, hidden_size=32, intermediate_size=48, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=16, global_head_dim=32, num_hidden_layers=6,
                       sliding_window=8, rms_norm_eps=1e-6, tie_word_embeddings=True,
                       hidden_activation="gelu_pytorch_tanh", pad_token_id=0, final_logit_softcapping=10.0,
                       layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2,
                       rope_parameters=ROPE, hidden_size_per_layer_input=0)
    c.pop("rope_theta")
    c.update(kw)
    return c


def fixtures():
    return {
        "gemma4_dense": gemma4_config(attention_k_eq_v=True, num_global_key_value_heads=1),
        "gemma4_e2b": gemma4_config(hidden_size_per_layer_input=8, vocab_size_per_layer_input=128,
                                    num_kv_shared_layers=2, use_double_wide_mlp=True),
        "gemma4_moe": gemma4_config(num_hidden_layers=3, layer_types=["sliding_attention", "sliding_attention",
                                                                      "full_attention"],
                                    attention_k_eq_v=True, num_global_key_value_heads=1, enable_moe_block=True,
                                    num_experts=8, top_k_experts=2, moe_intermediate_size=16),
        "gemma4_mm": gemma4_config(attention_k_eq_v=True, num_global_key_value_heads=1),
    }


def new_model(kw, seed):
    """mf.new_model, then the router scales and the layer scalars set (module docstring)."""
    import torch
    model = mf.new_model("Gemma4TextConfig", "Gemma4ForCausalLM", kw, seed)
    g = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if name.endswith(("router.scale", "router.per_expert_scale", "layer_scalar")):
                t.copy_(1.0 + 0.2 * torch.randn(t.shape, generator=g))
    return model


def make_mm(name, kw, seed):
    """gemma4_mm (module docstring): config.json a Gemma4Config (no vision or audio config), the
    text model's tensors as model.language_model.*, the reference Gemma4ForCausalLM's."""
    import torch
    import transformers
    from safetensors.torch import save_file
    model = new_model(kw, seed)
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    full = transformers.Gemma4Config(text_config=model.config.to_dict(), vision_config=None, audio_config=None,
                                     image_token_id=120, video_token_id=121, audio_token_id=122)
    full.architectures = ["Gemma4ForConditionalGeneration"]
    tensors = {k.replace("model.", "model.language_model.", 1): v.contiguous()
               for k, v in model.state_dict().items() if k.startswith("model.")}
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(full.to_json_string())
    cases = mf.run_cases(model, kw["vocab_size"], decode_logits=True)
    mf.write_expected(out_dir, name, f"transformers {transformers.__version__}, torch {torch.__version__}, "
                                     f"Gemma4ForCausalLM (saved as Gemma4ForConditionalGeneration), fp32, eager "
                                     f"attention, seed {seed}", kw["vocab_size"], cases)


def main():
    mf.ensure_venv(__file__)
    names = sys.argv[1:] or list(fixtures())
    unknown = set(names) - set(fixtures())
    if unknown:
        sys.exit(f"unknown fixtures {sorted(unknown)}; known: {', '.join(fixtures())}")
    for name in names:
        kw = fixtures()[name]
        if name == "gemma4_mm":
            make_mm(name, kw, SEEDS[name])
        else:  # make()'s decode logits are recorded for names with "gemma" in them
            mf.make(name, "Gemma4TextConfig", "Gemma4ForCausalLM", kw, SEEDS[name], model=new_model(kw, SEEDS[name]))


if __name__ == "__main__":
    main()
