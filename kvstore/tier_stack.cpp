#include "kvstore/tier_stack.h"

#include <utility>

namespace brigade {

const char* write_policy_name(WritePolicy p) {
  return p == WritePolicy::write_through ? "write_through" : "write_back";
}

Expected<WritePolicy> parse_write_policy(const std::string& name) {
  if (name == "write_through") return WritePolicy::write_through;
  if (name == "write_back") return WritePolicy::write_back;
  return invalid_argument("write policy '" + name + "' is not one of: write_through, write_back");
}

TierStack::TierStack(size_t host_bytes, std::unique_ptr<DiskTier> disk, WritePolicy policy)
    : host_(host_bytes), disk_(std::move(disk)), policy_(policy) {}

Status TierStack::to_disk(const PageKey& key, std::span<const std::byte> bytes) {
  // Same key, same content (PageKey names the tokens and the model): a page already on disk
  // needs no second write.
  if (!disk_ || disk_->contains(key)) return Status::ok();
  return disk_->put(key, bytes);
}

Status TierStack::demote(std::vector<TierEntry> evicted) {
  if (policy_ != WritePolicy::write_back) return Status::ok();
  Status first = Status::ok();
  for (const TierEntry& e : evicted) {
    Status s = to_disk(e.key, e.bytes);
    if (first.is_ok()) first = std::move(s);
  }
  return first;
}

Status TierStack::put(const PageKey& key, PageBytes bytes) {
  Status disk_status = Status::ok();
  if (policy_ == WritePolicy::write_through) disk_status = to_disk(key, bytes);
  Status demoted = demote(host_.put(key, std::move(bytes)));
  return disk_status.is_ok() ? demoted : disk_status;
}

TierRun TierStack::get_run(std::span<const PageKey> keys) {
  TierRun run;
  for (const PageKey& key : keys) {
    if (auto hit = host_.get(key)) {
      run.pages.emplace_back(hit->begin(), hit->end());
      run.from.push_back(Tier::host);
      continue;
    }
    std::optional<PageBytes> page = disk_ ? disk_->get(key) : std::nullopt;
    if (!page) break;
    // Promote: the next lookup of this prefix is served from memory. A demotion error it
    // causes surfaces through take_error.
    Status s = demote(host_.put(key, *page));
    if (unreported_.is_ok()) unreported_ = std::move(s);
    run.pages.push_back(std::move(*page));
    run.from.push_back(Tier::disk);
  }
  return run;
}

Status TierStack::take_error() {
  if (!unreported_.is_ok()) return std::exchange(unreported_, Status::ok());
  return disk_ ? disk_->take_error() : Status::ok();
}

TierClearResult TierStack::clear(bool disk) {
  TierClearResult r;
  r.host_entries = host_.clear();
  if (disk && disk_) {
    Expected<uint64_t> n = disk_->clear();
    if (n) r.disk_entries = *n;
    else r.disk_status = n.status();
  }
  return r;
}

TierStackStats TierStack::stats() const {
  TierStackStats s;
  s.host = host_.stats();
  s.has_disk = disk_ != nullptr;
  if (disk_) s.disk = disk_->stats();
  return s;
}

}  // namespace brigade
