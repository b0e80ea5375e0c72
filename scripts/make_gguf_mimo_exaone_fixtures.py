#!/usr/bin/env python3
"""Writes the GGUF fixtures of llama.cpp's mimo2 (Xiaomi MiMo-V2-Flash) and exaone-moe (LG
K-EXAONE) architectures, made by llama.cpp's own converter (convert_hf_to_gguf.py:
conversion/mimo.py's MimoV2Model, exaone.py's ExaoneMoEModel) from tiny transformers checkpoints
of make_fixtures.py's mimo_v2_flash and exaone_moe shapes, made here with seeds of their own
(make_fixtures.new_model):

  gguf_mimo2        MiMoV2FlashForCausalLM as make_fixtures.py's mimo_v2_flash (layers 0 and 3 full
                    attention over 1 KV head, layers 1-2 windows of 8 over 2 KV heads with a sink
                    logit per head; q/k heads of 24, v heads of 16, values x 0.707; RoPE over the
                    first 8 dims, theta 5e4 full / 1e4 sliding; layer 0 a dense SwiGLU of 96, then 8
                    experts of 16, top 2 by sigmoid + e_score_correction_bias, renormalised) without
                    expert groups (n_group 1, the fixture's 2) and routed_scaling_factor 1 (the
                    fixture's 2.5): llama.cpp's mimo2 reads neither (its loader reads no
                    expert_weights_scale, so build_moe_ffn does not scale; MiMo-V2-Flash has
                    n_group 1 and routed_scaling_factor null = 1). --outtype f32 --no-mtp
  gguf_exaone_moe   ExaoneMoeForCausalLM as make_fixtures.py's exaone_moe (per-head q/k norms,
                    windows of 8 with RoPE on layers 0-2, layer 3 full without RoPE, pre-norm
                    layers; layer 0 a dense SwiGLU of 64, then 8 experts of 16, top 2 by sigmoid +
                    e_score_correction_bias, renormalised, x 2.5, one shared expert) without
                    expert groups (n_group 1; the fixture's 2); --outtype f32

config.json is given what the converter reads and transformers 5 does not write:
  - mimo2: the Hub config's hybrid_layer_pattern (1 = sliding, from layer_types),
    swa_num_key_value_heads (2 x num_key_value_heads, what MiMoV2FlashAttention builds),
    swa_head_dim / swa_num_attention_heads / swa_v_head_dim (asserted equal to the full layers'),
    topk_method noaux_tc, scoring_func sigmoid, and a flat rope_parameters (the full layers' theta
    and partial_rotary_factor) with swa_rope_theta in place of transformers' per-layer-type one:
    the converter loads config.json through transformers' AutoConfig and reads
    self.rope_parameters["partial_rotary_factor"], which the nested form has not. The
    converter then writes head_count_kv per block [1, 2, 2, 1], sliding_window 8 and its pattern,
    key_length 24 / value_length 16, rope.dimension_count int(24 * 0.334) = 8, rope.freq_base 5e4
    and freq_base_swa 1e4, attention.value_scale 0.707, the sinks as attn_sinks.weight. llama.cpp
    applies the value scale to o_proj's output (the same product) and the window as
    LLAMA_SWA_TYPE_STANDARD (key j visible to query i when i - j < 8, transformers' window).
  - exaone-moe: scoring_func sigmoid (ExaoneMoeConfig has none; llama.cpp's loader requires
    expert_gating_func, which the converter writes from it). The converter writes
    leading_dense_block_count 1, expert_shared_count 1, expert_weights_scale 2.5,
    expert_weights_norm true, the window pattern from layer_types; the Hub name of the selection
    bias, mlp.e_score_correction_bias, becomes exp_probs_b.bias.

python3 scripts/make_gguf_mimo_exaone_fixtures.py [NAME...] writes model.gguf and transformers'
expected.json, which tests/models/gguf_mimo_exaone_test.cpp compares brigade against;
--llamacpp [NAME...] (the llama-cpp-python venv) checks that llama.cpp runs each file to the
same logits (llamacpp.json). Measured when this script was written (max |logit diff| of llama.cpp
against transformers on the prompts of 7, 1 and 40 tokens):
  gguf_mimo2          1.4e-06, 1.0e-06, 1.8e-06
  gguf_exaone_moe     1.6e-06, 1.5e-06, 2.7e-06
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_gguf_lfm2_fixtures as lfm2  # noqa: E402
import make_gguf_qwen35_fixtures as q35  # noqa: E402

SOURCES = {
    "mimo2": ("mimo_v2_flash", {"n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0}, 3560),
    "exaone_moe": ("exaone_moe", {"n_group": 1, "topk_group": 1}, 3561),
}
# name: (source, --outtype, pre-tokenizer name)
FIXTURES = {
    "gguf_mimo2": ("mimo2", "f32", "gpt-2"),
    "gguf_exaone_moe": ("exaone_moe", "f32", "gpt-2"),
}


def hub_config(d, source):
    """config.json with the keys the converter reads (module docstring)."""
    path = Path(d) / "config.json"
    cfg = json.loads(path.read_text())
    cfg["scoring_func"] = "sigmoid"
    if source == "mimo2":
        rope = cfg.pop("rope_parameters")
        cfg["hybrid_layer_pattern"] = [int(t == "sliding_attention") for t in cfg["layer_types"]]
        cfg["swa_num_key_value_heads"] = 2 * cfg["num_key_value_heads"]
        cfg["swa_head_dim"] = cfg["head_dim"]
        cfg["swa_num_attention_heads"] = cfg["num_attention_heads"]
        cfg["swa_v_head_dim"] = cfg["v_head_dim"]
        cfg["topk_method"] = "noaux_tc"
        full = rope["full_attention"]
        cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": full["rope_theta"],
                                  "partial_rotary_factor": full["partial_rotary_factor"]}
        cfg["swa_rope_theta"] = rope["sliding_attention"]["rope_theta"]
    path.write_text(json.dumps(cfg, indent=2))


def build(sources, source, tmp):
    model, d = lfm2.build_source(sources, source, tmp)
    hub_config(d, source)
    return model, d


def convert(model_dir, outfile, outtype, pre):
    """MimoV2Model exports MTP layers unless --no-mtp (make_gguf_qwen35_fixtures.convert passes
    it); ExaoneMoEModel refuses the flag (lfm2.convert)."""
    if Path(model_dir).name == "mimo2":
        return q35.convert(model_dir, outfile, outtype, pre)
    return lfm2.convert(model_dir, outfile, outtype, pre)


def main():
    lfm2.run(SOURCES, FIXTURES, __file__, build=build, conv=convert)


if __name__ == "__main__":
    main()
