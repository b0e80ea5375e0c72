#include "models/zip_archive.h"

#include <algorithm>
#include <cstring>

namespace brigade {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndOfCentralDir = 0x06054b50;
constexpr uint32_t kZip64EndLocator = 0x07064b50;
constexpr uint32_t kZip64End = 0x06064b50;
constexpr size_t kEndSize = 22, kLocatorSize = 20, kZip64EndSize = 56, kCentralSize = 46, kLocalSize = 30;
constexpr uint16_t kZip64Extra = 0x0001;

template <typename T>
T le(const uint8_t* p) {  // little-endian host assumed (x86-64, aarch64), as in safetensors.cpp
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The ZIP64 extended-information field's values that replace 0xFFFFFFFF fields, in their fixed
// order: uncompressed size, compressed size, local header offset (only those that overflowed).
Status read_zip64_extra(std::span<const uint8_t> extra, uint64_t& size, uint64_t& compressed, uint64_t& offset,
                        const std::string& where) {
  size_t at = 0;
  while (at + 4 <= extra.size()) {
    const uint16_t id = le<uint16_t>(extra.data() + at);
    const uint16_t len = le<uint16_t>(extra.data() + at + 2);
    if (at + 4 + len > extra.size()) return corrupt(where + ": extra field overruns its entry");
    if (id == kZip64Extra) {
      size_t v = at + 4;
      const size_t end = v + len;
      for (uint64_t* field : {&size, &compressed, &offset}) {
        if (*field != 0xFFFFFFFFu) continue;
        if (v + 8 > end) return corrupt(where + ": ZIP64 extra field too short for the sizes it replaces");
        *field = le<uint64_t>(extra.data() + v);
        v += 8;
      }
      return Status::ok();
    }
    at += 4 + len;
  }
  if (size == 0xFFFFFFFFu || compressed == 0xFFFFFFFFu || offset == 0xFFFFFFFFu)
    return corrupt(where + ": 32-bit size or offset at its ZIP64 marker without a ZIP64 extra field");
  return Status::ok();
}

}  // namespace

bool looks_like_zip(std::span<const uint8_t> bytes) {
  return bytes.size() >= 4 && le<uint32_t>(bytes.data()) == kLocalHeader;
}

Expected<std::map<std::string, ZipEntry>> read_zip_entries(const MappedFile& file) {
  const std::string& path = file.path();
  const uint8_t* base = file.data();
  const uint64_t n = file.size();
  if (n < kEndSize) return corrupt(path + ": too short for a ZIP archive (" + std::to_string(n) + " bytes)");
  // The end-of-central-directory record: last in the file, before a comment of up to 64 KiB.
  uint64_t end_at = n;
  for (uint64_t at = n - kEndSize + 1; at-- > 0 && n - at <= kEndSize + 0xFFFF;) {
    if (le<uint32_t>(base + at) == kEndOfCentralDir && at + kEndSize + le<uint16_t>(base + at + 20) == n) {
      end_at = at;
      break;
    }
  }
  if (end_at == n)
    return corrupt(path + ": no ZIP end-of-central-directory record (truncated, or not a ZIP archive)");
  const uint8_t* end = base + end_at;
  if (le<uint16_t>(end + 4) != 0 || le<uint16_t>(end + 6) != 0)
    return unsupported(path + ": a multi-disk ZIP archive");
  uint64_t count = le<uint16_t>(end + 10);
  uint64_t dir_size = le<uint32_t>(end + 12);
  uint64_t dir_offset = le<uint32_t>(end + 16);
  if (count == 0xFFFF || dir_size == 0xFFFFFFFFu || dir_offset == 0xFFFFFFFFu) {
    if (end_at < kLocatorSize || le<uint32_t>(end - kLocatorSize) != kZip64EndLocator)
      return corrupt(path + ": ZIP64 sizes without a ZIP64 end-of-central-directory locator");
    const uint64_t z64_at = le<uint64_t>(end - kLocatorSize + 8);
    if (z64_at > end_at - kLocatorSize || end_at - kLocatorSize - z64_at < kZip64EndSize ||
        le<uint32_t>(base + z64_at) != kZip64End)
      return corrupt(path + ": the ZIP64 end-of-central-directory locator points at no ZIP64 record");
    const uint8_t* z = base + z64_at;
    if (le<uint32_t>(z + 16) != 0 || le<uint32_t>(z + 20) != 0) return unsupported(path + ": a multi-disk ZIP archive");
    count = le<uint64_t>(z + 32);
    dir_size = le<uint64_t>(z + 40);
    dir_offset = le<uint64_t>(z + 48);
  }
  if (dir_offset > end_at || dir_size > end_at - dir_offset)
    return corrupt(path + ": the ZIP central directory [" + std::to_string(dir_offset) + ", +" +
                   std::to_string(dir_size) + ") lies outside the file (truncated?)");
  if (count > dir_size / kCentralSize)
    return corrupt(path + ": " + std::to_string(count) + " ZIP entries cannot fit a central directory of " +
                   std::to_string(dir_size) + " bytes");

  std::map<std::string, ZipEntry> out;
  uint64_t at = dir_offset;
  const uint64_t dir_end = dir_offset + dir_size;
  for (uint64_t i = 0; i < count; ++i) {
    const std::string where = path + ": ZIP entry " + std::to_string(i);
    if (dir_end - at < kCentralSize || le<uint32_t>(base + at) != kCentralHeader)
      return corrupt(where + ": bad central directory record");
    const uint8_t* c = base + at;
    const uint16_t flags = le<uint16_t>(c + 8), method = le<uint16_t>(c + 10);
    uint64_t compressed = le<uint32_t>(c + 20), size = le<uint32_t>(c + 24);
    const uint16_t name_len = le<uint16_t>(c + 28), extra_len = le<uint16_t>(c + 30), comment_len = le<uint16_t>(c + 32);
    uint64_t local = le<uint32_t>(c + 42);
    if (dir_end - at - kCentralSize < uint64_t{name_len} + extra_len + comment_len)
      return corrupt(where + ": name or extra field overruns the central directory");
    const std::string name(reinterpret_cast<const char*>(c + kCentralSize), name_len);
    const std::string named = path + ": ZIP entry '" + name + "'";
    BRIGADE_RETURN_IF_ERROR(read_zip64_extra({c + kCentralSize + name_len, extra_len}, size, compressed, local, named));
    if (flags & 1u) return unsupported(named + " is encrypted");
    if (method != 0)
      return unsupported(named + " is compressed (method " + std::to_string(method) +
                         "); torch.save stores entries uncompressed: load and save it again with torch.save");
    if (compressed != size) return corrupt(named + ": stored entry with compressed size != size");
    if (local > dir_offset || dir_offset - local < kLocalSize || le<uint32_t>(base + local) != kLocalHeader)
      return corrupt(named + ": its local header offset " + std::to_string(local) + " points at no local header");
    const uint64_t data = local + kLocalSize + le<uint16_t>(base + local + 26) + le<uint16_t>(base + local + 28);
    if (data > dir_offset || size > dir_offset - data)
      return corrupt(named + ": its " + std::to_string(size) + " bytes at " + std::to_string(data) +
                     " run past the data area (truncated?)");
    if (!out.emplace(name, ZipEntry{data, size}).second) return corrupt(named + " appears twice");
    at += kCentralSize + name_len + extra_len + comment_len;
  }
  return out;
}

}  // namespace brigade
