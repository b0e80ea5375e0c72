#include "models/tokenizer_metaspace.h"

#include "models/tokenizer_unicode.h"
#include "models/utf8.h"

namespace brigade {

using json = nlohmann::json;

namespace {

// `text` cut at whitespace (Unicode White_Space), which is dropped.
void whitespace_split(std::string_view text, std::vector<std::string>& out) {
  std::string word;
  for (size_t i = 0; i < text.size();) {
    const size_t n = std::max<size_t>(1, utf8_sequence_length(text, i));
    if (is_bert_whitespace(decode_utf8(text, i, n))) {
      if (!word.empty()) out.push_back(std::move(word));
      word.clear();
    } else {
      word.append(text, i, n);
    }
    i += n;
  }
  if (!word.empty()) out.push_back(std::move(word));
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

// The one-character string of a field (Metaspace's replacement, Strip's content).
Expected<std::string> one_char(const json& v, const std::string& what) {
  if (!v.is_string()) return corrupt(what + " must be a one-character string");
  const std::string s = v.get<std::string>();
  if (s.empty() || utf8_sequence_length(s, 0) != s.size()) return corrupt(what + " must be a one-character string");
  return s;
}

}  // namespace

Expected<MetaspacePreTokenizer> MetaspacePreTokenizer::parse(const json& pre, const std::string& origin) {
  MetaspacePreTokenizer p;
  BRIGADE_RETURN_IF_ERROR(p.add(pre, origin));
  return p;
}

Status MetaspacePreTokenizer::add(const json& pre, const std::string& origin) {
  if (pre.is_null()) return Status::ok();
  const std::string type = pre.is_object() ? pre.value("type", "") : "";
  if (type == "Sequence") {
    if (!pre.contains("pretokenizers") || !pre["pretokenizers"].is_array())
      return corrupt(origin + ": pre_tokenizer Sequence needs a \"pretokenizers\" list");
    for (const json& each : pre["pretokenizers"]) BRIGADE_RETURN_IF_ERROR(add(each, origin));
    return Status::ok();
  }
  if (type == "WhitespaceSplit") {
    steps_.push_back({.whitespace_split = true});
    return Status::ok();
  }
  if (type != "Metaspace")
    return unsupported(origin + ": pre_tokenizer type '" + type +
                       "' is not supported by the Unigram tokenizer (Metaspace, WhitespaceSplit, Sequence, or null)");
  Step step;
  BRIGADE_ASSIGN_OR_RETURN(step.replacement, one_char(pre.value("replacement", json("\u2581")), origin + ": pre_tokenizer Metaspace's replacement"));
  const json scheme = pre.value("prepend_scheme", json());
  const json add_prefix = pre.value("add_prefix_space", json(true));
  const json split = pre.value("split", json(true));
  if (scheme.is_string() && scheme == "always") step.prepend = Prepend::always;
  else if (scheme.is_string() && scheme == "first") step.prepend = Prepend::first;
  else if (scheme.is_string() && scheme == "never") step.prepend = Prepend::never;
  else if (!scheme.is_null()) return corrupt(origin + ": pre_tokenizer Metaspace's prepend_scheme must be always, first or never");
  else if (add_prefix.is_boolean()) step.prepend = add_prefix.get<bool>() ? Prepend::always : Prepend::never;
  else return corrupt(origin + ": pre_tokenizer Metaspace's add_prefix_space must be a boolean");
  if (!split.is_boolean()) return corrupt(origin + ": pre_tokenizer Metaspace's split must be a boolean");
  step.split = split.get<bool>();
  steps_.push_back(std::move(step));
  return Status::ok();
}

void MetaspacePreTokenizer::split(std::string_view text, bool at_start, std::vector<std::string>& words) const {
  std::vector<std::string> current{std::string(text)}, next;
  std::vector<uint8_t> starts{at_start}, next_starts;  // per word: it begins the input
  for (const Step& step : steps_) {
    next.clear();
    next_starts.clear();
    for (size_t w = 0; w < current.size(); ++w) {
      const size_t before = next.size();
      if (step.whitespace_split) {
        // A word after leading whitespace no longer begins the input.
        const bool leading_space = !current[w].empty() && is_bert_whitespace(decode_utf8(current[w], 0, std::max<size_t>(1, utf8_sequence_length(current[w], 0))));
        whitespace_split(current[w], next);
        for (size_t i = before; i < next.size(); ++i) next_starts.push_back(i == before && starts[w] && !leading_space);
        continue;
      }
      std::string word = current[w];
      replace_all(word, " ", step.replacement);
      const bool prepend = step.prepend == Prepend::always || (step.prepend == Prepend::first && starts[w]);
      if (prepend && !word.empty() && !word.starts_with(step.replacement)) word = step.replacement + word;
      if (!step.split) {
        if (!word.empty()) next.push_back(std::move(word));
      } else {  // each replacement starts a word
        size_t from = 0;
        for (size_t at = word.find(step.replacement, 1); at != std::string::npos; at = word.find(step.replacement, at + 1)) {
          next.push_back(word.substr(from, at - from));
          from = at;
        }
        if (from < word.size()) next.push_back(word.substr(from));
      }
      for (size_t i = before; i < next.size(); ++i) next_starts.push_back(i == before && starts[w]);
    }
    current.swap(next);
    starts.swap(next_starts);
  }
  for (std::string& word : current)
    if (!word.empty()) words.push_back(std::move(word));
}

Expected<PieceDecoder> PieceDecoder::parse(const json& decoder, const std::string& origin) {
  PieceDecoder d;
  if (decoder.is_null()) d.join_with_spaces_ = true;
  else BRIGADE_RETURN_IF_ERROR(d.add(decoder, origin));
  return d;
}

Status PieceDecoder::add(const json& d, const std::string& origin) {
  const std::string type = d.is_object() ? d.value("type", "") : "";
  Step step{};
  if (type == "Sequence") {
    if (!d.contains("decoders") || !d["decoders"].is_array()) return corrupt(origin + ": decoder Sequence needs a \"decoders\" list");
    for (const json& each : d["decoders"]) BRIGADE_RETURN_IF_ERROR(add(each, origin));
    return Status::ok();
  } else if (type == "Metaspace") {
    step.kind = Kind::metaspace;
    BRIGADE_ASSIGN_OR_RETURN(step.from, one_char(d.value("replacement", json("\u2581")), origin + ": decoder Metaspace's replacement"));
    const json scheme = d.value("prepend_scheme", json());
    step.drop_in_first = scheme.is_string() ? scheme != "never" : d.value("add_prefix_space", json(true)) == json(true);
  } else if (type == "Replace") {
    const json& pattern = d.value("pattern", json());
    if (!pattern.is_object() || !pattern.contains("String") || !pattern["String"].is_string() || !d.value("content", json()).is_string())
      return unsupported(origin + ": decoder Replace is supported with a String pattern and a string content only");
    step.kind = Kind::replace;
    step.from = pattern["String"].get<std::string>();
    step.to = d["content"].get<std::string>();
    if (step.from.empty()) return corrupt(origin + ": decoder Replace has an empty pattern");
  } else if (type == "ByteFallback") {
    step.kind = Kind::byte_fallback;
  } else if (type == "Fuse") {
    step.kind = Kind::fuse;
  } else if (type == "Strip") {
    step.kind = Kind::strip;
    BRIGADE_ASSIGN_OR_RETURN(step.from, one_char(d.value("content", json(" ")), origin + ": decoder Strip's content"));
    const json start = d.value("start", json(0)), stop = d.value("stop", json(0));
    if (!start.is_number_unsigned() || !stop.is_number_unsigned()) return corrupt(origin + ": decoder Strip needs counts start and stop");
    step.strip_start = start.get<int>();
    step.strip_stop = stop.get<int>();
  } else {
    return unsupported(origin + ": decoder type '" + type +
                       "' is not supported by the Unigram tokenizer (Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence, or null)");
  }
  steps_.push_back(std::move(step));
  return Status::ok();
}

namespace {

// "<0xAB>" -> 0xAB; -1 for any other token.
int byte_token(const std::string& t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return -1;
  int v = 0;
  for (char c : t.substr(3, 2)) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// Runs of byte tokens become their bytes when those are UTF-8, else one U+FFFD per byte token;
// `raw` keeps the bytes as they are (streaming, where the detokenizer joins them).
std::vector<std::string> byte_fallback(std::vector<std::string> tokens, bool raw) {
  std::vector<std::string> out;
  std::string bytes;
  size_t n_bytes = 0;
  auto flush = [&] {
    if (n_bytes == 0) return;
    if (raw || is_valid_utf8(bytes)) out.push_back(bytes);
    else
      for (size_t i = 0; i < n_bytes; ++i) out.push_back("\xEF\xBF\xBD");
    bytes.clear();
    n_bytes = 0;
  };
  for (std::string& t : tokens) {
    if (const int b = byte_token(t); b >= 0) {
      bytes.push_back(static_cast<char>(b));
      ++n_bytes;
      continue;
    }
    flush();
    out.push_back(std::move(t));
  }
  flush();
  return out;
}

// Up to `start` leading and `stop` trailing copies of `c` cut from `t`.
std::string strip(const std::string& t, const std::string& c, int start, int stop) {
  size_t begin = 0, end = t.size();
  for (int i = 0; i < start && t.compare(begin, c.size(), c) == 0 && begin + c.size() <= end; ++i) begin += c.size();
  for (int i = 0; i < stop && end >= begin + c.size() && t.compare(end - c.size(), c.size(), c) == 0; ++i) end -= c.size();
  return t.substr(begin, end - begin);
}

}  // namespace

std::vector<std::string> PieceDecoder::run(std::vector<std::string> tokens, bool streaming) const {
  bool fused = false;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::metaspace:
        for (size_t i = 0; i < tokens.size(); ++i)
          replace_all(tokens[i], step.from, i == 0 && !streaming && step.drop_in_first ? "" : " ");
        break;
      case Kind::replace:
        for (std::string& t : tokens) replace_all(t, step.from, step.to);
        break;
      case Kind::byte_fallback:
        tokens = byte_fallback(std::move(tokens), streaming);
        break;
      case Kind::fuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        fused = true;
        break;
      }
      case Kind::strip:
        // After Fuse it cuts the ends of the whole text, which a streamed piece is not.
        if (streaming && fused) break;
        for (std::string& t : tokens) t = strip(t, step.from, step.strip_start, step.strip_stop);
        break;
    }
  }
  return tokens;
}

std::string PieceDecoder::decode(std::vector<std::string> tokens) const {
  std::string out;
  if (join_with_spaces_) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  for (const std::string& t : run(std::move(tokens), false)) out += t;
  return out;
}

std::string PieceDecoder::piece(const std::string& token) const {
  if (join_with_spaces_) return std::string(" ").append(token);
  std::string out;
  for (const std::string& t : run({token}, true)) out += t;
  return out;
}

}  // namespace brigade
