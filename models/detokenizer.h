// IncrementalDetokenizer: turns ids arriving one at a time into text that is always complete,
// valid UTF-8, for streaming to a client.
#pragma once

#include <cstdint>
#include <string>

#include "models/tokenizer.h"

namespace brigade {

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object. skip_special drops special tokens (bos/eos) from text;
  // without it special tokens' text stays, but for the EOS ids' (the end of the output is no text).
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = true)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}

  // Adds one id and returns the text that became complete: bytes of a UTF-8 sequence that is
  // still missing its continuation bytes are held back. Bytes that can never form a valid
  // sequence come out as U+FFFD. Ids outside the vocabulary add nothing.
  std::string push(int32_t id);
  // Ends the stream: a held-back incomplete sequence comes out as U+FFFD.
  std::string flush();
  // Bytes currently held back (at most 3).
  size_t n_pending() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;
};

// Appends `bytes` to out as valid UTF-8, replacing each ill-formed byte with U+FFFD; returns the
// number of trailing bytes not consumed because they may still be completed (when hold_tail).
size_t append_valid_utf8(std::string& out, std::string_view bytes, bool hold_tail);

}  // namespace brigade
