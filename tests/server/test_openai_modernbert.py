"""ModernBERT encoders served as vLLM serves them, through the real `openai` Python client against
`brigade serve` on the transformers fixtures of scripts/make_modernbert_fixtures.py
(tests/fixtures/modernbert/*/expected.json):

  embed   /v1/embeddings (client.embeddings.create): sentence-transformers' mean pooling and
          normalization over transformers' ModernBertModel hidden states (modernbert-embed-base's
          modules), a 118-token text among them (many local windows long).
  cls     /classify: a ModernBertForSequenceClassification over [CLS], id2label's names.
  rerank  /score and /rerank: a one-label reranker over the mean of the tokens
          (gte-reranker-modernbert-base's shape), pairs as the tokenizer's pair template.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary.
"""
import math
import os

import pytest

import fixture_server
from fixture_server import at_root, fixtures, post, stop
from test_openai_encoders import expect_scores_and_ranking

FIXTURES = fixtures("modernbert")


def expected(name):
    return fixture_server.expected(os.path.join(FIXTURES, name))


def serve(name, *args):
    return fixture_server.serve(os.path.join(FIXTURES, name), *args)


def test_embeddings_match_sentence_transformers():
    want = expected("embed")["texts"]
    proc, client = serve("embed")
    try:
        r = client.embeddings.create(model="embed", input=[c["text"] for c in want])
        assert len(r.data) == len(want)
        for d, c in zip(r.data, want):
            assert d.embedding == pytest.approx(c["embedding"], abs=1e-4)
        assert r.usage.prompt_tokens == sum(len(c["ids"]) for c in want)
        ids = client.embeddings.create(model="embed", input=want[3]["ids"])
        assert ids.data[0].embedding == pytest.approx(want[3]["embedding"], abs=1e-4)
    finally:
        stop(proc)


def test_classify_gives_transformers_probabilities():
    want = expected("cls")["texts"]
    proc, client = serve("cls")
    try:
        r = post(at_root(client), "/classify", {"model": "cls", "input": [c["text"] for c in want]})
        names = ["negative", "neutral", "positive"]
        for d, c in zip(r["data"], want):
            m = max(c["logits"])
            e = [math.exp(x - m) for x in c["logits"]]
            probs = [v / sum(e) for v in e]
            assert d["probs"] == pytest.approx(probs, abs=1e-5)
            assert d["label"] == names[probs.index(max(probs))]
    finally:
        stop(proc)


def test_a_mean_pooled_reranker_scores_and_reranks_pairs():
    proc, client = serve("rerank")
    try:
        expect_scores_and_ranking(client, expected("rerank")["pairs"])
    finally:
        stop(proc)
