// PyTorch checkpoints: the files torch.save writes (pytorch_model.bin and its shards, as
// transformers' save_pretrained wrote them before safetensors; PEFT's adapter_model.bin; EAGLE-3
// heads), read the way torch.load(weights_only=True) reads them, with no Python and no code run.
//
// Two containers:
//   - the ZIP archive of torch >= 1.6 (models/zip_archive.h): <archive>/data.pkl, the pickled
//     state dict, and <archive>/data/<key>, one record of raw little-endian bytes per storage;
//   - the legacy stream of torch < 1.6 (torch.save(..., _use_new_zipfile_serialization=False)):
//     five pickles back to back (magic number, protocol 1001, sys_info, the state dict, the sorted
//     storage keys), then per storage an 8-byte element count and its bytes.
//
// The pickle is interpreted, not executed: a fixed set of opcodes (protocols 2 to 5, and the
// protocol-0 ones torch's pickles can hold) over a value stack and memo, and only the globals a
// tensor state dict uses (collections.OrderedDict, torch._utils._rebuild_tensor{,_v2,_v3},
// _rebuild_parameter{,_with_state}, torch._tensor._rebuild_from_type_v2 for plain tensors and
// parameters, torch.<Type>Storage and torch.storage.UntypedStorage, torch.<dtype>, torch.Size,
// _codecs.encode). Any other global is refused by
// name before anything else happens: a pickle that would import os.system, or a whole pickled
// nn.Module, is an error, not a program.
//
// Tensors are views into the mapping where their storage holds them contiguously and aligned;
// others (a transposed or strided view saved as such, float64 read as f32, the legacy stream's
// unaligned storages) are copied into `derived`. Tensors sharing a storage (tied weights) share
// its bytes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/mapped_file.h"
#include "models/raw_tensor.h"

namespace brigade {

// One state-dict entry as the pickle describes it: a view of a storage.
struct TorchTensorRecord {
  std::string name;
  std::string dtype;         // torch's name: "float32", "bfloat16", "float8_e4m3fn", ...
  std::string storage_type;  // "FloatStorage", "BFloat16Storage", ..., "UntypedStorage" (counted in bytes)
  std::string storage_key;   // the record's name under data/ (zip) or in the key list (legacy)
  int64_t storage_numel = 0;  // elements of the storage, as its persistent id says
  int64_t offset = 0;         // of the tensor's first element in the storage, in elements of dtype
  std::vector<int64_t> sizes, strides;
};

// The state dict pickled in `pickle` (a flat {name: tensor} dict or OrderedDict), in the pickle's
// order. corrupt for a malformed pickle (stack underflow, unknown memo index, truncated data, a
// top-level value that is not such a dict, ...); unsupported for a global outside the allowed set
// (the message names it). Errors begin with `where`. When `consumed` is given it receives the
// bytes read up to and including STOP (the legacy stream holds several pickles back to back).
Expected<std::vector<TorchTensorRecord>> unpickle_state_dict(std::span<const uint8_t> pickle, const std::string& where,
                                                             size_t* consumed = nullptr);

// Adds every tensor of the torch.save file `file` to `out` (zip or legacy container, found by its
// first bytes). A name already in `out` is corrupt (duplicated across shards). dtypes: float32,
// float16, bfloat16, int64, int32, int8, uint8, bool (as u8) and float8_e4m3fn as the DType of the
// same name, float64 as f32 (copied); others unsupported, naming the tensor.
Status read_torch_checkpoint(const std::shared_ptr<MappedFile>& file, std::map<std::string, RawTensor>& out,
                             std::vector<std::vector<uint8_t>>& derived);

// The weights file read_weights_file reads in `dir`: `safetensors_name` when it exists, else
// `torch_name` (whether or not that exists).
std::string weights_file_path(const std::string& dir, const std::string& safetensors_name, const std::string& torch_name);

// A single-file weights in `dir`: `safetensors_name` when it exists, else `torch_name` (torch.save;
// `derived` as above), else not_found naming both. Adds its tensors to `out` and returns the mapped
// file, which the tensors view (as they view `derived`): keep both while the tensors are used.
// For files beside a config of their own: a LoRA adapter (adapter_model.safetensors /
// adapter_model.bin), an EAGLE-3 head (model.safetensors / pytorch_model.bin).
Expected<std::shared_ptr<MappedFile>> read_weights_file(const std::string& dir, const std::string& safetensors_name,
                                                        const std::string& torch_name,
                                                        std::map<std::string, RawTensor>& out,
                                                        std::vector<std::vector<uint8_t>>& derived);

}  // namespace brigade
