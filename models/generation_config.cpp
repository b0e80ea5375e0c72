#include "models/generation_config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/mapped_file.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// A number under `key` (absent or null: unset) in [lo, hi], lo excluded when `open_low`.
Status read_number(const json& j, const char* key, double lo, double hi, bool open_low, const std::string& where,
                   std::optional<float>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_number()) return invalid_argument(where + ": " + key + " must be a number, not " + it->dump());
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi || (open_low && v == lo)) {
    std::string range = open_low ? "(" : "[";
    range += number(lo);
    range += ", ";
    range += std::isinf(hi) ? std::string("inf)") : number(hi) + "]";
    return invalid_argument(where + ": " + key + " " + it->dump() + " is out of range " + range);
  }
  out = static_cast<float>(v);
  return Status::ok();
}

Status read_count(const json& j, const char* key, int64_t lo, const std::string& where, std::optional<int>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_number_integer()) return invalid_argument(where + ": " + key + " must be an integer, not " + it->dump());
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > int64_t{1} << 30) return invalid_argument(where + ": " + key + " " + it->dump() + " is out of range");
  out = static_cast<int>(v);
  return Status::ok();
}

}  // namespace

std::string GenerationDefaults::describe() const {
  std::string out;
  auto add = [&](const char* name, const std::string& v) {
    if (!out.empty()) out += ' ';
    out += name;
    out += '=';
    out += v;
  };
  if (temperature) add("temperature", number(*temperature));
  if (top_p) add("top_p", number(*top_p));
  if (top_k) add("top_k", std::to_string(*top_k));
  if (min_p) add("min_p", number(*min_p));
  if (repetition_penalty) add("repetition_penalty", number(*repetition_penalty));
  if (max_tokens) add("max_tokens", std::to_string(*max_tokens));
  return out;
}

Expected<GenerationDefaults> parse_generation_defaults(const json& j, const std::string& where) {
  if (!j.is_object()) return invalid_argument(where + ": not a JSON object");
  const double inf = std::numeric_limits<double>::infinity();
  GenerationDefaults d;
  BRIGADE_RETURN_IF_ERROR(read_number(j, "temperature", 0.0, inf, false, where, d.temperature));
  BRIGADE_RETURN_IF_ERROR(read_number(j, "top_p", 0.0, 1.0, true, where, d.top_p));
  BRIGADE_RETURN_IF_ERROR(read_count(j, "top_k", -1, where, d.top_k));
  BRIGADE_RETURN_IF_ERROR(read_number(j, "min_p", 0.0, 1.0, false, where, d.min_p));
  if (d.min_p && *d.min_p >= 1.0f) return invalid_argument(where + ": min_p must be in [0, 1) (got 1)");
  BRIGADE_RETURN_IF_ERROR(read_number(j, "repetition_penalty", 0.0, inf, true, where, d.repetition_penalty));
  BRIGADE_RETURN_IF_ERROR(read_count(j, "max_new_tokens", 1, where, d.max_tokens));
  if (d.top_k && *d.top_k < 0) d.top_k = 0;  // -1: off, as vLLM spells it
  return d;
}

Expected<GenerationDefaults> read_generation_defaults(const std::string& dir) {
  const fs::path path = fs::path(dir) / "generation_config.json";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return GenerationDefaults{};
  BRIGADE_ASSIGN_OR_RETURN(std::string text, read_text_file(path.string()));
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt(path.string() + ": not a JSON object");
  return parse_generation_defaults(j, path.string());
}

Expected<GenerationDefaults> resolve_generation_defaults(const std::string& model, const std::string& mode,
                                                         const std::string& override_json) {
  GenerationDefaults d;
  std::error_code ec;
  if (mode == "auto") {
    if (fs::is_directory(model, ec)) {
      BRIGADE_ASSIGN_OR_RETURN(d, read_generation_defaults(model));
    }
  } else if (mode != "vllm") {
    if (!fs::is_regular_file(fs::path(mode) / "generation_config.json", ec))
      return invalid_argument("--generation-config: '" + mode +
                              "' is not auto, vllm or a directory holding a generation_config.json");
    BRIGADE_ASSIGN_OR_RETURN(d, read_generation_defaults(mode));
  }
  if (override_json.empty()) return d;
  const json o = json::parse(override_json, nullptr, /*allow_exceptions=*/false);
  if (o.is_discarded() || !o.is_object())
    return invalid_argument("--override-generation-config: not a JSON object: " + override_json);
  BRIGADE_ASSIGN_OR_RETURN(GenerationDefaults over, parse_generation_defaults(o, "--override-generation-config"));
  if (over.temperature) d.temperature = over.temperature;
  if (over.top_p) d.top_p = over.top_p;
  if (over.top_k) d.top_k = over.top_k;
  if (over.min_p) d.min_p = over.min_p;
  if (over.repetition_penalty) d.repetition_penalty = over.repetition_penalty;
  if (over.max_tokens) d.max_tokens = over.max_tokens;
  return d;
}

Status add_generation_eos(const std::string& dir, std::vector<int>& eos) {
  const fs::path path = fs::path(dir) / "generation_config.json";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return Status::ok();
  BRIGADE_ASSIGN_OR_RETURN(std::string text, read_text_file(path.string()));
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt(path.string() + ": not a JSON object");
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return Status::ok();
  const json ids = it->is_array() ? *it : json::array({*it});
  for (const auto& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      return corrupt(path.string() + ": eos_token_id must be a token id or a list of them, not " + it->dump());
    if (std::find(eos.begin(), eos.end(), id.get<int>()) == eos.end()) eos.push_back(id.get<int>());
  }
  return Status::ok();
}

}  // namespace brigade
