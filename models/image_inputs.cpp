#include "models/image_inputs.h"

#include <algorithm>
#include <string>

#include "models/clip_vision.h"
#include "models/gemma3_vision.h"
#include "models/gemma4_vision.h"
#include "models/tile_vision.h"
#include "models/internvl_vision.h"
#include "models/mrope.h"
#include "models/qwen_vision.h"
#include "models/step_check.h"
#include "models/step_inputs.h"
#include "models/weight_loader.h"

namespace brigade {

ImageInputs::ImageInputs(Backend& backend, const ModelConfig& config, int max_batch_tokens)
    : backend_(backend), config_(config), max_batch_tokens_(max_batch_tokens) {}

ImageInputs::~ImageInputs() = default;

void ImageInputs::set_text_rope(const RopeConfig& rope) {
  rope_m_ = rope;
  rope_m_.sections = config_.mrope_section;
  rope_m_.interleaved = config_.mrope_interleaved;
}

Status ImageInputs::load(WeightLoader& w) {
  const int64_t params = w.n_params(), bytes = w.n_bytes();
  const int64_t t = max_batch_tokens_;
  if (config_.vision.kind == VisionKind::gemma4) {
    gemma4_ = std::make_unique<Gemma4Vision>();
    BRIGADE_RETURN_IF_ERROR(gemma4_->load(w, backend_, config_.vision, config_.hidden_size));
  } else if (config_.vision.kind == VisionKind::llava) {
    clip_ = std::make_unique<ClipVision>();
    BRIGADE_RETURN_IF_ERROR(clip_->load(w, backend_, config_.vision, config_.hidden_size));
  } else if (config_.vision.kind == VisionKind::internvl) {
    internvl_ = std::make_unique<InternVision>();
    BRIGADE_RETURN_IF_ERROR(internvl_->load(w, backend_, config_.vision, config_.hidden_size));
  } else if (config_.vision.tiled()) {
    tiled_ = std::make_unique<TileVision>();
    BRIGADE_RETURN_IF_ERROR(tiled_->load(w, backend_, config_.vision, config_.hidden_size));
  } else if (config_.vision.dynamic()) {
    qwen_ = std::make_unique<QwenVision>();
    BRIGADE_RETURN_IF_ERROR(qwen_->load(w, backend_, config_.vision, config_.hidden_size));
    BRIGADE_ASSIGN_OR_RETURN(mrope_pos_, alloc_tensor(backend_, DType::i32, 1, 3 * t));
  } else {
    gemma_ = std::make_unique<Gemma3Vision>();
    BRIGADE_RETURN_IF_ERROR(gemma_->load(w, backend_, config_.vision, config_.hidden_size));
  }
  params_ = w.n_params() - params, bytes_ = w.n_bytes() - bytes;
  BRIGADE_ASSIGN_OR_RETURN(feats_, alloc_tensor(backend_, backend_.activation_dtype(), t, config_.hidden_size));
  BRIGADE_ASSIGN_OR_RETURN(rows_, alloc_tensor(backend_, DType::i32, 1, t));
  if (config_.vision.kind == VisionKind::pixtral) {
    BRIGADE_ASSIGN_OR_RETURN(gather_ids_, alloc_tensor(backend_, DType::i32, 1, t));
  }
  // Room for two of the largest images or of the largest steps' worth of split images' features
  // (an image in progress per prefilling sequence); beyond that a dropped image is encoded again.
  if (clip_ != nullptr) feature_cache_.set_capacity(2 * std::max<int64_t>(t, clip_->max_image_features()));
  if (gemma4_ != nullptr) feature_cache_.set_capacity(2 * std::max<int64_t>(t, Gemma4Vision::kMaxTokens));
  if (tiled_ != nullptr) feature_cache_.set_capacity(2 * std::max<int64_t>(t, tiled_->tile_tokens()));
  if (internvl_ != nullptr) feature_cache_.set_capacity(2 * std::max<int64_t>(t, QwenVision::kMaxPatches /
                                                                                  (int64_t{config_.vision.merge} * config_.vision.merge)));
  if (qwen_ != nullptr) {
    const int n_ds = qwen_->n_deepstack();
    const int64_t most = QwenVision::kMaxPatches / (int64_t{config_.vision.merge} * config_.vision.merge);
    feature_cache_.set_capacity(2 * (1 + n_ds) * std::max<int64_t>(t, most));
    if (n_ds > 0) {
      BRIGADE_ASSIGN_OR_RETURN(deepstack_feats_, alloc_tensor(backend_, backend_.activation_dtype(), n_ds * t, config_.hidden_size));
    }
  }
  return Status::ok();
}

int ImageInputs::n_deepstack() const { return qwen_ != nullptr ? qwen_->n_deepstack() : 0; }

Expected<std::vector<int32_t>> ImageInputs::begin_step(const StepBatch& batch) {
  BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> attend_until, check_step_images(batch, config_.vision, loaded()));
  mrope_step_ = false;
  if (config_.mrope_section.empty()) return attend_until;
  const bool shifted = std::any_of(batch.rope_delta.begin(), batch.rope_delta.end(), [](int32_t d) { return d != 0; });
  if (batch.images.empty() && !shifted) return attend_until;
  if (qwen_ == nullptr)  // only images shift the positions, and only a loaded tower takes them
    return unsupported("this model's vision tower is not loaded here: a step with M-RoPE shifts is refused");
  const std::vector<int32_t> planes = mrope_positions(batch, config_.vision.merge);
  backend_.upload(Tensor(mrope_pos_.tensor.data, DType::i32, {static_cast<int64_t>(planes.size())}), planes.data());
  mrope_step_ = true;
  return attend_until;
}

Tensor ImageInputs::positions(const Tensor& plain, int64_t n) const {
  return mrope_step_ ? Tensor(mrope_pos_.tensor.data, DType::i32, {3 * n}) : plain;
}

Status ImageInputs::encode(std::span<const StepImage> images, const Tensor& out, std::span<const Tensor> deepstack) {
  if (gemma4_ != nullptr) BRIGADE_RETURN_IF_ERROR(gemma4_->encode(images, out));
  else if (qwen_ != nullptr) BRIGADE_RETURN_IF_ERROR(qwen_->encode(images, out, deepstack));
  else if (clip_ != nullptr) BRIGADE_RETURN_IF_ERROR(clip_->encode(images, out));
  else if (internvl_ != nullptr) BRIGADE_RETURN_IF_ERROR(internvl_->encode(images, out));
  else if (tiled_ != nullptr) BRIGADE_RETURN_IF_ERROR(tiled_->encode(images, out));
  else BRIGADE_RETURN_IF_ERROR(gemma_->encode(images, out));
  stats_.images_encoded += static_cast<int64_t>(images.size());
  return Status::ok();
}

Status ImageInputs::put(const StepBatch& batch, const Tensor& residual) {
  end_step();  // a step that failed part way left its rows
  if (batch.images.empty()) return Status::ok();
  feature_cache_.begin_step();
  const int n_ds = n_deepstack();
  std::vector<StepImage> whole;
  std::vector<int32_t> rows;  // the rows the whole images' features replace, in feature order
  const VisionConfig& v = config_.vision;
  for (const StepImage& im : batch.images) {
    const int t = v.image_tokens(im.grid_h, im.grid_w);
    if (im.first != 0 || step_image_rows(batch, im, t) != t) continue;
    whole.push_back(im);
    for (int j = 0; j < t; ++j)
      if (v.feature_of(j, im.grid_w) >= 0) rows.push_back(im.row + j);  // Pixtral's breaks keep their embedding
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  if (n > 0) {
    const Tensor feats = feats_.tensor.rows(0, n);
    std::vector<Tensor> ds;  // tap k's features: rows [k * max_batch_tokens, + n) of deepstack_feats_
    for (int k = 0; k < n_ds; ++k) ds.push_back(deepstack_feats_.tensor.rows(k * int64_t{max_batch_tokens_}, n));
    BRIGADE_RETURN_IF_ERROR(encode(whole, feats, ds));
    const Tensor row_ids(rows_.tensor.data, DType::i32, {n});
    backend_.upload(row_ids, rows.data());
    backend_.scatter_rows(residual, row_ids, feats);
    if (n_ds > 0) deepstack_.push_back({row_ids, std::move(ds)});
  }
  // Each split image's row ids go after the whole ones' in rows_ (no step has more image rows
  // than tokens).
  int64_t id_offset = n;
  for (const StepImage& im : batch.images) {
    const int t = v.image_tokens(im.grid_h, im.grid_w);
    const int k = step_image_rows(batch, im, t);
    if (im.first == 0 && k == t) continue;
    BRIGADE_RETURN_IF_ERROR(put_split(batch, im, residual, id_offset));
    id_offset += k;
  }
  return Status::ok();
}

Status ImageInputs::put_split(const StepBatch& batch, const StepImage& im, const Tensor& residual, int64_t id_offset) {
  const VisionConfig& v = config_.vision;
  const int k = step_image_rows(batch, im, v.image_tokens(im.grid_h, im.grid_w));
  const int t = v.image_features(im.grid_h, im.grid_w);
  const int n_ds = n_deepstack();
  const ImageKey key = image_key(im);
  // The entry: the image's features, rows [0, t), then each DeepStack tap's, rows [(1 + j) t, +t).
  Tensor all;
  if (const Tensor* cached = feature_cache_.find(key)) {
    all = *cached;
    ++stats_.cache_hits;
  } else {  // the image's first step, or its features were dropped: encode it whole
    BRIGADE_ASSIGN_OR_RETURN(all, feature_cache_.insert(backend_, key, int64_t{t} * (1 + n_ds), config_.hidden_size,
                                                        backend_.activation_dtype()));
    StepImage image = im;
    image.first = 0;
    std::vector<Tensor> ds;
    for (int j = 0; j < n_ds; ++j) ds.push_back(all.rows(int64_t{t} * (1 + j), t));
    BRIGADE_RETURN_IF_ERROR(encode(std::span<const StepImage>(&image, 1), all.rows(0, t), ds));
  }
  std::vector<int32_t> rows, features;  // the step's rows of the image that take features, and which
  for (int j = 0; j < k; ++j) {
    const int f = v.feature_of(im.first + j, im.grid_w);
    if (f < 0) continue;  // Pixtral's breaks keep their embedding
    rows.push_back(im.row + j);
    features.push_back(f);
  }
  const auto n = static_cast<int64_t>(rows.size());
  if (n == 0) {
    if (im.first + k == v.image_tokens(im.grid_h, im.grid_w)) finished_.push_back(key);
    return Status::ok();
  }
  const Tensor row_ids(rows_.tensor.as<int32_t>() + id_offset, DType::i32, {n});
  backend_.upload(row_ids, rows.data());
  Tensor src = all.rows(features.front(), n);
  if (features.back() - features.front() + 1 != n) {  // not consecutive (Pixtral): gathered into feats_
    const Tensor feature_ids(gather_ids_.tensor.data, DType::i32, {n});
    backend_.upload(feature_ids, features.data());
    src = feats_.tensor.rows(id_offset, n);
    backend_.gather_rows(all.rows(0, t), feature_ids, src);
  }
  backend_.scatter_rows(residual, row_ids, src);
  if (n_ds > 0) {
    DeepstackRows d{row_ids, {}};
    for (int j = 0; j < n_ds; ++j) d.features.push_back(all.rows(int64_t{t} * (1 + j) + im.first, k));
    deepstack_.push_back(std::move(d));
  }
  if (im.first + k == v.image_tokens(im.grid_h, im.grid_w)) finished_.push_back(key);  // dropped after the step (DeepStack reads it)
  return Status::ok();
}

void ImageInputs::add_deepstack(int layer, const Tensor& residual) {
  for (const DeepstackRows& d : deepstack_) backend_.scatter_add_rows(residual, d.rows, d.features[static_cast<size_t>(layer)]);
}

void ImageInputs::end_step() {
  deepstack_.clear();
  for (const ImageKey& key : finished_) feature_cache_.erase(key);
  finished_.clear();
}

void ImageInputs::add_cost(const StepBatch& b, StepCost& c) const {
  if (gemma_ != nullptr && !b.images.empty()) {  // the tower reads its weights once per pass
    c.flops += static_cast<double>(b.images.size()) * gemma_->flops_per_image();
    c.bytes += static_cast<double>(bytes_);
  }
  if (clip_ != nullptr && std::any_of(b.images.begin(), b.images.end(), [](const StepImage& im) { return im.first == 0; })) {
    for (const StepImage& im : b.images)
      if (im.first == 0) c.flops += clip_->flops(im);
    c.bytes += static_cast<double>(bytes_);
  }
  if (internvl_ != nullptr && std::any_of(b.images.begin(), b.images.end(), [](const StepImage& im) { return im.first == 0; })) {
    for (const StepImage& im : b.images)
      if (im.first == 0 && im.grid_w > 0) c.flops += static_cast<double>(im.grid_h / im.grid_w) * internvl_->flops_per_tile();
    c.bytes += static_cast<double>(bytes_);
  }
  if (tiled_ != nullptr && std::any_of(b.images.begin(), b.images.end(), [](const StepImage& im) { return im.first == 0; })) {
    for (const StepImage& im : b.images)
      if (im.first == 0) c.flops += tiled_->flops_per_tile();
    c.bytes += static_cast<double>(bytes_);
  }
  if (gemma4_ != nullptr && std::any_of(b.images.begin(), b.images.end(), [](const StepImage& im) { return im.first == 0; })) {
    for (const StepImage& im : b.images)
      if (im.first == 0) c.flops += gemma4_->flops(im.grid_h, im.grid_w);
    c.bytes += static_cast<double>(bytes_);
  }
  // An image split over steps is encoded at its first step; the later ones take its features
  // from the cache (unless it was dropped: then this undercounts).
  if (qwen_ != nullptr && std::any_of(b.images.begin(), b.images.end(), [](const StepImage& im) { return im.first == 0; })) {
    for (const StepImage& im : b.images)
      if (im.first == 0) c.flops += qwen_->flops(im.grid_h, im.grid_w);
    c.bytes += static_cast<double>(bytes_);
  }
}

}  // namespace brigade
