// CompiledSchema: a JSON Schema (the draft 2020-12 subset OpenAI structured outputs and vLLM's
// guided_json users rely on) compiled into a small graph of value nodes that SchemaMatcher
// (core/schema_matcher.h) walks byte by byte. Also the literal sets of vLLM's guided_choice.
//
// Supported: type (object, array, string, number, integer, boolean, null, and type arrays),
// properties, required, additionalProperties (false / true / a schema), enum, const, items,
// prefixItems (and draft 7's items array + additionalItems), minItems/maxItems, anyOf, oneOf
// (as anyOf), allOf with one member, $ref to #/$defs/... and #/definitions/... (recursive too),
// minLength/maxLength, minimum/maximum/exclusiveMinimum/exclusiveMaximum on integers, nullable,
// and on strings `pattern` (a regex, core/regex_syntax.h, that the whole decoded content must
// match, as outlines and xgrammar read it: not JSON Schema's unanchored search) and `format`
// date, time, date-time, uuid and email (core/schema_formats.h; any other format is ignored).
// Annotations are ignored (kAnnotations): they never change what is valid. Every other keyword
// is refused with its name.
//
// The matcher accepts a canonical subset of the valid instances (docs/architecture.md "Schema
// output"): properties in schema order, keys and enum values written as compact JSON without
// escapes beyond the necessary, integers without fraction or exponent, no \u surrogate escapes,
// no \u escapes at all in strings with a pattern or format (the characters are written as UTF-8);
// an absent additionalProperties means false (OpenAI strict mode, xgrammar's default).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/regex_dfa.h"
#include "core/status.h"

namespace brigade {

struct SchemaNode {
  enum class Kind : uint8_t { any_of, object, array, string, number, integer, literals };
  static constexpr int32_t kNone = -1;
  static constexpr int kUnreachable = 1 << 20;  // min_depth of a node without a finite instance

  struct Property {
    std::string key;  // the name as JSON text, quotes included ("\"name\"")
    int32_t node = kNone;
    bool required = false;
  };

  Kind kind = Kind::any_of;
  std::vector<int32_t> alts;  // any_of: the alternatives (none: no instance)
  // object: properties in schema order; key_order: their indices sorted by key bytes, so the
  // keys that share a prefix are a contiguous run; next_required[i]: the first required index
  // >= i (props.size() when none).
  std::vector<Property> props;
  std::vector<uint16_t> key_order;
  std::vector<uint16_t> next_required;
  int32_t additional = kNone;  // the schema of other keys' values; kNone: no other keys
  // array: item i is prefix_items[i], then items (kNone: no more items).
  std::vector<int32_t> prefix_items;
  int32_t items = kNone;
  uint32_t min_items = 0, max_items = UINT32_MAX;
  // string: length in code points; counted when either bound is set.
  uint32_t min_length = 0, max_length = UINT32_MAX;
  // string with pattern/format: the automaton over its decoded content (the length bounds are
  // folded into it, and then not counted separately); null when none.
  std::shared_ptr<const CompiledRegex> regex;
  // integer bounds (inclusive); bounded when either is set.
  bool has_min = false, has_max = false;
  int64_t min = 0, max = 0;
  // literals: distinct byte strings, sorted; raw: guided_choice text (no JSON, no whitespace).
  std::vector<std::string> literals;
  bool raw = false;

  // The fewest matcher frames an instance needs (kUnreachable: none has one).
  int min_depth = kUnreachable;

  int32_t item_at(uint32_t i) const { return i < prefix_items.size() ? prefix_items[i] : items; }
  bool counted() const { return min_length > 0 || max_length != UINT32_MAX; }
  bool bounded() const { return has_min || has_max; }
};

class CompiledSchema {
 public:
  static constexpr int kMaxDepth = 20;       // matcher frames: JSON nesting + 1 for a key
  static constexpr size_t kMaxNodes = 60000;  // node ids and literal indices fit 16 bits

  // The keywords ignored as annotations (they do not change validity).
  static const std::vector<std::string_view>& annotations();

  // A JSON Schema's text → its graph, or invalid_argument naming what was wrong (not JSON, an
  // unsupported keyword and where, a $ref outside the document, no instance fits...).
  static Expected<std::shared_ptr<const CompiledSchema>> compile(std::string_view schema_text);
  // guided_choice: the output is exactly one of `choices` (raw text; at least one).
  static Expected<std::shared_ptr<const CompiledSchema>> choice(const std::vector<std::string>& choices);

  const SchemaNode& node(int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  int32_t root() const { return root_; }
  size_t n_nodes() const { return nodes_.size(); }

  // Whether a value of node id started in a frame at stack depth `depth` (0-based) can finish
  // within kMaxDepth frames.
  bool fits(int32_t id, int depth) const { return depth + node(id).min_depth <= kMaxDepth; }

 private:
  friend class SchemaCompiler;
  std::vector<SchemaNode> nodes_;
  int32_t root_ = 0;
};

}  // namespace brigade
