"""POST /v1/embeddings with the real `openai` Python client against `brigade serve`.

The qwen3 fixture (tests/fixtures/qwen3) served with --pooling mean and last must give
transformers' pooled last_hidden_state (embeddings.json, scripts/make_fixtures.py --embeddings),
as floats and as base64 (the client's default, decoded by the client itself); a tiny synthetic
model with a tokenizer takes text inputs, batches, `dimensions`, and refuses bad inputs with 400.
vLLM's /score and /rerank on the same servers must give the cosine of transformers' pooled
vectors (the fixture has no tokenizer, so its inputs go as token ids), through the `openai`
client's own request machinery (`client.post`: /v1/score, /v1/rerank, and the same client on
the server's root for /score, /rerank and /v2/rerank).
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary.
"""
import base64
import json
import math
import os
import struct
import subprocess
import tempfile

import openai
import pytest

from fixture_server import BIN, ROOT, client_of, launch, stop

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "qwen3")
TOL = 1e-4


def serve(model, *args):
    proc, url = launch(model, *args)
    return proc, client_of(url)


@pytest.fixture(scope="module")
def reference():
    with open(os.path.join(FIXTURE, "embeddings.json")) as f:
        return json.load(f)["cases"]


@pytest.fixture(scope="module", params=["mean", "last"])
def fixture_server(request):
    proc, client = serve(FIXTURE, "--pooling", request.param, "--served-model-name", "qwen3")
    yield request.param, client
    stop(proc)


@pytest.fixture(scope="module")
def tiny():
    tmp = tempfile.TemporaryDirectory()
    model = os.path.join(tmp.name, "tiny")
    subprocess.run([BIN, "make-model", "--arch", "qwen3", "--hidden", "64", "--layers", "2", "--heads", "4",
                    "--kv-heads", "2", "--intermediate", "128", "--vocab", "512", "--max-position", "128",
                    "--dtype", "f32", "--out", model], check=True, stdout=subprocess.DEVNULL)
    proc, client = serve(model, "--served-model-name", "tiny")
    yield client
    stop(proc)
    tmp.cleanup()


def close(got, want):
    assert len(got) == len(want)
    assert max(abs(a - b) for a, b in zip(got, want)) < TOL


def test_floats_equal_transformers(fixture_server, reference):
    mode, client = fixture_server
    r = client.embeddings.create(model="qwen3", input=[c["prompt"] for c in reference], encoding_format="float")
    assert r.object == "list" and r.model == "qwen3"
    assert [d.index for d in r.data] == list(range(len(reference)))
    for d, c in zip(r.data, reference):
        close(d.embedding, c["normalized"][mode])
    assert r.usage.prompt_tokens == sum(len(c["prompt"]) for c in reference)
    assert r.usage.total_tokens == r.usage.prompt_tokens


def test_base64_is_what_the_client_decodes(fixture_server, reference):
    mode, client = fixture_server
    c = reference[2]
    decoded = client.embeddings.create(model="qwen3", input=c["prompt"])  # the client asks for base64
    close(decoded.data[0].embedding, c["normalized"][mode])
    raw = client.embeddings.create(model="qwen3", input=c["prompt"], encoding_format="base64")
    text = raw.data[0].embedding
    assert isinstance(text, str)
    values = struct.unpack(f"<{len(base64.b64decode(text)) // 4}f", base64.b64decode(text))
    floats = client.embeddings.create(model="qwen3", input=c["prompt"], encoding_format="float").data[0].embedding
    assert list(values) == pytest.approx(floats, abs=1e-7)


def test_text_batch_and_dimensions(tiny):
    r = tiny.embeddings.create(model="tiny", input=["The kitchen brigade", "a second, longer input text"],
                               encoding_format="float")
    assert len(r.data) == 2 and len(r.data[0].embedding) == 64
    for d in r.data:
        assert math.isclose(math.sqrt(sum(v * v for v in d.embedding)), 1.0, rel_tol=1e-5)
    cut = tiny.embeddings.create(model="tiny", input="The kitchen brigade", dimensions=16, encoding_format="float")
    head = r.data[0].embedding[:16]
    norm = math.sqrt(sum(v * v for v in head))
    close(cut.data[0].embedding, [v / norm for v in head])


def test_bad_inputs_are_400(tiny):
    with pytest.raises(openai.BadRequestError, match="empty"):
        tiny.embeddings.create(model="tiny", input="")
    with pytest.raises(openai.BadRequestError, match="context"):
        tiny.embeddings.create(model="tiny", input="word " * 400)
    with pytest.raises(openai.BadRequestError, match="dimensions"):
        tiny.embeddings.create(model="tiny", input="hello", dimensions=65)
    with pytest.raises(openai.BadRequestError, match="encoding_format"):
        tiny.embeddings.create(model="tiny", input="hello", encoding_format="int8")
    # The server still answers after the errors.
    assert len(tiny.embeddings.create(model="tiny", input="hello", encoding_format="float").data) == 1


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def post(client, path, body):
    """POST through the openai client's own machinery (auth, errors as openai exceptions): the JSON."""
    return client.post(path, body=body, cast_to=object)


def at_root(client):
    """The same client on the server's root, for vLLM's routes outside /v1."""
    return client.with_options(base_url=str(client.base_url).rstrip("/").removesuffix("/v1"))


def test_score_is_the_cosine_of_transformers_embeddings(fixture_server, reference):
    mode, client = fixture_server
    query, docs = reference[0], reference[1:]
    want = [cosine(query["raw"][mode], d["raw"][mode]) for d in docs]
    body = {"model": "qwen3", "text_1": query["prompt"], "text_2": [d["prompt"] for d in docs]}
    via_client = post(client, "/score", body)  # /v1/score
    via_root = post(at_root(client), "/score", body)
    for r in (via_client, via_root):
        assert r["object"] == "list" and r["model"] == "qwen3" and r["id"].startswith("score-")
        assert [d["index"] for d in r["data"]] == list(range(len(docs)))
        assert all(d["object"] == "score" for d in r["data"])
        assert [d["score"] for d in r["data"]] == pytest.approx(want, abs=TOL)
        tokens = sum(len(query["prompt"]) + len(d["prompt"]) for d in docs)
        assert r["usage"]["prompt_tokens"] == tokens and r["usage"]["total_tokens"] == tokens
    # N:N pairs each with each; vLLM's `queries`/`documents` names read the same.
    pairs = post(client, "/score", {"queries": [docs[0]["prompt"], docs[1]["prompt"]],
                                        "documents": [docs[2]["prompt"], query["prompt"]]})
    assert [d["score"] for d in pairs["data"]] == pytest.approx(
        [cosine(docs[0]["raw"][mode], docs[2]["raw"][mode]), cosine(docs[1]["raw"][mode], query["raw"][mode])],
        abs=TOL)


def test_rerank_orders_by_transformers_cosine(fixture_server, reference):
    mode, client = fixture_server
    query, docs = reference[0], reference[1:]
    want = [cosine(query["raw"][mode], d["raw"][mode]) for d in docs]
    order = sorted(range(len(docs)), key=lambda i: -want[i])
    body = {"model": "qwen3", "query": query["prompt"], "documents": [d["prompt"] for d in docs]}
    for r in (post(client, "/rerank", body),
              post(at_root(client), "/rerank", body), post(at_root(client), "/v2/rerank", body)):
        assert r["id"].startswith("rerank-") and r["model"] == "qwen3"
        assert [x["index"] for x in r["results"]] == order
        assert [x["relevance_score"] for x in r["results"]] == pytest.approx([want[i] for i in order], abs=TOL)
    top = post(client, "/rerank", {**body, "top_n": 1})
    assert [x["index"] for x in top["results"]] == order[:1]


def test_text_score_and_rerank_and_their_400s(tiny):
    query = "Which station cooks the sauces?"
    docs = ["The saucier makes the sauces.", "Bread and cakes come from the patissier."]
    vectors = [d.embedding for d in tiny.embeddings.create(model="tiny", input=[query, *docs],
                                                           encoding_format="float").data]
    score = post(tiny, "/score", {"model": "tiny", "text_1": query, "text_2": docs})
    assert [d["score"] for d in score["data"]] == pytest.approx(
        [cosine(vectors[0], vectors[1]), cosine(vectors[0], vectors[2])], abs=1e-5)
    rerank = post(tiny, "/rerank", {"model": "tiny", "query": query, "documents": docs,
                                        "return_documents": True})
    assert {x["document"]["text"] for x in rerank["results"]} == set(docs)
    with pytest.raises(openai.BadRequestError, match="1:1, 1:N or N:N"):
        post(tiny, "/score", {"text_1": [query, query], "text_2": docs + ["third"]})
    with pytest.raises(openai.BadRequestError, match="top_n"):
        post(tiny, "/rerank", {"query": query, "documents": docs, "top_n": -1})
    with pytest.raises(openai.BadRequestError, match="empty"):
        post(tiny, "/rerank", {"query": query, "documents": []})
    with pytest.raises(openai.BadRequestError, match="'query' is required"):
        post(tiny, "/rerank", {"documents": docs})
    with pytest.raises(openai.BadRequestError, match="context"):
        post(tiny, "/score", {"text_1": query, "text_2": "word " * 400})
