// brigade: the command line (DESIGN.md §10).
#include <CLI/CLI.hpp>

#include <cstring>

#include "core/logging.h"
#include "cpu/openblas_core.h"
#include "tools/commands.h"

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
  // vLLM's two-letter short forms, which CLI11's one-letter short names cannot spell.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-tp") == 0) argv[i] = const_cast<char*>("--tensor-parallel-size");
    if (std::strcmp(argv[i], "-dp") == 0) argv[i] = const_cast<char*>("--data-parallel-size");
  }
  CLI11_PARSE(app, argc, argv);
  if (!log_level.empty() && !brigade::set_log_level(log_level)) {
    std::fprintf(stderr, "error: unknown --log-level '%s' (valid: trace, debug, info, warn, error, off)\n", log_level.c_str());
    return 2;
  }
  return run ? run() : 0;
}
