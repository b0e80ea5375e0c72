// Adding your own actor to a topology: a per-tenant token budget as a station.
//
//   token_budget --model DIR --topology examples/token_budget.yaml [--max-tokens N] < requests.txt
//
// Each input line is "TENANT<TAB>PROMPT". The program registers the station type `token_budget`
// (below) with the engine; the topology file puts it in the request path with its options
// (`tokens:` per tenant), beside brigade's own `request_log`. The station counts the tokens each
// tenant's requests generate, refuses a tenant's new requests once its budget is spent (HTTP
// 429's code, out_of_resources) and cancels its running ones the moment the budget runs out. The
// requests run one after another so the output is the same on every run; one line each:
// "TENANT [finish] N tokens".
//
// A station's methods all run on its own actor, one at a time: no locks for its state.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "brigade/engine.h"

namespace {

class TokenBudget final : public brigade::Station {
 public:
  explicit TokenBudget(int64_t tokens) : budget_(tokens) {}

  brigade::StationVerdict on_request(brigade::StationRequest& r, brigade::StationContext&) override {
    const std::string tenant = r.label("tenant");
    if (used_[tenant] >= budget_)
      return brigade::StationVerdict::reject(brigade::StatusCode::out_of_resources,
                                             "tenant '" + tenant + "' has spent its budget of " +
                                                 std::to_string(budget_) + " tokens");
    tenant_of_[r.id] = tenant;
    return brigade::StationVerdict::pass();
  }

  void on_event(const brigade::StationEvent& ev, brigade::StationContext& ctx) override {
    auto it = tenant_of_.find(ev.id);
    if (it == tenant_of_.end()) return;
    const std::string tenant = it->second;
    used_[tenant] += ev.n_new_tokens;
    if (ev.finish != brigade::StationFinish::none) {
      tenant_of_.erase(it);
      return;
    }
    if (used_[tenant] < budget_) return;
    for (const auto& [id, t] : tenant_of_)  // the budget ran out: stop all of the tenant's requests
      if (t == tenant) ctx.cancel(id);
  }

 private:
  int64_t budget_;
  std::map<std::string, int64_t> used_;
  std::map<uint64_t, std::string> tenant_of_;  // running requests
};

// The factory the engine calls for each `type: token_budget` entry of the topology.
brigade::Expected<std::unique_ptr<brigade::Station>> make_token_budget(const brigade::StationSpec& spec) {
  if (auto st = spec.check_options({"tokens"}); !st.is_ok()) return st;
  auto tokens = spec.get_number("tokens", 0);
  if (!tokens) return tokens.status();
  if (*tokens < 1) return brigade::invalid_argument("tokens must be >= 1 (the budget of each tenant)");
  return std::unique_ptr<brigade::Station>(std::make_unique<TokenBudget>(static_cast<int64_t>(*tokens)));
}

int usage(const char* why) {
  std::fprintf(stderr, "token_budget: %s\nusage: token_budget --model DIR --topology FILE [--max-tokens N] < requests.txt\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, topology_file;
  int max_tokens = 16;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage(("missing the value of " + arg).c_str());
    const char* value = argv[++i];
    if (arg == "--model") model = value;
    else if (arg == "--topology") topology_file = value;
    else if (arg == "--max-tokens") max_tokens = std::atoi(value);
    else return usage(("unknown option " + arg).c_str());
  }
  if (model.empty() || topology_file.empty()) return usage("--model and --topology are required");

  brigade::EngineOptions options;
  options.model_path = model;
  options.progress = false;
  auto topology = brigade::load_topology_file(topology_file);
  if (!topology) return usage(topology.status().to_string().c_str());
  options.topology = *topology;
  options.station_types["token_budget"] = make_token_budget;  // the name the topology's `type:` uses
  auto engine = brigade::Engine::create(options);
  if (!engine) {
    std::fprintf(stderr, "token_budget: %s\n", engine.status().to_string().c_str());
    return 1;
  }

  for (std::string line; std::getline(std::cin, line);) {
    const auto tab = line.find('\t');
    if (tab == std::string::npos) continue;
    brigade::GenerateOptions request;
    request.prompt = line.substr(tab + 1);
    request.max_tokens = max_tokens;
    request.sampling.temperature = 0.0f;
    request.ignore_eos = true;
    request.labels = {{"tenant", line.substr(0, tab)}};
    auto done = (*engine)->generate(request);
    const std::string tenant = line.substr(0, tab);
    if (done) {
      std::printf("%s [%s] %zu tokens\n", tenant.c_str(), brigade::finish_reason_name(done->finish),
                  done->token_ids.size());
    } else {
      std::printf("%s [error] %s\n", tenant.c_str(), done.status().message().c_str());
    }
  }
  return 0;
}
