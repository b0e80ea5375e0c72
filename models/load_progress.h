// A progress bar for loading weights, drawn on stderr only when stderr is a terminal (never into
// logs or pipes): "\rloading NAME [=========>          ] 12/32 layers, 1.20 GiB".
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "models/checkpoint.h"

namespace brigade {

// The bar's text for `done` of `total` steps (clamped), `bytes` loaded so far; `width` cells.
std::string format_load_progress(const std::string& name, int done, int total, int64_t bytes, int width = 30);

// The bar's name for checkpoint `ck`: its path, and for an fp8 checkpoint its weight format
// ("/m/DeepSeek-V3 (fp8 e4m3, 128x128 block scales (quant_method fp8))"), for a GGUF file its
// block-quantized types, most bytes first ("/m/llama-q4_k_m.gguf (Q4_K, Q6_K)").
std::string load_progress_name(const Checkpoint& ck);

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

// Runs load_layer(l) for l in [0, n_layers) in order with a progress bar named `name` (drawn when
// `wanted`), reporting bytes_loaded() after each layer; stops at the first error.
template <class LoadLayer, class BytesLoaded>
Status load_layers_with_progress(const std::string& name, int n_layers, bool wanted, LoadLayer&& load_layer,
                                 BytesLoaded&& bytes_loaded) {
  LoadProgress progress(name, n_layers, wanted);
  for (int l = 0; l < n_layers; ++l) {
    BRIGADE_RETURN_IF_ERROR(load_layer(l));
    progress.update(l + 1, bytes_loaded());
  }
  progress.finish();
  return Status::ok();
}

}  // namespace brigade
