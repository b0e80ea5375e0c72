#include "models/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "models/mapped_file.h"
#include "models/tokenizer_bpe.h"
#include "models/tokenizer_gguf.h"
#include "models/tokenizer_sentencepiece.h"
#include "models/tokenizer_spm.h"
#include "models/tokenizer_tekken.h"
#include "models/tokenizer_tiktoken.h"
#include "models/tokenizer_unigram.h"
#include "models/tokenizer_vocab_merges.h"
#include "models/tokenizer_wordpiece.h"

namespace brigade {

namespace fs = std::filesystem;

namespace {

struct TokenizerJson {
  nlohmann::json tokenizer;
  nlohmann::json config;  // null without tokenizer_config.json
};

// tokenizer.json's text and tokenizer_config.json's (or empty), parsed.
Expected<TokenizerJson> parse_tokenizer_json(const std::string& text, const std::string& config_text,
                                             const std::string& origin) {
  TokenizerJson out{nlohmann::json::parse(text, nullptr, false), nlohmann::json()};
  if (out.tokenizer.is_discarded()) return corrupt(origin + ": not valid JSON");
  if (!config_text.empty()) {
    out.config = nlohmann::json::parse(config_text, nullptr, false);
    if (out.config.is_discarded() || !out.config.is_object())
      return corrupt(origin + ": tokenizer_config.json is not a JSON object");
  }
  return out;
}

// tokenizer.json by its model.type.
Expected<std::unique_ptr<Tokenizer>> load_tokenizer_json(const std::string& text, const std::string& config_text,
                                                         const std::string& origin) {
  BRIGADE_ASSIGN_OR_RETURN(TokenizerJson j, parse_tokenizer_json(text, config_text, origin));
  if (looks_like_tekken(origin, j.tokenizer)) return load_tekken_tokenizer(j.tokenizer, origin);
  const nlohmann::json& model = j.tokenizer.is_object() ? j.tokenizer.value("model", nlohmann::json()) : nlohmann::json();
  if (!model.is_object()) return corrupt(origin + ": not a tokenizer.json (no \"model\" object)");
  const std::string type = model.value("type", "");
  if (type == "BPE") return load_bpe_tokenizer(j.tokenizer, j.config, origin);
  if (type == "WordPiece") return load_wordpiece_tokenizer(j.tokenizer, origin);
  if (type == "Unigram") return load_unigram_tokenizer(j.tokenizer, origin);
  return unsupported(origin + ": model.type '" + type + "' is not supported (BPE, WordPiece, Unigram)");
}

// A SentencePiece tokenizer.model, or a refusal naming what it is instead: Meta's original Llama 3
// tokenizer.model is a tiktoken ranks file, whose special tokens differ between Llama 3 releases.
Expected<std::unique_ptr<Tokenizer>> load_sentencepiece_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(256, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  if (looks_like_tiktoken_ranks(head))
    return unsupported(path + ": a tiktoken ranks file, not a SentencePiece model; its split pattern and special tokens "
                       "are not in the file: load the model directory (Kimi K2's tiktoken.model, Hunyuan's hy.tiktoken, "
                       "Qwen's qwen.tiktoken, GLM-4's tokenizer.model, with tokenizer_config.json), or, for Meta's original Llama 3 "
                       "tokenizer.model, the model's tokenizer.json");
  return load_sentencepiece_tokenizer(path);
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& path) {
  std::error_code ec;
  fs::path json_path = path;
  std::string config_text;
  if (fs::is_directory(path, ec)) {
    json_path = fs::path(path) / "tokenizer.json";
    const fs::path sp_path = fs::path(path) / "tokenizer.model";
    // tokenizer.json wins over tekken.json (transformers' and vLLM's default Hugging Face mode).
    if (!fs::exists(json_path, ec) && has_tekken_vocabulary(path))
      return load_tekken_tokenizer((fs::path(path) / kTekkenFile).string());
    if (!fs::exists(json_path, ec) && has_tiktoken_vocabulary(path)) return load_tiktoken_tokenizer(path);
    if (!fs::exists(json_path, ec) && fs::exists(sp_path, ec)) return load_sentencepiece_model(sp_path.string());
    // The slow GPT-2 tokenizer's files (OPT's repositories, older GPT-2 family ones).
    if (!fs::exists(json_path, ec) && has_vocab_merges_files(path)) return load_vocab_merges_tokenizer(path);
    if (!fs::exists(json_path, ec))
      return not_found(path + ": no tokenizer.json, tekken.json, tokenizer.model, tiktoken vocabulary "
                       "(tiktoken.model, hy.tiktoken, qwen.tiktoken) or vocab.json and merges.txt in the model directory");
    const fs::path config_path = fs::path(path) / "tokenizer_config.json";
    if (fs::exists(config_path, ec)) {
      BRIGADE_ASSIGN_OR_RETURN(config_text, read_text_file(config_path.string()));
    }
  } else if (json_path.extension() == ".gguf") {
    BRIGADE_ASSIGN_OR_RETURN(auto gguf, GgufFile::open(path));
    return load_gguf_tokenizer(*gguf);
  } else if (json_path.extension() == ".model") {
    if (!fs::exists(path, ec)) return not_found("tokenizer not found: " + path);
    return load_sentencepiece_model(path);
  } else if (json_path.extension() == ".bin") {
    return load_llama2c_tokenizer(path);
  } else if (json_path.extension() != ".json") {
    return unsupported(path + ": unknown tokenizer file; supported: a model directory (a tiktoken vocabulary loads from "
                       "its directory), tokenizer.json, Mistral's tekken.json, tokenizer.model (SentencePiece), *.gguf, llama2.c tokenizer.bin");
  }
  BRIGADE_ASSIGN_OR_RETURN(std::string text, read_text_file(json_path.string()));
  return load_tokenizer_json(text, config_text, json_path.string());
}

Expected<std::unique_ptr<Tokenizer>> load_bpe_tokenizer(const std::string& tokenizer_json,
                                                        const std::string& config_json, const std::string& origin) {
  BRIGADE_ASSIGN_OR_RETURN(TokenizerJson j, parse_tokenizer_json(tokenizer_json, config_json, origin));
  return load_bpe_tokenizer(j.tokenizer, j.config, origin);
}

Expected<std::vector<int32_t>> Tokenizer::encode_pair(std::string_view a, std::string_view b,
                                                      std::vector<int32_t>* type_ids) const {
  BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> out, encode(a, true));
  BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> second, encode(b, true));
  if (type_ids) {
    type_ids->assign(out.size(), 0);
    type_ids->resize(out.size() + second.size(), 1);
  }
  out.insert(out.end(), second.begin(), second.end());
  return out;
}

Expected<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size())
      return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                              std::to_string(vocab_size()) + ")");
    if (skip_special && is_special(id)) continue;
    out += token_to_piece(id);
  }
  return out;
}

Status check_tokenizer_fits(const Tokenizer& tokenizer, int model_vocab) {
  if (tokenizer.vocab_size() > model_vocab)
    return invalid_argument("the tokenizer has " + std::to_string(tokenizer.vocab_size()) +
                            " tokens but the model's vocabulary has " + std::to_string(model_vocab) +
                            "; use the tokenizer that belongs to this model");
  std::vector<int32_t> ids = tokenizer.eos_ids();
  ids.push_back(tokenizer.bos_id());
  for (int32_t id : ids)
    if (id >= model_vocab)
      return invalid_argument("the tokenizer's BOS/EOS id " + std::to_string(id) + " is outside the model's vocabulary of " +
                              std::to_string(model_vocab));
  return Status::ok();
}

std::vector<std::string> token_pieces(const Tokenizer& tokenizer) {
  std::vector<std::string> pieces(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id)
    if (!tokenizer.is_special(id)) pieces[static_cast<size_t>(id)] = tokenizer.token_to_piece(id);
  return pieces;
}

}  // namespace brigade
