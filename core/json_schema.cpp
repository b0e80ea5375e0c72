#include "core/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/schema_formats.h"

namespace brigade {

namespace {

using Json = nlohmann::ordered_json;

// The keywords SchemaCompiler reads; every other one (not an annotation) is refused by name.
const std::set<std::string_view> kKeywords = {
    "type",     "properties",    "required",  "additionalProperties", "enum",          "const",
    "items",    "prefixItems",   "additionalItems", "minItems",       "maxItems",      "anyOf",
    "oneOf",    "allOf",         "$ref",      "$defs",                "definitions",   "minLength",
    "maxLength", "minimum",      "maximum",   "exclusiveMinimum",     "exclusiveMaximum", "nullable",
    "pattern",  "format"};

// Keywords that may stand beside $ref, anyOf/oneOf, allOf and enum/const without changing them.
const std::set<std::string_view> kInert = {"$defs", "definitions", "nullable"};

bool is_annotation(std::string_view k) {
  const auto& a = CompiledSchema::annotations();
  return std::find(a.begin(), a.end(), k) != a.end();
}

bool type_has(const Json& v, std::string_view type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "string") return v.is_string();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "number") return v.is_number();
  // integer: JSON Schema counts 1.0 as an integer.
  return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
}

}  // namespace

const std::vector<std::string_view>& CompiledSchema::annotations() {
  static const std::vector<std::string_view> kAnnotations = {
      "title", "description", "default", "examples", "$schema", "$id", "$comment",
      "deprecated", "readOnly", "writeOnly", "$anchor"};
  return kAnnotations;
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const Json& doc) : doc_(doc) {}

  Expected<std::shared_ptr<const CompiledSchema>> run() {
    BRIGADE_ASSIGN_OR_RETURN(out_.root_, compile(doc_, "#"));
    return finish();
  }

  Expected<std::shared_ptr<const CompiledSchema>> choice(const std::vector<std::string>& choices) {
    if (choices.empty()) return invalid_argument("guided_choice needs at least one choice");
    SchemaNode n;
    n.kind = SchemaNode::Kind::literals;
    n.raw = true;
    n.literals = choices;
    out_.root_ = add(std::move(n));
    return finish();
  }

 private:
  Expected<std::shared_ptr<const CompiledSchema>> finish() {
    for (SchemaNode& n : out_.nodes_) {
      std::sort(n.literals.begin(), n.literals.end());
      n.literals.erase(std::unique(n.literals.begin(), n.literals.end()), n.literals.end());
      if (n.literals.size() > 0xFFFF || n.props.size() > 0xFFFF)
        return invalid_argument("the schema has more than 65535 enum values or properties in one place");
    }
    if (out_.nodes_.size() > CompiledSchema::kMaxNodes)
      return invalid_argument("the schema is too large (more than " + std::to_string(CompiledSchema::kMaxNodes) + " nodes)");
    flatten_alternatives();
    min_depths();
    if (out_.node(out_.root_).min_depth > CompiledSchema::kMaxDepth)
      return invalid_argument("the schema has no instance (or none nested at most " +
                              std::to_string(CompiledSchema::kMaxDepth - 1) + " levels deep)");
    return std::make_shared<const CompiledSchema>(std::move(out_));
  }

  int32_t add(SchemaNode n) {
    out_.nodes_.push_back(std::move(n));
    return static_cast<int32_t>(out_.nodes_.size() - 1);
  }
  SchemaNode& at(int32_t id) { return out_.nodes_[static_cast<size_t>(id)]; }

  static Status error(const std::string& path, const std::string& what) {
    return invalid_argument("JSON schema at " + path + ": " + what);
  }

  // A schema's node; `nullable: true` beside anything adds null.
  Expected<int32_t> compile(const Json& s, const std::string& path) {
    struct Nesting {  // subschemas and $ref chains nest at most kMaxNesting deep (the C++ stack)
      int& depth;
      explicit Nesting(int& d) : depth(++d) {}
      ~Nesting() { --depth; }
    } nesting(nesting_);
    if (nesting_ > kMaxNesting) return error(path, "subschemas nest more than " + std::to_string(kMaxNesting) + " deep");
    BRIGADE_ASSIGN_OR_RETURN(int32_t id, compile_body(s, path));
    if (!s.is_object() || !nullable(s) || s.contains("type") || s.contains("anyOf") || s.contains("oneOf")) return id;
    SchemaNode n;  // $ref, allOf, enum or an inferred type beside nullable
    n.alts = {id, literal({"null"})};
    return add(std::move(n));
  }

  Expected<int32_t> compile_body(const Json& s, const std::string& path) {
    if (out_.nodes_.size() > CompiledSchema::kMaxNodes) return error(path, "the schema is too large");
    if (s.is_boolean()) return s.get<bool>() ? any() : add(SchemaNode{});  // false: no instance
    if (!s.is_object()) return error(path, "a schema must be an object or a boolean (got " + std::string(s.type_name()) + ")");
    for (const auto& [k, v] : s.items()) {
      if (!kKeywords.contains(k) && !is_annotation(k))
        return error(path, "keyword '" + k + "' is not supported (supported: type, properties, required, "
                           "additionalProperties, enum, const, items, prefixItems, minItems, maxItems, anyOf, "
                           "oneOf, allOf with one schema, $ref, minLength, maxLength, pattern, format, "
                           "minimum/maximum on integers)");
    }
    if (s.contains("$ref")) {
      BRIGADE_RETURN_IF_ERROR(only_beside(s, "$ref", {}, path));
      return ref(s["$ref"], path);
    }
    if (s.contains("allOf")) {
      const Json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1) return error(path, "allOf is supported with exactly one schema");
      BRIGADE_RETURN_IF_ERROR(only_beside(s, "allOf", {}, path));
      return compile(all[0], path + "/allOf/0");
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const Json& alts = s[key];
      if (!alts.is_array() || alts.empty()) return error(path, std::string(key) + " must be a non-empty array");
      BRIGADE_RETURN_IF_ERROR(only_beside(s, key, {}, path));
      SchemaNode n;
      for (size_t i = 0; i < alts.size(); ++i) {
        BRIGADE_ASSIGN_OR_RETURN(int32_t alt, compile(alts[i], path + "/" + key + "/" + std::to_string(i)));
        n.alts.push_back(alt);
      }
      if (nullable(s)) n.alts.push_back(literal({"null"}));
      return add(std::move(n));
    }
    BRIGADE_ASSIGN_OR_RETURN(std::vector<std::string> types, types_of(s, path));
    if (s.contains("enum") || s.contains("const")) return enumeration(s, types, path);
    if (types.empty()) return any();
    SchemaNode n;
    for (const std::string& t : types) {
      BRIGADE_ASSIGN_OR_RETURN(int32_t alt, typed(s, t, path));
      n.alts.push_back(alt);
    }
    return n.alts.size() == 1 ? n.alts[0] : add(std::move(n));
  }

  // `keyword` may stand only beside annotations and kInert (besides `also`).
  static Status only_beside(const Json& s, const std::string& keyword, const std::set<std::string_view>& also,
                            const std::string& path) {
    for (const auto& [k, v] : s.items()) {
      if (k == keyword || is_annotation(k) || kInert.contains(k) || also.contains(k)) continue;
      return error(path, "'" + keyword + "' beside '" + k + "' is not supported (combine them inside it)");
    }
    return Status::ok();
  }

  static bool nullable(const Json& s) { return s.contains("nullable") && s["nullable"] == Json(true); }

  // The types an instance may have: `type` (string or array), else inferred from the keywords
  // present (a subset of what JSON Schema allows, so the output still validates); empty: any.
  Expected<std::vector<std::string>> types_of(const Json& s, const std::string& path) {
    static const std::set<std::string> kTypes = {"object", "array", "string", "number", "integer", "boolean", "null"};
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      const Json list = t.is_array() ? t : Json::array({t});
      for (const Json& e : list) {
        if (!e.is_string() || !kTypes.contains(e.get<std::string>()))
          return error(path, "'type' must be one of object, array, string, number, integer, boolean, null "
                             "or an array of them (got " + e.dump() + ")");
        if (std::find(types.begin(), types.end(), e.get<std::string>()) == types.end()) types.push_back(e.get<std::string>());
      }
      if (types.empty()) return error(path, "'type' is an empty array");
    } else {
      auto has = [&](std::initializer_list<const char*> keys) {
        return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
      };
      if (has({"properties", "required", "additionalProperties"})) types.push_back("object");
      if (has({"items", "prefixItems", "additionalItems", "minItems", "maxItems"})) types.push_back("array");
      if (has({"minLength", "maxLength", "pattern"})) types.push_back("string");
      if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) types.push_back("integer");
    }
    const bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
    if (has_number) std::erase(types, "integer");  // number covers it
    if (nullable(s) && s.contains("type") && std::find(types.begin(), types.end(), "null") == types.end()) types.push_back("null");
    return types;
  }

  Expected<int32_t> typed(const Json& s, const std::string& type, const std::string& path) {
    if (type == "null") return literal({"null"});
    if (type == "boolean") return literal({"false", "true"});
    if (type == "object") return object(s, path);
    if (type == "array") return array(s, path);
    SchemaNode n;
    if (type == "string") {
      n.kind = SchemaNode::Kind::string;
      BRIGADE_RETURN_IF_ERROR(read_count(s, "minLength", path, n.min_length));
      BRIGADE_RETURN_IF_ERROR(read_count(s, "maxLength", path, n.max_length));
      BRIGADE_RETURN_IF_ERROR(string_regex(s, path, n));
    } else if (type == "number") {
      n.kind = SchemaNode::Kind::number;
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(k)) return error(path, std::string("'") + k + "' is supported on type integer only, not number");
    } else {
      n.kind = SchemaNode::Kind::integer;
      BRIGADE_RETURN_IF_ERROR(integer_bounds(s, path, n));
    }
    return add(std::move(n));
  }

  // pattern and format (an enforced one) → n.regex, with minLength/maxLength folded in.
  static Status string_regex(const Json& s, const std::string& path, SchemaNode& n) {
    std::vector<std::pair<std::string, std::string>> parts;  // (what, regex)
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return error(path, "'pattern' must be a string (a regex)");
      parts.emplace_back("pattern", s["pattern"].get<std::string>());
    }
    if (s.contains("format")) {
      if (!s["format"].is_string()) return error(path, "'format' must be a string");
      const std::string_view re = format_regex(s["format"].get<std::string>());
      if (!re.empty()) parts.emplace_back("format " + s["format"].get<std::string>(), std::string(re));
    }
    if (parts.empty()) return Status::ok();
    if (n.counted()) {
      const std::string hi = n.max_length == UINT32_MAX ? "" : std::to_string(n.max_length);
      parts.emplace_back("minLength/maxLength", "[\\s\\S]{" + std::to_string(n.min_length) + "," + hi + "}");
    }
    for (const auto& [what, pattern] : parts) {
      auto re = CompiledRegex::compile(pattern, CompiledRegex::Mode::json_string);
      if (!re.has_value()) return error(path, what + ": " + re.status().message());
      if (n.regex) re = CompiledRegex::intersect(*n.regex, **re);
      if (!re.has_value()) return error(path, "pattern, format and length bounds together: " + re.status().message());
      n.regex = *re;
    }
    n.min_length = 0;
    n.max_length = UINT32_MAX;
    return Status::ok();
  }

  static Status read_count(const Json& s, const char* key, const std::string& path, uint32_t& out) {
    if (!s.contains(key)) return Status::ok();
    const Json& v = s[key];
    if (!v.is_number_unsigned() || v.get<uint64_t>() >= UINT32_MAX)
      return error(path, std::string("'") + key + "' must be a non-negative integer below 2^32 (got " + v.dump() + ")");
    out = static_cast<uint32_t>(v.get<uint64_t>());
    return Status::ok();
  }

  static Status integer_bounds(const Json& s, const std::string& path, SchemaNode& n) {
    constexpr double kLimit = 9.2e18;  // inside int64 with room for rounding
    for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      if (!s.contains(key)) continue;
      const Json& v = s[key];
      if (!v.is_number() || std::fabs(v.get<double>()) > kLimit)
        return error(path, std::string("'") + key + "' must be a number within +-9.2e18 (got " + v.dump() + ")");
      const double x = v.get<double>();
      const std::string_view k = key;
      if (k == "minimum" || k == "exclusiveMinimum") {
        const int64_t lo = k == "minimum" ? static_cast<int64_t>(std::ceil(x)) : static_cast<int64_t>(std::floor(x)) + 1;
        n.min = n.has_min ? std::max(n.min, lo) : lo;
        n.has_min = true;
      } else {
        const int64_t hi = k == "maximum" ? static_cast<int64_t>(std::floor(x)) : static_cast<int64_t>(std::ceil(x)) - 1;
        n.max = n.has_max ? std::min(n.max, hi) : hi;
        n.has_max = true;
      }
    }
    return Status::ok();
  }

  Expected<int32_t> object(const Json& s, const std::string& path) {
    SchemaNode n;
    n.kind = SchemaNode::Kind::object;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return error(path, "'properties' must be an object");
      for (const auto& [name, sub] : s["properties"].items()) {
        BRIGADE_ASSIGN_OR_RETURN(int32_t id, compile(sub, path + "/properties/" + name));
        n.props.push_back({Json(name).dump(), id, false});
      }
    }
    if (s.contains("required")) {
      if (!s["required"].is_array()) return error(path, "'required' must be an array of property names");
      for (const Json& r : s["required"]) {
        const std::string key = r.is_string() ? Json(r).dump() : "";
        auto it = std::find_if(n.props.begin(), n.props.end(), [&](const SchemaNode::Property& p) { return p.key == key; });
        if (it == n.props.end())
          return error(path, "required property " + r.dump() + " is not listed in 'properties' (add it there)");
        it->required = true;
      }
    }
    if (s.contains("additionalProperties")) {
      BRIGADE_ASSIGN_OR_RETURN(n.additional, optional_schema(s["additionalProperties"], path + "/additionalProperties"));
    }
    for (size_t i = 0; i < n.props.size(); ++i) n.key_order.push_back(static_cast<uint16_t>(i));
    std::sort(n.key_order.begin(), n.key_order.end(), [&](uint16_t a, uint16_t b) { return n.props[a].key < n.props[b].key; });
    n.next_required.assign(n.props.size() + 1, static_cast<uint16_t>(n.props.size()));
    for (size_t i = n.props.size(); i-- > 0;)
      n.next_required[i] = n.props[i].required ? static_cast<uint16_t>(i) : n.next_required[i + 1];
    return add(std::move(n));
  }

  // A schema, where `false` means "nothing here" (kNone) rather than a node without instances.
  Expected<int32_t> optional_schema(const Json& s, const std::string& path) {
    if (s.is_boolean() && !s.get<bool>()) return SchemaNode::kNone;
    return compile(s, path);
  }

  Expected<int32_t> array(const Json& s, const std::string& path) {
    SchemaNode n;
    n.kind = SchemaNode::Kind::array;
    const bool draft7_tuple = s.contains("items") && s["items"].is_array();
    const char* prefix_key = draft7_tuple ? "items" : "prefixItems";
    if (s.contains(prefix_key)) {
      if (!s[prefix_key].is_array()) return error(path, "'prefixItems' must be an array of schemas");
      for (size_t i = 0; i < s[prefix_key].size(); ++i) {
        BRIGADE_ASSIGN_OR_RETURN(int32_t id, compile(s[prefix_key][i], path + "/" + prefix_key + "/" + std::to_string(i)));
        n.prefix_items.push_back(id);
      }
    }
    const char* rest_key = draft7_tuple ? "additionalItems" : "items";
    if (s.contains(rest_key)) {
      BRIGADE_ASSIGN_OR_RETURN(n.items, optional_schema(s[rest_key], path + "/" + rest_key));
    } else {
      n.items = any();
    }
    BRIGADE_RETURN_IF_ERROR(read_count(s, "minItems", path, n.min_items));
    BRIGADE_RETURN_IF_ERROR(read_count(s, "maxItems", path, n.max_items));
    return add(std::move(n));
  }

  // enum/const: the values (as compact JSON) that also have one of `types` (when given).
  Expected<int32_t> enumeration(const Json& s, const std::vector<std::string>& types, const std::string& path) {
    BRIGADE_RETURN_IF_ERROR(only_beside(s, s.contains("enum") ? "enum" : "const", {"type", "enum", "const"}, path));
    std::vector<Json> values;
    if (s.contains("enum")) {
      if (!s["enum"].is_array()) return error(path, "'enum' must be an array");
      values.assign(s["enum"].begin(), s["enum"].end());
    }
    if (s.contains("const")) {  // with enum too: the const if it is one of them
      const bool listed = !s.contains("enum") || std::find(values.begin(), values.end(), s["const"]) != values.end();
      values = listed ? std::vector<Json>{s["const"]} : std::vector<Json>{};
    }
    std::vector<std::string> literals;
    for (const Json& v : values) {
      const bool typed_ok = types.empty() || std::any_of(types.begin(), types.end(), [&](const std::string& t) { return type_has(v, t); });
      if (typed_ok) literals.push_back(v.dump());
    }
    return literal(std::move(literals));
  }

  int32_t literal(std::vector<std::string> literals) {
    SchemaNode n;
    n.kind = SchemaNode::Kind::literals;
    n.literals = std::move(literals);
    return add(std::move(n));
  }

  Expected<int32_t> ref(const Json& r, const std::string& path) {
    if (!r.is_string()) return error(path, "'$ref' must be a string");
    const std::string target = r.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    const Json* s = nullptr;
    if (target == "#") {
      s = &doc_;
    } else {
      for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
        const std::string_view p = prefix;
        if (target.rfind(p, 0) != 0) continue;
        const std::string name = target.substr(p.size()), section(p.substr(2, p.size() - 3));  // "$defs"
        auto defs = doc_.find(section);
        if (defs != doc_.end() && defs->is_object() && defs->contains(name)) s = &(*defs)[name];
      }
    }
    if (s == nullptr)
      return error(path, "'$ref' " + r.dump() + " does not name a schema under #/$defs/ or #/definitions/ of this document");
    // The node exists before its body is compiled, so a recursive reference finds it.
    const int32_t id = add(SchemaNode{});
    refs_[target] = id;
    BRIGADE_ASSIGN_OR_RETURN(int32_t body, compile(*s, target));
    at(id).alts = {body};  // a one-alternative any_of: the matcher steps through it
    return id;
  }

  // Any JSON value (an absent schema, `true`, `items` left out): one shared graph.
  int32_t any() {
    if (any_ >= 0) return any_;
    any_ = add(SchemaNode{});
    SchemaNode obj, arr, str, num;
    obj.kind = SchemaNode::Kind::object;
    obj.additional = any_;
    obj.next_required = {0};
    arr.kind = SchemaNode::Kind::array;
    arr.items = any_;
    str.kind = SchemaNode::Kind::string;
    num.kind = SchemaNode::Kind::number;
    const int32_t lits = literal({"false", "null", "true"});
    at(any_).alts = {add(std::move(obj)), add(std::move(arr)), add(std::move(str)), add(std::move(num)), lits};
    return any_;
  }

  // An anyOf's alternatives become the non-anyOf nodes it reaches through anyOf and $ref nodes,
  // so the matcher never steps from one anyOf into another: a cycle of them ({"$ref": "#"} in
  // an anyOf) ends here instead of recursing forever, and contributes nothing.
  void flatten_alternatives() {
    for (SchemaNode& n : out_.nodes_) {
      if (n.kind != SchemaNode::Kind::any_of) continue;
      std::vector<int32_t> leaves, stack = n.alts;
      std::set<int32_t> seen;
      while (!stack.empty()) {
        const int32_t id = stack.back();
        stack.pop_back();
        if (!seen.insert(id).second) continue;
        const SchemaNode& a = out_.node(id);
        if (a.kind == SchemaNode::Kind::any_of) {
          stack.insert(stack.end(), a.alts.rbegin(), a.alts.rend());
        } else {
          leaves.push_back(id);
        }
      }
      n.alts = std::move(leaves);
    }
  }

  // min_depth of every node: a fixpoint from "unreachable" down (recursion through required
  // properties or minItems without a finite instance stays unreachable).
  void min_depths() {
    constexpr int kU = SchemaNode::kUnreachable;
    auto md = [&](int32_t id) { return id == SchemaNode::kNone ? kU : out_.node(id).min_depth; };
    for (bool changed = true; changed;) {
      changed = false;
      for (SchemaNode& n : out_.nodes_) {
        int d = kU;
        switch (n.kind) {
          case SchemaNode::Kind::any_of:
            for (int32_t a : n.alts) d = std::min(d, md(a));
            break;
          case SchemaNode::Kind::object:
            d = 1;
            for (const auto& p : n.props)
              if (p.required) d = std::max(d, 1 + md(p.node));
            break;
          case SchemaNode::Kind::array:
            d = n.min_items <= n.max_items ? 1 : kU;
            for (uint32_t i = 0; i < n.min_items && i <= n.prefix_items.size(); ++i) d = std::max(d, 1 + md(n.item_at(i)));
            break;
          case SchemaNode::Kind::string:
            d = n.min_length <= n.max_length ? 1 : kU;
            break;
          case SchemaNode::Kind::number:
            d = 1;
            break;
          case SchemaNode::Kind::integer:
            d = !n.has_min || !n.has_max || n.min <= n.max ? 1 : kU;
            break;
          case SchemaNode::Kind::literals:
            d = n.literals.empty() ? kU : 1;
            break;
        }
        d = std::min(d, kU);
        if (d < n.min_depth) {
          n.min_depth = d;
          changed = true;
        }
      }
    }
  }

  static constexpr int kMaxNesting = 256;
  const Json& doc_;
  int nesting_ = 0;
  CompiledSchema out_;
  std::map<std::string, int32_t> refs_;
  int32_t any_ = -1;
};

Expected<std::shared_ptr<const CompiledSchema>> CompiledSchema::compile(std::string_view schema_text) {
  Json doc = Json::parse(schema_text.begin(), schema_text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return invalid_argument("the JSON schema is not valid JSON");
  return SchemaCompiler(doc).run();
}

Expected<std::shared_ptr<const CompiledSchema>> CompiledSchema::choice(const std::vector<std::string>& choices) {
  const Json empty;
  return SchemaCompiler(empty).choice(choices);
}

}  // namespace brigade
