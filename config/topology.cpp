#include "brigade/topology.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

namespace brigade {

namespace {

constexpr int kMaxTp = 64;  // ranks of one tensor-parallel group

std::string join(const std::set<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "" : ", ") + k;
  return s;
}

Status check_keys(const YAML::Node& node, const std::string& where, const std::set<std::string>& valid) {
  if (!node.IsMap()) return invalid_argument(where + " must be a mapping (valid keys: " + join(valid) + ")");
  for (const auto& kv : node) {
    const auto key = kv.first.as<std::string>();
    if (!valid.count(key))
      return invalid_argument("unknown key '" + key + "' in " + where + " (valid keys: " + join(valid) + ")");
  }
  return Status::ok();
}

template <class T>
Status read(const YAML::Node& node, const char* key, const std::string& where, T& out) {
  if (!node[key]) return Status::ok();
  try {
    out = node[key].as<T>();
  } catch (const YAML::Exception&) {
    return invalid_argument(where + "." + key + " has the wrong type (line " + std::to_string(node[key].Mark().line + 1) + ")");
  }
  return Status::ok();
}

// A byte count, or `auto` (CacheConfig::auto_bytes).
Status read_bytes_or_auto(const YAML::Node& node, const char* key, const std::string& where, int64_t& out) {
  if (node[key] && node[key].IsScalar() && node[key].Scalar() == "auto") {
    out = CacheConfig::auto_bytes;
    return Status::ok();
  }
  return read(node, key, where, out);
}

// The `cache:` block. Each key is read by one line below; a new key needs its name in the set
// and its line (and a check in validate_cache).
Status parse_cache(const YAML::Node& c, const std::string& where, CacheConfig& cache) {
  BRIGADE_RETURN_IF_ERROR(check_keys(c, where, {"radix", "eviction", "host_bytes", "disk_path", "disk_bytes",
                                             "write_policy"}));
  BRIGADE_RETURN_IF_ERROR(read(c, "radix", where, cache.radix));
  BRIGADE_RETURN_IF_ERROR(read(c, "eviction", where, cache.eviction));
  BRIGADE_RETURN_IF_ERROR(read_bytes_or_auto(c, "host_bytes", where, cache.host_bytes));
  BRIGADE_RETURN_IF_ERROR(read(c, "disk_path", where, cache.disk_path));
  BRIGADE_RETURN_IF_ERROR(read(c, "disk_bytes", where, cache.disk_bytes));
  BRIGADE_RETURN_IF_ERROR(read(c, "write_policy", where, cache.write_policy));
  return Status::ok();
}

Status validate_cache(const CacheConfig& c, const std::string& w) {
  if (c.host_bytes < 0 && c.host_bytes != CacheConfig::auto_bytes)
    return invalid_argument(w + ": cache.host_bytes must be >= 0 or auto (0 = no host tier)");
  if (!c.disk_path.empty() && c.disk_bytes < 1)
    return invalid_argument(w + ": cache.disk_bytes must be >= 1 when cache.disk_path is set");
  const std::set<std::string> evictions = {"lru", "lfu", "priority"};
  if (!evictions.count(c.eviction))
    return invalid_argument(w + ": cache.eviction '" + c.eviction + "' is not one of: " + join(evictions));
  if (c.tiers_enabled() && !c.radix)
    return invalid_argument(w + ": the cache tiers (host_bytes, disk_path) need cache.radix: true");
  const std::set<std::string> policies = {"write_through", "write_back"};
  if (!policies.count(c.write_policy))
    return invalid_argument(w + ": cache.write_policy '" + c.write_policy + "' is not one of: " + join(policies));
  return Status::ok();
}

Status parse_instance(const YAML::Node& n, const std::string& where, InstanceConfig& inst) {
  BRIGADE_RETURN_IF_ERROR(check_keys(n, where, {"name", "scheduler", "kv", "cache", "executors"}));
  BRIGADE_RETURN_IF_ERROR(read(n, "name", where, inst.name));
  if (auto s = n["scheduler"]) {
    const std::string w = where + ".scheduler";
    BRIGADE_RETURN_IF_ERROR(check_keys(s, w, {"max_running", "max_waiting", "max_step_tokens", "max_inflight_steps",
                                              "chunked_prefill"}));
    BRIGADE_RETURN_IF_ERROR(read(s, "max_running", w, inst.scheduler.max_running));
    BRIGADE_RETURN_IF_ERROR(read(s, "max_waiting", w, inst.scheduler.max_waiting));
    BRIGADE_RETURN_IF_ERROR(read(s, "max_step_tokens", w, inst.scheduler.max_step_tokens));
    BRIGADE_RETURN_IF_ERROR(read(s, "max_inflight_steps", w, inst.scheduler.max_inflight_steps));
    BRIGADE_RETURN_IF_ERROR(read(s, "chunked_prefill", w, inst.scheduler.chunked_prefill));
  }
  if (auto k = n["kv"]) {
    const std::string w = where + ".kv";
    BRIGADE_RETURN_IF_ERROR(check_keys(k, w, {"page_size", "pages", "memory_mb", "dtype"}));
    BRIGADE_RETURN_IF_ERROR(read(k, "page_size", w, inst.kv.page_size));
    BRIGADE_RETURN_IF_ERROR(read(k, "pages", w, inst.kv.pages));
    BRIGADE_RETURN_IF_ERROR(read(k, "memory_mb", w, inst.kv.memory_mb));
    BRIGADE_RETURN_IF_ERROR(read(k, "dtype", w, inst.kv.dtype));
  }
  if (auto c = n["cache"]) BRIGADE_RETURN_IF_ERROR(parse_cache(c, where + ".cache", inst.cache));
  if (auto e = n["executors"]) {
    if (!e.IsSequence()) return invalid_argument(where + ".executors must be a list");
    inst.executors.clear();
    for (size_t i = 0; i < e.size(); ++i) {
      const std::string w = where + ".executors[" + std::to_string(i) + "]";
      ExecutorConfig ex;
      BRIGADE_RETURN_IF_ERROR(check_keys(e[i], w, {"device", "threads", "tp"}));
      BRIGADE_RETURN_IF_ERROR(read(e[i], "device", w, ex.device));
      BRIGADE_RETURN_IF_ERROR(read(e[i], "threads", w, ex.threads));
      BRIGADE_RETURN_IF_ERROR(read(e[i], "tp", w, ex.tp));
      inst.executors.push_back(ex);
    }
  }
  return Status::ok();
}

}  // namespace

TopologyConfig default_topology() { return TopologyConfig{}; }

Status TopologyConfig::validate() const {
  if (instances.size() != 1) {
    return unsupported("the topology has " + std::to_string(instances.size()) +
                       " instances; this build runs exactly one instance per engine");
  }
  const InstanceConfig& inst = instances.front();
  const std::string w = "instances[" + inst.name + "]";
  if (inst.executors.size() != 1)
    return unsupported(w + " has " + std::to_string(inst.executors.size()) + " executors; this build runs exactly one");
  const ExecutorConfig& ex = inst.executors.front();
  if (ex.device != "cpu") return unsupported(w + ": device '" + ex.device + "' is not available (valid: cpu)");
  if (ex.threads < 0) return invalid_argument(w + ": threads must be >= 0 (0 = all cores)");
  if (ex.tp < 1 || ex.tp > kMaxTp)
    return invalid_argument(w + ": tp must be in [1, " + std::to_string(kMaxTp) + "] (got " + std::to_string(ex.tp) + ")");
  // KvSave/KvLoad move one executor's pages; under tp each rank holds a part of every page.
  if (ex.tp > 1 && inst.cache.tiers_enabled())
    return unsupported(w + ": the cache tiers (host_bytes, disk_path) do not work with tp > 1 yet; "
                       "set tp: 1 or turn the tiers off (host_bytes: 0, no disk_path)");
  const auto& s = inst.scheduler;
  if (s.max_running < 1) return invalid_argument(w + ": scheduler.max_running must be >= 1");
  if (s.max_waiting < 0) return invalid_argument(w + ": scheduler.max_waiting must be >= 0");
  if (s.max_step_tokens < 1) return invalid_argument(w + ": scheduler.max_step_tokens must be >= 1");
  if (s.max_inflight_steps < 1 || s.max_inflight_steps > 8)
    return invalid_argument(w + ": scheduler.max_inflight_steps must be in [1, 8]");
  const auto& k = inst.kv;
  if (k.page_size < 1 || k.page_size > 1024) return invalid_argument(w + ": kv.page_size must be in [1, 1024]");
  if (k.pages < 0) return invalid_argument(w + ": kv.pages must be >= 0 (0 = from kv.memory_mb)");
  if (k.pages == 0 && k.memory_mb < 1) return invalid_argument(w + ": kv.memory_mb must be >= 1");
  const std::set<std::string> dtypes = {"auto", "f32", "bf16", "f16", "int8"};
  if (!dtypes.count(k.dtype)) return invalid_argument(w + ": kv.dtype '" + k.dtype + "' is not one of: " + join(dtypes));
  return validate_cache(inst.cache, w);
}

Expected<TopologyConfig> parse_topology(const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return invalid_argument(std::string("topology YAML does not parse: ") + e.what());
  }
  TopologyConfig cfg;
  if (root.IsNull()) return cfg;
  BRIGADE_RETURN_IF_ERROR(check_keys(root, "the topology", {"model", "instances"}));
  BRIGADE_RETURN_IF_ERROR(read(root, "model", "topology", cfg.model));
  if (auto insts = root["instances"]) {
    if (!insts.IsSequence() || insts.size() == 0) return invalid_argument("topology.instances must be a non-empty list");
    cfg.instances.clear();
    for (size_t i = 0; i < insts.size(); ++i) {
      InstanceConfig inst;
      BRIGADE_RETURN_IF_ERROR(parse_instance(insts[i], "instances[" + std::to_string(i) + "]", inst));
      cfg.instances.push_back(inst);
    }
  }
  BRIGADE_RETURN_IF_ERROR(cfg.validate());
  return cfg;
}

Expected<TopologyConfig> load_topology_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot open topology file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  auto cfg = parse_topology(ss.str());
  if (!cfg) return Status(cfg.status().code(), path + ": " + cfg.status().message());
  return cfg;
}

}  // namespace brigade
