#include "models/mtp_module.h"

#include <string>

namespace brigade {

std::string MtpEnds::prefix(const ModelConfig& c) { return "model.layers." + std::to_string(c.n_layers) + "."; }

Status MtpEnds::load(WeightLoader& w, const ModelConfig& c, int tp_size) {
  const std::string at = prefix(c);
  if (c.n_mtp_layers < 1)
    return invalid_argument("this " + c.arch + " checkpoint has no MTP module (num_nextn_predict_layers is 0 in "
                            "config.json; nextn_predict_layers in a GGUF file)");
  if (tp_size > 1)
    return unsupported("the MTP module runs on one rank: speculative method mtp needs tp 1 (got tp " +
                       std::to_string(tp_size) + ")");
  if (!w.has(at + "eh_proj.weight"))
    return invalid_argument("the model declares " + std::to_string(c.n_mtp_layers) +
                            " MTP module(s) (num_nextn_predict_layers) but the checkpoint has no " + at +
                            "eh_proj.weight (a GGUF file: blk." + std::to_string(c.n_layers) + ".nextn.eh_proj.weight)");
  const int64_t hidden = c.hidden_size;
  BRIGADE_ASSIGN_OR_RETURN(enorm, w.vector_f32({at + "enorm.weight"}, {hidden}));
  BRIGADE_ASSIGN_OR_RETURN(hnorm, w.vector_f32({at + "hnorm.weight"}, {hidden}));
  BRIGADE_ASSIGN_OR_RETURN(eh_embed, w.matrix(at + "eh_proj.weight", hidden, 2 * hidden, {}, {0, hidden}));
  BRIGADE_ASSIGN_OR_RETURN(eh_hidden, w.matrix(at + "eh_proj.weight", hidden, 2 * hidden, {}, {hidden, hidden}));
  BRIGADE_ASSIGN_OR_RETURN(head_norm, w.vector_f32({at + "shared_head.norm.weight"}, {hidden}));
  return Status::ok();
}

void MtpEnds::input(Backend& b, const ModelConfig& c, const Tensor& embed, const Tensor& tokens, const Tensor& prev,
                    const Tensor& residual, const Tensor& normed, const Tensor& delta) const {
  b.embedding(embed, tokens, residual);
  b.rms_norm(residual, enorm.tensor, c.rms_eps, normed);
  b.matmul(normed, eh_embed.tensor, Tensor(), delta);
  b.rms_norm(prev, hnorm.tensor, c.rms_eps, normed);
  b.matmul(normed, eh_hidden.tensor, Tensor(), residual);
}

Expected<MtpSize> load_mtp_module(WeightLoader& w, const ModelConfig& c, int tp_size, MtpEnds& ends,
                                  const std::function<Status(int)>& load_layer) {
  const int64_t params0 = w.n_params(), bytes0 = w.n_bytes();
  BRIGADE_RETURN_IF_ERROR(ends.load(w, c, tp_size));
  BRIGADE_RETURN_IF_ERROR(load_layer(c.n_layers));
  return MtpSize{w.n_params() - params0, w.n_bytes() - bytes0};
}

Status check_prev_hidden(const StepBatch& batch, int64_t hidden, DType activation) {
  const int n = batch.n_tokens();
  const Tensor& prev = batch.prev_hidden;
  if (prev.empty() || prev.dtype != activation || prev.ndim != 2 || prev.dim(0) != n || prev.dim(1) != hidden)
    return invalid_argument("an MTP step needs prev_hidden [" + std::to_string(n) + ", " + std::to_string(hidden) +
                            "] in the activation dtype");
  return Status::ok();
}

}  // namespace brigade
