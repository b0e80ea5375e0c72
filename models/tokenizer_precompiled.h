// SentencePiece's compiled normalization rules (nmt_nfkc and the like) as tokenizer.json holds
// them: the "Precompiled" normalizer's precompiled_charsmap, applied as Hugging Face tokenizers
// applies it (XLM-RoBERTa, mT5, ALBERT, T5 checkpoints).
//
// The blob is [u32 little-endian trie size in bytes][darts-clone double-array trie of u32 units]
// [a pool of NUL-terminated UTF-8 replacement strings]; a key found in the trie gives the offset of
// its replacement in the pool.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace brigade {

class PrecompiledCharsmap {
 public:
  // From the base64 text of precompiled_charsmap. corrupt, naming `origin` and the field, for bad
  // base64, a trie size that is not a whole number of units or runs past the blob, a pool that is
  // not UTF-8, or a trie entry whose offset lies outside the pool or inside a character.
  static Expected<PrecompiledCharsmap> parse(std::string_view base64, const std::string& origin);

  // The normalized text, by Hugging Face's rules (not SentencePiece's longest match): `text` is
  // cut into extended grapheme clusters; a cluster shorter than 6 bytes that has a prefix in the
  // trie is replaced whole by the replacement of its shortest such prefix; otherwise each of its
  // characters is replaced by its own entry, or kept. `text` must be valid UTF-8.
  // Thread-safe.
  std::string normalize(std::string_view text) const;

 private:
  // The replacement of the shortest prefix of `key` in the trie (a NUL byte ends the key).
  std::optional<std::string_view> shortest_prefix(std::string_view key) const;
  Status check_trie(const std::string& origin) const;

  std::vector<uint32_t> units_;  // the double array
  std::string pool_;             // replacement strings, each ending at a NUL or the pool's end
};

// The bytes of standard base64 `text` ('=' padding optional); nullopt when it is not base64.
std::optional<std::string> decode_base64_text(std::string_view text);

}  // namespace brigade
