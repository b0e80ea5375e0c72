#include "actors/tokenizer/tokenizer_actor.h"

#include <algorithm>
#include <unordered_map>

#include "actors/tokenizer/stop_filter.h"
#include "models/detokenizer.h"
#include "models/image.h"
#include "actors/step_codec.h"
#include "messages/convert.h"
#include "models/mrope.h"
#include "models/truncation.h"

namespace brigade {

namespace {

// Per-request output state.
struct TextState {
  std::unique_ptr<IncrementalDetokenizer> detok;  // null without a tokenizer
  StopFilter stops;
  bool stopped = false;  // a stop string ended it; swallow events until the scheduler's final one
  int min_tokens = 0;    // stop strings match only the text of the tokens after these
  int n_tokens = 0;      // output tokens seen
  std::vector<int32_t> prompt_ids;  // returnPromptIds: for the first event (then cleared)
};

struct TokenizerState {
  std::shared_ptr<const Tokenizer> tokenizer;
  token_sink_actor frontend;
  scheduler_actor scheduler;
  std::unordered_map<uint64_t, TextState> streams;
  int max_context = 0;
  ImageMarkers images;
  static inline const char* name = "brigade.tokenizer";
};

using tokenizer_ptr = tokenizer_actor::stateful_pointer<TokenizerState>;

// A tiled image's tiles (ImageMarkers::tile_side): Idefics3's rows x cols split tiles (0 x 0
// unsplit) and the global one; Aya Vision's column of `rows` tiles (cols 0).
struct TileGrid {
  int rows = 0, cols = 0;
  bool column = false;
  int64_t tiles() const { return column ? int64_t{rows} : int64_t{rows} * cols + 1; }
};

// Image k's tile grid, its pixels checked against it; invalid_argument naming the sizes.
Expected<TileGrid> tile_grid(schema::ImageInput::Reader im, unsigned k, const ImageMarkers& m) {
  const int side = m.tile_side;
  const std::string which = "image " + std::to_string(k);
  if (m.tile_column && (im.getGridW() != side || im.getGridH() <= 0 || im.getGridH() % side != 0))
    return invalid_argument(which + " has a grid of " + std::to_string(im.getGridH()) + " x " +
                            std::to_string(im.getGridW()) + " patches; this model's images are columns of tiles of " +
                            std::to_string(side) + " x " + std::to_string(side) + " patches ((tiles * " +
                            std::to_string(side) + ") x " + std::to_string(side) + ")");
  if (im.getGridH() <= 0 || im.getGridW() <= 0 || im.getGridH() % side != 0 || im.getGridW() % side != 0)
    return invalid_argument(which + " has a grid of " + std::to_string(im.getGridH()) + " x " +
                            std::to_string(im.getGridW()) + " patches; this model's images are tiles of " +
                            std::to_string(side) + " x " + std::to_string(side) + " patches ((rows * " +
                            std::to_string(side) + ") x (cols * " + std::to_string(side) + "))");
  TileGrid g{im.getGridH() / side, im.getGridW() / side, m.tile_column};
  if (g.column) g.cols = 0;
  else if (g.rows == 1 && g.cols == 1) g = {};
  const size_t tile_floats = size_t{3} * static_cast<size_t>(m.tile_pixels) * static_cast<size_t>(m.tile_pixels);
  const size_t got = im.getPixels().size() / sizeof(float);  // compared as tiles: no product overflows
  const std::string layout = g.column ? std::to_string(g.rows) : std::to_string(g.rows) + " x " + std::to_string(g.cols);
  if (got % tile_floats != 0 || static_cast<int64_t>(got / tile_floats) != g.tiles())
    return invalid_argument(which + " of " + layout + " tiles must be [" +
                            std::to_string(g.tiles()) + ", 3, " + std::to_string(m.tile_pixels) + ", " +
                            std::to_string(m.tile_pixels) + "] pixels; got " + std::to_string(got) + " floats (" +
                            std::to_string(tile_floats) + " a tile)");
  return g;
}

// The prompt text of an image of grid g (Idefics3Processor's and AyaVisionProcessor's
// replace_image_token: ImageMarkers).
std::string tiled_image_text(const TileGrid& g, const ImageMarkers& m) {
  std::string run;
  for (int i = 0; i < m.tokens_per_image; ++i) run += m.image_piece;
  if (g.column) {
    std::string out = m.before;
    for (int t = 1; t < g.rows; ++t) out += m.tile_piece + "_" + std::to_string(t) + run;
    return out + m.global_piece + run + m.after;
  }
  std::string out;
  for (int r = 0; r < g.rows; ++r) {
    for (int c = 0; c < g.cols; ++c)
      out += m.tile_piece + "<row_" + std::to_string(r + 1) + "_col_" + std::to_string(c + 1) + ">" + run;
    out += "\n";
  }
  if (g.rows > 0) out += "\n";
  return out + m.tile_piece + m.global_piece + run + m.tile_piece;
}

// The request's images into b: as they are, or (tile_side > 0) each one's tiles as images of their
// own (their grids checked by tile_grid before).
void set_images(schema::GenerateRequest::Builder b, capnp::List<schema::ImageInput>::Reader images,
                const ImageMarkers& m) {
  if (m.tile_side <= 0) {
    b.setImages(images);
    return;
  }
  unsigned n = 0;  // each tile's pixels are in the request, so the count is far below a list's bound
  std::vector<TileGrid> grids;
  for (unsigned k = 0; k < images.size(); ++k) {
    grids.push_back(*tile_grid(images[k], k, m));
    n += static_cast<unsigned>(grids.back().tiles());
  }
  auto out = b.initImages(n);
  const size_t tile_bytes = size_t{3} * static_cast<size_t>(m.tile_pixels) * static_cast<size_t>(m.tile_pixels) * sizeof(float);
  unsigned i = 0;
  for (unsigned k = 0; k < images.size(); ++k) {
    const auto pixels = images[k].getPixels();
    for (int64_t t = 0; t < grids[k].tiles(); ++t, ++i) {
      out[i].setPixels(capnp::Data::Reader(pixels.begin() + static_cast<size_t>(t) * tile_bytes, tile_bytes));
      out[i].setGridH(m.tile_side);
      out[i].setGridW(m.tile_side);
    }
  }
}

// The request with its prompt as token ids (copying every other field; not msg::edited, whose
// copy would keep the text's bytes, zeroed, in a message that may cross to a node), its images
// as set_images puts them.
generate_request_msg with_ids(schema::GenerateRequest::Reader r, const std::vector<int32_t>& ids, int max_context,
                              const ImageMarkers& m) {
  return generate_request_msg::build([&](schema::GenerateRequest::Builder b) {
    b.setRequestId(r.getRequestId());
    fill_list(b.getPrompt().initTokenIds(static_cast<unsigned>(ids.size())), ids);
    b.setAddBos(r.getAddBos());
    b.setSampling(r.getSampling());
    b.setMaxTokens(max_tokens_within_context(r.getMaxTokens(), static_cast<int64_t>(ids.size()), max_context));
    b.setStop(r.getStop());
    b.setPriority(r.getPriority());
    b.setLabels(r.getLabels());
    b.setPooling(r.getPooling());
    b.setLora(r.getLora());
    b.setCacheSalt(r.getCacheSalt());
    b.setSkipSpecialTokens(r.getSkipSpecialTokens());
    set_images(b, r.getImages(), m);
    b.setAdmitGroup(r.getAdmitGroup());
    b.setAdmitGroupSize(r.getAdmitGroupSize());
  });
}

// vLLM's truncate_prompt_tokens: the prompt's last `keep` tokens (keep > 0), else all of them.
std::vector<int32_t> truncated(std::vector<int32_t> ids, int keep) {
  if (keep > 0 && ids.size() > static_cast<size_t>(keep)) ids.erase(ids.begin(), ids.end() - keep);
  return ids;
}

// Every image's tiles checked (tile_grid) where the model takes tiled images.
Status check_tiles(capnp::List<schema::ImageInput>::Reader images, const ImageMarkers& m) {
  if (m.tile_side <= 0) return Status::ok();
  for (unsigned k = 0; k < images.size(); ++k) BRIGADE_RETURN_IF_ERROR(tile_grid(images[k], k, m).status());
  return Status::ok();
}

// The prompt text with each image marker expanded; invalid_argument when the markers and the
// request's images disagree, unsupported for images to a model that takes none.
Expected<std::string> expand_image_markers(std::string_view text, capnp::List<schema::ImageInput>::Reader images,
                                           const ImageMarkers& m) {
  const unsigned n_images = images.size();
  // PaliGemmaProcessor: without markers, one per image at the start.
  std::string prefixed;
  if (!m.prefix_bos.empty() && n_images > 0 && !m.marker.empty() && text.find(m.marker) == std::string_view::npos) {
    for (unsigned k = 0; k < n_images; ++k) prefixed += m.marker;
    prefixed += text;
    text = prefixed;
  }
  size_t last_run_end = 0;  // in out: where the last image's run ends
  const auto laid_out = [&](std::string s) {  // PaliGemmaProcessor: <bos> after the last image, "\n" last
    if (m.prefix_bos.empty()) return s;
    s.insert(last_run_end, m.prefix_bos);
    return s + "\n";
  };
  if (n_images == 0) return laid_out(std::string(text));
  if (m.marker.empty()) return unsupported("this model takes text only: no vision tower runs here (send no images)");
  std::string out;
  unsigned n_markers = 0;
  size_t at = 0;
  for (size_t hit; (hit = text.find(m.marker, at)) != std::string_view::npos; at = hit + m.marker.size()) {
    out.append(text.substr(at, hit - at));
    int rows = 1, cols = m.tokens_per_image;
    if (m.tile_side > 0 && n_markers < n_images) {
      BRIGADE_ASSIGN_OR_RETURN(const TileGrid g, tile_grid(images[n_markers], n_markers, m));
      out += tiled_image_text(g, m);
      ++n_markers;
      continue;
    }
    if (m.anyres.on() && n_markers < n_images) {
      const auto im = images[n_markers];
      BRIGADE_RETURN_IF_ERROR(
          check_anyres_size(m.anyres, im.getGridH(), im.getGridW(), "image " + std::to_string(n_markers)));
      cols = anyres_tokens(m.anyres, im.getGridH(), im.getGridW());
    } else if (m.merge > 0 && n_markers < n_images) {
      const auto im = images[n_markers];
      BRIGADE_RETURN_IF_ERROR(check_merge_grid(im.getGridH(), im.getGridW(), m.merge, "image " + std::to_string(n_markers)));
      rows = im.getGridH() / m.merge, cols = im.getGridW() / m.merge;
      if (m.break_piece.empty()) cols *= rows, rows = 1;
    }
    out += m.before;
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < cols; ++i) out += m.image_piece;
      if (!m.break_piece.empty()) out += r + 1 < rows ? m.break_piece : m.end_piece;
    }
    out += m.after;
    last_run_end = out.size();
    ++n_markers;
  }
  out.append(text.substr(at));
  if (n_markers != n_images)
    return invalid_argument("the prompt has " + std::to_string(n_markers) + " image marker(s) (" + m.marker +
                            ") but the request " + std::to_string(n_images) + " image(s)");
  return laid_out(std::move(out));
}

// A token's piece as valid UTF-8 (a byte of a partial sequence becomes U+FFFD): the text of a
// prompt logprob entry, whose token is shown alone.
std::string piece_text(const Tokenizer* tokenizer, int32_t id) {
  if (!tokenizer || id < 0 || id >= tokenizer->vocab_size()) return {};
  std::string out;
  append_valid_utf8(out, tokenizer->token_to_piece(id), /*hold_tail=*/false);
  return out;
}

// The scheduler's prompt logprobs with the text of each token and alternative.
void copy_prompt_logprobs(const Tokenizer* tokenizer, capnp::List<schema::TokenLogprob>::Reader in,
                          schema::TokenEvent::Builder b) {
  if (in.size() == 0) return;
  auto out = b.initPromptLogprobs(in.size());
  for (unsigned i = 0; i < in.size(); ++i) {
    out.setWithCaveats(i, in[i]);
    out[i].setText(piece_text(tokenizer, in[i].getTokenId()));
    auto top = out[i].getTop();
    for (unsigned j = 0; j < top.size(); ++j) top[j].setText(piece_text(tokenizer, top[j].getTokenId()));
  }
}

// The request's bad words as token ids in its sampling parameters (forward is the request as it
// goes on: with a tokenized prompt or not).
Status tokenize_bad_words(const TokenizerState& st, schema::GenerateRequest::Reader r, generate_request_msg& forward) {
  if (r.getBadWords().size() == 0) return Status::ok();
  if (!st.tokenizer) return invalid_argument("bad_words needs the model's tokenizer; this model has none");
  std::vector<std::string> words;
  for (auto w : r.getBadWords()) words.emplace_back(w);
  BRIGADE_ASSIGN_OR_RETURN(const auto ids, bad_word_ids(*st.tokenizer, words));
  forward = forward.edited([&](schema::GenerateRequest::Builder b) {
    auto out = b.getSampling().initBadWords(static_cast<unsigned>(ids.size()));
    for (unsigned i = 0; i < ids.size(); ++i) fill_list(out.init(i, static_cast<unsigned>(ids[i].size())), ids[i]);
  });
  return Status::ok();
}

void on_request(tokenizer_ptr self, const generate_request_msg& msg) {
  auto& st = self->state;
  auto r = msg.reader();
  const uint64_t id = r.getRequestId();
  generate_request_msg forward = msg;
  if (r.getPrompt().isText()) {
    if (!st.tokenizer) {
      self->send(st.frontend,
                 error_event(id, invalid_argument("this model has no tokenizer: send the prompt as token ids")));
      return;
    }
    auto text = expand_image_markers(to_string_view(r.getPrompt().getText()), r.getImages(), st.images);
    if (!text) {
      self->send(st.frontend, error_event(id, text.status()));
      return;
    }
    const bool add_bos = r.getAddBos() && st.images.prefix_bos.empty();  // PaliGemma's layout places its own
    auto ids = st.tokenizer->encode(*text, add_bos);
    // A pooling request's text is cut as vLLM cuts it for embed, classify and score (from the
    // right, its special tokens kept: models/truncation.h); generation keeps the last ids.
    if (ids && r.getPooling() != schema::Pooling::NONE)
      ids = truncate_text_right(*st.tokenizer, *text, std::move(*ids), add_bos, r.getTruncatePromptTokens());
    if (!ids) {
      self->send(st.frontend, error_event(id, ids.status()));
      return;
    }
    forward = with_ids(r, truncated(*ids, r.getTruncatePromptTokens()), st.max_context, st.images);
  } else if (const int keep = r.getTruncatePromptTokens(); keep > 0 && r.getPrompt().getTokenIds().size() > static_cast<unsigned>(keep)) {
    if (Status bad = check_tiles(r.getImages(), st.images); !bad.is_ok()) {
      self->send(st.frontend, error_event(id, bad));
      return;
    }
    forward = with_ids(r, truncated(to_vector(r.getPrompt().getTokenIds()), keep), st.max_context, st.images);
  } else if (st.images.tile_side > 0 && r.getImages().size() > 0) {  // a token-id prompt's images become their tiles
    if (Status bad = check_tiles(r.getImages(), st.images); !bad.is_ok()) {
      self->send(st.frontend, error_event(id, bad));
      return;
    }
    forward = with_ids(r, to_vector(r.getPrompt().getTokenIds()), st.max_context, st.images);
  } else if (const int capped = max_tokens_within_context(r.getMaxTokens(), r.getPrompt().getTokenIds().size(),
                                                          st.max_context);
             capped != r.getMaxTokens()) {
    forward = msg.edited([&](schema::GenerateRequest::Builder b) { b.setMaxTokens(capped); });
  }
  if (Status bad = tokenize_bad_words(st, r, forward); !bad.is_ok()) {
    self->send(st.frontend, error_event(id, bad));
    return;
  }
  TextState ts{st.tokenizer ? std::make_unique<IncrementalDetokenizer>(*st.tokenizer, r.getSkipSpecialTokens()) : nullptr,
               StopFilter(to_vector(r.getStop().getStrings()), r.getStop().getIncludeStrings()), false,
               r.getSampling().getMinTokens(), 0, {}};
  if (r.getReturnPromptIds()) ts.prompt_ids = to_vector(forward.reader().getPrompt().getTokenIds());
  st.streams.insert_or_assign(id, std::move(ts));
  self->send(st.scheduler, forward);
}

void on_event(tokenizer_ptr self, const token_event_msg& msg) {
  auto& st = self->state;
  auto r = msg.reader();
  const uint64_t id = r.getRequestId();
  const bool final_event = r.getFinishReason() != schema::FinishReason::NONE;
  auto it = st.streams.find(id);
  if (it == st.streams.end()) {  // refused before a stream existed
    self->send(st.frontend, msg);
    return;
  }
  TextState& ts = it->second;
  if (ts.stopped) {  // the stop event went out already; this is the scheduler's abort echo
    if (final_event) st.streams.erase(it);
    return;
  }
  // Token by token: an event may carry several (speculative decoding), and a stop string that
  // completes at one of them ends the output there, its ids and logprobs included.
  const auto ids = r.getTokenIds();
  std::string text;
  unsigned n_kept = ids.size();
  for (unsigned i = 0; i < ids.size() && !ts.stops.stopped(); ++i) {
    std::string piece = ts.detok ? ts.detok->push(ids[i]) : std::string();
    if (final_event && ts.detok && i + 1 == ids.size()) piece += ts.detok->flush();
    text += ts.n_tokens++ < ts.min_tokens ? ts.stops.pass(piece) : ts.stops.push(piece);
    if (ts.stops.stopped()) n_kept = i + 1;
  }
  if (ids.size() == 0 && final_event && ts.detok) text += ts.stops.push(ts.detok->flush());
  const bool hit_stop = ts.stops.stopped();
  if (final_event && !hit_stop) text += ts.stops.flush();
  const unsigned n_cut = ids.size() - n_kept;
  auto out = token_event_msg::build([&](schema::TokenEvent::Builder b) {
    b.setRequestId(id);
    if (n_cut == 0) {
      b.setTokenIds(ids);
      b.setLogprobs(r.getLogprobs());
    } else {
      auto kept = b.initTokenIds(n_kept);
      for (unsigned i = 0; i < n_kept; ++i) kept.set(i, ids[i]);
      const auto lps = r.getLogprobs();
      if (lps.size() > 0) {
        auto out_lps = b.initLogprobs(std::min(n_kept, lps.size()));
        for (unsigned i = 0; i < out_lps.size(); ++i) out_lps.setWithCaveats(i, lps[i]);
      }
    }
    b.setText(text);
    b.setFinishReason(hit_stop ? schema::FinishReason::STOP : r.getFinishReason());
    b.setError(r.getError());
    b.setErrorCode(r.getErrorCode());
    b.setRetryAfterMs(r.getRetryAfterMs());
    b.setPromptTokens(r.getPromptTokens());
    b.setCachedTokens(r.getCachedTokens());
    b.setCompletionTokens(r.getCompletionTokens() - n_cut);
    copy_prompt_logprobs(st.tokenizer.get(), r.getPromptLogprobs(), b);
    if (r.hasEmbedding()) b.setEmbedding(r.getEmbedding());
    if (!ts.prompt_ids.empty()) fill_list(b.initPromptTokenIds(static_cast<unsigned>(ts.prompt_ids.size())), ts.prompt_ids);
  });
  ts.prompt_ids.clear();
  self->send(st.frontend, out);
  if (hit_stop && !final_event) {
    ts.stopped = true;
    self->send(st.scheduler, abort_msg::build([&](schema::Abort::Builder b) { b.setRequestId(id); }));
  } else if (final_event) {
    st.streams.erase(it);
  }
}

tokenizer_actor::behavior_type tokenizer_fun(tokenizer_ptr self, std::shared_ptr<const Tokenizer> tokenizer,
                                             token_sink_actor frontend, ImageMarkers images) {
  self->state.tokenizer = std::move(tokenizer);
  self->state.frontend = std::move(frontend);
  self->state.images = std::move(images);
  return {
      [self](const generate_request_msg& msg) { on_request(self, msg); },
      [self](const token_event_msg& msg) { on_event(self, msg); },
      [self](const abort_msg& msg) { self->send(self->state.scheduler, msg); },
      [self](wire_atom, scheduler_actor scheduler, int32_t max_context) {
        BRIGADE_CHECK(max_context > 0, "the tokenizer caps max_tokens to a known context");
        self->state.scheduler = std::move(scheduler);
        self->state.max_context = max_context;
      },
  };
}

}  // namespace

tokenizer_actor spawn_tokenizer(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                                token_sink_actor frontend, ImageMarkers images) {
  return system.spawn(tokenizer_fun, std::move(tokenizer), std::move(frontend), std::move(images));
}

ImageMarkers image_markers(const Tokenizer* tokenizer, const VisionConfig& v) {
  if (tokenizer == nullptr || !v.present()) return {};
  const int n = tokenizer->vocab_size();
  if (v.kind == VisionKind::llava) {  // LlavaProcessor: each <image> becomes the image's tokens, nothing around them
    if (v.image_token < 0 || v.image_token >= n) return {};
    ImageMarkers m;
    m.image_piece = m.marker = tokenizer->token_to_piece(v.image_token);
    if (v.anyres.on()) m.anyres = v.anyres;  // LlavaNext / LlavaOnevisionProcessor: as the image's size gives
    else m.tokens_per_image = v.image_tokens(v.patches_per_side(), v.patches_per_side());
    return m;
  }
  if (v.tiled()) {  // Idefics3Processor, AyaVisionProcessor: each <image> becomes its tiles' text (ImageMarkers)
    if (v.image_token < 0 || v.image_token >= n) return {};
    ImageMarkers m;
    m.image_piece = tokenizer->token_to_piece(v.image_token);
    m.tokens_per_image = v.image_tokens(v.patches_per_side(), v.patches_per_side());
    m.tile_side = v.patches_per_side();
    m.tile_pixels = v.image_size;
    // The processors' strings (not in config.json).
    if (v.kind == VisionKind::aya_vision) {
      m.marker = "<image>";  // AyaVisionProcessor's image_token; the run is of <|IMG_PATCH|>
      m.tile_column = true;
      m.before = "<|START_OF_IMG|>";
      m.after = "<|END_OF_IMG|>";
      m.tile_piece = "TILE";
      m.global_piece = "TILE_GLOBAL";
    } else {
      m.marker = m.image_piece;
      m.tile_piece = "<fake_token_around_image>";
      m.global_piece = "<global-img>";
    }
    return m;
  }
  if (v.kind == VisionKind::paligemma) {  // PaliGemmaProcessor: the runs, <bos> after the last, the text, "\n"
    if (v.image_token < 0 || v.image_token >= n || tokenizer->bos_id() < 0) return {};
    ImageMarkers m;
    m.image_piece = m.marker = tokenizer->token_to_piece(v.image_token);
    m.tokens_per_image = v.tokens_per_image;
    m.prefix_bos = tokenizer->token_to_piece(tokenizer->bos_id());
    return m;
  }
  if (v.kind == VisionKind::internvl) {  // InternVLProcessor: each <IMG_CONTEXT> becomes <img> + its tiles' tokens + </img>
    if (v.image_token < 0 || v.image_token >= n) return {};
    ImageMarkers m;
    m.image_piece = m.marker = tokenizer->token_to_piece(v.image_token);
    m.before = "<img>";  // the tokenizer's start_image_token / end_image_token (not in config.json)
    m.after = "</img>";
    m.merge = v.merge;
    return m;
  }
  const bool rows = v.kind == VisionKind::pixtral;  // [IMG_BREAK] and [IMG_END] in place of begin / end
  for (int32_t id : {rows ? v.image_break_token : v.boi_token, v.eoi_token, v.image_token})
    if (id < 0 || id >= n) return {};
  ImageMarkers m;
  m.image_piece = tokenizer->token_to_piece(v.image_token);
  if (rows) {
    m.marker = m.image_piece;
    m.merge = v.merge;
    m.break_piece = tokenizer->token_to_piece(v.image_break_token);
    m.end_piece = tokenizer->token_to_piece(v.eoi_token);
    return m;
  }
  if (v.kind == VisionKind::gemma4) {  // Gemma4Processor: each <|image|> becomes <|image> + its tokens + <image|>
    m.marker = m.image_piece;
    m.before = tokenizer->token_to_piece(v.boi_token);
    m.after = tokenizer->token_to_piece(v.eoi_token);
    m.merge = v.merge;
    return m;
  }
  if (v.dynamic()) {  // Qwen2VLProcessor: each <|image_pad|> becomes the image's tokens
    m.marker = m.image_piece;
    m.merge = v.merge;
    return m;
  }
  m.marker = tokenizer->token_to_piece(v.boi_token);
  m.before = "\n\n" + m.marker;
  m.after = tokenizer->token_to_piece(v.eoi_token) + "\n\n";
  m.tokens_per_image = v.tokens_per_image;
  return m;
}

Expected<std::vector<std::vector<int32_t>>> bad_word_ids(const Tokenizer& tokenizer,
                                                         const std::vector<std::string>& words) {
  std::vector<std::vector<int32_t>> out;
  for (const std::string& word : words) {
    const size_t first = word.find_first_not_of(" \t\n\r\f\v");
    if (first == std::string::npos) return invalid_argument("bad_words holds an empty word");
    const std::string bare = word.substr(first);
    for (const bool space : {false, true}) {
      BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.encode(space ? " " + bare : bare, false));
      if (ids.empty()) return invalid_argument("bad_words: '" + bare + "' encodes to no tokens");
      if (ids.size() > SamplingConfig::kMaxBadWordTokens)
        return invalid_argument("bad_words: '" + bare + "' is " + std::to_string(ids.size()) + " tokens; at most " +
                                std::to_string(SamplingConfig::kMaxBadWordTokens));
      if (space && (ids.front() == out.back().front() || ids.size() != out.back().size())) continue;
      out.push_back(std::move(ids));
    }
  }
  if (out.size() > SamplingConfig::kMaxBadWords)
    return invalid_argument("bad_words gives " + std::to_string(out.size()) + " token sequences; at most " +
                            std::to_string(SamplingConfig::kMaxBadWords));
  return out;
}

int max_tokens_within_context(int max_tokens, int64_t n_prompt, int max_context) {
  if (max_tokens <= 0 || max_context <= 0) return max_tokens;  // prompt scoring; no context known
  const int64_t room = std::max<int64_t>(1, static_cast<int64_t>(max_context) - n_prompt);
  return static_cast<int>(std::min<int64_t>(max_tokens, room));
}

}  // namespace brigade
