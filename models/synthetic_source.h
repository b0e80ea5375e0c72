// `synthetic:` model specs: a model with random weights and no file, for benchmarks on large
// shapes (DESIGN.md §4). Model::load accepts "synthetic:<shape>[,key=value...]":
//
//   shapes: llama3-8b (Llama-3-8B: hidden 4096, 32 layers, 32/8 heads, MLP 14336, vocab 128256),
//           llama3-1b (Llama-3.2-1B, tied embeddings), tiny (hidden 256, 4 layers, vocab 1000)
//   keys:   layers=N (fewer layers, same per-layer shape), vocab=N, seed=N
//
// The weights are bf16 values, uniform with the variance write_synthetic_model uses
// (1/fan_in for matrices, 0.02^2 for the embedding, 1 + small noise for norms). To keep host
// memory and start-up time small for 8B parameters, each weight is a view at a seed-dependent
// offset into one random pool per variance class (pools sized to the largest weight of their
// class), so weights are random but not independent: fine for speed, not for quality.
#pragma once

#include <memory>
#include <string>

#include "core/backend.h"
#include "core/status.h"
#include "models/model.h"
#include "models/model_config.h"

namespace brigade {

constexpr const char* kSyntheticPrefix = "synthetic:";

// True when `path` is a synthetic spec (starts with "synthetic:").
bool is_synthetic_spec(const std::string& path);

// The config a spec describes; invalid_argument naming the bad part and the accepted ones.
Expected<ModelConfig> synthetic_config(const std::string& spec);

// Builds the model on `backend` (Model::load calls this for synthetic specs).
Expected<std::unique_ptr<Model>> load_synthetic(const std::string& spec, Backend& backend, const LoadOptions& options);

}  // namespace brigade
