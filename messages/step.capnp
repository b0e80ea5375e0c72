# Scheduler <-> executor: one forward step of a batch (DESIGN.md §3).
@0xa0c5ef13bb9e5f21;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("brigade::schema");

using Req = import "request.capnp";

# The work of one sequence in a step: a prompt chunk or one decode token.
struct SeqWork {
  seqId @0 :UInt64;
  tokens @1 :List(Int32);          # input ids at positions [startPos, startPos + len)
  useLastSampled @2 :Bool;         # tokens[0] is replaced by the token this executor sampled
                                   # for seqId in an earlier step (in-flight overlap)
  startPos @3 :Int32;              # tokens already in the KV cache (cached prefix)
  blockTable @4 :List(Int32);      # page ids covering [0, startPos + len)
  sample @5 :Bool;                 # sample a token after the last position
  sampling @6 :Req.SamplingParams;
  nGenerated @7 :UInt32;           # tokens generated so far: keys the seeded random stream
  promptLen @8 :Int32;             # positions [0, promptLen) are prompt, the rest output: the
                                   # executor rebuilds penalty history from the tokens it sees
  history @9 :List(Int32);         # tokens at [0, len) the executor has not seen (a cached prefix
                                   # the sequence starts after): penalty history only, no compute
  nDraft @10 :Int32;               # speculative decoding (DESIGN.md §7): the last nDraft tokens
                                   # are draft proposals after tokens[0] (the sequence's last
                                   # token). Every one of the nDraft + 1 positions gets logits and
                                   # the executor verifies the drafts (core/sampling.h
                                   # verify_drafts): the result holds 1..nDraft+1 tokens for the
                                   # sequence. Needs sample = true, useLastSampled = false.
  promptLogprobsFrom @11 :Int32;   # with sampling.promptLogprobs >= 0: the chunk's logits give
                                   # the logprob of each prompt token at position q in
                                   # [max(promptLogprobsFrom, startPos + 1), min(startPos + len,
                                   # promptLen - 1)] (the result's PromptLogprobs)
  nextToken @12 :Int32 = -1;       # the known token at startPos + len, when the chunk ends
                                   # before it: with prompt logprobs, the prompt token whose
                                   # logprob comes from this chunk; with an MTP module, the input
                                   # of the module's entry at the chunk's last position
  pooling @13 :Req.Pooling;        # not none: a pooling request's prompt chunk (sample is false);
                                   # the chunk that ends the prompt returns the pooled vector
                                   # (StepResult.embeddings; actors/executor/pooler.h)
  lora @14 :UInt32;                # LoRA adapter id the sequence runs under (0 = the base model)
  mtpDrafts @15 :Int32;            # an executor whose model runs its MTP module (speculative
                                   # method mtp) drafts up to this many tokens after the step's
                                   # last token for the sequence (StepResult.drafts); needs sample
  images @16 :List(SeqImage);      # the images whose tokens this chunk holds: each whole, or
                                   # (dynamic images, which attend causally) the part of one the
                                   # chunk cuts, its tokens from max(startPos, position) on
  ropeDelta @17 :Int32;            # M-RoPE models: how far the sequence's rotary positions run
                                   # behind its token positions at startPos (models/mrope.h)
  copySrc @18 :Int32 = -1;         # copyRows > 0: before the step, rows [0, copyRows) of KV page
  copyDst @19 :Int32 = -1;         # copySrc (every layer, K and V, scales) are copied into page
  copyRows @20 :Int32;             # copyDst: a prefix-cache match ending inside a cached page
                                   # (docs/architecture.md "Partly filled pages")
  stateFrom @21 :Int32 = -1;       # recurrent models' prefix cache (docs/architecture.md "State
                                   # snapshots"): >= 0, the sequence's first item starts from the
                                   # state in this snapshot, which ends at startPos
  stateSave @22 :Int32 = -1;       # >= 0: the state after position stateSavePos - 1 (the first
  stateSavePos @23 :Int32;         # stateSavePos positions) is also copied into this snapshot;
                                   # startPos < stateSavePos <= startPos + len
}

# An image of a prompt chunk: its image tokens (VisionConfig::image_tokens) start at `position`
# (before the chunk's startPos when an earlier chunk holds its first tokens).
struct SeqImage {
  position @0 :Int32;
  pixels @1 :Data;                 # as Req.ImageInput.pixels
  gridH @2 :Int32;                 # as Req.ImageInput
  gridW @3 :Int32;
}

struct StepPlan {
  stepId @0 :UInt64;
  seqs @1 :List(SeqWork);
  released @2 :List(UInt64);       # sequences that ended: drop their per-sequence state
}

# One token of a sequence. A sequence that verified drafts (SeqWork.nDraft > 0) has 1..nDraft+1
# consecutive entries, in order: the accepted drafts, then the target's own token.
struct SampledToken {
  seqId @0 :UInt64;
  tokenId @1 :Int32;
  logprob @2 :Req.TokenLogprob;    # set when the sequence asked for logprobs
}

struct StepResult {
  stepId @0 :UInt64;
  sampled @1 :List(SampledToken);
  error @2 :Text;                  # non-empty: the step failed and changed nothing
  nTokens @3 :Int32;               # tokens computed
  forwardMicros @4 :UInt64;        # executor time for the step
  # The step's work by the roofline model (DESIGN.md §9, models/model.h StepCost) and the time
  # the executor's measured ceilings allow for it: max(bytes / bandwidth, flops / peak).
  flops @5 :Float64;
  bytes @6 :Float64;
  rooflineMicros @7 :Float64;      # 0: the ceilings were not measured
  computeBound @8 :Bool;           # flops / peak took longer than bytes / bandwidth
  promptLogprobs @9 :List(PromptLogprobs);  # one per work item that asked for them
  embeddings @10 :List(PooledEmbedding);    # one per pooling sequence whose prompt ended here
  drafts @11 :List(SeqDrafts);              # MTP drafts (SeqWork.mtpDrafts), one per sequence
}

# What an executor's MTP module proposes to follow a sequence's tokens as they stand after the
# step (its sampled tokens appended): the drafts its next step may verify.
struct SeqDrafts {
  seqId @0 :UInt64;
  tokens @1 :List(Int32);
}

# A pooling sequence's pooled final-norm hidden state, not normalized.
struct PooledEmbedding {
  seqId @0 :UInt64;
  values @1 :List(Float32);        # [hidden_size]
}

# The logprobs of consecutive prompt tokens of one sequence: entries[i] is the token at position
# firstPos + i, its logprob given the tokens before it (raw logits, log-softmax in f32), its rank
# and the top k.
struct PromptLogprobs {
  seqId @0 :UInt64;
  firstPos @1 :Int32;
  entries @2 :List(Req.TokenLogprob);
}

# Engine -> executor and scheduler: a LoRA adapter slot changes at run time (vLLM's
# /v1/load_lora_adapter; docs/architecture.md "LoRA adapters"). The executor reads the adapter
# into the slot (or frees it); the scheduler drops the slot's cached prefixes and roots the
# page keys of the slot's prompts in the adapter's identity.
struct LoraUpdate {
  slot @0 :UInt32;                 # 1-based: the lora id requests carry
  load @1 :Bool;                   # true: load `path` into the slot; false: free the slot
  name @2 :Text;
  path @3 :Text;
  identity @4 :Text;               # what the adapter's files hold (lora_identity)
}

struct LoraUpdated {
  error @0 :Text;                  # empty: done
  code @1 :UInt8;                  # the error's StatusCode (core/status.h)
}

# Engine -> scheduler (local instances), node actor (remote ones) and router: a prefix cache
# reset (Engine::reset_prefix_cache). The scheduler drops every cached prefix no running
# sequence shares; a node also clears its instance's HiCache tiers (the host tier, and the disk
# tier with `disk`); the router forgets the prompts it routed. Answered by CacheResetDone.
struct CacheReset {
  disk @0 :Bool;
}

struct CacheResetDone {
  freedPages @0 :UInt32;           # device pages the cache held and gave back
  keptPages @1 :UInt32;            # cached pages still shared by running sequences (they stay)
  hostEntries @2 :UInt64;          # pages dropped from the host tier (a node's answer)
  diskEntries @3 :UInt64;          # pages dropped from the disk tier (a node's answer)
  error @4 :Text;                  # non-empty: what could not be cleared (the rest was)
}
