#!/usr/bin/env python3
"""Writes the encoder fixtures (BERT, RoBERTa) that tests/models/bert_test.cpp,
tests/actors/engine_encoder_test.cpp and tests/server/http_encoder_test.cpp read
(docs/architecture.md "Encoders").

Each is a tiny random checkpoint made and saved with transformers (fp32) with a tokenizer trained
here by `tokenizers` on a small corpus, in tests/fixtures/encoder/<name>/, and expected.json
holding transformers' own outputs:

  bert_embed    BertModel (2 token types, exact gelu) with a WordPiece tokenizer (lowercasing
                BertNormalizer, [CLS] $A [SEP]) and sentence-transformers files (modules.json:
                mean pooling, Normalize), as all-MiniLM-L6-v2 ships: `texts` (text -> ids ->
                last_hidden_state, and the normalized mean: the sentence embedding) and `pairs`
                (tokenizer(a, b): ids, token_type_ids, last_hidden_state).
  bert_cross    BertForSequenceClassification, 1 label, as cross-encoder/ms-marco-MiniLM-L-6-v2:
                `pairs` tokenized as tokenizer(text=q, text_pair=d) with token_type_ids, the
                logit (pooler dense + tanh over [CLS], then the classifier) and its sigmoid.
  roberta_cls   RobertaForSequenceClassification, 3 labels (negative, neutral, positive),
                type_vocab_size 1, gelu_new, a byte-level BPE tokenizer with RobertaProcessing
                (<s> $A </s>, pairs <s> A </s></s> B </s>): `texts` and `pairs` (ids -> logits
                of classifier.dense + tanh + out_proj over <s>), and `prompts` of token ids with
                the padding id inside (RoBERTa's positions skip it) -> last_hidden_state.
  xlmr_rerank   XLMRobertaForSequenceClassification, 1 label, as BAAI/bge-reranker-base: the
                Unigram tokenizer of tests/fixtures/tokenizers/unigram/xlmr (SentencePiece's
                nmt_nfkc charsmap, <s> A </s></s> B </s>): `pairs` -> ids, logit and sigmoid.

  distilbert_sst DistilBertForSequenceClassification, 2 labels (NEGATIVE, POSITIVE), as
                distilbert-base-uncased-finetuned-sst-2-english: bert_cross's WordPiece tokenizer,
                no token types; `texts` -> ids, logits (pre_classifier + ReLU + classifier over
                [CLS]) and last_hidden_state. `... distilbert` rewrites only this one.
  <name>/truncation.json (bert_cross, xlmr_rerank, roberta_cls): pairs and single texts as the
                saved tokenizer.json truncates them with Hugging Face `tokenizers`'
                enable_truncation(max_length=k) (longest_first, right side): ids and type ids.
                `... truncation` rewrites only these, from the committed tokenizers.

Run from anywhere: python3 scripts/make_encoder_fixtures.py. It uses make_fixtures.py's virtual
environment (.brigade/fixtures-venv). CI never runs it; the output is committed.
"""
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import ROOT, ensure_venv  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "encoder"

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "What is the capital of France? Paris is the capital of France.",
    "Machine learning models turn text into vectors that capture its meaning.",
    "A cross-encoder reads the query and the document together and scores them.",
    "Embeddings are compared by cosine similarity; similar sentences lie close.",
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.",
    "Résumé, café, naïve and façade keep their accents unless the tokenizer strips them.",
    "Numbers like 42, 3.14 and 2026 appear in text too!",
    "def forward(self, x): return self.proj(x) ** 2",
    "The weather today is sunny with a light breeze from the west.",
    "Transformers use attention: every token looks at every other token.",
    "How many people live in Berlin? About 3.7 million people live in Berlin.",
] * 4
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Résumé: Café naïve, 42 times!",
    "a",
    "Embeddings are compared by cosine similarity; similar sentences lie close to each other in the space.",
]
PAIRS = [
    ("What is the capital of France?", "Paris is the capital of France."),
    ("What is the capital of France?", "The quick brown fox jumps over the lazy dog."),
    ("How many people live in Berlin?", "About 3.7 million people live in Berlin."),
]


def wordpiece_tokenizer():
    from tokenizers import BertWordPieceTokenizer, processors
    tok = BertWordPieceTokenizer(lowercase=True)
    tok.train_from_iterator(CORPUS, vocab_size=400, min_frequency=1,
                            special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    # As bert-base-uncased's tokenizer.json: [CLS] A [SEP], a pair's second segment type 1.
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok._tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok


def bpe_tokenizer():
    from tokenizers import ByteLevelBPETokenizer, processors
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(CORPUS, vocab_size=420, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tok._tokenizer.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                                 ("<s>", tok.token_to_id("<s>")))
    return tok


def save(model, name, tok):
    out = OUT / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save(str(out / "tokenizer.json"))
    return out


def write_truncation():
    """<name>/truncation.json: each saved tokenizer's truncation of PAIRS (and a long document) and
    of TEXTS at several max_length values."""
    from tokenizers import Tokenizer
    long_doc = " ".join(CORPUS[:6])
    for name in ("bert_cross", "xlmr_rerank", "roberta_cls"):
        tok = Tokenizer.from_file(str(OUT / name / "tokenizer.json"))
        cases = {"pairs": [], "texts": []}
        for q, d in PAIRS + [(PAIRS[0][0], long_doc), (long_doc, PAIRS[0][1])]:
            for k in (5, 8, 12, 17, 30, 64):
                tok.enable_truncation(max_length=k)
                try:
                    e = tok.encode(q, d)
                except Exception:  # max_length below the special tokens: refused
                    continue
                cases["pairs"].append({"text_1": q, "text_2": d, "max_length": k, "ids": e.ids, "type_ids": e.type_ids})
        for t in TEXTS + [long_doc]:
            for k in (3, 5, 9, 40):
                tok.enable_truncation(max_length=k)
                cases["texts"].append({"text": t, "max_length": k, "ids": tok.encode(t).ids})
        (OUT / name / "truncation.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n")
        print(f"{name}/truncation.json: {len(cases['pairs'])} pairs, {len(cases['texts'])} texts")


def write_distilbert():
    """distilbert_sst: a DistilBertForSequenceClassification over bert_cross's committed tokenizer."""
    import torch
    import transformers
    from tokenizers import Tokenizer
    torch.manual_seed(1)
    wp = Tokenizer.from_file(str(OUT / "bert_cross" / "tokenizer.json"))
    cfg = transformers.DistilBertConfig(vocab_size=wp.get_vocab_size(), dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                        max_position_embeddings=128, activation="gelu", initializer_range=0.1,
                                        num_labels=2, id2label={0: "NEGATIVE", 1: "POSITIVE"},
                                        label2id={"NEGATIVE": 0, "POSITIVE": 1})
    model = transformers.DistilBertForSequenceClassification(cfg).eval()
    out = save(model, "distilbert_sst", wp)
    expected = {"texts": []}
    for text in TEXTS:
        ids = wp.encode(text).ids
        with torch.no_grad():
            r = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        expected["texts"].append({"text": text, "ids": ids, "logits": r.logits[0].double().tolist(),
                                  "hidden": [[round(float(v), 7) for v in row] for row in r.hidden_states[-1][0]]})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"distilbert_sst: {len(TEXTS)} texts")


def main():
    if sys.argv[1:] == ["truncation"]:
        ensure_venv(__file__)
        return write_truncation()
    if sys.argv[1:] == ["distilbert"]:
        ensure_venv(__file__)
        return write_distilbert()
    ensure_venv(__file__)
    import torch
    import transformers

    torch.manual_seed(0)
    rows = lambda t: [[round(float(v), 7) for v in r] for r in t]  # noqa: E731

    def run(model, ids, types=None, **kw):
        args = {"input_ids": torch.tensor([ids])}
        if types is not None:
            args["token_type_ids"] = torch.tensor([types])
        with torch.no_grad():
            return model(**args, **kw)

    # bert_embed: BertModel, mean pooling + Normalize.
    wp = wordpiece_tokenizer()
    cfg = transformers.BertConfig(vocab_size=wp.get_vocab_size(), hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=128, max_position_embeddings=128,
                                  type_vocab_size=2, hidden_act="gelu", initializer_range=0.1,
                                  layer_norm_eps=1e-12)
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    out = save(model, "bert_embed", wp)
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ], indent=1) + "\n")
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 64, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}, indent=1) + "\n")
    (out / "2_Normalize").mkdir()
    expected = {"texts": [], "pairs": []}
    for text in TEXTS:
        enc = wp.encode(text)
        hidden = run(model, enc.ids, enc.type_ids).last_hidden_state[0].double()
        mean = hidden.mean(dim=0)
        expected["texts"].append({"text": text, "ids": enc.ids, "hidden": rows(hidden),
                                  "embedding": (mean / mean.norm()).tolist()})
    for a, b in PAIRS:
        enc = wp.encode(a, b)
        hidden = run(model, enc.ids, enc.type_ids).last_hidden_state[0].double()
        expected["pairs"].append({"text_1": a, "text_2": b, "ids": enc.ids, "type_ids": enc.type_ids,
                                  "hidden": rows(hidden)})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"bert_embed: {len(TEXTS)} texts, {len(PAIRS)} pairs")

    # bert_cross: BertForSequenceClassification, one label (a cross-encoder).
    cfg.num_labels = 1
    model = transformers.BertForSequenceClassification(cfg).eval()
    out = save(model, "bert_cross", wp)
    expected = {"pairs": []}
    for q, d in PAIRS:
        enc = wp.encode(q, d)
        logit = run(model, enc.ids, enc.type_ids).logits[0, 0].double().item()
        expected["pairs"].append({"text_1": q, "text_2": d, "ids": enc.ids, "type_ids": enc.type_ids,
                                  "logit": logit,
                                  "score": torch.sigmoid(torch.tensor(logit, dtype=torch.float64)).item()})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"bert_cross: {len(PAIRS)} pairs")

    # roberta_cls: RobertaForSequenceClassification, three labels.
    bpe = bpe_tokenizer()
    pad = bpe.token_to_id("<pad>")
    cfg = transformers.RobertaConfig(vocab_size=bpe.get_vocab_size(), hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=128, max_position_embeddings=130,
                                     type_vocab_size=1, hidden_act="gelu_new", initializer_range=0.1,
                                     layer_norm_eps=1e-5, pad_token_id=pad, bos_token_id=0, eos_token_id=2,
                                     num_labels=3, id2label={0: "negative", 1: "neutral", 2: "positive"},
                                     label2id={"negative": 0, "neutral": 1, "positive": 2})
    model = transformers.RobertaForSequenceClassification(cfg).eval()
    out = save(model, "roberta_cls", bpe)
    expected = {"texts": [], "pairs": [], "prompts": []}
    for text in TEXTS:
        ids = bpe.encode(text).ids
        expected["texts"].append({"text": text, "ids": ids, "logits": run(model, ids).logits[0].double().tolist()})
    for a, b in PAIRS:
        ids = bpe.encode(a, b).ids
        expected["pairs"].append({"text_1": a, "text_2": b, "ids": ids,
                                  "logits": run(model, ids).logits[0].double().tolist()})
    for ids in ([0, 17, 42, 99, 200, 3, 77, 2], [0, 50, pad, 60, pad, pad, 70, 2], [0, 2]):
        r = run(model, ids, output_hidden_states=True)
        expected["prompts"].append({"ids": ids, "hidden": rows(r.hidden_states[-1][0].double()),
                                    "logits": r.logits[0].double().tolist()})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"roberta_cls: {len(TEXTS)} texts, {len(PAIRS)} pairs")

    # xlmr_rerank: XLMRobertaForSequenceClassification, one label, the XLM-R Unigram tokenizer.
    from tokenizers import Tokenizer
    unigram = Tokenizer.from_file(str(ROOT / "tests" / "fixtures" / "tokenizers" / "unigram" / "xlmr" / "tokenizer.json"))
    cfg = transformers.XLMRobertaConfig(vocab_size=unigram.get_vocab_size(), hidden_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, intermediate_size=128, max_position_embeddings=130,
                                        type_vocab_size=1, hidden_act="gelu", initializer_range=0.1,
                                        layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                        num_labels=1)
    model = transformers.XLMRobertaForSequenceClassification(cfg).eval()
    out = save(model, "xlmr_rerank", unigram)
    expected = {"pairs": []}
    for q, d in PAIRS + [("Wie viele Menschen leben in Berlin?", "Etwa 3,7 Millionen Menschen leben in Berlin.")]:
        ids = unigram.encode(q, d).ids
        logit = run(model, ids).logits[0, 0].double().item()
        expected["pairs"].append({"text_1": q, "text_2": d, "ids": ids, "logit": logit,
                                  "score": torch.sigmoid(torch.tensor(logit, dtype=torch.float64)).item()})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"xlmr_rerank: {len(expected['pairs'])} pairs")
    write_distilbert()
    write_truncation()


if __name__ == "__main__":
    main()
