"""The Llama decoder's newer relatives (OLMo 3, OLMoE, EXAONE 4, GLM-4-0414, Seed-OSS, ERNIE 4.5 and
its MoE, Hunyuan dense, Apertus, Mistral 3's language model) served through the real `openai`
client against `brigade serve` on the transformers fixtures of scripts/make_fixtures.py
(tests/fixtures/<name>/expected.json: prompts of token ids, transformers' greedy continuation and
the logits it chose each token from).

/v1/completions with token-id prompts (the fixtures have no tokenizer, so the tokens come back as
"token_id:N" with return_tokens_as_token_ids): the greedy tokens are transformers', and so are
their logprobs (the first token's from the prompt's last logits, the others' from the decode
steps where the fixture records them); a streamed request gets the same tokens.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary.
"""

import pytest

import fixture_server
from fixture_server import fixtures, ids_of, log_softmax_at, stop

MODELS = ["olmo3", "olmoe", "exaone4", "glm4", "seed_oss", "ernie4_5", "ernie4_5_moe", "hunyuan_v1_dense", "apertus",
          "mistral3"]


@pytest.mark.parametrize("name", MODELS)
def test_greedy_tokens_and_logprobs_are_transformers(name):
    model_dir = fixtures(name)
    cases = fixture_server.expected(model_dir)["cases"]
    proc, client = fixture_server.serve(model_dir)
    try:
        for case in cases:
            kw = dict(model=name, prompt=case["prompt"], max_tokens=len(case["greedy"]), temperature=0,
                      extra_body={"return_tokens_as_token_ids": True, "ignore_eos": True})
            r = client.completions.create(logprobs=1, **kw)
            lp = r.choices[0].logprobs
            assert ids_of(lp.tokens) == case["greedy"]
            rows = [case["logits"][-1]] + case.get("decode_logits", [])
            for got, row, token in zip(lp.token_logprobs, rows, case["greedy"]):
                assert got == pytest.approx(log_softmax_at(row, token), abs=1e-3)
            assert r.usage.prompt_tokens == len(case["prompt"])
            assert r.usage.completion_tokens == len(case["greedy"])
            streamed = []
            for chunk in client.completions.create(stream=True, logprobs=1, **kw):
                if chunk.choices and chunk.choices[0].logprobs:
                    streamed += ids_of(chunk.choices[0].logprobs.tokens)
            assert streamed == case["greedy"]
    finally:
        stop(proc)
