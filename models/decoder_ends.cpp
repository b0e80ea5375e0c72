#include "models/decoder_ends.h"

namespace brigade {

void apply_norm(Backend& b, const ModelConfig& c, const Tensor& x, const Tensor& weight, const Tensor& out) {
  if (c.layer_norms) b.layer_norm(x, weight, Tensor(), c.rms_eps, out);
  else b.rms_norm(x, weight, c.rms_eps, out);
}

void add_norm(Backend& b, const ModelConfig& c, const Tensor& residual, const Tensor& delta, const Tensor& weight,
              const Tensor& out) {
  if (!c.layer_norms) return b.add_rms_norm(residual, delta, weight, c.rms_eps, out);
  b.add(residual, delta);
  b.layer_norm(residual, weight, Tensor(), c.rms_eps, out);
}

Status DecoderEnds::load_embedding(WeightLoader& w, const ModelConfig& c) {
  BRIGADE_ASSIGN_OR_RETURN(embed, w.table("model.embed_tokens.weight", c.vocab_size, c.hidden_size));
  return Status::ok();
}

Status DecoderEnds::load_head(WeightLoader& w, const ModelConfig& c, bool with_head) {
  BRIGADE_ASSIGN_OR_RETURN(final_norm, w.vector_f32({"model.norm.weight"}, {c.hidden_size}, {}, c.norm_offset));
  if (c.tie_embeddings) return Status::ok();
  if (!with_head)  // checked and counted, so every tensor-parallel rank reports the model's size
    return w.skip("lm_head.weight", {c.vocab_size, c.hidden_size});
  BRIGADE_ASSIGN_OR_RETURN(lm_head, w.table("lm_head.weight", c.vocab_size, c.hidden_size));
  return Status::ok();
}

void DecoderEnds::logits(Backend& b, const ModelConfig& c, const Tensor& residual, const Tensor& delta,
                         const Tensor& normed, const Tensor& selected, const Tensor& rows, const Tensor& out,
                         const Tensor& hidden_rows, const Tensor& hidden) const {
  logits_with(final_norm.tensor, b, c, residual, delta, normed, selected, rows, out, hidden_rows, hidden);
}

void DecoderEnds::logits_with(const Tensor& norm, Backend& b, const ModelConfig& c, const Tensor& residual,
                              const Tensor& delta, const Tensor& normed, const Tensor& selected, const Tensor& rows,
                              const Tensor& out, const Tensor& hidden_rows, const Tensor& hidden) const {
  add_norm(b, c, residual, delta, norm, normed);
  if (!hidden_rows.empty() && hidden_rows.numel() > 0) b.gather_rows(normed, hidden_rows, hidden);
  if (rows.empty() || rows.numel() == 0) return;
  b.gather_rows(normed, rows, selected);
  b.matmul(selected, head(c), Tensor(), out);
  if (c.final_softcap > 0.0f) b.softcap(out, c.final_softcap);
}

double DecoderEnds::loaded_bytes() const {
  // An empty Tensor's nbytes is not 0: lm_head is empty when tied or not loaded.
  return static_cast<double>(embed.tensor.nbytes()) + (lm_head.tensor.empty() ? 0.0 : static_cast<double>(lm_head.tensor.nbytes()));
}

double DecoderEnds::step_bytes(const ModelConfig& c, double n, bool any_logits) const {
  const double embed_bytes = static_cast<double>(embed.tensor.nbytes());
  const double head_bytes = c.tie_embeddings ? embed_bytes
                            : lm_head.tensor.empty() ? 0.0 : static_cast<double>(lm_head.tensor.nbytes());
  return n * embed_bytes / c.vocab_size + (any_logits ? head_bytes : 0.0);
}

}  // namespace brigade
