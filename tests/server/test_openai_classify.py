"""vLLM's /classify, and /score and /rerank with a cross-encoder, through the real `openai` Python
client's request machinery (`client.post`, as vLLM users call routes the client has no method for)
against `brigade serve` on the transformers fixtures of scripts/make_classifier_fixtures.py
(tests/fixtures/classifier/*/expected.json):

  qwen3_seq_cls   /classify gives the softmax of transformers' Qwen3ForSequenceClassification
                  logits and id2label's names; the generation routes answer 400 (no lm_head).
  llama_seq_cls   /score and /rerank score text pairs tokenized as the tokenizer's pair, through
                  the sigmoid of the one label.
  qwen3_reranker  a causal LM served with vLLM's --hf-overrides for Qwen3-Reranker scores as the
                  reranker's model card does, and still completes.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary.
"""
import json
import math
import os

import openai
import pytest

import fixture_server
from fixture_server import at_root, fixtures, post, stop

FIXTURES = fixtures("classifier")
OVERRIDES = json.dumps({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["0", "1"],
                        "is_original_qwen3_reranker": True})


def expected(name):
    return fixture_server.expected(os.path.join(FIXTURES, name))


def serve(name, *args):
    return fixture_server.serve(os.path.join(FIXTURES, name), *args)


def softmax(xs):
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    return [v / sum(e) for v in e]


@pytest.fixture(scope="module")
def seq_cls():
    proc, client = serve("qwen3_seq_cls")
    yield client
    stop(proc)


def test_classify_gives_transformers_probabilities(seq_cls):
    want = expected("qwen3_seq_cls")
    texts = [c["text"] for c in want["texts"]]
    r = post(at_root(seq_cls), "/classify", {"model": "qwen3_seq_cls", "input": texts})
    assert r["object"] == "list" and r["model"] == "qwen3_seq_cls" and r["id"].startswith("classify-")
    names = ["negative", "neutral", "positive"]
    for d, c in zip(r["data"], want["texts"]):
        probs = softmax(c["logits"])
        assert d["num_classes"] == 3
        assert d["probs"] == pytest.approx(probs, abs=1e-4)
        assert d["label"] == names[probs.index(max(probs))]
    assert r["usage"]["prompt_tokens"] == sum(len(c["ids"]) for c in want["texts"])
    ids = post(seq_cls, "/classify", {"input": [c["ids"] for c in want["prompts"]], "use_activation": False})
    for d, c in zip(ids["data"], want["prompts"]):  # /v1/classify, raw logits
        assert d["probs"] == pytest.approx(c["logits"], abs=1e-4)


def test_a_classifier_checkpoint_does_not_generate(seq_cls):
    with pytest.raises(openai.BadRequestError, match="does not generate"):
        seq_cls.completions.create(model="qwen3_seq_cls", prompt="a", max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="does not generate"):
        seq_cls.chat.completions.create(model="qwen3_seq_cls", messages=[{"role": "user", "content": "a"}])


def test_a_cross_encoder_scores_and_reranks_text_pairs():
    want = expected("llama_seq_cls")["pairs"]
    proc, client = serve("llama_seq_cls")
    try:
        r = post(at_root(client), "/score", {"text_1": [p["text_1"] for p in want],
                                             "text_2": [p["text_2"] for p in want]})
        assert [d["score"] for d in r["data"]] == pytest.approx([p["score"] for p in want], abs=1e-5)
        assert r["usage"]["prompt_tokens"] == sum(len(p["ids"]) for p in want)
        docs = [want[0]["text_2"], want[1]["text_2"]]
        rr = post(client, "/rerank", {"query": want[0]["text_1"], "documents": docs})
        scores = [want[0]["score"], want[1]["score"]]
        order = sorted(range(2), key=lambda i: -scores[i])
        assert [x["index"] for x in rr["results"]] == order
        assert [x["relevance_score"] for x in rr["results"]] == pytest.approx([scores[i] for i in order], abs=1e-5)
    finally:
        stop(proc)


def test_qwen3_reranker_overrides_score_as_the_model_card():
    want = expected("qwen3_reranker")
    proc, client = serve("qwen3_reranker", "--hf-overrides", OVERRIDES)
    try:
        q = want["pairs"][0]["text_1"]
        docs = [p["text_2"] for p in want["pairs"][:2]]
        r = post(at_root(client), "/rerank", {"query": q, "documents": docs, "top_n": 1})
        best = max(range(2), key=lambda i: want["pairs"][i]["score"])
        assert [x["index"] for x in r["results"]] == [best]
        assert r["results"][0]["relevance_score"] == pytest.approx(want["pairs"][best]["score"], abs=1e-5)
        c = client.completions.create(model="qwen3_reranker", prompt=want["greedy"][0]["ids"], max_tokens=6,
                                      temperature=0, extra_body={"return_token_ids": True})
        assert c.choices[0].model_extra["token_ids"] == want["greedy"][0]["tokens"]
    finally:
        stop(proc)
