"""Chat requests with images through the real `openai` client, and the check that an answer is
transformers': the helpers the vision client tests share (test_openai_llava.py,
test_openai_internvl.py, test_openai_pixtral.py, test_openai_glm4v.py, test_openai_gemma4_vision.py,
test_openai_vision.py). A fixture's expected.json "chats" each hold `parts` (text strings and image
indices: the fixture's image<k>.png), an optional `system` prompt, and transformers' `prompt` ids,
`greedy` tokens and their `logprobs`."""
import base64
import os

import openai
import pytest

from fixture_server import image_data_url

# A PNG cut short after its signature: a data: URL no image decoder takes.
BROKEN_PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n cut").decode()


def image_part(url):
    """An OpenAI image_url content part."""
    return {"type": "image_url", "image_url": {"url": url}}


def messages(model_dir, chat, images=None):
    """The chat as OpenAI messages: its system prompt where it has one, then one user turn of text
    parts and image_url parts (the fixture's images as data: URLs, as the client sends them).
    `images`, when given, replaces the chat's image indices in order."""
    images = iter(images) if images is not None else None
    content = [{"type": "text", "text": p} if isinstance(p, str)
               else image_part(image_data_url(model_dir, next(images) if images else p)) for p in chat["parts"]]
    system = [{"role": "system", "content": chat["system"]}] if "system" in chat else []
    return system + [{"role": "user", "content": content}]


def image_indices(chat):
    """The chat's image indices, in order."""
    return [p for p in chat["parts"] if not isinstance(p, str)]


def with_image_url(msgs, url):
    """msgs with the user turn's first image part's URL replaced by url (in place; returned)."""
    next(p for p in msgs[-1]["content"] if p["type"] == "image_url")["image_url"]["url"] = url
    return msgs


def ask(client, model_dir, chat, images=None, n_tokens=None, **kw):
    """The chat sent to the fixture model served as its folder name: greedy, ignoring EOS, n_tokens
    (the chat's greedy count by default) tokens with their logprobs and token ids."""
    return client.chat.completions.create(model=os.path.basename(model_dir), messages=messages(model_dir, chat, images),
                                          max_tokens=len(chat["greedy"]) if n_tokens is None else n_tokens,
                                          temperature=0, logprobs=True,
                                          extra_body={"ignore_eos": True, "return_token_ids": True}, **kw)


def logprob_difference(out, chat):
    """The largest |logprob - transformers'| over the answer's tokens."""
    got = [c.logprob for c in out.choices[0].logprobs.content]
    assert len(got) == len(chat["logprobs"]), (got, chat["logprobs"])
    return max(abs(a - b) for a, b in zip(got, chat["logprobs"]))


def assert_transformers_answer(out, chat, tol=1e-3):
    """ask()'s answer to the chat is transformers': the prompt's ids (the template, the tokenizer and
    each image's tokens) and their count, the greedy tokens to the length asked for, and each
    token's logprob within tol (fp32 both sides). Returns the largest logprob difference."""
    assert out.model_extra["prompt_token_ids"] == chat["prompt"]
    assert out.usage.prompt_tokens == len(chat["prompt"])
    assert out.choices[0].model_extra["token_ids"] == chat["greedy"]
    assert out.choices[0].finish_reason == "length"
    worst = logprob_difference(out, chat)
    assert worst < tol, ([c.logprob for c in out.choices[0].logprobs.content], chat["logprobs"])
    return worst


def assert_streamed_answer(client, model_dir, chat):
    """ask() streamed with the usage: the chunks bring transformers' greedy tokens, in order, and
    the last one's usage counts them."""
    chunks = list(ask(client, model_dir, chat, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens == len(chat["greedy"])
    assert [t for c in chunks if c.choices for t in c.choices[0].model_extra["token_ids"]] == chat["greedy"]


def assert_400(client, model_dir, msgs, match):
    """msgs to the fixture model are a 400 (openai.BadRequestError) whose message matches `match`."""
    with pytest.raises(openai.BadRequestError, match=match):
        client.chat.completions.create(model=os.path.basename(model_dir), messages=msgs, max_tokens=1)
