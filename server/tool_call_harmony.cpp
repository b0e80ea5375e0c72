// --tool-call-parser openai: gpt-oss's harmony messages (server/harmony_parser.h) read for their
// calls alone, when no openai_gptoss reasoning parser splits the output (the analysis channel is
// then dropped: it is neither content nor a call).
#include "server/harmony_parser.h"
#include "server/tool_call_parser_base.h"

namespace brigade::server::tool_parse {

namespace {

class HarmonyToolParser final : public ToolCallParser {
 public:
  explicit HarmonyToolParser(int max_calls) : harmony_("", /*calls=*/true, max_calls) {}
  ToolParse feed(std::string_view text) override { return tools_of(harmony_.feed(text)); }
  ToolParse finish() override { return tools_of(harmony_.finish()); }
  int n_calls() const override { return harmony_.n_calls(); }

 private:
  static ToolParse tools_of(HarmonyParse p) { return {std::move(p.content), std::move(p.calls)}; }
  HarmonyParser harmony_;
};

}  // namespace

std::unique_ptr<ToolCallParser> make_harmony_parser(int max_calls) { return std::make_unique<HarmonyToolParser>(max_calls); }

}  // namespace brigade::server::tool_parse
