// ZIP archives of stored (uncompressed) entries, read in place from a mapped file: the container
// of torch.save's checkpoints (PyTorchStreamWriter writes every record stored, its data aligned
// to 64 bytes, with ZIP64 records past 4 GiB).
//
// Read from the central directory (found through the end-of-central-directory record and, when
// present, its ZIP64 locator and record); each entry's data starts after its local header, whose
// name and extra field lengths may differ from the central directory's (torch pads the local
// extra field to align the data). Compressed or encrypted entries and multi-disk archives are
// refused by name; CRCs are not checked (the data is read in place, gigabytes of it).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "core/status.h"
#include "models/mapped_file.h"

namespace brigade {

struct ZipEntry {
  uint64_t offset = 0;  // of the first data byte in the file
  uint64_t size = 0;
};

// Every entry of the archive in `file`, by name. corrupt (naming the file and what is wrong) for a
// file that is not a ZIP archive, is truncated, or whose records point outside it; unsupported for
// a compressed or encrypted entry or a multi-disk archive. A name appearing twice is corrupt.
Expected<std::map<std::string, ZipEntry>> read_zip_entries(const MappedFile& file);

// True when `bytes` begins with a ZIP local file header ("PK\3\4").
bool looks_like_zip(std::span<const uint8_t> bytes);

}  // namespace brigade
