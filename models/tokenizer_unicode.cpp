#include "models/tokenizer_unicode.h"

#include <algorithm>
#include <iterator>
#include <span>
#include <utility>

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
  uint16_t offset;  // into kNfdData (kNfkdData for kNfkd)
  uint8_t n;
};
// first followed by second composes to composite (a primary composite).
struct Composition {
  char32_t first, second, composite;
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

// Hangul syllables decompose and compose algorithmically (Unicode §3.12): L V, or LV T.
constexpr char32_t kHangulBase = 0xAC00, kJamoL = 0x1100, kJamoV = 0x1161, kJamoT = 0x11A7;
constexpr char32_t kNumL = 19, kNumV = 21, kNumT = 28, kNumSyllables = 11172;

const Decomposition* find_decomposition(std::span<const Decomposition> table, char32_t cp) {
  auto it = std::lower_bound(table.begin(), table.end(), cp, [](const Decomposition& d, char32_t c) { return d.cp < c; });
  return it == table.end() || it->cp != cp ? nullptr : &*it;
}

// Appends cp's full canonical decomposition, or with `compat` its full compatibility one.
void decompose(std::u32string& out, char32_t cp, bool compat) {
  if (cp >= kHangulBase && cp < kHangulBase + kNumSyllables) {
    const char32_t s = cp - kHangulBase;
    out += kJamoL + s / (kNumV * kNumT);
    out += kJamoV + (s % (kNumV * kNumT)) / kNumT;
    if (s % kNumT != 0) out += kJamoT + s % kNumT;
    return;
  }
  if (compat) {
    if (const Decomposition* d = find_decomposition(kNfkd, cp)) {
      out.append(kNfkdData + d->offset, d->n);
      return;
    }
  }
  if (const Decomposition* d = find_decomposition(kNfd, cp)) {
    out.append(kNfdData + d->offset, d->n);
    return;
  }
  out += cp;
}

// Decomposes text onto out, then puts each run of marks (combining class > 0) in canonical
// order: sorted stably by class.
void append_decomposed(std::u32string& out, std::u32string_view text, bool compat) {
  const size_t begin = out.size();
  for (char32_t cp : text) decompose(out, cp, compat);
  auto run = out.begin() + static_cast<std::ptrdiff_t>(begin);
  while (run != out.end()) {
    run = std::find_if(run, out.end(), [](char32_t c) { return combining_class(c) != 0; });
    auto end = std::find_if(run, out.end(), [](char32_t c) { return combining_class(c) == 0; });
    std::stable_sort(run, end, [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    run = end;
  }
}

// The primary composite of a followed by b, or 0 when there is none.
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kJamoL && a < kJamoL + kNumL && b >= kJamoV && b < kJamoV + kNumV)
    return kHangulBase + ((a - kJamoL) * kNumV + (b - kJamoV)) * kNumT;
  if (a >= kHangulBase && a < kHangulBase + kNumSyllables && (a - kHangulBase) % kNumT == 0 && b > kJamoT &&
      b < kJamoT + kNumT)
    return a + (b - kJamoT);
  auto it = std::lower_bound(std::begin(kComposition), std::end(kComposition), std::pair(a, b),
                             [](const Composition& c, std::pair<char32_t, char32_t> key) {
                               return std::pair(c.first, c.second) < key;
                             });
  return it != std::end(kComposition) && it->first == a && it->second == b ? it->composite : 0;
}

// Canonical composition (UAX #15) of s from `begin` on, which is decomposed and canonically ordered:
// each character joins the last starter (class 0) when they have a primary composite and nothing
// left between them blocks it (a character of class 0, or of a class >= its own). Before the
// first starter nothing composes.
void compose(std::u32string& s, size_t begin) {
  constexpr size_t kNone = std::u32string::npos;
  size_t starter = kNone, kept = begin;  // s[begin, kept): the composed text so far
  uint8_t last_class = 0;                // of s[kept - 1]
  for (size_t i = begin; i < s.size(); ++i) {
    const char32_t c = s[i];
    const uint8_t cls = combining_class(c);
    // What was kept after the starter is in canonical order, so the last of it blocks when any does.
    const bool blocked = starter == kNone || (kept != starter + 1 && (last_class == 0 || last_class >= cls));
    if (!blocked) {
      if (const char32_t composite = compose_pair(s[starter], c)) {
        s[starter] = composite;
        continue;
      }
    }
    if (cls == 0) starter = kept;
    last_class = cls;
    s[kept++] = c;
  }
  s.resize(kept);
}

}  // namespace

bool is_bert_control(char32_t cp) { return in_ranges(kControl, cp); }
bool is_bert_whitespace(char32_t cp) { return in_ranges(kWhiteSpace, cp); }
bool is_bert_punctuation(char32_t cp) { return in_ranges(kPunctuation, cp); }
bool is_nonspacing_mark(char32_t cp) { return in_ranges(kNonspacingMark, cp); }
bool is_numeric(char32_t cp) { return in_ranges(kNumeric, cp); }

bool is_bert_chinese_char(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

void append_nfd(std::u32string& out, std::u32string_view text) { append_decomposed(out, text, false); }
void append_nfkd(std::u32string& out, std::u32string_view text) { append_decomposed(out, text, true); }

void append_nfc(std::u32string& out, std::u32string_view text) {
  const size_t begin = out.size();
  append_decomposed(out, text, false);
  compose(out, begin);
}

void append_nfkc(std::u32string& out, std::u32string_view text) {
  const size_t begin = out.size();
  append_decomposed(out, text, true);
  compose(out, begin);
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
