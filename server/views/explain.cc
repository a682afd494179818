// ExplainCluster: the world policy and rank assignment, in words.
#include "server/views/explain.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/membership/transition/world_policy.h"

namespace zshard::server {
namespace {

constexpr size_t kMaxListed = 16;

// "a, b, c and 4 more".
std::string ListNames(const std::vector<std::string>& names) {
  std::vector<std::string> shown(
      names.begin(), names.begin() + std::min(names.size(), kMaxListed));
  std::string out = absl::StrJoin(shown, ", ");
  if (names.size() > kMaxListed) {
    absl::StrAppend(&out, " and ", names.size() - kMaxListed, " more");
  }
  return out;
}

// The last event of one of `kinds`, or null.
const Event* Last(const std::vector<Event>& events,
                  std::initializer_list<const char*> kinds) {
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    for (const char* k : kinds) {
      if (it->kind == k) return &*it;
    }
  }
  return nullptr;
}

// Which resize policy applies, why, and what it does.
std::string PolicySentence(const job::WorldSpec& world) {
  const job::ResizePolicy fallback = job::DefaultResizePolicy(world.instances);
  const std::string why =
      world.resize == fallback
          ? absl::StrCat("the default when world.instances ",
                         world.instances >= 2 ? ">= 2" : "== 1")
          : "set by world.resize";
  if (world.resize == job::ResizePolicy::kKeepD) {
    return absl::StrCat(
        "World policy keep_d (", why,
        "): D = max / instances = ", job::WorldStep(world),
        " stays fixed and whole instances come and go (1 to ", world.instances,
        "); a failed rank with no spare dissolves its instance, whose "
        "healthy ranks become spares, and no bytes move; joiners wait as "
        "spares until D of them form a whole instance.");
  }
  return absl::StrCat("World policy keep_i (", why, "): I = ", world.instances,
                      " stays fixed and D = W / I follows the world, so a "
                      "change of world moves most of the state.");
}

}  // namespace

std::vector<std::string> ExplainCluster(const ClusterView& view,
                                        const job::WorldSpec& world,
                                        const std::vector<Event>& recent,
                                        int64_t settle_ms,
                                        bool model_parallel) {
  std::vector<std::string> out;
  int healthy = 0;
  std::vector<std::string> ranks, spares, gone, quarantined, suspects;
  for (const MemberView& mv : view.members) {
    const Member& m = mv.member;
    if (!mv.quarantine.empty()) {
      quarantined.push_back(absl::StrCat(m.name, " (", mv.quarantine, ")"));
    }
    if (mv.suspect && IsLive(m.state)) suspects.push_back(m.name);
    if (m.state == MemberState::kActive || m.state == MemberState::kSpare ||
        m.state == MemberState::kJoining) {
      ++healthy;
    }
    if (m.rank >= 0 && IsLive(m.state)) {
      ranks.push_back(absl::StrCat(m.rank, "=", m.name));
    } else if (m.state == MemberState::kSpare) {
      spares.push_back(m.name);
    } else if (!IsLive(m.state) || m.state == MemberState::kDraining) {
      gone.push_back(absl::StrCat(m.name, " (", MemberStateName(m.state),
                                  m.reason.empty() ? "" : ": ", m.reason, ")"));
    }
  }
  if (view.epoch == 0) {
    out.push_back("No epoch is committed yet.");
  } else if (!model_parallel) {
    out.push_back(absl::StrCat(
        "Epoch ", view.epoch, " runs a world of ", view.world, " rank(s) in ",
        view.instances, " instance(s) of ",
        view.instances > 0 ? view.world / view.instances : view.world,
        " rank(s) each."));
  }
  const bool keep_d = world.resize == job::ResizePolicy::kKeepD;
  const int step = job::WorldStep(world);
  if (!model_parallel) {
    out.push_back(PolicySentence(world));
    int chosen = ChooseWorld(healthy, world, view.target_world);
    out.push_back(absl::StrCat(
        "With ", healthy, " healthy member(s) the policy ", "gives ",
        ExplainWorld(chosen, healthy, world, view.target_world), "."));
  }
  if (model_parallel && !ranks.empty()) {
    out.push_back(absl::StrCat(
        "Ranks: ", ListNames(ranks),
        "; survivors keep their positions, whole replicas stay together and "
        "a spare takes a failed worker's position, so the fewest bytes "
        "move."));
  } else if (!ranks.empty()) {
    out.push_back(absl::StrCat(
        "Ranks: ", ListNames(ranks),
        keep_d ? "; survivors keep their shard ranks, whole instances stay "
                 "together and a spare takes a failed rank's slot, so the "
                 "fewest bytes move."
               : "; survivors keep their ranks and a spare takes a failed "
                 "rank's slot, so the fewest bytes move."));
  }
  if (spares.empty()) {
    out.push_back("There are no spares.");
  } else if (model_parallel) {
    out.push_back(absl::StrCat(
        spares.size(), " spare(s): ", ListNames(spares),
        "; they hold no shard, take over a failed worker's position at once, "
        "and form a new replica when a whole one of them is free."));
  } else {
    out.push_back(absl::StrCat(
        spares.size(), " spare(s): ", ListNames(spares),
        "; they are healthy members beyond the world (",
        keep_d ? "whole instances of D=" : "a multiple of I=", step,
        ", at most max ", world.max,
        "), hold no shard and take over a failed rank at once."));
  }
  if (!gone.empty()) {
    out.push_back(absl::StrCat("Not counted: ", ListNames(gone), "."));
  }
  if (!quarantined.empty()) {
    out.push_back(absl::StrCat(
        "Quarantined after a broken link: ", ListNames(quarantined),
        "; each stays a spare and is kept out of any world with that peer "
        "until the time runs out."));
  }
  if (!suspects.empty()) {
    out.push_back(absl::StrCat(
        "Suspected by a peer: ", ListNames(suspects),
        "; each is dead unless it heartbeats within its suspect grace."));
  }
  if (view.isolated) {
    out.push_back(absl::StrCat(
        "The coordinator is isolated: most members have been silent for ",
        view.isolated_ms,
        " ms at once, so it is more likely cut off from them than they all "
        "died; it declares no one dead until they are heard again."));
  }
  if (settle_ms > 0) {
    out.push_back(absl::StrCat(
        "Membership changes that arrive within ", settle_ms,
        " ms of each other are gathered into one proposal (made once ",
        settle_ms, " ms pass without a change, at most ",
        kMaxSettleWindows * settle_ms, " ms after the first, ",
        kMaxFormingSettleWindows * settle_ms,
        " ms while the job forms and no epoch has committed); a change that "
        "alters the world of a proposal "
        "in flight supersedes it instead of waiting for it."));
  } else {
    out.push_back(
        "Each membership change is proposed at once (transition_settle_ms 0); "
        "a change that alters the world of a proposal in flight supersedes "
        "it.");
  }
  if (view.pending_epoch > 0) {
    out.push_back(
        absl::StrCat("Epoch ", view.pending_epoch, " is in transition."));
  }
  if (const Event* e = Last(recent, {"propose", "commit", "abandon"})) {
    out.push_back(absl::StrCat("The last transition event (", e->kind,
                               "): ", e->reason, "."));
  }
  return out;
}

}  // namespace zshard::server
