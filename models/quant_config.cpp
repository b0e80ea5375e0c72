#include "models/quant_config.h"

#include <nlohmann/json.hpp>
#include <regex>

#include "models/config_json.h"
#include "models/quant_config_int4.h"

namespace brigade {
namespace {

using json = nlohmann::json;

constexpr const char* kFp8Supported =
    "quant_method 'fp8' (fmt e4m3, with or without weight_block_size) and 'compressed-tensors' "
    "(weights num_bits 8, type float, strategy tensor, channel or block)";

std::string supported() {
  return std::string(kFp8Supported) + "; int4: " + kInt4Supported + "; 'mxfp4' (gpt-oss's experts); 'bitnet' "
         "(ternary weights, linear_class bitlinear or autobitlinear)";
}

Status read_names(const json& q, const char* key, std::vector<std::string>& out) {
  auto it = q.find(key);
  if (it == q.end() || it->is_null()) return Status::ok();
  if (!it->is_array()) return corrupt(std::string("config.json: quantization_config.") + key + " must be a list of module names");
  for (const auto& e : *it) {
    if (!e.is_string()) return corrupt(std::string("config.json: quantization_config.") + key + " must hold strings");
    out.push_back(e.get<std::string>());
  }
  return Status::ok();
}

std::string string_or(const json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// transformers' FineGrainedFP8Config (weight_block_size) or vLLM's Fp8Config (per tensor).
Status parse_fp8(const json& q, QuantConfig& c) {
  const std::string fmt = string_or(q, "fmt", "e4m3");
  if (fmt != "e4m3")
    return unsupported("config.json: quantization_config fmt '" + fmt + "' is not supported; supported: e4m3");
  auto bs = q.find("weight_block_size");
  if (bs == q.end() || bs->is_null()) {
    c.scaling = WeightScaling::tensor;
    c.scale_is_inverse = false;
  } else {
    if (!bs->is_array() || bs->size() != 2 || !(*bs)[0].is_number_integer() || !(*bs)[1].is_number_integer() ||
        (*bs)[0].get<int64_t>() < 1 || (*bs)[1].get<int64_t>() < 1 || (*bs)[0].get<int64_t>() > (1 << 20) ||
        (*bs)[1].get<int64_t>() > (1 << 20))
      return corrupt("config.json: quantization_config.weight_block_size must be two positive integers [rows, cols]");
    c.scaling = WeightScaling::block;
    c.block_rows = (*bs)[0].get<int>();
    c.block_cols = (*bs)[1].get<int>();
  }
  return read_names(q, "modules_to_not_convert", c.ignore);
}

// transformers' BitNetQuantConfig: linear_class and quantization_mode as it validates them;
// use_rms_norm (an RMSNorm inside every linear, before its quantization) is not supported.
Status parse_bitnet(const json& q, QuantConfig& c) {
  c.scaling = WeightScaling::ternary;
  const std::string linear = string_or(q, "linear_class", "bitlinear"), mode = string_or(q, "quantization_mode", "offline");
  if (linear != "bitlinear" && linear != "autobitlinear")
    return corrupt("config.json: quantization_config.linear_class '" + linear + "' must be bitlinear or autobitlinear");
  if (mode != "offline" && mode != "online")
    return corrupt("config.json: quantization_config.quantization_mode '" + mode + "' must be offline or online");
  c.ternary_linear = linear == "bitlinear" ? TernaryLinear::bitlinear
                     : mode == "offline"   ? TernaryLinear::auto_offline
                                           : TernaryLinear::auto_online;
  bool rms_norm = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(q, "use_rms_norm", rms_norm));
  if (rms_norm)
    return unsupported("config.json: quantization_config.use_rms_norm = true (an RMSNorm inside every ternary linear) "
                       "is not supported; supported: bitnet without it");
  return read_names(q, "modules_to_not_convert", c.ignore);
}

// One config group's weight scheme as a QuantConfig (block sizes, scaling); `packed`: the
// checkpoint's format is pack-quantized (int4).
Expected<QuantConfig> parse_ct_weights(const std::string& group, const json& w, bool packed) {
  const std::string where = "config.json: quantization_config.config_groups." + group + ".weights";
  if (!w.is_object()) return corrupt(where + " must be an object");
  if (packed) {
    QuantConfig c;
    c.method = "compressed-tensors";
    BRIGADE_RETURN_IF_ERROR(parse_ct_int4(where, w, c));
    return c;
  }
  int bits = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(w, "num_bits", bits, false));
  const std::string type = string_or(w, "type", "int"), strategy = string_or(w, "strategy", "");
  if (bits != 8 || type != "float")
    return unsupported(where + ": num_bits " + std::to_string(bits) + ", type '" + type +
                       "' is not supported with format " + (bits == 4 ? "other than pack-quantized" : "float-quantized") +
                       "; supported: " + supported());
  QuantConfig c;
  c.method = "compressed-tensors";
  c.scale_is_inverse = false;
  if (strategy == "tensor") {
    c.scaling = WeightScaling::tensor;
  } else if (strategy == "channel") {
    c.scaling = WeightScaling::channel;
  } else if (strategy == "block") {
    auto bs = w.find("block_structure");
    if (bs == w.end() || !bs->is_array() || bs->size() != 2 || !(*bs)[0].is_number_integer() ||
        !(*bs)[1].is_number_integer() || (*bs)[0].get<int64_t>() < 1 || (*bs)[1].get<int64_t>() < 1 ||
        (*bs)[0].get<int64_t>() > (1 << 20) || (*bs)[1].get<int64_t>() > (1 << 20))
      return corrupt(where + ": strategy 'block' needs block_structure [rows, cols] of positive integers");
    c.scaling = WeightScaling::block;
    c.block_rows = (*bs)[0].get<int>();
    c.block_cols = (*bs)[1].get<int>();
  } else {
    return unsupported(where + ": strategy '" + strategy + "' is not supported; supported: tensor, channel, block");
  }
  return c;
}

// compressed-tensors' QuantizationConfig: every group must quantize weights the same way.
Status parse_compressed_tensors(const json& q, QuantConfig& c) {
  const std::string format = string_or(q, "format", "float-quantized");
  if (format != "float-quantized" && format != "naive-quantized" && format != "pack-quantized")
    return unsupported("config.json: compressed-tensors format '" + format +
                       "' is not supported; supported: float-quantized, naive-quantized, pack-quantized (" +
                       supported() + ")");
  const bool packed = format == "pack-quantized";
  auto groups = q.find("config_groups");
  if (groups == q.end() || !groups->is_object() || groups->empty())
    return corrupt("config.json: compressed-tensors quantization_config needs a config_groups object");
  bool first = true;
  for (const auto& [name, g] : groups->items()) {
    if (!g.is_object() || !g.contains("weights") || g["weights"].is_null())
      return unsupported("config.json: quantization_config.config_groups." + name +
                         " quantizes no weights; supported: " + supported());
    if (packed && g.contains("input_activations") && !g["input_activations"].is_null())
      return unsupported("config.json: quantization_config.config_groups." + name +
                         " quantizes activations too (W4A8); supported: int4 weights with float activations (W4A16)");
    BRIGADE_ASSIGN_OR_RETURN(QuantConfig gc, parse_ct_weights(name, g["weights"], packed));
    if (!first && (gc.scaling != c.scaling || gc.block_rows != c.block_rows || gc.block_cols != c.block_cols ||
                   gc.group_size != c.group_size || gc.symmetric != c.symmetric))
      return unsupported("config.json: compressed-tensors config_groups quantize weights in different ways; "
                         "brigade supports one weight scheme per checkpoint");
    c = gc;
    first = false;
  }
  return read_names(q, "ignore", c.ignore);
}

}  // namespace

std::string QuantConfig::scale_name(const std::string& weight) const {
  return weight + (scale_is_inverse ? "_scale_inv" : "_scale");
}

bool QuantConfig::ignored(const std::string& weight) const {
  const std::string module = weight.ends_with(".weight") ? weight.substr(0, weight.size() - 7) : weight;
  for (const std::string& e : ignore) {
    if (e.starts_with("re:")) {
      std::regex re(e.substr(3), std::regex::ECMAScript);  // corrupt patterns are refused at parse time
      if (std::regex_search(module, re, std::regex_constants::match_continuous)) return true;
      continue;
    }
    if (module == e || module.find(e + ".") != std::string::npos) return true;
  }
  return false;
}

bool QuantConfig::ternary_weight(const std::string& weight) const {
  return ternary() && weight.starts_with("model.layers.") && weight.ends_with("_proj.weight") && !ignored(weight);
}

std::string QuantConfig::describe() const {
  std::string s;
  switch (scaling) {
    case WeightScaling::none: return "none";
    case WeightScaling::block:
      s = "fp8 e4m3, " + std::to_string(block_rows) + "x" + std::to_string(block_cols) + " block scales";
      break;
    case WeightScaling::channel: s = "fp8 e4m3, per-channel scales"; break;
    case WeightScaling::tensor: s = "fp8 e4m3, per-tensor scales"; break;
    case WeightScaling::group:
      s = std::string("int4, ") + (group_size < 0 ? "per-channel scales" : "groups of " + std::to_string(group_size)) +
          (symmetric ? ", symmetric" : ", zero points") + (act_order ? ", act-order" : "");
      break;
    case WeightScaling::mxfp4: s = "mxfp4 experts, 32-value blocks with E8M0 scales"; break;
    case WeightScaling::ternary:
      s = std::string("ternary weights, int8 activations, ") +
          (ternary_linear == TernaryLinear::bitlinear      ? "bitlinear"
           : ternary_linear == TernaryLinear::auto_offline ? "autobitlinear offline"
                                                           : "autobitlinear online");
      break;
  }
  return s + " (quant_method " + method + ")";
}

Expected<QuantConfig> parse_quant_config(const json& q) {
  if (!q.is_object()) return corrupt("config.json: quantization_config must be an object");
  QuantConfig c;
  c.method = string_or(q, "quant_method", "");
  if (c.method == "fp8") {
    BRIGADE_RETURN_IF_ERROR(parse_fp8(q, c));
  } else if (c.method == "compressed-tensors") {
    BRIGADE_RETURN_IF_ERROR(parse_compressed_tensors(q, c));
  } else if (c.method == "gptq") {
    BRIGADE_RETURN_IF_ERROR(parse_gptq(q, c));
  } else if (c.method == "awq") {
    BRIGADE_RETURN_IF_ERROR(parse_awq(q, c));
    BRIGADE_RETURN_IF_ERROR(read_names(q, "modules_to_not_convert", c.ignore));
  } else if (c.method == "bitnet") {
    BRIGADE_RETURN_IF_ERROR(parse_bitnet(q, c));
  } else if (c.method == "mxfp4") {  // gpt-oss: which tensors are MXFP4 is told by their _blocks names
    c.scaling = WeightScaling::mxfp4;
    BRIGADE_RETURN_IF_ERROR(read_names(q, "modules_to_not_convert", c.ignore));
  } else {
    return unsupported("config.json: quantization_config quant_method '" + c.method +
                       "' is not supported; supported: " + supported());
  }
  for (const std::string& e : c.ignore) {
    if (!e.starts_with("re:")) continue;
    try {
      std::regex re(e.substr(3), std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      return corrupt("config.json: quantization_config ignore pattern '" + e + "' is not a valid regex");
    }
  }
  return c;
}

}  // namespace brigade
