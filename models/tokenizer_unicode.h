// The Unicode classes and mappings of Hugging Face tokenizers' BertNormalizer and
// BertPreTokenizer (the WordPiece tokenizers of BERT-family checkpoints), of its NFD, NFC, NFKD
// and NFKC normalizers and of its Digits pre-tokenizer: Python's unicodedata, corrected to the
// library's own tables where they are of another Unicode version (its normalization tables are
// older than Python's, its is_numeric and lowercase newer; scripts/make_unicode_tables.py writes
// tokenizer_unicode_tables.inc).
#pragma once

#include <cstdint>
#include <string>

namespace brigade {

// What clean_text removes: control and format characters (C* but unassigned), U+0000, U+FFFD.
// \t \n \r are whitespace, not control.
bool is_bert_control(char32_t cp);
// Unicode White_Space (Rust's char::is_whitespace).
bool is_bert_whitespace(char32_t cp);
// ASCII 33-47, 58-64, 91-96, 123-126 and general category P*: each is a word of its own.
bool is_bert_punctuation(char32_t cp);
// The CJK ideograph blocks handle_chinese_chars puts spaces around (HF's is_chinese_char).
bool is_bert_chinese_char(char32_t cp);
// General category Mn, which strip_accents drops after NFD.
bool is_nonspacing_mark(char32_t cp);

// Rust's char::is_numeric (general category Nd, Nl or No), where the Digits pre-tokenizer splits.
bool is_numeric(char32_t cp);

// Appends the NFD (canonical decomposition, then canonical ordering of combining marks) of `text`.
void append_nfd(std::u32string& out, std::u32string_view text);
// Appends the NFKD (compatibility decomposition, then canonical ordering) of `text`.
void append_nfkd(std::u32string& out, std::u32string_view text);
// Appends the NFC of `text`: its NFD, then canonical composition (UAX #15: each character joins
// the last starter when they have a primary composite and no character between blocks it;
// composition exclusions never form; Hangul L V and LV T compose algorithmically).
void append_nfc(std::u32string& out, std::u32string_view text);
// Appends the NFKC of `text`: its NFKD, then canonical composition.
void append_nfkc(std::u32string& out, std::u32string_view text);
// Appends the full lowercase mapping of cp (one to three code points; Rust's char::to_lowercase,
// with no context: a final capital sigma is σ, as in Hugging Face tokenizers).
void append_lowercase(std::u32string& out, char32_t cp);

}  // namespace brigade
