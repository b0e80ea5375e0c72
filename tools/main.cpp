// brigade: the command line (DESIGN.md §10).
#include <CLI/CLI.hpp>

#include <string>

#include "core/logging.h"
#include "cpu/openblas_core.h"
#include "tools/commands.h"

namespace {

// Whether the argument `prev` is an option of `scope` (or of the top-level `app`) that takes a
// value, so that the argument after it is that value.
bool takes_value(const CLI::App& scope, const CLI::App& app, const std::string& prev) {
  if (!prev.starts_with("-") || prev.find('=') != std::string::npos) return false;
  const CLI::Option* o = scope.get_option_no_throw(prev);
  if (o == nullptr) o = app.get_option_no_throw(prev);
  return o != nullptr && o->get_items_expected_min() > 0;
}

}  // namespace

int main(int argc, char** argv) {
  brigade::init_logging();
  brigade::cpu::reexec_for_openblas_core(argv);  // OpenBLAS's own kernels where it did not know this CPU
  CLI::App app{"brigade: an LLM inference runtime built on actors"};
  app.require_subcommand(1);
  std::string log_level;
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off (default warn)");
  std::function<int()> run;
  brigade::tools::add_generate_command(app, run);
  brigade::tools::add_make_model_command(app, run);
  brigade::tools::add_inspect_command(app, run);
  brigade::tools::add_tokenize_command(app, run);
  brigade::tools::add_demo_command(app, run);
  brigade::tools::add_serve_command(app, run);
  brigade::tools::add_bench_command(app, run);
  brigade::tools::add_node_command(app, run);
  // vLLM's two-letter short forms, which CLI11's one-letter short names cannot spell: rewritten
  // where they stand as options, not where they are the value of the option before them (CLI11
  // takes `--prompt -tp` as the prompt "-tp"), nor after "--".
  CLI::App* scope = &app;  // the subcommand once it is named
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (scope == &app && !arg.starts_with("-")) {
      for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
        if (sub->check_name(arg)) scope = sub;
      continue;
    }
    if ((arg == "-tp" || arg == "-dp") && !takes_value(*scope, app, argv[i - 1]))
      argv[i] = const_cast<char*>(arg == "-tp" ? "--tensor-parallel-size" : "--data-parallel-size");
  }
  CLI11_PARSE(app, argc, argv);
  if (!log_level.empty() && !brigade::set_log_level(log_level)) {
    std::fprintf(stderr, "error: unknown --log-level '%s' (valid: trace, debug, info, warn, error, off)\n", log_level.c_str());
    return 2;
  }
  return run ? run() : 0;
}
