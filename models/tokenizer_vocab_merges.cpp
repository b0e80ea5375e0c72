#include "models/tokenizer_vocab_merges.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/mapped_file.h"
#include "models/tokenizer_bpe.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A JSON object file of `dir`, or null when the file is absent.
Expected<json> read_object(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return json();
  BRIGADE_ASSIGN_OR_RETURN(std::string text, read_text_file(path.string()));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return corrupt(path.string() + ": not a JSON object");
  return j;
}

// A boolean under `key` of `obj`, or `fallback` where absent or not a boolean (null).
bool flag(const json& obj, const char* key, bool fallback) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// A special token's text as the configs write it: "<|endoftext|>" or {"content": "<|endoftext|>", ...}.
std::string token_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return {};
}

}  // namespace

bool has_vocab_merges_files(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / "vocab.json", ec) && fs::exists(fs::path(dir) / "merges.txt", ec);
}

Expected<std::unique_ptr<Tokenizer>> load_vocab_merges_tokenizer(const std::string& dir) {
  const fs::path vocab_path = fs::path(dir) / "vocab.json", merges_path = fs::path(dir) / "merges.txt";
  BRIGADE_ASSIGN_OR_RETURN(json vocab, read_object(vocab_path));
  int64_t next_id = 0;
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0)
      return corrupt(vocab_path.string() + ": token '" + token + "' has id " + id.dump() + ", not an integer >= 0");
    next_id = std::max(next_id, id.get<int64_t>() + 1);
  }
  BRIGADE_ASSIGN_OR_RETURN(std::string merges_text, read_text_file(merges_path.string()));
  json merges = json::array();
  std::istringstream lines(merges_text);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (n == 1 && line.starts_with("#version"))) continue;  // the header GPT-2's file starts with
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string::npos || space + 1 == line.size() || line.find(' ', space + 1) != std::string::npos)
      return corrupt(merges_path.string() + ": line " + std::to_string(n) + " is not two tokens separated by one space: '" +
                     line + "'");
    merges.push_back(line);
  }
  BRIGADE_ASSIGN_OR_RETURN(json config, read_object(fs::path(dir) / "tokenizer_config.json"));
  BRIGADE_ASSIGN_OR_RETURN(json special_map, read_object(fs::path(dir) / "special_tokens_map.json"));
  if (config.is_null()) config = json::object();
  // The special tokens: tokenizer_config.json's, else special_tokens_map.json's.
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"})
    if (!config.contains(key) && special_map.is_object() && special_map.contains(key)) config[key] = special_map[key];
  // Added tokens: added_tokens_decoder's, then the named special tokens (transformers registers
  // them as added tokens: matched whole, never split), appended to the vocabulary where absent.
  std::map<int64_t, json> added;
  if (auto it = config.find("added_tokens_decoder"); it != config.end() && it->is_object()) {
    for (const auto& [id_text, t] : it->items()) {
      int64_t id = -1;  // the key: a whole decimal id
      const char* end = id_text.data() + id_text.size();
      if (const auto r = std::from_chars(id_text.data(), end, id); r.ec != std::errc() || r.ptr != end) id = -1;
      const std::string content = token_text(t);
      if (id < 0 || content.empty())
        return corrupt(dir + "/tokenizer_config.json: added_tokens_decoder entry '" + id_text + "' is not an id with a content");
      added[id] = {{"id", id}, {"content", content}, {"special", t.is_object() ? flag(t, "special", true) : true}};
      next_id = std::max(next_id, id + 1);
    }
  }
  // added_tokens.json ({content: id}: the legacy slow tokenizers' added tokens, CodeGen's runs of
  // spaces and tabs) where tokenizer_config.json has no added_tokens_decoder, as transformers'
  // from_pretrained reads it: special when it is one of the named special tokens, else normalized.
  if (!config.contains("added_tokens_decoder")) {
    BRIGADE_ASSIGN_OR_RETURN(json legacy, read_object(fs::path(dir) / "added_tokens.json"));
    std::set<std::string> named;
    for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"})
      if (config.contains(key)) named.insert(token_text(config[key]));
    if (auto extra = config.find("additional_special_tokens"); extra != config.end() && extra->is_array())
      for (const auto& t : *extra) named.insert(token_text(t));
    if (legacy.is_object()) {
      for (const auto& [content, id] : legacy.items()) {
        if (content.empty() || !id.is_number_integer() || id.get<int64_t>() < 0)
          return corrupt(dir + "/added_tokens.json: entry '" + content + "' is not a token with an id >= 0");
        const bool special = named.count(content) > 0;
        added[id.get<int64_t>()] = {{"id", id}, {"content", content}, {"special", special}, {"normalized", !special}};
        next_id = std::max(next_id, id.get<int64_t>() + 1);
      }
    }
  }
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    const std::string content = config.contains(key) ? token_text(config[key]) : std::string();
    if (content.empty()) continue;
    bool listed = false;
    for (const auto& [id, t] : added) listed = listed || t["content"] == content;
    if (listed) continue;
    const int64_t id = vocab.contains(content) ? vocab[content].get<int64_t>() : next_id++;
    added[id] = {{"id", id}, {"content", content}, {"special", true}};
  }
  json added_list = json::array();
  for (auto& [id, t] : added) added_list.push_back(std::move(t));
  const bool prefix_space = flag(config, "add_prefix_space", false);
  json j = {{"model", {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", std::move(merges)}}},
            {"added_tokens", std::move(added_list)},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", prefix_space}, {"use_regex", true}}},
            {"decoder", {{"type", "ByteLevel"}}}};
  const std::string bos = config.contains("bos_token") ? token_text(config["bos_token"]) : std::string();
  // GPT2Converter: BOS first where add_bos_token is true (a TemplateProcessing), else nothing
  // around the text (its ByteLevel post-processor adds no token), written as a template of the
  // text alone so that no BOS is added for it either.
  json single = json::array(), specials = json::object();
  if (flag(config, "add_bos_token", false) && !bos.empty()) {
    int64_t bos_id = -1;
    for (const auto& t : j["added_tokens"])
      if (t["content"] == bos) bos_id = t["id"].get<int64_t>();
    single.push_back({{"SpecialToken", {{"id", bos}, {"type_id", 0}}}});
    specials[bos] = {{"id", bos}, {"ids", json::array({bos_id})}, {"tokens", json::array({bos})}};
  }
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", std::move(single)}, {"special_tokens", std::move(specials)}};
  return load_bpe_tokenizer(j.dump(), config.dump(), vocab_path.string());
}

}  // namespace brigade
