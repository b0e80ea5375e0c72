"""State-space models and hybrids (Mamba1, Mamba2, Granite 4.0-H, Bamba, Nemotron-H, Jamba, Qwen3-Next, Qwen3.5,
LFM2-MoE, Falcon-H1)
served through the real `openai` client against `brigade serve` on the transformers fixtures of
scripts/make_fixtures.py (tests/fixtures/<name>/expected.json: prompts of token ids, transformers'
greedy continuation and the logits it chose each token from).

/v1/completions with token-id prompts (the fixtures have no tokenizer, so the tokens come back
as "token_id:N" with return_tokens_as_token_ids): the greedy tokens and their logprobs are
transformers'; several requests at once, n choices and a streamed request each get them too
(every sequence its own recurrent state), and so do two tensor-parallel ranks (-tp 2). A repeated prompt and a conversation's next turn start
from the prefix cache's state snapshots: usage says how many tokens were cached, the tokens stay
transformers', and /metrics counts the snapshots.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary.
"""
import concurrent.futures
import os
import urllib.request

import pytest

import fixture_server
from fixture_server import assert_transformers_completion, complete, fixtures, ids_of, stop, streamed_ids

MODELS = ["mamba2", "falcon_mamba", "granite_hybrid", "nemotron_h", "jamba", "qwen3_next", "qwen3_5", "lfm2_moe", "falcon_h1",
          "bamba"]


@pytest.mark.parametrize("name", MODELS)
def test_greedy_tokens_and_logprobs_are_transformers(name):
    model_dir = fixtures(name)
    cases = fixture_server.expected(model_dir)["cases"]
    proc, client = fixture_server.serve(model_dir)
    try:
        for case in cases:
            assert "decode_logits" in case  # every step's logprob is checked
            assert_transformers_completion(complete(client, name, case), case)
    finally:
        stop(proc)


@pytest.mark.parametrize("name", ["mamba2", "nemotron_h", "jamba", "qwen3_next", "falcon_h1"])
def test_two_tensor_parallel_ranks_serve_transformers_tokens(name):
    """-tp 2: each rank runs its heads (or channels) of every mixer with its part of each
    sequence's state; the tokens and logprobs are still transformers', alone and all at once."""
    model_dir = fixtures(name)
    cases = fixture_server.expected(model_dir)["cases"]
    proc, client = fixture_server.serve(model_dir, "-tp", "2", "--max-num-batched-tokens", "16")
    try:
        for case in cases:
            assert_transformers_completion(complete(client, name, case), case)
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(complete, client, name, cases[i % len(cases)]) for i in range(6)]
            for i, f in enumerate(futures):
                assert ids_of(f.result().choices[0].logprobs.tokens) == cases[i % len(cases)]["greedy"], i
    finally:
        stop(proc)


@pytest.mark.parametrize("name", ["mamba2", "granite_hybrid", "qwen3_next", "falcon_h1"])
def test_concurrent_requests_choices_and_streams_each_keep_their_state(name):
    model_dir = fixtures(name)
    cases = fixture_server.expected(model_dir)["cases"]
    proc, client = fixture_server.serve(model_dir, "--max-num-batched-tokens", "16")
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(complete, client, name, cases[i % len(cases)]) for i in range(12)]
            for i, f in enumerate(futures):
                assert ids_of(f.result().choices[0].logprobs.tokens) == cases[i % len(cases)]["greedy"], i
        r = complete(client, name, cases[2], n=3)
        assert len(r.choices) == 3
        for c in r.choices:
            assert ids_of(c.logprobs.tokens) == cases[2]["greedy"]
        assert streamed_ids(client, name, cases[0]) == cases[0]["greedy"]
    finally:
        stop(proc)


@pytest.mark.parametrize("name", ["mamba2", "granite_hybrid", "qwen3_next", "falcon_h1"])
def test_repeats_and_next_turns_start_from_cached_states(name):
    model_dir = fixtures(name)
    cases = fixture_server.expected(model_dir)["cases"]
    case = cases[2]
    assert len(case["prompt"]) == 40
    proc, client = fixture_server.serve(model_dir)
    try:
        first = complete(client, name, case)
        assert first.usage.prompt_tokens_details.cached_tokens == 0
        again = complete(client, name, case)
        # Pages of 16: the snapshot at the last page boundary before the prompt's last token.
        assert again.usage.prompt_tokens_details.cached_tokens == 32
        assert ids_of(again.choices[0].logprobs.tokens) == case["greedy"]
        # The next turn (prompt, answer, more) continues from a snapshot too: the answer's 8
        # tokens reached no page boundary (47 positions computed), so from the prompt's at 32.
        turn = case["prompt"] + case["greedy"] + cases[0]["prompt"]
        r = client.completions.create(model=name, prompt=turn, max_tokens=4, temperature=0,
                                      extra_body={"ignore_eos": True})
        assert r.usage.prompt_tokens_details.cached_tokens == 32
        root = str(client.base_url).rstrip("/").removesuffix("/v1")
        metrics = urllib.request.urlopen(root + "/metrics", timeout=30).read().decode()
        assert "brigade_prefix_cache_state_restores_total 2\n" in metrics
        assert "brigade_prefix_cache_state_saves_total" in metrics
    finally:
        stop(proc)
