#include "actors/executor/pooler.h"

#include <string>

namespace brigade {

Status Pooler::plan(std::span<const SeqWorkItem> items, std::span<const int32_t> q_start,
                    std::vector<int32_t>& hidden_rows) {
  items_.clear();
  const size_t n_before = hidden_rows.size();
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].pooling == Pooling::none) continue;
    if (Status st = plan_item(items[i], q_start[i], hidden_rows); !st.is_ok()) {
      items_.clear();
      hidden_rows.resize(n_before);
      return st;
    }
  }
  return Status::ok();
}

Status Pooler::plan_item(const SeqWorkItem& w, int first_batch_row, std::vector<int32_t>& hidden_rows) {
  const std::string seq = "sequence " + std::to_string(w.seq_id);
  const int n = static_cast<int>(w.tokens.size());
  const int end = w.start_pos + n;
  if (w.sample || w.use_last_sampled || w.n_draft > 0)
    return invalid_argument(seq + " pools its prompt (" + pooling_name(w.pooling) + ") and cannot sample");
  if (end > w.prompt_len)
    return invalid_argument(seq + " pools a prompt of " + std::to_string(w.prompt_len) + " tokens but its chunk ends at " +
                            std::to_string(end));
  Item item{w.seq_id, w.pooling, static_cast<int>(hidden_rows.size()), 0, w.start_pos, end == w.prompt_len, w.prompt_len};
  if ((w.pooling == Pooling::mean || w.pooling == Pooling::cls) && w.start_pos > 0) {
    // mean has summed positions [0, n); cls holds row 0 once its first chunk ran.
    auto it = states_.find(w.seq_id);
    const bool continues = it != states_.end() && (w.pooling == Pooling::cls || it->second.n == w.start_pos);
    if (!continues)
      return invalid_argument(seq + " pools (" + std::string(pooling_name(w.pooling)) + ") a chunk at position " +
                              std::to_string(w.start_pos) + " that does not continue its pooled positions: " +
                              pooling_name(w.pooling) + " pooling needs the prompt from position 0");
  }
  switch (w.pooling) {
    case Pooling::last:
      if (item.ends) {
        item.n_rows = 1;
        hidden_rows.push_back(first_batch_row + n - 1);
      }
      break;
    case Pooling::cls:
      if (w.start_pos == 0) {
        item.n_rows = 1;
        hidden_rows.push_back(first_batch_row);
      }
      break;
    case Pooling::mean:
      item.n_rows = n;
      for (int j = 0; j < n; ++j) hidden_rows.push_back(first_batch_row + j);
      break;
    case Pooling::none: break;
  }
  if (item.n_rows > 0 || item.ends) items_.push_back(item);
  return Status::ok();
}

std::vector<PooledEmbedding> Pooler::collect(const std::function<std::span<const float>(int)>& row) {
  std::vector<PooledEmbedding> out;
  for (const Item& item : items_) {
    State& st = states_[item.seq_id];
    if (item.start_pos == 0) st = State{};
    for (int r = 0; r < item.n_rows; ++r) {
      const std::span<const float> h = row(item.first_row + r);
      if (st.sum.empty()) st.sum.assign(h.size(), 0.0);
      for (size_t k = 0; k < h.size(); ++k) st.sum[k] += h[k];
      ++st.n;
    }
    if (!item.ends) continue;
    PooledEmbedding e{item.seq_id, std::vector<float>(st.sum.size())};
    const double scale = item.mode == Pooling::mean ? 1.0 / item.prompt_len : 1.0;
    for (size_t k = 0; k < st.sum.size(); ++k) e.values[k] = static_cast<float>(st.sum[k] * scale);
    states_.erase(item.seq_id);
    out.push_back(std::move(e));
  }
  items_.clear();
  return out;
}

void Pooler::release(std::span<const uint64_t> seq_ids) {
  for (uint64_t id : seq_ids) states_.erase(id);
}

}  // namespace brigade
