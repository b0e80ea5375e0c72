#!/usr/bin/env python3
"""Writes the EAGLE-3 fixtures (tests/fixtures/eagle3/) that tests/models/eagle3_test.cpp and
tests/actors/engine_eagle3_test.cpp read.

Two tiny transformers Llama targets (fp32, eager attention), each with an EAGLE-3 head saved as
the Hub's LlamaForCausalLMEagle3 checkpoints are (config.json with draft_vocab_size,
target_hidden_size, eagle_config; model.safetensors with fc.weight, midlayer.*, norm.weight,
lm_head.weight, d2t (int64), t2d (bool), and embed_tokens.weight where the head has its own):

- target/ + head/: a random 5-layer target (hidden 32, GQA 4 / 2 heads) and a random head of
  hidden 24 (target_hidden_size 32, its own embedding, draft vocabulary 96 of 256,
  eagle_aux_hidden_state_layer_ids [0, 2, 4] under eagle_config, llama3 RoPE scaling).
  expected.json holds, per prompt, the sequence t = prompt + the target's greedy tokens, the
  head's teacher-forced draft logits (row i reads t_{i+1} and fc of the target's residual
  stream entering the aux layers at position i) and the chain of N_DRAFT drafts from the last
  row, each fed the previous draft and the head's own pre-norm output (vLLM's hidden_prenorm).
- bigram_target/ + bigram_head/: a 3-layer target edited so that its next token depends on the
  current one only (every o_proj and down_proj zero, each 8-wide chunk of an embedding row of
  norm sqrt(8)), and a head edited so that its first draft is exactly the target's next token:
  q = k = 10 * the normed embedding (a row attends to itself), v = o = identity, fc and
  down_proj zero, the target's final norm, lm_head the target's rows over a draft vocabulary
  that holds every token the target can emit; it uses the target's embedding (no
  embed_tokens) and vLLM's default aux layers (2, L / 2, L - 3). expected.json: the target's
  greedy continuations (transformers generate).

Beside other targets (VARIANTS; vLLM captures their aux hidden states as Llama's, the residual
entering a layer), each with a random head and expected.json's "variants" entry holding its
cases as above:
- qwen2_target/ + qwen2_head/: a random 3-layer Qwen2 target (q/k/v biases, tied embeddings), a
  Hub-layout head with its own embedding, aux ids [0, 1, 2] under eagle_config;
- qwen3_target/ + qwen3_head/: a random 4-layer Qwen3 target (q/k norms), a head as the Hub's
  LlamaForCausalLMEagle3 of the target's hidden size on the target's embedding,
  eagle_aux_hidden_state_layer_ids [1, 2, 3] at the top level;
- qwen3_moe_target/ + qwen3_moe_head/: a random 3-layer Qwen3-MoE target (4 experts, top-2, layer 1
  dense), a head in the speculators layout (Eagle3Speculator: config.json with
  speculators_model_type eagle3, transformer_layer_config, speculators_config; tensors under
  layers.0.*, its own embed_tokens) of hidden 24, norm_before_residual true (the residual is
  hidden_norm(x)), vLLM's default aux layers;
and qwen3_bigram_target/ + qwen3_bigram_head/: the edited pair above on a Qwen3 target, the head in
the speculators layout with norm_before_residual true and its own copy of the target's embedding
(expected.json's "qwen3_bigram_cases").

The reference head composes transformers' own LlamaAttention (its q/k/v widened to 2 x hidden
input columns), LlamaMLP, LlamaRMSNorm and LlamaRotaryEmbedding exactly as vLLM's
llama_eagle3.py does (eagle3_forward). Run: python3 scripts/make_eagle3_fixtures.py (reuses
make_fixtures.py's virtual environment).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402

OUT = mf.OUT / "eagle3"
N_DRAFT = 3
SEED = 4242
PROMPTS = [[1, 17, 42, 99, 200, 3, 77], [1] + [(i * 37 + 11) % 250 + 3 for i in range(23)]]
N_GREEDY = 8

TARGET = mf.base_config(hidden_size=32, intermediate_size=64, num_hidden_layers=5, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=8)
HEAD = dict(hidden_size=24, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
            vocab_size=256, draft_vocab_size=96, target_hidden_size=32, max_position_embeddings=256,
            rms_norm_eps=1e-5, rope_theta=500000.0,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 16},
            aux=[0, 2, 4], own_embedding=True)
BIGRAM_TARGET = mf.base_config(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                               num_key_value_heads=4, head_dim=8)
QWEN3_TARGET = mf.base_config(hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6)
QWEN3_HEAD = dict(hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                  vocab_size=256, draft_vocab_size=96, target_hidden_size=32, max_position_embeddings=256,
                  rms_norm_eps=1e-6, rope_theta=1000000.0, aux=[1, 2, 3], aux_top_level=True, own_embedding=False)
QWEN3_MOE_TARGET = mf.base_config(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
                                  num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6, num_experts=4,
                                  num_experts_per_tok=2, moe_intermediate_size=16, norm_topk_prob=True,
                                  mlp_only_layers=[1])
QWEN3_MOE_HEAD = dict(hidden_size=24, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                      vocab_size=256, draft_vocab_size=64, target_hidden_size=32, max_position_embeddings=256,
                      rms_norm_eps=1e-6, rope_theta=1000000.0, aux=None, own_embedding=True, speculators=True,
                      norm_before_residual=True)
QWEN2_TARGET = mf.base_config(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6, tie_word_embeddings=True)
QWEN2_HEAD = dict(hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                  vocab_size=256, draft_vocab_size=128, target_hidden_size=32, max_position_embeddings=256,
                  rms_norm_eps=1e-6, rope_theta=1000000.0, aux=[0, 1, 2], own_embedding=True)
# name -> (target config class, target model class, target config, head, seed)
VARIANTS = {
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", QWEN2_TARGET, QWEN2_HEAD, SEED + 50),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", QWEN3_TARGET, QWEN3_HEAD, SEED + 20),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", QWEN3_MOE_TARGET, QWEN3_MOE_HEAD, SEED + 30),
}
QWEN3_BIGRAM_TARGET = mf.base_config(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
                                     num_key_value_heads=4, head_dim=8, rms_norm_eps=1e-6)
BIGRAM_HEAD = dict(hidden_size=32, intermediate_size=32, num_attention_heads=4, num_key_value_heads=4, head_dim=8,
                   vocab_size=256, target_hidden_size=32, max_position_embeddings=256, rms_norm_eps=1e-5,
                   rope_theta=10000.0, aux=None, own_embedding=False)


def head_config_json(h, draft_vocab, verifier=None):
    """config.json as LlamaForCausalLMEagle3 checkpoints write it, or (h["speculators"]) as the
    speculators library writes an Eagle3Speculator's: the layer's llama config under
    transformer_layer_config, the EAGLE-3 fields at the top level."""
    layer = {"model_type": "llama", "num_hidden_layers": 1, "hidden_act": "silu", "tie_word_embeddings": False,
             "bos_token_id": 1, "eos_token_id": 2}
    for k in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
              "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta"):
        layer[k] = h[k]
    if "rope_scaling" in h:
        layer["rope_scaling"] = h["rope_scaling"]
    if h.get("speculators"):
        layer.update(attention_bias=False, mlp_bias=False)
        c = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.2.0",
             "transformer_layer_config": layer, "draft_vocab_size": draft_vocab,
             "target_hidden_size": h["target_hidden_size"], "norm_before_residual": h["norm_before_residual"],
             "norm_before_fc": False, "fc_norm": False, "norm_output": False,
             "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                                    "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": N_DRAFT,
                                                          "accept_tolerance": 0.0, "verifier_accept_k": 1}],
                                    "verifier": {"name_or_path": "../" + verifier[0], "architectures": [verifier[1]]}}}
        if h["aux"] is not None:
            c["eagle_aux_hidden_state_layer_ids"] = h["aux"]
        return c
    c = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
         "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
         "draft_vocab_size": draft_vocab}
    for k in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
              "vocab_size", "target_hidden_size", "max_position_embeddings", "rms_norm_eps", "rope_theta"):
        c[k] = h[k]
    if "rope_scaling" in h:
        c["rope_scaling"] = h["rope_scaling"]
    if h["aux"] is not None and h.get("aux_top_level"):
        c["eagle_aux_hidden_state_layer_ids"] = h["aux"]
    elif h["aux"] is not None:
        c["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": h["aux"], "use_aux_hidden_state": True}
    return c


def new_head(h, target):
    """The head's modules: transformers' LlamaAttention with q/k/v over 2 x hidden columns (as
    vLLM's llama_eagle3.LlamaDecoderLayer overrides qkv_proj), LlamaMLP, four LlamaRMSNorms,
    fc, lm_head over the draft vocabulary, and its own embedding where it has one."""
    import torch
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import (LlamaAttention, LlamaMLP, LlamaRMSNorm,
                                                          LlamaRotaryEmbedding)
    kw = {k: h[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                            "head_dim", "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta")}
    if "rope_scaling" in h:
        kw["rope_scaling"] = dict(h["rope_scaling"], rope_theta=h["rope_theta"])
    cfg = LlamaConfig(num_hidden_layers=1, **kw)
    cfg._attn_implementation = "eager"
    H, dv = h["hidden_size"], h.get("draft_vocab_size", h["vocab_size"])
    attn = LlamaAttention(cfg, layer_idx=0)
    hd, nq, nkv = h["head_dim"], h["num_attention_heads"], h["num_key_value_heads"]
    attn.q_proj = torch.nn.Linear(2 * H, nq * hd, bias=False)
    attn.k_proj = torch.nn.Linear(2 * H, nkv * hd, bias=False)
    attn.v_proj = torch.nn.Linear(2 * H, nkv * hd, bias=False)
    head = torch.nn.Module()
    head.self_attn = attn
    head.mlp = LlamaMLP(cfg)
    for name in ("input_layernorm", "hidden_norm", "post_attention_layernorm", "norm"):
        setattr(head, name, LlamaRMSNorm(H, eps=h["rms_norm_eps"]))
    head.fc = torch.nn.Linear(3 * target.config.hidden_size, H, bias=False)
    head.lm_head = torch.nn.Linear(H, dv, bias=False)
    if h["own_embedding"]:
        head.embed_tokens = torch.nn.Embedding(h["vocab_size"], H)
    head.config = cfg  # randomize reads config.model_type
    head.norm_before_residual = h.get("norm_before_residual", False)
    head.rotary = LlamaRotaryEmbedding(cfg)
    return head.to(torch.float32).eval()


def head_tensors(head, d2t, vocab, layer="midlayer"):
    """The checkpoint's tensors under the Hub's names (the layer under `midlayer.`, or the
    speculators layout's `layers.0.`)."""
    import torch
    t = {"fc.weight": head.fc.weight, "norm.weight": head.norm.weight, "lm_head.weight": head.lm_head.weight}
    for name in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
        t[f"{layer}.{name}.weight"] = getattr(head, name).weight
    for p in ("q_proj", "k_proj", "v_proj", "o_proj"):
        t[f"{layer}.self_attn.{p}.weight"] = getattr(head.self_attn, p).weight
    for p in ("gate_proj", "up_proj", "down_proj"):
        t[f"{layer}.mlp.{p}.weight"] = getattr(head.mlp, p).weight
    if hasattr(head, "embed_tokens"):
        t["embed_tokens.weight"] = head.embed_tokens.weight
    t = {k: v.detach().clone().contiguous() for k, v in t.items()}
    t["d2t"] = torch.tensor(d2t, dtype=torch.int64)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[[i + d for i, d in enumerate(d2t)]] = True
    t["t2d"] = t2d
    return t


def save_head(head, h, d2t, out_dir, verifier=None):
    from safetensors.torch import save_file
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(head_config_json(h, len(d2t), verifier), indent=2) + "\n")
    layer = "layers.0" if h.get("speculators") else "midlayer"
    save_file(head_tensors(head, d2t, h["vocab_size"], layer), str(out_dir / "model.safetensors"),
              metadata={"format": "pt"})


def aux_layers(h, target):
    n = target.config.num_hidden_layers
    return h["aux"] if h["aux"] is not None else [2, n // 2, n - 3]


def aux_states(target, tokens, layers):
    """vLLM's aux_hidden_states: the residual stream entering each layer (the hidden states a
    forward pre-hook of decoder layer j sees: layer 0's are the embeddings), concatenated:
    [n, 3 target hidden]."""
    import torch
    seen = {}
    hooks = []
    for j, layer in enumerate(target.model.layers):
        def hook(module, args, kwargs, j=j):
            seen[j] = (args[0] if args else kwargs["hidden_states"])[0].detach().clone()
        hooks.append(layer.register_forward_pre_hook(hook, with_kwargs=True))
    try:
        target(torch.tensor([tokens]))
    finally:
        for h in hooks:
            h.remove()
    return torch.cat([seen[j] for j in layers], dim=-1)


def eagle3_forward(head, target, tokens, x):
    """vLLM's llama_eagle3 LlamaModel.forward over rows 0..m-1 at positions 0..m-1 (causal):
    rows read tokens[i] with hidden input x[i] ([m, hidden]: fc's output or an earlier row's
    pre-norm output). Returns (pre-norm output [m, hidden], draft logits [m, draft vocab])."""
    import torch
    ids = torch.tensor([tokens])
    embed = head.embed_tokens if hasattr(head, "embed_tokens") else target.model.embed_tokens
    e = head.input_layernorm(embed(ids))
    cat = torch.cat([e, head.hidden_norm(x[None])], dim=-1)
    m = len(tokens)
    pos = torch.arange(m)[None]
    mask = torch.full((m, m), float("-inf")).triu(1)[None, None]
    a, _ = head.self_attn(cat, position_embeddings=head.rotary(cat, pos), attention_mask=mask)
    # The residual is the hidden input itself, or its hidden_norm with norm_before_residual.
    hid = a + (head.hidden_norm(x[None]) if head.norm_before_residual else x[None])
    pre = head.mlp(head.post_attention_layernorm(hid)) + hid
    return pre[0], head.lm_head(head.norm(pre))[0]


def greedy(target, prompt):
    import torch
    ids = torch.tensor([prompt])
    return target.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=N_GREEDY,
                           min_new_tokens=N_GREEDY, pad_token_id=0, eos_token_id=None)[0].tolist()


def case(head, target, to_target, layers, prompt):
    """One expected.json case of the random pair (module docstring); checks causality: every
    chain step's earlier rows give the teacher-forced logits again."""
    import torch
    fmt = lambda rows: [[float(f"{v:.8g}") for v in row.tolist()] for row in rows]
    tokens = greedy(target, prompt)
    x = head.fc(aux_states(target, tokens, layers))[:-1]
    nexts = tokens[1:]
    pre, logits = eagle3_forward(head, target, nexts, x)
    draft_logits = logits
    drafts, chain = [], []
    for _ in range(N_DRAFT):
        drafts.append(to_target[int(logits[-1].argmax())])
        chain.append(logits[-1])
        nexts, x = nexts + [drafts[-1]], torch.cat([x, pre[-1:]])
        pre, logits = eagle3_forward(head, target, nexts, x)
        assert torch.allclose(logits[:len(draft_logits)], draft_logits, rtol=0, atol=1e-5)
    return {"tokens": tokens, "target_greedy_from": len(prompt), "draft_logits": fmt(draft_logits),
            "chain_drafts": drafts, "chain_logits": fmt(chain)}


def save_target(target, out_dir):
    out_dir.mkdir(parents=True, exist_ok=True)
    target.save_pretrained(out_dir, safe_serialization=True)
    (out_dir / "generation_config.json").unlink(missing_ok=True)


def make_random(cfg_cls="LlamaConfig", model_cls="LlamaForCausalLM", target_kw=TARGET, h=HEAD, seed=SEED, prefix=""):
    """A random target and head, saved under <prefix>target/ and <prefix>head/; their cases."""
    import torch
    target = mf.new_model(cfg_cls, model_cls, target_kw, seed)
    head = new_head(h, target)
    mf.randomize(head, seed + 1)
    g = torch.Generator().manual_seed(seed + 2)
    subset = sorted(torch.randperm(h["vocab_size"], generator=g)[:h["draft_vocab_size"]].tolist())
    d2t = [t - i for i, t in enumerate(subset)]
    save_target(target, OUT / f"{prefix}target")
    save_head(head, h, d2t, OUT / f"{prefix}head", (f"{prefix}target", model_cls))
    layers = aux_layers(h, target)
    with torch.no_grad():
        cases = [case(head, target, subset, layers, p) for p in PROMPTS]
    top = {row.index(max(row)) for c in cases for row in c["draft_logits"]}
    assert len(top) > 1, f"degenerate head: every row's argmax is {top}"
    return cases, layers


def make_bigram(cfg_cls="LlamaConfig", model_cls="LlamaForCausalLM", target_kw=BIGRAM_TARGET, base_head=BIGRAM_HEAD,
                seed=SEED + 10, prefix="bigram_"):
    """The edited pair (module docstring), saved under <prefix>target/ and <prefix>head/; asserts
    the head's first draft is the target's next token at every row of every case."""
    import torch
    target = mf.new_model(cfg_cls, model_cls, target_kw, seed)
    hd = target_kw["head_dim"]
    with torch.no_grad():
        for layer in target.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            for name, p in layer.mlp.named_parameters():
                if "down_proj" in name:
                    p.zero_()
        emb = target.model.embed_tokens.weight
        chunks = emb.view(emb.shape[0], -1, hd)
        chunks.mul_(hd ** 0.5 / chunks.norm(dim=-1, keepdim=True))
        normed = target.model.norm(target.model.embed_tokens.weight)
        emits = sorted(set(target.lm_head(normed).argmax(dim=-1).tolist()))
    subset = sorted(set(emits) | set(range(3, 3 + max(0, 48 - len(emits)))))
    h = dict(base_head, draft_vocab_size=len(subset))
    head = new_head(h, target)
    H = h["hidden_size"]
    with torch.no_grad():
        for p in head.parameters():
            p.zero_()
        eye = torch.eye(H)
        head.self_attn.q_proj.weight[:, :H] = 10.0 * eye
        head.self_attn.k_proj.weight[:, :H] = 10.0 * eye
        head.self_attn.v_proj.weight[:, :H] = eye
        head.self_attn.o_proj.weight.copy_(eye)
        head.mlp.gate_proj.weight.normal_(0, H ** -0.5)
        head.mlp.up_proj.weight.normal_(0, H ** -0.5)
        for name in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
            getattr(head, name).weight.fill_(1.0)
        head.norm.weight.copy_(target.model.norm.weight)
        head.lm_head.weight.copy_(target.lm_head.weight[subset])
        if hasattr(head, "embed_tokens"):  # the speculators layout stores its copy of the target's
            head.embed_tokens.weight.copy_(target.model.embed_tokens.weight)
    save_target(target, OUT / f"{prefix}target")
    d2t = [t - i for i, t in enumerate(subset)]
    save_head(head, h, d2t, OUT / f"{prefix}head", (f"{prefix}target", model_cls))
    layers = aux_layers(h, target)
    cases = []
    with torch.no_grad():
        for prompt in PROMPTS:
            tokens = greedy(target, prompt)
            x = head.fc(aux_states(target, tokens, layers))[:-1]
            _, logits = eagle3_forward(head, target, tokens[1:], x)
            drafts = [subset[int(i)] for i in logits.argmax(dim=-1)]
            want = target(torch.tensor([tokens])).logits[0, 1:].argmax(dim=-1).tolist()
            assert drafts == want, f"the edited head misses the target's next tokens: {drafts} vs {want}"
            cases.append({"prompt": prompt, "greedy": tokens[len(prompt):]})
    return cases, layers


def main():
    mf.ensure_venv(__file__)
    import torch
    import transformers
    cases, layers = make_random()
    bigram, bigram_layers = make_bigram()
    variants = {}
    for name, (cfg_cls, model_cls, target_kw, h, seed) in VARIANTS.items():
        v_cases, v_layers = make_random(cfg_cls, model_cls, target_kw, h, seed, f"{name}_")
        variants[name] = {"aux_layers": v_layers, "speculators": bool(h.get("speculators")),
                          "norm_before_residual": bool(h.get("norm_before_residual")), "cases": v_cases}
    qwen3_bigram, qwen3_bigram_layers = make_bigram(
        "Qwen3Config", "Qwen3ForCausalLM", QWEN3_BIGRAM_TARGET,
        dict(BIGRAM_HEAD, rms_norm_eps=1e-6, own_embedding=True, speculators=True, norm_before_residual=True),
        SEED + 40, "qwen3_bigram_")
    expected = {"generator": f"transformers {transformers.__version__}, torch {torch.__version__}, LlamaForCausalLM, "
                             f"Qwen2ForCausalLM, Qwen3ForCausalLM and Qwen3MoeForCausalLM targets (fp32, eager attention, seed {SEED}) "
                             "and EAGLE-3 heads composed as vLLM's llama_eagle3.py from transformers' Llama modules",
                "aux_layers": layers, "n_draft": N_DRAFT, "cases": cases,
                "bigram_aux_layers": bigram_layers, "bigram_cases": bigram, "variants": variants,
                "qwen3_bigram_aux_layers": qwen3_bigram_layers, "qwen3_bigram_cases": qwen3_bigram}
    (OUT / "expected.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")
    size = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"eagle3: {size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
