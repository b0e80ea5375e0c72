#include "core/grammar.h"

#include <algorithm>

#include "core/grammar_matcher.h"

namespace brigade {

namespace {

struct Edge {
  int32_t to;
  bool grows;  // something follows the reference in its alternative (the stack gets deeper)
};
using Graph = std::vector<std::vector<Edge>>;

// Strongly connected components (iterative Kosaraju: a grammar can have ~10^5 rules).
std::vector<int32_t> components(const Graph& g) {
  const size_t n = g.size();
  std::vector<int32_t> order;
  std::vector<char> seen(n, 0);
  for (size_t s = 0; s < n; ++s) {
    if (seen[s]) continue;
    std::vector<std::pair<int32_t, size_t>> stack = {{static_cast<int32_t>(s), 0}};
    seen[s] = 1;
    while (!stack.empty()) {
      auto& [v, i] = stack.back();
      if (i < g[static_cast<size_t>(v)].size()) {
        const int32_t w = g[static_cast<size_t>(v)][i++].to;
        if (!seen[static_cast<size_t>(w)]) {
          seen[static_cast<size_t>(w)] = 1;
          stack.push_back({w, 0});
        }
      } else {
        order.push_back(v);
        stack.pop_back();
      }
    }
  }
  std::vector<std::vector<int32_t>> rev(n);
  for (size_t v = 0; v < n; ++v)
    for (const Edge& e : g[v]) rev[static_cast<size_t>(e.to)].push_back(static_cast<int32_t>(v));
  std::vector<int32_t> comp(n, -1);
  int32_t n_comp = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (comp[static_cast<size_t>(*it)] >= 0) continue;
    std::vector<int32_t> todo = {*it};
    comp[static_cast<size_t>(*it)] = n_comp;
    while (!todo.empty()) {
      const int32_t v = todo.back();
      todo.pop_back();
      for (int32_t w : rev[static_cast<size_t>(v)])
        if (comp[static_cast<size_t>(w)] < 0) {
          comp[static_cast<size_t>(w)] = n_comp;
          todo.push_back(w);
        }
    }
    ++n_comp;
  }
  return comp;
}

// The rules on a shortest path from `from` to `to` in g (both included).
std::vector<int32_t> path(const Graph& g, int32_t from, int32_t to) {
  std::vector<int32_t> parent(g.size(), -2);
  std::vector<int32_t> queue = {from};
  parent[static_cast<size_t>(from)] = -1;
  for (size_t i = 0; i < queue.size() && parent[static_cast<size_t>(to)] == -2; ++i)
    for (const Edge& e : g[static_cast<size_t>(queue[i])])
      if (parent[static_cast<size_t>(e.to)] == -2) {
        parent[static_cast<size_t>(e.to)] = queue[i];
        queue.push_back(e.to);
      }
  std::vector<int32_t> p;
  for (int32_t v = to; v != -1 && v != -2; v = parent[static_cast<size_t>(v)]) p.push_back(v);
  std::reverse(p.begin(), p.end());
  return p;
}

}  // namespace

class GrammarBuilder {
 public:
  explicit GrammarBuilder(const GrammarSyntax& syntax) : s_(syntax) {}

  // Left recursion: a cycle of references, each reached through rules that can match "" only.
  Status check_left_recursion() const {
    const size_t n = s_.rules.size();
    std::vector<char> empty_alt(n, 0), nullable(n, 0);
    for (size_t r = 0; r < n; ++r)
      for (const auto& alt : s_.rules[r].alternatives) empty_alt[r] |= alt.empty();
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const auto& alt : s_.rules[r].alternatives) {
          const bool all = std::all_of(alt.begin(), alt.end(), [&](const GrammarTerm& t) {
            return t.kind == GrammarTerm::Kind::rule && nullable[static_cast<size_t>(t.rule)];
          });
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    Graph seen_by_llama(n), all(n);  // edges through rules with an empty alternative / through nullable rules
    for (size_t r = 0; r < n; ++r)
      for (const auto& alt : s_.rules[r].alternatives) {
        bool via_empty_alts = true;
        for (size_t i = 0; i < alt.size() && alt[i].kind == GrammarTerm::Kind::rule; ++i) {
          const int32_t to = alt[i].rule;
          if (via_empty_alts) seen_by_llama[r].push_back({to, false});
          all[r].push_back({to, i + 1 < alt.size()});
          via_empty_alts = via_empty_alts && empty_alt[static_cast<size_t>(to)];
          if (!nullable[static_cast<size_t>(to)]) break;
        }
      }
    BRIGADE_RETURN_IF_ERROR(refuse_cycle(seen_by_llama, false));
    return refuse_cycle(all, true);
  }

  // Flattens the rules; code points are checked by then.
  std::shared_ptr<CompiledGrammar> flatten() const {
    auto g = std::make_shared<CompiledGrammar>();
    g->root_ = s_.root;
    for (const GrammarRule& rule : s_.rules) {
      g->names_.push_back(rule.name);
      auto& alts = g->alts_.emplace_back();
      for (const auto& alt : rule.alternatives) {
        alts.push_back(static_cast<int32_t>(g->code_.size()));
        for (const GrammarTerm& t : alt) {
          if (t.kind == GrammarTerm::Kind::rule) {
            g->code_.push_back(-t.rule - 2);
            continue;
          }
          g->code_.push_back(static_cast<int32_t>(g->classes_.size()));
          g->classes_.push_back(to_class(t));
        }
        g->code_.push_back(CompiledGrammar::kEnd);
      }
    }
    return g;
  }

 private:
  static CompiledGrammar::CharClass to_class(const GrammarTerm& t) {
    CompiledGrammar::CharClass c;
    c.any = t.kind == GrammarTerm::Kind::any;
    c.negated = t.negated;
    c.ranges = t.set.ranges();
    for (uint32_t cp = 0; cp < 128; ++cp) {
      bool in = c.any;
      for (const auto& [lo, hi] : c.ranges) in = in || (lo <= cp && cp <= hi);
      if (in != c.negated || c.any) c.ascii[cp / 64] |= uint64_t{1} << (cp % 64);
    }
    return c;
  }

  Status refuse_cycle(const Graph& g, bool growing_only) const {
    const std::vector<int32_t> comp = components(g);
    for (size_t u = 0; u < g.size(); ++u)
      for (const Edge& e : g[u]) {
        if (comp[u] != comp[static_cast<size_t>(e.to)] || (growing_only && !e.grows)) continue;
        std::string chain;
        for (int32_t r : path(g, e.to, static_cast<int32_t>(u))) chain += s_.rules[static_cast<size_t>(r)].name + " -> ";
        chain += s_.rules[static_cast<size_t>(e.to)].name;
        const GrammarRule& rule = s_.rules[u];
        return invalid_argument("grammar line " + std::to_string(rule.line) + ", column " + std::to_string(rule.column) +
                                ": left recursion: rule '" + rule.name + "' can reach itself before reading any character (" +
                                chain + ")" + (growing_only ? ", through rules that can match nothing" : "") +
                                "; write the repetition with * or + instead (e.g. list ::= item (\",\" item)*)");
      }
    return Status::ok();
  }

  const GrammarSyntax& s_;
};

Expected<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::compile(std::string_view text) {
  auto syntax = parse_gbnf(text);
  if (!syntax.has_value()) return syntax.status();
  GrammarBuilder builder(*syntax);
  BRIGADE_RETURN_IF_ERROR(builder.check_left_recursion());
  std::shared_ptr<const CompiledGrammar> g = builder.flatten();
  const GrammarMatcher start(*g);
  if (start.overflowed())
    return invalid_argument("the grammar is too ambiguous: its start alone has over " + std::to_string(GrammarMatcher::kMaxStacks) +
                            " parses in progress, or one nested over " + std::to_string(GrammarMatcher::kMaxDepth) +
                            " deep (merge alternatives that begin alike)");
  return g;
}

bool CompiledGrammar::matches(int32_t pos, uint32_t cp) const {
  const CharClass& c = term(pos);
  if (cp < 128) return (c.ascii[cp / 64] >> (cp % 64)) & 1;
  if (c.any) return true;
  auto it = std::upper_bound(c.ranges.begin(), c.ranges.end(), cp, [](uint32_t v, const auto& r) { return v < r.first; });
  const bool in = it != c.ranges.begin() && cp <= std::prev(it)->second;
  return in != c.negated;
}

bool CompiledGrammar::may_match_partial(int32_t pos, uint32_t value, int n_remain) const {
  if (n_remain == 1 && value < 2) return false;  // C0 C1: an overlong form of an ASCII byte
  const int shift = 6 * n_remain;
  uint32_t low = value << shift;
  const uint32_t high = low | ((1u << shift) - 1);
  if (low == 0) low = n_remain == 2 ? 0x800 : n_remain == 3 ? 0x10000 : low;
  const CharClass& c = term(pos);
  if (c.any) return true;
  for (const auto& [lo, hi] : c.ranges) {
    if (hi < low || lo > high) continue;
    if (!c.negated) return true;
    if (lo <= low && high <= hi) return false;  // every completion is excluded
  }
  return c.negated;
}

}  // namespace brigade
