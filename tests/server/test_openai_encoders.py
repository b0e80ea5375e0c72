"""Encoders (BERT, RoBERTa, NomicBERT) served as vLLM serves them, through the real `openai` Python client
against `brigade serve` on the transformers fixtures of scripts/make_encoder_fixtures.py
(tests/fixtures/encoder/*/expected.json):

  bert_embed    /v1/embeddings (client.embeddings.create): sentence-transformers' mean pooling
                and normalization over transformers' BertModel hidden states; generation routes
                answer 400 (an encoder does not generate).
  nomic_embed   /v1/embeddings: NomicBertModel (nomic-embed-text-v1.5's layer) with its mean pooling and
                normalization, as transformers computes its hidden states.
  bert_cross    /score and /rerank: a BertForSequenceClassification cross-encoder scoring pairs
                tokenized as the tokenizer's pair, the second text token type 1.
  roberta_cls   /classify: a RobertaForSequenceClassification's softmax and id2label's names.
  xlmr_rerank   /score and /rerank: an XLMRobertaForSequenceClassification reranker (bge-reranker
                shape) with XLM-R's Unigram tokenizer.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary.
"""
import json
import math
import os

import openai
import pytest

import fixture_server
from fixture_server import at_root, fixtures, post, stop

FIXTURES = fixtures("encoder")


def expected(name):
    return fixture_server.expected(os.path.join(FIXTURES, name))


def serve(name, *args):
    return fixture_server.serve(os.path.join(FIXTURES, name), *args)


def expect_embeddings(client, model, want, by_ids):
    """The texts of `want` (expected.json's cases: text, ids, embedding) embedded in one request as
    sentence-transformers embeds them, the prompt tokens counted; case `by_ids` again from its ids."""
    r = client.embeddings.create(model=model, input=[c["text"] for c in want])
    assert len(r.data) == len(want)
    for d, c in zip(r.data, want):
        assert d.embedding == pytest.approx(c["embedding"], abs=1e-4)
    assert r.usage.prompt_tokens == sum(len(c["ids"]) for c in want)
    ids = client.embeddings.create(model=model, input=want[by_ids]["ids"])
    assert ids.data[0].embedding == pytest.approx(want[by_ids]["embedding"], abs=1e-4)


def expect_classified(client, model, want, names):
    """/classify's probabilities of the texts of `want` (cases with transformers' logits) are their
    softmax, each label the most probable of `names`."""
    r = post(at_root(client), "/classify", {"model": model, "input": [c["text"] for c in want]})
    for d, c in zip(r["data"], want):
        m = max(c["logits"])
        e = [math.exp(x - m) for x in c["logits"]]
        probs = [v / sum(e) for v in e]
        assert d["probs"] == pytest.approx(probs, abs=1e-5)
        assert d["label"] == names[probs.index(max(probs))]


def test_sentence_embeddings_match_sentence_transformers():
    want = expected("bert_embed")["texts"]
    proc, client = serve("bert_embed")
    try:
        expect_embeddings(client, "bert_embed", want, 0)
        with pytest.raises(openai.BadRequestError, match="an encoder"):
            client.completions.create(model="bert_embed", prompt="a", max_tokens=2)
        with pytest.raises(openai.BadRequestError, match="an encoder"):
            client.chat.completions.create(model="bert_embed", messages=[{"role": "user", "content": "a"}])
    finally:
        stop(proc)


def test_nomic_bert_embeddings_match_transformers():
    want = expected("nomic_embed")["texts"]
    proc, client = serve("nomic_embed")
    try:
        expect_embeddings(client, "nomic_embed", want, 1)
    finally:
        stop(proc)


def expect_scores_and_ranking(client, want):
    """/score on every pair, then /rerank of pairs 0 and 1 (which share their query)."""
    r = post(at_root(client), "/score", {"text_1": [p["text_1"] for p in want], "text_2": [p["text_2"] for p in want]})
    assert [d["score"] for d in r["data"]] == pytest.approx([p["score"] for p in want], abs=1e-5)
    assert r["usage"]["prompt_tokens"] == sum(len(p["ids"]) for p in want)
    rr = post(client, "/rerank", {"query": want[0]["text_1"], "documents": [want[0]["text_2"], want[1]["text_2"]]})
    scores = [want[0]["score"], want[1]["score"]]
    order = sorted(range(2), key=lambda i: -scores[i])
    assert [x["index"] for x in rr["results"]] == order
    assert [x["relevance_score"] for x in rr["results"]] == pytest.approx([scores[i] for i in order], abs=1e-5)


@pytest.mark.parametrize("name", ["bert_cross", "xlmr_rerank"])
def test_a_cross_encoder_scores_and_reranks_pairs(name):
    """bert_cross's pairs carry token types (the second text type 1); xlmr_rerank's are XLM-R's."""
    proc, client = serve(name)
    try:
        expect_scores_and_ranking(client, expected(name)["pairs"])
    finally:
        stop(proc)


def test_truncate_prompt_tokens_cuts_a_long_pair_as_the_tokenizer_does():
    """/rerank with truncate_prompt_tokens: the pair cut as tokenizer(q, d, truncation=True,
    max_length=k) cuts it (truncation.json), so usage counts k tokens and the score is the one
    of those ids."""
    cases = json.load(open(os.path.join(FIXTURES, "bert_cross", "truncation.json")))["pairs"]
    long_pair = [c for c in cases if c["max_length"] == 30 and len(c["text_2"]) > 200][0]
    proc, client = serve("bert_cross")
    try:
        r = post(client, "/rerank", {"query": long_pair["text_1"], "documents": [long_pair["text_2"]],
                                     "truncate_prompt_tokens": 30})
        assert r["usage"]["total_tokens"] == len(long_pair["ids"]) == 30
        full = post(client, "/rerank", {"query": long_pair["text_1"], "documents": [long_pair["text_2"]]})
        assert full["usage"]["total_tokens"] > 30
        assert full["results"][0]["relevance_score"] != pytest.approx(r["results"][0]["relevance_score"], abs=1e-6)
    finally:
        stop(proc)


def test_a_roberta_classifier_gives_transformers_probabilities():
    want = expected("roberta_cls")["texts"]
    proc, client = serve("roberta_cls")
    try:
        expect_classified(client, "roberta_cls", want, ["negative", "neutral", "positive"])
    finally:
        stop(proc)
