"""`brigade serve` on a committed fixture model, reached through the real `openai` client: the
helpers the pooling-model client tests share (test_openai_classify.py, test_openai_encoders.py).
BRIGADE_BIN names the brigade binary (build/tools/brigade by default)."""
import json
import math
import os
import re
import subprocess

import openai

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("BRIGADE_BIN", os.path.join(ROOT, "build", "tools", "brigade"))


def fixtures(kind):
    """tests/fixtures/<kind>."""
    return os.path.join(ROOT, "tests", "fixtures", kind)


def expected(model_dir):
    with open(os.path.join(model_dir, "expected.json")) as f:
        return json.load(f)


def serve(model_dir, *args):
    """Starts `brigade serve` on model_dir (served as its folder name) on a free port; the process
    and a client of its /v1."""
    name = os.path.basename(model_dir)
    proc = subprocess.Popen([BIN, "serve", "--model", model_dir, "--port", "0", "--threads", "1",
                             "--served-model-name", name, *args], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    assert match, f"brigade serve did not start: {line!r}"
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{match.group(1)}/v1", api_key="none", max_retries=0, timeout=60)
    return proc, client


def stop(proc):
    proc.terminate()
    assert proc.wait(timeout=60) == 0


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
