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
}

struct StepPlan {
  stepId @0 :UInt64;
  seqs @1 :List(SeqWork);
  released @2 :List(UInt64);       # sequences that ended: drop their per-sequence state
}

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
}
