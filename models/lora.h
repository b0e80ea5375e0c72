// LoraSet: the LoRA adapters a Llama-family model serves (vLLM's multi-LoRA), resident on the
// backend, applied per step to the rows of the sequences that chose them
// (docs/architecture.md "LoRA adapters").
//
// The decoder keeps q|k|v and gate|up fused, so adapters are stored per fused projection: for
// q|k|v, A_cat [R, hidden] stacks the A of each targeted part (R = r * parts) and B [(H + 2 KV)
// hd, R] is block-diagonal, B_q in the q rows against A_q's columns and so on, with zeros where
// a part is not targeted (an adapter on q_proj adds to the q rows only). B is stored already
// multiplied by the adapter's scale. Per step and projection, for each adapter k in the step:
//   xs = x[rows_k]  (gather_rows);  u = xs A_kᵀ;  d = u B_kᵀ  (matmul);  y[rows_k] += d  (scatter_add_rows)
// so base rows are untouched (bit for bit) whatever else is in the batch.
//
// Owned by the model; used by its one executor thread.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "models/lora_adapter.h"
#include "models/model.h"

namespace brigade {

// The decoder's projections as it runs them.
enum class LoraProj : int { qkv, o, gate_up, down };
constexpr int kLoraProjs = 4;

class LoraSet {
 public:
  // Reads and uploads `modules` (adapter id i + 1 is modules[i]; 0 is the base) into a set of
  // max(max_slots, modules.size()) slots; the others stay free for add(). Steps of up to
  // max_batch_tokens rows. Errors as read_lora_adapter, and invalid_argument for duplicate or
  // empty names.
  // Under tensor parallelism (tp_size > 1) each rank keeps its part of every adapter: the output
  // rows of q|k|v and gate|up its base shard has, the input columns of o and down (their partial
  // deltas are summed by the layer's all-reduce, as the base's are).
  static Expected<std::unique_ptr<LoraSet>> load(const std::vector<LoraModule>& modules, const ModelConfig& base,
                                                 Backend& backend, int max_batch_tokens, int max_rank,
                                                 int max_slots = 0, int tp_rank = 0, int tp_size = 1);

  // Adapter ids are slots 1..n_slots(); a step may name only occupied ones.
  int n_slots() const { return static_cast<int>(adapters_.size()); }
  bool occupied(int slot) const {
    return slot >= 1 && slot <= n_slots() && adapters_[static_cast<size_t>(slot - 1)].loaded;
  }
  // Reads `module` and uploads it into `slot` (1..n_slots()), replacing what the slot held
  // (vLLM's /v1/load_lora_adapter at run time). Errors as read_lora_adapter; invalid_argument for
  // a slot outside the set. On error the slot is left free.
  Status add(int slot, const LoraModule& module);
  // Frees the slot's weights; a step naming it afterwards is refused. A free slot is a no-op.
  Status remove(int slot);

  // Groups the batch's rows by adapter (StepBatch::lora) and uploads the row lists; the
  // apply() calls of this step use them. invalid_argument for an id outside [0, n_slots()] or
  // a free slot.
  Status begin_step(const StepBatch& batch);
  // y [n, out] += the delta of projection p of `layer` for every row whose sequence chose an
  // adapter targeting it; x [n, in] is the projection's input. After begin_step.
  void apply(int layer, LoraProj p, const Tensor& x, const Tensor& y);

 private:
  struct Fused {            // one fused projection of one adapter in one layer; empty = not targeted
    OwnedTensor a;          // [R, in]
    OwnedTensor b;          // [out, R], times the scale
  };
  struct Adapter {
    bool loaded = false;
    std::vector<std::array<Fused, kLoraProjs>> layers;
  };
  struct Group {            // the rows of one adapter in the current step
    int adapter = 0;        // index into adapters_
    int64_t first = 0;      // offset into rows_
    int64_t n = 0;
  };

  LoraSet(Backend& backend, const ModelConfig& base, int max_rank)
      : backend_(backend), base_(base), max_rank_(max_rank) {}
  Status upload(const LoraAdapter& host, Adapter& dev);
  Status allocate_scratch(int max_batch_tokens);

  Backend& backend_;
  ModelConfig base_;
  int max_rank_ = 0;
  int tp_rank_ = 0, tp_size_ = 1;
  std::vector<Adapter> adapters_;
  std::vector<Group> groups_;      // this step's
  std::vector<int32_t> host_rows_;
  OwnedTensor rows_;               // [T] i32: row ids, grouped by adapter
  OwnedTensor xs_, u_, d_;         // [T * widest in], [T * widest R], [T * widest out] activations
};

// unsupported when options.loras (or max_loras slots for adapters loaded at run time) cannot run
// on this model: sparse (MoE) layers.
Status check_lora_support(const ModelConfig& base, const LoadOptions& options);

// invalid_argument when the batch names an adapter and the model has none.
Status check_no_lora(const StepBatch& batch);

}  // namespace brigade
