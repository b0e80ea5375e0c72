// The tokenizer station (DESIGN.md §3). Requests pass through it on the way in (text prompts
// become token ids) and TokenEvents on the way out (ids gain their text, incrementally, never a
// broken UTF-8 sequence; stop strings end a request and are never streamed, even in part).
//
// Contract: forwards every request to the scheduler as token ids, or answers it with one error
// event; forwards every event to the frontend sink, the last one of each request with
// finishReason != none. Aborts pass through in order with the requests they follow.
#pragma once

#include <caf/all.hpp>

#include <memory>

#include "actors/atoms.h"
#include "actors/scheduler/scheduler_actor.h"
#include "core/status.h"
#include "messages/types.h"
#include "models/tokenizer.h"
#include "models/vision_config.h"

namespace brigade {

// Wiring: (wire, downstream, the model's context length), sent once the instances are known.
using tokenizer_actor = caf::typed_actor<caf::reacts_to<generate_request_msg>, caf::reacts_to<token_event_msg>,
                                         caf::reacts_to<abort_msg>, caf::reacts_to<wire_atom, scheduler_actor, int32_t>>;

// How a text prompt's images become image tokens, as the model's processor does: each `marker`
// (the text the chat template writes per image) is replaced by before + the image token's text
// repeated for the image's token count + after. Gemma3Processor: marker = before's tail =
// `<start_of_image>`, before "\n\n<start_of_image>", a fixed tokens_per_image, after
// "<end_of_image>\n\n". Qwen2VLProcessor: marker `<|image_pad|>` (between the template's
// `<|vision_start|>` and `<|vision_end|>`), nothing around it, and (grid_h / merge) *
// (grid_w / merge) tokens per image. PixtralProcessor (Mistral 3): marker `[IMG]`, the image's
// rows of grid_w / merge `[IMG]` each followed by break_piece `[IMG_BREAK]`, the last one end_piece
// `[IMG_END]` (replace_image_token). LlavaProcessor: marker `<image>`, nothing around it, a fixed
// count (the tower's grid, plus its class row under "full"). An empty marker: the model takes no images (a request with
// some is refused).
struct ImageMarkers {
  std::string marker;
  std::string before;
  std::string image_piece;
  std::string after;
  int tokens_per_image = 0;  // fixed count; 0 = each image's grid decides (merge)
  int merge = 0;
  std::string break_piece;  // Pixtral: non-empty, the image's tokens are laid out in rows
  std::string end_piece;
  AnyresGrid anyres;        // LLaVA-NeXT: on, each image's size in pixels decides (anyres_tokens)
  // Tiled images (tile_side > 0): an image arrives as the processor's tiles ([T, 3, tile_pixels,
  // tile_pixels]), its marker becomes the processor's text around each tile's run of
  // tokens_per_image image pieces, and the request's images become its tiles, each an image of
  // tile_side x tile_side patches (token-id prompts' images are split too).
  //   Idefics3Processor / SmolVLMProcessor: the grid (rows * tile_side) x (cols * tile_side) patches,
  //   a 1 x 1 grid the image unsplit; for each tile row by row tile_piece ("<fake_token_around_image>")
  //   + "<row_R_col_C>" + its run, "\n" after each row, then "\n" + tile_piece + global_piece
  //   ("<global-img>") + the global tile's run + tile_piece (unsplit: that last part alone, without
  //   the "\n"); T = rows * cols + 1, or 1.
  //   AyaVisionProcessor (tile_column): the grid (T * tile_side) x tile_side (GotOcr2's tiles, the
  //   thumbnail last); before ("<|START_OF_IMG|>"), tile_piece + "_k" ("TILE_1" ..) + run for the
  //   first T - 1, global_piece ("TILE_GLOBAL") + run for the last, after ("<|END_OF_IMG|>").
  int tile_side = 0;
  int tile_pixels = 0;
  bool tile_column = false;
  std::string tile_piece, global_piece;
  // PaliGemmaProcessor (not empty: the BOS token's text): every text prompt becomes its images'
  // runs where its markers are (without any marker, one per image at the start), prefix_bos after
  // the last run (first without images), the rest of the text and "\n"; the request's add_bos is
  // then not applied (the BOS is in the text). An empty `marker` with it: text-only prompts laid out.
  std::string prefix_bos;
};
// The markers of a model with a vision tower (`v` present), from the tokenizer's pieces of its
// special tokens; empty otherwise.
ImageMarkers image_markers(const Tokenizer* tokenizer, const VisionConfig& v);

// tokenizer may be null (a checkpoint without one): then only token-id prompts are accepted and
// events carry no text. Requests leave it (text or token-id prompts) with max_tokens capped to
// the context it is wired with (below). A text prompt with images has its markers expanded
// (ImageMarkers): the k-th marker takes the request's k-th image, and the counts must agree.
tokenizer_actor spawn_tokenizer(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                                token_sink_actor frontend, ImageMarkers images = {});

// vLLM's bad_words as token-id sequences (SamplingParams.update_from_tokenizer): each word, its
// leading spaces stripped, is encoded without special tokens; then " " + the word, kept when it
// has as many tokens as the first form but another first token (a tokenizer that spells a word
// apart after a space). An empty word, one beyond SamplingConfig::kMaxBadWordTokens tokens, or
// more than kMaxBadWords sequences in all is refused.
Expected<std::vector<std::vector<int32_t>>> bad_word_ids(const Tokenizer& tokenizer,
                                                         const std::vector<std::string>& words);

// max_tokens as far as the context lets a prompt of n_prompt tokens generate: what the scheduler
// would stop at anyway, said up front so that stations (a token rate limit) count what can
// happen, and a request without a limit (INT32_MAX, the server's chat default) means "to the end
// of the context". Never below 1 (a prompt that fills the context is refused by the scheduler,
// with the reason); 0 (prompt scoring) stays 0.
int max_tokens_within_context(int max_tokens, int64_t n_prompt, int max_context);

}  // namespace brigade
