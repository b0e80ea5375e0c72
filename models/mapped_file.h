// MappedFile: a whole file memory-mapped read-only, with bounds-checked access.
//
// Weights are read straight from the mapping (no copy) until the backend converts them. The
// mapping lives as long as the MappedFile; views into it must not outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"

namespace brigade {

class MappedFile {
 public:
  // Maps `path`; not_found when it does not exist, io_error when the OS refuses.
  // An empty file maps to a zero-length span.
  static Expected<std::shared_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  size_t size() const { return size_; }
  const uint8_t* data() const { return data_; }
  // Bytes [offset, offset + n); corrupt (naming the file and `what`) when outside the file.
  Expected<std::span<const uint8_t>> bytes(uint64_t offset, uint64_t n, const std::string& what) const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a small text file (config.json, tokenizer.json) whole; not_found / io_error as above.
Expected<std::string> read_text_file(const std::string& path);

}  // namespace brigade
