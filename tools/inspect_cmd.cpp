// `brigade inspect PATH`: architecture, parameter count, bytes and dtypes of a checkpoint,
// read from its headers (no weights are loaded), and the chat template chat requests use; or the
// parsed form of a topology file.
#include <cstdio>

#include "brigade/topology.h"
#include "models/inspect.h"
#include "models/classifier.h"
#include "models/model_chat_template.h"
#include "models/tokenizer.h"
#include "tools/commands.h"

namespace brigade::tools {

namespace {

bool is_yaml(const std::string& path) {
  return path.size() > 5 && (path.ends_with(".yaml") || path.ends_with(".yml"));
}

int inspect_topology(const std::string& path) {
  auto t = load_topology_file(path);
  if (!t) return fail(t.status());
  std::printf("topology: %s\nmodel: %s\n", path.c_str(), t->model.empty() ? "(given on the command line)" : t->model.c_str());
  for (const auto& inst : t->instances) {
    // A remote instance runs in its `brigade node`, with the sections below.
    if (!inst.remote.empty()) std::printf("instance %s: remote %s (brigade node)\n", inst.name.c_str(), inst.remote.c_str());
    if (inst.role != "both") std::printf("instance %s: role %s\n", inst.name.c_str(), inst.role.c_str());
    std::printf("instance %s: scheduler max_running=%d max_waiting=%d max_step_tokens=%d max_inflight_steps=%d\n",
                inst.name.c_str(), inst.scheduler.max_running, inst.scheduler.max_waiting,
                inst.scheduler.max_step_tokens, inst.scheduler.max_inflight_steps);
    if (const auto& sp = inst.scheduler.speculative; sp.method == "ngram") {
      std::printf("  speculative: method=%s num_tokens=%d ngram=%d..%d min_acceptance=%.2f disable_batch_size=%d\n",
                  sp.method.c_str(), sp.num_tokens, sp.ngram_min, sp.ngram_max, sp.min_acceptance, sp.disable_batch_size);
    } else if (sp.method == "draft_model") {
      std::printf("  speculative: method=%s model=%s num_tokens=%d kv_tokens=%d min_acceptance=%.2f disable_batch_size=%d\n",
                  sp.method.c_str(), sp.model.c_str(), sp.num_tokens, sp.kv_tokens, sp.min_acceptance,
                  sp.disable_batch_size);
    } else if (sp.method == "eagle3") {
      std::printf("  speculative: method=%s model=%s num_tokens=%d min_acceptance=%.2f disable_batch_size=%d\n",
                  sp.method.c_str(), sp.model.c_str(), sp.num_tokens, sp.min_acceptance, sp.disable_batch_size);
    } else if (sp.method == "mtp") {
      std::printf("  speculative: method=%s num_tokens=%d min_acceptance=%.2f disable_batch_size=%d\n", sp.method.c_str(),
                  sp.num_tokens, sp.min_acceptance, sp.disable_batch_size);
    }
    std::printf("  kv: page_size=%d pages=%d memory_mb=%lld dtype=%s\n", inst.kv.page_size, inst.kv.pages,
                static_cast<long long>(inst.kv.memory_mb), inst.kv.dtype.c_str());
    for (const auto& e : inst.executors) std::printf("  executor: device=%s weights=%s threads=%d\n", e.device.c_str(), e.weights.c_str(), e.threads);
  }
  const RouterConfig& r = t->router;
  if (t->instances.size() > 1)
    std::printf("router: policy=%s cache_threshold=%g balance_abs_threshold=%d balance_rel_threshold=%g "
                "max_tree_tokens=%lld\n",
                r.policy.c_str(), r.cache_threshold, r.balance_abs_threshold, r.balance_rel_threshold,
                static_cast<long long>(r.max_tree_tokens));
  if (t->pd_separated()) std::printf("pd: transfer=%s\n", t->pd.transfer.c_str());
  for (const auto& st : t->stations) {  // in request order
    std::string options;
    for (const auto& [k, v] : st.options) options += " " + k + "=" + v;
    std::printf("station %s: type=%s%s%s\n", st.name.c_str(), st.type.c_str(), st.detached ? " detached" : "",
                options.c_str());
  }
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("inspect", "Show a checkpoint's (or topology file's) facts");
  auto path = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::string>();
  cmd->add_option("path", *path, "Checkpoint directory, llama2.c .bin, or topology .yaml")->required();
  cmd->add_option("--hf-overrides", *overrides,
                  "config.json keys that make a classifier of the checkpoint (as `serve --hf-overrides`): show the "
                  "classifier they make");
  cmd->callback([path, overrides, &run] {
    run = [path, overrides] {
      if (is_yaml(*path)) return inspect_topology(*path);
      auto info = inspect_model(*path);
      if (!info) return fail(info.status());
      std::fputs(format_model_info(*info).c_str(), stdout);
      // Which template /v1/chat/completions renders with (bos/eos text from tokenizer_config.json).
      auto chat = load_chat_template(*path, "", {});
      std::printf("chat template: %s\n", chat ? chat->describe().c_str() : chat.status().message().c_str());
      // The sequence classifier /classify, /score and /rerank run (models/classifier.h).
      auto tokenizer = Tokenizer::load(*path);
      auto head = read_classifier(*path, *overrides, tokenizer ? tokenizer->get() : nullptr);
      if (!head) return fail(head.status());
      if (*head) std::printf("classifier: %s\n", (*head)->describe().c_str());
      return 0;
    };
  });
}

}  // namespace brigade::tools
