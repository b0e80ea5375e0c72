#!/usr/bin/env python3
"""Writes the GGUF fixtures of the DeepSeek Sparse Attention models as llama.cpp's own converter
writes them (llama.cpp vendored in llama-cpp-python 0.3.36), from make_fixtures.py's tiny
transformers checkpoints, as make_gguf_mla_fixtures.py does for DeepSeek-V3's other descendants:

  gguf_deepseek_v32   tests/fixtures/deepseek_v32 by conversion/deepseek.py's DeepseekV32Model:
                      arch `deepseek32` (the indexer as blk.N.indexer.*, its shapes in
                      attention.indexer.*); config.json gains scoring_func sigmoid (llama.cpp's
                      deepseek32 loader requires expert_gating_func); the vocabulary read
                      without set_vocab's add_bos_token assertion (CONVERT_V32); pre-tokenizer
                      deepseek-v3
  gguf_glm_moe_dsa    tests/fixtures/glm_moe_dsa by conversion/glm.py's GlmMoeDsaModel: arch
                      `glm-dsa` with attention.indexer.types (full / shared per layer);
                      scoring_func sigmoid; pre-tokenizer glm4

The reference (expected.json) is llama.cpp itself on each file (make_gguf_deepseek_fixtures.
llamacpp_pass: F32 KV cache, every prompt position, the greedy continuation, each decode step).

Run: python3 scripts/make_gguf_dsa_fixtures.py [NAME...], then
python3 scripts/make_gguf_dsa_fixtures.py --llamacpp [NAME...]. CI never runs it.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_gguf_deepseek_fixtures as ds  # noqa: E402
import make_gguf_mla_fixtures as mla  # noqa: E402

# make_gguf_qwen35_fixtures.CONVERT with DeepseekV32Model's vocabulary read without its
# add_bos_token assertion (transformers 5 does not keep the toy vocabulary's add_bos_token).
CONVERT_V32 = """
import runpy, sys
sys.path.insert(0, sys.argv[1])
import conversion.base as base
import conversion.deepseek as deepseek
pre = sys.argv[2]
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
deepseek.DeepseekV32Model.set_vocab = lambda self: self._set_vocab_gpt2()
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
FIXTURES = {
    "gguf_deepseek_v32": ("deepseek_v32", "f32", "deepseek-v3", CONVERT_V32),
    "gguf_glm_moe_dsa": ("glm_moe_dsa", "f32", "glm4", None),
}
mla.FIXTURES.update(FIXTURES)
mla.HUB_FIELDS.update({"deepseek_v32": {"scoring_func": "sigmoid"}, "glm_moe_dsa": {"scoring_func": "sigmoid"}})


def main():
    ds.main(__file__, FIXTURES, mla.make)


if __name__ == "__main__":
    main()
