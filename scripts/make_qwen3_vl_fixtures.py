#!/usr/bin/env python3
"""Writes tests/fixtures/qwen3_vl/ and tests/fixtures/qwen3_vl_moe/ (and the Qwen3.5 ones below):
tiny random Qwen3VLForConditionalGeneration and Qwen3VLMoeForConditionalGeneration checkpoints and
transformers' outputs on them, in the format of scripts/make_qwen_vl_fixtures.py (read its
docstring), which the tower tests (tests/models/qwen_vision_test.cpp) and the language-model
tests compare with.

The checkpoint is the Hub's Qwen3-VL form at tiny size: config.json as Qwen/Qwen3-VL-8B-Instruct's
(text fields under text_config with rope_scaling {mrope_interleaved, mrope_section, rope_type},
vision_config beside it), model.safetensors under transformers 5's names, which the Hub
checkpoints use (`model.visual.*`, `model.language_model.*`, `lm_head`); the script reloads the
directory with from_pretrained and checks that it reproduces the logits. Text model: Qwen3 (q/k
norms) of 3 layers, hidden 64, 4 query and 2 KV heads of 16, interleaved M-RoPE sections [2, 3, 3].
Tower: 3 blocks of width 32 (2 heads of 16), LayerNorm, fc1 / gelu_pytorch_tanh / fc2 of 48,
full attention, a 6 x 6 grid of learned position embeddings (resampled to each image's grid),
patches of 4x4 pixels over 2 frames, merge 2, merger to 64, DeepStack taps after blocks 0 and 1
(their features are added to the language model's image rows after its layers 0 and 1).
The processor file is Qwen3-VL's form (size.shortest_edge / longest_edge, mean and std 0.5).
Qwen3-VL-MoE: the same, its text model a Qwen3-MoE (4 experts of 48, top 2, every layer sparse;
the router's top-k weights always renormalised), its experts stored as the Hub's checkpoints
store them: fused and transposed, mlp.experts.gate_up_proj [E, hidden, 2 I] (gate columns, then
up) and mlp.experts.down_proj [E, I, hidden] (transformers transposes both when it loads them;
the reload check below goes through that; 2 I differs from hidden, or transformers could not tell
the layouts apart).

expected.json: as make_qwen_vl_fixtures.py's, plus per image `deepstack`: one [tokens, 64] list
per tap (get_image_features' deepstack_features).

tests/fixtures/qwen3_5_vl/ and tests/fixtures/qwen3_5_moe_vl/: the same for Qwen3.5
(Qwen3_5ForConditionalGeneration) and Qwen3.5-MoE (Qwen3_5MoeForConditionalGeneration), which
tests/models/qwen_vl_model_test.cpp and tests/actors/engine_vision_qwen_test.cpp read. config.json
in the Hub's Qwen3.5 form: model_type qwen3_5 (qwen3_5_moe), text_config qwen3_5_text
(qwen3_5_moe_text) with rope_parameters {rope_type, rope_theta, partial_rotary_factor,
mrope_section, mrope_interleaved}, vision_config of model_type qwen3_5 (qwen3_5_moe), which
transformers reads as qwen3_5_vision (qwen3_5_moe_vision). Text model: 4 layers, Gated DeltaNet
(linear_attention) at layers 0 and 2 (2 key heads of 16 serving 4 value heads of 8, a 4-tap conv,
in_proj_qkv / in_proj_z / in_proj_b / in_proj_a apart), gated full attention at layers 1 and 3 (4
query and 2 KV heads of 32, q/k norms, the output gate in q_proj), zero-centred (1 + w) RMSNorms,
interleaved M-RoPE over the first half of each head (partial_rotary_factor 0.5: 16 of 32 dims,
sections [2, 3, 3] of its 8 frequencies), a SwiGLU of 96. Qwen3.5-MoE: every layer's MLP 4 experts
of 24 (top 2 of a softmax, always renormalised) beside a sigmoid-gated shared expert of 32; the
experts stored as save_pretrained writes them (and as tests/fixtures/qwen3_5_moe stores them): one
tensor per expert, mlp.experts.{e}.gate_proj / up_proj [24, 64] and down_proj [64, 24]. Tower:
Qwen3-VL's above without DeepStack (no taps, no deepstack_merger_list), so these expected.json
images carry no `deepstack`. The processor file, images and prompts are the Qwen3-VL fixtures'.
Besides the reload check (which also requires from_pretrained to report no missing, unexpected or
mismatched weights), the script checks that the images and the M-RoPE positions matter: case 0's
logits move with another image's pixels in the first image's place, and with plain 1D positions.

Run: python3 scripts/make_qwen3_vl_fixtures.py [NAME...] (the named families, default all;
re-runs itself inside .brigade/fixtures-venv). CI never runs it: the fixtures are committed.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import OUT, ensure_venv, randomize  # noqa: E402
from make_image_fixtures import ensure_pillow  # noqa: E402
import make_qwen_vl_fixtures as q2  # noqa: E402

GRIDS, PATCH, MERGE, TEMPORAL = q2.GRIDS, q2.PATCH, q2.MERGE, q2.TEMPORAL
IMAGE, VISION_START, VISION_END = q2.IMAGE, q2.VISION_START, q2.VISION_END

CONFIG = {
    "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl", "image_token_id": IMAGE, "video_token_id": q2.VIDEO,
    "vision_start_token_id": VISION_START, "vision_end_token_id": VISION_END, "tie_word_embeddings": False,
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "head_dim": 16,
        "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 96,
        "max_position_embeddings": 4096, "model_type": "qwen3_vl_text", "num_attention_heads": 4,
        "num_hidden_layers": 3, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
        "rope_scaling": {"mrope_interleaved": True, "mrope_section": [2, 3, 3], "rope_type": "default"},
        "rope_theta": 5000000, "tie_word_embeddings": False, "use_cache": True, "vocab_size": 320,
        "dtype": "float32"},
    "vision_config": {
        "deepstack_visual_indexes": [0, 1], "depth": 3, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 32,
        "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 48, "model_type": "qwen3_vl",
        "num_heads": 2, "num_position_embeddings": 36, "out_hidden_size": 64, "patch_size": PATCH,
        "spatial_merge_size": MERGE, "temporal_patch_size": TEMPORAL},
}

MOE_CONFIG = {
    **CONFIG, "architectures": ["Qwen3VLMoeForConditionalGeneration"], "model_type": "qwen3_vl_moe",
    "text_config": {**CONFIG["text_config"], "model_type": "qwen3_vl_moe_text", "num_experts": 4,
                    "num_experts_per_tok": 2, "moe_intermediate_size": 48, "decoder_sparse_step": 1,
                    "mlp_only_layers": []},
    "vision_config": {**CONFIG["vision_config"], "model_type": "qwen3_vl_moe"},
}

QWEN3_5_CONFIG = {
    "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "image_token_id": IMAGE,
    "video_token_id": q2.VIDEO, "vision_start_token_id": VISION_START, "vision_end_token_id": VISION_END,
    "tie_word_embeddings": False,
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "head_dim": 32,
        "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 96,
        "layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention"],
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16, "linear_num_key_heads": 2,
        "linear_num_value_heads": 4, "linear_value_head_dim": 8, "max_position_embeddings": 4096,
        "model_type": "qwen3_5_text", "num_attention_heads": 4, "num_hidden_layers": 4, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                            "mrope_section": [2, 3, 3], "mrope_interleaved": True},
        "tie_word_embeddings": False, "use_cache": True, "vocab_size": 320, "dtype": "float32"},
    # Qwen3-VL's tower without DeepStack; the Hub's Qwen3.5 configs name its model_type qwen3_5.
    "vision_config": {**{k: v for k, v in CONFIG["vision_config"].items() if k != "deepstack_visual_indexes"},
                      "model_type": "qwen3_5"},
}

# Qwen3_5MoeTextConfig takes no intermediate_size (every layer is sparse).
QWEN3_5_MOE_CONFIG = {
    **QWEN3_5_CONFIG, "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
    "text_config": {**{k: v for k, v in QWEN3_5_CONFIG["text_config"].items() if k != "intermediate_size"},
                    "model_type": "qwen3_5_moe_text", "num_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 24, "shared_expert_intermediate_size": 32},
    "vision_config": {**QWEN3_5_CONFIG["vision_config"], "model_type": "qwen3_5_moe"},
}


def hub_layout(state):
    """Qwen3-VL-MoE's fused experts as the Hub stores them: transposed."""
    def one(key, v):
        if key.endswith("mlp.experts.gate_up_proj") or key.endswith("mlp.experts.down_proj"):
            return v.transpose(1, 2)
        return v
    return {k: one(k, v) for k, v in state.items()}


def per_expert_layout(state):
    """Qwen3.5-MoE's experts as save_pretrained writes them (transformers' qwen3_5_moe_text
    conversion, reversed): the fused gate_up_proj [E, 2 I, hidden] (gate rows, then up) and
    down_proj [E, hidden, I] as mlp.experts.{e}.gate_proj / up_proj / down_proj.weight."""
    out = {}
    for k, v in state.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            pre, inter = k[:-len("gate_up_proj")], v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{pre}{e}.gate_proj.weight"] = v[e, :inter]
                out[f"{pre}{e}.up_proj.weight"] = v[e, inter:]
        elif k.endswith("mlp.experts.down_proj"):
            pre = k[:-len("down_proj")]
            for e in range(v.shape[0]):
                out[f"{pre}{e}.down_proj.weight"] = v[e]
        else:
            out[k] = v
    return out


FAMILIES = {
    "qwen3_vl": dict(seed=5353, model_cls="Qwen3VLForConditionalGeneration", config=CONFIG,
                     layout=hub_layout, deepstack=True),
    "qwen3_vl_moe": dict(seed=5454, model_cls="Qwen3VLMoeForConditionalGeneration", config=MOE_CONFIG,
                         layout=hub_layout, deepstack=True),
    "qwen3_5_vl": dict(seed=5555, model_cls="Qwen3_5ForConditionalGeneration", config=QWEN3_5_CONFIG,
                       layout=dict, deepstack=False),
    "qwen3_5_moe_vl": dict(seed=5656, model_cls="Qwen3_5MoeForConditionalGeneration", config=QWEN3_5_MOE_CONFIG,
                           layout=per_expert_layout, deepstack=False),
}

PROCESSOR = {
    "image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": "Qwen3VLProcessor",
    "size": {"shortest_edge": 16 * 16, "longest_edge": 128 * 128}, "patch_size": PATCH,
    "temporal_patch_size": TEMPORAL, "merge_size": MERGE, "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
}


def preprocess(images_u8):
    """pixel_values of each image by transformers' PIL Qwen2VLImageProcessor with PROCESSOR."""
    import torch
    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    kw = {k: v for k, v in PROCESSOR.items() if k not in ("image_processor_type", "processor_class")}
    proc = Qwen2VLImageProcessorPil(**kw)
    out = []
    for img, (h, w) in zip(images_u8, GRIDS):
        p = proc(images=Image.fromarray(img, "RGB"), return_tensors="np")
        assert p["image_grid_thw"].tolist() == [[1, h, w]], p["image_grid_thw"]
        out.append(torch.from_numpy(p["pixel_values"]).to(torch.float32))
    return out


def build(out_dir, fam):
    import torch
    import transformers
    from safetensors.torch import save_file
    SEED, MODEL_CLS = fam["seed"], fam["model_cls"]
    (out_dir / "config.json").write_text(json.dumps(fam["config"], indent=2) + "\n")
    config = transformers.AutoConfig.from_pretrained(out_dir)
    config._attn_implementation = "eager"
    for sub in (config.text_config, config.vision_config):
        sub._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = getattr(transformers, MODEL_CLS)(config).to(torch.float32).eval()
    randomize(model, SEED)
    g = torch.Generator().manual_seed(SEED + 1)
    visual = model.model.visual
    with torch.no_grad():
        # randomize() gives *embed* tensors unit variance: the patch embedding is a convolution
        # over 96 inputs, and the position embeddings are added to its output.
        w = visual.patch_embed.proj.weight
        w.copy_(torch.randn(w.shape, generator=g) * w[0].numel() ** -0.5)
        visual.pos_embed.weight.copy_(0.5 * torch.randn(visual.pos_embed.weight.shape, generator=g))
    state = {k: v.contiguous() for k, v in fam["layout"](model.state_dict()).items()}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return model


def tower_features(model, pixels):
    import torch
    grids = torch.tensor([[1, h, w] for h, w in GRIDS])
    with torch.no_grad():
        each = [model.model.get_image_features(pv, grids[i:i + 1]) for i, pv in enumerate(pixels)]
        together = model.model.get_image_features(torch.cat(pixels), grids)
    out = []
    for i, e in enumerate(each):
        assert torch.allclose(e.pooler_output[0], together.pooler_output[i], atol=1e-5)
        deep = [d[0] for d in getattr(e, "deepstack_features", None) or []]  # none in Qwen3.5
        for k, d in enumerate(deep):
            assert torch.allclose(d, together.deepstack_features[k][i], atol=1e-5)
        out.append((e.pooler_output[0], deep))
    return out


def check_images_and_mrope_matter(model, ids, pv, want, seed):
    """Case 0 (one image, GRIDS[0]): another random image's pixels in its place move the logits
    after the image and leave those before it; so do plain 1D positions (arange, as for text)."""
    import torch
    thw = torch.tensor([[1, *GRIDS[0]]])
    types = (ids == IMAGE).int()
    first = int(types[0].argmax())  # the first image row; the rows before it read text only
    other = preprocess([q2.random_images(seed + 3)[0]])[0]
    assert not torch.equal(other, pv)
    moved = model(input_ids=ids, pixel_values=other, image_grid_thw=thw, mm_token_type_ids=types).logits[0]
    assert torch.allclose(moved[:first], want[:first], atol=1e-5), "the rows before the image cannot see it"
    assert (moved - want).abs().max() > 1e-2, "the image's pixels should move the logits"
    flat = torch.arange(ids.shape[1])[None]
    plain = model(input_ids=ids, pixel_values=pv, image_grid_thw=thw, mm_token_type_ids=types,
                  position_ids=flat).logits[0]
    assert torch.allclose(plain[:first + 1], want[:first + 1], atol=1e-5), "M-RoPE is 1D up to the first image row"
    assert (plain - want).abs().max() > 1e-2, "the M-RoPE positions should move the logits"


def check_weights_load(out_dir, model_cls):
    """from_pretrained on the written directory finds every weight and no other."""
    import transformers
    _, info = getattr(transformers, model_cls).from_pretrained(out_dir, attn_implementation="eager",
                                                               output_loading_info=True)
    assert not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")), info


def make(NAME, fam):
    import torch
    import transformers
    SEED, MODEL_CLS = fam["seed"], fam["model_cls"]
    out_dir = OUT / NAME
    out_dir.mkdir(parents=True, exist_ok=True)
    model = build(out_dir, fam)
    images_u8 = q2.random_images(SEED + 2)
    pixels = preprocess(images_u8)
    features = tower_features(model, pixels)
    cases = [q2.run_case(model, pixels, prompt, which) for prompt, which in q2.PROMPTS]
    with torch.no_grad():
        ids = torch.tensor([cases[0]["prompt"]])
        want = model(input_ids=ids, pixel_values=pixels[0], image_grid_thw=torch.tensor([[1, *GRIDS[0]]]),
                     mm_token_type_ids=(ids == IMAGE).int()).logits[0]
        if fam["deepstack"]:
            # The DeepStack features matter: without them the logits move (so the tests can fail).
            plain = model.model.language_model
            saved = plain._deepstack_process
            plain._deepstack_process = lambda h, m, e: h
            without = model(input_ids=ids, pixel_values=pixels[0], image_grid_thw=torch.tensor([[1, *GRIDS[0]]]),
                            mm_token_type_ids=(ids == IMAGE).int()).logits[0]
            plain._deepstack_process = saved
            assert (without - want).abs().max() > 1e-2, "DeepStack should move the logits"
        else:
            check_images_and_mrope_matter(model, ids, pixels[0], want, SEED)
    q2.check_reload(out_dir, MODEL_CLS, pixels, cases[0], want)
    if not fam["deepstack"]:
        check_weights_load(out_dir, MODEL_CLS)
    expected = {
        "generator": f"transformers {transformers.__version__}, torch {torch.__version__}, "
                     f"{MODEL_CLS}, fp32, eager attention, seed {SEED}",
        "vocab_size": fam["config"]["text_config"]["vocab_size"],
        "patch_size": PATCH, "merge": MERGE, "temporal_patch": TEMPORAL,
        "image_token": IMAGE, "vision_start": VISION_START, "vision_end": VISION_END,
        "images": [{"grid_thw": [1, h, w], "pixel_values": q2.rounded(pv.tolist(), 9),
                    "features": q2.rounded(f.tolist()),
                    **({"deepstack": [q2.rounded(d.tolist()) for d in deep]} if fam["deepstack"] else {})}
                   for (h, w), pv, (f, deep) in zip(GRIDS, pixels, features)],
        "cases": cases,
    }
    q2.write_fixture(out_dir, NAME, expected, images_u8[0], PROCESSOR)


def main():
    """python3 scripts/make_qwen3_vl_fixtures.py [NAME...]: the named families, or all of them."""
    ensure_venv(__file__)
    names = sys.argv[1:] or list(FAMILIES)
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        sys.exit(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    ensure_pillow()
    for name in names:
        make(name, FAMILIES[name])


if __name__ == "__main__":
    main()
