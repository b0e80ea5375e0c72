// NullBackend: every op returns at once and computes nothing. Swapped in for the real backend,
// it leaves only what the actors, messages and model plumbing cost per step, which is what the
// orchestration benchmark measures. Weights take no memory; allocations are real (the logits
// are read back), so sampling sees all-zero logits and picks token 0.
#pragma once

#include <memory>

#include "core/backend.h"

namespace brigade {

std::unique_ptr<Backend> make_null_backend();

}  // namespace brigade
