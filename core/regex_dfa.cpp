#include "core/regex_dfa.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "core/regex_nfa.h"
#include "core/regex_syntax.h"

namespace brigade {

namespace {

// A byte JSON can write raw inside a string, or as a one-letter escape (\b \t \n \f \r).
bool json_content_byte(uint8_t b) { return b >= 0x20 || b == '\b' || b == '\t' || b == '\n' || b == '\f' || b == '\r'; }

Status too_many_states() {
  return invalid_argument("regex: the pattern is too large (its automaton needs more than " +
                          std::to_string(CompiledRegex::kMaxStates) +
                          " states; shrink counted repeats like {n,m} or nested alternatives)");
}

}  // namespace

class DfaBuilder {
 public:
  // The subset construction of nfa; bytes outside `alphabet` lead nowhere.
  static Expected<CompiledRegex> from_nfa(const ByteNfa& nfa, const std::array<bool, 256>& alphabet) {
    CompiledRegex out;
    Closure closure(nfa);
    size_t work = 0;  // NFA edges and moves visited: the compile's time bound
    std::array<bool, 257> boundary{};
    boundary[0] = true;
    for (const ByteNfa::State& s : nfa.states) {
      for (const ByteNfa::Edge& e : s.edges) {
        boundary[e.lo] = true;
        boundary[e.hi + 1u] = true;
      }
    }
    for (int b = 1; b < 256; ++b)
      if (alphabet[static_cast<size_t>(b)] != alphabet[static_cast<size_t>(b - 1)]) boundary[static_cast<size_t>(b)] = true;
    std::vector<uint8_t> rep;  // a byte of each class
    for (int b = 0; b < 256; ++b) {
      if (boundary[static_cast<size_t>(b)]) rep.push_back(static_cast<uint8_t>(b));
      out.classes_[static_cast<size_t>(b)] = static_cast<uint16_t>(rep.size() - 1);
    }
    out.n_classes_ = rep.size();

    std::map<std::vector<int32_t>, int32_t> ids;
    std::vector<std::vector<int32_t>> sets;
    auto intern = [&](std::vector<int32_t> set) -> int32_t {
      if (set.empty()) return CompiledRegex::kDead;
      auto [it, fresh] = ids.emplace(set, static_cast<int32_t>(sets.size()));
      if (fresh) sets.push_back(std::move(set));
      return it->second;
    };
    intern(closure({nfa.start}, work));
    std::vector<int32_t> targets;
    for (size_t d = 0; d < sets.size(); ++d) {
      if (sets.size() > CompiledRegex::kMaxStates) return too_many_states();
      if (work > kMaxWork) return too_many_states();
      out.accepting_.push_back(std::binary_search(sets[d].begin(), sets[d].end(), nfa.accept));
      for (uint8_t b : rep) {
        targets.clear();
        if (alphabet[b]) {
          for (int32_t s : sets[d]) {
            const auto& edges = nfa.states[static_cast<size_t>(s)].edges;
            work += edges.size();
            for (const ByteNfa::Edge& e : edges)
              if (e.lo <= b && b <= e.hi) targets.push_back(e.to);
          }
        }
        out.table_.push_back(targets.empty() ? CompiledRegex::kDead : intern(closure(targets, work)));
      }
    }
    return out;
  }

  static Expected<CompiledRegex> product(const CompiledRegex& a, const CompiledRegex& b) {
    CompiledRegex out;
    std::map<std::pair<uint16_t, uint16_t>, uint16_t> class_ids;
    std::vector<uint8_t> rep;
    for (int byte = 0; byte < 256; ++byte) {
      const auto key = std::make_pair(a.classes_[static_cast<size_t>(byte)], b.classes_[static_cast<size_t>(byte)]);
      auto [it, fresh] = class_ids.emplace(key, static_cast<uint16_t>(rep.size()));
      if (fresh) rep.push_back(static_cast<uint8_t>(byte));
      out.classes_[static_cast<size_t>(byte)] = it->second;
    }
    out.n_classes_ = rep.size();
    std::unordered_map<uint64_t, int32_t> ids;
    std::vector<std::pair<int32_t, int32_t>> pairs;
    auto intern = [&](int32_t x, int32_t y) -> int32_t {
      if (x == CompiledRegex::kDead || y == CompiledRegex::kDead) return CompiledRegex::kDead;
      const uint64_t key = (static_cast<uint64_t>(x) << 32) | static_cast<uint32_t>(y);
      auto [it, fresh] = ids.emplace(key, static_cast<int32_t>(pairs.size()));
      if (fresh) pairs.emplace_back(x, y);
      return it->second;
    };
    intern(a.start(), b.start());
    for (size_t d = 0; d < pairs.size(); ++d) {
      if (pairs.size() > CompiledRegex::kMaxStates) return too_many_states();
      const auto [x, y] = pairs[d];
      out.accepting_.push_back(a.accepting(x) && b.accepting(y));
      for (uint8_t byte : rep) out.table_.push_back(intern(a.next(x, byte), b.next(y, byte)));
    }
    return out;
  }

  // Keeps the states from which an accepting one is reachable (start stays 0); invalid_argument
  // when the start is not one of them.
  static Expected<std::shared_ptr<const CompiledRegex>> prune(CompiledRegex in, const char* nothing) {
    const size_t n = in.accepting_.size(), k = in.n_classes_;
    std::vector<std::vector<int32_t>> preds(n);
    for (size_t s = 0; s < n; ++s)
      for (size_t c = 0; c < k; ++c)
        if (int32_t t = in.table_[s * k + c]; t != CompiledRegex::kDead) preds[static_cast<size_t>(t)].push_back(static_cast<int32_t>(s));
    std::vector<uint8_t> live(n, 0);
    std::vector<int32_t> stack;
    for (size_t s = 0; s < n; ++s)
      if (in.accepting_[s]) live[s] = 1, stack.push_back(static_cast<int32_t>(s));
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      for (int32_t p : preds[static_cast<size_t>(s)])
        if (!live[static_cast<size_t>(p)]) live[static_cast<size_t>(p)] = 1, stack.push_back(p);
    }
    if (n == 0 || !live[0]) return invalid_argument(std::string("regex: ") + nothing);
    std::vector<int32_t> id(n, CompiledRegex::kDead);
    int32_t n_live = 0;
    for (size_t s = 0; s < n; ++s)
      if (live[s]) id[s] = n_live++;
    auto out = std::make_shared<CompiledRegex>();
    out->classes_ = in.classes_;
    out->n_classes_ = k;
    for (size_t s = 0; s < n; ++s) {
      if (!live[s]) continue;
      out->accepting_.push_back(in.accepting_[s]);
      for (size_t c = 0; c < k; ++c) {
        const int32_t t = in.table_[s * k + c];
        out->table_.push_back(t == CompiledRegex::kDead ? t : id[static_cast<size_t>(t)]);
      }
    }
    return std::shared_ptr<const CompiledRegex>(std::move(out));
  }

 private:
  static constexpr size_t kMaxWork = size_t{1} << 25;  // ~0.1 s

  // The states reachable from a set without a byte that matter to a DFA state: those with
  // edges, and the accept state (sorted: the DFA state's identity).
  class Closure {
   public:
    explicit Closure(const ByteNfa& nfa) : nfa_(nfa), mark_(nfa.states.size(), 0) {}
    std::vector<int32_t> operator()(const std::vector<int32_t>& from, size_t& work) {
      ++generation_;
      std::vector<int32_t> out;
      stack_.assign(from.begin(), from.end());
      while (!stack_.empty()) {
        const int32_t s = stack_.back();
        stack_.pop_back();
        if (mark_[static_cast<size_t>(s)] == generation_) continue;
        mark_[static_cast<size_t>(s)] = generation_;
        const ByteNfa::State& st = nfa_.states[static_cast<size_t>(s)];
        work += 1 + st.eps.size();
        if (!st.edges.empty() || s == nfa_.accept) out.push_back(s);
        stack_.insert(stack_.end(), st.eps.begin(), st.eps.end());
      }
      std::sort(out.begin(), out.end());
      return out;
    }

   private:
    const ByteNfa& nfa_;
    std::vector<uint32_t> mark_;  // == generation_: visited in this call
    uint32_t generation_ = 0;
    std::vector<int32_t> stack_;
  };
};

Expected<std::shared_ptr<const CompiledRegex>> CompiledRegex::compile(std::string_view pattern, Mode mode) {
  BRIGADE_ASSIGN_OR_RETURN(std::unique_ptr<RegexNode> tree, parse_regex(pattern));
  BRIGADE_ASSIGN_OR_RETURN(ByteNfa nfa, build_nfa(*tree, kMaxNfaStates));
  std::array<bool, 256> alphabet;
  for (int b = 0; b < 256; ++b) alphabet[static_cast<size_t>(b)] = mode == Mode::text || json_content_byte(static_cast<uint8_t>(b));
  BRIGADE_ASSIGN_OR_RETURN(CompiledRegex dfa, DfaBuilder::from_nfa(nfa, alphabet));
  return DfaBuilder::prune(std::move(dfa), mode == Mode::text
                                               ? "the pattern matches no text"
                                               : "the pattern matches no string (control characters other than "
                                                 "\\b \\t \\n \\f \\r are not generated inside JSON strings)");
}

Expected<std::shared_ptr<const CompiledRegex>> CompiledRegex::intersect(const CompiledRegex& a, const CompiledRegex& b) {
  BRIGADE_ASSIGN_OR_RETURN(CompiledRegex dfa, DfaBuilder::product(a, b));
  return DfaBuilder::prune(std::move(dfa), "no string satisfies both constraints");
}

}  // namespace brigade
