#include "models/decoder_ends.h"

namespace brigade {

void apply_norm(Backend& b, const ModelConfig& c, const Tensor& x, const Tensor& weight, const Tensor& out,
                const Tensor& bias) {
  if (c.layer_norms) return b.layer_norm(x, weight, bias, c.rms_eps, out);
  b.rms_norm(x, weight, c.rms_eps, out);
  if (!bias.empty()) b.add_row_bias(out, bias);
}

void add_norm(Backend& b, const ModelConfig& c, const Tensor& residual, const Tensor& delta, const Tensor& weight,
              const Tensor& out, const Tensor& bias) {
  if (!c.layer_norms) {
    b.add_rms_norm(residual, delta, weight, c.rms_eps, out);
    if (!bias.empty()) b.add_row_bias(out, bias);
    return;
  }
  b.add(residual, delta);
  b.layer_norm(residual, weight, bias, c.rms_eps, out);
}

namespace {

// DecoderEnds::logits_with with the norm's bias (empty: none).
void head_logits(const DecoderEnds& e, const Tensor& norm, const Tensor& norm_bias, Backend& b, const ModelConfig& c,
                 const Tensor& residual, const Tensor& delta, const Tensor& normed, const Tensor& selected,
                 const Tensor& rows, const Tensor& out, const Tensor& hidden_rows, const Tensor& hidden) {
  add_norm(b, c, residual, delta, norm, normed, norm_bias);
  if (!hidden_rows.empty() && hidden_rows.numel() > 0) b.gather_rows(normed, hidden_rows, hidden);
  if (rows.empty() || rows.numel() == 0) return;
  b.gather_rows(normed, rows, selected);
  b.matmul(selected, e.head(c), e.head_bias.tensor, out);
  if (c.final_softcap > 0.0f) b.softcap(out, c.final_softcap);
}

}  // namespace

Status DecoderEnds::load_embedding(WeightLoader& w, const ModelConfig& c) {
  BRIGADE_ASSIGN_OR_RETURN(embed, w.table("model.embed_tokens.weight", c.vocab_size, c.hidden_size));
  if (c.learned_positions) {
    BRIGADE_ASSIGN_OR_RETURN(positions, w.table("model.embed_positions.weight", c.max_position, c.hidden_size));
  }
  return Status::ok();
}

void DecoderEnds::add_positions(Backend& b, const Tensor& pos, const Tensor& x, const Tensor& scratch) const {
  if (positions.tensor.empty()) return;
  b.embedding(positions.tensor, pos, scratch);
  b.add(x, scratch);
}

Status DecoderEnds::load_head(WeightLoader& w, const ModelConfig& c, bool with_head) {
  if (c.norms_weightless) {  // OLMo 1's OlmoLayerNorm
    BRIGADE_ASSIGN_OR_RETURN(final_norm, w.constant_f32(c.hidden_size, 1.0f));
  } else {
    BRIGADE_ASSIGN_OR_RETURN(final_norm, w.vector_f32({"model.norm.weight"}, {c.hidden_size}, {}, c.norm_offset));
  }
  if (c.norm_bias) {
    BRIGADE_ASSIGN_OR_RETURN(final_norm_bias, w.vector_f32({"model.norm.bias"}, {c.hidden_size}));
  }
  if (c.lm_head_bias && with_head) {
    BRIGADE_ASSIGN_OR_RETURN(head_bias, w.vector_f32({"lm_head.bias"}, {c.vocab_size}));
  } else if (c.lm_head_bias) {
    BRIGADE_RETURN_IF_ERROR(w.skip("lm_head.bias", {c.vocab_size}));
  }
  if (c.tie_embeddings) return Status::ok();
  if (!with_head)  // checked and counted, so every tensor-parallel rank reports the model's size
    return w.skip("lm_head.weight", {c.vocab_size, c.hidden_size});
  BRIGADE_ASSIGN_OR_RETURN(lm_head, w.table("lm_head.weight", c.vocab_size, c.hidden_size));
  return Status::ok();
}

void DecoderEnds::logits(Backend& b, const ModelConfig& c, const Tensor& residual, const Tensor& delta,
                         const Tensor& normed, const Tensor& selected, const Tensor& rows, const Tensor& out,
                         const Tensor& hidden_rows, const Tensor& hidden) const {
  head_logits(*this, final_norm.tensor, final_norm_bias.tensor, b, c, residual, delta, normed, selected, rows, out,
              hidden_rows, hidden);
}

void DecoderEnds::logits_with(const Tensor& norm, Backend& b, const ModelConfig& c, const Tensor& residual,
                              const Tensor& delta, const Tensor& normed, const Tensor& selected, const Tensor& rows,
                              const Tensor& out, const Tensor& hidden_rows, const Tensor& hidden) const {
  head_logits(*this, norm, Tensor(), b, c, residual, delta, normed, selected, rows, out, hidden_rows, hidden);
}

double DecoderEnds::loaded_bytes() const {
  // An empty Tensor's nbytes is not 0: lm_head is empty when tied or not loaded.
  return static_cast<double>(embed.tensor.nbytes()) + (lm_head.tensor.empty() ? 0.0 : static_cast<double>(lm_head.tensor.nbytes())) +
         (positions.tensor.empty() ? 0.0 : static_cast<double>(positions.tensor.nbytes()));
}

double DecoderEnds::step_bytes(const ModelConfig& c, double n, bool any_logits) const {
  const double embed_bytes = static_cast<double>(embed.tensor.nbytes());
  const double head_bytes = c.tie_embeddings ? embed_bytes
                            : lm_head.tensor.empty() ? 0.0 : static_cast<double>(lm_head.tensor.nbytes());
  const double position_bytes = positions.tensor.empty() ? 0.0 : static_cast<double>(positions.tensor.nbytes()) / c.max_position;
  return n * (embed_bytes / c.vocab_size + position_bytes) + (any_logits ? head_bytes : 0.0);
}

}  // namespace brigade
