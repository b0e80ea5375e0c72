// `brigade tokenize --tokenizer PATH (--text TEXT | --file F) [--bos]`: prints the token ids of
// the text, space-separated on one line; `--decode "IDS"` prints the text of ids instead.
// PATH is anything Tokenizer::load accepts: a model directory, tokenizer.json, a SentencePiece
// tokenizer.model, a GGUF file or a llama2.c tokenizer.bin.
#include <cstdio>
#include <sstream>

#include "models/mapped_file.h"
#include "models/tokenizer.h"
#include "tools/commands.h"

namespace brigade::tools {
namespace {

struct TokenizeArgs {
  std::string tokenizer;
  std::string text;
  std::string file;
  std::string decode;
  bool bos = false;
};

// "1 2 3" or "1,2,3" -> ids; invalid_argument naming the first bad entry.
Expected<std::vector<int32_t>> parse_ids(const std::string& s) {
  std::string spaced = s;
  for (char& ch : spaced)
    if (ch == ',') ch = ' ';
  std::istringstream in(spaced);
  std::vector<int32_t> ids;
  for (std::string word; in >> word;) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || v < 0 || v > INT32_MAX)
      return invalid_argument("--decode: '" + word + "' is not a token id (non-negative integer)");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

int run_tokenize(const TokenizeArgs& a) {
  auto tok = Tokenizer::load(a.tokenizer);
  if (!tok) return fail(tok.status());
  if (!a.decode.empty()) {
    auto ids = parse_ids(a.decode);
    if (!ids) return fail(ids.status());
    auto text = (*tok)->decode(*ids);
    if (!text) return fail(text.status());
    std::fwrite(text->data(), 1, text->size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  std::string text = a.text;
  if (!a.file.empty()) {
    auto t = read_text_file(a.file);
    if (!t) return fail(t.status());
    text = std::move(*t);
  }
  auto ids = (*tok)->encode(text, a.bos);
  if (!ids) return fail(ids.status());
  std::string line;
  for (size_t i = 0; i < ids->size(); ++i) line += (i ? " " : "") + std::to_string((*ids)[i]);
  std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of a text (or the text of ids)");
  auto args = std::make_shared<TokenizeArgs>();
  cmd->add_option("--tokenizer", args->tokenizer,
                  "Model directory, tokenizer.json, tokenizer.model, .gguf or llama2.c tokenizer.bin")->required();
  auto* text = cmd->add_option("--text", args->text, "Text to encode");
  auto* file = cmd->add_option("--file", args->file, "File whose contents to encode");
  auto* decode = cmd->add_option("--decode", args->decode, "Token ids to decode (\"1 2 3\" or 1,2,3)");
  text->excludes(file);
  decode->excludes(text)->excludes(file);
  cmd->add_flag("--bos", args->bos, "Prepend the BOS token");
  cmd->callback([args, cmd, &run] {
    if (cmd->count("--text") + cmd->count("--file") + cmd->count("--decode") == 0)
      throw CLI::RequiredError("one of --text, --file or --decode");
    run = [args] { return run_tokenize(*args); };
  });
}

}  // namespace brigade::tools
