// Mistral's tool calls: [TOOL_CALLS] followed by a JSON array of {"name", "arguments"} objects (or
// one object; tokenizers before v11), or by NAME[ARGS]{..} / NAME[CALL_ID]ID[ARGS]{..} (v11+,
// one call per [TOOL_CALLS]).
#include <nlohmann/json.hpp>

#include "models/py_json.h"
#include "server/tool_call_parser_base.h"

namespace brigade::server::tool_parse {

namespace {

using ojson = nlohmann::ordered_json;
constexpr size_t npos = std::string_view::npos;
constexpr std::string_view kCalls = "[TOOL_CALLS]", kArgs = "[ARGS]", kCallId = "[CALL_ID]";

// What follows a [TOOL_CALLS]: calls, something else, or not known yet.
struct Attempt {
  enum { more, bad, done } state = more;
  size_t end = 0;  // done: the text read
  std::vector<ToolCallDelta> calls;
};

// {"name": string, "arguments": object (or a JSON string holding one)}.
std::optional<ToolCallDelta> json_call(const ojson& j) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  auto args = j.find("arguments");
  if (name == j.end() || !name->is_string() || args == j.end()) return std::nullopt;
  if (!valid_function_name(name->get_ref<const std::string&>())) return std::nullopt;
  std::optional<std::string> a;
  if (args->is_object()) a = py_json_dumps(*args);
  else if (args->is_string()) a = object_arguments(args->get_ref<const std::string&>());
  if (!a) return std::nullopt;
  return ToolCallDelta{0, name->get<std::string>(), std::move(*a), ""};
}

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// Whether s is a proper beginning of marker.
bool begins(std::string_view s, std::string_view marker) { return s.size() < marker.size() && marker.starts_with(s); }

// The text after a [TOOL_CALLS].
Attempt read_calls(std::string_view s) {
  const size_t i = s.find_first_not_of(kSpace);
  if (i == npos) return {};
  if (s[i] == '[' || s[i] == '{') {
    const size_t e = json_value_end(s, i);
    if (e == npos) return {};
    const ojson j = ojson::parse(s.substr(i, e - i), nullptr, /*allow_exceptions=*/false);
    Attempt a{Attempt::done, e, {}};
    for (const ojson& item : j.is_array() ? j : ojson::array({j})) {
      auto c = json_call(item);
      if (!c) return {Attempt::bad};
      a.calls.push_back(std::move(*c));
    }
    if (a.calls.empty()) return {Attempt::bad};
    return a;
  }
  size_t n = i;
  while (n < s.size() && name_char(s[n])) ++n;
  if (n == s.size()) return {};
  const std::string_view name = s.substr(i, n - i);
  if (!valid_function_name(name)) return {Attempt::bad};
  std::string_view rest = s.substr(n);
  std::string id;
  if (rest.starts_with(kCallId)) {
    rest.remove_prefix(kCallId.size());
    const size_t id_end = rest.find('[');
    if (id_end == npos) return {};
    id = std::string(trim(rest.substr(0, id_end)));
    rest.remove_prefix(id_end);
  }
  if (!rest.starts_with(kArgs)) return {begins(rest, kArgs) || (id.empty() && begins(rest, kCallId)) ? Attempt::more : Attempt::bad};
  rest.remove_prefix(kArgs.size());
  const size_t b = rest.find_first_not_of(kSpace);
  if (b == npos) return {};
  if (rest[b] != '{') return {Attempt::bad};
  const size_t e = json_value_end(rest, b);
  if (e == npos) return {};
  auto args = object_arguments(rest.substr(b, e - b));
  if (!args) return {Attempt::bad};
  return {Attempt::done, s.size() - rest.size() + e, {ToolCallDelta{0, std::string(name), std::move(*args), id}}};
}

class MistralParser final : public Stepper {
 public:
  using Stepper::Stepper;

 private:
  bool step(ToolParse& out, bool last) override {
    const std::string_view buf = buf_;
    if (!calling_) {
      const size_t at = buf.find(kCalls);
      if (at == npos) {
        const size_t keep = last ? 0 : partial_marker(buf, {kCalls});
        content(buf.substr(0, buf.size() - keep), out);
        buf_.erase(0, buf.size() - keep);
        return false;
      }
      content(buf.substr(0, at), out);
      buf_.erase(0, at);  // buf_ starts with the marker while calling_
      calling_ = true;
      return true;
    }
    Attempt a = read_calls(buf.substr(kCalls.size()));
    if (a.state == Attempt::more && !last) return false;
    calling_ = false;
    if (a.state != Attempt::done) {  // not calls: the marker is content, and what follows is read again
      content(kCalls, out);
      buf_.erase(0, kCalls.size());
      return true;
    }
    for (auto& c : a.calls) call(std::move(c), out);
    buf_.erase(0, kCalls.size() + a.end);
    return true;
  }

  bool calling_ = false;
};

}  // namespace

std::unique_ptr<ToolCallParser> make_mistral_parser(int max_calls) { return std::make_unique<MistralParser>(max_calls); }

}  // namespace brigade::server::tool_parse
