#include "models/tokenizer_gguf.h"

#include <nlohmann/json.hpp>

#include "models/gguf_eog.h"
#include "models/pretokenizer.h"
#include "models/tokenizer_bpe.h"
#include "models/tokenizer_spm.h"
#include "models/tokenizer_tiktoken.h"

namespace brigade {
namespace {

using json = nlohmann::json;

// Mistral's tekken (Mistral Nemo, Mistral Small 3.x, Ministral, Devstral, Magistral; llama.cpp's
// TEKKEN) as its tokenizer.json writes it: words split at case changes, single digits,
// punctuation runs taking line ends and slashes along. llama.cpp adapts it to classes of a-z / A-Z,
// which splits accented, non-Latin-cased and combining-mark text otherwise; brigade follows
// tokenizer.json (tests/fixtures/tokenizers/tekken records where llama.cpp's split differs).
constexpr const char* kTekkenPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5's (llama.cpp's QWEN35): qwen2's, its letters taking their combining marks along.
constexpr const char* kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// o200k (GPT-4o; gpt-oss's o200k_harmony) as its tokenizer.json writes it: words split at case
// changes, marks kept with their letters, contractions case-insensitive, '/' kept with a run of
// punctuation's line ends.
constexpr const char* kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek LLM's tokenizer.json: newlines, then letters of the Latin/Greek/Cyrillic/... blocks,
// ASCII and full-width punctuation, trailing whitespace, CJK runs, digit runs. Code points are
// escaped: several of them (U+1FBE, U+2126, U+212A...) have canonical equivalents that an
// editor's Unicode normalization would silently substitute.
// Seed-Coder's / Seed-OSS's (llama.cpp's SEED_CODER), as its tokenizer.json writes it: Qwen2's
// with single digits and no newline in a punctuation run (CR and LF as characters, not escapes).
constexpr const char* kSeedCoderPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^)" "\r\n" R"(\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N})" "\r\n" R"(]+|\s*[)" "\r\n" R"(]+|\s+(?!\S)|\s+)";
// DeepSeek-V3's, which Hunyuan's dense models share (llama.cpp's DEEPSEEK3_LLM and HUNYUAN_DENSE):
// up to three digits, runs of CJK ideographs and kana, then letters with their marks.
const std::vector<std::string> kDeepseekV3Patterns = {
    R"(\p{N}{1,3})",
    "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",  // [U+4E00-U+9FA5 U+3040-U+309F U+30A0-U+30FF]+
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^)" "\r\n" R"(\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[)" "\r\n" R"(]*|\s*[)" "\r\n" R"(]+|\s+(?!\S)|\s+)",
};
const std::vector<std::string> kDeepseekLlmPatterns = {
    "[\r\n]",
    "\\s?["
    "A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}"
    "\\x{1c4}-\\x{293}\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}"
    "\\x{37b}-\\x{37d}\\x{37f}\\x{386}\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}"
    "\\x{3a3}-\\x{3f5}\\x{3f7}-\\x{481}\\x{48a}-\\x{52f}\\x{531}-\\x{556}"
    "\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}\\x{13f8}-\\x{13fd}\\x{1c90}-\\x{1cba}"
    "\\x{1cbd}-\\x{1cbf}\\x{1d00}-\\x{1d2b}\\x{1d6b}-\\x{1d77}\\x{1d79}-\\x{1d9a}"
    "\\x{1e00}-\\x{1f15}\\x{1f18}-\\x{1f1d}\\x{1f20}-\\x{1f45}\\x{1f48}-\\x{1f4d}"
    "\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}\\x{1f5d}\\x{1f5f}-\\x{1f7d}"
    "\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}"
    "\\x{1fc6}-\\x{1fcc}\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}\\x{1fe0}-\\x{1fec}"
    "\\x{1ff2}-\\x{1ff4}\\x{1ff6}-\\x{1ffc}\\x{2102}\\x{2107}\\x{210a}-\\x{2113}"
    "\\x{2115}\\x{2119}-\\x{211d}\\x{2124}\\x{2126}\\x{2128}\\x{212a}-\\x{212d}"
    "\\x{212f}-\\x{2134}\\x{2139}\\x{213c}-\\x{213f}\\x{2145}-\\x{2149}\\x{214e}"
    "\\x{2183}\\x{2184}\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}\\x{2ceb}-\\x{2cee}"
    "\\x{2cf2}\\x{2cf3}\\x{a640}-\\x{a66d}\\x{a680}-\\x{a69b}\\x{a722}-\\x{a76f}"
    "\\x{a771}-\\x{a787}\\x{a78b}-\\x{a78e}\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}"
    "\\x{fb13}-\\x{fb17}\\x{ff21}-\\x{ff3a}\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}"
    "\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}"
    "\\x{10cc0}-\\x{10cf2}\\x{118a0}-\\x{118df}\\x{1e900}-\\x{1e943}"
    "]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+",
};

// tokenizer.ggml.add_bos_token when present; llama.cpp's default for the vocabulary otherwise.
Expected<bool> add_bos_token(const GgufFile& g, bool fallback) {
  BRIGADE_ASSIGN_OR_RETURN(int64_t v, g.get_int_or("tokenizer.ggml.add_bos_token", fallback ? 1 : 0));
  return v != 0;
}

// tokenizer.ggml.add_eos_token: llama.cpp appends EOS to a prompt it adds special tokens to
// (Qwen3-Embedding's files, whose tokenizer.json post-processor ends with <|endoftext|>).
Expected<bool> add_eos_token(const GgufFile& g) {
  BRIGADE_ASSIGN_OR_RETURN(int64_t v, g.get_int_or("tokenizer.ggml.add_eos_token", 0));
  return v != 0;
}

Expected<std::unique_ptr<Tokenizer>> load_bpe(const GgufFile& g, const std::vector<std::string>& tokens,
                                              const std::vector<double>& types) {
  const GgufValue* merges = g.find("tokenizer.ggml.merges");
  if (!merges || merges->type != GgufType::array || merges->elem_type != GgufType::string)
    return corrupt(g.path() + ": tokenizer.ggml.merges is missing or not an array of strings (a gpt2 vocabulary needs it)");
  BRIGADE_ASSIGN_OR_RETURN(std::string pre_name, g.get_string("tokenizer.ggml.pre"));
  BRIGADE_ASSIGN_OR_RETURN(auto patterns, gguf_pretokenizer_patterns(pre_name));
  // Re-expressed as a tokenizer.json so one BPE implementation serves both sources.
  json vocab = json::object(), added = json::array(), steps = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    vocab[tokens[i]] = i;
    const int type = i < types.size() ? static_cast<int>(types[i]) : 1;
    if (type == 3 || type == 4) added.push_back({{"id", i}, {"content", tokens[i]}, {"special", type == 3}});
  }
  for (const auto& p : patterns)
    steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", p}}}, {"behavior", "Isolated"}, {"invert", false}});
  steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  // llama.cpp treats a word that is a whole token as that token for Llama 3 and tekken (their
  // tokenizer.json set model.ignore_merges), whatever the merges would make of it.
  const bool ignore_merges =
      pre_name == "llama-bpe" || pre_name == "llama3" || pre_name == "lfm2" || pre_name == "falcon-h1" ||
      pre_name == "glm4" || pre_name == "glm5" || pre_name == "tekken";
  json j = {{"model", {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", merges->strs}, {"ignore_merges", ignore_merges}}},
            {"added_tokens", std::move(added)},
            {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}}},
            {"decoder", {{"type", "ByteLevel"}}}};
  // Prompts start with BOS only where llama.cpp would add it (Qwen2 files name <|endoftext|> as
  // BOS but say add_bos_token false).
  // Without add_bos_token, llama.cpp adds BOS for the Llama 3 group and tekken, not for GLM's
  // (glm4 / glm5 ignore merges too; GLM-4.7-Flash's files have a bos_token_id and no add_bos_token).
  const bool bos_by_default = ignore_merges && pre_name != "glm4" && pre_name != "glm5";
  BRIGADE_ASSIGN_OR_RETURN(bool add_bos, add_bos_token(g, /*fallback=*/bos_by_default));
  BRIGADE_ASSIGN_OR_RETURN(bool add_eos, add_eos_token(g));
  json config = json::object();
  int64_t bos_id = -1, eos_id = -1;  // the special tokens a prompt gets before and after its text
  for (const auto& [key, name] : {std::pair{"tokenizer.ggml.bos_token_id", "bos_token"}, {"tokenizer.ggml.eos_token_id", "eos_token"}}) {
    BRIGADE_ASSIGN_OR_RETURN(int64_t id, g.get_int_or(key, -1));
    if (id >= static_cast<int64_t>(tokens.size())) return corrupt(g.path() + ": " + key + " is outside the vocabulary");
    const bool bos = std::string(name) == "bos_token";
    if (id >= 0 && (add_bos || !bos)) config[name] = tokens[static_cast<size_t>(id)];
    (bos ? bos_id : eos_id) = id >= 0 && (bos ? add_bos : add_eos) ? id : -1;
  }
  if (eos_id >= 0) {  // add_eos_token: as the tokenizer.json post-processor that says so
    json single = json::array(), specials = json::object();
    auto special = [&](int64_t id) {
      const std::string& text = tokens[static_cast<size_t>(id)];
      single.push_back({{"SpecialToken", {{"id", text}, {"type_id", 0}}}});
      specials[text] = {{"id", text}, {"ids", {id}}, {"tokens", {text}}};
    };
    if (bos_id >= 0) special(bos_id);
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    special(eos_id);
    j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", std::move(single)}, {"special_tokens", std::move(specials)}};
  }
  return load_bpe_tokenizer(j.dump(), config.dump(), g.path());
}

// model "llama"; `gemma4`: model "gemma4", llama.cpp's SentencePiece-style BPE by merge rank
// (SpmVocab::merges), with BOS always added (llama.cpp overrides add_bos_token false for it) and
// eos_ids every end-of-generation id (gguf_eog.h), scores read but unused.
Expected<std::unique_ptr<Tokenizer>> load_spm(const GgufFile& g, const std::vector<std::string>& tokens,
                                              const std::vector<double>& types, bool gemma4) {
  const GgufValue* scores = g.find("tokenizer.ggml.scores");
  if (!scores || scores->type != GgufType::array || scores->numbers.size() != tokens.size())
    return corrupt(g.path() + ": tokenizer.ggml.scores must hold one number per token for a " +
                   (gemma4 ? "gemma4" : "llama") + " vocabulary");
  if (types.size() != tokens.size())
    return corrupt(g.path() + ": tokenizer.ggml.token_type must hold one type per token");
  SpmVocab v;
  v.pieces = tokens;
  for (size_t i = 0; i < tokens.size(); ++i) {
    v.scores.push_back(static_cast<float>(scores->numbers[i]));
    const int t = static_cast<int>(types[i]);
    if (t < 1 || t > 6) return corrupt(g.path() + ": token_type " + std::to_string(t) + " of token " + std::to_string(i) + " is not 1..6");
    v.types.push_back(static_cast<SpmTokenType>(t));
  }
  BRIGADE_ASSIGN_OR_RETURN(int64_t bos, g.get_int_or("tokenizer.ggml.bos_token_id", -1));
  BRIGADE_ASSIGN_OR_RETURN(int64_t eos, g.get_int_or("tokenizer.ggml.eos_token_id", -1));
  BRIGADE_ASSIGN_OR_RETURN(int64_t unk, g.get_int_or("tokenizer.ggml.unknown_token_id", -1));
  BRIGADE_ASSIGN_OR_RETURN(int64_t prefix, g.get_int_or("tokenizer.ggml.add_space_prefix", 1));
  BRIGADE_ASSIGN_OR_RETURN(bool add_bos, add_bos_token(g, /*fallback=*/true));
  if (gemma4) {
    const GgufValue* merges = g.find("tokenizer.ggml.merges");
    if (!merges || merges->type != GgufType::array || merges->elem_type != GgufType::string || merges->strs.empty())
      return corrupt(g.path() + ": tokenizer.ggml.merges is missing, empty or not an array of strings (a gemma4 vocabulary needs it)");
    v.merges = merges->strs;
    BRIGADE_ASSIGN_OR_RETURN(std::vector<int> eog, gguf_end_of_generation_ids(g));
    v.eos_ids.assign(eog.begin(), eog.end());
    add_bos = true;
    prefix = 0;  // llama.cpp's BPE vocabularies never prepend a space
  }
  v.bos_id = add_bos ? static_cast<int32_t>(bos) : -1;
  v.eos_id = static_cast<int32_t>(eos);
  BRIGADE_ASSIGN_OR_RETURN(v.add_eos, add_eos_token(g));
  v.unk_id = static_cast<int32_t>(unk);
  v.add_space_prefix = prefix != 0;
  return make_spm_tokenizer(std::move(v), g.path());
}

}  // namespace

Expected<std::vector<std::string>> gguf_pretokenizer_patterns(const std::string& name) {
  // OLMo 1's olmo and EXAONE 4's exaone4 are GPT-2's (llama.cpp's OLMO type and its GPT2).
  // Phi-2's phi-2 is GPT-2's too.
  if (name == "gpt-2" || name == "olmo" || name == "exaone4" || name == "phi-2") return std::vector<std::string>{kGpt2Pattern};
  // LFM2's and Falcon-H1's are Llama 3's (llama.cpp's LLAMA3 pre-tokenizer type, whole words
  // before merges); SmolLM3's smaug-bpe and the cl100k vocabularies' dbrx (OLMo 2 / 3's) are its
  // pattern with merges as usual (llama.cpp's SMAUG and DBRX).
  if (name == "llama-bpe" || name == "llama3" || name == "lfm2" || name == "falcon-h1" || name == "smaug-bpe" ||
      name == "dbrx")
    return std::vector<std::string>{kLlama3Pattern};
  // Granite 3's refact (llama.cpp's REFACT) and Cohere's command-r (its COMMAND_R, the same
  // regexes): every digit alone, then GPT-2's pattern as llama.cpp writes it (without the trailing
  // \s+ alternative; the pieces between matches stay pieces). llama.cpp also sets clean_spaces
  // false for command-r (its llama_detokenize then keeps " ." and " 's" as decoded); brigade's
  // byte-level decoder never cleans spaces, for any pre-tokenizer, so that needs nothing here.
  // StarCoder2's starcoder is the same (llama.cpp's STARCODER).
  if (name == "refact" || name == "command-r" || name == "starcoder")
    return std::vector<std::string>{R"(\p{N})",
                                    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))"};
  // Hunyuan MoE's hunyuan and StableLM 2's stablelm2 are Qwen2's (llama.cpp's HUNYUAN and STABLELM2
  // share QWEN2's regex).
  if (name == "qwen2" || name == "hunyuan" || name == "stablelm2") return std::vector<std::string>{kQwen2Pattern};
  if (name == "qwen35") return std::vector<std::string>{kQwen35Pattern};
  if (name == "deepseek-llm") return kDeepseekLlmPatterns;
  if (name == "deepseek-v3" || name == "hunyuan-dense") return kDeepseekV3Patterns;
  if (name == "seed-coder") return std::vector<std::string>{kSeedCoderPattern};
  if (name == "tekken") return std::vector<std::string>{kTekkenPattern};
  // Kimi K2's (tokenization_kimi.py's pattern; llama.cpp hand-codes it as KIMI_K2).
  if (name == "kimi-k2") return std::vector<std::string>{kKimiK2Pattern};
  if (name == "gpt-4o" || name == "llama4") return std::vector<std::string>{kGpt4oPattern};  // as llama.cpp maps them
  // GLM-4 / 4.5 / 5 (llama.cpp's CHATGLM4: Llama 3's pattern, its case-insensitive contractions
  // spelled as classes; glm4 and glm5 also take whole-word tokens before merges).
  if (name == "chatglm-bpe" || name == "glm4" || name == "glm5") return std::vector<std::string>{kLlama3Pattern};
  return unsupported("pre-tokenizer '" + name + "' is not supported; supported: gpt-2, olmo, exaone4, phi-2, llama-bpe, lfm2, "
                     "falcon-h1, smaug-bpe, dbrx, refact, command-r, starcoder, qwen2, hunyuan, stablelm2, qwen35, deepseek-llm, deepseek-v3, hunyuan-dense, seed-coder, kimi-k2, tekken, gpt-4o, "
                     "llama4, chatglm-bpe, glm4, glm5");
}

Expected<std::unique_ptr<Tokenizer>> load_gguf_tokenizer(const GgufFile& g) {
  auto model = g.get_string("tokenizer.ggml.model");
  if (!model) return not_found(g.path() + ": no tokenizer in this GGUF file (tokenizer.ggml.model is missing)");
  const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != GgufType::array || tokens->elem_type != GgufType::string || tokens->strs.empty())
    return corrupt(g.path() + ": tokenizer.ggml.tokens is missing, empty or not an array of strings");
  const GgufValue* types = g.find("tokenizer.ggml.token_type");
  if (types && (types->type != GgufType::array || !types->strs.empty() || types->numbers.size() != tokens->strs.size()))
    return corrupt(g.path() + ": tokenizer.ggml.token_type must be an array of one integer per token (" +
                   std::to_string(tokens->strs.size()) + " tokens)");
  const std::vector<double> no_types;
  const std::vector<double>& t = types ? types->numbers : no_types;
  if (*model == "gpt2") return load_bpe(g, tokens->strs, t);
  if (*model == "llama" || *model == "gemma4") return load_spm(g, tokens->strs, t, *model == "gemma4");
  return unsupported(g.path() + ": tokenizer.ggml.model '" + *model + "' is not supported; supported: gpt2, llama, gemma4");
}

}  // namespace brigade
