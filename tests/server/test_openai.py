"""The real `openai` Python client against `brigade serve` on a tiny synthetic model.

Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary
(default build/tools/brigade).
"""
import json
import math
import os
import re
import subprocess
import tempfile

import jsonschema
import openai
import pytest

from fixture_server import BIN, ROOT, client_of, launch, stop

KEY = "test-key"


def make_tiny_model(path, max_position=512, arch="llama"):
    subprocess.run([BIN, "make-model", "--arch", arch, "--hidden", "64", "--layers", "2", "--heads", "4",
                    "--kv-heads", "2", "--intermediate", "128", "--vocab", "512", "--max-position", str(max_position),
                    "--dtype", "f32", "--out", path], check=True, stdout=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def server():
    tmp = tempfile.TemporaryDirectory()
    model = os.path.join(tmp.name, "tiny")
    make_tiny_model(model)
    proc, url = launch(model, "--api-key", KEY, name="tiny")
    yield url
    stop(proc)  # SIGTERM: graceful shutdown
    tmp.cleanup()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server, api_key=KEY, max_retries=0, timeout=60)


def greedy(client, prompt, max_tokens, **kw):
    return client.completions.create(model="tiny", prompt=prompt, max_tokens=max_tokens, temperature=0,
                                     extra_body={"ignore_eos": True}, **kw)


def test_models(client):
    assert [m.id for m in client.models.list().data] == ["tiny"]


def test_completion_non_streaming(client):
    r = greedy(client, "Once upon a time", 8)
    assert len(r.choices) == 1
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 8
    assert r.usage.prompt_tokens > 0


def test_metrics_parse_as_prometheus_with_vllm_names(server, client):
    # prometheus_client's parser reads the whole exposition; the vLLM-named families carry
    # vLLM's labels and count what this server did.
    import urllib.request
    from prometheus_client.parser import text_string_to_metric_families
    greedy(client, "Count me", 5)
    text = urllib.request.urlopen(server[: -len("/v1")] + "/metrics", timeout=30).read().decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    labels = {"model_name": "tiny", "engine": "0"}

    def value(family, sample, **extra):
        got = [s.value for s in fams[family].samples if s.name == sample and s.labels == {**labels, **extra}]
        assert len(got) == 1, (family, sample, extra, fams[family].samples)
        return got[0]

    assert fams["vllm:num_requests_waiting"].type == "gauge"
    assert value("vllm:num_requests_waiting", "vllm:num_requests_waiting") == 0
    assert 0 <= value("vllm:kv_cache_usage_perc", "vllm:kv_cache_usage_perc") <= 1
    assert fams["vllm:request_success"].type == "counter"
    assert value("vllm:request_success", "vllm:request_success_total", finished_reason="length") >= 1
    assert value("vllm:generation_tokens", "vllm:generation_tokens_total") >= 5
    assert value("vllm:prompt_tokens", "vllm:prompt_tokens_total") > 0
    assert fams["vllm:time_to_first_token_seconds"].type == "histogram"
    assert value("vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_count") >= 1
    assert value("vllm:request_generation_tokens", "vllm:request_generation_tokens_bucket", le="5") >= 1
    assert fams["brigade_requests_running"].type == "gauge"


def test_completion_streaming_matches(client):
    whole = greedy(client, "The kitchen brigade", 12).choices[0].text
    chunks = list(greedy(client, "The kitchen brigade", 12, stream=True))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole
    assert chunks[-1].choices[0].finish_reason == "length"


def test_seed_reproducible_and_n(client):
    kw = dict(model="tiny", prompt="Dear diary,", max_tokens=10, temperature=1.0, extra_body={"ignore_eos": True})
    a = client.completions.create(seed=3, **kw).choices[0].text
    b = client.completions.create(seed=3, **kw).choices[0].text
    assert a == b
    r = client.completions.create(seed=3, n=2, **kw)
    assert len(r.choices) == 2
    assert r.choices[0].text == a  # choice i runs with seed + i


def test_stop_string(client):
    text = greedy(client, "Breaking news:", 32).choices[0].text
    assert len(text) >= 6, text
    stop = text[3:6]
    r = greedy(client, "Breaking news:", 32, stop=[stop])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].text == text[: text.index(stop)]
    streamed = "".join(c.choices[0].text for c in greedy(client, "Breaking news:", 32, stop=stop, stream=True)
                       if c.choices)
    assert streamed == r.choices[0].text  # a partial stop string is never streamed


def test_logprobs(client):
    r = greedy(client, "1, 2, 3, 4,", 6, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.token_logprobs) == 6
    assert all(x <= 0 for x in lp.token_logprobs)
    assert all(len(t) <= 2 for t in lp.top_logprobs)


def prompt_logprobs(client, ids, k):
    r = client.completions.create(model="tiny", prompt=ids, max_tokens=0, extra_body={"prompt_logprobs": k})
    return r.choices[0].model_extra["prompt_logprobs"]


def test_echo_scores_the_prompt_as_lm_eval_asks(client):
    # lm-evaluation-harness's loglikelihood request: echo, logprobs 1, max_tokens 0.
    prompt = [1, 300, 17, 42, 9, 250]
    scored = client.completions.create(model="tiny", prompt=prompt, echo=True, logprobs=1, max_tokens=0)
    choice = scored.choices[0]
    lp = choice.logprobs
    assert choice.finish_reason == "length"
    assert scored.usage.completion_tokens == 0 and scored.usage.prompt_tokens == len(prompt)
    assert len(lp.token_logprobs) == len(prompt) == len(lp.tokens) == len(lp.text_offset)
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert all(1 <= len(t) <= 2 for t in lp.top_logprobs[1:])
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)
    # The engine's values: vLLM's prompt_logprobs of the same prompt...
    pl = prompt_logprobs(client, prompt, 1)
    assert lp.token_logprobs[1:] == pytest.approx([pl[i][str(t)]["logprob"] for i, t in enumerate(prompt) if i], abs=1e-6)
    # ...and what decoding reports: the greedy token after prompt[:i] has the logprob of the best
    # token at prompt position i.
    for i in range(2, len(prompt)):
        sampled = greedy(client, prompt[:i], 1, logprobs=0).choices[0].logprobs.token_logprobs[0]
        best = next(v["logprob"] for v in pl[i].values() if v["rank"] == 1)
        assert sampled == pytest.approx(best, abs=1e-5)
    # is_greedy as lm-eval computes it: the prompt token is the best of its top_logprobs.
    for i, (tok, top) in enumerate(zip(lp.tokens[1:], lp.top_logprobs[1:]), start=1):
        assert (max(top, key=top.get) == tok) == (pl[i][str(prompt[i])]["rank"] == 1)


def test_echo_text_and_stream(client):
    r = greedy(client, "Once upon", 3, echo=True)
    assert r.choices[0].text.startswith("Once upon")
    plain = greedy(client, "Once upon", 3).choices[0].text
    assert r.choices[0].text == "Once upon" + plain
    chunks = list(greedy(client, "Once upon", 3, echo=True, stream=True))
    assert chunks[0].choices[0].text.startswith("Once upon")
    assert "".join(c.choices[0].text for c in chunks if c.choices) == r.choices[0].text


def test_prompt_logprobs_extra_body(client):
    r = client.completions.create(model="tiny", prompt=[1, 300, 17, 42], max_tokens=1, temperature=0,
                                  extra_body={"prompt_logprobs": 2})
    pl = r.choices[0].model_extra["prompt_logprobs"]
    assert pl == prompt_logprobs(client, [1, 300, 17, 42], 2)
    assert len(pl) == 4 and pl[0] is None
    for pos, token in zip(pl[1:], [300, 17, 42]):
        first = next(iter(pos))
        assert first == str(token), "the prompt token comes first"
        assert 2 <= len(pos) <= 3
        assert all(v["logprob"] <= 0 and v["rank"] >= 1 and "decoded_token" in v for v in pos.values())
    echoed = client.completions.create(model="tiny", prompt=[1, 300, 17, 42], max_tokens=0, echo=True, logprobs=0)
    assert echoed.choices[0].logprobs.token_logprobs[1:] == pytest.approx(
        [pl[i][str(t)]["logprob"] for i, t in [(1, 300), (2, 17), (3, 42)]], abs=1e-6)
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="tiny", prompt="x", max_tokens=1, extra_body={"prompt_logprobs": 21})
    assert "prompt_logprobs" in str(e.value)


def test_chat(client):
    try:
        r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                           max_tokens=8, temperature=0)
    except openai.BadRequestError as e:
        if "no chat template" in str(e):
            pytest.skip("this model has no chat template")
        raise
    assert r.choices[0].message.role == "assistant"
    chunks = list(client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                                 max_tokens=8, temperature=0, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == r.choices[0].message.content


def test_chat_continues_a_reply_the_client_began(client):
    """vLLM's continue_final_message and chat echo, sent as the client's extra_body."""
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Once upon"}]
    kw = dict(model="tiny", messages=messages, max_tokens=6, temperature=0)
    cont = {"add_generation_prompt": False, "continue_final_message": True}
    plain = client.chat.completions.create(extra_body=cont, **kw)
    echoed = client.chat.completions.create(extra_body={**cont, "echo": True}, **kw)
    assert echoed.choices[0].message.content == "Once upon" + plain.choices[0].message.content
    closed = client.chat.completions.create(extra_body={"add_generation_prompt": False}, **kw)
    assert plain.usage.prompt_tokens < closed.usage.prompt_tokens  # Llama 2's template ends the turn with </s>
    with pytest.raises(openai.BadRequestError, match="add_generation_prompt"):
        client.chat.completions.create(extra_body={"continue_final_message": True}, **kw)


def test_vllm_request_extras(client):
    """truncate_prompt_tokens, continuous_usage_stats and include_stop_str_in_output through the client."""
    r = client.completions.create(model="tiny", prompt="Once upon a time there was", max_tokens=2, temperature=0,
                                  extra_body={"truncate_prompt_tokens": 3})
    assert r.usage.prompt_tokens == 3
    chunks = list(client.completions.create(model="tiny", prompt="Once upon", max_tokens=5, temperature=0, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_body={"ignore_eos": True,
                                                        "stream_options": {"include_usage": True,
                                                                           "continuous_usage_stats": True}}))
    counts = [c.usage.completion_tokens for c in chunks if c.choices]
    assert counts and counts == sorted(counts) and counts[-1] == 5
    full = greedy(client, "Dear diary,", 12).choices[0].text
    stop = full[3:6]
    kept = client.completions.create(model="tiny", prompt="Dear diary,", max_tokens=12, temperature=0, stop=[stop],
                                     extra_body={"ignore_eos": True, "include_stop_str_in_output": True})
    assert kept.choices[0].text == full[:full.index(stop) + len(stop)]


def post_root(server, path, body):
    import urllib.request
    req = urllib.request.Request(server[: -len("/v1")] + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=30).read())


def test_token_ids_and_bad_words(server, client):
    """vLLM's return_token_ids, return_tokens_as_token_ids and bad_words through the client."""
    extra = {"ignore_eos": True, "return_token_ids": True, "return_tokens_as_token_ids": True}
    base = client.completions.create(model="tiny", prompt="Once upon", max_tokens=16, temperature=0, logprobs=0,
                                     extra_body=extra).choices[0]
    ids = base.model_extra["token_ids"]
    assert len(ids) == 16 and base.logprobs.tokens == [f"token_id:{t}" for t in ids]
    assert base.model_extra["prompt_token_ids"] == post_root(server, "/tokenize", {"prompt": "Once upon"})["tokens"]

    def spell(text):
        return post_root(server, "/tokenize", {"prompt": text, "add_special_tokens": False})["tokens"]

    def word_seqs(word):  # vLLM's SamplingParams.update_from_tokenizer, independently
        seqs = [spell(word.lstrip())]
        spaced = spell(" " + word.lstrip())
        if spaced[0] != seqs[0][0] and len(spaced) == len(seqs[0]):
            seqs.append(spaced)
        return seqs

    def first_hit(out, seqs):
        for k in range(len(out)):
            if any(len(q) <= k + 1 and out[k + 1 - len(q):k + 1] == q for q in seqs):
                return k
        return None

    word = seqs = None
    for j in range(1, len(ids)):  # a one-token word of the output, from its second token on
        text = post_root(server, "/detokenize", {"tokens": [ids[j]]})["prompt"]
        if text.strip() and text.isascii() and spell(text.strip()) == [ids[j]]:
            word, seqs = text.strip(), word_seqs(text.strip())
            break
    assert word is not None, "no one-token word in the output"
    k = first_hit(ids, seqs)
    banned = client.completions.create(model="tiny", prompt="Once upon", max_tokens=16, temperature=0,
                                       extra_body={**extra, "bad_words": [word]}).choices[0].model_extra["token_ids"]
    assert banned[:k] == ids[:k] and banned[k] != ids[k] and first_hit(banned, seqs) is None
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="tiny", prompt="x", max_tokens=2, extra_body={"bad_words": "word"})
    assert "bad_words" in str(e.value)

    # Chat, streamed: the prompt's ids in the first chunk, the output's as deltas.
    messages = [{"role": "user", "content": "Hi there"}]
    whole = client.chat.completions.create(model="tiny", messages=messages, max_tokens=6, temperature=0,
                                           extra_body={"ignore_eos": True, "return_token_ids": True})
    chunks = list(client.chat.completions.create(model="tiny", messages=messages, max_tokens=6, temperature=0,
                                                 stream=True,
                                                 extra_body={"ignore_eos": True, "return_token_ids": True}))
    assert chunks[0].model_extra["prompt_token_ids"] == whole.model_extra["prompt_token_ids"]
    assert len(whole.model_extra["prompt_token_ids"]) == whole.usage.prompt_tokens
    streamed = [t for c in chunks if c.choices for t in c.choices[0].model_extra["token_ids"]]
    assert streamed == whole.choices[0].model_extra["token_ids"] and len(streamed) == 6


def test_cache_salt(client):
    """vLLM's cache_salt: only requests with the same salt reuse each other's prefix pages."""
    # No other test's prompt starts like this one: with partly filled pages (cache.partial_pages)
    # an unsalted prompt may share the rows of any other unsalted prompt it begins like.
    prompt = "Zq: the salted cache keeps tenants apart, " * 4

    def cached(**extra):
        r = client.completions.create(model="tiny", prompt=prompt, max_tokens=2, temperature=0,
                                      extra_body={"ignore_eos": True, **extra})
        return r.usage.prompt_tokens_details.cached_tokens, r.choices[0].text

    first, text = cached(cache_salt="tenant-a")
    assert first == 0
    again, again_text = cached(cache_salt="tenant-a")
    assert again > 0 and again_text == text, "the salt's own pages"
    other, other_text = cached(cache_salt="tenant-b")  # tenant-a's pages were just used: still cached
    assert other == 0 and other_text == text
    plain, _ = cached()
    assert plain == 0, "an unsalted request takes no salted page"
    with pytest.raises(openai.BadRequestError) as e:
        cached(cache_salt="")
    assert "cache_salt" in str(e.value)


def test_beam_search(client):
    """vLLM's use_beam_search through the client's extra_body: n beams, best first."""
    r = client.completions.create(model="tiny", prompt="Once upon a time", n=3, max_tokens=6, logprobs=1,
                                  extra_body={"use_beam_search": True, "ignore_eos": True, "length_penalty": 1.0})
    assert [c.index for c in r.choices] == [0, 1, 2]
    # Every beam ran to max_tokens, so the score order is the cumulative logprob's.
    sums = [sum(c.logprobs.token_logprobs) for c in r.choices]
    assert all(len(c.logprobs.tokens) == 6 for c in r.choices)
    assert sums == sorted(sums, reverse=True) or all(a >= b - 1e-4 for a, b in zip(sums, sums[1:]))
    assert r.usage.completion_tokens == 18
    chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], n=2, max_tokens=4,
                                          extra_body={"use_beam_search": True, "early_stopping": "never"})
    assert len(chat.choices) == 2 and all(c.finish_reason in ("stop", "length") for c in chat.choices)
    with pytest.raises(openai.BadRequestError, match="stop"):
        client.completions.create(model="tiny", prompt="x", n=2, max_tokens=4, stop=["."],
                                  extra_body={"use_beam_search": True})


def test_bad_input_is_400(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="tiny", prompt="x", max_tokens=0)
    assert "max_tokens" in str(e.value)
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="tiny", prompt="x", temperature=-1)
    assert greedy(client, "still serving", 2).usage.completion_tokens == 2


def test_wrong_key_is_401(server):
    bad = openai.OpenAI(base_url=server, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_logit_bias_and_min_tokens(client):
    plain = greedy(client, "Once upon", 5, logprobs=0).choices[0].logprobs.tokens
    # +100 on one token: greedy decoding emits nothing else.
    forced = greedy(client, "Once upon", 5, logprobs=0, logit_bias={"300": 100}).choices[0].logprobs.tokens
    assert len(forced) == 5 and len(set(forced)) == 1 and forced != plain
    # min_tokens holds the stop id off: the +100 stop token comes exactly after 3 other tokens.
    held = client.completions.create(model="tiny", prompt="Once upon", max_tokens=10, temperature=0,
                                     logit_bias={"300": 100},
                                     extra_body={"stop_token_ids": [300], "min_tokens": 3})
    assert held.choices[0].finish_reason == "stop"
    assert held.usage.completion_tokens == 4
    for bad, says in (({"logit_bias": {"300": 101}}, "logit_bias"), ({"logit_bias": {"9999": 1}}, "vocabulary"),
                      ({"logit_bias": {"x": 1}}, "logit_bias"), ({"min_tokens": 3}, "min_tokens")):
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model="tiny", prompt="x", max_tokens=2, extra_body=bad)
        assert says in str(e.value)


def test_response_format_json_object(client):
    # The synthetic vocabulary's byte b is token 3 + b; EOS (2) at +100 would end the output at
    # once, but the mask holds it off until the object is complete.
    bias = {"2": 100, str(3 + ord("{")): 50, str(3 + ord("}")): 40}
    fmt = {"type": "json_object"}
    text = client.completions.create(model="tiny", prompt="Data:", max_tokens=10, temperature=0, logit_bias=bias,
                                     extra_body={"response_format": fmt}).choices[0].text  # vLLM's extension
    assert json.loads(text) == {}
    try:
        chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "json please"}],
                                              max_tokens=10, temperature=0, logit_bias=bias, response_format=fmt)
        assert json.loads(chat.choices[0].message.content) == {}
        assert chat.choices[0].finish_reason == "stop"
    except openai.BadRequestError as e:
        assert "no chat template" in str(e)
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="tiny", prompt="x", max_tokens=2,
                                  extra_body={"response_format": {"type": "json_schema", "json_schema": {}}})
    assert "schema" in str(e.value)


RECORD_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 0, "maximum": 999},
        "name": {"type": "string", "maxLength": 6},
        "tags": {"type": "array", "items": {"enum": ["a", "bc", 7]}, "maxItems": 2},
        "ok": {"type": ["boolean", "null"]},
    },
    "required": ["id", "name", "ok"],
    "additionalProperties": False,
}


def test_response_format_json_schema(client):
    # EOS at +100 ends the output as soon as the mask lets it: once the instance is complete.
    fmt = {"type": "json_schema", "json_schema": {"name": "record", "schema": RECORD_SCHEMA, "strict": True}}
    bias = {"2": 100, str(3 + ord('"')): 4, str(3 + ord(",")): 3, str(3 + ord("}")): 3}
    n_stopped = 0
    for seed in range(4):
        r = client.completions.create(model="tiny", prompt="Record:", max_tokens=64, temperature=1.0, seed=seed,
                                      logit_bias=bias, extra_body={"response_format": fmt})
        choice = r.choices[0]
        if choice.finish_reason == "stop":
            n_stopped += 1
            doc = json.loads(choice.text)
            jsonschema.validate(doc, RECORD_SCHEMA)
            assert list(doc)[:2] == ["id", "name"], "keys come in schema order"
    assert n_stopped > 0
    # vLLM's guided_json, as an object and as text, greedy (the tiny model's favourite whitespace
    # banned): the same output.
    bias.update({str(3 + ord(c)): -100 for c in " \t\r\n"})
    a = client.completions.create(model="tiny", prompt="Record:", max_tokens=64, temperature=0, logit_bias=bias,
                                  extra_body={"guided_json": RECORD_SCHEMA}).choices[0]
    b = client.completions.create(model="tiny", prompt="Record:", max_tokens=64, temperature=0, logit_bias=bias,
                                  extra_body={"guided_json": json.dumps(RECORD_SCHEMA)}).choices[0]
    assert a.text == b.text, (a.text, b.text)
    assert a.finish_reason == "stop", a.text
    jsonschema.validate(json.loads(a.text), RECORD_SCHEMA)


def test_guided_choice(client):
    choices = ["positive", "negative", "neutral"]
    for seed in range(3):
        r = client.completions.create(model="tiny", prompt="Sentiment:", max_tokens=8, temperature=1.0, seed=seed,
                                      extra_body={"guided_choice": choices})
        assert r.choices[0].text in choices
        assert r.choices[0].finish_reason == "stop"


def test_guided_choice_beginning_with_a_blank(client):
    # A choice is raw text: its leading space or newline is its own (vLLM's choice_as_grammar).
    for choice in [" functools[]", "\n\nx = 1", " \u65e5\u672c"]:
        r = client.completions.create(model="tiny", prompt="Pick:", max_tokens=16, temperature=0,
                                      extra_body={"guided_choice": [choice]})
        assert r.choices[0].text == choice, (choice, r.choices[0].text)
        assert r.choices[0].finish_reason == "stop"
        chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Pick."}],
                                              max_tokens=16, temperature=0, extra_body={"guided_choice": [choice]})
        assert chat.choices[0].message.content == choice, (choice, chat.choices[0].message.content)


def test_guided_regex(client):
    # vLLM's guided_regex on completions and chat, SGLang's top-level regex: the output fullmatches
    # (Python's re is the reference), greedy and sampled, and a pattern in a schema too.
    pattern = r"(\d{3}-[a-z]{2,5}|none)( [A-Z]\w*)?"
    eos_bias = {"2": 100}
    for seed in range(4):
        r = client.completions.create(model="tiny", prompt="Code:", max_tokens=24, temperature=1.0, seed=seed,
                                      logit_bias=eos_bias, extra_body={"guided_regex": pattern})
        assert r.choices[0].finish_reason == "stop", r.choices[0].text
        assert re.fullmatch(pattern, r.choices[0].text, re.ASCII), r.choices[0].text
    chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Answer"}],
                                          max_tokens=16, temperature=0, logit_bias=eos_bias,
                                          extra_body={"regex": "(yes|no)!?"})
    assert re.fullmatch("(yes|no)!?", chat.choices[0].message.content), chat.choices[0].message.content
    schema = {"type": "object", "properties": {"day": {"type": "string", "format": "date"},
                                               "code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
              "required": ["day", "code"], "additionalProperties": False}
    r = client.completions.create(model="tiny", prompt="Record:", max_tokens=64, temperature=0,
                                  logit_bias={**eos_bias, **{str(3 + ord(c)): -100 for c in " \t\r\n"}},
                                  extra_body={"guided_json": schema}).choices[0]
    assert r.finish_reason == "stop", r.text
    doc = json.loads(r.text)
    jsonschema.validate(doc, schema)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", doc["day"]) and re.fullmatch("[A-Z]{3}", doc["code"]), doc


ARRAYS_GBNF = r"""root ::= "[" ws (item (ws "," ws item)*)? ws "]"
item ::= "-"? [1-9] [0-9]{0,3} | "0" | "\"" [a-z]{1,8} "\""
ws ::= " "?
"""


def test_guided_grammar(client):
    # vLLM's guided_grammar (and structured_outputs.grammar), llama.cpp's grammar and SGLang's ebnf
    # through the real openai client: the output parses as JSON (Python's json is the reference),
    # greedy and sampled, on completions and chat.
    eos_bias = {"2": 100}
    for seed in range(4):
        r = client.completions.create(model="tiny", prompt="List:", max_tokens=48, temperature=1.0, seed=seed,
                                      logit_bias={**eos_bias, str(3 + ord("]")): 5},
                                      extra_body={"guided_grammar": ARRAYS_GBNF}).choices[0]
        assert r.finish_reason == "stop", r.text
        doc = json.loads(r.text)
        assert isinstance(doc, list) and all(isinstance(x, (int, str)) for x in doc), r.text
    for body in ({"grammar": ARRAYS_GBNF}, {"ebnf": ARRAYS_GBNF}, {"structured_outputs": {"grammar": ARRAYS_GBNF}}):
        chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "List"}],
                                              max_tokens=48, temperature=0, logit_bias={**eos_bias, str(3 + ord("]")): 5},
                                              extra_body=body).choices[0]
        assert chat.finish_reason == "stop", chat.message.content
        assert isinstance(json.loads(chat.message.content), list), (body, chat.message.content)


def test_bad_schema_is_400(client):
    for body, says in [({"guided_json": {"type": "string", "pattern": "a(?=b)"}}, "lookaround"),
                       ({"guided_json": {"$ref": "#/$defs/nope"}}, "$ref"),
                       ({"guided_json": "{not json"}, "not valid JSON"),
                       ({"guided_choice": []}, "guided_choice"),
                       ({"guided_regex": "(a)\\1"}, "backreference"),
                       ({"guided_regex": "(a{1000}){1000}"}, "too large"),
                       ({"regex": "a", "guided_choice": ["a"]}, "at most one"),
                       ({"guided_grammar": "root ::= x"}, "rule 'x' is used but never defined"),
                       ({"grammar": 'root ::= "a" | "b'}, "grammar line 1, column 16: unterminated literal"),
                       ({"ebnf": 'root ::= e\ne ::= e "+" "1" | "1"'}, "left recursion"),
                       ({"structured_outputs": {"grammar": "item ::= [a-z]"}}, "no 'root' rule"),
                       ({"guided_grammar": 'root ::= "a"', "regex": "a"}, "at most one")]:
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model="tiny", prompt="x", max_tokens=2, extra_body=body)
        assert says in str(e.value), (body, str(e.value))


def test_rate_limit_station_is_a_429_the_client_understands(tmp_path):
    """A topology's rate_limit station keyed by OpenAI's `user` field: the client's second request
    within the minute gets openai.RateLimitError with a Retry-After header; another user is served."""
    model = str(tmp_path / "tiny")
    make_tiny_model(model)
    topology = tmp_path / "limited.yaml"
    topology.write_text("stations:\n  - type: rate_limit\n    options: {requests_per_minute: 1}\n")
    proc, url = launch(model, "--topology", str(topology), name="tiny")
    try:
        c = client_of(url)
        assert greedy(c, "hi", 2, user="ann").choices[0].finish_reason == "length"
        with pytest.raises(openai.RateLimitError) as err:
            greedy(c, "hi", 2, user="ann")
        assert "rate limit for user 'ann'" in err.value.message
        assert 59 <= int(err.value.response.headers["retry-after"]) <= 60
        assert greedy(c, "hi", 2, user="bob").choices[0].finish_reason == "length"
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0


WEATHER_PARAMS = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 5}, "days": {"type": "integer", "minimum": 1, "maximum": 9}},
    "required": ["city", "days"],
}
TIME_PARAMS = {"type": "object", "properties": {"tz": {"enum": ["UTC", "CET"]}}, "required": ["tz"]}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": WEATHER_PARAMS}},
    {"type": "function", "function": {"name": "get_time", "description": "Time in a zone", "parameters": TIME_PARAMS}},
]
# Greedy with EOS (id 2) at +100: the output ends as soon as the forced call is complete; the tiny
# model's favourite whitespace is banned (the synthetic vocabulary's byte b is token 3 + b).
TOOL_BIAS = {"2": 100, **{str(3 + ord(c)): -100 for c in " \t\r\n"}}


@pytest.fixture(scope="module")
def tool_client():
    """`brigade serve` on a tiny qwen2 model: make-model writes Qwen2.5's real chat template (Hermes
    <tool_call> blocks)."""
    tmp = tempfile.TemporaryDirectory()
    model = os.path.join(tmp.name, "tiny-qwen2")
    make_tiny_model(model, max_position=2048, arch="qwen2")
    with open(os.path.join(model, "tokenizer_config.json")) as f:
        assert "You are Qwen, created by Alibaba Cloud." in json.load(f)["chat_template"]
    yield from serve_tiny(model, tmp)


def start_tiny_server(model, *args, stderr=None):
    """`brigade serve` on `model` as "tiny" with `args` (its stderr to `stderr`, a file, when given):
    (the process, an openai client)."""
    proc, url = launch(model, *args, name="tiny", stderr=stderr)
    return proc, client_of(url)


def serve_tiny(model, tmp, *args):
    """start_tiny_server as a fixture: yields its client, then stops it and removes `tmp`."""
    proc, client = start_tiny_server(model, *args)
    yield client
    stop(proc)
    tmp.cleanup()


def ask_tools(client, tool_choice, **kw):
    return client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Weather in Oslo?"}],
                                          tools=TOOLS, tool_choice=tool_choice, max_tokens=48, temperature=0,
                                          logit_bias=TOOL_BIAS, **kw)


def test_tool_choice_named_returns_a_parseable_call(tool_client):
    named = {"type": "function", "function": {"name": "get_weather"}}
    r = ask_tools(tool_client, named)
    choice = r.choices[0]
    assert choice.finish_reason == "stop"  # a named call, as OpenAI and vLLM answer
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER_PARAMS)

    # Streamed: delta.tool_calls pieces that add up to the same call.
    calls = {}
    finish = None
    for chunk in ask_tools(tool_client, named, stream=True):
        for d in chunk.choices[0].delta.tool_calls or []:
            entry = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
            entry["id"] = d.id or entry["id"]
            entry["name"] += d.function.name or ""
            entry["arguments"] += d.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "stop"
    assert list(calls) == [0]
    assert calls[0]["name"] == "get_weather" and calls[0]["id"].startswith("call_")
    assert json.loads(calls[0]["arguments"]) == json.loads(call.function.arguments)

    # The call and its result go back into the conversation.
    follow = tool_client.chat.completions.create(
        model="tiny", max_tokens=4, temperature=0, tools=TOOLS,
        messages=[{"role": "user", "content": "Weather in Oslo?"},
                  choice.message.model_dump(exclude_none=True),
                  {"role": "tool", "tool_call_id": call.id, "content": "-3 C, snow"}])
    assert follow.choices[0].message.role == "assistant"


def test_tool_choice_required_calls_one_of_the_tools(tool_client):
    r = ask_tools(tool_client, "required", parallel_tool_calls=False)
    assert r.choices[0].finish_reason == "tool_calls"
    [call] = r.choices[0].message.tool_calls
    schema = {"get_weather": WEATHER_PARAMS, "get_time": TIME_PARAMS}[call.function.name]
    jsonschema.validate(json.loads(call.function.arguments), schema)


def test_tool_choice_none_and_bad_tools(tool_client):
    r = tool_client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], tools=TOOLS,
                                            tool_choice="none", max_tokens=4, temperature=0)
    assert r.choices[0].message.tool_calls is None
    assert isinstance(r.choices[0].message.content, str)
    for kw, says in [({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "not in 'tools'"),
                     ({"tool_choice": "required"}, "needs 'tools'"),
                     ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0].function.name")]:
        with pytest.raises(openai.BadRequestError) as e:
            tool_client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                                max_tokens=2, **kw)
        assert says in str(e.value), (kw, str(e.value))


def add_tokens(model, tags, special):
    """The model's last vocabulary entries become `tags`, added tokens (`special` as the real
    tokenizer marks them). Returns their ids."""
    path = os.path.join(model, "tokenizer.json")
    with open(path) as f:
        tok = json.load(f)
    vocab, merges = tok["model"]["vocab"], tok["model"]["merges"]
    piece_of = {i: p for p, i in vocab.items()}
    ids = tuple(range(len(vocab) - len(tags), len(vocab)))
    for tag, i in zip(tags, ids):
        piece = piece_of[i]
        del vocab[piece]
        # The merge that made the piece goes too (the last pieces are nobody's parts).
        merges[:] = [m for m in merges if (m if isinstance(m, str) else " ".join(m)).replace(" ", "", 1) != piece]
        vocab[tag] = i
        tok["added_tokens"].append({"id": i, "content": tag, "single_word": False, "lstrip": False,
                                    "rstrip": False, "normalized": False, "special": special})
    with open(path, "w") as f:
        json.dump(tok, f)
    return ids


def add_think_tokens(model):
    """`<think>` and `</think>` as in Qwen3's and R1's tokenizers (not special: they stay in the text)."""
    return add_tokens(model, ["<think>", "</think>"], special=False)


@pytest.fixture(scope="module")
def reasoning_client(tmp_path_factory):
    """`brigade serve --reasoning-parser deepseek_r1` with a template that opens a <think> block, as R1's does,
    on a model whose vocabulary has the tags as tokens."""
    tmp = tmp_path_factory.mktemp("reasoning")
    model = str(tmp / "tiny")
    make_tiny_model(model)
    _, close = add_think_tokens(model)
    template = tmp / "think.jinja"
    template.write_text("{% for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}assistant: <think>\n")
    proc, url = launch(model, "--chat-template", str(template), "--reasoning-parser", "deepseek_r1", name="tiny")
    client = client_of(url)
    client.think_close_id = close
    yield client
    stop(proc)


def test_structured_output_after_the_reasoning(reasoning_client):
    schema = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}}, "required": ["answer"],
              "additionalProperties": False}
    kw = dict(model="tiny", messages=[{"role": "user", "content": "Why?"}], max_tokens=40, temperature=0,
              response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}})
    # Free while thinking: cut by max_tokens inside the block, there is no answer yet.
    thinking = reasoning_client.chat.completions.create(**{**kw, "max_tokens": 8})
    assert thinking.choices[0].message.content is None
    assert thinking.choices[0].message.reasoning_content
    # `</think>` pushed up closes the block at once: the answer follows the schema.
    # (The tiny model's favourite whitespace is banned so that the object closes within max_tokens.)
    bias = {str(reasoning_client.think_close_id): 100, **{str(3 + ord(c)): -100 for c in " \t\r\n"}}
    r = reasoning_client.chat.completions.create(logit_bias=bias, **kw)
    assert r.choices[0].finish_reason == "stop", r.choices[0].message
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)
    assert r.choices[0].message.reasoning_content is None


def test_reasoning_content(reasoning_client):
    kw = dict(model="tiny", messages=[{"role": "user", "content": "Why?"}], max_tokens=10, temperature=0)
    whole = reasoning_client.chat.completions.create(extra_body={"separate_reasoning": False}, **kw)
    text = whole.choices[0].message.content
    assert text and "</think>" not in text
    r = reasoning_client.chat.completions.create(**kw)
    assert r.choices[0].message.reasoning_content == text  # the block never closed: all of it is reasoning
    assert r.choices[0].message.content is None
    streamed = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or ""
                       for c in reasoning_client.chat.completions.create(stream=True, **kw) if c.choices)
    assert streamed == text
    dropped = reasoning_client.chat.completions.create(extra_body={"include_reasoning": False}, **kw)
    assert getattr(dropped.choices[0].message, "reasoning_content", None) is None


def test_thinking_token_budget(reasoning_client):
    """vLLM's thinking_token_budget through the client's extra_body: `</think>` is forced after the budget (the model,
    its `</think>` held at -100, would think through max_tokens), and the rest is the answer."""
    kw = dict(model="tiny", messages=[{"role": "user", "content": "Why?"}], max_tokens=12, temperature=0,
              logit_bias={str(reasoning_client.think_close_id): -100})
    free = reasoning_client.chat.completions.create(**kw)
    assert free.choices[0].message.content is None and free.choices[0].message.reasoning_content
    r = reasoning_client.chat.completions.create(extra_body={"thinking_token_budget": 3, "return_token_ids": True}, **kw)
    ids = r.choices[0].model_extra["token_ids"]
    assert len(ids) == 12 and ids[3] == reasoning_client.think_close_id
    assert r.choices[0].message.reasoning_content
    assert r.choices[0].message.content, "the answer follows the forced close"
    chunks = [c for c in reasoning_client.chat.completions.create(stream=True, extra_body={"thinking_token_budget": 3},
                                                                  **kw) if c.choices]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == r.choices[0].message.content
    with pytest.raises(openai.BadRequestError, match="thinking_token_budget"):
        reasoning_client.completions.create(model="tiny", prompt="<think>", max_tokens=4,
                                            extra_body={"thinking_token_budget": 2})


def test_several_prompts_in_one_request(client):
    prompts = ["Once upon a time", "The kitchen brigade"]
    r = greedy(client, prompts, 6)
    assert [c.index for c in r.choices] == [0, 1]
    for p, choice in zip(prompts, r.choices):
        assert choice.text == greedy(client, p, 6).choices[0].text


def test_responses_api(client):
    """POST /v1/responses through the client's own Responses types: the answer is chat's."""
    kw = dict(model="tiny", input="Once upon a time", instructions="Tell a story.", max_output_tokens=6, temperature=0)
    r = client.responses.create(**kw)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    chat = client.chat.completions.create(model="tiny", max_tokens=6, temperature=0,
                                          messages=[{"role": "system", "content": "Tell a story."},
                                                    {"role": "user", "content": "Once upon a time"}])
    assert r.output_text == chat.choices[0].message.content
    assert r.usage.input_tokens == chat.usage.prompt_tokens and r.usage.output_tokens == 6

    events = list(client.responses.create(stream=True, **kw))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type == "response.incomplete"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == r.output_text
    assert events[-1].response.output_text == r.output_text

    # text.format: a schema-constrained answer (the tiny model's whitespace banned so that it closes).
    schema = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}}, "required": ["answer"],
              "additionalProperties": False}
    fmt = {"format": {"type": "json_schema", "name": "a", "schema": schema, "strict": True}}
    bias = {str(3 + ord(c)): -100 for c in " \t\r\n"}
    s = client.responses.create(model="tiny", input="Yes?", text=fmt, max_output_tokens=40, temperature=0,
                                extra_body={"logit_bias": bias})
    assert s.status == "completed", s.output
    jsonschema.validate(json.loads(s.output_text), schema)

    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        client.responses.create(model="tiny", input="x", previous_response_id="resp_1")


@pytest.fixture(scope="module")
def mistral_client():
    """`brigade serve` on a tiny llama model with Mistral 7B v0.3's real chat template, as vLLM users
    start a Mistral model: --tool-call-parser mistral --enable-auto-tool-choice."""
    tmp = tempfile.TemporaryDirectory()
    model = os.path.join(tmp.name, "tiny-mistral")
    make_tiny_model(model, max_position=2048)
    template = os.path.join(ROOT, "tests", "fixtures", "chat_templates", "templates", "mistral-v0.3.jinja")
    yield from serve_tiny(model, tmp, "--chat-template", template, "--tool-call-parser", "mistral",
                          "--enable-auto-tool-choice")


# What a Mistral model writes for two calls (the tiny model is forced to write it: guided_choice).
MISTRAL_CALLS = ('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}, '
                 '{"name": "get_time", "arguments": {"tz": "CET"}}]')


def test_mistral_tool_calls(mistral_client):
    ask = [{"role": "user", "content": "Weather in Oslo?"}]
    kw = dict(model="tiny", messages=ask, tools=TOOLS, tool_choice="auto", max_tokens=200, temperature=0,
              extra_body={"guided_choice": [MISTRAL_CALLS]})
    r = mistral_client.chat.completions.create(**kw)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == \
        [("get_weather", {"city": "Oslo", "days": 2}), ("get_time", {"tz": "CET"})]
    for c in calls:  # Mistral's ids: its template refuses any other
        assert c.type == "function" and re.fullmatch(r"[A-Za-z0-9]{9}", c.id), c.id

    streamed = {}
    for chunk in mistral_client.chat.completions.create(stream=True, **kw):
        for d in chunk.choices[0].delta.tool_calls or []:
            entry = streamed.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
            entry["id"] = d.id or entry["id"]
            entry["name"] += d.function.name or ""
            entry["arguments"] += d.function.arguments or ""
    assert [(e["name"], e["arguments"]) for e in streamed.values()] == \
        [(c.function.name, c.function.arguments) for c in calls]
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", e["id"]) for e in streamed.values())

    # The calls and their results go back: the template takes the ids brigade made.
    follow = mistral_client.chat.completions.create(
        model="tiny", max_tokens=4, temperature=0, tools=TOOLS,
        messages=ask + [choice.message.model_dump(exclude_none=True)] +
        [{"role": "tool", "tool_call_id": c.id, "content": "-3 C"} for c in calls])
    assert follow.choices[0].message.role == "assistant"
    # An id of another shape is refused by the template, with its message.
    with pytest.raises(openai.BadRequestError) as e:
        mistral_client.chat.completions.create(
            model="tiny", max_tokens=4, tools=TOOLS,
            messages=ask + [{"role": "assistant", "tool_calls": [{"id": "call_x", "type": "function",
                                                                  "function": {"name": "get_time", "arguments": "{}"}}]},
                            {"role": "tool", "tool_call_id": "call_x", "content": "noon"}])
    assert "length 9" in str(e.value)


@pytest.fixture(scope="module")
def lora_client():
    """`brigade serve` on the transformers fixture tests/fixtures/llama with LoRA slots and vLLM's
    runtime adapter routes (as VLLM_ALLOW_RUNTIME_LORA_UPDATING=True with --enable-lora)."""
    model = os.path.join(ROOT, "tests", "fixtures", "llama")
    env_proc = dict(os.environ, VLLM_ALLOW_RUNTIME_LORA_UPDATING="True")
    proc, url = launch(model, "--enable-lora", "--max-loras", "1", name="tiny", env=env_proc)
    yield client_of(url)
    stop(proc)


def reference_first_logprob(fixture):
    """The PEFT reference's logprob of the greedy first token of the fixture's first prompt."""
    with open(os.path.join(ROOT, "tests", "fixtures", fixture, "expected.json")) as f:
        case = json.load(f)["cases"][0]
    last = case["logits"][-1]
    top = max(last)
    log_z = top + math.log(sum(math.exp(v - top) for v in last))
    return case["prompt"], case["greedy"][0], last[case["greedy"][0]] - log_z


def test_lora_adapters_load_and_unload_at_run_time(lora_client):
    path = os.path.join(ROOT, "tests", "fixtures", "lora", "all_r4")
    r = lora_client.post("/load_lora_adapter", cast_to=str, body={"lora_name": "all", "lora_path": path})
    assert r == "Success: LoRA adapter 'all' added successfully."
    assert [m.id for m in lora_client.models.list().data] == ["tiny", "all"]
    prompt, token, logprob = reference_first_logprob("lora/all_r4")
    c = lora_client.completions.create(model="all", prompt=prompt, max_tokens=1, temperature=0, logprobs=0,
                                       extra_body={"ignore_eos": True})
    assert abs(c.choices[0].logprobs.token_logprobs[0] - logprob) < 4e-4
    with pytest.raises(openai.BadRequestError, match="already loaded"):
        lora_client.post("/load_lora_adapter", cast_to=str, body={"lora_name": "all", "lora_path": path})
    r = lora_client.post("/unload_lora_adapter", cast_to=str, body={"lora_name": "all"})
    assert r == "Success: LoRA adapter 'all' removed successfully."
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        lora_client.completions.create(model="all", prompt=prompt, max_tokens=1)
    with pytest.raises(openai.NotFoundError):
        lora_client.post("/unload_lora_adapter", cast_to=str, body={"lora_name": "all"})


def test_generation_config_sets_request_defaults_and_eos():
    """The model's generation_config.json as vLLM's --generation-config auto takes it, through the real
    client (which sends only the fields given): temperature 0 there makes requests without one greedy,
    run after run, as an explicit temperature 0; max_new_tokens caps max_tokens; --generation-config
    vllm keeps temperature 1 (sampled: seeds differ); and an id its eos_token_id adds ends a greedy
    generation where that token comes."""
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "tiny")
        make_tiny_model(model)
        with open(os.path.join(model, "generation_config.json")) as f:
            gen = json.load(f)
        gen.update({"temperature": 0.0, "max_new_tokens": 6})
        with open(os.path.join(model, "generation_config.json"), "w") as f:
            json.dump(gen, f)
        log_path = os.path.join(tmp, "serve.log")
        with open(log_path, "w") as log_file:
            proc, c = start_tiny_server(model, stderr=log_file)
        try:
            plain = [c.completions.create(model="tiny", prompt="Once upon a time", max_tokens=20,
                                          extra_body={"ignore_eos": True}) for _ in range(3)]
            assert len({p.choices[0].text for p in plain}) == 1
            assert all(p.usage.completion_tokens == 6 for p in plain)
            explicit = c.completions.create(model="tiny", prompt="Once upon a time", max_tokens=20, temperature=0,
                                            extra_body={"ignore_eos": True})
            assert explicit.choices[0].text == plain[0].choices[0].text
            chat = [c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                              extra_body={"ignore_eos": True}) for _ in range(2)]
            assert chat[0].choices[0].message.content == chat[1].choices[0].message.content
            assert chat[0].usage.completion_tokens == 6
            ids = c.completions.create(model="tiny", prompt="Once upon a time", logprobs=0,
                                       extra_body={"ignore_eos": True, "return_tokens_as_token_ids": True})
            greedy_ids = [int(t.split(":")[1]) for t in ids.choices[0].logprobs.tokens]
        finally:
            stop(proc)
        with open(log_path) as f:
            log = f.read()
        assert "default sampling settings from the model's generation_config.json: temperature=0 max_tokens=6" in log

        proc, c = start_tiny_server(model, "--generation-config", "vllm")
        try:
            texts = {c.completions.create(model="tiny", prompt="Once upon a time", max_tokens=8, seed=s,
                                          extra_body={"ignore_eos": True}).choices[0].text for s in range(6)}
            assert len(texts) > 1, "temperature 1: sampled"
        finally:
            stop(proc)

        # The third greedy token as an EOS id of generation_config.json: the generation stops there.
        third = greedy_ids[2]
        assert third not in greedy_ids[:2]
        gen["eos_token_id"] = [gen["eos_token_id"], third] if isinstance(gen["eos_token_id"], int) else \
            gen["eos_token_id"] + [third]
        with open(os.path.join(model, "generation_config.json"), "w") as f:
            json.dump(gen, f)
        proc, c = start_tiny_server(model)
        try:
            r = c.completions.create(model="tiny", prompt="Once upon a time", logprobs=0,
                                     extra_body={"return_tokens_as_token_ids": True})
            assert r.choices[0].finish_reason == "stop"
            assert [int(t.split(":")[1]) for t in r.choices[0].logprobs.tokens][:2] == greedy_ids[:2]
            assert r.usage.completion_tokens <= 3
        finally:
            stop(proc)
