// What SentencePiece-converted tokenizer.json files do around the model: the Metaspace
// pre-tokenizer (spaces become "▁", one "▁" is prepended, words start at each "▁"), optionally
// after WhitespaceSplit, and the decoders that undo it (Metaspace; Llama's Sequence[Replace("▁",
// " "), ByteFallback, Fuse, Strip]); as Hugging Face tokenizers runs them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace brigade {

class MetaspacePreTokenizer {
 public:
  // `pre_tokenizer`: Metaspace (prepend_scheme always / first / never, or the older
  // add_prefix_space; split), WhitespaceSplit, a Sequence of these, or null (the text is one
  // word). unsupported, naming the type, for any other; corrupt for a malformed Metaspace.
  static Expected<MetaspacePreTokenizer> parse(const nlohmann::json& pre_tokenizer, const std::string& origin);

  // Appends the words of `text` (normalized text between added tokens; none empty) to `words`.
  // `at_start`: the text begins the input (prepend_scheme "first" prepends there only).
  void split(std::string_view text, bool at_start, std::vector<std::string>& words) const;

 private:
  enum class Prepend { always, first, never };
  struct Step {
    bool whitespace_split = false;  // else Metaspace
    std::string replacement;
    Prepend prepend = Prepend::always;
    bool split = true;
  };
  Status add(const nlohmann::json& pre, const std::string& origin);

  std::vector<Step> steps_;
};

class PieceDecoder {
 public:
  // `decoder`: Metaspace, Replace (String pattern), ByteFallback, Fuse, Strip, a Sequence of these,
  // or null (tokens joined by spaces). unsupported, naming the type, for any other.
  static Expected<PieceDecoder> parse(const nlohmann::json& decoder, const std::string& origin);

  // The text of `tokens` (vocabulary strings, in order), as Hugging Face's decode gives it.
  std::string decode(std::vector<std::string> tokens) const;
  // The text of one token as it follows others in decode(): "▁" a space, a byte token its raw
  // byte (possibly part of a UTF-8 sequence), nothing stripped. For streaming detokenization.
  std::string piece(const std::string& token) const;

 private:
  enum class Kind { metaspace, replace, byte_fallback, fuse, strip };
  struct Step {
    Kind kind;
    std::string from, to;  // metaspace: replacement; replace: pattern -> content; strip: content
    bool drop_in_first = true;  // metaspace: the replacement in the first token is dropped, not a space
    int strip_start = 0, strip_stop = 0;
  };
  Status add(const nlohmann::json& decoder, const std::string& origin);
  // Runs the steps; `streaming`: tokens[0] is not the first of the text (piece()).
  std::vector<std::string> run(std::vector<std::string> tokens, bool streaming) const;

  std::vector<Step> steps_;
  bool join_with_spaces_ = false;  // no decoder
};

}  // namespace brigade
