// Which kernels OpenBLAS runs. OpenBLAS picks them for the CPU it detects when the library loads;
// Debian 12's 0.3.21 does not know Intel's newer server cores (Sapphire Rapids and later) and falls
// back to its generic Prescott (SSE3) kernels: on this project's machines a 4.4x slower sgemm,
// which f32 and bf16 weights' prefill and the f32 GEMM ceiling probe go through. The variable
// OPENBLAS_CORETYPE, read only at load, overrides the choice.
#pragma once

#include <string>

namespace brigade::cpu {

// The core type OpenBLAS runs ("Prescott", "SkylakeX", "Haswell", ...; openblas_get_corename).
std::string openblas_core();

// "SkylakeX" where OpenBLAS fell back to "Prescott" on a CPU with the AVX-512 subsets its SkylakeX
// kernels use (F, CD, BW, DQ, VL) and OPENBLAS_CORETYPE is unset; else empty.
std::string openblas_core_to_request();

// For an executable's main, before anything else: where openblas_core_to_request() names a core,
// sets OPENBLAS_CORETYPE to it and re-executes this program (/proc/self/exe, same arguments) so
// that OpenBLAS loads with it. Returns where there is nothing to do, or where the exec failed (it
// then warns and the program runs on as it is).
void reexec_for_openblas_core(char** argv);

}  // namespace brigade::cpu
