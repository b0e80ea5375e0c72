#include "models/tokenizer_unicode.h"

#include <algorithm>
#include <iterator>
#include <span>

namespace brigade {
namespace {

struct CodePointRange {
  char32_t first, last;  // inclusive
};
struct CombiningClassRange {
  char32_t first, last;  // inclusive
  uint8_t ccc;
};
struct Decomposition {
  char32_t cp;
  uint16_t offset;  // into kNfdData
  uint8_t n;
};
// Every stride-th code point of [first, last] lowercases to itself + delta.
struct LowercaseRun {
  char32_t first, last;
  int32_t delta;
  uint8_t stride;
};
struct LowercaseMulti {
  char32_t cp;
  char32_t to[3];
  uint8_t n;
};

#include "models/tokenizer_unicode_tables.inc"

bool in_ranges(std::span<const CodePointRange> ranges, char32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->last;
}

uint8_t combining_class(char32_t cp) {
  auto it = std::upper_bound(std::begin(kCombiningClass), std::end(kCombiningClass), cp,
                             [](char32_t c, const CombiningClassRange& r) { return c < r.first; });
  return it != std::begin(kCombiningClass) && cp <= std::prev(it)->last ? std::prev(it)->ccc : 0;
}

// Hangul syllables decompose algorithmically (Unicode §3.12): L V, or L V T.
constexpr char32_t kHangulBase = 0xAC00, kJamoL = 0x1100, kJamoV = 0x1161, kJamoT = 0x11A7;
constexpr char32_t kNumV = 21, kNumT = 28, kNumSyllables = 11172;

void decompose(std::u32string& out, char32_t cp) {
  if (cp >= kHangulBase && cp < kHangulBase + kNumSyllables) {
    const char32_t s = cp - kHangulBase;
    out += kJamoL + s / (kNumV * kNumT);
    out += kJamoV + (s % (kNumV * kNumT)) / kNumT;
    if (s % kNumT != 0) out += kJamoT + s % kNumT;
    return;
  }
  auto it = std::lower_bound(std::begin(kNfd), std::end(kNfd), cp,
                             [](const Decomposition& d, char32_t c) { return d.cp < c; });
  if (it == std::end(kNfd) || it->cp != cp) {
    out += cp;
    return;
  }
  out.append(kNfdData + it->offset, it->n);
}

}  // namespace

bool is_bert_control(char32_t cp) { return in_ranges(kControl, cp); }
bool is_bert_whitespace(char32_t cp) { return in_ranges(kWhiteSpace, cp); }
bool is_bert_punctuation(char32_t cp) { return in_ranges(kPunctuation, cp); }
bool is_nonspacing_mark(char32_t cp) { return in_ranges(kNonspacingMark, cp); }

bool is_bert_chinese_char(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

void append_nfd(std::u32string& out, std::u32string_view text) {
  const size_t begin = out.size();
  for (char32_t cp : text) decompose(out, cp);
  // Canonical ordering: each run of marks (combining class > 0) sorted stably by class.
  auto run = out.begin() + static_cast<std::ptrdiff_t>(begin);
  while (run != out.end()) {
    run = std::find_if(run, out.end(), [](char32_t c) { return combining_class(c) != 0; });
    auto end = std::find_if(run, out.end(), [](char32_t c) { return combining_class(c) == 0; });
    std::stable_sort(run, end, [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    run = end;
  }
}

void append_lowercase(std::u32string& out, char32_t cp) {
  auto multi = std::lower_bound(std::begin(kLowercaseMulti), std::end(kLowercaseMulti), cp,
                                [](const LowercaseMulti& m, char32_t c) { return m.cp < c; });
  if (multi != std::end(kLowercaseMulti) && multi->cp == cp) {
    out.append(multi->to, multi->n);
    return;
  }
  auto it = std::upper_bound(std::begin(kLowercase), std::end(kLowercase), cp,
                             [](char32_t c, const LowercaseRun& r) { return c < r.first; });
  if (it != std::begin(kLowercase)) {
    const LowercaseRun& r = *std::prev(it);
    if (cp <= r.last && (cp - r.first) % r.stride == 0) {
      out += static_cast<char32_t>(static_cast<int32_t>(cp) + r.delta);
      return;
    }
  }
  out += cp;
}

}  // namespace brigade
