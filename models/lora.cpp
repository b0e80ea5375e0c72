#include "models/lora.h"

#include <algorithm>
#include <set>

#include "models/step_inputs.h"

namespace brigade {
namespace {

// The parts of each fused projection, in the order of its output rows.
const std::vector<LoraTarget>& proj_parts(LoraProj p) {
  static const std::array<std::vector<LoraTarget>, kLoraProjs> parts = {
      std::vector<LoraTarget>{LoraTarget::q, LoraTarget::k, LoraTarget::v}, {LoraTarget::o},
      {LoraTarget::gate, LoraTarget::up}, {LoraTarget::down}};
  return parts[static_cast<size_t>(p)];
}

int64_t proj_out(const ModelConfig& c, LoraProj p) {
  int64_t out = 0;
  for (LoraTarget t : proj_parts(p)) out += lora_target_shape(c, t).first;
  return out;
}

int64_t proj_in(const ModelConfig& c, LoraProj p) { return lora_target_shape(c, proj_parts(p).front()).second; }

}  // namespace

Status check_lora_support(const ModelConfig& c, const LoadOptions& options) {
  if (!options.lora_enabled()) return Status::ok();
  if (c.n_moe_layers() > 0)
    return unsupported("LoRA adapters are not supported for mixture-of-experts models (" + c.arch +
                       "): brigade applies them to dense q/k/v/o/gate/up/down projections only");
  if (!c.mlp_gated())
    return unsupported("LoRA adapters are not supported for " + c.arch +
                       " (its MLP has no gate: brigade applies them to SwiGLU's gate|up, q/k/v, o and down)");
  return Status::ok();
}

Status check_no_lora(const StepBatch& batch) {
  for (int32_t id : batch.lora) {
    if (id != 0) return invalid_argument("the step names LoRA adapter " + std::to_string(id) + " but the model serves none");
  }
  return Status::ok();
}

Expected<std::unique_ptr<LoraSet>> LoraSet::load(const std::vector<LoraModule>& modules, const ModelConfig& base,
                                                 Backend& backend, int max_batch_tokens, int max_rank,
                                                 int max_slots, int tp_rank, int tp_size) {
  if (max_rank < 1) return invalid_argument("max_lora_rank must be >= 1 (got " + std::to_string(max_rank) + ")");
  if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size)
    return invalid_argument("LoRA: tensor-parallel rank " + std::to_string(tp_rank) + " of " + std::to_string(tp_size));
  std::unique_ptr<LoraSet> set(new LoraSet(backend, base, max_rank));
  set->tp_rank_ = tp_rank;
  set->tp_size_ = tp_size;
  set->adapters_.resize(std::max(static_cast<size_t>(std::max(max_slots, 0)), modules.size()));
  std::set<std::string> names;
  for (size_t i = 0; i < modules.size(); ++i) {
    const LoraModule& m = modules[i];
    if (m.name.empty()) return invalid_argument("a LoRA module needs a name (name=path)");
    if (!names.insert(m.name).second) return invalid_argument("LoRA module name '" + m.name + "' is given twice");
    BRIGADE_RETURN_IF_ERROR(set->add(static_cast<int>(i) + 1, m));
  }
  BRIGADE_RETURN_IF_ERROR(set->allocate_scratch(max_batch_tokens));
  return set;
}

Status LoraSet::add(int slot, const LoraModule& module) {
  if (slot < 1 || slot > n_slots())
    return invalid_argument("LoRA slot " + std::to_string(slot) + " is outside [1, " + std::to_string(n_slots()) +
                            "] (max_loras)");
  Adapter& dev = adapters_[static_cast<size_t>(slot - 1)];
  backend_.synchronize();  // no step in flight still reads the slot's old weights
  dev = Adapter{};         // they go before the new ones are read
  BRIGADE_ASSIGN_OR_RETURN(LoraAdapter host, read_lora_adapter(module, base_, max_rank_));
  if (Status s = upload(host, dev); !s.is_ok()) {
    dev = Adapter{};
    return s;
  }
  dev.loaded = true;
  backend_.synchronize();  // uploads from host memory have finished before it is freed
  return Status::ok();
}

Status LoraSet::remove(int slot) {
  if (slot < 1 || slot > n_slots())
    return invalid_argument("LoRA slot " + std::to_string(slot) + " is outside [1, " + std::to_string(n_slots()) + "]");
  backend_.synchronize();  // no step in flight still reads the weights
  adapters_[static_cast<size_t>(slot - 1)] = Adapter{};
  return Status::ok();
}

// Builds each fused A_cat [R, in] and scaled block-diagonal B [out, R] on the host (f32) and
// converts them to the backend's activation type.
Status LoraSet::upload(const LoraAdapter& host, Adapter& dev) {
  const ModelConfig& base = base_;
  dev.layers.resize(host.layers.size());
  const int64_t r = host.config.r;
  const float scale = host.config.scale();
  for (size_t l = 0; l < host.layers.size(); ++l) {
    for (int p = 0; p < kLoraProjs; ++p) {
      const auto proj = static_cast<LoraProj>(p);
      std::vector<const LoraPair*> pairs;
      std::vector<int64_t> offsets;
      int64_t row = 0;
      for (LoraTarget t : proj_parts(proj)) {
        const LoraPair& pair = host.layers[l][static_cast<size_t>(t)];
        if (!pair.empty()) {
          pairs.push_back(&pair);
          offsets.push_back(row);
        }
        row += lora_target_shape(base, t).first;
      }
      if (pairs.empty()) continue;
      const int64_t in = proj_in(base, proj), out = proj_out(base, proj), rank = r * static_cast<int64_t>(pairs.size());
      std::vector<float> a(static_cast<size_t>(rank * in)), b(static_cast<size_t>(out * rank), 0.0f);
      for (size_t j = 0; j < pairs.size(); ++j) {
        const LoraPair& pair = *pairs[j];
        std::copy(pair.a.begin(), pair.a.end(), a.begin() + static_cast<std::ptrdiff_t>(static_cast<int64_t>(j) * r * in));
        for (int64_t i = 0; i < pair.out; ++i) {
          for (int64_t c = 0; c < r; ++c)
            b[static_cast<size_t>((offsets[j] + i) * rank + static_cast<int64_t>(j) * r + c)] =
                scale * pair.b[static_cast<size_t>(i * r + c)];
        }
      }
      // Tensor parallelism: this rank's part of the delta. q|k|v and gate|up are split by output
      // rows (each part's rows, as the base weights are): B keeps those rows, A is whole. o and down
      // are split by input columns, their partial outputs summed by the layer's all-reduce, and
      // B (A_r x_r) summed over the ranks is B (A x): A keeps the rank's columns, B is whole.
      int64_t in_r = in, out_r = out;
      if (tp_size_ > 1) {
        if (proj == LoraProj::o || proj == LoraProj::down) {
          in_r = in / tp_size_;
          std::vector<float> a_r(static_cast<size_t>(rank * in_r));
          for (int64_t i = 0; i < rank; ++i)
            std::copy_n(a.begin() + static_cast<std::ptrdiff_t>(i * in + tp_rank_ * in_r), in_r,
                        a_r.begin() + static_cast<std::ptrdiff_t>(i * in_r));
          a = std::move(a_r);
        } else {
          std::vector<float> b_r;
          int64_t part_off = 0;
          for (LoraTarget t : proj_parts(proj)) {
            const int64_t part_rows = lora_target_shape(base, t).first, mine = part_rows / tp_size_;
            const auto first = b.begin() + static_cast<std::ptrdiff_t>((part_off + tp_rank_ * mine) * rank);
            b_r.insert(b_r.end(), first, first + static_cast<std::ptrdiff_t>(mine * rank));
            part_off += part_rows;
          }
          out_r = static_cast<int64_t>(b_r.size()) / rank;
          b = std::move(b_r);
        }
      }
      Fused& f = dev.layers[l][static_cast<size_t>(p)];
      const DType act = backend_.activation_dtype();
      BRIGADE_ASSIGN_OR_RETURN(f.a, backend_.prepare_weight(Tensor(a.data(), DType::f32, {rank, in_r}), act));
      BRIGADE_ASSIGN_OR_RETURN(f.b, backend_.prepare_weight(Tensor(b.data(), DType::f32, {out_r, rank}), act));
      backend_.synchronize();  // a and b are freed at the end of this iteration
    }
  }
  return Status::ok();
}

// Sized for any adapter a slot may take: rank up to max_rank in each part of the widest fused
// projection (q|k|v has three).
Status LoraSet::allocate_scratch(int max_batch_tokens) {
  int64_t in = 0, out = 0;
  size_t parts = 0;
  for (int p = 0; p < kLoraProjs; ++p) {
    in = std::max(in, proj_in(base_, static_cast<LoraProj>(p)));
    out = std::max(out, proj_out(base_, static_cast<LoraProj>(p)));
    parts = std::max(parts, proj_parts(static_cast<LoraProj>(p)).size());
  }
  const int64_t rank = static_cast<int64_t>(max_rank_) * static_cast<int64_t>(parts);
  const DType act = backend_.activation_dtype();
  const int64_t t = max_batch_tokens;
  BRIGADE_ASSIGN_OR_RETURN(rows_, alloc_tensor(backend_, DType::i32, 1, t));
  BRIGADE_ASSIGN_OR_RETURN(xs_, alloc_tensor(backend_, act, t, in));
  BRIGADE_ASSIGN_OR_RETURN(u_, alloc_tensor(backend_, act, t, std::max<int64_t>(rank, 1)));
  BRIGADE_ASSIGN_OR_RETURN(d_, alloc_tensor(backend_, act, t, out));
  host_rows_.reserve(static_cast<size_t>(t));
  return Status::ok();
}

Status LoraSet::begin_step(const StepBatch& batch) {
  groups_.clear();
  host_rows_.clear();
  if (batch.lora.empty()) return Status::ok();
  if (static_cast<int>(batch.lora.size()) != batch.n_seqs())
    return invalid_argument("the step has " + std::to_string(batch.lora.size()) + " LoRA ids for " +
                            std::to_string(batch.n_seqs()) + " sequences");
  for (int32_t id : batch.lora) {
    if (id < 0 || id > n_slots())
      return invalid_argument("LoRA adapter id " + std::to_string(id) + " is outside [0, " +
                              std::to_string(n_slots()) + "]");
    if (id != 0 && !occupied(id))
      return invalid_argument("LoRA adapter id " + std::to_string(id) + " names a free slot (unloaded)");
  }
  for (int id = 1; id <= n_slots(); ++id) {
    Group g{id - 1, static_cast<int64_t>(host_rows_.size()), 0};
    for (int s = 0; s < batch.n_seqs(); ++s) {
      if (batch.lora[static_cast<size_t>(s)] != id) continue;
      for (int32_t row = batch.q_start[static_cast<size_t>(s)]; row < batch.q_start[static_cast<size_t>(s) + 1]; ++row)
        host_rows_.push_back(row);
    }
    g.n = static_cast<int64_t>(host_rows_.size()) - g.first;
    if (g.n > 0) groups_.push_back(g);
  }
  if (!host_rows_.empty())
    backend_.upload(Tensor(rows_.tensor.data, DType::i32, {static_cast<int64_t>(host_rows_.size())}), host_rows_.data());
  return Status::ok();
}

void LoraSet::apply(int layer, LoraProj p, const Tensor& x, const Tensor& y) {
  const DType act = backend_.activation_dtype();
  const int64_t in = x.row_numel(), out = y.row_numel();
  for (const Group& g : groups_) {
    const Fused& f = adapters_[static_cast<size_t>(g.adapter)].layers[static_cast<size_t>(layer)][static_cast<size_t>(p)];
    if (f.a.tensor.empty()) continue;
    const int64_t rank = f.a.tensor.dim(0);
    BRIGADE_CHECK(f.a.tensor.dim(1) == in && f.b.tensor.dim(0) == out, "LoRA weights match the projection's shape");
    const Tensor rows(static_cast<int32_t*>(rows_.tensor.data) + g.first, DType::i32, {g.n});
    const Tensor xs(xs_.tensor.data, act, {g.n, in}), u(u_.tensor.data, act, {g.n, rank}), d(d_.tensor.data, act, {g.n, out});
    backend_.gather_rows(x, rows, xs);
    backend_.matmul(xs, f.a.tensor, Tensor(), u);
    backend_.matmul(u, f.b.tensor, Tensor(), d);
    backend_.scatter_add_rows(y, rows, d);
  }
}

}  // namespace brigade
