// SchemaMatcher: a byte-level recognizer of the instances of a CompiledSchema (core/json_schema.h),
// the schema counterpart of JsonMatcher: feed(byte) says whether what it has read is still the
// beginning of some accepted instance, complete() whether it is one. TokenTrie::allowed walks it
// over the vocabulary and MaskCache keys masks by its state, as for json_object.
//
// The state is a few threads (anyOf alternatives still alive), each a stack of small frames (a
// container, a key, a string, a number or a literal being read) over the schema's nodes. It never
// reaches a dead end: a frame is pushed only for a node that has an instance within the depth
// left (SchemaNode::min_depth), an object closes only after its required properties, a key only
// names a property that may still come, so from every state some byte continues or it is complete.
//
// Outside strings at most kMaxBlank consecutive whitespace bytes are accepted, as in JsonMatcher;
// nothing follows a complete instance (the end ids do).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "core/json_schema.h"

namespace brigade {

class SchemaMatcher {
 public:
  static constexpr int kMaxDepth = CompiledSchema::kMaxDepth;
  static constexpr int kMaxThreads = 4;  // more live alternatives are dropped (a subset still valid)
  static constexpr int kMaxBlank = 16;

  // schema must outlive the matcher and its copies.
  explicit SchemaMatcher(const CompiledSchema& schema);
  SchemaMatcher(const SchemaMatcher& o) : schema_(o.schema_) { *this = o; }  // NOLINT: threads_ set by =
  // Copies only the frames in use (TokenTrie::allowed copies the matcher at every trie edge).
  SchemaMatcher& operator=(const SchemaMatcher& o);

  // True when the bytes read so far are still a prefix of an accepted instance (the state moves
  // on); false when not, and then for good.
  bool feed(uint8_t byte);
  bool feed(std::string_view bytes) {
    for (char c : bytes)
      if (!feed(static_cast<uint8_t>(c))) return false;
    return true;
  }
  // The bytes read are a whole accepted instance (the output may end here).
  bool complete() const;

  // Equal states accept the same continuations (MaskCache keys masks by the state).
  bool operator==(const SchemaMatcher& o) const;
  uint64_t hash() const;

  // Trivial types (no member initializers): a copy touches only the frames in use.
  struct Frame {
    uint16_t node;
    uint8_t kind;  // FrameKind (schema_matcher.cpp)
    uint8_t mode;  // per kind
    uint32_t n;    // per kind: bytes matched, items or characters read
    uint16_t a, b;  // per kind: a literal range, a property position, UTF-8 state
  };
  struct Thread {
    uint8_t depth;  // frames in use
    uint8_t blank;  // consecutive whitespace bytes outside strings
    bool negative;  // the bounded integer being read has a '-'
    int64_t value;  // magnitude of the bounded integer being read (the top frame's)
    std::array<Frame, kMaxDepth> frames;
  };

 private:
  friend class SchemaStepper;
  const CompiledSchema* schema_;
  uint8_t n_threads_ = 0;
  bool failed_ = false;
  std::array<Thread, kMaxThreads> threads_;
};

}  // namespace brigade
