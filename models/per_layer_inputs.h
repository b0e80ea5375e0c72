// Per-layer inputs (Gemma 3n's and Gemma 4 E2B / E4B's "PLE"; models/gemma3n.h, models/gemma4.h):
// for each token and layer l a D-wide input, transformers' project_per_layer_inputs of
// get_per_layer_inputs:
//   ((per_layer_model_projection(x) * hidden^-1/2), reshaped [n, L, D], per_layer_projection_norm)
//     + embed_tokens_per_layer[id] * sqrt(D)) * 2^-1/2,
// x the step's scaled token embeddings. The table (model.embed_tokens_per_layer.weight [V_pl, L D],
// 2.3 GB of E2B's weights in bf16) is never loaded whole: each step's rows are gathered on the host
// from the mapped checkpoint (ids at or past V_pl read row 0, Gemma 3n's rule) and uploaded, so
// the model needs the step's token ids on the host (StepBatch::tokens).
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "models/checkpoint.h"
#include "models/raw_tensor.h"
#include "models/weight_loader.h"

namespace brigade {

class PerLayerInputs {
 public:
  // Loads the projection (its L row blocks [D, H] apart) and norm through w, maps the table from
  // ck (which must outlive this object), and allocates the step buffers for max_tokens tokens.
  Status load(const Checkpoint& ck, WeightLoader& w, Backend& backend, int n_layers, int64_t hidden, int dim,
              int vocab, float eps, int64_t max_tokens);

  // The step's inputs of all layers, layer-major [L, n, D], from its ids (n of them, on the host)
  // and their scaled embeddings x [n, H].
  void compute(Backend& backend, const std::vector<int32_t>& ids, const Tensor& x, int n);
  // Layer l's part of the last compute(): [n, D].
  Tensor layer(int l, int n) const { return per_layer_.tensor.rows(int64_t{l} * n, n); }

  int64_t table_numel() const { return table_.numel(); }
  // Bytes of one token's table row as stored (a step reads one per token).
  double row_bytes() const { return static_cast<double>(table_.bytes.size()) / static_cast<double>(vocab_); }

 private:
  void gather_rows(Backend& backend, const std::vector<int32_t>& ids, int n);

  int n_layers_ = 0, dim_ = 0, vocab_ = 0;
  int64_t hidden_ = 0;
  float eps_ = 0.0f, embed_scale_ = 0.0f;
  RawTensor table_;                    // embed_tokens_per_layer [V_pl, L D], in the mapping
  std::vector<OwnedTensor> proj_;      // per layer [D, H]: its rows of per_layer_model_projection
  OwnedTensor norm_;                   // [D] f32
  OwnedTensor per_layer_, embed_;      // [L T, D]: the inputs, and the gathered table rows (layer-major)
  std::vector<float> host_;            // [L, n, D] staging of the gathered rows
  std::vector<uint16_t> host16_;       // the same as bf16 / f16 for such activations
};

// v rounded to the activation type t (bf16 / f16; f32 unchanged), as torch holds a scalar
// multiplied into such a tensor.
float round_to(float v, DType t);

}  // namespace brigade
