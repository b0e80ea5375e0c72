#include "cpu/openblas_core.h"

#include <cblas.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

namespace brigade::cpu {

std::string openblas_core() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "";
}

std::string openblas_core_to_request() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";
  if (openblas_core() != "Prescott") return "";
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  return avx512 ? "SkylakeX" : "";
}

void reexec_for_openblas_core(char** argv) {
  const std::string core = openblas_core_to_request();
  if (core.empty()) return;
  ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  const int err = errno;  // execv returns only on failure
  spdlog::warn("OpenBLAS runs its generic Prescott kernels on this CPU; re-running with OPENBLAS_CORETYPE={} failed ({}). "
               "Set it in the environment for a faster f32 GEMM.",
               core, std::strerror(err));
}

}  // namespace brigade::cpu
