#include "models/tokenizer_tekken.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>
#include <unordered_map>

#include "models/mapped_file.h"
#include "models/tokenizer_bpe.h"
#include "models/tokenizer_precompiled.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int64_t kMaxId = 1 << 24;  // as a tokenizer.json's ids (tokenizer_json_vocab.h)

// Tekkenizer.DEPRECATED_SPECIAL_TOKENS: the special tokens of a file without "special_tokens"
// (v7 and before: Mistral Nemo, Pixtral, Ministral 8B), ids 0..19.
constexpr const char* kDeprecatedSpecials[] = {
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
    "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]"};

struct TekkenConfig {
  std::string pattern;
  int64_t vocab_size = 0;  // default_vocab_size: special tokens + the vocabulary kept
  int64_t n_special = 0;   // default_num_special_tokens
  int version = 0;         // the N of "vN"
};

// obj[key] as an integer in [min, 2^24]; corrupt naming `where` + key otherwise.
Expected<int64_t> integer_field(const json& obj, const char* key, int64_t min, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) return corrupt(where + key + " is missing");
  if (!it->is_number_integer() || it->get<int64_t>() < min || it->get<int64_t>() > kMaxId)
    return corrupt(where + key + " must be an integer in [" + std::to_string(min) + ", 2^24] (got " +
                   it->dump().substr(0, 40) + ")");
  return it->get<int64_t>();
}

// obj[key] as a non-empty string; corrupt naming `where` + key otherwise.
Expected<std::string> string_field(const json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) return corrupt(where + key + " is missing");
  if (!it->is_string() || it->get<std::string>().empty())
    return corrupt(where + key + " must be a non-empty string (got " + it->dump().substr(0, 40) + ")");
  return it->get<std::string>();
}

Expected<TekkenConfig> parse_config(const json& tekken, const std::string& origin) {
  const auto it = tekken.find("config");
  if (it == tekken.end() || !it->is_object()) return corrupt(origin + ": config is missing or not an object");
  const std::string where = origin + ": config.";
  TekkenConfig c;
  BRIGADE_ASSIGN_OR_RETURN(c.pattern, string_field(*it, "pattern", where));
  BRIGADE_ASSIGN_OR_RETURN(c.vocab_size, integer_field(*it, "default_vocab_size", 1, where));
  BRIGADE_ASSIGN_OR_RETURN(c.n_special, integer_field(*it, "default_num_special_tokens", 0, where));
  BRIGADE_ASSIGN_OR_RETURN(const std::string version, string_field(*it, "version", where));
  const char* digits = version.data() + 1;
  const auto [end, ec] = std::from_chars(digits, version.data() + version.size(), c.version);
  if (version[0] != 'v' || ec != std::errc() || end != version.data() + version.size() || c.version < 1)
    return corrupt(where + "version '" + version + "' is not a tokenizer version (v1, v2, v3, v7, v11, v13, ...)");
  if (c.vocab_size - c.n_special < 256)
    return corrupt(where + "default_vocab_size " + std::to_string(c.vocab_size) + " leaves fewer than 256 vocabulary "
                   "tokens after default_num_special_tokens " + std::to_string(c.n_special) +
                   " (the 256 single bytes come first)");
  return c;
}

// The first `n_keep` entries of "vocab" (Tekkenizer's cut), index = rank: rank i at index i,
// ranks 0..255 the single bytes, every token distinct.
Expected<std::vector<std::string>> parse_vocab(const json& tekken, int64_t n_keep, const std::string& origin) {
  const auto it = tekken.find("vocab");
  if (it == tekken.end() || !it->is_array()) return corrupt(origin + ": vocab is missing or not an array");
  if (static_cast<int64_t>(it->size()) < n_keep)
    return corrupt(origin + ": vocab has " + std::to_string(it->size()) + " entries but config.default_vocab_size minus "
                   "config.default_num_special_tokens needs " + std::to_string(n_keep) + " (the file may be truncated)");
  std::vector<std::string> tokens;
  tokens.reserve(static_cast<size_t>(n_keep));
  for (int64_t i = 0; i < n_keep; ++i) {
    const json& entry = (*it)[static_cast<size_t>(i)];
    const std::string where = origin + ": vocab[" + std::to_string(i) + "].";
    if (!entry.is_object()) return corrupt(origin + ": vocab[" + std::to_string(i) + "] is not an object");
    BRIGADE_ASSIGN_OR_RETURN(const int64_t rank, integer_field(entry, "rank", 0, where));
    if (rank != i) return corrupt(where + "rank is " + std::to_string(rank) + ", not its index (ranks must be 0, 1, 2, ... in order)");
    BRIGADE_ASSIGN_OR_RETURN(const std::string b64, string_field(entry, "token_bytes", where));
    std::optional<std::string> bytes = decode_base64_text(b64);
    if (!bytes) return corrupt(where + "token_bytes '" + b64.substr(0, 40) + "' is not base64");
    if (bytes->empty()) return corrupt(where + "token_bytes is empty");
    if (i < 256 && *bytes != std::string(1, static_cast<char>(i)))
      return corrupt(where + "token_bytes must be the single byte " + std::to_string(i) + " (ranks 0..255 are the bytes)");
    tokens.push_back(std::move(*bytes));
  }
  std::unordered_map<std::string_view, int64_t> seen;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto [at, fresh] = seen.emplace(tokens[i], static_cast<int64_t>(i));
    if (!fresh)
      return corrupt(origin + ": vocab[" + std::to_string(i) + "].token_bytes repeats vocab[" + std::to_string(at->second) + "]'s");
  }
  return tokens;
}

// The special tokens' contents, index = id: "special_tokens" (rank = index), else the deprecated
// list for v7 and before; then <SPECIAL_{id}> up to config.default_num_special_tokens.
Expected<std::vector<std::string>> parse_specials(const json& tekken, const TekkenConfig& c, const std::string& origin) {
  std::vector<std::string> names;
  const auto it = tekken.find("special_tokens");
  if (it == tekken.end() || it->is_null()) {
    if (c.version > 7)
      return corrupt(origin + ": special_tokens is missing; a v" + std::to_string(c.version) +
                     " tekken file must list them (only v7 and before use the fixed list)");
    names.assign(std::begin(kDeprecatedSpecials), std::end(kDeprecatedSpecials));
  } else {
    if (!it->is_array()) return corrupt(origin + ": special_tokens is not an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& entry = (*it)[i];
      const std::string where = origin + ": special_tokens[" + std::to_string(i) + "].";
      if (!entry.is_object()) return corrupt(origin + ": special_tokens[" + std::to_string(i) + "] is not an object");
      BRIGADE_ASSIGN_OR_RETURN(const int64_t rank, integer_field(entry, "rank", 0, where));
      if (rank != static_cast<int64_t>(i))
        return corrupt(where + "rank is " + std::to_string(rank) + ", not its index (special token i has id i)");
      BRIGADE_ASSIGN_OR_RETURN(std::string name, string_field(entry, "token_str", where));
      names.push_back(std::move(name));
    }
  }
  if (static_cast<int64_t>(names.size()) > c.n_special)
    return corrupt(origin + ": " + std::to_string(names.size()) + " special tokens but config.default_num_special_tokens is " +
                   std::to_string(c.n_special));
  for (auto i = static_cast<int64_t>(names.size()); i < c.n_special; ++i) names.push_back("<SPECIAL_" + std::to_string(i) + ">");
  std::unordered_map<std::string_view, size_t> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    const auto [at, fresh] = seen.emplace(names[i], i);
    if (!fresh)
      return corrupt(origin + ": special token '" + names[i] + "' (id " + std::to_string(i) + ") repeats id " +
                     std::to_string(at->second) + " (special tokens must be unique)");
  }
  return names;
}

}  // namespace

bool has_tekken_vocabulary(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / kTekkenFile, ec);
}

bool looks_like_tekken(const std::string& path, const nlohmann::json& j) {
  if (fs::path(path).filename().string().find("tekken") != std::string::npos) return true;
  return j.is_object() && !j.contains("model") && j.contains("config") && j.contains("vocab");
}

Expected<TiktokenConversion> convert_tekken(const json& tekken, const std::string& origin) {
  if (!tekken.is_object()) return corrupt(origin + ": not a tekken.json (not a JSON object)");
  BRIGADE_ASSIGN_OR_RETURN(const TekkenConfig c, parse_config(tekken, origin));
  BRIGADE_ASSIGN_OR_RETURN(const std::vector<std::string> tokens, parse_vocab(tekken, c.vocab_size - c.n_special, origin));
  BRIGADE_ASSIGN_OR_RETURN(const std::vector<std::string> specials, parse_specials(tekken, c, origin));
  std::vector<TiktokenSpecial> added;
  added.reserve(specials.size());
  for (size_t i = 0; i < specials.size(); ++i) added.push_back({static_cast<int32_t>(i), specials[i]});
  TiktokenConversion out;
  out.tokenizer = tiktoken_tokenizer_json(tokens, static_cast<int32_t>(c.n_special), added, c.pattern, /*nfc=*/false);
  // No post-processor: encode(add_bos) puts bos_token first, as Tekkenizer.encode(bos=True).
  out.config = json::object();
  for (const auto& [key, name] : {std::pair{"bos_token", "<s>"}, {"eos_token", "</s>"}})
    if (std::find(specials.begin(), specials.end(), name) != specials.end()) out.config[key] = name;
  return out;
}

Expected<std::unique_ptr<Tokenizer>> load_tekken_tokenizer(const json& tekken, const std::string& origin) {
  BRIGADE_ASSIGN_OR_RETURN(TiktokenConversion c, convert_tekken(tekken, origin));
  return load_bpe_tokenizer(c.tokenizer, c.config, origin);
}

Expected<std::unique_ptr<Tokenizer>> load_tekken_tokenizer(const std::string& path) {
  BRIGADE_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return corrupt(path + ": not valid JSON (the file may be truncated)");
  return load_tekken_tokenizer(j, path);
}

}  // namespace brigade
