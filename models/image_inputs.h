// Internal to models/: the image path of a decoder that takes images (LlamaModel's Gemma 3 and
// Qwen2-VL family, StateSpaceModel's Qwen3.5, Gemma4Model's Gemma 4): the vision tower, the step's images encoded into
// the rows of their tokens, the features of images split over steps (ImageFeatureCache),
// Qwen3-VL's DeepStack taps, and the M-RoPE planes of a step whose positions images shifted.
//
// A step runs: begin_step (checks the images, uploads the M-RoPE planes), the embedding, put
// (features over the image rows), the layers (attention rotating by positions() with rope();
// add_deepstack after each of the first n_deepstack() layers), end_step.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/backend.h"
#include "core/status.h"
#include "core/tensor.h"
#include "models/image_feature_cache.h"
#include "models/model.h"
#include "models/model_config.h"

namespace brigade {

class ClipVision;
class Gemma3Vision;
class Gemma4Vision;
class TileVision;
class InternVision;
class QwenVision;
class WeightLoader;

class ImageInputs {
 public:
  ImageInputs(Backend& backend, const ModelConfig& config, int max_batch_tokens);
  ~ImageInputs();
  ImageInputs(const ImageInputs&) = delete;
  ImageInputs& operator=(const ImageInputs&) = delete;

  // Loads config.vision's tower (present()): Gemma 3's, or the Qwen2-VL family's (dynamic()),
  // and allocates the step's feature rows. Without it the model serves text.
  Status load(WeightLoader& w);
  bool loaded() const { return gemma_ != nullptr || qwen_ != nullptr || clip_ != nullptr || internvl_ != nullptr ||
                                gemma4_ != nullptr || tiled_ != nullptr; }
  // The tower's parameters and bytes as loaded (part of the model's totals).
  int64_t params() const { return params_; }
  int64_t bytes() const { return bytes_; }
  Model::VisionStats stats() const { return stats_; }
  // M-RoPE (ModelConfig::mrope_section): rope with those sections, rotating a step by planes.
  void set_text_rope(const RopeConfig& rope);

  // Checks the step's images (check_step_images; returns the rows each row attends until, empty
  // when causal) and, for M-RoPE, uploads the step's planes where images or shifted sequences
  // need them. A step with shifts but no loaded tower is refused.
  Expected<std::vector<int32_t>> begin_step(const StepBatch& batch);
  // Where begin_step uploaded planes: those ([3 n]) and the sectioned rope; else plain and rope.
  Tensor positions(const Tensor& plain, int64_t n) const;
  const RopeConfig& rope(const RopeConfig& plain) const { return mrope_step_ ? rope_m_ : plain; }
  // The step's images encoded into the rows of their tokens in residual [n, hidden]: those whole
  // in the step together, each one split over steps through the feature cache.
  Status put(const StepBatch& batch, const Tensor& residual);
  // Qwen3-VL's DeepStack: after decoder layer l < n_deepstack(), each image row of the step gets
  // tap l's features added.
  int n_deepstack() const;
  void add_deepstack(int layer, const Tensor& residual);
  // After the step's layers: forgets its DeepStack rows and drops the images it finished.
  void end_step();
  // The tower's part of a step's cost: its flops per image encoded and its weights read once.
  void add_cost(const StepBatch& batch, StepCost& c) const;

 private:
  Status put_split(const StepBatch& batch, const StepImage& im, const Tensor& residual, int64_t id_offset);
  Status encode(std::span<const StepImage> images, const Tensor& out, std::span<const Tensor> deepstack);

  Backend& backend_;
  const ModelConfig& config_;
  int max_batch_tokens_;
  std::unique_ptr<Gemma3Vision> gemma_;  // Gemma 3's tower; null: none
  std::unique_ptr<QwenVision> qwen_;     // the Qwen2-VL family's instead; null: none
  std::unique_ptr<ClipVision> clip_;     // LLaVA's instead; null: none
  std::unique_ptr<Gemma4Vision> gemma4_;  // Gemma 4's instead; null: none
  std::unique_ptr<InternVision> internvl_;  // InternVL's instead; null: none
  std::unique_ptr<TileVision> tiled_;  // Idefics3's / SmolVLM's / Aya Vision's instead; null: none
  RopeConfig rope_m_;                    // the text rope with ModelConfig::mrope_section as its sections
  OwnedTensor mrope_pos_;                // [3 * max_batch_tokens] i32: a step's planes (begin_step)
  bool mrope_step_ = false;              // this step rotates by mrope_pos_ with rope_m_
  OwnedTensor feats_;                    // [max_batch_tokens, hidden] a step's image features
  OwnedTensor rows_;                     // [max_batch_tokens] i32 the rows they replace
  OwnedTensor gather_ids_;               // Pixtral: [max_batch_tokens] i32 a split image's feature rows
  ImageFeatureCache feature_cache_;      // the features of images split over steps
  OwnedTensor deepstack_feats_;          // [n_deepstack * max_batch_tokens, hidden]: whole images' taps
  struct DeepstackRows {
    Tensor rows;                         // i32 step rows (in rows_)
    std::vector<Tensor> features;        // per tap [rows, hidden]
  };
  std::vector<DeepstackRows> deepstack_;  // this step's (put .. end_step)
  std::vector<ImageKey> finished_;        // split images whose last token this step holds
  Model::VisionStats stats_;
  int64_t params_ = 0, bytes_ = 0;
};

}  // namespace brigade
