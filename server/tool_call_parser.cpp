#include "server/tool_call_parser.h"

#include <nlohmann/json.hpp>

#include <algorithm>
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

// All calls or all content, decided at the end (llama3_json, pythonic).
class WholeOutputParser final : public Base {
 public:
  WholeOutputParser(int max_calls, char first, std::string_view tag, tool_parse::WholeResolver resolve)
      : Base(max_calls), first_(first), tag_(tag), resolve_(std::move(resolve)) {}
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
      const std::string_view rest = std::string_view(buf_).substr(b);
      const size_t n = std::min(rest.size(), tag_.size());
      if (rest[0] == first_ || rest.substr(0, n) == tag_.substr(0, n)) {
        mode_ = rest[0] == first_ || n == tag_.size() ? Mode::calls : Mode::undecided;
        return out;  // held: calls, or the tag still arriving
      }
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
  char first_;
  std::string_view tag_;
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
      return tool_parse::make_tagged_parser(max_calls, tool_parse::tagged_syntax(kind, std::move(functions)));
    case ToolParserKind::mistral: return tool_parse::make_mistral_parser(max_calls);
    case ToolParserKind::cohere_command3: return tool_parse::make_cohere_parser(max_calls);
    case ToolParserKind::openai: return tool_parse::make_harmony_parser(max_calls);
    case ToolParserKind::llama3_json: return std::make_unique<WholeOutputParser>(max_calls, '{', kPythonTag, llama3_calls);
    case ToolParserKind::pythonic:
      return std::make_unique<WholeOutputParser>(max_calls, '[', "<|python_start|>", tool_parse::pythonic_calls);
    case ToolParserKind::forced_named: return std::make_unique<ForcedNamedParser>(max_calls, std::move(named));
    case ToolParserKind::forced_array: return std::make_unique<ForcedArrayParser>(max_calls, std::move(key));
  }
  return nullptr;
}

}  // namespace brigade::server
