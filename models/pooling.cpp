#include "models/pooling.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace brigade {

namespace {

Expected<nlohmann::json> read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return Status(StatusCode::not_found, path.string() + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt(path.string() + ": not valid JSON");
  return j;
}

// The one pooling mode a sentence-transformers Pooling config turns on.
Expected<Pooling> mode_of(const nlohmann::json& cfg, const std::string& file) {
  struct Key {
    const char* name;
    Pooling mode;  // none: a mode brigade does not run
  };
  static const Key keys[] = {{"pooling_mode_lasttoken", Pooling::last},     {"pooling_mode_mean_tokens", Pooling::mean},
                             {"pooling_mode_cls_token", Pooling::cls},      {"pooling_mode_max_tokens", Pooling::none},
                             {"pooling_mode_mean_sqrt_len_tokens", Pooling::none},
                             {"pooling_mode_weightedmean_tokens", Pooling::none}};
  std::vector<const Key*> on;
  for (const Key& k : keys) {
    auto it = cfg.find(k.name);
    if (it != cfg.end() && it->is_boolean() && it->get<bool>()) on.push_back(&k);
  }
  if (on.size() != 1 || on[0]->mode == Pooling::none) {
    std::string what = on.empty() ? std::string("no pooling mode") : std::string();
    for (const Key* k : on) what += (what.empty() ? "" : " + ") + std::string(k->name);
    return unsupported(file + " asks for " + what +
                       "; brigade pools with exactly one of pooling_mode_lasttoken, pooling_mode_mean_tokens, "
                       "pooling_mode_cls_token (choose one with --pooling last|mean|cls)");
  }
  return on[0]->mode;
}

}  // namespace

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::none: return "none";
    case Pooling::last: return "last";
    case Pooling::mean: return "mean";
    case Pooling::cls: return "cls";
  }
  return "?";
}

Expected<Pooling> parse_pooling(std::string_view name) {
  if (name == "last" || name == "lasttoken") return Pooling::last;
  if (name == "mean" || name == "mean_tokens") return Pooling::mean;
  if (name == "cls" || name == "cls_token") return Pooling::cls;
  return invalid_argument("unknown pooling '" + std::string(name) + "' (valid: last, mean, cls)");
}

Expected<PoolingConfig> read_pooling_config(const std::string& model_path) {
  namespace fs = std::filesystem;
  PoolingConfig out;
  std::error_code ec;
  const fs::path dir(model_path);
  const fs::path modules_path = dir / "modules.json";
  if (!fs::is_directory(dir, ec) || !fs::exists(modules_path, ec)) return out;
  BRIGADE_ASSIGN_OR_RETURN(nlohmann::json modules, read_json(modules_path));
  if (!modules.is_array()) return corrupt(modules_path.string() + ": expected a list of modules");
  bool pooled = false;
  out.normalize = false;  // sentence-transformers normalizes only with a Normalize module
  out.source = modules_path.string();
  for (const auto& m : modules) {
    const std::string type = m.is_object() && m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : "";
    const std::string path = m.is_object() && m.contains("path") && m["path"].is_string() ? m["path"].get<std::string>() : "";
    if (type.ends_with(".Normalize")) out.normalize = true;
    if (!type.ends_with(".Pooling") || pooled) continue;
    const fs::path cfg_path = dir / path / "config.json";
    BRIGADE_ASSIGN_OR_RETURN(nlohmann::json cfg, read_json(cfg_path));
    if (!cfg.is_object()) return corrupt(cfg_path.string() + ": expected a JSON object");
    BRIGADE_ASSIGN_OR_RETURN(out.mode, mode_of(cfg, cfg_path.string()));
    out.source = cfg_path.string();
    pooled = true;
  }
  return out;
}

std::vector<float> finish_embedding(std::span<const float> pooled, int dimensions, bool normalize) {
  const size_t n = dimensions > 0 ? std::min(pooled.size(), static_cast<size_t>(dimensions)) : pooled.size();
  std::vector<float> out(pooled.begin(), pooled.begin() + static_cast<std::ptrdiff_t>(n));
  if (!normalize) return out;
  double sum = 0.0;
  for (float v : out) sum += static_cast<double>(v) * v;
  // As torch.nn.functional.normalize (eps 1e-12), which sentence-transformers and vLLM use.
  const double norm = std::max(std::sqrt(sum), 1e-12);
  for (float& v : out) v = static_cast<float>(v / norm);
  return out;
}

}  // namespace brigade
