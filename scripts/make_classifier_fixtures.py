#!/usr/bin/env python3
"""Writes the sequence-classification fixtures that tests/models/classifier_test.cpp,
tests/actors/engine_classify_test.cpp, tests/server/http_classify_test.cpp and
tests/server/test_openai_classify.py read (docs/architecture.md "Classification and
cross-encoder scores").

Each is a tiny random checkpoint made and saved with transformers (fp32), with a fixture
tokenizer from tests/fixtures/tokenizers, in tests/fixtures/classifier/<name>/, and expected.json
holding transformers' own outputs:

  qwen3_seq_cls   Qwen3ForSequenceClassification, 3 labels (negative, neutral, positive), the
                  Qwen2-style fixture tokenizer (no special tokens added): `prompts` (token ids ->
                  the score head's logits at the last token, model(ids).logits) and `texts`
                  (text -> ids -> logits).
  llama_seq_cls   LlamaForSequenceClassification, 1 label, the Llama-3-style tokenizer whose
                  post-processor puts <|begin_of_text|> first (and before the second text of a
                  pair): `texts`, and `pairs` tokenized as tokenizer(text=q, text_pair=d), as vLLM
                  tokenizes a cross-encoder's pair, with the logit and its sigmoid (the score).
  qwen3_reranker  Qwen3ForCausalLM with an lm_head, used as vLLM serves Qwen3-Reranker or
                  mxbai-rerank-v2 (--hf-overrides architectures Qwen3ForSequenceClassification,
                  classifier_from_token ["0", "1"], method from_2_way_softmax): `pairs` whose
                  prompt is the two texts joined (vLLM's use_pad_token false), scored as the
                  reranker's model card does: the causal LM's next-token logits at the last
                  position, softmax over the two tokens, the probability of "1". Also `greedy`: the
                  causal LM still generates.

Run from anywhere: python3 scripts/make_classifier_fixtures.py. It uses make_fixtures.py's
virtual environment (.brigade/fixtures-venv). CI never runs it; the output is committed.
"""
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import ROOT, ensure_venv  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "classifier"
TOKENIZERS = ROOT / "tests" / "fixtures" / "tokenizers"

PROMPTS = [
    [17, 42, 99, 200, 3, 77],
    [5],
    [(i * 37 + 11) % 690 + 3 for i in range(40)],
]
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "I'd guess 42 tokens; they've said so.",
    "a",
]
PAIRS = [
    ("What is the capital of France?", "Paris is the capital of France."),
    ("What is the capital of France?", "The quick brown fox jumps over the lazy dog."),
    ("def forward(self, x):", "    return self.proj(x) ** 2"),
]


def config(cls_name, **kw):
    import transformers
    c = dict(vocab_size=704, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
             rms_norm_eps=1e-6, rope_theta=10000.0, bos_token_id=None, eos_token_id=None,
             pad_token_id=None, tie_word_embeddings=False)
    c.update(kw)
    return getattr(transformers, cls_name)(**c)


def save(model, name, tokenizer_file):
    out = OUT / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    model.save_pretrained(str(out), safe_serialization=True)
    shutil.copy(tokenizer_file, out / "tokenizer.json")
    return out


def main():
    ensure_venv(__file__)
    import torch
    import transformers
    from tokenizers import Tokenizer

    torch.manual_seed(0)

    def logits_of(model, ids):
        with torch.no_grad():
            return model(torch.tensor([ids])).logits[0].double()

    # qwen3_seq_cls: three labels, softmax.
    cfg = config("Qwen3Config", head_dim=16, num_labels=3,
                 id2label={0: "negative", 1: "neutral", 2: "positive"},
                 label2id={"negative": 0, "neutral": 1, "positive": 2})
    model = transformers.Qwen3ForSequenceClassification(cfg).eval()
    with torch.no_grad():  # a score head large enough that the labels' probabilities differ
        model.score.weight.normal_(0.0, 0.5)
    tok_file = TOKENIZERS / "qwen2" / "tokenizer.json"
    tok = Tokenizer.from_file(str(tok_file))
    out = save(model, "qwen3_seq_cls", tok_file)
    expected = {"prompts": [], "texts": []}
    for ids in PROMPTS:
        expected["prompts"].append({"ids": ids, "logits": logits_of(model, ids).tolist()})
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=True).ids
        expected["texts"].append({"text": text, "ids": ids, "logits": logits_of(model, ids).tolist()})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"qwen3_seq_cls: {len(PROMPTS)} prompts, {len(TEXTS)} texts")

    # llama_seq_cls: one label; pairs tokenized as a tokenizer pair (<|begin_of_text|> q <|begin_of_text|> d).
    cfg = config("LlamaConfig", num_labels=1, vocab_size=712)  # the tokenizer's 705 tokens, padded
    model = transformers.LlamaForSequenceClassification(cfg).eval()
    with torch.no_grad():
        model.score.weight.normal_(0.0, 0.5)
    tok_file = TOKENIZERS / "post_processor" / "llama3_bos.json"
    tok = Tokenizer.from_file(str(tok_file))
    out = save(model, "llama_seq_cls", tok_file)
    expected = {"texts": [], "pairs": []}
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=True).ids
        expected["texts"].append({"text": text, "ids": ids, "logits": logits_of(model, ids).tolist()})
    for q, d in PAIRS:
        ids = tok.encode(q, d, add_special_tokens=True).ids
        logit = logits_of(model, ids)[0].item()
        expected["pairs"].append({"text_1": q, "text_2": d, "ids": ids, "logit": logit,
                                  "score": torch.sigmoid(torch.tensor(logit, dtype=torch.float64)).item()})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"llama_seq_cls: {len(TEXTS)} texts, {len(PAIRS)} pairs")

    # qwen3_reranker: a causal LM read as a two-token reranker.
    cfg = config("Qwen3Config", head_dim=16)
    model = transformers.Qwen3ForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, 0.5)
    tok_file = TOKENIZERS / "qwen2" / "tokenizer.json"
    tok = Tokenizer.from_file(str(tok_file))
    out = save(model, "qwen3_reranker", tok_file)
    false_id, true_id = tok.token_to_id("0"), tok.token_to_id("1")
    expected = {"classifier_from_token": ["0", "1"], "false_id": false_id, "true_id": true_id, "pairs": [],
                "greedy": []}
    for q, d in PAIRS:
        ids = tok.encode(q + d, add_special_tokens=True).ids
        last = logits_of(model, ids)[-1]
        two = torch.log_softmax(torch.stack([last[false_id], last[true_id]]), dim=0)
        expected["pairs"].append({"text_1": q, "text_2": d, "ids": ids,
                                  "logit": (last[true_id] - last[false_id]).item(), "score": two[1].exp().item()})
    for ids in PROMPTS[:1]:
        with torch.no_grad():
            g = model.generate(torch.tensor([ids]), max_new_tokens=6, do_sample=False, pad_token_id=0)
        expected["greedy"].append({"ids": ids, "tokens": g[0, len(ids):].tolist()})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"qwen3_reranker: {len(PAIRS)} pairs")


if __name__ == "__main__":
    main()
