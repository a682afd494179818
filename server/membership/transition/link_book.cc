// The link book's counts and quarantines.
#include "server/membership/transition/link_book.h"

namespace zshard::server {

LinkBook::Pair LinkBook::Key(const std::string& a, const std::string& b) {
  return a < b ? Pair(a, b) : Pair(b, a);
}

std::pair<int, bool> LinkBook::Record(const std::string& a,
                                      const std::string& b, int64_t epoch) {
  Count& c = counts_[Key(a, b)];
  if (c.failures > 0 && c.last_epoch == epoch) return {c.failures, false};
  ++c.failures;
  c.last_epoch = epoch;
  ++failures_;
  return {c.failures, true};
}

std::string LinkBook::ChooseEnd(
    const std::string& a, const std::string& b,
    const std::function<int64_t(const std::string&)>& moved,
    const std::function<bool(const std::string&, const std::string&)>& later)
    const {
  auto pairs_of = [this](const std::string& id) {
    int n = 0;
    for (const auto& [pair, count] : counts_) {
      n += pair.first == id || pair.second == id;
    }
    return n;
  };
  const int na = pairs_of(a);
  const int nb = pairs_of(b);
  if (na != nb) return na > nb ? a : b;
  const int64_t ma = moved(a);
  const int64_t mb = moved(b);
  if (ma != mb) return ma < mb ? a : b;
  return later(a, b) ? a : b;
}

void LinkBook::Exclude(const std::string& excluded, Quarantine q) {
  counts_.erase(Key(excluded, q.peer));
  quarantined_[excluded] = std::move(q);
  ++exclusions_;
}

const Quarantine* LinkBook::QuarantineOf(const std::string& id,
                                         int64_t now_ms) const {
  auto it = quarantined_.find(id);
  if (it == quarantined_.end() || it->second.until_ms <= now_ms) {
    return nullptr;
  }
  return &it->second;
}

void LinkBook::Forget(const std::string& id) {
  quarantined_.erase(id);
  for (auto it = counts_.begin(); it != counts_.end();) {
    if (it->first.first == id || it->first.second == id) {
      it = counts_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace zshard::server
