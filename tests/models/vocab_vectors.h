// llama.cpp's tokenizer test vectors (shared/testdata/tokenizers/ggml-vocab-*.gguf.{inp,out}):
// .inp holds inputs separated by "\n__ggml_vocab_test__\n" (the file ends with one); .out holds,
// line by line, each input's expected ids (no BOS added).
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "models/mapped_file.h"

namespace brigade::testing {

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// The cases of `dir`/`vocab`.{inp,out}; empty when either file is missing.
inline std::vector<VocabCase> read_llama_cpp_vectors(const std::string& dir, const std::string& vocab) {
  auto inp = read_text_file(dir + vocab + ".inp");
  auto out = read_text_file(dir + vocab + ".out");
  if (!inp || !out) return {};
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  for (size_t pos = 0; pos < inp->size();) {
    const size_t end = inp->find(sep, pos);
    if (end == std::string::npos) break;
    cases.push_back({inp->substr(pos, end - pos), {}});
    pos = end + sep.size();
  }
  std::istringstream lines(*out);
  std::string line;
  for (auto& c : cases) {
    if (!std::getline(lines, line)) break;
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

}  // namespace brigade::testing
