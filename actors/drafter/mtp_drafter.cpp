#include "actors/drafter/mtp_drafter.h"

#include <algorithm>

namespace brigade {

DraftProposal MtpDrafter::propose(const DraftQuery& query) {
  DraftProposal out;
  auto it = board_.find(query.seq_id);
  if (it == board_.end() || it->second.n_tokens != static_cast<int>(query.tokens.size())) {
    out.attempted = false;  // the module was not asked after these tokens: nothing to judge
    return out;
  }
  const std::vector<int32_t>& t = it->second.tokens;
  out.tokens.assign(t.begin(), t.begin() + std::min<std::ptrdiff_t>(std::max(query.max_tokens, 0),
                                                                    static_cast<std::ptrdiff_t>(t.size())));
  board_.erase(it);  // a proposal is verified once
  return out;
}

void MtpDrafter::take_proposal(uint64_t seq_id, int n_tokens, std::vector<int32_t> tokens) {
  board_[seq_id] = Entry{n_tokens, std::move(tokens)};
}

}  // namespace brigade
