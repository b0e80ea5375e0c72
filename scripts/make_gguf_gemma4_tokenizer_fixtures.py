#!/usr/bin/env python3
"""Writes a vocabulary-only GGUF of llama.cpp's `gemma4` tokenizer and its reference encodings,
for tests/models/tokenizer_gguf_gemma4_test.cpp.

The tokenizer is a Gemma-style byte-fallback BPE trained here with Hugging Face `tokenizers` on
make_cohere_tokenizer_fixtures.py's corpus and README.md (no download): normalizer Replace(" " -> U+2581), no
pre-tokenizer, BPE(byte_fallback, unk <unk>), decoder Sequence[Replace(U+2581 -> " "),
ByteFallback, Fuse]; trained with newline runs and U+2581-words kept apart, so no merge crosses
them (as in Gemma's vocabularies); the 256 <0xXX> byte tokens, "\\n" runs up to 8 with their
merges and runs of 9 to 12 without (pieces no merge makes, where llama.cpp and `tokenizers`
differ: the test records it); Gemma 4's specials at Gemma's ids (<pad> 0, <eos> 1, <bos> 2, <unk> 3) and the chat ones (<|turn>, <turn|>,
<|channel>, <channel|>, <|tool_call>, <tool_call|>, <|tool_response>, <tool_response|>, <|"|>,
<|think|>) as special added tokens. llama.cpp's converter (convert_hf_to_gguf.py --vocab-only,
conversion/gemma.py's Gemma4Model.set_vocab) writes it as tokenizer.ggml.model "gemma4" next to
the hyperparameters of tests/fixtures/gemma4_dense/config.json.

tests/fixtures/tokenizers/gemma4_gguf/ then holds:
  vocab.gguf    the converter's file (no tensors)
  vectors.json  per text: "hf" (the `tokenizers` ids of the text, no special tokens added) and
                "hf_decoded" (its decode of them); "llamacpp" (llama.cpp's tokenize with
                parse_special, no BOS), "llamacpp_bos" (with add_special) and "llamacpp_pieces"
                (token_to_piece of each id, special rendered); plus "eog" (the ids llama.cpp's
                llama_vocab_is_eog accepts) and "bos" (llama_vocab_bos).

Run: python3 scripts/make_gguf_gemma4_tokenizer_fixtures.py (fixtures venv: trains, converts,
writes the HF half), then python3 scripts/make_gguf_gemma4_tokenizer_fixtures.py --llamacpp
(llama-cpp-python 0.3.36 in .brigade/llamacpp-venv, vocab_only=True: adds the llama.cpp half).
The output is committed; CI never runs this.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
import make_gguf_qwen35_fixtures as q35  # noqa: E402

OUT = mf.ROOT / "tests" / "fixtures" / "tokenizers" / "gemma4_gguf"
VOCAB_SIZE = 2800
NEWLINE_PIECES = range(9, 13)
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>"]
CHAT = ["<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>",
        "<tool_response|>", '<|"|>', "<|think|>"]

TEXTS = [
    "", " ", "  ", "   ", "a", "Hello world", " Hello world", "Hello world ", "  Hello   world  ", "Hello\tworld",
    "\n", "\n\n", "\n\n\n", "\n\n\n\n\n\n\n", "a\nb", "a\n\nb", " \n ", "line one\n\nline two\n", "\n hello",
    "hello \n", "\n" * 9, "\n" * 10, "a" + "\n" * 11 + "b", "\n" * 12 + " x", "\n" * 13, "\n" * 30,
    "What is the capital of France? Paris is.", "The quick brown fox jumps over the lazy dog.",
    "Café, naïve, résumé, São Paulo, Ångström", "Tiếng Việt có nhiều dấu", "한국어 텍스트도 조금 있습니다.",
    "日本語のテキストとカタカナ", "Привет, мир! Как дела?", "Ελληνικά γράμματα", "العربية نص قصير",
    "🦙", "🦙🐪 llamas", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "❤️", "\u2603 \u00a0 \u3000", "Zürich\u2581x",
    "12345", "3.14159", "In 2024 the model had 131072 tokens", "v2.0.1-beta3", "$1,234.56",
    "<bos>hello", "hello<eos>", "<|turn>user\nHi there<turn|>\n<|turn>model\n",
    "<|channel>thought\nLet me think<channel|>The answer is 4.",
    '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>',
    "<|tool_response>response:get_weather{temp:20}<tool_response|>", "<|think|>", "<pad><unk>", "<|turn",
    "def forward(self, x):\n    return self.proj(x) ** 2  # square it\n", "It's we'll they've I'd",
    "Hello , world ! What ? yes .",
]


def corpus():
    """make_cohere_tokenizer_fixtures.py's lines and the repository's README.md, for English words
    enough for a few thousand merges."""
    from make_cohere_tokenizer_fixtures import corpus as cohere_corpus
    return cohere_corpus() + (mf.ROOT / "README.md").read_text(encoding="utf-8").splitlines()


def build():
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    # Training only: newline runs apart, then words at each U+2581.
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("\n+"), "isolated"),
        pre_tokenizers.Split("\u2581", "merged_with_next"),
    ])
    bytes_ = [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, show_progress=False,
                                  special_tokens=SPECIALS + bytes_, limit_alphabet=200)
    lines = corpus()
    tok.train_from_iterator(lines + ["\n" * n for n in range(1, 9)] * 20 + ["  x   y    z"] * 20, trainer=trainer)
    tok.pre_tokenizer = None
    # Newline runs of 9 to 12 as pieces without a merge that makes them: llama.cpp takes a run that
    # is a piece whole (its Gemma 4 fix), `tokenizers` merges what the merges make (NEWLINE_PIECES).
    j = json.loads(tok.to_str())
    for n in NEWLINE_PIECES:
        j["model"]["vocab"]["\n" * n] = len(j["model"]["vocab"])
    tok = Tokenizer.from_str(json.dumps(j))
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in CHAT])
    return tok


def make():
    from transformers import PreTrainedTokenizerFast
    tok = build()
    OUT.mkdir(parents=True, exist_ok=True)
    config = json.loads((mf.OUT / "gemma4_dense" / "config.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "gemma4_tok"
        d.mkdir()
        (d / "config.json").write_text(json.dumps(config))
        shutil.copy(mf.OUT / "gemma4_dense" / "model.safetensors", d / "model.safetensors")
        PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>",
                                unk_token="<unk>", extra_special_tokens=CHAT).save_pretrained(str(d))
        q35.ensure_llamacpp()
        env = dict(os.environ)
        env.pop("NO_LOCAL_GGUF", None)
        subprocess.check_call([sys.executable, "-c", q35.CONVERT, str(q35.LLAMACPP), "default", str(d), "--vocab-only",
                               "--outfile", str(OUT / "vocab.gguf"), "--outtype", "f32"], env=env)
    cases = []
    for t in TEXTS:
        ids = tok.encode(t, add_special_tokens=False).ids
        cases.append({"text": t, "hf": ids, "hf_decoded": tok.decode(ids, skip_special_tokens=False)})
    (OUT / "vectors.json").write_text(json.dumps({"generator": "tokenizers + convert_hf_to_gguf.py", "cases": cases},
                                                 ensure_ascii=False, indent=0) + "\n")


def llamacpp_pass():
    import ctypes
    import llama_cpp
    m = llama_cpp.Llama(str(OUT / "vocab.gguf"), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(m.model)
    n = llama_cpp.llama_vocab_n_tokens(vocab)
    doc = json.loads((OUT / "vectors.json").read_text())
    buf = ctypes.create_string_buffer(256)
    for c in doc["cases"]:
        b = c["text"].encode()
        c["llamacpp"] = m.tokenize(b, add_bos=False, special=True)
        c["llamacpp_bos"] = m.tokenize(b, add_bos=True, special=True)
        pieces = []
        for i in c["llamacpp"]:
            k = llama_cpp.llama_token_to_piece(vocab, i, buf, len(buf), 0, True)
            pieces.append(list(buf.raw[:k]))
        c["llamacpp_pieces"] = pieces  # bytes: a byte token's piece may be part of a character
    doc["eog"] = [i for i in range(n) if llama_cpp.llama_vocab_is_eog(vocab, i)]
    doc["bos"] = llama_cpp.llama_vocab_bos(vocab)
    doc["generator"] += f", llama-cpp-python {llama_cpp.__version__}"
    (OUT / "vectors.json").write_text(json.dumps(doc, ensure_ascii=False, indent=0) + "\n")
    same = sum(c["hf"] == c["llamacpp"] for c in doc["cases"])
    print(f"{same}/{len(doc['cases'])} texts: llama.cpp's ids == tokenizers'; eog {doc['eog']}, bos {doc['bos']}")
    for c in doc["cases"]:
        if c["hf"] != c["llamacpp"]:
            print("differs:", repr(c["text"]), c["hf"], c["llamacpp"])


def main():
    if sys.argv[1:2] == ["--llamacpp"]:
        mf.ensure_llamacpp_venv(__file__, sys.argv[1:])
        return llamacpp_pass()
    mf.ensure_venv(__file__)
    make()


if __name__ == "__main__":
    main()
