// A progress bar for loading weights, drawn on stderr only when stderr is a terminal (never into
// logs or pipes): "\rloading NAME [=========>          ] 12/32 layers, 1.20 GiB".
#pragma once

#include <cstdint>
#include <string>

namespace brigade {

// The bar's text for `done` of `total` steps (clamped), `bytes` loaded so far; `width` cells.
std::string format_load_progress(const std::string& name, int done, int total, int64_t bytes, int width = 30);

class LoadProgress {
 public:
  // Draws only when `wanted` (LoadOptions::progress) and stderr is a terminal.
  LoadProgress(std::string name, int total, bool wanted);
  ~LoadProgress() { finish(); }
  LoadProgress(const LoadProgress&) = delete;
  LoadProgress& operator=(const LoadProgress&) = delete;

  void update(int done, int64_t bytes);
  // Ends the line (once); called by the destructor too, so an error mid-load leaves no bar open.
  void finish();
  bool enabled() const { return enabled_; }

 private:
  std::string name_;
  int total_;
  bool enabled_;
  bool open_ = false;
};

}  // namespace brigade
