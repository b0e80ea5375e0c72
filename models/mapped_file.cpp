#include "models/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace brigade {

Expected<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return not_found("file not found: " + path);
    return io_error("cannot open " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error("cannot map " + path + ": not a regular file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return io_error("cannot mmap " + path + ": " + std::strerror(err));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  return f;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Expected<std::span<const uint8_t>> MappedFile::bytes(uint64_t offset, uint64_t n,
                                                     const std::string& what) const {
  if (offset > size_ || n > size_ - offset) {
    return corrupt(path_ + ": " + what + " needs bytes [" + std::to_string(offset) + ", " +
                   std::to_string(offset + n) + ") but the file has " + std::to_string(size_) +
                   " bytes (truncated or corrupt file)");
  }
  return std::span<const uint8_t>(data_ + offset, static_cast<size_t>(n));
}

Expected<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return not_found("file not found: " + path);
    return io_error("cannot read " + path);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return io_error("error while reading " + path);
  return ss.str();
}

}  // namespace brigade
