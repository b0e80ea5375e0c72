#!/usr/bin/env python3
"""Writes the encoder fixtures (BERT, RoBERTa) that tests/models/bert_test.cpp,
tests/actors/engine_encoder_test.cpp and tests/server/http_encoder_test.cpp read
(docs/architecture.md "Encoders").

Each is a tiny random checkpoint made and saved with transformers (fp32) with a tokenizer trained
here by `tokenizers` on a small corpus, in tests/fixtures/encoder/<name>/, and expected.json
holding transformers' own outputs:

  bert_embed    BertModel (2 token types, exact gelu) with a WordPiece tokenizer (lowercasing
                BertNormalizer, [CLS] $A [SEP]) and sentence-transformers files (modules.json:
                mean pooling, Normalize), as all-MiniLM-L6-v2 ships: `texts` (text -> ids ->
                last_hidden_state, and the normalized mean: the sentence embedding) and `pairs`
                (tokenizer(a, b): ids, token_type_ids, last_hidden_state).
  bert_cross    BertForSequenceClassification, 1 label, as cross-encoder/ms-marco-MiniLM-L-6-v2:
                `pairs` tokenized as tokenizer(text=q, text_pair=d) with token_type_ids, the
                logit (pooler dense + tanh over [CLS], then the classifier) and its sigmoid.
  roberta_cls   RobertaForSequenceClassification, 3 labels (negative, neutral, positive),
                type_vocab_size 1, gelu_new, a byte-level BPE tokenizer with RobertaProcessing
                (<s> $A </s>, pairs <s> A </s></s> B </s>): `texts` and `pairs` (ids -> logits
                of classifier.dense + tanh + out_proj over <s>), and `prompts` of token ids with
                the padding id inside (RoBERTa's positions skip it) -> last_hidden_state.
  xlmr_rerank   XLMRobertaForSequenceClassification, 1 label, as BAAI/bge-reranker-base: the
                Unigram tokenizer of tests/fixtures/tokenizers/unigram/xlmr (SentencePiece's
                nmt_nfkc charsmap, <s> A </s></s> B </s>): `pairs` -> ids, logit and sigmoid.

  nomic_embed   NomicBertModel, as nomic-ai/nomic-embed-text-v1.5 (RoPE, SwiGLU, no biases, post-norm),
                over bert_cross's WordPiece tokenizer with mean pooling + Normalize: `texts` and
                `pairs` as bert_embed's; nomic_embed_remote holds its weights under the Hub's
                remote-code names and config (n_embd, attn.Wqkv, mlp.fc11 / fc12, norm1 / norm2).
                `... nomic` rewrites only these two.
  distilbert_sst DistilBertForSequenceClassification, 2 labels (NEGATIVE, POSITIVE), as
                distilbert-base-uncased-finetuned-sst-2-english: bert_cross's WordPiece tokenizer,
                no token types; `texts` -> ids, logits (pre_classifier + ReLU + classifier over
                [CLS]) and last_hidden_state. `... distilbert` rewrites only this one.
  <name>/truncation.json (bert_cross, xlmr_rerank, roberta_cls): pairs and single texts as the
                saved tokenizer.json truncates them with Hugging Face `tokenizers`'
                enable_truncation(max_length=k) (longest_first, right side): ids and type ids.
                `... truncation` rewrites only these, from the committed tokenizers.

Run from anywhere: python3 scripts/make_encoder_fixtures.py. It uses make_fixtures.py's virtual
environment (.brigade/fixtures-venv). CI never runs it; the output is committed.
"""
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import ROOT, ensure_venv  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "encoder"

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "What is the capital of France? Paris is the capital of France.",
    "Machine learning models turn text into vectors that capture its meaning.",
    "A cross-encoder reads the query and the document together and scores them.",
    "Embeddings are compared by cosine similarity; similar sentences lie close.",
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.",
    "Résumé, café, naïve and façade keep their accents unless the tokenizer strips them.",
    "Numbers like 42, 3.14 and 2026 appear in text too!",
    "def forward(self, x): return self.proj(x) ** 2",
    "The weather today is sunny with a light breeze from the west.",
    "Transformers use attention: every token looks at every other token.",
    "How many people live in Berlin? About 3.7 million people live in Berlin.",
] * 4
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Résumé: Café naïve, 42 times!",
    "a",
    "Embeddings are compared by cosine similarity; similar sentences lie close to each other in the space.",
]
PAIRS = [
    ("What is the capital of France?", "Paris is the capital of France."),
    ("What is the capital of France?", "The quick brown fox jumps over the lazy dog."),
    ("How many people live in Berlin?", "About 3.7 million people live in Berlin."),
]


def wordpiece_tokenizer():
    from tokenizers import BertWordPieceTokenizer, processors
    tok = BertWordPieceTokenizer(lowercase=True)
    tok.train_from_iterator(CORPUS, vocab_size=400, min_frequency=1,
                            special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    # As bert-base-uncased's tokenizer.json: [CLS] A [SEP], a pair's second segment type 1.
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok._tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok


def bpe_tokenizer():
    from tokenizers import ByteLevelBPETokenizer, processors
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(CORPUS, vocab_size=420, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tok._tokenizer.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                                 ("<s>", tok.token_to_id("<s>")))
    return tok


def save(model, name, tok):
    out = OUT / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save(str(out / "tokenizer.json"))
    return out


def write_truncation():
    """<name>/truncation.json: each saved tokenizer's truncation of PAIRS (and a long document) and
    of TEXTS at several max_length values."""
    from tokenizers import Tokenizer
    long_doc = " ".join(CORPUS[:6])
    for name in ("bert_cross", "xlmr_rerank", "roberta_cls"):
        tok = Tokenizer.from_file(str(OUT / name / "tokenizer.json"))
        cases = {"pairs": [], "texts": []}
        for q, d in PAIRS + [(PAIRS[0][0], long_doc), (long_doc, PAIRS[0][1])]:
            for k in (5, 8, 12, 17, 30, 64):
                tok.enable_truncation(max_length=k)
                try:
                    e = tok.encode(q, d)
                except Exception:  # max_length below the special tokens: refused
                    continue
                cases["pairs"].append({"text_1": q, "text_2": d, "max_length": k, "ids": e.ids, "type_ids": e.type_ids})
        for t in TEXTS + [long_doc]:
            for k in (3, 5, 9, 40):
                tok.enable_truncation(max_length=k)
                cases["texts"].append({"text": t, "max_length": k, "ids": tok.encode(t).ids})
        (OUT / name / "truncation.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n")
        print(f"{name}/truncation.json: {len(cases['pairs'])} pairs, {len(cases['texts'])} texts")


def write_distilbert():
    """distilbert_sst: a DistilBertForSequenceClassification over bert_cross's committed tokenizer."""
    import torch
    import transformers
    from tokenizers import Tokenizer
    torch.manual_seed(1)
    wp = Tokenizer.from_file(str(OUT / "bert_cross" / "tokenizer.json"))
    cfg = transformers.DistilBertConfig(vocab_size=wp.get_vocab_size(), dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                        max_position_embeddings=128, activation="gelu", initializer_range=0.1,
                                        num_labels=2, id2label={0: "NEGATIVE", 1: "POSITIVE"},
                                        label2id={"NEGATIVE": 0, "POSITIVE": 1})
    model = transformers.DistilBertForSequenceClassification(cfg).eval()
    out = save(model, "distilbert_sst", wp)
    expected = {"texts": []}
    for text in TEXTS:
        ids = wp.encode(text).ids
        with torch.no_grad():
            r = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        expected["texts"].append({"text": text, "ids": ids, "logits": r.logits[0].double().tolist(),
                                  "hidden": [[round(float(v), 7) for v in row] for row in r.hidden_states[-1][0]]})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"distilbert_sst: {len(TEXTS)} texts")


# nomic-ai/nomic-embed-text-v1.5's config.json (the remote-code NomicBertModel's names), at the
# fixture's sizes: what a checkpoint from the Hub gives brigade.
NOMIC_REMOTE_CONFIG = {
    "activation_function": "swiglu", "architectures": ["NomicBertModel"], "attn_pdrop": 0.0,
    "auto_map": {"AutoConfig": "nomic-ai/nomic-bert-2048--configuration_hf_nomic_bert.NomicBertConfig",
                 "AutoModel": "nomic-ai/nomic-bert-2048--modeling_hf_nomic_bert.NomicBertModel"},
    "bos_token_id": None, "causal": False, "dense_seq_output": True, "embd_pdrop": 0.0, "eos_token_id": None,
    "fused_bias_fc": True, "fused_dropout_add_ln": True, "initializer_range": 0.02, "layer_norm_epsilon": 1e-12,
    "max_trained_positions": 128, "mlp_fc1_bias": False, "mlp_fc2_bias": False, "model_type": "nomic_bert",
    "n_embd": 64, "n_head": 4, "n_inner": 96, "n_layer": 2, "n_positions": 512, "pad_vocab_size_multiple": 64,
    "parallel_block": False, "parallel_block_tied_norm": False, "prenorm": False, "qkv_proj_bias": False,
    "reorder_and_upcast_attn": False, "resid_pdrop": 0.0, "rotary_emb_base": 1000, "rotary_emb_fraction": 1.0,
    "rotary_emb_interleaved": False, "rotary_emb_scale_base": None, "rotary_scaling_factor": None,
    "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True, "summary_activation": None,
    "summary_first_dropout": 0.0, "summary_proj_to_labels": True, "summary_type": "cls_index",
    "summary_use_proj": True, "torch_dtype": "float32", "type_vocab_size": 2, "use_cache": True,
    "use_flash_attn": True, "use_rms_norm": False, "use_xentropy": True, "vocab_size": None,
}


def nomic_remote_state(state):
    """NomicBertModel's state dict under the remote-code checkpoint's names: the reverse of
    transformers' conversion mapping for nomic_bert (q, k, v stacked into attn.Wqkv)."""
    out = {}
    for k, v in state.items():
        name = k.replace("embeddings.LayerNorm", "emb_ln")
        if name.startswith("layers."):
            name = "encoder." + name
        for new, old in (("self_attn.o_proj", "attn.out_proj"), ("mlp.up_proj", "mlp.fc11"), ("mlp.gate_proj", "mlp.fc12"),
                         ("mlp.down_proj", "mlp.fc2"), ("post_attention_layernorm", "norm1"),
                         ("post_mlp_layernorm", "norm2")):
            name = name.replace(new, old)
        if ".self_attn.q_proj." in name:
            base = name.replace(".self_attn.q_proj.", ".attn.Wqkv.")
            out[base] = torch_cat([state[k], state[k.replace("q_proj", "k_proj")], state[k.replace("q_proj", "v_proj")]])
            continue
        if ".self_attn.k_proj." in name or ".self_attn.v_proj." in name:
            continue
        out[name] = v.contiguous()
    return out


def torch_cat(parts):
    import torch
    return torch.cat(parts, dim=0).contiguous()


def write_nomic():
    """nomic_embed: a NomicBertModel (nomic-embed-text-v1.5's architecture: RoPE with base 1000, no
    biases, SwiGLU, post-norm layers) over bert_cross's committed WordPiece tokenizer, with
    sentence-transformers' mean pooling and Normalize; nomic_embed_remote: the same weights under the
    Hub checkpoint's remote-code names and config (no expected.json: its outputs are nomic_embed's).
    transformers loads nomic_embed_remote's tensors back through its own conversion mapping, which
    checks the renaming."""
    import torch
    import transformers
    from safetensors.torch import save_file
    from tokenizers import Tokenizer
    torch.manual_seed(3)
    wp = Tokenizer.from_file(str(OUT / "bert_cross" / "tokenizer.json"))
    cfg = transformers.NomicBertConfig(vocab_size=wp.get_vocab_size(), hidden_size=64, num_hidden_layers=2,
                                       num_attention_heads=4, intermediate_size=96, max_position_embeddings=128,
                                       type_vocab_size=2, hidden_act="silu", initializer_range=0.1,
                                       layer_norm_eps=1e-12, rope_parameters={"rope_type": "default", "rope_theta": 1000.0})
    cfg._attn_implementation = "eager"
    model = transformers.NomicBertModel(cfg).eval()
    with torch.no_grad():  # LayerNorms away from the identity
        for name, p in model.named_parameters():
            if "norm" in name.lower():
                p.add_(torch.randn_like(p) * 0.2)
    out = save(model, "nomic_embed", wp)
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ], indent=1) + "\n")
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 64, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}, indent=1) + "\n")
    (out / "2_Normalize").mkdir()
    rows = lambda t: [[round(float(v), 7) for v in r] for r in t]  # noqa: E731

    def hidden_of(m, ids, types):
        with torch.no_grad():
            return m(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([types])).last_hidden_state[0].double()

    expected = {"texts": [], "pairs": []}
    for text in TEXTS:
        enc = wp.encode(text)
        hidden = hidden_of(model, enc.ids, enc.type_ids)
        mean = hidden.mean(dim=0)
        expected["texts"].append({"text": text, "ids": enc.ids, "hidden": rows(hidden),
                                  "embedding": (mean / mean.norm()).tolist()})
    for a, b in PAIRS:
        enc = wp.encode(a, b)
        expected["pairs"].append({"text_1": a, "text_2": b, "ids": enc.ids, "type_ids": enc.type_ids,
                                  "hidden": rows(hidden_of(model, enc.ids, enc.type_ids))})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")

    remote = OUT / "nomic_embed_remote"
    if remote.exists():
        shutil.rmtree(remote)
    remote.mkdir(parents=True)
    config = dict(NOMIC_REMOTE_CONFIG, vocab_size=wp.get_vocab_size())
    (remote / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    state = nomic_remote_state(model.state_dict())
    save_file(state, str(remote / "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(out / "tokenizer.json", remote / "tokenizer.json")
    reloaded = transformers.NomicBertModel.from_pretrained(str(remote), config=cfg).eval()
    for t in expected["texts"]:
        enc = wp.encode(t["text"])
        assert torch.allclose(hidden_of(reloaded, enc.ids, enc.type_ids), hidden_of(model, enc.ids, enc.type_ids),
                              atol=1e-6), "transformers reads the remote names back to the same model"
    print(f"nomic_embed: {len(TEXTS)} texts, {len(PAIRS)} pairs; nomic_embed_remote: {sorted(state)[:4]}...")


def main():
    if sys.argv[1:] == ["nomic"]:
        ensure_venv(__file__)
        return write_nomic()
    if sys.argv[1:] == ["truncation"]:
        ensure_venv(__file__)
        return write_truncation()
    if sys.argv[1:] == ["distilbert"]:
        ensure_venv(__file__)
        return write_distilbert()
    ensure_venv(__file__)
    import torch
    import transformers

    torch.manual_seed(0)
    rows = lambda t: [[round(float(v), 7) for v in r] for r in t]  # noqa: E731

    def run(model, ids, types=None, **kw):
        args = {"input_ids": torch.tensor([ids])}
        if types is not None:
            args["token_type_ids"] = torch.tensor([types])
        with torch.no_grad():
            return model(**args, **kw)

    # bert_embed: BertModel, mean pooling + Normalize.
    wp = wordpiece_tokenizer()
    cfg = transformers.BertConfig(vocab_size=wp.get_vocab_size(), hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=128, max_position_embeddings=128,
                                  type_vocab_size=2, hidden_act="gelu", initializer_range=0.1,
                                  layer_norm_eps=1e-12)
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    out = save(model, "bert_embed", wp)
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ], indent=1) + "\n")
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 64, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}, indent=1) + "\n")
    (out / "2_Normalize").mkdir()
    expected = {"texts": [], "pairs": []}
    for text in TEXTS:
        enc = wp.encode(text)
        hidden = run(model, enc.ids, enc.type_ids).last_hidden_state[0].double()
        mean = hidden.mean(dim=0)
        expected["texts"].append({"text": text, "ids": enc.ids, "hidden": rows(hidden),
                                  "embedding": (mean / mean.norm()).tolist()})
    for a, b in PAIRS:
        enc = wp.encode(a, b)
        hidden = run(model, enc.ids, enc.type_ids).last_hidden_state[0].double()
        expected["pairs"].append({"text_1": a, "text_2": b, "ids": enc.ids, "type_ids": enc.type_ids,
                                  "hidden": rows(hidden)})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"bert_embed: {len(TEXTS)} texts, {len(PAIRS)} pairs")

    # bert_cross: BertForSequenceClassification, one label (a cross-encoder).
    cfg.num_labels = 1
    model = transformers.BertForSequenceClassification(cfg).eval()
    out = save(model, "bert_cross", wp)
    expected = {"pairs": []}
    for q, d in PAIRS:
        enc = wp.encode(q, d)
        logit = run(model, enc.ids, enc.type_ids).logits[0, 0].double().item()
        expected["pairs"].append({"text_1": q, "text_2": d, "ids": enc.ids, "type_ids": enc.type_ids,
                                  "logit": logit,
                                  "score": torch.sigmoid(torch.tensor(logit, dtype=torch.float64)).item()})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"bert_cross: {len(PAIRS)} pairs")

    # roberta_cls: RobertaForSequenceClassification, three labels.
    bpe = bpe_tokenizer()
    pad = bpe.token_to_id("<pad>")
    cfg = transformers.RobertaConfig(vocab_size=bpe.get_vocab_size(), hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=128, max_position_embeddings=130,
                                     type_vocab_size=1, hidden_act="gelu_new", initializer_range=0.1,
                                     layer_norm_eps=1e-5, pad_token_id=pad, bos_token_id=0, eos_token_id=2,
                                     num_labels=3, id2label={0: "negative", 1: "neutral", 2: "positive"},
                                     label2id={"negative": 0, "neutral": 1, "positive": 2})
    model = transformers.RobertaForSequenceClassification(cfg).eval()
    out = save(model, "roberta_cls", bpe)
    expected = {"texts": [], "pairs": [], "prompts": []}
    for text in TEXTS:
        ids = bpe.encode(text).ids
        expected["texts"].append({"text": text, "ids": ids, "logits": run(model, ids).logits[0].double().tolist()})
    for a, b in PAIRS:
        ids = bpe.encode(a, b).ids
        expected["pairs"].append({"text_1": a, "text_2": b, "ids": ids,
                                  "logits": run(model, ids).logits[0].double().tolist()})
    for ids in ([0, 17, 42, 99, 200, 3, 77, 2], [0, 50, pad, 60, pad, pad, 70, 2], [0, 2]):
        r = run(model, ids, output_hidden_states=True)
        expected["prompts"].append({"ids": ids, "hidden": rows(r.hidden_states[-1][0].double()),
                                    "logits": r.logits[0].double().tolist()})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"roberta_cls: {len(TEXTS)} texts, {len(PAIRS)} pairs")

    # xlmr_rerank: XLMRobertaForSequenceClassification, one label, the XLM-R Unigram tokenizer.
    from tokenizers import Tokenizer
    unigram = Tokenizer.from_file(str(ROOT / "tests" / "fixtures" / "tokenizers" / "unigram" / "xlmr" / "tokenizer.json"))
    cfg = transformers.XLMRobertaConfig(vocab_size=unigram.get_vocab_size(), hidden_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, intermediate_size=128, max_position_embeddings=130,
                                        type_vocab_size=1, hidden_act="gelu", initializer_range=0.1,
                                        layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                        num_labels=1)
    model = transformers.XLMRobertaForSequenceClassification(cfg).eval()
    out = save(model, "xlmr_rerank", unigram)
    expected = {"pairs": []}
    for q, d in PAIRS + [("Wie viele Menschen leben in Berlin?", "Etwa 3,7 Millionen Menschen leben in Berlin.")]:
        ids = unigram.encode(q, d).ids
        logit = run(model, ids).logits[0, 0].double().item()
        expected["pairs"].append({"text_1": q, "text_2": d, "ids": ids, "logit": logit,
                                  "score": torch.sigmoid(torch.tensor(logit, dtype=torch.float64)).item()})
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"xlmr_rerank: {len(expected['pairs'])} pairs")
    write_distilbert()
    write_truncation()


if __name__ == "__main__":
    main()
