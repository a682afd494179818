// ResolveCommitPoint.
#include "server/membership/transition/commit_point.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace zshard::server {

absl::StatusOr<CommitPoint> ResolveCommitPoint(
    const std::vector<PreparedAck>& holders,
    const std::vector<PreparedAck>& others) {
  CommitPoint c;
  if (holders.empty()) {
    for (const PreparedAck& a : others) {
      c.resume_step = std::max(c.resume_step, a.step);
      c.resume_adam_step = std::max(c.resume_adam_step, a.adam_step);
    }
    return c;
  }
  int64_t s = 0;
  for (const PreparedAck& a : holders) s = std::max(s, a.step);
  bool pending_behind = false;
  const PreparedAck* at_s = nullptr;
  const PreparedAck* with_values = nullptr;
  for (const PreparedAck& a : holders) {
    if (a.step == s) {
      if (at_s != nullptr && a.adam_step != at_s->adam_step) {
        return absl::FailedPreconditionError(
            absl::StrCat("ranks at step ", s, " disagree on the adam step (",
                         at_s->adam_step, " and ", a.adam_step, ")"));
      }
      if (at_s == nullptr) at_s = &a;
      if (with_values == nullptr && !a.commit_values.empty()) with_values = &a;
    } else if (a.step == s - 1 && a.commit_pending) {
      pending_behind = true;
    } else {
      return absl::FailedPreconditionError(
          absl::StrCat("a rank stopped at step ", a.step,
                       a.commit_pending ? " (commit pending)" : "",
                       " while another is at step ", s));
    }
  }
  c.resume_step = s;
  c.resume_adam_step = at_s->adam_step;
  if (pending_behind) {
    if (with_values == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "ranks pending at step ", s - 1, " cannot finish step ", s,
          ": no rank that passed it reported its commit values"));
    }
    c.finish_pending_step = true;
    c.commit_values = with_values->commit_values;
  }
  return c;
}

}  // namespace zshard::server
