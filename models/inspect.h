// Facts about a checkpoint for `brigade inspect`, read from its headers without loading weights
// onto any backend.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/status.h"
#include "models/model_config.h"

namespace brigade {

struct ModelInfo {
  std::string path;
  std::string format;  // "safetensors", "llama2.c" or "gguf"
  ModelConfig config;
  int n_tensors = 0;
  int64_t n_params = 0;  // elements over all stored tensors (an fp8 checkpoint's scales excepted)
  int64_t n_bytes = 0;   // bytes of all stored tensors
  // Stored type ("bf16", or a GGUF block type's ggml name: "Q4_K") -> tensors, and their bytes.
  std::map<std::string, int> n_tensors_by_dtype;
  std::map<std::string, int64_t> n_bytes_by_dtype;
};

// Opens the checkpoint (same path rules and errors as Model::load) and summarises it.
Expected<ModelInfo> inspect_model(const std::string& path);
// A few human-readable lines ("architecture: llama", "parameters: 1.2M", ...).
std::string format_model_info(const ModelInfo& info);

}  // namespace brigade
