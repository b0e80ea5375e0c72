#include "models/tokenizer_spm.h"

#include <algorithm>
#include <cstring>
#include <queue>
#include <unordered_map>

#include "models/added_token_matcher.h"
#include "models/mapped_file.h"
#include "models/utf8.h"

namespace brigade {
namespace {

constexpr const char* kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK, "▁"

// Spaces -> "▁", with one "▁" first when `prefix`.
std::string escape_spaces(std::string_view text, bool prefix = false) {
  std::string out = prefix ? kSpace : "";
  for (char ch : text) {
    if (ch == ' ') out += kSpace;
    else out += ch;
  }
  return out;
}

// "<0xAB>" -> 0xAB, or -1.
int parse_byte_piece(const std::string& p) {
  if (p.size() != 6 || p.compare(0, 3, "<0x") != 0 || p[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char ch = p[static_cast<size_t>(i)];
    const int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

class SpmTokenizer final : public Tokenizer {
 public:
  Status init(SpmVocab vocab, const std::string& origin);

  Expected<std::vector<int32_t>> encode(std::string_view text, bool add_bos) const override;
  std::string token_to_piece(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? text_[static_cast<size_t>(id)] : std::string();
  }
  std::string token_string(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? v_.pieces[static_cast<size_t>(id)] : std::string();
  }
  // SentencePiece drops the space that add_space_prefix put before the first piece.
  Expected<std::string> decode(std::span<const int32_t> ids, bool skip_special) const override {
    BRIGADE_ASSIGN_OR_RETURN(std::string s, Tokenizer::decode(ids, skip_special));
    if (v_.add_space_prefix && !s.empty() && s[0] == ' ') s.erase(0, 1);
    return s;
  }
  bool is_special(int32_t id) const override {
    return id >= 0 && id < vocab_size() && v_.types[static_cast<size_t>(id)] == SpmTokenType::control;
  }
  int vocab_size() const override { return static_cast<int>(v_.pieces.size()); }
  int32_t bos_id() const override { return v_.bos_id; }
  const std::vector<int32_t>& eos_ids() const override { return eos_; }

 private:
  void encode_text(const std::string& escaped, std::vector<int32_t>& out) const;
  void encode_merges(std::string_view escaped, std::vector<int32_t>& out) const;
  void emit(std::string_view symbol, std::vector<int32_t>& out) const;

  SpmVocab v_;
  std::vector<std::string> text_;  // id -> bytes as decoded ("▁" -> ' ', <0xXX> -> the byte)
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<std::string, int32_t> merge_ranks_;  // "a b" -> rank (merges mode)
  std::vector<int32_t> specials_;  // control/user_defined ids matched in text
  AddedTokenMatcher special_matcher_;  // over specials_' pieces, index = position in specials_
  std::array<int32_t, 256> byte_ids_{};
  std::vector<int32_t> eos_;
};

Status SpmTokenizer::init(SpmVocab vocab, const std::string& origin) {
  v_ = std::move(vocab);
  const size_t n = v_.pieces.size();
  if (n == 0 || v_.scores.size() != n || v_.types.size() != n)
    return corrupt(origin + ": vocabulary has " + std::to_string(n) + " pieces, " + std::to_string(v_.scores.size()) +
                   " scores and " + std::to_string(v_.types.size()) + " token types (need the same, > 0)");
  for (int32_t id : {v_.bos_id, v_.eos_id, v_.unk_id})
    if (id >= static_cast<int32_t>(n)) return corrupt(origin + ": special token id " + std::to_string(id) + " is outside the vocabulary");
  byte_ids_.fill(-1);
  text_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& p = v_.pieces[i];
    ids_.emplace(p, static_cast<int32_t>(i));
    const int b = v_.types[i] == SpmTokenType::byte ? parse_byte_piece(p) : -1;
    if (b >= 0) {
      byte_ids_[static_cast<size_t>(b)] = static_cast<int32_t>(i);
      text_[i] = std::string(1, static_cast<char>(b));
    } else {
      std::string t;
      for (size_t k = 0; k < p.size(); ++k) {
        if (p.compare(k, 3, kSpace) == 0) { t += ' '; k += 2; } else { t += p[k]; }
      }
      text_[i] = std::move(t);
    }
    const bool unknown_matched = !v_.merges.empty() && v_.types[i] == SpmTokenType::unknown;
    if ((v_.types[i] == SpmTokenType::control || v_.types[i] == SpmTokenType::user_defined || unknown_matched) && !p.empty())
      specials_.push_back(static_cast<int32_t>(i));
  }
  std::vector<std::string_view> special_pieces;
  for (int32_t id : specials_) special_pieces.emplace_back(v_.pieces[static_cast<size_t>(id)]);
  special_matcher_ = AddedTokenMatcher(special_pieces);  // the longest match; a repeated piece: its first id
  if (v_.eos_id >= 0) eos_ = {v_.eos_id};
  for (int32_t id : v_.eos_ids)
    if (id < 0 || id >= static_cast<int32_t>(n)) return corrupt(origin + ": end-of-generation id " + std::to_string(id) + " is outside the vocabulary");
  if (!v_.eos_ids.empty()) eos_ = v_.eos_ids;
  for (size_t r = 0; r < v_.merges.size(); ++r) {
    const std::string& m = v_.merges[r];
    if (m.find(' ', 1) == std::string::npos) return corrupt(origin + ": merge #" + std::to_string(r) + " '" + m + "' is not two pieces separated by a space");
    merge_ranks_.emplace(m, static_cast<int32_t>(r));  // the first of a repeated merge keeps its rank
  }
  return Status::ok();
}

// A final symbol: its piece when the vocabulary has it, else its bytes as byte tokens.
void SpmTokenizer::emit(std::string_view symbol, std::vector<int32_t>& out) const {
  if (auto it = ids_.find(std::string(symbol)); it != ids_.end()) {
    out.push_back(it->second);
    return;
  }
  for (char ch : symbol) {
    const int32_t b = byte_ids_[static_cast<uint8_t>(ch)];
    if (b >= 0) out.push_back(b);
    else if (v_.unk_id >= 0) out.push_back(v_.unk_id);
  }
}

void SpmTokenizer::encode_text(const std::string& s, std::vector<int32_t>& out) const {
  struct Sym { size_t begin, len; int prev, next; };
  struct Pair {
    float score; int left; size_t len;
    bool operator<(const Pair& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  std::vector<Sym> syms;
  for (size_t i = 0; i < s.size();) {
    const size_t len = std::min(std::max<size_t>(utf8_sequence_length(s, i), 1), s.size() - i);
    const int idx = static_cast<int>(syms.size());
    syms.push_back({i, len, idx - 1, i + len < s.size() ? idx + 1 : -1});
    i += len;
  }
  std::priority_queue<Pair> queue;
  auto offer = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const Sym& a = syms[static_cast<size_t>(l)];
    const size_t len = a.len + syms[static_cast<size_t>(r)].len;
    if (!merge_ranks_.empty()) {  // merges mode: the pair's rank, lowest first
      const Sym& b = syms[static_cast<size_t>(r)];
      auto m = merge_ranks_.find(s.substr(a.begin, a.len) + ' ' + s.substr(b.begin, b.len));
      if (m != merge_ranks_.end()) queue.push({-static_cast<float>(m->second), l, len});
      return;
    }
    auto it = ids_.find(s.substr(a.begin, len));
    if (it == ids_.end()) return;
    queue.push({v_.scores[static_cast<size_t>(it->second)], l, len});
  };
  for (size_t i = 1; i < syms.size(); ++i) offer(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Sym& left = syms[static_cast<size_t>(p.left)];
    if (left.len == 0 || left.next < 0) continue;
    Sym& right = syms[static_cast<size_t>(left.next)];
    if (right.len == 0 || left.len + right.len != p.len) continue;  // stale: a side merged since
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) syms[static_cast<size_t>(right.next)].prev = p.left;
    offer(left.prev, p.left);
    offer(p.left, left.next);
  }
  for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[static_cast<size_t>(i)].next)
    emit(std::string_view(s).substr(syms[static_cast<size_t>(i)].begin, syms[static_cast<size_t>(i)].len), out);
}

// Merges mode: newline runs apart from the rest (llama.cpp's "[^\n]+|[\n]+" split for gemma4),
// a run that is a piece taken whole (llama.cpp's fix for Gemma 4's newline tokens), the rest BPE.
void SpmTokenizer::encode_merges(std::string_view s, std::vector<int32_t>& out) const {
  for (size_t i = 0; i < s.size();) {
    const bool newlines = s[i] == '\n';
    size_t j = i;
    while (j < s.size() && (s[j] == '\n') == newlines) ++j;
    const std::string word(s.substr(i, j - i));
    if (auto it = newlines ? ids_.find(word) : ids_.end(); it != ids_.end()) out.push_back(it->second);
    else encode_text(word, out);
    i = j;
  }
}

Expected<std::vector<int32_t>> SpmTokenizer::encode(std::string_view text, bool add_bos) const {
  const size_t bad = utf8_first_invalid(text);
  if (bad != text.size())
    return invalid_argument("text is not valid UTF-8 (first bad byte at offset " + std::to_string(bad) + ")");
  std::vector<int32_t> out;
  if (add_bos && v_.bos_id >= 0) out.push_back(v_.bos_id);
  bool after_special = true;  // the text start counts as one: the space prefix goes there
  auto raw = [&](std::string_view seg) {
    if (seg.empty()) return;
    const std::string escaped = escape_spaces(seg, v_.add_space_prefix && after_special);
    if (v_.merges.empty()) encode_text(escaped, out);
    else encode_merges(escaped, out);
    after_special = false;
  };
  size_t segment = 0;
  for (AddedTokenMatcher::Match m; (m = special_matcher_.find(text, segment)).index >= 0;) {
    raw(text.substr(segment, m.begin - segment));
    out.push_back(specials_[static_cast<size_t>(m.index)]);
    after_special = true;
    segment = m.begin + m.length;
  }
  raw(text.substr(segment));
  if (add_bos && v_.add_eos && v_.eos_id >= 0) out.push_back(v_.eos_id);
  return out;
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> make_spm_tokenizer(SpmVocab vocab, const std::string& origin) {
  auto tok = std::make_unique<SpmTokenizer>();
  BRIGADE_RETURN_IF_ERROR(tok->init(std::move(vocab), origin));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

Expected<std::unique_ptr<Tokenizer>> load_llama2c_tokenizer(const std::string& path) {
  BRIGADE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  uint64_t pos = 0;
  auto read_i32 = [&](int32_t& v, const std::string& what) -> Status {
    BRIGADE_ASSIGN_OR_RETURN(auto b, file->bytes(pos, 4, what));
    std::memcpy(&v, b.data(), 4);
    pos += 4;
    return Status::ok();
  };
  int32_t max_len = 0;
  BRIGADE_RETURN_IF_ERROR(read_i32(max_len, "max_token_length"));
  if (max_len <= 0 || max_len > 1024) return corrupt(path + ": max_token_length " + std::to_string(max_len) + " is implausible (not a llama2.c tokenizer.bin?)");
  SpmVocab v;
  while (pos < file->size()) {
    const std::string what = "token #" + std::to_string(v.pieces.size());
    int32_t score_bits = 0, len = 0;
    BRIGADE_RETURN_IF_ERROR(read_i32(score_bits, what));
    BRIGADE_RETURN_IF_ERROR(read_i32(len, what));
    if (len < 0 || len > max_len) return corrupt(path + ": " + what + " has length " + std::to_string(len) + " (max " + std::to_string(max_len) + ")");
    BRIGADE_ASSIGN_OR_RETURN(auto b, file->bytes(pos, static_cast<uint64_t>(len), what));
    pos += static_cast<uint64_t>(len);
    float score = 0;
    std::memcpy(&score, &score_bits, 4);
    const std::string piece(reinterpret_cast<const char*>(b.data()), b.size());
    const int32_t id = static_cast<int32_t>(v.pieces.size());
    v.types.push_back(id == 0 ? SpmTokenType::unknown : id <= 2 ? SpmTokenType::control
                      : parse_byte_piece(piece) >= 0 ? SpmTokenType::byte : SpmTokenType::normal);
    v.pieces.push_back(v.types.back() == SpmTokenType::normal ? escape_spaces(piece) : piece);
    v.scores.push_back(score);
  }
  if (v.pieces.size() < 3) return corrupt(path + ": fewer than 3 tokens (needs <unk>, <s>, </s>)");
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  return make_spm_tokenizer(std::move(v), path);
}

}  // namespace brigade
