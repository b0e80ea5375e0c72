#!/usr/bin/env python3
"""Writes the ModernBERT fixtures that tests/models/modernbert_test.cpp and
tests/server/test_openai_modernbert.py read (docs/architecture.md "Encoders").

Each is a tiny random checkpoint made and saved with transformers (fp32; hidden 32, 2 heads of
16, 4 layers of which some are global and some local; local_attention 8, so a token of a local
layer sees 4 on either side and the longer prompts test the window), with a byte-level BPE tokenizer trained here by `tokenizers` whose TemplateProcessing
adds [CLS] $A [SEP] (pairs: [CLS] A [SEP] B [SEP]) as ModernBERT-base's does. expected.json holds
transformers' own outputs (eager attention) from the checkpoint as saved, read back with
from_pretrained:

  embed   ModernBertModel in the Hub's config layout (global_attn_every_n_layers 2: layers 0
          and 2 global; global_rope_theta 80000, local_rope_theta 20000; as
          answerdotai/ModernBERT-base and nomic-ai/modernbert-embed-base ship theirs), with sentence-transformers files (modules.json:
          mean pooling, Normalize, as modernbert-embed-base): `texts` (text -> ids ->
          last_hidden_state, and the normalized mean: the sentence embedding). The last text is
          longer than a local layer's window many times over.
  cls     ModernBertForSequenceClassification in transformers 5's layout (layer_types: every
          3rd layer global, so layers 0 and 3; rope_parameters: the default bases 160000 and
          10000), 3 labels (negative, neutral, positive), classifier_pooling cls, and
          every bias on (norm_bias, attention_bias, mlp_bias, classifier_bias): `texts` -> ids,
          logits and last_hidden_state.
  rerank  ModernBertForSequenceClassification, 1 label, classifier_pooling mean, as
          Alibaba-NLP/gte-reranker-modernbert-base: `pairs` tokenized as
          tokenizer(text=q, text_pair=d) -> ids, the logit and its sigmoid.

Run from anywhere: python3 scripts/make_modernbert_fixtures.py. It uses make_fixtures.py's virtual
environment (.brigade/fixtures-venv). CI never runs it; the output is committed.
"""
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_encoder_fixtures import CORPUS, PAIRS, TEXTS as ENCODER_TEXTS  # noqa: E402
from make_fixtures import ROOT, ensure_venv  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "modernbert"

# The encoder fixtures' corpus and pairs; their first three texts and a long one.
TEXTS = ENCODER_TEXTS[:3] + [
    "Local attention looks at a few neighbours; global attention looks at every token, and a "
    "long sentence like this one mixes both kinds of layers many times over.",
]
SIZES = dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=48,
             max_position_embeddings=128, local_attention=8,
             initializer_range=0.2, initializer_cutoff_factor=3.0)


def tokenizer():
    from tokenizers import ByteLevelBPETokenizer, processors
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(CORPUS, vocab_size=300, min_frequency=1,
                            special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"])
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok._tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok


def config(tok, every=3, **extra):
    """A ModernBertConfig over tok's vocabulary whose every `every`-th layer is global."""
    import transformers
    return transformers.ModernBertConfig(global_attn_every_n_layers=every,
        vocab_size=tok.get_vocab_size(), pad_token_id=tok.token_to_id("[PAD]"),
        bos_token_id=tok.token_to_id("[CLS]"), cls_token_id=tok.token_to_id("[CLS]"),
        eos_token_id=tok.token_to_id("[SEP]"), sep_token_id=tok.token_to_id("[SEP]"), **SIZES, **extra)


def to_hub_layout(path, every):
    """Rewrites a saved config.json as the Hub's ModernBERT checkpoints have it: the layer pattern
    as global_attn_every_n_layers and the two RoPE bases as global_rope_theta / local_rope_theta."""
    c = json.loads(path.read_text())
    rope = c.pop("rope_parameters")
    c.pop("layer_types")
    c["global_attn_every_n_layers"] = every
    c["global_rope_theta"] = rope["full_attention"]["rope_theta"]
    c["local_rope_theta"] = rope["sliding_attention"]["rope_theta"]
    path.write_text(json.dumps(c, indent=2) + "\n")


def save(model, name, tok, every=None):
    """Saves model and tokenizer to OUT/name (with every: config.json in the Hub's layout) and
    returns (dir, the model read back from it)."""
    layer_types = model.config.layer_types
    out = OUT / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save(str(out / "tokenizer.json"))
    if every is not None:
        to_hub_layout(out / "config.json", every)
    back = type(model).from_pretrained(str(out), attn_implementation="eager").eval()
    assert back.config.layer_types == layer_types and len(set(layer_types)) == 2, back.config.layer_types
    assert back.config.rope_parameters == model.config.rope_parameters, back.config.rope_parameters
    assert back.config.sliding_window == 4
    return out, back


def check_tokenizer(out, tok):
    """transformers' fast tokenizer over the saved tokenizer.json gives `tokenizers`' ids."""
    import transformers
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(out / "tokenizer.json"))
    for t in TEXTS:
        assert fast(t)["input_ids"] == tok.encode(t).ids, t
    for q, d in PAIRS:
        assert fast(q, d)["input_ids"] == tok.encode(q, d).ids, (q, d)


def main():
    ensure_venv(__file__)
    import torch
    import transformers

    torch.manual_seed(0)
    rows = lambda t: [[round(float(v), 7) for v in r] for r in t]  # noqa: E731

    def run(model, ids):
        with torch.no_grad():
            return model(input_ids=torch.tensor([ids]), output_hidden_states=True)

    tok = tokenizer()

    # embed: ModernBertModel, the Hub's config layout, mean pooling + Normalize.
    made = transformers.ModernBertModel(config(tok, every=2, global_rope_theta=80000.0, local_rope_theta=20000.0))
    out, model = save(made.eval(), "embed", tok, every=2)
    check_tokenizer(out, tok)
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ], indent=1) + "\n")
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": SIZES["hidden_size"], "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False}, indent=1) + "\n")
    (out / "2_Normalize").mkdir()
    expected = {"texts": []}
    for text in TEXTS:
        ids = tok.encode(text).ids
        hidden = run(model, ids).last_hidden_state[0].double()
        mean = hidden.mean(dim=0)
        expected["texts"].append({"text": text, "ids": ids, "hidden": rows(hidden),
                                  "embedding": (mean / mean.norm()).tolist()})
    assert 4 * SIZES["local_attention"] < len(expected["texts"][-1]["ids"]) <= SIZES["max_position_embeddings"]
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"embed: {len(TEXTS)} texts, the longest {len(expected['texts'][-1]['ids'])} tokens")

    # cls: three labels over [CLS], every bias on.
    cfg = config(tok, num_labels=3, id2label={0: "negative", 1: "neutral", 2: "positive"},
                 label2id={"negative": 0, "neutral": 1, "positive": 2}, classifier_pooling="cls",
                 norm_bias=True, attention_bias=True, mlp_bias=True, classifier_bias=True)
    made = transformers.ModernBertForSequenceClassification(cfg).eval()
    with torch.no_grad():  # transformers initializes biases to zero: make them matter
        for name, p in made.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, 0.2)
    out, model = save(made, "cls", tok)
    expected = {"texts": []}
    for text in TEXTS:
        ids = tok.encode(text).ids
        r = run(model, ids)
        expected["texts"].append({"text": text, "ids": ids, "logits": r.logits[0].double().tolist(),
                                  "hidden": rows(r.hidden_states[-1][0].double())})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"cls: {len(TEXTS)} texts")

    # rerank: one label over the mean of the tokens.
    cfg = config(tok, num_labels=1, classifier_pooling="mean")
    out, model = save(transformers.ModernBertForSequenceClassification(cfg).eval(), "rerank", tok)
    expected = {"pairs": []}
    for q, d in PAIRS:
        ids = tok.encode(q, d).ids
        logit = run(model, ids).logits[0, 0].double().item()
        expected["pairs"].append({"text_1": q, "text_2": d, "ids": ids, "logit": logit,
                                  "score": torch.sigmoid(torch.tensor(logit, dtype=torch.float64)).item()})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"rerank: {len(PAIRS)} pairs")


if __name__ == "__main__":
    main()
