#include "actors/step_codec.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <cstdint>

#include "messages/convert.h"

namespace brigade {

SamplingConfig decode_sampling(schema::SamplingParams::Reader p) {
  SamplingConfig c;
  c.temperature = p.getTemperature();
  c.top_p = p.getTopP();
  c.top_k = p.getTopK();
  c.min_p = p.getMinP();
  c.repetition_penalty = p.getRepetitionPenalty();
  c.presence_penalty = p.getPresencePenalty();
  c.frequency_penalty = p.getFrequencyPenalty();
  c.seed = p.getSeed();
  c.logit_bias.reserve(p.getLogitBias().size());
  for (auto b : p.getLogitBias()) c.logit_bias.emplace_back(b.getToken(), b.getBias());
  c.allowed_token_ids = to_vector(p.getAllowedTokenIds());
  c.min_tokens = p.getMinTokens();
  c.end_ids = to_vector(p.getEndIds());
  c.json_object = p.getJsonObject();
  c.json_schema = p.getJsonSchema();
  for (auto choice : p.getGuidedChoice()) c.guided_choice.emplace_back(choice);
  c.regex = p.getRegex();
  c.grammar = p.getGrammar();
  c.reasoning_end = p.getReasoningEnd();
  c.reasoning_start = p.getReasoningStart();
  c.reasoning_header = to_vector(p.getReasoningHeader());
  c.bad_words.reserve(p.getBadWords().size());
  for (auto w : p.getBadWords()) c.bad_words.push_back(to_vector(w));
  c.thinking_budget = p.getThinkingBudget();
  c.thinking_end = to_vector(p.getThinkingEnd());
  return c;
}

void encode_sampling(const SamplingConfig& c, schema::SamplingParams::Builder b) {
  b.setTemperature(c.temperature);
  b.setTopP(c.top_p);
  b.setTopK(c.top_k);
  b.setMinP(c.min_p);
  b.setRepetitionPenalty(c.repetition_penalty);
  b.setPresencePenalty(c.presence_penalty);
  b.setFrequencyPenalty(c.frequency_penalty);
  b.setSeed(c.seed);
  b.setHasSeed(true);
  auto bias = b.initLogitBias(static_cast<unsigned>(c.logit_bias.size()));
  for (unsigned i = 0; i < c.logit_bias.size(); ++i) {
    bias[i].setToken(c.logit_bias[i].first);
    bias[i].setBias(c.logit_bias[i].second);
  }
  fill_list(b.initAllowedTokenIds(static_cast<unsigned>(c.allowed_token_ids.size())), c.allowed_token_ids);
  b.setMinTokens(c.min_tokens);
  fill_list(b.initEndIds(static_cast<unsigned>(c.end_ids.size())), c.end_ids);
  b.setJsonObject(c.json_object);
  b.setJsonSchema(c.json_schema);
  auto choices = b.initGuidedChoice(static_cast<unsigned>(c.guided_choice.size()));
  for (unsigned i = 0; i < c.guided_choice.size(); ++i) choices.set(i, c.guided_choice[i]);
  b.setRegex(c.regex);
  b.setGrammar(c.grammar);
  b.setReasoningEnd(c.reasoning_end);
  b.setReasoningStart(c.reasoning_start);
  fill_list(b.initReasoningHeader(static_cast<unsigned>(c.reasoning_header.size())), c.reasoning_header);
  auto bad = b.initBadWords(static_cast<unsigned>(c.bad_words.size()));
  for (unsigned i = 0; i < c.bad_words.size(); ++i)
    fill_list(bad.init(i, static_cast<unsigned>(c.bad_words[i].size())), c.bad_words[i]);
  b.setThinkingBudget(c.thinking_budget);
  fill_list(b.initThinkingEnd(static_cast<unsigned>(c.thinking_end.size())), c.thinking_end);
}

kj::ArrayPtr<const kj::byte> pixels_data(const std::vector<float>& pixels) {
  static_assert(std::endian::native == std::endian::little, "pixels travel as little-endian f32");
  return {reinterpret_cast<const kj::byte*>(pixels.data()), pixels.size() * sizeof(float)};
}

std::shared_ptr<const std::vector<float>> pixels_of(capnp::Data::Reader data) {
  auto px = std::make_shared<std::vector<float>>(data.size() / sizeof(float));
  std::memcpy(px->data(), data.begin(), px->size() * sizeof(float));
  return px;
}

void encode_images(const std::vector<SeqImage>& images, capnp::List<schema::ImageInput>::Builder out) {
  for (unsigned k = 0; k < images.size(); ++k) {
    if (images[k].pixels != nullptr) out[k].setPixels(pixels_data(*images[k].pixels));
    out[k].setGridH(images[k].grid_h);
    out[k].setGridW(images[k].grid_w);
  }
}

std::vector<SeqImage> decode_images(capnp::List<schema::ImageInput>::Reader in) {
  std::vector<SeqImage> out;
  for (auto im : in) out.push_back({0, pixels_of(im.getPixels()), im.getGridH(), im.getGridW()});
  return out;
}

step_plan_msg encode_step_plan(const PlannedStep& step) {
  return step_plan_msg::build([&](schema::StepPlan::Builder b) {
    b.setStepId(step.step_id);
    auto seqs = b.initSeqs(static_cast<unsigned>(step.seqs.size()));
    for (unsigned i = 0; i < step.seqs.size(); ++i) {
      const SeqWorkItem& w = step.seqs[i];
      auto s = seqs[i];
      s.setSeqId(w.seq_id);
      fill_list(s.initTokens(static_cast<unsigned>(w.tokens.size())), w.tokens);
      s.setUseLastSampled(w.use_last_sampled);
      s.setStartPos(w.start_pos);
      fill_list(s.initBlockTable(static_cast<unsigned>(w.block_table.size())), w.block_table);
      s.setSample(w.sample);
      encode_sampling(w.sampling, s.initSampling());
      s.getSampling().setLogprobs(w.logprobs);
      s.setNGenerated(w.n_generated);
      s.setPromptLen(w.prompt_len);
      if (!w.history.empty()) fill_list(s.initHistory(static_cast<unsigned>(w.history.size())), w.history);
      s.setNDraft(w.n_draft);
      s.getSampling().setPromptLogprobs(w.prompt_logprobs);
      s.setPromptLogprobsFrom(w.prompt_lp_from);
      s.setNextToken(w.next_token);
      s.setPooling(static_cast<schema::Pooling>(w.pooling));
      s.setLora(w.lora);
      s.setMtpDrafts(w.mtp_drafts);
      if (!w.images.empty()) {
        auto images = s.initImages(static_cast<unsigned>(w.images.size()));
        for (unsigned k = 0; k < w.images.size(); ++k) {
          images[k].setPosition(w.images[k].position);
          images[k].setPixels(pixels_data(*w.images[k].pixels));
          images[k].setGridH(w.images[k].grid_h);
          images[k].setGridW(w.images[k].grid_w);
        }
      }
      s.setRopeDelta(w.rope_delta);
      s.setCopySrc(w.copy_src);
      s.setCopyDst(w.copy_dst);
      s.setCopyRows(w.copy_rows);
      s.setStateFrom(w.state_from);
      s.setStateSave(w.state_save);
      s.setStateSavePos(w.state_save_pos);
    }
    auto rel = b.initReleased(static_cast<unsigned>(step.released.size()));
    for (unsigned i = 0; i < step.released.size(); ++i) rel.set(i, step.released[i]);
  });
}

PlannedStep decode_step_plan(schema::StepPlan::Reader plan) {
  PlannedStep step;
  step.step_id = plan.getStepId();
  for (auto s : plan.getSeqs()) {
    SeqWorkItem w;
    w.seq_id = s.getSeqId();
    w.tokens = to_vector(s.getTokens());
    w.use_last_sampled = s.getUseLastSampled();
    w.start_pos = s.getStartPos();
    w.block_table = to_vector(s.getBlockTable());
    w.sample = s.getSample();
    w.sampling = decode_sampling(s.getSampling());
    w.logprobs = s.getSampling().getLogprobs();
    w.n_generated = s.getNGenerated();
    w.prompt_len = s.getPromptLen();
    w.history = to_vector(s.getHistory());
    w.n_draft = s.getNDraft();
    w.prompt_logprobs = s.getSampling().getPromptLogprobs();
    w.prompt_lp_from = s.getPromptLogprobsFrom();
    w.next_token = s.getNextToken();
    w.pooling = static_cast<Pooling>(s.getPooling());
    w.lora = s.getLora();
    w.mtp_drafts = s.getMtpDrafts();
    for (auto im : s.getImages())
      w.images.push_back({im.getPosition(), pixels_of(im.getPixels()), im.getGridH(), im.getGridW()});
    w.rope_delta = s.getRopeDelta();
    w.copy_src = s.getCopySrc();
    w.copy_dst = s.getCopyDst();
    w.copy_rows = s.getCopyRows();
    w.state_from = s.getStateFrom();
    w.state_save = s.getStateSave();
    w.state_save_pos = s.getStateSavePos();
    step.n_tokens += static_cast<int>(w.tokens.size());
    step.seqs.push_back(std::move(w));
  }
  for (uint64_t id : plan.getReleased()) step.released.push_back(id);
  return step;
}

namespace {

void fill_top(capnp::List<schema::TopLogprob>::Builder out, const std::vector<std::pair<int32_t, float>>& top) {
  for (unsigned j = 0; j < top.size(); ++j) {
    out[j].setTokenId(top[j].first);
    out[j].setLogprob(top[j].second);
  }
}

void fill_entry(schema::TokenLogprob::Builder b, const TokenLogprobEntry& e) {
  b.setTokenId(e.token);
  b.setLogprob(e.logprob);
  b.setRank(e.rank);
  fill_top(b.initTop(static_cast<unsigned>(e.top.size())), e.top);
}

TokenLogprobEntry read_entry(schema::TokenLogprob::Reader r) {
  TokenLogprobEntry e{r.getTokenId(), r.getLogprob(), r.getRank(), {}};
  e.top.reserve(r.getTop().size());
  for (auto t : r.getTop()) e.top.emplace_back(t.getTokenId(), t.getLogprob());
  return e;
}

}  // namespace

step_result_msg encode_step_result(uint64_t step_id, const std::vector<SampledResult>& sampled,
                                   const StepReport& report, const std::vector<PromptLogprobRun>& prompt_logprobs,
                                   const std::vector<PooledEmbedding>& embeddings,
                                   const std::vector<SeqDrafts>& drafts) {
  return step_result_msg::build([&](schema::StepResult::Builder b) {
    b.setStepId(step_id);
    auto list = b.initSampled(static_cast<unsigned>(sampled.size()));
    for (unsigned i = 0; i < sampled.size(); ++i) {
      list[i].setSeqId(sampled[i].seq_id);
      list[i].setTokenId(sampled[i].token);
      auto lp = list[i].initLogprob();
      lp.setTokenId(sampled[i].token);
      lp.setLogprob(sampled[i].logprob);
      fill_top(lp.initTop(static_cast<unsigned>(sampled[i].top.size())), sampled[i].top);
    }
    if (!prompt_logprobs.empty()) {
      auto runs = b.initPromptLogprobs(static_cast<unsigned>(prompt_logprobs.size()));
      for (unsigned i = 0; i < prompt_logprobs.size(); ++i) {
        const PromptLogprobRun& run = prompt_logprobs[i];
        runs[i].setSeqId(run.seq_id);
        runs[i].setFirstPos(run.first_pos);
        auto entries = runs[i].initEntries(static_cast<unsigned>(run.entries.size()));
        for (unsigned j = 0; j < run.entries.size(); ++j) fill_entry(entries[j], run.entries[j]);
      }
    }
    if (!embeddings.empty()) {
      auto pooled = b.initEmbeddings(static_cast<unsigned>(embeddings.size()));
      for (unsigned i = 0; i < embeddings.size(); ++i) {
        pooled[i].setSeqId(embeddings[i].seq_id);
        fill_list(pooled[i].initValues(static_cast<unsigned>(embeddings[i].values.size())), embeddings[i].values);
      }
    }
    if (!drafts.empty()) {
      auto runs = b.initDrafts(static_cast<unsigned>(drafts.size()));
      for (unsigned i = 0; i < drafts.size(); ++i) {
        runs[i].setSeqId(drafts[i].seq_id);
        fill_list(runs[i].initTokens(static_cast<unsigned>(drafts[i].tokens.size())), drafts[i].tokens);
      }
    }
    b.setNTokens(report.n_tokens);
    b.setForwardMicros(report.forward_us);
    b.setFlops(report.flops);
    b.setBytes(report.bytes);
    b.setRooflineMicros(report.roofline_us);
    b.setComputeBound(report.compute_bound);
  });
}

step_result_msg encode_step_error(uint64_t step_id, const std::string& error) {
  return step_result_msg::build([&](schema::StepResult::Builder b) {
    b.setStepId(step_id);
    b.setError(error);
  });
}

DecodedStepResult decode_step_result(schema::StepResult::Reader result) {
  DecodedStepResult out;
  out.step_id = result.getStepId();
  out.error = result.getError();
  out.forward_us = result.getForwardMicros();
  out.n_tokens = result.getNTokens();
  out.flops = result.getFlops();
  out.bytes = result.getBytes();
  out.roofline_us = result.getRooflineMicros();
  out.compute_bound = result.getComputeBound();
  for (auto s : result.getSampled()) {
    SampledResult r{s.getSeqId(), s.getTokenId(), s.getLogprob().getLogprob(), {}};
    for (auto t : s.getLogprob().getTop()) r.top.emplace_back(t.getTokenId(), t.getLogprob());
    out.sampled.push_back(std::move(r));
  }
  for (auto run : result.getPromptLogprobs()) {
    PromptLogprobRun p{run.getSeqId(), run.getFirstPos(), {}};
    p.entries.reserve(run.getEntries().size());
    for (auto e : run.getEntries()) p.entries.push_back(read_entry(e));
    out.prompt_logprobs.push_back(std::move(p));
  }
  for (auto e : result.getEmbeddings()) out.embeddings.push_back(PooledEmbedding{e.getSeqId(), to_vector(e.getValues())});
  for (auto d : result.getDrafts()) out.drafts.push_back(SeqDrafts{d.getSeqId(), to_vector(d.getTokens())});
  return out;
}

schema::FinishReason to_schema(Finish f) {
  switch (f) {
    case Finish::none: return schema::FinishReason::NONE;
    case Finish::stop: return schema::FinishReason::STOP;
    case Finish::length: return schema::FinishReason::LENGTH;
    case Finish::abort: return schema::FinishReason::ABORT;
    case Finish::error: return schema::FinishReason::ERROR;
  }
  return schema::FinishReason::ERROR;
}

token_event_msg encode_event(const SeqEvent& ev) {
  return token_event_msg::build([&](schema::TokenEvent::Builder b) {
    b.setRequestId(ev.seq_id);
    fill_list(b.initTokenIds(static_cast<unsigned>(ev.new_tokens.size())), ev.new_tokens);
    b.setFinishReason(to_schema(ev.finish));
    if (!ev.logprobs.empty()) {
      auto lps = b.initLogprobs(static_cast<unsigned>(ev.logprobs.size()));
      for (unsigned i = 0; i < ev.logprobs.size(); ++i) {
        lps[i].setTokenId(ev.new_tokens[i]);
        lps[i].setLogprob(ev.logprobs[i]);
        if (i < ev.top_logprobs.size())
          fill_top(lps[i].initTop(static_cast<unsigned>(ev.top_logprobs[i].size())), ev.top_logprobs[i]);
      }
    }
    if (!ev.prompt_logprobs.empty()) {
      auto pl = b.initPromptLogprobs(static_cast<unsigned>(ev.prompt_logprobs.size()));
      for (unsigned i = 0; i < ev.prompt_logprobs.size(); ++i) fill_entry(pl[i], ev.prompt_logprobs[i]);
    }
    if (!ev.embedding.empty()) fill_list(b.initEmbedding(static_cast<unsigned>(ev.embedding.size())), ev.embedding);
    if (!ev.error.empty()) b.setError(ev.error);
    b.setErrorCode(static_cast<uint16_t>(ev.error_code));
    b.setPromptTokens(ev.prompt_tokens);
    b.setCompletionTokens(ev.completion_tokens);
    b.setCachedTokens(ev.cached_tokens);
  });
}

token_event_msg error_event(uint64_t request_id, const Status& error, int64_t retry_after_ms) {
  return token_event_msg::build([&](schema::TokenEvent::Builder b) {
    b.setRequestId(request_id);
    b.setFinishReason(schema::FinishReason::ERROR);
    b.setError(error.message());
    b.setErrorCode(static_cast<uint16_t>(error.code()));
    b.setRetryAfterMs(static_cast<uint32_t>(std::clamp<int64_t>(retry_after_ms, 0, UINT32_MAX)));
  });
}

}  // namespace brigade
