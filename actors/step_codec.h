// Conversions between the plain step/event structs (step_types.h, scheduler/policy.h) and their
// Cap'n Proto envelopes (messages/step.capnp, request.capnp). Actors call these at their edges;
// the plain classes never see Cap'n Proto.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "actors/scheduler/policy.h"
#include "actors/step_types.h"
#include "messages/types.h"

namespace brigade {

// An image's pixels as message bytes (little-endian f32), and back (a trailing partial float is
// dropped: the model then refuses the image's size).
kj::ArrayPtr<const kj::byte> pixels_data(const std::vector<float>& pixels);
std::shared_ptr<const std::vector<float>> pixels_of(capnp::Data::Reader data);

// A request's images (GenerateRequest.images, KvHandoff.images) as messages carry them.
// Pixels and grid travel; positions do not (the scheduler finds them in the prompt).
void encode_images(const std::vector<SeqImage>& images, capnp::List<schema::ImageInput>::Builder out);
std::vector<SeqImage> decode_images(capnp::List<schema::ImageInput>::Reader in);

step_plan_msg encode_step_plan(const PlannedStep& step);
PlannedStep decode_step_plan(schema::StepPlan::Reader plan);

step_result_msg encode_step_result(uint64_t step_id, const std::vector<SampledResult>& sampled,
                                   const StepReport& report,
                                   const std::vector<PromptLogprobRun>& prompt_logprobs = {},
                                   const std::vector<PooledEmbedding>& embeddings = {},
                                   const std::vector<SeqDrafts>& drafts = {});
step_result_msg encode_step_error(uint64_t step_id, const std::string& error);
struct DecodedStepResult {
  uint64_t step_id = 0;
  std::vector<SampledResult> sampled;
  std::string error;
  uint64_t forward_us = 0;
  int n_tokens = 0;
  double flops = 0.0, bytes = 0.0;  // StepReport's
  double roofline_us = 0.0;
  bool compute_bound = false;
  std::vector<PromptLogprobRun> prompt_logprobs;
  std::vector<PooledEmbedding> embeddings;
  std::vector<SeqDrafts> drafts;
};
DecodedStepResult decode_step_result(schema::StepResult::Reader result);

SamplingConfig decode_sampling(schema::SamplingParams::Reader p);
void encode_sampling(const SamplingConfig& c, schema::SamplingParams::Builder b);

token_event_msg encode_event(const SeqEvent& ev);
// The one event of a request that ends before any token: finish error, the status's message and code.
// `retry_after_ms` > 0: when the client may retry (TokenEvent.retryAfterMs; a station's rate limit).
token_event_msg error_event(uint64_t request_id, const Status& error, int64_t retry_after_ms = 0);
schema::FinishReason to_schema(Finish f);

}  // namespace brigade
