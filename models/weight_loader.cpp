#include "models/weight_loader.h"

#include <cstring>

namespace brigade {

Expected<OwnedTensor> WeightLoader::prepare(const Tensor& host, std::optional<DType> want) {
  auto w = backend_.prepare_weight(host, want);
  if (!w) return w.status();
  n_bytes_ += static_cast<int64_t>(w->tensor.nbytes());
  return w;
}

Expected<OwnedTensor> WeightLoader::matrix(const std::string& name, int64_t rows, int64_t cols) {
  BRIGADE_ASSIGN_OR_RETURN(RawTensor t, ck_.tensor(name, {rows, cols}));
  n_params_ += t.numel();
  return prepare(t.host_view(), want_);
}

Expected<OwnedTensor> WeightLoader::fused(const std::vector<std::string>& names,
                                          const std::vector<int64_t>& rows, int64_t cols) {
  BRIGADE_CHECK(names.size() == rows.size() && !names.empty(), "one row count per part");
  std::vector<RawTensor> parts;
  int64_t total_rows = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    BRIGADE_ASSIGN_OR_RETURN(RawTensor t, ck_.tensor(names[i], {rows[i], cols}));
    total_rows += rows[i];
    parts.push_back(std::move(t));
  }
  bool same = true;
  for (const auto& p : parts) same = same && p.dtype == parts[0].dtype;
  const DType staged = same ? parts[0].dtype : DType::f32;
  std::vector<uint8_t> host(static_cast<size_t>(total_rows * cols) * dtype_size(staged));
  uint8_t* dst = host.data();
  for (const auto& p : parts) {
    n_params_ += p.numel();
    if (same) {
      std::memcpy(dst, p.bytes.data(), p.bytes.size());
      dst += p.bytes.size();
    } else {
      for (int64_t i = 0; i < p.numel(); ++i, dst += 4) {
        const float f = static_cast<float>(p.at(i));
        std::memcpy(dst, &f, 4);
      }
    }
  }
  Tensor view(host.data(), staged, {total_rows, cols});
  // Without an explicit target, keep what the checkpoint stores (mixed parts fall back to f32).
  return prepare(view, want_.has_value() ? want_ : std::optional<DType>(staged));
}

Expected<OwnedTensor> WeightLoader::vector_f32(const std::vector<std::string>& names,
                                               const std::vector<int64_t>& sizes) {
  BRIGADE_CHECK(names.size() == sizes.size() && !names.empty(), "one size per part");
  std::vector<float> host;
  for (size_t i = 0; i < names.size(); ++i) {
    BRIGADE_ASSIGN_OR_RETURN(RawTensor t, ck_.tensor(names[i], {sizes[i]}));
    n_params_ += t.numel();
    for (int64_t k = 0; k < t.numel(); ++k) host.push_back(static_cast<float>(t.at(k)));
  }
  const size_t bytes = host.size() * sizeof(float);
  BRIGADE_ASSIGN_OR_RETURN(Buffer buf, backend_.allocate(bytes));
  OwnedTensor out;
  out.tensor = buf.view(DType::f32, {static_cast<int64_t>(host.size())});
  out.buffer = std::move(buf);
  backend_.upload(out.tensor, host.data());
  n_bytes_ += static_cast<int64_t>(bytes);
  return out;
}

}  // namespace brigade
