#include "models/tokenizer_tiktoken.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unordered_map>

#include "models/byte_unicode.h"
#include "models/jinja_value.h"
#include "models/mapped_file.h"
#include "models/pretokenizer.h"
#include "models/tokenizer_bpe.h"
#include "models/tokenizer_precompiled.h"
#include "models/utf8.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int32_t kMaxRank = 1 << 24;  // as a tokenizer.json's ids (tokenizer_json_vocab.h)

// One family: its files, its Python class, and what that class gives tiktoken.Encoding.
struct TiktokenFamily {
  const char* name;             // for messages
  const char* file;             // the ranks file in the model directory
  const char* module;           // auto_map's module ("tokenization_kimi")
  const char* tokenizer_class;  // auto_map's and tokenizer_class's class
  const char* pattern;
  bool nfc;      // tokenize() normalizes the text to NFC first
  bool by_line;  // unique tokens ranked in file order (parse_tiktoken_ranks)
  size_t chunk_chars, max_run_chars;  // encode()'s tiktoken_run_pieces cut; 0: none
  const char* bos;  // the defaults when tokenizer_config.json names none ("": none)
  const char* eos;
  // The special tokens' contents, for ids n_ranks, n_ranks + 1, ...
  Expected<std::vector<std::string>> (*specials)(const json& config, int32_t n_ranks, const std::string& origin);
  // The special tokens encode() puts before the text with add_special_tokens (the class's
  // build_inputs_with_special_tokens); none for most.
  std::vector<const char*> prefix = {};
  // The ranks file shares its name with SentencePiece's (tokenizer.model): claimed only when it
  // holds tiktoken ranks and tokenizer_config.json is beside it.
  bool shared_name = false;
};

std::vector<std::string> with_extras(std::vector<std::string> names) {
  for (int i = 0; i < 205; ++i) names.push_back("<|extra_" + std::to_string(i) + "|>");
  return names;
}

Expected<std::vector<std::string>> hunyuan_specials(const json&, int32_t, const std::string&) {
  return with_extras({"<|endoftext|>", "<|startoftext|>", "<|bos|>", "<|eos|>", "<|pad|>"});
}

Expected<std::vector<std::string>> qwen_specials(const json&, int32_t, const std::string&) {
  return with_extras({"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
}

// ChatGLM4Tokenizer's fixed list after the ranks (glm-4-9b-chat's added_tokens_decoder names the same
// ids).
Expected<std::vector<std::string>> glm4_specials(const json&, int32_t, const std::string&) {
  return std::vector<std::string>{"<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>",
                                  "<|user|>", "<|assistant|>", "<|observation|>", "<|begin_of_image|>",
                                  "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>"};
}

// TikTokenTokenizer: num_reserved_special_tokens (256) + 2 ids after the ranks, each named by
// added_tokens_decoder when it names it, else <|reserved_token_{id}|>.
Expected<std::vector<std::string>> kimi_specials(const json& config, int32_t n_ranks, const std::string& origin) {
  constexpr int32_t kCount = 258;
  std::vector<std::string> names;
  for (int32_t i = 0; i < kCount; ++i) names.push_back("<|reserved_token_" + std::to_string(n_ranks + i) + "|>");
  const json decoder = config.value("added_tokens_decoder", json::object());
  if (!decoder.is_object()) return corrupt(origin + ": added_tokens_decoder is not an object");
  for (const auto& [key, entry] : decoder.items()) {
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < n_ranks || id >= n_ranks + kCount)
      return corrupt(origin + ": added_tokens_decoder id '" + key + "' is not a special id of this vocabulary [" +
                     std::to_string(n_ranks) + ", " + std::to_string(n_ranks + kCount) + ")");
    if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string() ||
        entry["content"].get<std::string>().empty())
      return corrupt(origin + ": added_tokens_decoder entry " + key + " has no content");
    names[static_cast<size_t>(id - n_ranks)] = entry["content"].get<std::string>();
  }
  return names;
}

const std::vector<TiktokenFamily>& families() {
  static const std::vector<TiktokenFamily> f = {
      {"Kimi K2", "tiktoken.model", "tokenization_kimi", "TikTokenTokenizer", kKimiK2Pattern, false, false, 400000, 25000, "[BOS]",
       "[EOS]", kimi_specials},
      {"Hunyuan", "hy.tiktoken", "tokenization_hy", "HYTokenizer", kQwen2Pattern, true, true, 0, 0, "<|bos|>", "<|eos|>",
       hunyuan_specials},
      {"Qwen (v1)", "qwen.tiktoken", "tokenization_qwen", "QWenTokenizer", kQwen2Pattern, true, false, 0, 0, "",
       "<|endoftext|>", qwen_specials},
      {"GLM-4", "tokenizer.model", "tokenization_chatglm", "ChatGLM4Tokenizer", kLlama3Pattern, false, false, 0, 0, "",
       "<|endoftext|>", glm4_specials, {"[gMASK]", "<sop>"}, true},
  };
  return f;
}

std::string supported_classes() {
  std::string out;
  for (const auto& f : families())
    out += std::string(out.empty() ? "" : ", ") + f.module + "." + f.tokenizer_class + " (" + f.name + ", " + f.file + ")";
  return out;
}

// The family tokenizer_config.json names: auto_map's AutoTokenizer "module.Class" when present
// (a class name alone, TikTokenTokenizer, is too generic to trust), else tokenizer_class.
Expected<const TiktokenFamily*> find_family(const json& config, const std::string& origin) {
  const json class_name = config.value("tokenizer_class", json());
  std::string module, cls = class_name.is_string() ? class_name.get<std::string>() : "";
  const json auto_map = config.value("auto_map", json::object());
  if (auto_map.is_object() && auto_map.contains("AutoTokenizer")) {
    const json& a = auto_map["AutoTokenizer"];
    const json& slow = a.is_array() && !a.empty() ? a[0] : a;
    const std::string target = slow.is_string() ? slow.get<std::string>() : "";
    const size_t dot = target.rfind('.');
    if (dot == std::string::npos) return corrupt(origin + ": auto_map.AutoTokenizer names no module.Class");
    module = target.substr(0, dot);
    cls = target.substr(dot + 1);
  }
  for (const auto& f : families())
    if (cls == f.tokenizer_class && (module.empty() || module == f.module)) return &f;
  const std::string named = !module.empty() ? "auto_map tokenizer '" + module + "." + cls + "'"
                            : !cls.empty()  ? "tokenizer_class '" + cls + "'"
                                            : "no tokenizer_class";
  return unsupported(origin + ": a tiktoken vocabulary with " + named +
                     " is not supported (its split pattern and special tokens live in its Python code); supported: " +
                     supported_classes());
}

// tokenizer_config.json's bos_token / eos_token (a string or {"content": ...}), else `fallback`.
std::string named_token(const json& config, const char* key, const char* fallback) {
  const json v = config.value(key, json());
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return fallback;
}

// One line's "base64 rank" fields; false when it has not exactly two.
bool split_fields(std::string_view line, std::string_view& token, std::string_view& rank) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && space(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !space(line[i])) ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  if (fields.size() != 2) return false;
  token = fields[0];
  rank = fields[1];
  return true;
}

struct RankLine {
  std::string token;
  int64_t rank = 0;
};

// One non-blank line of a ranks file; corrupt, prefixed with `where`, when it is malformed.
Expected<RankLine> parse_rank_line(std::string_view line, const std::string& where) {
  std::string_view b64, rank_text;
  if (!split_fields(line, b64, rank_text)) return corrupt(where + "expected 'base64-token rank'");
  const std::optional<std::string> token = decode_base64_text(b64);
  if (!token) return corrupt(where + "'" + std::string(b64.substr(0, 40)) + "' is not base64");
  if (token->empty()) return corrupt(where + "the token is empty");
  RankLine out{*token, -1};
  const auto [end, ec] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), out.rank);
  if (ec != std::errc() || end != rank_text.data() + rank_text.size() || out.rank < 0 || out.rank >= kMaxRank)
    return corrupt(where + "rank '" + std::string(rank_text.substr(0, 20)) + "' is not an integer in [0, 2^24)");
  return out;
}

Expected<json> read_json_object(const std::string& path) {
  BRIGADE_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return corrupt(path + ": not a JSON object");
  return j;
}

// Kimi K2 defines 258 special ids after its 163,584 ranks, but its embedding has 163,840 rows:
// the reserved fillers past config.json's vocab_size are dropped, as llama.cpp's converter drops
// every id past it (a named special token there stays, for check_tokenizer_fits to refuse).
Status trim_to_model_vocab(const std::string& dir, int32_t n_ranks, std::vector<std::string>& specials) {
  const fs::path path = fs::path(dir) / "config.json";
  if (!fs::exists(path)) return Status::ok();
  BRIGADE_ASSIGN_OR_RETURN(json config, read_json_object(path.string()));
  const json n_vocab = config.value("vocab_size", json());
  if (!n_vocab.is_number_integer()) return Status::ok();
  while (!specials.empty() && n_ranks + static_cast<int64_t>(specials.size()) > n_vocab.get<int64_t>() &&
         specials.back().rfind("<|reserved_token_", 0) == 0)
    specials.pop_back();
  return Status::ok();
}

// bos_token / eos_token for load_bpe_tokenizer: tokenizer_config.json's, else the family's; each
// must be a special token (the Python classes look them up there).
Expected<json> bos_eos_config(const json& config, const TiktokenFamily& family, const std::vector<std::string>& specials,
                              const std::string& origin) {
  json out = json::object();
  for (const auto& [key, fallback] : {std::pair{"bos_token", family.bos}, {"eos_token", family.eos}}) {
    const std::string name = named_token(config, key, fallback);
    if (name.empty()) continue;
    if (std::find(specials.begin(), specials.end(), name) == specials.end())
      return corrupt(origin + ": " + key + " '" + name + "' is not one of the vocabulary's special tokens");
    out[key] = name;
  }
  return out;
}

// A tokenizer that encodes each of tiktoken_run_pieces' pieces alone with `inner` (what Kimi's
// TikTokenTokenizer.encode does with tiktoken); everything else is inner's.
class RunCutTokenizer final : public Tokenizer {
 public:
  RunCutTokenizer(std::unique_ptr<Tokenizer> inner, size_t chunk_chars, size_t max_run)
      : inner_(std::move(inner)), chunk_chars_(chunk_chars), max_run_(max_run) {}

  // add_bos adds nothing: the conversion's post-processor holds no special tokens (the Python
  // classes add none), so encode(piece, false) per piece is the whole encoding.
  Expected<std::vector<int32_t>> encode(std::string_view text, bool /*add_bos*/) const override {
    if (text.size() <= std::min(max_run_, chunk_chars_)) return inner_->encode(text, false);  // too short to cut
    const size_t bad = utf8_first_invalid(text);
    if (bad != text.size())
      return invalid_argument("text is not valid UTF-8 (first bad byte at offset " + std::to_string(bad) + ")");
    std::vector<int32_t> out;
    for (std::string_view piece : tiktoken_run_pieces(text, chunk_chars_, max_run_)) {
      BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, inner_->encode(piece, false));
      out.insert(out.end(), ids.begin(), ids.end());
    }
    return out;
  }
  std::string token_to_piece(int32_t id) const override { return inner_->token_to_piece(id); }
  std::string token_string(int32_t id) const override { return inner_->token_string(id); }
  Expected<std::string> decode(std::span<const int32_t> ids, bool skip_special) const override {
    return inner_->decode(ids, skip_special);
  }
  bool is_special(int32_t id) const override { return inner_->is_special(id); }
  int vocab_size() const override { return inner_->vocab_size(); }
  int32_t bos_id() const override { return inner_->bos_id(); }
  const std::vector<int32_t>& eos_ids() const override { return inner_->eos_ids(); }

 private:
  std::unique_ptr<Tokenizer> inner_;
  size_t chunk_chars_, max_run_;
};

}  // namespace

std::vector<std::string_view> tiktoken_run_pieces(std::string_view text, size_t chunk_chars, size_t max_run) {
  std::vector<std::string_view> pieces;
  for (size_t pos = 0; pos < text.size();) {  // one chunk; its run count starts afresh
    size_t start = pos, run = 0;
    bool space = false;
    for (size_t chars = 0; chars < chunk_chars && pos < text.size(); ++chars) {
      const size_t n = std::max<size_t>(utf8_sequence_length(text, pos), 1);
      const bool now = jinja::is_py_space(decode_utf8(text, pos, n));
      if (chars == 0) space = now;
      if (now != space) {
        run = 1;
        space = now;
      } else if (++run > max_run) {
        pieces.push_back(text.substr(start, pos - start));
        start = pos;
        run = 1;
      }
      pos += n;
    }
    pieces.push_back(text.substr(start, pos - start));
  }
  return pieces;
}

Expected<std::vector<std::string>> parse_tiktoken_ranks(std::string_view text, bool by_line, const std::string& origin) {
  std::vector<std::string> tokens;
  std::vector<int64_t> line_of;  // rank -> the line that gave it (0: none yet)
  std::unordered_map<std::string, int64_t> seen;  // token -> its line
  int64_t n_line = 0;
  // A rank beyond the line count cannot be dense; refused before it sizes anything.
  const auto n_lines = static_cast<int64_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++n_line;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = origin + " line " + std::to_string(n_line) + ": ";
    BRIGADE_ASSIGN_OR_RETURN(RankLine entry, parse_rank_line(line, where));
    auto [it, fresh] = seen.emplace(entry.token, n_line);
    if (by_line) {  // HYTokenizer: the rank column is ignored, repeats skipped
      if (fresh) tokens.push_back(std::move(entry.token));
      continue;
    }
    const int64_t rank = entry.rank;
    if (!fresh) return corrupt(where + "the token repeats line " + std::to_string(it->second) + "'s");
    if (rank >= n_lines)
      return corrupt(where + "rank " + std::to_string(rank) + " is beyond the file's " + std::to_string(n_lines) +
                     " lines (ranks must be 0..n-1)");
    if (rank >= static_cast<int64_t>(tokens.size())) {
      tokens.resize(static_cast<size_t>(rank) + 1);
      line_of.resize(static_cast<size_t>(rank) + 1, 0);
    }
    if (line_of[static_cast<size_t>(rank)] != 0)
      return corrupt(where + "rank " + std::to_string(rank) + " repeats line " +
                     std::to_string(line_of[static_cast<size_t>(rank)]) + "'s");
    line_of[static_cast<size_t>(rank)] = n_line;
    tokens[static_cast<size_t>(rank)] = std::move(entry.token);
  }
  if (tokens.empty()) return corrupt(origin + ": no ranks (empty file)");
  // The special tokens take the ids after the last rank, so a gap would shift them.
  for (size_t r = 0; r < line_of.size(); ++r)
    if (line_of[r] == 0)
      return corrupt(origin + ": rank " + std::to_string(r) + " is missing (ranks must be 0.." +
                     std::to_string(tokens.size() - 1) + "; the file may be truncated or edited)");
  return tokens;
}

std::vector<size_t> tiktoken_merge_splits(const std::vector<std::string>& tokens) {
  std::unordered_map<std::string_view, int32_t> rank;
  rank.reserve(tokens.size());
  for (size_t r = 0; r < tokens.size(); ++r) rank.emplace(tokens[r], static_cast<int32_t>(r));
  std::vector<size_t> splits(tokens.size(), 0);
  std::vector<size_t> starts;  // the parts' first bytes; a part ends where the next starts
  for (size_t r = 0; r < tokens.size(); ++r) {
    const std::string_view t = tokens[r];
    if (t.size() < 2) continue;
    starts.clear();
    for (size_t i = 0; i < t.size(); ++i) starts.push_back(i);
    auto end_of = [&](size_t k) { return k + 1 < starts.size() ? starts[k + 1] : t.size(); };
    while (starts.size() > 2) {
      // The adjacent pair whose joined bytes rank lowest, the leftmost on ties (tiktoken's byte_pair_merge).
      int32_t best = std::numeric_limits<int32_t>::max();
      size_t best_k = 0;
      for (size_t k = 0; k + 1 < starts.size(); ++k) {
        auto it = rank.find(t.substr(starts[k], end_of(k + 1) - starts[k]));
        if (it != rank.end() && it->second < best) {
          best = it->second;
          best_k = k;
        }
      }
      if (best == std::numeric_limits<int32_t>::max()) break;  // stuck: no pair ranks
      starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(best_k) + 1);
    }
    // Two parts left: both tokens (a part of one byte only when that byte is one).
    if (starts.size() == 2 && rank.count(t.substr(0, starts[1])) && rank.count(t.substr(starts[1]))) splits[r] = starts[1];
  }
  return splits;
}

json tiktoken_tokenizer_json(const std::vector<std::string>& tokens, int32_t first_rank_id,
                            const std::vector<TiktokenSpecial>& specials, const std::string& pattern, bool nfc) {
  json vocab = json::object(), merges = json::array(), added = json::array();
  for (size_t r = 0; r < tokens.size(); ++r) vocab[bytes_to_unicode_string(tokens[r])] = first_rank_id + static_cast<int64_t>(r);
  const std::vector<size_t> splits = tiktoken_merge_splits(tokens);
  for (size_t r = 0; r < tokens.size(); ++r)
    if (splits[r] > 0)
      merges.push_back({bytes_to_unicode_string(std::string_view(tokens[r]).substr(0, splits[r])),
                        bytes_to_unicode_string(std::string_view(tokens[r]).substr(splits[r]))});
  for (const TiktokenSpecial& s : specials)
    added.push_back({{"id", s.id}, {"content", s.content}, {"special", true},
                     {"normalized", nfc}});  // NFC first, specials matched in its output
  json steps = json::array();
  steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}});
  steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  return {{"model", {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", std::move(merges)}, {"ignore_merges", true}}},
          {"added_tokens", std::move(added)},
          {"normalizer", nfc ? json{{"type", "NFC"}} : json()},
          {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}}},
          {"decoder", {{"type", "ByteLevel"}}}};
}

bool looks_like_tiktoken_ranks(std::string_view head) {
  const size_t nl = head.find('\n');
  return nl != std::string_view::npos && parse_rank_line(head.substr(0, nl), "").has_value();
}

bool has_tiktoken_vocabulary(const std::string& dir) {
  std::error_code ec;
  for (const auto& f : families()) {
    const fs::path file = fs::path(dir) / f.file;
    if (!fs::exists(file, ec)) continue;
    if (!f.shared_name) return true;
    if (!fs::exists(fs::path(dir) / "tokenizer_config.json", ec)) continue;
    std::ifstream in(file, std::ios::binary);
    std::string head(256, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    if (looks_like_tiktoken_ranks(head)) return true;
  }
  return false;
}

Expected<TiktokenConversion> convert_tiktoken_directory(const std::string& dir) {
  const std::string config_path = (fs::path(dir) / "tokenizer_config.json").string();
  if (!fs::exists(config_path))
    return not_found(dir + ": a tiktoken vocabulary needs tokenizer_config.json to name its tokenizer class; supported: " +
                     supported_classes());
  BRIGADE_ASSIGN_OR_RETURN(json config, read_json_object(config_path));
  BRIGADE_ASSIGN_OR_RETURN(const TiktokenFamily* family, find_family(config, config_path));
  const std::string ranks_path = (fs::path(dir) / family->file).string();
  if (!fs::exists(ranks_path))
    return not_found(dir + ": tokenizer_config.json names " + family->tokenizer_class + " (" + family->name +
                     ") but there is no " + family->file);
  BRIGADE_ASSIGN_OR_RETURN(std::string ranks_text, read_text_file(ranks_path));
  BRIGADE_ASSIGN_OR_RETURN(std::vector<std::string> tokens, parse_tiktoken_ranks(ranks_text, family->by_line, ranks_path));
  const auto n_ranks = static_cast<int32_t>(tokens.size());
  BRIGADE_ASSIGN_OR_RETURN(std::vector<std::string> specials, family->specials(config, n_ranks, config_path));
  BRIGADE_RETURN_IF_ERROR(trim_to_model_vocab(dir, n_ranks, specials));
  TiktokenConversion out;
  BRIGADE_ASSIGN_OR_RETURN(out.config, bos_eos_config(config, *family, specials, config_path));
  std::vector<TiktokenSpecial> added;
  for (size_t i = 0; i < specials.size(); ++i) added.push_back({n_ranks + static_cast<int32_t>(i), specials[i]});
  out.tokenizer = tiktoken_tokenizer_json(tokens, 0, added, family->pattern, family->nfc);
  out.chunk_chars = family->chunk_chars;
  out.max_run_chars = family->max_run_chars;
  // The Python classes add no special tokens (PreTrainedTokenizer's default), but for GLM-4's prefix
  // ([gMASK] <sop>, before the text and before a pair; ChatGLM4Tokenizer's pair form also asks for
  // an <eos> it does not have, and raises).
  json single = json::array(), pair = json::array(), special = json::object();
  for (const char* p : family->prefix) {
    const auto at = std::find(specials.begin(), specials.end(), p);
    const int32_t id = n_ranks + static_cast<int32_t>(at - specials.begin());
    single.push_back({{"SpecialToken", {{"id", p}, {"type_id", 0}}}});
    pair.push_back({{"SpecialToken", {{"id", p}, {"type_id", 0}}}});
    special[p] = {{"id", p}, {"ids", {id}}, {"tokens", {p}}};
  }
  const json sequence_a = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  single.push_back(sequence_a);
  pair.push_back(sequence_a);
  pair.push_back({{"Sequence", {{"id", "B"}, {"type_id", 1}}}});
  out.tokenizer["post_processor"] = {{"type", "TemplateProcessing"},
                                     {"single", std::move(single)},
                                     {"pair", std::move(pair)},
                                     {"special_tokens", std::move(special)}};
  return out;
}

Expected<std::unique_ptr<Tokenizer>> load_tiktoken_tokenizer(const std::string& dir) {
  BRIGADE_ASSIGN_OR_RETURN(TiktokenConversion c, convert_tiktoken_directory(dir));
  BRIGADE_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, load_bpe_tokenizer(c.tokenizer, c.config, dir));
  if (c.max_run_chars == 0) return tok;
  return std::unique_ptr<Tokenizer>(std::make_unique<RunCutTokenizer>(std::move(tok), c.chunk_chars, c.max_run_chars));
}

}  // namespace brigade
