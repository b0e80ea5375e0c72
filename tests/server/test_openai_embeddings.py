"""POST /v1/embeddings with the real `openai` Python client against `brigade serve`.

The qwen3 fixture (tests/fixtures/qwen3) served with --pooling mean and last must give
transformers' pooled last_hidden_state (embeddings.json, scripts/make_fixtures.py --embeddings),
as floats and as base64 (the client's default, decoded by the client itself); a tiny synthetic
model with a tokenizer takes text inputs, batches, `dimensions`, and refuses bad inputs with 400.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary.
"""
import base64
import json
import math
import os
import re
import struct
import subprocess
import tempfile

import openai
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("BRIGADE_BIN", os.path.join(ROOT, "build", "tools", "brigade"))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "qwen3")
TOL = 1e-4


def serve(model, *args):
    proc = subprocess.Popen([BIN, "serve", "--model", model, "--port", "0", "--threads", "1", *args],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    assert match, f"brigade serve did not start: {line!r}"
    return proc, openai.OpenAI(base_url=f"http://127.0.0.1:{match.group(1)}/v1", api_key="none", max_retries=0,
                               timeout=60)


def stop(proc):
    proc.terminate()
    assert proc.wait(timeout=60) == 0


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
