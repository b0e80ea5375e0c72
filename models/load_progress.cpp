#include "models/load_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <vector>

namespace brigade {

std::string load_progress_name(const Checkpoint& ck) {
  const QuantConfig& q = ck.config().quant;
  if (q.quantized()) return ck.path() + " (" + q.describe() + ")";
  std::map<std::string, size_t> block_bytes;  // GGUF block types -> their bytes
  for (const auto& [name, t] : ck.tensors())
    if (t.block_quantized()) block_bytes[t.type_name()] += t.bytes.size();
  if (block_bytes.empty()) return ck.path();
  std::vector<std::pair<size_t, std::string>> by_size;
  for (const auto& [type, bytes] : block_bytes) by_size.emplace_back(bytes, type);
  std::sort(by_size.rbegin(), by_size.rend());
  std::string types;
  for (const auto& [bytes, type] : by_size) types += (types.empty() ? "" : ", ") + type;
  return ck.path() + " (" + types + ")";
}

std::string format_load_progress(const std::string& name, int done, int total, int64_t bytes, int width) {
  total = std::max(total, 1);
  done = std::clamp(done, 0, total);
  const int filled = static_cast<int>(static_cast<int64_t>(done) * width / total);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < width) bar += '>';
  bar.resize(static_cast<size_t>(width), ' ');
  char tail[64];
  std::snprintf(tail, sizeof(tail), "] %d/%d layers, %.2f GiB", done, total, static_cast<double>(bytes) / (1ull << 30));
  return "loading " + name + " [" + bar + tail;
}

LoadProgress::LoadProgress(std::string name, int total, bool wanted)
    : name_(std::filesystem::path(name).filename().string()), total_(total),
      enabled_(wanted && ::isatty(STDERR_FILENO) != 0) {
  if (name_.empty()) name_ = name;  // a directory path ending in '/'
}

void LoadProgress::update(int done, int64_t bytes) {
  if (!enabled_) return;
  const std::string line = format_load_progress(name_, done, total_, bytes);
  std::fprintf(stderr, "\r%s", line.c_str());
  std::fflush(stderr);
  open_ = true;
}

void LoadProgress::finish() {
  if (!open_) return;
  std::fputc('\n', stderr);
  open_ = false;
}

}  // namespace brigade
