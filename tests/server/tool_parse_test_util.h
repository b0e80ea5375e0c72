// Shared by the tool-call parser tests: runs a parser over a text, whole or in pieces, and
// collects what it released.
#pragma once

#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

#include "server/tool_call_parser.h"

namespace brigade::server::testing {

struct Call {
  std::string name, arguments, id = {};
  bool operator==(const Call&) const = default;
};
inline std::ostream& operator<<(std::ostream& os, const Call& c) {
  return os << c.name << "(" << c.arguments << ")" << (c.id.empty() ? "" : " id " + c.id);
}
struct Result {
  std::string content;
  std::vector<Call> calls;
};

inline void apply(const ToolParse& p, Result& r) {
  r.content += p.content;
  for (const auto& d : p.calls) {
    if (!d.name.empty()) {
      ASSERT_EQ(d.index, static_cast<int>(r.calls.size())) << "calls are numbered in order";
      r.calls.push_back({d.name, "", d.id});
    }
    ASSERT_LT(d.index, static_cast<int>(r.calls.size()));
    r.calls[static_cast<size_t>(d.index)].arguments += d.arguments;
  }
}

struct RunOptions {
  int max_calls = INT_MAX;
  std::string named;
  std::string key = "arguments";
  std::vector<ToolFunction> functions;
};

// Feeds the pieces in order, then finishes.
inline Result run_pieces(ToolParserKind kind, const std::vector<std::string>& pieces, const RunOptions& o = {}) {
  auto parser = make_tool_call_parser(kind, o.max_calls, o.named, o.key, o.functions);
  Result r;
  for (const std::string& p : pieces) apply(parser->feed(p), r);
  apply(parser->finish(), r);
  return r;
}

// Feeds `text` in pieces of `step` bytes (0: whole).
inline Result run(ToolParserKind kind, const std::string& text, size_t step = 0, const RunOptions& o = {}) {
  std::vector<std::string> pieces;
  if (step == 0) step = text.size() + 1;
  for (size_t i = 0; i < text.size(); i += step) pieces.push_back(text.substr(i, step));
  return run_pieces(kind, pieces, o);
}

// Every split gives the same result as the whole text.
inline void expect_any_split(ToolParserKind kind, const std::string& text, const std::string& content,
                             const std::vector<Call>& calls, const RunOptions& o = {}) {
  for (size_t step : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{13}}) {
    SCOPED_TRACE("step " + std::to_string(step));
    Result r = run(kind, text, step, o);
    EXPECT_EQ(r.content, content);
    EXPECT_EQ(r.calls, calls);
  }
}

// The same, and the text cut in two at every byte.
inline void expect_every_split(ToolParserKind kind, const std::string& text, const std::string& content,
                               const std::vector<Call>& calls, const RunOptions& o = {}) {
  expect_any_split(kind, text, content, calls, o);
  for (size_t cut = 1; cut < text.size(); ++cut) {
    Result r = run_pieces(kind, {text.substr(0, cut), text.substr(cut)}, o);
    ASSERT_EQ(r.content, content) << "cut at " << cut;
    ASSERT_EQ(r.calls, calls) << "cut at " << cut;
  }
}

}  // namespace brigade::server::testing
