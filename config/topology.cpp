#include "brigade/topology.h"

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
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

// Reads one YAML mapping: each call names a key and where its value goes, so a key is one line
// and the valid keys are exactly the ones named. status() reports, in this order: not a mapping
// or a key no call named (check_keys), then the first read or nested error; reads after an error
// are skipped. `where` prefixes the keys in messages; `name` (default: where) names the mapping.
class MapReader {
 public:
  MapReader(YAML::Node node, std::string where, std::string name = "")
      : node_(std::move(node)), where_(std::move(where)), name_(name.empty() ? where_ : std::move(name)) {
    if (!node_.IsMap()) failed_ = true;
  }

  // node[key] into out, when present.
  template <class T>
  MapReader& read(const char* key, T& out) {
    if (!want(key)) return *this;
    try {
      out = node_[key].as<T>();
    } catch (const YAML::Exception&) {
      fail(invalid_argument(where_ + "." + key + " has the wrong type (line " +
                            std::to_string(node_[key].Mark().line + 1) + ")"));
    }
    return *this;
  }
  // A count (of bytes, of snapshots), or `auto` (CacheConfig::auto_bytes, kAuto).
  MapReader& read_or_auto(const char* key, int64_t& out) {
    if (want(key) && node_[key].IsScalar() && node_[key].Scalar() == "auto") {
      out = CacheConfig::auto_bytes;
      return *this;
    }
    return read(key, out);
  }
  // parse(node[key], where.key), when present: a nested block or a list.
  template <class Parse>
  MapReader& nested(const char* key, Parse parse) {
    if (want(key)) fail(parse(node_[key], where_ + "." + key));
    return *this;
  }

  Status status() const {
    BRIGADE_RETURN_IF_ERROR(check_keys(node_, name_, keys_));
    return first_error_;
  }

 private:
  // Names key as valid; true when it is present and nothing failed yet.
  bool want(const char* key) {
    keys_.insert(key);
    return !failed_ && node_[key];
  }
  void fail(Status st) {
    if (failed_ || st.is_ok()) return;
    failed_ = true;
    first_error_ = std::move(st);
  }

  const YAML::Node node_;  // a handle; const, so a lookup never adds a key
  std::string where_, name_;
  std::set<std::string> keys_;
  bool failed_ = false;
  Status first_error_ = Status::ok();
};

// The `cache:` block (a new key: its line here and a check in validate_cache).
Status parse_cache(const YAML::Node& c, const std::string& where, CacheConfig& cache) {
  return MapReader(c, where)
      .read("radix", cache.radix)
      .read("eviction", cache.eviction)
      .read("partial_pages", cache.partial_pages)
      .read("in_batch_prefix_tokens", cache.in_batch_prefix_tokens)
      .read_or_auto("host_bytes", cache.host_bytes)
      .read_or_auto("state_snapshots", cache.state_snapshots)
      .read("disk_path", cache.disk_path)
      .read("disk_bytes", cache.disk_bytes)
      .read("write_policy", cache.write_policy)
      .status();
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
  if (c.state_snapshots < 0 && c.state_snapshots != CacheConfig::kAuto)
    return invalid_argument(w + ": cache.state_snapshots must be >= 0 or auto");
  if (c.in_batch_prefix_tokens < 0)
    return invalid_argument(w + ": cache.in_batch_prefix_tokens must be >= 0 (0 = off)");
  const std::set<std::string> policies = {"write_through", "write_back"};
  if (!policies.count(c.write_policy))
    return invalid_argument(w + ": cache.write_policy '" + c.write_policy + "' is not one of: " + join(policies));
  return Status::ok();
}

Status parse_scheduler(const YAML::Node& s, const std::string& where, SchedulerConfig& sched) {
  return MapReader(s, where)
      .read("max_running", sched.max_running)
      .read("max_waiting", sched.max_waiting)
      .read("max_step_tokens", sched.max_step_tokens)
      .read("max_inflight_steps", sched.max_inflight_steps)
      .read("chunked_prefill", sched.chunked_prefill)
      .read("max_model_len", sched.max_model_len)
      .nested("speculative", [&](const YAML::Node& n, const std::string& w) {
        SpeculativeConfig& sp = sched.speculative;
        return MapReader(n, w)
            .read("method", sp.method)
            .read("num_tokens", sp.num_tokens)
            .read("ngram_min", sp.ngram_min)
            .read("ngram_max", sp.ngram_max)
            .read("min_acceptance", sp.min_acceptance)
            .read("disable_batch_size", sp.disable_batch_size)
            .read("model", sp.model)
            .read("kv_tokens", sp.kv_tokens)
            .status();
      })
      .status();
}

Status validate_speculative(const SpeculativeConfig& sp, const std::string& w) {
  const std::set<std::string> methods = {"none", "ngram", "draft_model", "mtp", "eagle3"};
  if (!methods.count(sp.method))
    return invalid_argument(w + ": scheduler.speculative.method '" + sp.method + "' is not one of: " + join(methods));
  if (sp.method == "none") return Status::ok();
  const std::string at = w + ": scheduler.speculative.";
  if (sp.num_tokens < 1 || sp.num_tokens > 16)
    return invalid_argument(at + "num_tokens must be in [1, 16] (got " + std::to_string(sp.num_tokens) + ")");
  if (sp.ngram_min < 1) return invalid_argument(at + "ngram_min must be >= 1");
  if (sp.ngram_max < sp.ngram_min) return invalid_argument(at + "ngram_max must be >= ngram_min");
  if (!(sp.min_acceptance >= 0.0 && sp.min_acceptance <= 1.0))
    return invalid_argument(at + "min_acceptance must be in [0, 1]");
  if (sp.disable_batch_size < 0) return invalid_argument(at + "disable_batch_size must be >= 0 (0 = no limit)");
  if (sp.method == "draft_model" && sp.model.empty())
    return invalid_argument(at + "model must name the draft checkpoint (HF directory, GGUF or llama2.c .bin) "
                                 "for method draft_model");
  if (sp.method == "eagle3" && sp.model.empty())
    return invalid_argument(at + "model must name the EAGLE-3 head's directory (LlamaForCausalLMEagle3 or the speculators layout) for "
                            "method eagle3");
  if (sp.method != "draft_model" && sp.method != "eagle3" && !sp.model.empty())
    return invalid_argument(at + "model is the draft checkpoint of method draft_model, or eagle3's head (method is '" +
                            sp.method + "')");
  if (sp.kv_tokens < 0) return invalid_argument(at + "kv_tokens must be >= 0 (0 = as many tokens as the target's pool)");
  return Status::ok();
}

Status parse_kv(const YAML::Node& k, const std::string& where, KvConfig& kv) {
  return MapReader(k, where)
      .read("page_size", kv.page_size)
      .read("pages", kv.pages)
      .read("memory_mb", kv.memory_mb)
      .read("memory_fraction", kv.memory_fraction)
      .read("dtype", kv.dtype)
      .status();
}

Status parse_executors(const YAML::Node& e, const std::string& where, std::vector<ExecutorConfig>& executors) {
  if (!e.IsSequence()) return invalid_argument(where + " must be a list");
  executors.clear();
  for (size_t i = 0; i < e.size(); ++i) {
    ExecutorConfig ex;
    BRIGADE_RETURN_IF_ERROR(MapReader(e[i], where + "[" + std::to_string(i) + "]")
                                .read("device", ex.device)
                                .read("threads", ex.threads)
                                .read("tp", ex.tp)
                                .read("expert_parallel", ex.expert_parallel)
                                .read("step_path", ex.step_path)
                                .read("cuda_graphs", ex.cuda_graphs)
                                .read("weights", ex.weights)
                                .read("roofline", ex.roofline)
                                .status());
    executors.push_back(ex);
  }
  return Status::ok();
}

Status parse_instance(const YAML::Node& n, const std::string& where, InstanceConfig& inst) {
  return MapReader(n, where)
      .read("name", inst.name)
      .read("role", inst.role)
      .read("remote", inst.remote)
      .nested("scheduler", [&](const YAML::Node& s, const std::string& w) { return parse_scheduler(s, w, inst.scheduler); })
      .nested("kv", [&](const YAML::Node& k, const std::string& w) { return parse_kv(k, w, inst.kv); })
      .nested("cache", [&](const YAML::Node& c, const std::string& w) { return parse_cache(c, w, inst.cache); })
      .nested("executors", [&](const YAML::Node& e, const std::string& w) { return parse_executors(e, w, inst.executors); })
      .status();
}

// Letters, digits, '_', '-', '.': the name labels /metrics series and names logs (instances and
// stations).
bool valid_instance_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

Status validate_executor(const ExecutorConfig& ex, const std::string& w) {
  auto device = parse_device(ex.device);
  if (!device) return invalid_argument(w + ": " + device.status().message());
  const std::set<std::string> step_paths = {"auto", "host", "device"};
  if (!step_paths.count(ex.step_path))
    return invalid_argument(w + ": step_path '" + ex.step_path + "' is not one of: " + join(step_paths));
  // Rank 0 of a tensor-parallel group hands its followers plans with the tokens filled in, so it
  // samples on the host; the device path pads decode steps, which its followers would not.
  if (ex.tp > 1 && ex.step_path == "device")
    return unsupported(w + ": step_path: device needs tp: 1 (under tensor parallelism rank 0 samples on the host); "
                       "use step_path: auto or host");
  const std::set<std::string> weights = {"auto", "f32", "bf16", "fp8", "q8_0", "q4_0", "q4_1", "mxfp4"};
  if (!weights.count(ex.weights))
    return invalid_argument(w + ": weights '" + ex.weights + "' is not one of: " + join(weights));
  if (ex.threads < 0) return invalid_argument(w + ": threads must be >= 0 (0 = all cores)");
  if (ex.tp < 1 || ex.tp > kMaxTp)
    return invalid_argument(w + ": tp must be in [1, " + std::to_string(kMaxTp) + "] (got " + std::to_string(ex.tp) + ")");
  return Status::ok();
}

Status validate_instance(const InstanceConfig& inst) {
  if (!valid_instance_name(inst.name))
    return invalid_argument("instance name '" + inst.name +
                            "' must be 1 to 64 letters, digits, '_', '-' or '.' (it labels /metrics series)");
  const std::string w = "instances[" + inst.name + "]";
  if (auto role = parse_pd_role(inst.role); !role) return invalid_argument(w + ": " + role.status().message());
  // A remote instance's other sections are what its `brigade node` runs (one file describes the
  // whole cluster), so they are checked here too.
  if (!inst.remote.empty()) {
    auto endpoint = parse_endpoint(inst.remote);
    if (!endpoint) return invalid_argument(w + ": remote: " + endpoint.status().message());
  }
  if (inst.executors.size() != 1)
    return unsupported(w + " has " + std::to_string(inst.executors.size()) + " executors; this build runs exactly one");
  BRIGADE_RETURN_IF_ERROR(validate_executor(inst.executors.front(), w));
  const auto& s = inst.scheduler;
  if (s.max_running < 1) return invalid_argument(w + ": scheduler.max_running must be >= 1");
  if (s.max_waiting < 0) return invalid_argument(w + ": scheduler.max_waiting must be >= 0");
  if (s.max_step_tokens < 1) return invalid_argument(w + ": scheduler.max_step_tokens must be >= 1");
  if (s.max_model_len < 0) return invalid_argument(w + ": scheduler.max_model_len must be >= 0 (0 = the model's positions)");
  if (s.max_inflight_steps < 1 || s.max_inflight_steps > 8)
    return invalid_argument(w + ": scheduler.max_inflight_steps must be in [1, 8]");
  BRIGADE_RETURN_IF_ERROR(validate_speculative(s.speculative, w));
  const auto& k = inst.kv;
  if (k.page_size < 1 || k.page_size > 1024) return invalid_argument(w + ": kv.page_size must be in [1, 1024]");
  if (k.pages < 0) return invalid_argument(w + ": kv.pages must be >= 0 (0 = from kv.memory_mb)");
  if (k.pages == 0 && k.memory_mb < 1) return invalid_argument(w + ": kv.memory_mb must be >= 1");
  if (!(k.memory_fraction >= 0.0 && k.memory_fraction <= 1.0))
    return invalid_argument(w + ": kv.memory_fraction must be in (0, 1], or 0 for kv.memory_mb");
  const std::set<std::string> dtypes = {"auto", "f32", "bf16", "f16", "int8"};
  if (!dtypes.count(k.dtype)) return invalid_argument(w + ": kv.dtype '" + k.dtype + "' is not one of: " + join(dtypes));
  return validate_cache(inst.cache, w);
}

// What instances must not share: a GPU (each instance's ranks take GPUs N .. N+tp-1; two
// instances on one GPU would split its memory and serialise on it, and one instance's CUDA graph
// captures would meet the other's allocations) and a disk tier directory (RocksDB locks it).
Status check_instances_apart(const std::vector<InstanceConfig>& instances) {
  std::map<int, std::string> gpu_owner;
  std::map<std::string, std::string> disk_owner;
  std::map<std::string, std::string> endpoint_owner;
  for (const InstanceConfig& inst : instances) {
    if (!inst.remote.empty()) {
      // One node serves one instance: two names for one endpoint would be one process counted twice.
      auto [it, fresh] = endpoint_owner.emplace(inst.remote, inst.name);
      if (!fresh)
        return invalid_argument("instances '" + it->second + "' and '" + inst.name + "' both name remote '" +
                                inst.remote + "'; a brigade node serves one instance");
      continue;  // its GPUs and disk belong to its node's host
    }
    const ExecutorConfig& ex = inst.executors.front();
    const DeviceSpec dev = *parse_device(ex.device);  // validated before
    for (int r = 0; dev.cuda && r < ex.tp; ++r) {
      auto [it, fresh] = gpu_owner.emplace(dev.index + r, inst.name);
      if (!fresh)
        return unsupported("instances '" + it->second + "' and '" + inst.name + "' both use GPU " +
                           std::to_string(dev.index + r) +
                           "; each instance needs GPUs of its own (cuda:N puts its tp ranks on N .. N+tp-1)");
    }
    const auto& disk = inst.cache.disk_path;
    if (disk.empty()) continue;
    auto [it, fresh] = disk_owner.emplace(disk, inst.name);
    if (!fresh)
      return invalid_argument("instances '" + it->second + "' and '" + inst.name + "' both name cache.disk_path '" +
                              disk + "'; each instance needs a disk tier directory of its own");
  }
  return Status::ok();
}

// PD separation: prefill instances hand sequences with their KV pages to decode instances, so
// both kinds must exist, and the page bytes one writes must mean the same to the other.
Status validate_pd(const std::vector<InstanceConfig>& instances, const PdConfig& pd) {
  const std::set<std::string> transfers = {"auto", "local", "inline", "shm"};
  if (!transfers.count(pd.transfer))
    return invalid_argument("pd.transfer '" + pd.transfer + "' is not one of: " + join(transfers));
  int n_prefill = 0, n_decode = 0;
  const InstanceConfig* first = nullptr;
  for (const InstanceConfig& inst : instances) {
    const PdRole role = *parse_pd_role(inst.role);  // validated before
    if (role == PdRole::both) continue;
    (role == PdRole::prefill ? n_prefill : n_decode)++;
    const std::string w = "instances[" + inst.name + "]";
    if (!first) {
      first = &inst;
      continue;
    }
    if (inst.kv.page_size != first->kv.page_size || inst.kv.dtype != first->kv.dtype)
      return invalid_argument(w + ": kv.page_size " + std::to_string(inst.kv.page_size) + " and kv.dtype " +
                              inst.kv.dtype + " differ from instances[" + first->name + "]'s (" +
                              std::to_string(first->kv.page_size) + ", " + first->kv.dtype +
                              "): prefill and decode instances must share one KV layout");
  }
  if (n_prefill + n_decode == 0) return Status::ok();
  if (n_prefill == 0 || n_decode == 0)
    return invalid_argument("PD separation needs at least one prefill and one decode instance (this topology has " +
                            std::to_string(n_prefill) + " prefill and " + std::to_string(n_decode) + " decode)");
  if (n_prefill + n_decode != static_cast<int>(instances.size()))
    return invalid_argument("an instance with role both cannot serve beside prefill and decode instances: give "
                            "every instance role prefill or decode, or none of them");
  return Status::ok();
}

Status validate_router(const RouterConfig& r) {
  const std::set<std::string> policies = {"cache_aware", "least_load", "round_robin"};
  if (!policies.count(r.policy))
    return invalid_argument("router.policy '" + r.policy + "' is not one of: " + join(policies));
  if (!(r.cache_threshold >= 0.0 && r.cache_threshold <= 1.0))
    return invalid_argument("router.cache_threshold must be in [0, 1] (the matched fraction of a prompt)");
  if (r.balance_abs_threshold < 0) return invalid_argument("router.balance_abs_threshold must be >= 0 (requests)");
  if (!(r.balance_rel_threshold >= 1.0)) return invalid_argument("router.balance_rel_threshold must be >= 1");
  if (r.max_tree_tokens < 1) return invalid_argument("router.max_tree_tokens must be >= 1");
  return Status::ok();
}

Status parse_router(const YAML::Node& n, const std::string& where, RouterConfig& router) {
  return MapReader(n, where)
      .read("policy", router.policy)
      .read("cache_threshold", router.cache_threshold)
      .read("balance_abs_threshold", router.balance_abs_threshold)
      .read("balance_rel_threshold", router.balance_rel_threshold)
      .read("max_tree_tokens", router.max_tree_tokens)
      .status();
}

// A station's `options:` mapping, scalars only, kept as text: its factory reads and checks them.
Status parse_station_options(const YAML::Node& o, const std::string& where, std::map<std::string, std::string>& out) {
  if (!o.IsMap()) return invalid_argument(where + " must be a mapping of option: value");
  for (const auto& kv : o) {
    const auto key = kv.first.as<std::string>();
    if (!kv.second.IsScalar()) return invalid_argument(where + "." + key + " must be a scalar (a number, word or string)");
    out[key] = kv.second.Scalar();
  }
  return Status::ok();
}

// One `stations:` entry; `name` defaults to the type.
Status parse_station(const YAML::Node& n, const std::string& where, StationConfig& st) {
  const Status read = MapReader(n, where)
                          .read("name", st.name)
                          .read("type", st.type)
                          .read("detached", st.detached)
                          .nested("options", [&](const YAML::Node& o, const std::string& w) {
                            return parse_station_options(o, w, st.options);
                          })
                          .status();
  if (!read.is_ok()) return read;
  if (st.type.empty()) return invalid_argument(where + ".type is missing: name the station's type");
  if (st.name.empty()) st.name = st.type;
  return Status::ok();
}

Status parse_stations(const YAML::Node& list, const std::string& where, std::vector<StationConfig>& out) {
  if (!list.IsSequence()) return invalid_argument(where + " must be a list of stations");
  for (size_t i = 0; i < list.size(); ++i) {
    StationConfig st;
    BRIGADE_RETURN_IF_ERROR(parse_station(list[i], where + "[" + std::to_string(i) + "]", st));
    out.push_back(std::move(st));
  }
  return Status::ok();
}

Status validate_stations(const std::vector<StationConfig>& stations) {
  std::set<std::string> names;
  for (const StationConfig& st : stations) {
    if (!valid_instance_name(st.name))
      return invalid_argument("station name '" + st.name + "' must be 1-64 letters, digits, '_', '-' or '.'");
    if (!names.insert(st.name).second)
      return invalid_argument("two stations are named '" + st.name + "': give each a unique `name:`");
  }
  return Status::ok();
}

}  // namespace

TopologyConfig default_topology() { return TopologyConfig{}; }

const char* pd_role_name(PdRole r) {
  switch (r) {
    case PdRole::both: return "both";
    case PdRole::prefill: return "prefill";
    case PdRole::decode: return "decode";
  }
  return "?";
}

Expected<PdRole> parse_pd_role(const std::string& name) {
  if (name == "both") return PdRole::both;
  if (name == "prefill") return PdRole::prefill;
  if (name == "decode") return PdRole::decode;
  return invalid_argument("role '" + name + "' is not one of: both, decode, prefill");
}

bool TopologyConfig::pd_separated() const {
  return std::any_of(instances.begin(), instances.end(), [](const InstanceConfig& i) { return i.role != "both"; });
}

Expected<DeviceSpec> parse_device(const std::string& device) {
  if (device == "cpu") return DeviceSpec{};
  if (device == "cuda") return DeviceSpec{true, 0};
  const std::string prefix = "cuda:";
  if (device.rfind(prefix, 0) == 0 && device.size() > prefix.size() && device.size() <= prefix.size() + 4 &&
      std::all_of(device.begin() + static_cast<std::ptrdiff_t>(prefix.size()), device.end(),
                  [](char c) { return c >= '0' && c <= '9'; }))
    return DeviceSpec{true, std::stoi(device.substr(prefix.size()))};
  return invalid_argument("device '" + device + "' is not one of: cpu, cuda, cuda:N (N = GPU ordinal)");
}

Expected<Endpoint> parse_endpoint(const std::string& text, bool allow_any_port) {
  const std::string want = " (want HOST:PORT, e.g. 127.0.0.1:7001)";
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return invalid_argument("'" + text + "' is not HOST:PORT" + want);
  Endpoint e;
  e.host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (e.host.find(':') != std::string::npos || e.host.find('[') != std::string::npos)
    return unsupported("'" + text + "': IPv6 addresses are not supported; use a host name or an IPv4 address");
  if (!std::all_of(e.host.begin(), e.host.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
      }))
    return invalid_argument("'" + text + "': host '" + e.host + "' has characters a host name cannot have" + want);
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return invalid_argument("'" + text + "': port '" + port + "' is not a number" + want);
  e.port = std::stoi(port);
  const int lowest = allow_any_port ? 0 : 1;
  if (e.port < lowest || e.port > 65535)
    return invalid_argument("'" + text + "': port must be in [" + std::to_string(lowest) + ", 65535]");
  return e;
}

Status TopologyConfig::validate() const {
  if (instances.empty()) return invalid_argument("the topology has no instances: list at least one under instances:");
  std::set<std::string> names;
  for (const InstanceConfig& inst : instances) {
    BRIGADE_RETURN_IF_ERROR(validate_instance(inst));
    if (!names.insert(inst.name).second)
      return invalid_argument("two instances are named '" + inst.name + "': instance names must be unique");
  }
  BRIGADE_RETURN_IF_ERROR(check_instances_apart(instances));
  BRIGADE_RETURN_IF_ERROR(validate_pd(instances, pd));
  BRIGADE_RETURN_IF_ERROR(validate_stations(stations));
  return validate_router(router);
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
  const auto parse_instances = [&](const YAML::Node& insts, const std::string& where) {
    if (!insts.IsSequence() || insts.size() == 0) return invalid_argument(where + " must be a non-empty list");
    cfg.instances.clear();
    for (size_t i = 0; i < insts.size(); ++i) {
      InstanceConfig inst;
      BRIGADE_RETURN_IF_ERROR(parse_instance(insts[i], "instances[" + std::to_string(i) + "]", inst));
      cfg.instances.push_back(inst);
    }
    return Status::ok();
  };
  BRIGADE_RETURN_IF_ERROR(
      MapReader(root, "topology", "the topology")
          .read("model", cfg.model)
          .read("node_token_file", cfg.node_token_file)
          .nested("instances", parse_instances)
          .nested("router", [&](const YAML::Node& r, const std::string& w) { return parse_router(r, w, cfg.router); })
          .nested("pd", [&](const YAML::Node& n, const std::string& w) {
            return MapReader(n, w).read("transfer", cfg.pd.transfer).status();
          })
          .nested("stations", [&](const YAML::Node& n, const std::string& w) { return parse_stations(n, w, cfg.stations); })
          .status());
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

Status parse_speculative_json(const std::string& json_text, SpeculativeConfig& out) {
  using nlohmann::json;
  const std::string at = "--speculative-config: ";
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    return invalid_argument(at + "not JSON: " + e.what());
  }
  if (!j.is_object()) return invalid_argument(at + "must be a JSON object, e.g. {\"method\": \"mtp\", \"num_speculative_tokens\": 2}");
  const std::set<std::string> keys = {"method", "num_speculative_tokens", "model", "prompt_lookup_min",
                                      "prompt_lookup_max", "disable_by_batch_size", "min_acceptance", "kv_tokens"};
  for (const auto& [k, v] : j.items()) {
    if (!keys.count(k)) return invalid_argument(at + "unknown key '" + k + "'; valid: " + join(keys));
    const bool ok = k == "method" || k == "model" ? v.is_string() : k == "min_acceptance" ? v.is_number() : v.is_number_integer();
    if (!ok) return invalid_argument(at + "'" + k + "' has the wrong type (" + v.type_name() + ")");
  }
  if (j.contains("model")) out.model = j["model"].get<std::string>();
  if (j.contains("method")) {
    const std::string m = j["method"].get<std::string>();
    const std::map<std::string, std::string> methods = {
        {"ngram", "ngram"},        {"draft_model", "draft_model"}, {"mtp", "mtp"},
        {"deepseek_mtp", "mtp"},   {"glm4_moe_mtp", "mtp"},        {"none", "none"},
        {"eagle3", "eagle3"},      {"glm4_moe_lite_mtp", "mtp"}};  // vLLM's MTP model-type names
    auto it = methods.find(m);
    if (it == methods.end())
      return invalid_argument(at + "method '" + m +
                              "' is not one of: deepseek_mtp, draft_model, eagle3, glm4_moe_lite_mtp, glm4_moe_mtp, mtp, ngram, "
                              "none");
    out.method = it->second;
  } else if (j.contains("model")) {
    // vLLM infers the method from the model's name: "eagle-" is EAGLE-1/2, "eagle3" EAGLE-3
    // (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, AngelSlim/Qwen3-8B_eagle3, RedHatAI/...speculator.eagle3).
    std::string name = out.model;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (name.find("eagle-") != std::string::npos)
      return invalid_argument(at + "model '" + out.model + "' names an EAGLE-1/2 head (vLLM infers method eagle from "
                              "\"eagle-\" in the name), which is not supported; EAGLE-3 heads are (method eagle3)");
    out.method = name.find("eagle3") != std::string::npos ? "eagle3" : "draft_model";
  } else {
    return invalid_argument(at + "needs a method (ngram, draft_model, mtp, eagle3) or a draft model");
  }
  if (j.contains("num_speculative_tokens")) out.num_tokens = j["num_speculative_tokens"].get<int>();
  if (j.contains("prompt_lookup_min")) out.ngram_min = j["prompt_lookup_min"].get<int>();
  if (j.contains("prompt_lookup_max")) out.ngram_max = j["prompt_lookup_max"].get<int>();
  if (j.contains("disable_by_batch_size")) out.disable_batch_size = j["disable_by_batch_size"].get<int>();
  if (j.contains("min_acceptance")) out.min_acceptance = j["min_acceptance"].get<double>();
  if (j.contains("kv_tokens")) out.kv_tokens = j["kv_tokens"].get<int>();
  return Status::ok();
}

}  // namespace brigade
