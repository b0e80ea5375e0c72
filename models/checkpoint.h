// Checkpoint: a model's config plus its stored tensors, memory-mapped, before any backend sees
// them. One entry point for Model::load, inspect_model and tests that read raw weights.
//
// Accepted paths:
//   - a directory with config.json and model.safetensors, or model.safetensors.index.json
//     ({"weight_map": {tensor name: shard file}}) naming several shard files beside it; without
//     either, pytorch_model.bin or pytorch_model.bin.index.json the same way (torch.save's files,
//     read without running their pickles: models/torch_checkpoint.h);
//   - a llama2.c .bin file (tensors exposed under Hugging Face names, see llama2c.h);
//   - a GGUF file (*.gguf; llama, qwen2, qwen3, phi3; F32/F16/BF16 and the ggml quantized types of
//     models/ggml_quant.h, see gguf_checkpoint.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/mapped_file.h"
#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

class Checkpoint {
 public:
  // Opens and validates the files (headers, offsets, sizes); reads no tensor data.
  static Expected<std::unique_ptr<Checkpoint>> open(const std::string& path);

  const ModelConfig& config() const { return config_; }
  const std::string& path() const { return path_; }
  const std::string& format() const { return format_; }  // "safetensors", "pytorch", "llama2.c" or "gguf"
  const std::map<std::string, RawTensor>& tensors() const { return tensors_; }

  // The tensor called `name`; not_found naming the tensor and the checkpoint when absent.
  Expected<RawTensor> tensor(const std::string& name) const;
  // As above, and corrupt unless its shape is exactly `shape` (the message gives both).
  Expected<RawTensor> tensor(const std::string& name, const std::vector<int64_t>& shape) const;
  // A checkpoint over tensors in memory the caller keeps alive while it is used (synthetic:
  // specs, defined in models/synthetic_source.cpp).
  static std::unique_ptr<Checkpoint> from_memory(std::string path, ModelConfig config,
                                                 std::map<std::string, RawTensor> tensors);

 private:
  Status open_directory();
  std::string path_;
  std::string format_;
  ModelConfig config_;
  std::vector<std::shared_ptr<MappedFile>> files_;  // keep the mappings alive
  // Bytes of tensors rewritten at open (GPT-2's transposed Conv1D weights, GPT-NeoX's q/k/v taken
  // apart: models/gpt_decoders_config.h; a torch checkpoint's strided or float64 tensors), which
  // tensors_ views as it views the mappings.
  std::vector<std::vector<uint8_t>> derived_;
  std::map<std::string, RawTensor> tensors_;
};

}  // namespace brigade
