// Sample messages shared by the messages tests: one builder per envelope type, with every kind of
// field (text, lists, nested structs, unions, enums) set so that round trips compare something.
#pragma once

#include <cstdint>
#include <vector>

#include "messages/convert.h"
#include "messages/types.h"

namespace brigade::test {

inline generate_request_msg make_text_request(uint64_t id) {
  return generate_request_msg::build([&](schema::GenerateRequest::Builder b) {
    b.setRequestId(id);
    b.getPrompt().setText("Once upon a time");
    b.setMaxTokens(32);
    b.setPriority(-3);
    auto s = b.initSampling();
    s.setTemperature(0.7f);
    s.setTopK(40);
    s.setSeed(1234);
    s.setHasSeed(true);
    auto stop = b.initStop();
    std::vector<int32_t> stop_ids{2, 13};
    fill_list(stop.initTokenIds(static_cast<unsigned>(stop_ids.size())), stop_ids);
    auto strings = stop.initStrings(2);
    strings.set(0, "\n\n");
    strings.set(1, "The end");
  });
}

inline generate_request_msg make_token_request(uint64_t id, const std::vector<int32_t>& ids) {
  return generate_request_msg::build([&](schema::GenerateRequest::Builder b) {
    b.setRequestId(id);
    fill_list(b.getPrompt().initTokenIds(static_cast<unsigned>(ids.size())), ids);
    b.setAddBos(false);
  });
}

inline token_event_msg make_token_event(uint64_t id) {
  return token_event_msg::build([&](schema::TokenEvent::Builder b) {
    b.setRequestId(id);
    std::vector<int32_t> ids{101, 102};
    fill_list(b.initTokenIds(2), ids);
    b.setText("hello");
    b.setFinishReason(schema::FinishReason::LENGTH);
    auto lp = b.initLogprobs(1);
    lp[0].setTokenId(101);
    lp[0].setLogprob(-0.25f);
    auto top = lp[0].initTop(1);
    top[0].setTokenId(7);
    top[0].setLogprob(-1.5f);
    b.setPromptTokens(5);
    b.setCompletionTokens(2);
  });
}

inline abort_msg make_abort(uint64_t id) {
  return abort_msg::build([&](schema::Abort::Builder b) { b.setRequestId(id); });
}

// A plan with `n_seqs` sequences of `n_tokens` tokens each; large sizes span several segments.
inline step_plan_msg make_step_plan(uint64_t step, unsigned n_seqs, unsigned n_tokens) {
  return step_plan_msg::build([&](schema::StepPlan::Builder b) {
    b.setStepId(step);
    auto seqs = b.initSeqs(n_seqs);
    for (unsigned i = 0; i < n_seqs; ++i) {
      auto w = seqs[i];
      w.setSeqId(1000 + i);
      auto tokens = w.initTokens(n_tokens);
      for (unsigned t = 0; t < n_tokens; ++t) tokens.set(t, static_cast<int32_t>(i * 31 + t));
      w.setStartPos(static_cast<int32_t>(i));
      auto table = w.initBlockTable(2);
      table.set(0, static_cast<int32_t>(2 * i));
      table.set(1, static_cast<int32_t>(2 * i + 1));
      w.setSample(i % 2 == 0);
      w.initSampling().setTopP(0.9f);
      w.setNGenerated(i);
    }
    std::vector<uint64_t> released{7, 8, 9};
    fill_list(b.initReleased(3), released);
  });
}

inline step_result_msg make_step_result(uint64_t step) {
  return step_result_msg::build([&](schema::StepResult::Builder b) {
    b.setStepId(step);
    auto sampled = b.initSampled(2);
    sampled[0].setSeqId(1000);
    sampled[0].setTokenId(42);
    sampled[1].setSeqId(1001);
    sampled[1].setTokenId(43);
    sampled[1].initLogprob().setLogprob(-0.5f);
    b.setNTokens(17);
    b.setForwardMicros(12345);
  });
}

inline page_lease_request_msg make_lease_request(uint64_t id) {
  return page_lease_request_msg::build([&](schema::PageLeaseRequest::Builder b) {
    b.setRequestId(id);
    b.setNPages(64);
    b.setMinPages(8);
  });
}

inline page_lease_grant_msg make_lease_grant(uint64_t id) {
  return page_lease_grant_msg::build([&](schema::PageLeaseGrant::Builder b) {
    b.setRequestId(id);
    std::vector<int32_t> pages{3, 4, 5, 9};
    fill_list(b.initPages(4), pages);
    b.setNFree(100);
    b.setNTotal(128);
  });
}

inline page_free_msg make_page_free() {
  return page_free_msg::build([&](schema::PageFree::Builder b) {
    std::vector<int32_t> pages{3, 4};
    fill_list(b.initPages(2), pages);
  });
}

}  // namespace brigade::test
