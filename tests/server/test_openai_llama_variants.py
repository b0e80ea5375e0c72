"""The Llama decoder's newer relatives (OLMo 1, OLMo 3, OLMoE (with clip_qkv too), DBRX, EXAONE 4, GLM-4-0414, Seed-OSS, ERNIE 4.5 and
its MoE, Hunyuan dense, Apertus, Mistral 3's and Llama 4's language models, MiniMax-M2, Command R+
and Command R7B, Granite 3 MoE with and without its shared MLP, Hunyuan MoE, dots.llm1, Phi-3.5-MoE, Arcee Trinity and AFM,
Gemma 1, StarCoder2, Phi-2, StableLM, InternLM 2 and 3, ChatGLM's layout of GLM-4-9B, MiniCPM, MiniCPM 3, MiniCPM 5 MoE, CWM, IQuest-Coder, Solar Open, Youtu-LLM, Ministral, VaultGemma, Param2 MoE,
Sarvam MoE and MLA, GraniteSWA and GraniteMoeSWA, Cohere2 MoE, Hy3) served through the real `openai`
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
from fixture_server import assert_transformers_completion, complete, fixtures, stop, streamed_ids

MODELS = ["olmo", "olmo3", "olmoe", "olmoe_clip", "dbrx", "exaone4", "glm4", "seed_oss", "ernie4_5", "ernie4_5_moe", "hunyuan_v1_dense", "apertus",
          "mistral3", "llama4", "minimax_m2", "cohere", "cohere2", "granitemoe", "granitemoeshared",
          "hunyuan_v1_moe", "dots1", "ministral3", "ministral3_text", "phimoe", "afmoe", "arcee",
          "gemma", "starcoder2", "phi", "stablelm", "stablelm_parallel", "jais2", "nemotron", "exaone", "flex_olmo",
          "gpt_neox", "gptj", "gpt2", "gpt_bigcode", "internlm2", "internlm3", "chatglm", "minicpm",
          "cwm", "iquestcoder", "solar_open", "minicpm5_moe", "youtu", "minicpm3", "ministral", "vaultgemma", "hyperclovax", "kolibri1", "axk1", "flint", "bitnet", "bitnet_auto", "bitnet_online", "bitnet_plain", "mellum",
          "param2moe", "sarvam_moe", "sarvam_mla", "granite_swa", "granitemoe_swa", "cohere2_moe",
          "cohere2_moe_sigmoid", "hy_v3", "falcon", "falcon_new", "falcon_one_norm", "falcon_sequential",
          "bloom", "mpt", "mpt_clip", "opt", "gpt_neo", "codegen"]


@pytest.mark.parametrize("name", MODELS)
def test_greedy_tokens_and_logprobs_are_transformers(name):
    model_dir = fixtures(name)
    cases = fixture_server.expected(model_dir)["cases"]
    proc, client = fixture_server.serve(model_dir)
    try:
        for case in cases:
            assert_transformers_completion(complete(client, name, case), case)
            assert streamed_ids(client, name, case) == case["greedy"]
    finally:
        stop(proc)
