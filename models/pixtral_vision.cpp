// QwenVision's Pixtral loader (VisionKind::pixtral, models/qwen_vision.h): Mistral 3's tensors
// under the names gemma3_tensors gives them; the rest of the tower is qwen_vision.cpp's.
#include <string>
#include <vector>

#include "models/qwen_vision.h"

namespace brigade {

// Pixtral's tower (vision_tower.*: patch_conv, ln_pre, transformer.layers.*) and Mistral 3's
// projector (multi_modal_projector.*), every matrix without a bias but linear_1 / linear_2 under
// multimodal_projector_bias.
Status QwenVision::load_pixtral(WeightLoader& w) {
  const int64_t h = v_.hidden_size, unit = int64_t{v_.merge} * v_.merge;
  w.quantize_linear(false);
  const int64_t bytes_before = w.n_bytes();
  patch_b_ = OwnedTensor{};
  pos_table_.clear();
  BRIGADE_ASSIGN_OR_RETURN(patch_w_, w.matrix("vision_tower.patch_conv.weight", h, v_.patch_width()));
  BRIGADE_ASSIGN_OR_RETURN(ln_pre_, w.vector_f32({"vision_tower.ln_pre.weight"}, {h}));
  layers_.clear();
  layers_.resize(static_cast<size_t>(v_.n_layers));
  for (int l = 0; l < v_.n_layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    const std::string at = "vision_tower.transformer.layers." + std::to_string(l) + ".";
    BRIGADE_ASSIGN_OR_RETURN(L.norm1_w, w.vector_f32({at + "attention_norm.weight"}, {h}));
    BRIGADE_ASSIGN_OR_RETURN(L.norm2_w, w.vector_f32({at + "ffn_norm.weight"}, {h}));
    BRIGADE_ASSIGN_OR_RETURN(L.qkv, w.fused({at + "attention.q_proj.weight", at + "attention.k_proj.weight",
                                             at + "attention.v_proj.weight"}, {h, h, h}, h));
    BRIGADE_ASSIGN_OR_RETURN(L.proj, w.matrix(at + "attention.o_proj.weight", h, h));
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_in, w.fused({at + "feed_forward.gate_proj.weight", at + "feed_forward.up_proj.weight"},
                                               {v_.intermediate_size, v_.intermediate_size}, h));
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_out, w.matrix(at + "feed_forward.down_proj.weight", h, v_.intermediate_size));
  }
  // merging_layer's input is unfold's: column c * unit + k is channel c of the block's patch k
  // (row-major in the block); the rows here hold the block's patches one after another, so
  // column k * h + c reads that one.
  const std::string mm = "multi_modal_projector.";
  std::vector<int64_t> patch_major(static_cast<size_t>(unit * h));
  for (int64_t j = 0; j < unit * h; ++j) patch_major[static_cast<size_t>(j)] = (j % h) * unit + j / h;
  merger_ = Merger{};
  BRIGADE_ASSIGN_OR_RETURN(merger_.norm_w, w.vector_f32({mm + "norm.weight"}, {h}));
  BRIGADE_ASSIGN_OR_RETURN(merger_.merge, w.matrix_columns(mm + "patch_merger.merging_layer.weight", h, unit * h,
                                                           patch_major));
  BRIGADE_ASSIGN_OR_RETURN(merger_.in, w.matrix(mm + "linear_1.weight", text_hidden_, h));
  BRIGADE_ASSIGN_OR_RETURN(merger_.out, w.matrix(mm + "linear_2.weight", text_hidden_, text_hidden_));
  if (v_.projector_bias) {
    BRIGADE_ASSIGN_OR_RETURN(merger_.in_b, w.vector_f32({mm + "linear_1.bias"}, {text_hidden_}));
    BRIGADE_ASSIGN_OR_RETURN(merger_.out_b, w.vector_f32({mm + "linear_2.bias"}, {text_hidden_}));
  }
  deepstack_.clear();
  w.quantize_linear(true);
  weight_bytes_ = static_cast<double>(w.n_bytes() - bytes_before);
  return Status::ok();
}

}  // namespace brigade
