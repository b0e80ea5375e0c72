#include "server/tool_call_parser.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>

#include "models/py_json.h"
#include "server/tool_call_parser_base.h"

namespace brigade::server {

namespace tool_parse {

using ojson = nlohmann::ordered_json;

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

std::optional<ToolCallDelta> call_of(std::string_view text, std::initializer_list<const char*> keys) {
  const ojson j = ojson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return std::nullopt;
  for (const char* key : keys) {
    auto args = j.find(key);
    if (args != j.end() && args->is_object()) return ToolCallDelta{0, name->get<std::string>(), py_json_dumps(*args)};
  }
  return std::nullopt;
}

std::optional<std::vector<ToolCallDelta>> json_array_calls(std::string_view text, const char* name_key,
                                                           std::initializer_list<const char*> arguments_keys) {
  const ojson j = ojson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_array() || j.empty()) return std::nullopt;
  std::vector<ToolCallDelta> calls;
  for (const ojson& item : j) {
    if (!item.is_object()) return std::nullopt;
    auto name = item.find(name_key);
    auto args = item.end();
    for (const char* key : arguments_keys)
      if (args == item.end()) args = item.find(key);
    if (name == item.end() || !name->is_string() || !valid_function_name(name->get_ref<const std::string&>()))
      return std::nullopt;
    if (args == item.end() || !args->is_object()) return std::nullopt;
    calls.push_back(ToolCallDelta{0, name->get<std::string>(), py_json_dumps(*args), ""});
  }
  return calls;
}

std::optional<std::string> object_arguments(std::string_view text) {
  const ojson j = ojson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  return py_json_dumps(j);
}

bool valid_function_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

std::pair<size_t, size_t> find_first(std::string_view s, const std::vector<std::string_view>& markers) {
  std::pair<size_t, size_t> best{std::string_view::npos, 0};
  for (std::string_view m : markers) {
    const size_t at = s.find(m);
    if (at < best.first) best = {at, m.size()};
  }
  return best;
}

size_t partial_marker(std::string_view s, const std::vector<std::string_view>& markers) {
  size_t keep = 0;
  for (std::string_view m : markers) {
    for (size_t n = std::min(s.size(), m.size() - 1); n > keep; --n) {
      if (s.substr(s.size() - n) == m.substr(0, n)) {
        keep = n;
        break;
      }
    }
  }
  return keep;
}

void Base::content(std::string_view text, ToolParse& out) {
  const size_t last = text.find_last_not_of(kSpace);
  if (last == std::string_view::npos) {
    space_.append(text);
    return;
  }
  out.content += space_;
  out.content.append(text.substr(0, last + 1));
  space_.assign(text.substr(last + 1));
}

void Base::call(ToolCallDelta d, ToolParse& out) {
  if (n_calls_ >= max_calls_) return;
  d.index = n_calls_++;
  out.calls.push_back(std::move(d));
}

void Base::end(ToolParse& out) {
  if (n_calls_ == 0) out.content += space_;
  space_.clear();
}

ToolParse Stepper::feed(std::string_view text) {
  ToolParse out;
  buf_.append(text);
  while (step(out, false)) {
  }
  return out;
}

ToolParse Stepper::finish() {
  ToolParse out;
  while (step(out, true)) {
  }
  buf_.clear();
  end(out);
  return out;
}

}  // namespace tool_parse

namespace {

using tool_parse::Base;
using tool_parse::call_of;

// How an output may start, from its first non-blank character: as calls (held to the end),
// as text, or not known yet.
enum class Start { calls, text, undecided };
using StartRule = std::function<Start(std::string_view rest)>;

// Calls when the output starts with one of `tags` (undecided while it may still become one).
StartRule starts_with(std::vector<std::string_view> tags) {
  return [tags = std::move(tags)](std::string_view rest) {
    bool partial = false;
    for (std::string_view tag : tags) {
      if (rest.starts_with(tag)) return Start::calls;
      partial = partial || tag.starts_with(rest);
    }
    return partial ? Start::undecided : Start::text;
  };
}

// All calls or all content, decided at the end (llama3_json, pythonic, granite, phi4_mini_json, olmo3).
class WholeOutputParser final : public Base {
 public:
  WholeOutputParser(int max_calls, StartRule start, tool_parse::WholeResolver resolve)
      : Base(max_calls), start_(std::move(start)), resolve_(std::move(resolve)) {}
  ToolParse feed(std::string_view text) override {
    ToolParse out;
    if (mode_ == Mode::text) {
      content(text, out);
      return out;
    }
    buf_.append(text);
    if (mode_ == Mode::undecided) {
      const size_t b = buf_.find_first_not_of(tool_parse::kSpace);
      if (b == std::string::npos) return out;
      const Start start = start_(std::string_view(buf_).substr(b));
      if (start == Start::calls) mode_ = Mode::calls;
      if (start != Start::text) return out;  // held: calls, or the start still arriving
      mode_ = Mode::text;
      content(buf_, out);
      buf_.clear();
    }
    return out;
  }
  ToolParse finish() override {
    ToolParse out;
    if (mode_ != Mode::text && !buf_.empty()) {
      if (auto calls = resolve_(buf_)) {
        for (auto& c : *calls) call(std::move(c), out);
      } else {
        content(buf_, out);
      }
    }
    buf_.clear();
    end(out);
    return out;
  }

 private:
  enum class Mode { undecided, calls, text };
  StartRule start_;
  tool_parse::WholeResolver resolve_;
  std::string buf_;
  Mode mode_ = Mode::undecided;
};

// Llama 3.1: {"name", "parameters"} objects separated by ';' or whitespace, after an optional
// <|python_tag|>.
constexpr std::string_view kPythonTag = "<|python_tag|>";
std::optional<std::vector<ToolCallDelta>> llama3_calls(std::string_view s) {
  std::vector<ToolCallDelta> calls;
  size_t i = s.find_first_not_of(tool_parse::kSpace);
  if (i == std::string_view::npos) return std::nullopt;
  if (s.substr(i).starts_with(kPythonTag)) i += kPythonTag.size();
  while (true) {
    i = s.find_first_not_of(" \t\r\n;", i);
    if (i == std::string_view::npos) break;
    if (s[i] != '{') return std::nullopt;
    const size_t e = json_value_end(s, i);
    if (e == std::string_view::npos) return std::nullopt;
    auto c = call_of(s.substr(i, e - i), {"parameters", "arguments"});
    if (!c) return std::nullopt;
    calls.push_back(std::move(*c));
    i = e;
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// Granite 3.x: <|tool_call|> (or Granite 3.1's <tool_call>), then a JSON array of
// {"name", "arguments"} objects, as vLLM's granite parser strips them.
constexpr std::string_view kGraniteTag = "<|tool_call|>", kGranite31Tag = "<tool_call>";
std::optional<std::vector<ToolCallDelta>> granite_calls(std::string_view s) {
  s = tool_parse::trim(s);
  for (std::string_view tag : {kGraniteTag, kGranite31Tag}) {
    if (s.starts_with(tag)) s = tool_parse::trim(s.substr(tag.size()));
  }
  return tool_parse::json_array_calls(s);
}

// Phi-4-mini: functools[{"name", "arguments" (or "parameters")}, ..], as vLLM's phi4_mini_json reads
// it (a JSON array, not its regex's text up to the first ']'); or llama.cpp's Phi-4-mini template's
// <|tool_call|>{"name", "arguments"}<|/tool_call|> blocks, whitespace between.
constexpr std::string_view kFunctools = "functools", kPhiCall = "<|tool_call|>", kPhiCallEnd = "<|/tool_call|>";
std::optional<std::vector<ToolCallDelta>> phi4_mini_calls(std::string_view s) {
  s = tool_parse::trim(s);
  if (s.starts_with(kFunctools))
    return tool_parse::json_array_calls(s.substr(kFunctools.size()), "name", {"arguments", "parameters"});
  std::vector<ToolCallDelta> calls;
  while (!s.empty()) {
    if (!s.starts_with(kPhiCall)) return std::nullopt;
    const size_t end = s.find(kPhiCallEnd);
    if (end == std::string_view::npos) return std::nullopt;
    auto c = call_of(s.substr(kPhiCall.size(), end - kPhiCall.size()), {"arguments", "parameters"});
    if (!c || !tool_parse::valid_function_name(c->name)) return std::nullopt;
    calls.push_back(std::move(*c));
    s = tool_parse::trim(s.substr(end + kPhiCallEnd.size()));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// OLMo 3: calls when the output opens <function_calls>, or its first word is followed by '('.
Start olmo3_start(std::string_view rest) {
  static constexpr std::string_view kOpen = "<function_calls>";
  if (rest[0] == '<') {
    if (rest.starts_with(kOpen)) return Start::calls;
    return kOpen.starts_with(rest) ? Start::undecided : Start::text;
  }
  size_t n = 0;
  while (n < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
  if (n == 0 || std::isdigit(static_cast<unsigned char>(rest[0]))) return Start::text;
  if (n == rest.size()) return Start::undecided;
  return rest[n] == '(' ? Start::calls : Start::text;
}

class ForcedNamedParser final : public Base {
 public:
  ForcedNamedParser(int max_calls, std::string name) : Base(max_calls), name_(std::move(name)) {}
  ToolParse feed(std::string_view text) override {
    ToolParse out;
    if (text.empty()) return out;
    if (n_calls() == 0) call({0, name_, std::string(text)}, out);
    else out.calls.push_back({0, "", std::string(text)});
    return out;
  }
  ToolParse finish() override {
    ToolParse out;
    if (n_calls() == 0) call({0, name_, ""}, out);
    return out;
  }

 private:
  std::string name_;
};

class ForcedArrayParser final : public Base {
 public:
  ForcedArrayParser(int max_calls, std::string key) : Base(max_calls), key_(std::move(key)) {}
  ToolParse feed(std::string_view text) override {
    ToolParse out;
    all_.append(text);
    while (!done_) {
      pos_ = all_.find_first_not_of(" \t\r\n,", pos_);
      if (pos_ == std::string::npos) break;
      if (!opened_) {
        if (all_[pos_] != '[') {
          done_ = true;  // not a call array; finish() makes it content
          break;
        }
        opened_ = true;
        ++pos_;
        continue;
      }
      if (all_[pos_] == ']') {
        done_ = true;
        break;
      }
      const size_t e = json_value_end(all_, pos_);
      if (e == std::string::npos) break;
      auto c = call_of(std::string_view(all_).substr(pos_, e - pos_), {key_.c_str()});
      if (!c) {
        done_ = true;  // the calls before it stand
        break;
      }
      call(std::move(*c), out);
      pos_ = e;
    }
    if (pos_ == std::string::npos) pos_ = all_.size();
    return out;
  }
  ToolParse finish() override {
    ToolParse out;
    if (n_calls() == 0) content(all_, out);  // no whole call: the text is all there is
    end(out);
    return out;
  }

 private:
  std::string key_;
  std::string all_;
  size_t pos_ = 0;
  bool opened_ = false, done_ = false;
};

}  // namespace

size_t json_value_end(std::string_view s, size_t from) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = from; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') {
        in_string = false;
        if (depth == 0) return i + 1;
      }
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth <= 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolParserKind kind, int max_calls, std::string named,
                                                      std::string key, std::vector<ToolFunction> functions) {
  switch (kind) {
    case ToolParserKind::hermes:
    case ToolParserKind::deepseek_v3:
    case ToolParserKind::kimi_k2:
    case ToolParserKind::glm45:
    case ToolParserKind::qwen3_coder:
    case ToolParserKind::seed_oss:
    case ToolParserKind::minimax_m2:
    case ToolParserKind::lfm2:
    case ToolParserKind::jamba:
    case ToolParserKind::nemotron_nano_v2:
    case ToolParserKind::apertus:
    case ToolParserKind::ernie45:
    case ToolParserKind::gemma4:
      return tool_parse::make_tagged_parser(max_calls, tool_parse::tagged_syntax(kind, std::move(functions)));
    case ToolParserKind::mistral: return tool_parse::make_mistral_parser(max_calls);
    case ToolParserKind::cohere_command3: return tool_parse::make_cohere_parser(max_calls);
    case ToolParserKind::openai: return tool_parse::make_harmony_parser(max_calls);
    case ToolParserKind::llama3_json:
      return std::make_unique<WholeOutputParser>(max_calls, starts_with({"{", kPythonTag}), llama3_calls);
    case ToolParserKind::pythonic:
      return std::make_unique<WholeOutputParser>(max_calls, starts_with({"[", "<|python_start|>"}),
                                                 tool_parse::pythonic_calls);
    case ToolParserKind::granite:
      return std::make_unique<WholeOutputParser>(max_calls, starts_with({"[", kGraniteTag, kGranite31Tag}),
                                                 granite_calls);
    case ToolParserKind::phi4_mini_json:
      return std::make_unique<WholeOutputParser>(max_calls, starts_with({kFunctools, kPhiCall}), phi4_mini_calls);
    case ToolParserKind::olmo3:
      return std::make_unique<WholeOutputParser>(max_calls, olmo3_start, tool_parse::olmo3_calls);
    case ToolParserKind::forced_named: return std::make_unique<ForcedNamedParser>(max_calls, std::move(named));
    case ToolParserKind::forced_array: return std::make_unique<ForcedArrayParser>(max_calls, std::move(key));
  }
  return nullptr;
}

}  // namespace brigade::server
