#include "models/model.h"

#include "models/checkpoint.h"
#include "models/llama.h"

namespace brigade {

void StepBatch::clear() {
  tokens.clear();
  positions.clear();
  slots.clear();
  q_start.clear();
  ctx_len.clear();
  block_table.clear();
  max_blocks = 0;
  logit_rows.clear();
}

Expected<std::unique_ptr<Model>> Model::load(const std::string& path, Backend& backend, const LoadOptions& options) {
  BRIGADE_ASSIGN_OR_RETURN(auto checkpoint, Checkpoint::open(path));
  const std::string& arch = checkpoint->config().arch;
  if (arch == "llama") return load_llama(*checkpoint, backend, options);
  return unsupported(path + ": architecture '" + arch + "' has no implementation; supported: llama");
}

}  // namespace brigade
