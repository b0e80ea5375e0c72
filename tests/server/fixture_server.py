"""`brigade serve` on a committed fixture model, reached through the real `openai` client: the
helpers the client tests share (test_openai_classify.py, test_openai_encoders.py, the vision ones).
BRIGADE_BIN names the brigade binary (build/tools/brigade by default)."""
import base64
import json
import math
import os
import re
import subprocess

import openai
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("BRIGADE_BIN", os.path.join(ROOT, "build", "tools", "brigade"))


def fixtures(kind):
    """tests/fixtures/<kind>."""
    return os.path.join(ROOT, "tests", "fixtures", kind)


def expected(model_dir):
    with open(os.path.join(model_dir, "expected.json")) as f:
        return json.load(f)


def launch(model, *args, name=None, stderr=None, env=None):
    """Starts `brigade serve` on `model` (served as `name` when given) with `args`, one thread, on a
    free port, its stderr to `stderr` and its environment `env` when given; returns the process and
    its /v1 URL once it listens."""
    named = ["--served-model-name", name] if name else []
    proc = subprocess.Popen([BIN, "serve", "--model", model, "--port", "0", "--threads", "1", *named, *args],
                            stdout=subprocess.PIPE, stderr=stderr, env=env, text=True)
    line = proc.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    assert match, f"brigade serve did not start: {line!r}"
    return proc, f"http://127.0.0.1:{match.group(1)}/v1"


def client_of(url):
    """An openai client of `url` (no API key, no retries)."""
    return openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=60)


def serve(model_dir, *args):
    """launch() on model_dir, served as its folder name: the process and a client of its /v1."""
    proc, url = launch(model_dir, *args, name=os.path.basename(model_dir))
    return proc, client_of(url)


def stop(proc):
    proc.terminate()
    assert proc.wait(timeout=60) == 0


def whole_and_in_steps_client(model_dir):
    """A module-scoped `client` fixture for the vision client tests: `brigade serve` on model_dir
    twice, whole and with --max-num-batched-tokens 8 (steps that cut the images)."""
    @pytest.fixture(scope="module", params=[[], ["--max-num-batched-tokens", "8"]], ids=["whole", "steps_of_8"])
    def client(request):
        proc, c = serve(model_dir, *request.param)
        yield c
        stop(proc)
    return client


def image_data_url(model_dir, k):
    """The fixture's image<k>.png as a data: URL, as the openai client sends an image."""
    with open(os.path.join(model_dir, f"image{k}.png"), "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode()


def at_root(client):
    """The same client on the server's root, for vLLM's routes outside /v1."""
    return client.with_options(base_url=str(client.base_url).rstrip("/").removesuffix("/v1"))


def post(client, path, body):
    return client.post(path, body=body, cast_to=object)


def log_softmax_at(logits, token):
    """log softmax(logits)[token], as an OpenAI logprob of that token."""
    m = max(logits)
    return logits[token] - m - math.log(sum(math.exp(v - m) for v in logits))


def ids_of(tokens):
    """The ids of tokens returned as "token_id:N" (return_tokens_as_token_ids)."""
    return [int(t.removeprefix("token_id:")) for t in tokens]


def complete(client, name, case, **kw):
    """/v1/completions of a fixture case's prompt ids, greedy, as many tokens as transformers'
    greedy continuation, each with its logprob and returned as "token_id:N"."""
    return client.completions.create(model=name, prompt=case["prompt"], max_tokens=len(case["greedy"]),
                                     temperature=0, logprobs=1, extra_body={"return_tokens_as_token_ids": True,
                                                                            "ignore_eos": True}, **kw)


def streamed_ids(client, name, case):
    """The token ids of complete()'s answer to `case`, streamed, in the order the chunks bring them."""
    ids = []
    for chunk in complete(client, name, case, stream=True):
        if chunk.choices and chunk.choices[0].logprobs:
            ids += ids_of(chunk.choices[0].logprobs.tokens)
    return ids


def assert_transformers_completion(r, case):
    """r (complete's response) holds transformers' greedy tokens, their logprobs (the first token's
    from the prompt's last logits, the others' from the decode steps where the fixture records
    them) and the usage of the case."""
    lp = r.choices[0].logprobs
    assert ids_of(lp.tokens) == case["greedy"]
    rows = [case["logits"][-1]] + case.get("decode_logits", [])
    for got, row, token in zip(lp.token_logprobs, rows, case["greedy"]):
        assert got == pytest.approx(log_softmax_at(row, token), abs=1e-3)
    assert r.usage.prompt_tokens == len(case["prompt"])
    assert r.usage.completion_tokens == len(case["greedy"])
