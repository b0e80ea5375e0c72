#!/usr/bin/env python3
"""Writes the GGUF fixtures of DeepSeek-V3's descendants as llama.cpp's own converter writes them
(llama.cpp ggml-org/llama.cpp vendored in llama-cpp-python 0.3.36), from make_fixtures.py's tiny
transformers checkpoints (model.safetensors copied as it is, config.json with HUB_FIELDS added),
each with a toy byte-level vocabulary of its 128 ids (make_gguf_deepseek_fixtures.write_toy_tokenizer;
GLM's with the four special tokens its vocabulary code looks up):

  gguf_mistral4               tests/fixtures/mistral4 (Mistral3ForConditionalGeneration around a
                              Mistral4Config) by conversion/mistral3.py's Mistral4Model, unchanged:
                              arch `mistral4` (llama.cpp's deepseek2 loader and graph), the stacked
                              experts as ffn_gate_up_exps / ffn_down_exps, and no temperature keys
                              (DeepseekV2Model's parameters only) and no expert_gating_func (softmax);
                              pre-tokenizer tekken; config.json's mscale_all_dim set to 0.707
                              (ROPE_FIELDS), so that yarn_log_multiplier is not 0.1 and llama.cpp's
                              YaRN rule for mistral4 (mscale 1, not deepseek2's mscale =
                              mscale_all_dim) shows in the logits
  gguf_deepseek2_temperature  the same checkpoint as Mistral Large 3's files carry the query
                              temperature (conversion/mistral.py MistralMoeModel: arch deepseek2,
                              attention.temperature_scale = llama_4_scaling_beta and
                              attention.temperature_length = YaRN's original_max_position_embeddings),
                              with deepseek2's separate ffn_gate_exps / ffn_up_exps (gguf-py's
                              deepseek2 has no fused gate_up): CONVERT_TEMPERATURE patches the
                              Mistral4Model converter so; pre-tokenizer tekken
  gguf_glm4_moe_lite          tests/fixtures/glm4_moe_lite by conversion/glm.py's Glm4MoeLiteModel
                              (a DeepseekV2Model: arch deepseek2), unchanged; config.json gains
                              scoring_func sigmoid (HUB_FIELDS): without it the converter writes no
                              expert_gating_func and llama.cpp routes by softmax, except for the real
                              model, which its loader recognises by 47 / 48 blocks and 154880 tokens
                              (a fixture of that size is out of reach); pre-tokenizer glm4

The reference (expected.json) is llama.cpp itself on each file (llama-cpp-python 0.3.36 in
.brigade/llamacpp-venv, F32 KV cache): every prompt position's logits, the greedy continuation and
the logits of each cached decode step (make_gguf_deepseek_fixtures.llamacpp_pass). llamacpp.json
records llama.cpp's tokenization of a few strings and how far its logits are from transformers' on
the checkpoint (transformers_max_diff): gguf_mistral4 runs without the temperature, so it departs
from transformers once positions reach original_max_position_embeddings (8), and from the first
position by its mscale_all_dim (0.707, the checkpoint's 1; llama.cpp's softmax scale for mistral4
is mscale(factor, 1)^2 / sqrt(qk_head_dim), its cos/sin factor mscale(factor, 1) /
mscale(factor, mscale_all_dim)); with the temperature
keys llama.cpp agrees with transformers to float noise (mscale = mscale_all_dim = 1, where
llama.cpp's YaRN rule and transformers' coincide); GLM's latent norms take rms_norm_eps (1e-5) in
llama.cpp against transformers' 1e-6.

Run: python3 scripts/make_gguf_mla_fixtures.py [NAME...] (make_fixtures.py's virtual environment),
then python3 scripts/make_gguf_mla_fixtures.py --llamacpp [NAME...] (the llama.cpp environment). CI
never runs it: the fixtures are committed.
"""
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
import make_gguf_deepseek_fixtures as ds  # noqa: E402
import make_gguf_lfm2_fixtures as lfm2  # noqa: E402

# make_gguf_qwen35_fixtures.CONVERT with Mistral4Model writing what Mistral Large 3's files hold
# (module docstring).
CONVERT_TEMPERATURE = """
import runpy, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/gguf-py")
import gguf
import conversion.base as base
import conversion.mistral3 as mistral3
pre = sys.argv[2]
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
M4 = mistral3.Mistral3Model.Mistral4Model
M4.model_arch = gguf.MODEL_ARCH.DEEPSEEK2
set_params, modify = M4.set_gguf_parameters, M4.modify_tensors
def set_gguf_parameters(self):
    set_params(self)
    rope = self.rope_parameters
    self.gguf_writer.add_attn_temperature_scale(rope["llama_4_scaling_beta"])
    self.gguf_writer.add_attn_temperature_length(rope["original_max_position_embeddings"])
def modify_tensors(self, data_torch, name, bid):
    if name.endswith(".gate_up_proj"):  # [E, 2 I, H]: gate rows first (DeepseekV3Experts)
        gate, up = data_torch.chunk(2, dim=1)
        yield from modify(self, gate.contiguous(), name.replace("gate_up_proj", "gate_proj.weight"), bid)
        yield from modify(self, up.contiguous(), name.replace("gate_up_proj", "up_proj.weight"), bid)
        return
    yield from modify(self, data_torch, name, bid)
M4.set_gguf_parameters, M4.modify_tensors = set_gguf_parameters, modify_tensors
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
# name: (source fixture, --outtype, pre-tokenizer name, converter snippet or None for
# make_gguf_qwen35_fixtures.CONVERT)
FIXTURES = {
    "gguf_mistral4": ("mistral4", "f32", "tekken", None),
    "gguf_deepseek2_temperature": ("mistral4", "f32", "tekken", CONVERT_TEMPERATURE),
    "gguf_glm4_moe_lite": ("glm4_moe_lite", "f32", "glm4", None),
}
HUB_FIELDS = {"glm4_moe_lite": {"scoring_func": "sigmoid"}}
# name: text_config.rope_parameters entries replaced in config.json (module docstring).
ROPE_FIELDS = {"gguf_mistral4": {"mscale_all_dim": 0.707}}
# The added tokens conversion/base.py's _set_vocab_glm looks up (GLM-4.7-Flash's vocabulary has them).
GLM_SPECIAL = ["[gMASK]", "<|user|>", "<|observation|>"]


def write_glm_tokenizer(model_dir, vocab_size):
    """make_gguf_deepseek_fixtures.write_toy_tokenizer with GLM_SPECIAL in the ids before
    <|endoftext|> (in place of the merges' ab and ba: one merge, a b, kept)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    alphabet = ["Ġ", "Ċ"] + [c for c in sorted(pre_tokenizers.ByteLevel.alphabet()) if c not in ("Ġ", "Ċ")]
    n = vocab_size - 2 - len(GLM_SPECIAL)
    vocab = {ch: i for i, ch in enumerate(alphabet[:n])}
    vocab["ab"] = n
    special = GLM_SPECIAL + ["<|endoftext|>"]
    for i, t in enumerate(special):
        vocab[t] = n + 1 + i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b")]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True) for t in special])
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(str(model_dir))


def make(name):
    """FIXTURES[name]: the converter's file of the source checkpoint."""
    source, outtype, pre, snippet = FIXTURES[name]
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / source
        cfg = ds.copy_checkpoint(source, d, HUB_FIELDS.get(source, {}))
        if name in ROPE_FIELDS:
            cfg["text_config"]["rope_parameters"].update(ROPE_FIELDS[name])
            (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        vocab = cfg["text_config"]["vocab_size"] if "text_config" in cfg else cfg["vocab_size"]
        (write_glm_tokenizer if pre == "glm4" else ds.write_toy_tokenizer)(d, vocab)
        lfm2.convert(d, out_dir / "model.gguf", outtype, pre, snippet=snippet)
    print(f"{name}: model.gguf {(out_dir / 'model.gguf').stat().st_size / 1024:.0f} KiB")


def main():
    ds.main(__file__, FIXTURES, make)  # llama.cpp's references: make_gguf_deepseek_fixtures.llamacpp_pass


if __name__ == "__main__":
    main()
