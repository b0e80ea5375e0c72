#include "core/regex_nfa.h"

#include <map>
#include <string>

#include "core/utf8_ranges.h"

namespace brigade {

namespace {

class NfaBuilder {
 public:
  explicit NfaBuilder(size_t max_states) : max_states_(max_states) {}

  Expected<ByteNfa> run(const RegexNode& root) {
    const Frag f = build(root);
    if (overflow_)
      return invalid_argument("regex: the pattern is too large (its automaton needs more than " +
                              std::to_string(max_states_) + " states; shrink counted repeats like {n,m})");
    nfa_.start = f.in;
    nfa_.accept = f.out;
    return std::move(nfa_);
  }

 private:
  struct Frag {
    int32_t in, out;  // out: the state after the fragment (no edges yet)
  };

  int32_t add() {
    if (nfa_.states.size() >= max_states_) {
      overflow_ = true;
      return 0;
    }
    nfa_.states.emplace_back();
    return static_cast<int32_t>(nfa_.states.size() - 1);
  }
  void eps(int32_t from, int32_t to) {
    if (!overflow_) nfa_.states[static_cast<size_t>(from)].eps.push_back(to);
  }
  void edge(int32_t from, uint8_t lo, uint8_t hi, int32_t to) {
    if (!overflow_) nfa_.states[static_cast<size_t>(from)].edges.push_back({lo, hi, to});
  }

  Frag build(const RegexNode& n) {
    if (overflow_) return {0, 0};
    switch (n.kind) {
      case RegexNode::Kind::set: return set(n.set);
      case RegexNode::Kind::concat: {
        const int32_t in = add();
        int32_t cur = in;
        for (const auto& c : n.children) {
          const Frag f = build(*c);
          eps(cur, f.in);
          cur = f.out;
        }
        return {in, cur};
      }
      case RegexNode::Kind::alt: {
        const int32_t in = add(), out = add();
        for (const auto& c : n.children) {
          const Frag f = build(*c);
          eps(in, f.in);
          eps(f.out, out);
        }
        return {in, out};
      }
      case RegexNode::Kind::repeat: return repeat(*n.children[0], n.min, n.max);
      default: {  // empty (anchors were turned into empty by the parser)
        const int32_t s = add();
        return {s, s};
      }
    }
  }

  // Sequences that end alike share their tail states (most end in [80-BF] runs), so a class
  // over all of Unicode costs about a dozen states rather than two dozen.
  Frag set(const CodepointSet& cps) {
    const int32_t in = add(), out = add();
    std::vector<Utf8Sequence> seqs;
    for (const auto& [lo, hi] : cps.ranges()) utf8_sequences(lo, hi, seqs);
    std::map<std::vector<std::pair<uint8_t, uint8_t>>, int32_t> tails;  // bytes still to read → state
    for (const Utf8Sequence& s : seqs) {
      int32_t next = out;
      std::vector<std::pair<uint8_t, uint8_t>> tail;
      for (int i = s.n - 1; i >= 1; --i) {
        tail.insert(tail.begin(), s.bytes[i]);
        auto [it, fresh] = tails.emplace(tail, 0);
        if (fresh) {
          it->second = add();
          edge(it->second, s.bytes[i].first, s.bytes[i].second, next);
        }
        next = it->second;
      }
      edge(in, s.bytes[0].first, s.bytes[0].second, next);
    }
    return {in, out};
  }

  Frag repeat(const RegexNode& child, uint32_t min, uint32_t max) {
    const int32_t in = add();
    int32_t cur = in;
    for (uint32_t i = 0; i < min && !overflow_; ++i) {
      const Frag f = build(child);
      eps(cur, f.in);
      cur = f.out;
    }
    if (max == RegexNode::kInfinite) {
      const int32_t loop = add();
      const Frag f = build(child);
      eps(cur, loop);
      eps(loop, f.in);
      eps(f.out, loop);
      return {in, loop};
    }
    const int32_t out = add();
    for (uint32_t i = min; i < max && !overflow_; ++i) {  // each optional copy may be skipped to the end
      const Frag f = build(child);
      eps(cur, out);
      eps(cur, f.in);
      cur = f.out;
    }
    eps(cur, out);
    return {in, out};
  }

  size_t max_states_;
  bool overflow_ = false;
  ByteNfa nfa_;
};

}  // namespace

Expected<ByteNfa> build_nfa(const RegexNode& root, size_t max_states) { return NfaBuilder(max_states).run(root); }

}  // namespace brigade
