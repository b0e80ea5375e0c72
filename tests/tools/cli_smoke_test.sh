#!/usr/bin/env bash
# The `brigade` commands end to end on a tiny synthetic model: the main job (`demo`: server, a
# chat completion, a streaming load, the summary table) and `bench --offline`, whose JSON must
# count every request and every output token.
set -euo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" make-model --out "$dir/m" --hidden 64 --layers 2 --heads 4 --kv-heads 2 --intermediate 128 --vocab 300 \
  --max-position 512 --dtype f32 >/dev/null

# generate --json-object: whatever the random weights say, an output the model ended is one JSON
# object, and one cut by --max-tokens begins one.
n_whole=0
for seed in 1 2 3 4; do
  "$bin" generate --model "$dir/m" --prompt "Data:" --json-object --max-tokens 32 --seed $seed --threads 1 \
    >"$dir/json.txt" 2>"$dir/json.err"
  if grep -q "finish: stop" "$dir/json.err"; then
    python3 -c 'import json, sys; t = open(sys.argv[1], encoding="utf-8").read(); assert t.startswith("Data:"); assert isinstance(json.loads(t[5:]), dict), t' "$dir/json.txt"
    n_whole=$((n_whole + 1))
  else
    grep -q "finish: length" "$dir/json.err"
    python3 -c 'import sys; t = open(sys.argv[1], encoding="utf-8", errors="replace").read(); assert t[5:].lstrip().startswith("{"), t' "$dir/json.txt"
  fi
done
[ "$n_whole" -ge 1 ]

# generate --grammar FILE: the output derives from the GBNF grammar's root (Python's re checks
# this regular one); it can only be a few characters long, so the model always ends it. A grammar
# that does not parse fails with its line and column.
printf '# answers\nroot ::= answer "!"{0,3}\nanswer ::= "yes" | "no" |\n  "maybe"\n' >"$dir/answer.gbnf"
for seed in 1 2 3; do
  "$bin" generate --model "$dir/m" --prompt "Q:" --grammar "$dir/answer.gbnf" --max-tokens 32 --seed $seed --threads 1 \
    >"$dir/grammar.txt" 2>"$dir/grammar.err"
  grep -q "finish: stop" "$dir/grammar.err"
  python3 -c 'import re, sys; t = open(sys.argv[1], encoding="utf-8").read().rstrip("\n"); assert re.fullmatch("Q:(yes|no|maybe)!{0,3}", t), t' "$dir/grammar.txt"
done
printf 'root ::= "a" b\n' >"$dir/bad.gbnf"
if "$bin" generate --model "$dir/m" --prompt "Q:" --grammar "$dir/bad.gbnf" --threads 1 >/dev/null 2>"$dir/bad.err"; then
  echo "an undefined rule should fail"; exit 1
fi
grep -q "grammar line 1, column 14: rule 'b' is used but never defined" "$dir/bad.err"

# vLLM's engine flags onto the topology (--max-num-seqs, --block-size, --max-model-len (its
# human-readable 1k = 1000 and 1K = 1024 in the refusals), --kv-cache-dtype, --dtype, the prefix-caching and chunked-prefill switches,
# --enforce-eager (no graphs on the CPU anyway), --gpu-memory-utilization (a GPU's KV pool; the CPU keeps
# kv.memory_mb) and --trust-remote-code (accepted)):
# the same greedy tokens as without them; -tp 2 runs (two CPU ranks) and generates as many; a prompt
# that fills --max-model-len is refused naming the limit; values brigade has no equivalent for, a
# --max-model-len beyond the model's positions and contradictory switches are refused by name.
"$bin" generate --model "$dir/m" --prompt-ids 1,20,30,40 --max-tokens 8 --temperature 0 --ignore-eos --threads 1 \
  >"$dir/plain.txt" 2>/dev/null
"$bin" generate --model "$dir/m" --prompt-ids 1,20,30,40 --max-tokens 8 --temperature 0 --ignore-eos --threads 1 \
  --max-num-seqs 4 --block-size 8 --max-model-len 400 --kv-cache-dtype float32 --dtype float32 \
  --no-enable-prefix-caching --no-enable-chunked-prefill --enforce-eager --trust-remote-code --gpu-memory-utilization 0.9 \
  >"$dir/vllm_flags.txt" 2>/dev/null
cmp "$dir/plain.txt" "$dir/vllm_flags.txt"
"$bin" generate --model "$dir/m" --prompt-ids 1,20,30,40 --max-tokens 8 --temperature 0 --ignore-eos --threads 2 \
  -tp 2 >"$dir/tp.txt" 2>"$dir/tp.err"
python3 -c 'import sys; a, b = (open(f).read().split() for f in sys.argv[1:]); assert len(a) == len(b) >= 8, (a, b)' \
  "$dir/plain.txt" "$dir/tp.txt"
# "-tp" as an option's value stays a value (the prompt here), not the tensor-parallel flag.
"$bin" generate --model "$dir/m" --prompt -tp --max-tokens 1 --temperature 0 --threads 1 >"$dir/tp_value.txt" 2>/dev/null
python3 -c 'import sys; t = open(sys.argv[1], encoding="utf-8", errors="replace").read(); assert t.startswith("-tp"), t' \
  "$dir/tp_value.txt"
# -dp 2: two copies behind the router, the same greedy tokens; a topology of several instances lists
# its copies itself.
"$bin" generate --model "$dir/m" --prompt-ids 1,20,30,40 --max-tokens 8 --temperature 0 --ignore-eos --threads 2 \
  -dp 2 >"$dir/dp.txt" 2>/dev/null
cmp "$dir/plain.txt" "$dir/dp.txt"
if "$bin" generate --model "$dir/m" --prompt-ids 1,2 --max-tokens 2 --threads 2 -dp 2 \
  --topology "$(dirname "$0")/../../config/two_cpu_instances.yaml" >/dev/null 2>"$dir/dp.err"; then
  echo "-dp over a topology of two instances should be refused"; exit 1
fi
grep -q "copies a topology's one local instance; this topology has 2" "$dir/dp.err"
if "$bin" generate --model "$dir/m" --prompt-ids 1,2,3,4,5,6,7,8 --max-tokens 4 --max-model-len 8 --threads 1 \
  >/dev/null 2>"$dir/len.err"; then
  echo "a prompt filling --max-model-len should be refused"; exit 1
fi
grep -q "the prompt has 8 tokens; the model's context is 8 tokens" "$dir/len.err"
for bad in "--kv-cache-dtype fp8:no fp8 KV cache" "--dtype half:--dtype half is not supported" \
           "--max-model-len 4x:'4x' is not a token count" \
           "--max-model-len 1k:max_model_len 1000 exceeds the model's 512 positions" \
           "--max-model-len 1K:max_model_len 1024 exceeds the model's 512 positions" \
           "--enable-prefix-caching --no-enable-prefix-caching:give one"; do
  args=${bad%%:*}
  want=${bad#*:}
  # shellcheck disable=SC2086
  if "$bin" generate --model "$dir/m" --prompt-ids 1,2 --max-tokens 2 --threads 1 $args >/dev/null 2>"$dir/bad_flag.err"; then
    echo "$args should be refused"; exit 1
  fi
  grep -qF -- "$want" "$dir/bad_flag.err" || { echo "$args: expected '$want' in:"; cat "$dir/bad_flag.err"; exit 1; }
done

# generate --score --max-tokens 0: the prompt's log-likelihood (its prompt logprobs, 4 of the 5
# tokens scored) and the perplexity that follows from it; --max-tokens 0 alone generates nothing.
"$bin" generate --model "$dir/m" --prompt-ids 1,20,30,40,50 --max-tokens 0 --score --threads 1 >/dev/null 2>"$dir/score.err"
python3 -c 'import math, re, sys
m = re.search(r"prompt: 5 tokens, log-likelihood (\S+), (\S+) per token, perplexity (\S+)\]", open(sys.argv[1]).read())
ll, per, ppl = map(float, m.groups())
assert ll < 0 and abs(ll / 4 - per) < 1e-3 and abs(math.exp(-per) - ppl) < 1e-2 * ppl, m.group(0)' "$dir/score.err"
if "$bin" generate --model "$dir/m" --prompt-ids 1,2 --max-tokens 0 --threads 1 >/dev/null 2>&1; then
  echo "--max-tokens 0 without --score should fail"; exit 1
fi

# generate --beam-width: transformers' 4 beams from BOS on the real stories260K, best first
# (tests/fixtures/beam_search, scripts/make_beam_fixtures.py), when the test data is there.
stories="$(dirname "$0")/../../../shared/testdata/models/stories260K.bin"
if [ -f "$stories" ]; then
  "$bin" generate --model "$stories" --prompt-ids 1 --beam-width 4 --max-tokens 24 --threads 1 >"$dir/beams.txt" 2>/dev/null
  python3 -c 'import json, sys
got = [[int(t) for t in l.split(":", 1)[1].split()] for l in open(sys.argv[1]) if l.startswith("beam ")]
case = next(c for c in json.load(open(sys.argv[2]))["cases"] if c["name"] == "bos_w4_length_only")
assert got == [b["tokens"] for b in case["beams"]], (got, case["beams"])' \
    "$dir/beams.txt" "$(dirname "$0")/../fixtures/beam_search/stories260K.json"
fi

# expect_gguf_greedy DIR FIELD [ARGS...]: generate's 8 greedy ids on the long prompt of the GGUF
# fixture in DIR (model.gguf, expected.json) equal that case's FIELD (greedy, act_q8_greedy).
expect_gguf_greedy() {
  local fixture=$1 field=$2 ids want got
  shift 2
  read -r ids want < <(python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))["cases"][-1]
print(",".join(map(str, c["prompt"])), ",".join(map(str, c[sys.argv[2]])))' "$fixture/expected.json" "$field")
  "$bin" generate --model "$fixture/model.gguf" --prompt-ids "$ids" --max-tokens 8 --temperature 0 --ignore-eos \
    --threads 1 "$@" >"$dir/gguf_ids.txt" 2>/dev/null
  got=$(tr ' ' ',' <"$dir/gguf_ids.txt")
  [ "$got" = "$want" ] || { echo "$fixture greedy: $got, want $want"; exit 1; }
}

# A Gemma 3 GGUF (tests/fixtures/gguf_gemma3, scripts/make_gguf_fixtures.py): inspect reads its
# rules and embedded template, and generate's greedy ids on the fixture's long prompt are
# transformers' (expected.json).
gguf=$(cd "$(dirname "$0")/../fixtures/gguf_gemma3" && pwd)
"$bin" inspect "$gguf/model.gguf" >"$dir/gemma.txt"
grep -q "^architecture:  gemma3_text$" "$dir/gemma.txt"
grep -q "q/k norm, sliding window 8 on 5 of 6 layers" "$dir/gemma.txt"
grep -q "^chat template: Jinja (GGUF tokenizer.chat_template)$" "$dir/gemma.txt"
expect_gguf_greedy "$gguf" greedy --weights f32

# Classifiers (tests/fixtures/classifier, scripts/make_classifier_fixtures.py): inspect names a
# *ForSequenceClassification checkpoint's labels, and the reranker --hf-overrides makes of a causal LM.
cls=$(cd "$(dirname "$0")/../fixtures/classifier" && pwd)
"$bin" inspect "$cls/qwen3_seq_cls" >"$dir/cls.txt"
grep -q "^classifier: Qwen3ForSequenceClassification: 3 labels (negative, neutral, positive) from score.weight; /classify softmax, /score softmax$" "$dir/cls.txt"
"$bin" inspect "$cls/qwen3_reranker" >"$dir/causal.txt"
if grep -q "^classifier:" "$dir/causal.txt"; then exit 1; fi
"$bin" inspect "$cls/qwen3_reranker" --hf-overrides \
  '{"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["0", "1"], "is_original_qwen3_reranker": true}' >"$dir/rr.txt"
grep -q "^classifier: Qwen3ForSequenceClassification: 1 label (LABEL_0) from lm_head.weight rows '1' - '0' (from_2_way_softmax); /classify sigmoid, /score sigmoid; it also generates$" "$dir/rr.txt"
if "$bin" inspect "$cls/qwen3_reranker" --hf-overrides '{"vocab_size": 3}' 2>"$dir/rr_err.txt"; then exit 1; fi
grep -q "key 'vocab_size' is not applied" "$dir/rr_err.txt"

# Encoders (tests/fixtures/encoder, scripts/make_encoder_fixtures.py): inspect describes a BERT
# and a RoBERTa classifier's head; generate says an encoder does not generate.
enc=$(cd "$(dirname "$0")/../fixtures/encoder" && pwd)
"$bin" inspect "$enc/bert_cross" >"$dir/bert.txt"
grep -q "^architecture:  bert$" "$dir/bert.txt"
grep -q "^encoder:       every token sees the whole prompt (run whole, uncached); post-norm LayerNorm (eps 1e-12), gelu MLP, learned positions, 2 token types$" "$dir/bert.txt"
grep -q "^classifier: BertForSequenceClassification: 1 label (LABEL_0) from bert.pooler.dense + tanh, classifier over the first token; /classify sigmoid, /score sigmoid$" "$dir/bert.txt"
if grep -q "^rope:" "$dir/bert.txt"; then exit 1; fi
"$bin" inspect "$enc/roberta_cls" >"$dir/roberta.txt"
grep -q "learned positions from 2 (padding ids skipped), 1 token type$" "$dir/roberta.txt"
if "$bin" generate --model "$enc/bert_embed" --prompt "hello" --max-tokens 2 --threads 1 2>"$dir/enc_err.txt"; then exit 1; fi
grep -q "is an encoder (bert): it does not generate" "$dir/enc_err.txt"
# --max-num-batched-tokens (vLLM's flag) sets the step budget; an encoder's is raised to its positions.
if "$bin" --log-level info generate --model "$enc/bert_embed" --prompt "hello" --max-num-batched-tokens 256 \
  --threads 1 2>"$dir/enc_256.txt"; then exit 1; fi
grep -q "prompts of up to 128 tokens run whole, uncached, in steps of 256 tokens$" "$dir/enc_256.txt"
if "$bin" --log-level info generate --model "$enc/bert_embed" --prompt "hello" --max-num-batched-tokens 4 \
  --threads 1 2>"$dir/enc_4.txt"; then exit 1; fi
grep -q "in steps of 128 tokens (max_step_tokens raised to the model's positions)$" "$dir/enc_4.txt"
if "$bin" generate --model "$enc/bert_embed" --prompt "hello" --max-num-batched-tokens 0 2>/dev/null; then exit 1; fi
# ModernBERT (tests/fixtures/modernbert, scripts/make_modernbert_fixtures.py): its layers and the
# reranker's mean-pooled head.
mb=$(cd "$(dirname "$0")/../fixtures/modernbert" && pwd)
"$bin" inspect "$mb/rerank" >"$dir/modernbert.txt"
grep -q "^architecture:  modernbert$" "$dir/modernbert.txt"
grep -q "^encoder:       every token sees the prompt (run whole, uncached); pre-norm LayerNorm (eps 1e-05, no biases), gated gelu MLP, RoPE; 2 global layers (theta 160000), 2 local (+-4 tokens, theta 10000), no token types$" "$dir/modernbert.txt"
grep -q "^classifier: ModernBertForSequenceClassification: 1 label (LABEL_0) from head.dense + gelu + head.norm, classifier over the mean of the tokens; /classify sigmoid, /score sigmoid$" "$dir/modernbert.txt"

# Mamba2 (tests/fixtures/mamba2, scripts/make_fixtures.py): inspect describes the mixers and the
# state; generate's greedy ids are transformers'; make-model writes one that serves text, with a
# recurrent state per running sequence and state snapshots in the prefix cache.
mamba=$(cd "$(dirname "$0")/../fixtures/mamba2" && pwd)
"$bin" inspect "$mamba" >"$dir/mamba.txt"
grep -q "^architecture:  mamba2$" "$dir/mamba.txt"
grep -q "^ssm:           Mamba2 mixers in 2 of 2 layers: 8 heads of 16, 2 groups, state 16, conv of 4 taps with bias; a 20.99 KB state per sequence (the prefix cache keeps snapshots)$" "$dir/mamba.txt"
if grep -q "^rope:\|^heads:" "$dir/mamba.txt"; then exit 1; fi
# expect_fixture_greedy DIR CASE: generate's 8 greedy ids on prompt CASE of the transformers
# fixture in DIR (expected.json) are transformers'.
expect_fixture_greedy() {
  local fixture=$1 case=$2 ids want
  read -r ids want < <(python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))["cases"][int(sys.argv[2])]
print(",".join(map(str, c["prompt"])), ",".join(map(str, c["greedy"])))' "$fixture/expected.json" "$case")
  "$bin" generate --model "$fixture" --prompt-ids "$ids" --max-tokens 8 --temperature 0 --ignore-eos --threads 1 \
    >"$dir/fixture_ids.txt" 2>/dev/null
  python3 -c 'import sys; got = open(sys.argv[1]).read().split(); assert got[-8:] == sys.argv[2].split(","), (got, sys.argv[2])' \
    "$dir/fixture_ids.txt" "$want"
}
expect_fixture_greedy "$mamba" 0
granite=$(cd "$(dirname "$0")/../fixtures/granite_hybrid" && pwd)
"$bin" inspect "$granite" >"$dir/granite.txt"
grep -q "^ssm:           Mamba2 mixers in 2 of 3 layers: 8 heads of 16, 2 groups" "$dir/granite.txt"
grep -q "^rope:          none (attention layers without positions)$" "$dir/granite.txt"
grep -q "^granite:       embeddings x 3, sublayer outputs x 0.5, logits / 2; a shared SwiGLU of 48 in every layer$" "$dir/granite.txt"
nemotron=$(cd "$(dirname "$0")/../fixtures/nemotron_h" && pwd)
"$bin" inspect "$nemotron" >"$dir/nemotron.txt"
grep -q "^blocks:        M-\*-M (M Mamba2 mixer, \* attention, - relu2 MLP of 96)$" "$dir/nemotron.txt"
grep -q "^rope:          none (attention layers without positions)$" "$dir/nemotron.txt"
# Nemotron 3's MoE blocks (tests/fixtures/nemotron_h_moe): relu2 experts routed in groups.
nemotron3=$(cd "$(dirname "$0")/../fixtures/nemotron_h_moe" && pwd)
"$bin" inspect "$nemotron3" >"$dir/nemotron3.txt"
grep -q "^blocks:        ME\*E (M Mamba2 mixer, \* attention, E 2 of 8 relu2 experts of 32 (sigmoid routing, 2 groups) and a shared one of 48)$" "$dir/nemotron3.txt"
expect_fixture_greedy "$nemotron3" 1
# nemotron_h_bias says tie_word_embeddings but stores lm_head, which the load uses (transformers never ties it).
"$bin" inspect "$(cd "$(dirname "$0")/../fixtures/nemotron_h_bias" && pwd)" >"$dir/nemotron_bias.txt"
grep -q "^tied embed:    no$" "$dir/nemotron_bias.txt"
falcon=$(cd "$(dirname "$0")/../fixtures/falcon_mamba" && pwd)
"$bin" inspect "$falcon" >"$dir/falcon.txt"
grep -q "^ssm:           Mamba1 mixers in 2 of 2 layers: 128 channels, state 16, conv of 3 taps, time-step rank 8, in/out_proj biases, dt/B/C RMS-normed (eps 1e-06); a 18.43 KB state per sequence (the prefix cache keeps snapshots)$" "$dir/falcon.txt"
# Qwen3.5 as the Hub ships it (Qwen3_5ForConditionalGeneration): its language model and its tower.
qwen35=$(cd "$(dirname "$0")/../fixtures/qwen3_5_mm" && pwd)
"$bin" inspect "$qwen35" >"$dir/qwen35.txt"
grep -q "^architecture:  qwen3_5_text (the language model of Qwen3_5ForConditionalGeneration)$" "$dir/qwen35.txt"
grep -q "^vision:        Qwen3_5 ViT 1 layers, hidden 32, images of any size in 4-pixel patches, a token per 2x2 patches (image token 250; M-RoPE sections 2/1/1 interleaved; the CPU backend runs it at tp 1)$" "$dir/qwen35.txt"
grep -q "^ssm:           Gated DeltaNet in 3 of 4 layers: 4 value heads of 8, 2 key heads of 16, conv of 4 taps; a 9.60 KB state per sequence (the prefix cache keeps snapshots); gated attention in the others$" "$dir/qwen35.txt"
grep -q "^rope:          theta 10000, neox, rotary dims 8 of 32$" "$dir/qwen35.txt"
expect_fixture_greedy "$qwen35" 2
# The same model as llama.cpp's converter writes it (tests/fixtures/gguf_qwen35,
# scripts/make_gguf_qwen35_fixtures.py): its value heads in the converter's tiled order.
gguf35=$(cd "$(dirname "$0")/../fixtures/gguf_qwen35" && pwd)
"$bin" inspect "$gguf35/model.gguf" >"$dir/gguf35.txt"
grep -q "^architecture:  qwen3_5_text$" "$dir/gguf35.txt"
grep -q "^ssm:           Gated DeltaNet in 3 of 4 layers: 4 value heads of 16, 2 key heads of 16 (value heads tiled, as llama.cpp orders them), conv of 4 taps" "$dir/gguf35.txt"
expect_gguf_greedy "$gguf35" greedy
# LFM2-MoE (tests/fixtures/lfm2_moe): short convs beside attention, sigmoid-routed experts; and
# LFM2 as llama.cpp's converter writes it (tests/fixtures/gguf_lfm2, scripts/make_gguf_lfm2_fixtures.py).
lfm2=$(cd "$(dirname "$0")/../fixtures/lfm2_moe" && pwd)
"$bin" inspect "$lfm2" >"$dir/lfm2.txt"
grep -q "^ssm:           short convolutions in 3 of 4 layers: 64 channels, C \* conv(B \* x) of 4 taps with biases; a 2.30 KB state per sequence (the prefix cache keeps snapshots); attention with q/k norms in the others$" "$dir/lfm2.txt"
grep -q "^routing:       sigmoid + expert_bias (selection only), routed_scaling_factor 2$" "$dir/lfm2.txt"
expect_fixture_greedy "$lfm2" 2
gguf_lfm2=$(cd "$(dirname "$0")/../fixtures/gguf_lfm2" && pwd)
"$bin" inspect "$gguf_lfm2/model.gguf" >"$dir/gguf_lfm2.txt"
grep -q "^architecture:  lfm2$" "$dir/gguf_lfm2.txt"
grep -q "^ssm:           short convolutions in 3 of 4 layers: 64 channels, C \* conv(B \* x) of 3 taps; a 1.54 KB state per sequence" "$dir/gguf_lfm2.txt"
expect_gguf_greedy "$gguf_lfm2" greedy
# Falcon-H1 (tests/fixtures/falcon_h1): a mixer and attention in every layer, muP multipliers.
falcon_h1=$(cd "$(dirname "$0")/../fixtures/falcon_h1" && pwd)
"$bin" inspect "$falcon_h1" >"$dir/falcon_h1.txt"
grep -q "; attention beside the mixer in every layer, their outputs summed$" "$dir/falcon_h1.txt"
grep -q "^muP:           embeddings x1.5, head x0.6, mixer in x1.1 (z/x/B/C/dt x0.9/1.1/1.2/0.8/1.3), out x0.7; attention in x1.2, keys x0.8, out x0.9; MLP gate x1.1, down x0.9 (folded into the weights)$" "$dir/falcon_h1.txt"
expect_fixture_greedy "$falcon_h1" 1
expect_gguf_greedy "$(cd "$(dirname "$0")/../fixtures/gguf_falcon_h1" && pwd)" greedy
# SmolLM3's NoPE layers and Granite 3's multipliers (tests/fixtures/smollm3, granite).
"$bin" inspect "$(cd "$(dirname "$0")/../fixtures/smollm3" && pwd)" >"$dir/smollm3.txt"
grep -q "^rope:          theta 50000, neox; no RoPE in layers 1,3$" "$dir/smollm3.txt"
granite3=$(cd "$(dirname "$0")/../fixtures/granite" && pwd)
"$bin" inspect "$granite3" >"$dir/granite3.txt"
grep -q "^granite:       embeddings x 3, sublayer outputs x 0.5, logits / 2$" "$dir/granite3.txt"
expect_fixture_greedy "$granite3" 2
# OLMo 3, EXAONE 4, Apertus and Mistral 3's language model (tests/fixtures/<name>): inspect
# shows each one's pieces (norms after each block, the windows, the full layers' own RoPE,
# xIELU), and each is served end to end. expect_fixture_lines NAME LINE...: inspect's output
# has each line, and generate's greedy ids on the fixture's long prompt are transformers'.
expect_fixture_lines() {
  local fixture line
  fixture=$(cd "$(dirname "$0")/../fixtures/$1" && pwd)
  shift
  "$bin" inspect "$fixture" >"$dir/lines.txt"
  for line in "$@"; do grep -qx -- "$line" "$dir/lines.txt" || { echo "$fixture: no line '$line'"; exit 1; }; done
  expect_fixture_greedy "$fixture" 2
}
expect_fixture_lines olmo3 "rope:          theta 10000, neox, scaling yarn x4; sliding layers theta 500000 unscaled" \
  "attention:     q/k norm over all heads, sliding window 8 on 3 of 4 layers" \
  "decoder:       norms after the attention and the MLP only"
expect_fixture_lines exaone4 "rope:          theta 10000, neox, scaling llama3 x8; no RoPE in layers 3"
expect_fixture_lines apertus "decoder:       ungated xIELU MLP (learned per layer)"
expect_fixture_lines mistral3 "architecture:  llama (the language model of Mistral3ForConditionalGeneration)" \
  "vision:        off (text only): config.json: vision_config.hidden_act 'gelu'; supported: silu"
# Mistral 3 with its Pixtral tower (tests/fixtures/mistral3_vision): inspect reports the tower.
pixtral=$(cd "$(dirname "$0")/../fixtures/mistral3_vision" && pwd)
"$bin" inspect "$pixtral" >"$dir/pixtral.txt"
grep -qx "vision:        Pixtral 2 layers, hidden 32, images of any size in 4-pixel patches, a token per 2x2 patches, each row of tokens then \[IMG_BREAK\] (12), the last \[IMG_END\] (13) (image token 10; 1D positions; the CPU backend runs it at tp 1)" "$dir/pixtral.txt"
# Their GGUF files as llama.cpp's converter writes them (tests/fixtures/gguf_olmo3, gguf_glm4,
# scripts/make_gguf_llama_variants_fixtures.py), served with their own vocabularies.
gguf_olmo3=$(cd "$(dirname "$0")/../fixtures/gguf_olmo3" && pwd)
"$bin" inspect "$gguf_olmo3/model.gguf" >"$dir/gguf_olmo3.txt"
grep -q "^architecture:  olmo3$" "$dir/gguf_olmo3.txt"
expect_gguf_greedy "$gguf_olmo3" greedy
expect_gguf_greedy "$(cd "$(dirname "$0")/../fixtures/gguf_glm4" && pwd)" greedy
# Granite 4.0-H as llama.cpp's converter writes it (tests/fixtures/gguf_granitehybrid,
# scripts/make_gguf_mamba_fixtures.py): its multipliers as metadata, experts and shared MLP apart.
gguf_granite=$(cd "$(dirname "$0")/../fixtures/gguf_granitehybrid" && pwd)
"$bin" inspect "$gguf_granite/model.gguf" >"$dir/gguf_granite.txt"
grep -q "^architecture:  granitemoehybrid$" "$dir/gguf_granite.txt"
grep -q "^granite:       embeddings x 3, sublayer outputs x 0.5, logits / 2; a shared SwiGLU of 48 in every layer" "$dir/gguf_granite.txt"
expect_gguf_greedy "$gguf_granite" greedy
"$bin" make-model --arch mamba2 --out "$dir/mamba_m" --hidden 64 --layers 2 --heads 8 --head-dim 16 --ssm-groups 2 \
  --ssm-state 16 --vocab 300 --dtype f32 >/dev/null
"$bin" --log-level info generate --model "$dir/mamba_m" --prompt "Once upon a time" --max-tokens 8 --threads 1 \
  >"$dir/mamba_text.txt" 2>"$dir/mamba_text.err"
grep -q "^Once upon a time" "$dir/mamba_text.txt"
grep -q "a recurrent state for each of up to 64 running sequences" "$dir/mamba_text.err"
# ... and Mamba1 and Nemotron-H checkpoints (a block pattern of mixer, MLP, attention, mixer).
"$bin" make-model --arch mamba --out "$dir/mamba1_m" --hidden 64 --layers 2 --ssm-state 16 --vocab 300 --dtype f32 >/dev/null
"$bin" generate --model "$dir/mamba1_m" --prompt "Once upon a time" --max-tokens 8 --threads 1 >"$dir/mamba1.txt" 2>/dev/null
grep -q "^Once upon a time" "$dir/mamba1.txt"
"$bin" make-model --arch nemotron_h --out "$dir/nemotron_m" --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 \
  --ssm-heads 8 --ssm-head-dim 16 --ssm-groups 2 --ssm-state 16 --intermediate 96 --layer-pattern 'M-*M' --vocab 300 \
  --dtype f32 >/dev/null
"$bin" inspect "$dir/nemotron_m" >"$dir/nemotron_m.txt"
grep -q "^ssm:           Mamba2 mixers in 2 of 4 layers: 8 heads of 16, 2 groups, state 16" "$dir/nemotron_m.txt"
grep -q "^blocks:        M-\*M (M Mamba2 mixer, \* attention, - relu2 MLP of 96)$" "$dir/nemotron_m.txt"
"$bin" generate --model "$dir/nemotron_m" --prompt "Once upon a time" --max-tokens 8 --threads 1 >"$dir/nemotron.txt" 2>/dev/null
grep -q "^Once upon a time" "$dir/nemotron.txt"
# ... and a Qwen3.5-shaped one (Gated DeltaNet in three of every four layers; transformers loads
# such a checkpoint and gives the same greedy tokens: docs/perf.md).
"$bin" make-model --arch qwen3_5 --out "$dir/qwen35_m" --hidden 64 --layers 4 --heads 4 --kv-heads 2 --head-dim 32 \
  --ssm-heads 4 --ssm-head-dim 8 --ssm-groups 2 --ssm-state 16 --intermediate 96 --vocab 300 --dtype f32 >/dev/null
"$bin" inspect "$dir/qwen35_m" >"$dir/qwen35_m.txt"
grep -q "^ssm:           Gated DeltaNet in 3 of 4 layers: 4 value heads of 8, 2 key heads of 16, conv of 4 taps" "$dir/qwen35_m.txt"
"$bin" generate --model "$dir/qwen35_m" --prompt "Once upon a time" --max-tokens 8 --threads 1 >"$dir/qwen35_m_text.txt" 2>/dev/null
grep -q "^Once upon a time" "$dir/qwen35_m_text.txt"
if "$bin" make-model --arch llama --layer-pattern 'M*' --out "$dir/bad_m" 2>/dev/null; then exit 1; fi

# A gpt-oss GGUF (tests/fixtures/gguf_gpt_oss): inspect names its rules and MXFP4 experts, and
# generate's greedy ids with the experts as stored are transformers' (its Q8_0-activation run
# keeps them too).
gguf=$(cd "$(dirname "$0")/../fixtures/gguf_gpt_oss" && pwd)
"$bin" inspect "$gguf/model.gguf" >"$dir/oss.txt"
grep -q "^architecture:  gpt_oss$" "$dir/oss.txt"
grep -q "a sink logit per head, sliding window 8 on 1 of 2 layers" "$dir/oss.txt"
grep -q "clamped SwiGLU (limit 7, alpha 1.702)" "$dir/oss.txt"
grep -q "6 MXFP4" "$dir/oss.txt"
expect_gguf_greedy "$gguf" act_q8_greedy

"$bin" demo --model "$dir/m" --requests 6 --concurrency 3 --threads 1 >"$dir/demo.txt"
grep -q "POST /v1/chat/completions ->" "$dir/demo.txt"
grep -q "online: 6 requests (0 errors)" "$dir/demo.txt"
grep -q "brigade_requests_finished_total 7" "$dir/demo.txt"  # the chat completion and the six
# The roofline per step: ceilings measured at start, every step under one of the two bounds.
grep -q "^roofline (ceilings measured at start: " "$dir/demo.txt"
# OpenBLAS's kernels are named; where it fell back to its generic Prescott ones on a CPU with
# AVX-512, brigade re-ran itself with OPENBLAS_CORETYPE=SkylakeX (cpu/openblas_core.h), unless the
# caller chose a core.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo; then
  if grep -q "OpenBLAS kernels: Prescott)" "$dir/demo.txt"; then
    echo "demo ran OpenBLAS's Prescott kernels on an AVX-512 CPU" >&2
    exit 1
  fi
fi
grep -qE "^  (memory|compute)-bound +[0-9]+ steps at +[0-9.]+% of the roofline" "$dir/demo.txt"

"$bin" bench --offline --model "$dir/m" --threads 1 --requests 5 --input-len 8 --input-len-max 40 --output-len 7 \
  --json "$dir/offline.json" >"$dir/offline.txt"
python3 - "$dir/offline.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["mode"] == "offline", j
assert j["errors"] == 0, j
assert j["requests"] == 5 and j["output_tokens"] == 35, j
assert j["output_tokens_per_s"] > 0 and j["ttft_s"]["p50"] > 0, j
PY
grep -qE "^  (memory|compute)-bound +[0-9]+ steps at" "$dir/offline.txt"

# Online: `bench` against `brigade serve` reads the roofline counters from /metrics before and
# after its load, so the steps it counts are its own: 4 requests of 6 tokens each need 4 prefill
# steps and 5 decode steps each at most (fewer when batched), at least 6.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# (The model as vLLM's positional `serve MODEL`, with its --seed, --max-logprobs and request and
# stats logs, a stats line every 0.2 s while it serves.)
VLLM_LOG_STATS_INTERVAL=0.2 "$bin" serve "$dir/m" --threads 1 --port "$port" --seed 3 --max-logprobs 5 \
  --enable-log-requests --max-log-len 10 >"$dir/serve.txt" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health')" 2>/dev/null && break
  sleep 0.1
done
"$bin" bench --port "$port" --requests 4 --concurrency 2 --input-len 8 --output-len 6 >"$dir/online.txt"
python3 - "$dir/online.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
steps = sum(int(n) for n in re.findall(r"^  (?:memory|compute)-bound +(\d+) steps at", text, re.M))
assert 6 <= steps <= 24, (steps, text)
PY
python3 - "$port" <<'PY'
import json, sys, urllib.error, urllib.request
def post(body):
    req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
status, ok = post({"prompt": [1, 2, 3], "max_tokens": 1, "logprobs": 5})
assert status == 200 and len(ok["choices"][0]["logprobs"]["top_logprobs"][0]) == 5, ok
status, refused = post({"prompt": [1, 2, 3], "max_tokens": 1, "logprobs": 6})
assert status == 400 and "logprobs" in refused["error"]["message"], refused
PY
sleep 0.5  # (at least one stats interval after the last request)
kill $server 2>/dev/null || true
wait $server 2>/dev/null || true
grep -q "^request cmpl-[0-9]*: completion, 1 choice, prompt ids \[1,2,3\], max_tokens 1" "$dir/serve.txt"
grep -q "^stats: prompt throughput [0-9.]* tokens/s, generation throughput [0-9.]* tokens/s, running" "$dir/serve.txt"
if "$bin" serve "$dir/m" --model "$dir/other" >/dev/null 2>"$dir/twice.err"; then exit 1; fi
grep -q "the model is given twice" "$dir/twice.err"
if VLLM_LOG_STATS_INTERVAL=soon "$bin" serve "$dir/m" >/dev/null 2>"$dir/interval.err"; then exit 1; fi
grep -q "VLLM_LOG_STATS_INTERVAL='soon' is not a number of seconds" "$dir/interval.err"

# The runtime LoRA routes need LoRA slots: refused before the model loads, by flag or vLLM's variable.
if "$bin" serve --model "$dir/m" --allow-runtime-lora-updating >"$dir/lora.txt" 2>&1; then exit 1; fi
grep -q "needs --enable-lora" "$dir/lora.txt"
if VLLM_ALLOW_RUNTIME_LORA_UPDATING=True "$bin" serve --model "$dir/m" >"$dir/lora.txt" 2>&1; then exit 1; fi
grep -q "needs --enable-lora" "$dir/lora.txt"

# Two instances behind the router (the shipped topology): a shared-prefix load is served, and
# /metrics labels each instance and counts the router's decisions.
topology=$(dirname "$0")/../../config/two_cpu_instances.yaml
"$bin" inspect "$topology" | grep -q "^router: policy=cache_aware cache_threshold=0.3 "
"$bin" serve --model "$dir/m" --topology "$topology" --port "$port" >"$dir/serve2.txt" 2>&1 &
server=$!
for _ in $(seq 1 100); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health')" 2>/dev/null && break
  sleep 0.1
done
"$bin" bench --port "$port" --requests 6 --concurrency 2 --input-len 8 --output-len 4 --shared-prefix 64 \
  >"$dir/online2.txt"
grep -q "6 requests (0 errors)" "$dir/online2.txt"
python3 - "$port" <<'PY'
import re, sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1]).read().decode()
for name in ("dp0", "dp1"):
    assert 'brigade_instance_up{instance="%s"} 1' % name in text, text
routed = sum(int(n) for n in re.findall(r'^brigade_router_requests_total\{instance="dp[01]",reason="\w+"\} (\d+)$', text, re.M))
assert routed == 6, (routed, text)
assert re.search(r"^brigade_requests_finished_total 6$", text, re.M), text
PY
# A local cluster: `brigade node` serves one instance of a topology; `generate` with the same
# file connects to it (its first stdout line names the bound address) and gives the tokens a
# local instance gives. A front whose node is not there fails at start with the reason.
printf 'instances: [{name: far, remote: "127.0.0.1:1", executors: [{threads: 1}], kv: {memory_mb: 16}}]\n' >"$dir/remote.yaml"
"$bin" inspect "$dir/remote.yaml" | grep -q "^instance far: remote 127.0.0.1:1 (brigade node)$"
"$bin" inspect "$(dirname "$0")/../../config/pd_cpu.yaml" >"$dir/pd_inspect.txt"
grep -q "^instance decode0: role decode$" "$dir/pd_inspect.txt"
grep -q "^pd: transfer=auto$" "$dir/pd_inspect.txt"
if "$bin" generate --model "$dir/m" --topology "$dir/remote.yaml" --prompt-ids 1,2,3 --max-tokens 4 >"$dir/remote.txt" 2>&1; then
  echo "generate against a missing node should fail"; exit 1
fi
grep -q "instance 'far' (remote 127.0.0.1:1): no brigade node answers there" "$dir/remote.txt"
"$bin" node --model "$dir/m" --topology "$dir/remote.yaml" --instance far --listen 127.0.0.1:0 >"$dir/node.txt" 2>"$dir/node.err" &
node_pid=$!
trap 'kill $server $node_pid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do grep -q "^node 127.0.0.1:" "$dir/node.txt" 2>/dev/null && break; sleep 0.1; done
node_port=$(sed -n 's/^node 127.0.0.1:\([0-9]*\) serving.*/\1/p' "$dir/node.txt")
test -n "$node_port"
sed "s/127.0.0.1:1/127.0.0.1:$node_port/" "$dir/remote.yaml" >"$dir/cluster.yaml"
"$bin" generate --model "$dir/m" --topology "$dir/cluster.yaml" --prompt-ids 1,2,3 --max-tokens 6 --temperature 0 \
  >"$dir/cluster_gen.txt" 2>/dev/null
"$bin" generate --model "$dir/m" --prompt-ids 1,2,3 --max-tokens 6 --temperature 0 >"$dir/local_gen.txt" 2>/dev/null
test "$(head -1 "$dir/cluster_gen.txt")" = "$(head -1 "$dir/local_gen.txt")"
kill -TERM $node_pid
wait $node_pid
# --launch-nodes: the same cluster in one command (the node's port is free again); the front
# starts the node process, serves through it and stops it at exit.
"$bin" generate --model "$dir/m" --topology "$dir/cluster.yaml" --launch-nodes --prompt-ids 1,2,3 --max-tokens 6 \
  --temperature 0 >"$dir/launched_gen.txt" 2>"$dir/launched.err"
test "$(head -1 "$dir/launched_gen.txt")" = "$(head -1 "$dir/local_gen.txt")"
grep -q "^\[node far\] node 127.0.0.1:$node_port serving" "$dir/launched.err"
if pgrep -f -- "--instance far" >/dev/null; then echo "a launched node outlived its front"; exit 1; fi

# --speculative-config (vLLM's flag): DeepSeek-V3's MTP module drafting changes no greedy token; a
# method brigade does not have is refused by name.
"$bin" make-model --arch deepseek_v3 --out "$dir/ds" --hidden 64 --layers 2 --heads 4 --intermediate 128 --vocab 300 \
  --experts 4 --moe-intermediate 32 --kv-lora-rank 32 --qk-nope-head-dim 16 --qk-rope-head-dim 8 --v-head-dim 16 \
  --mtp-layers 1 --dtype f32 >/dev/null
"$bin" generate --model "$dir/ds" --prompt-ids 1,2,3,4 --max-tokens 12 --temperature 0 --threads 1 \
  --speculative-config '{"method": "deepseek_mtp", "num_speculative_tokens": 2}' >"$dir/mtp_gen.txt" 2>/dev/null
"$bin" generate --model "$dir/ds" --prompt-ids 1,2,3,4 --max-tokens 12 --temperature 0 --threads 1 \
  >"$dir/plain_gen.txt" 2>/dev/null
test "$(head -1 "$dir/mtp_gen.txt")" = "$(head -1 "$dir/plain_gen.txt")"
if "$bin" generate --model "$dir/ds" --prompt-ids 1 --speculative-config '{"method": "eagle"}' 2>"$dir/spec.err"; then
  exit 1
fi
grep -q "method 'eagle' is not one of" "$dir/spec.err"

# Gemma 3 with an image (tests/fixtures/gemma3_vision, scripts/make_vision_fixtures.py): inspect
# names the tower, and generate --image on the first prompt gives transformers' greedy ids; a
# missing image, or an image to a text model, is refused with the reason.
# expect_image_greedy MODEL_DIR: generate --image image0.png on expected.json's first case gives
# transformers' greedy ids; sets ids to that case's prompt.
expect_image_greedy() {
  local want got
  read -r ids want < <(python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))["cases"][0]
print(",".join(map(str, c["prompt"])), ",".join(map(str, c["greedy"])))' "$1/expected.json")
  "$bin" generate --model "$1" --prompt-ids "$ids" --image "$1/image0.png" --max-tokens 8 --temperature 0 \
    --threads 1 >"$dir/image_ids.txt" 2>/dev/null
  got=$(tr ' ' ',' <"$dir/image_ids.txt")
  [ "$got" = "$want" ] || { echo "$1 greedy: $got, want $want"; exit 1; }
}
vision=$(cd "$(dirname "$0")/../fixtures/gemma3_vision" && pwd)
"$bin" inspect "$vision" >"$dir/vision.txt"
grep -q "^vision:        SigLIP 2 layers, hidden 32, 56x56 images in 7-pixel patches, 16 tokens per image" "$dir/vision.txt"
expect_image_greedy "$vision"
if "$bin" generate --model "$vision" --prompt-ids "$ids" --max-tokens 1 --threads 1 2>"$dir/vision.err" >/dev/null; then
  exit 1
fi
grep -q "image(s) of image tokens but the request 0" "$dir/vision.err"
if "$bin" generate --model "$gguf/model.gguf" --prompt-ids 1,2 --image "$vision/image0.png" --threads 1 \
  2>"$dir/vision.err" >/dev/null; then
  exit 1
fi
grep -q "this model takes text only" "$dir/vision.err"

# Qwen2.5-VL with an image of its own size (tests/fixtures/qwen2_5_vl): inspect names the ViT and
# M-RoPE; generate --image gives transformers' greedy ids (the PNG preprocessed as
# Qwen2VLImageProcessor does: 24 tokens); --mm-processor-kwargs max_pixels shrinks the image to
# 12 tokens, which the prompt's run of 24 then refuses; unknown kwargs are refused by name.
qwen=$(cd "$(dirname "$0")/../fixtures/qwen2_5_vl" && pwd)
"$bin" inspect "$qwen" >"$dir/qwen.txt"
grep -q "^vision:        Qwen2_5_VL ViT 3 layers, hidden 32, images of any size in 4-pixel patches, a token per 2x2 patches (image token 302; M-RoPE sections 2/3/3" "$dir/qwen.txt"
expect_image_greedy "$qwen"
if "$bin" generate --model "$qwen" --prompt-ids "$ids" --image "$qwen/image0.png" --max-tokens 1 --threads 1 \
  --mm-processor-kwargs '{"max_pixels": 1024}' 2>"$dir/qwen.err" >/dev/null; then
  exit 1
fi
grep -q "image 0 is exactly 12 image tokens" "$dir/qwen.err"
if "$bin" generate --model "$qwen" --prompt-ids 1 --mm-processor-kwargs '{"fps": 2}' 2>"$dir/qwen.err" >/dev/null; then
  exit 1
fi
grep -q "'fps' is not supported; supported: min_pixels, max_pixels" "$dir/qwen.err"

# Qwen3-VL (tests/fixtures/qwen3_vl: interleaved M-RoPE, DeepStack, Qwen3-VL's processor file with
# size.shortest_edge / longest_edge and mean / std 0.5): inspect, and generate --image gives
# transformers' greedy ids.
qwen3=$(cd "$(dirname "$0")/../fixtures/qwen3_vl" && pwd)
"$bin" inspect "$qwen3" >"$dir/qwen3.txt"
grep -q "^architecture:  qwen3 (the language model of Qwen3VLForConditionalGeneration)" "$dir/qwen3.txt"
grep -q "^vision:        Qwen3VL ViT 3 layers, .*M-RoPE sections 2/3/3 interleaved; DeepStack features into the first 2 layers" "$dir/qwen3.txt"
expect_image_greedy "$qwen3"
# Qwen3-VL-MoE (its experts in the Hub's transposed layout): transformers' greedy ids too.
expect_image_greedy "$(cd "$(dirname "$0")/../fixtures/qwen3_vl_moe" && pwd)"

echo "cli smoke: ok"
