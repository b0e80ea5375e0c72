#include "models/quant_config_int4.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "models/config_json.h"

namespace brigade {
namespace {

using json = nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

std::string string_field(const json& q, const char* key, const std::string& fallback) {
  auto it = q.find(key);
  return it != q.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// The first of `keys` present (writers disagree: bits / w_bit, group_size / q_group_size).
Status read_int_any(const json& q, std::initializer_list<const char*> keys, int& out) {
  for (const char* k : keys)
    if (q.contains(k) && !q[k].is_null()) return read_int(q, k, out, false);
  return Status::ok();
}

Status check_bits(const std::string& where, int bits) {
  if (bits == 4) return Status::ok();
  return unsupported(where + " bits " + std::to_string(bits) + " is not supported; supported: " + kInt4Supported);
}

Status check_group(const std::string& where, int group) {
  if (group == -1 || (group > 0 && group <= (1 << 20))) return Status::ok();
  return corrupt(where + " group_size " + std::to_string(group) + " must be a positive number of input columns, "
                 "or -1 for one group per output channel");
}

}  // namespace

const char* const kInt4Supported =
    "quant_method 'gptq' (bits 4, checkpoint_format gptq or gptq_v2), 'awq' (bits 4, version gemm, zero_point "
    "true) and 'compressed-tensors' format pack-quantized (weights num_bits 4, type int, strategy group or "
    "channel, no activation quantization)";

Status parse_gptq(const json& q, QuantConfig& c) {
  const std::string where = "config.json: quantization_config (quant_method gptq)";
  int bits = 4;
  BRIGADE_RETURN_IF_ERROR(read_int(q, "bits", bits, false));
  BRIGADE_RETURN_IF_ERROR(check_bits(where, bits));
  BRIGADE_RETURN_IF_ERROR(read_int(q, "group_size", c.group_size, false));
  BRIGADE_RETURN_IF_ERROR(check_group(where, c.group_size));
  BRIGADE_RETURN_IF_ERROR(read_bool(q, "sym", c.symmetric));
  BRIGADE_RETURN_IF_ERROR(read_bool(q, "desc_act", c.act_order));
  bool marlin = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(q, "is_marlin_format", marlin));
  const std::string format = lower(string_field(q, "checkpoint_format", string_field(q, "format", "gptq")));
  if (marlin || (format != "gptq" && format != "gptq_v2"))
    return unsupported(where + ": checkpoint_format '" + (marlin ? std::string("marlin") : format) +
                       "' is not supported; supported: gptq, gptq_v2 (repacked layouts such as marlin must be "
                       "converted back to gptq)");
  if (auto d = q.find("dynamic"); d != q.end() && !d->is_null() && !(d->is_object() && d->empty()))
    return unsupported(where + ": per-module overrides ('dynamic') are not supported; brigade supports one "
                       "weight scheme per checkpoint");
  c.zero_plus_one = format == "gptq";
  c.packing = Int4Packing::gptq;
  c.scaling = WeightScaling::group;
  c.scale_is_inverse = false;
  return Status::ok();
}

Status parse_awq(const json& q, QuantConfig& c) {
  const std::string where = "config.json: quantization_config (quant_method awq)";
  int bits = 4;
  BRIGADE_RETURN_IF_ERROR(read_int_any(q, {"bits", "w_bit"}, bits));
  BRIGADE_RETURN_IF_ERROR(check_bits(where, bits));
  BRIGADE_RETURN_IF_ERROR(read_int_any(q, {"group_size", "q_group_size"}, c.group_size));
  BRIGADE_RETURN_IF_ERROR(check_group(where, c.group_size));
  bool zero_point = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(q, "zero_point", zero_point));
  if (!zero_point)
    return unsupported(where + ": zero_point false is not supported; supported: " + kInt4Supported);
  const std::string version = lower(string_field(q, "version", "gemm"));
  if (version != "gemm")
    return unsupported(where + ": version '" + version + "' is not supported; supported: gemm (AutoAWQ's GEMM "
                       "layout; gemv, gemv_fast, marlin and ipex pack differently)");
  c.symmetric = false;
  c.packing = Int4Packing::awq;
  c.scaling = WeightScaling::group;
  c.scale_is_inverse = false;
  return Status::ok();
}

Status parse_ct_int4(const std::string& where, const json& w, QuantConfig& c) {
  int bits = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(w, "num_bits", bits, false));
  const std::string type = string_field(w, "type", "int"), strategy = string_field(w, "strategy", "");
  if (bits != 4 || type != "int")
    return unsupported(where + ": num_bits " + std::to_string(bits) + ", type '" + type +
                       "' is not supported with format pack-quantized; supported: " + kInt4Supported);
  if (strategy == "group") {
    BRIGADE_RETURN_IF_ERROR(read_int(w, "group_size", c.group_size, true));
    if (c.group_size < 1) return corrupt(where + ": strategy 'group' needs a positive group_size");
    BRIGADE_RETURN_IF_ERROR(check_group(where, c.group_size));
  } else if (strategy == "channel") {
    c.group_size = -1;
  } else {
    return unsupported(where + ": strategy '" + strategy + "' is not supported for int4 weights; supported: "
                       "group, channel");
  }
  BRIGADE_RETURN_IF_ERROR(read_bool(w, "symmetric", c.symmetric));
  if (auto a = w.find("actorder"); a != w.end() && !a->is_null() && !(a->is_boolean() && !a->get<bool>()))
    c.act_order = true;  // weight_g_idx names each column's group (read when present)
  c.packing = Int4Packing::pack_quantized;
  c.scaling = WeightScaling::group;
  c.scale_is_inverse = false;
  return Status::ok();
}

}  // namespace brigade
