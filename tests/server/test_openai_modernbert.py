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
import os

import fixture_server
from fixture_server import fixtures, stop
from test_openai_encoders import expect_classified, expect_embeddings, expect_scores_and_ranking

FIXTURES = fixtures("modernbert")


def expected(name):
    return fixture_server.expected(os.path.join(FIXTURES, name))


def serve(name, *args):
    return fixture_server.serve(os.path.join(FIXTURES, name), *args)


def test_embeddings_match_sentence_transformers():
    want = expected("embed")["texts"]
    proc, client = serve("embed")
    try:
        expect_embeddings(client, "embed", want, 3)
    finally:
        stop(proc)


def test_classify_gives_transformers_probabilities():
    want = expected("cls")["texts"]
    proc, client = serve("cls")
    try:
        expect_classified(client, "cls", want, ["negative", "neutral", "positive"])
    finally:
        stop(proc)


def test_a_mean_pooled_reranker_scores_and_reranks_pairs():
    proc, client = serve("rerank")
    try:
        expect_scores_and_ranking(client, expected("rerank")["pairs"])
    finally:
        stop(proc)
