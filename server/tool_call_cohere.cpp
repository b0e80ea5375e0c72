// Cohere Command R7B / Command A's tool calls (vLLM's cohere_command3 and cohere_command4, SGLang's
// cohere_command4): <|START_ACTION|> then a JSON array of {"tool_call_id", "tool_name",
// "parameters"} then <|END_ACTION|>. Text outside the blocks is content, without Cohere's other
// markers (server/cohere_markers.h): the answer's <|START_RESPONSE|> / <|START_TEXT|> and their
// ends, and a <|START_THINKING|> plan's two markers when no reasoning parser took the plan out.
#include "server/cohere_markers.h"
#include "server/tool_call_parser_base.h"

namespace brigade::server::tool_parse {

namespace {

constexpr size_t npos = std::string_view::npos;
using cohere::kEndAction;
using cohere::kStartAction;

// An action block's body: a JSON array of {"tool_name": string, "parameters": object} (the model's
// tool_call_id is not kept: the server gives OpenAI ids, as SGLang does); nullopt when it is not
// one, or holds no call.
std::optional<std::vector<ToolCallDelta>> action_calls(std::string_view body) {
  return json_array_calls(body, "tool_name", {"parameters"});
}

class CohereParser final : public Stepper {
 public:
  explicit CohereParser(int max_calls) : Stepper(max_calls) {
    text_markers_ = cohere::dropped_markers();
    text_markers_.push_back(kStartAction);
  }

 private:
  bool step(ToolParse& out, bool last) override {
    const std::string_view buf = buf_;
    if (!in_action_) {
      const auto [at, len] = find_first(buf, text_markers_);
      if (at == npos) {
        const size_t keep = last ? 0 : partial_marker(buf, text_markers_);
        content(buf.substr(0, buf.size() - keep), out);
        buf_.erase(0, buf.size() - keep);
        return false;
      }
      content(buf.substr(0, at), out);
      in_action_ = buf.substr(at, len) == kStartAction;  // else a marker the content drops
      buf_.erase(0, at + len);
      return true;
    }
    const size_t at = buf.find(kEndAction);
    if (at == npos) {
      if (!last) return false;
      block(buf, false, out);  // cut off by the end of the output
      buf_.clear();
      in_action_ = false;
      return false;
    }
    block(buf.substr(0, at), true, out);
    buf_.erase(0, at + kEndAction.size());
    in_action_ = false;
    return true;
  }

  void block(std::string_view body, bool closed, ToolParse& out) {
    if (auto calls = action_calls(body)) {
      for (auto& c : *calls) call(std::move(c), out);
      return;
    }
    content(std::string(kStartAction) + std::string(body) + (closed ? std::string(kEndAction) : ""), out);
  }

  std::vector<std::string_view> text_markers_;  // what ends a piece of content: a dropped marker or an action
  bool in_action_ = false;                      // buf_ holds a block's body (its opening marker read)
};

}  // namespace

std::unique_ptr<ToolCallParser> make_cohere_parser(int max_calls) { return std::make_unique<CohereParser>(max_calls); }

}  // namespace brigade::server::tool_parse
