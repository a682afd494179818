// zshard-moves-bench: times the state-movement planner on a preset layout
// for one membership change and reports the moves, bytes moved and the
// lower bound. Scenarios: `failure` (rank 1 dies, a spare takes its rank),
// `join` (I newcomers grow D by one), and, under a world policy (--policy
// keep_i: W is the largest multiple of I; keep_d: D stays and whole
// instances come and go), `failure-no-spare` (rank 1 dies, no spare),
// `join-one` (one newcomer) and `join-instance` (D newcomers). Eight ranks
// per node label. The policy's worlds and ranks are the coordinator's own
// (ChooseWorld, AssignRanks), the plans and moves the planner's.
//   zshard-moves-bench [--preset NAME] [--world W] [--instances I]
//                      [--scenario S] [--policy keep_i|keep_d]
//                      [--iterations N] [--output text|json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/job/job_spec.h"
#include "common/plan/moves.h"
#include "common/plan/ownership.h"
#include "common/plan/plan.h"
#include "common/plan/presets.h"
#include "common/status.h"
#include "server/membership/transition/world_policy.h"

ABSL_FLAG(std::string, preset, "llama2-70b", "the preset model");
ABSL_FLAG(int, world, 1024, "ranks before the change");
ABSL_FLAG(int, instances, 8, "model instances");
ABSL_FLAG(std::string, scenario, "failure",
          "failure, join, failure-no-spare, join-one or join-instance");
ABSL_FLAG(std::string, policy, "keep_i", "keep_i or keep_d");
ABSL_FLAG(std::string, output, "text", "text or json");
ABSL_FLAG(int, iterations, 5, "timed iterations");

namespace {

namespace zp = zshard::plan;
using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

constexpr char kUsage[] =
    "usage: zshard-moves-bench [--preset NAME] [--world W] [--instances I]\n"
    "    [--scenario failure|join|failure-no-spare|join-one|join-instance]\n"
    "    [--policy keep_i|keep_d] [--iterations N] [--output text|json]\n";

zshard::FlagList MovesFlags() {
  using zshard::FlagOf;
  return {FlagOf(FLAGS_preset),    FlagOf(FLAGS_world),
          FlagOf(FLAGS_instances), FlagOf(FLAGS_scenario),
          FlagOf(FLAGS_policy),    FlagOf(FLAGS_iterations),
          FlagOf(FLAGS_output)};
}

// The flags' ranges and choices.
absl::Status CheckFlags() {
  ZSHARD_RETURN_IF_ERROR(zshard::CheckRange(FLAGS_world, 2, 1 << 24));
  ZSHARD_RETURN_IF_ERROR(zshard::CheckRange(FLAGS_instances, 1, 1 << 24));
  ZSHARD_RETURN_IF_ERROR(zshard::CheckRange(FLAGS_iterations, 1, 1 << 24));
  const std::string scenario = absl::GetFlag(FLAGS_scenario);
  if (scenario != "failure" && scenario != "join" &&
      scenario != "failure-no-spare" && scenario != "join-one" &&
      scenario != "join-instance") {
    return absl::InvalidArgumentError(
        "--scenario must be failure, join, failure-no-spare, join-one or "
        "join-instance");
  }
  const std::string policy = absl::GetFlag(FLAGS_policy);
  if (policy != "keep_i" && policy != "keep_d") {
    return absl::InvalidArgumentError("--policy must be keep_i or keep_d");
  }
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output != "text" && output != "json") {
    return absl::InvalidArgumentError("--output must be text or json");
  }
  if (absl::GetFlag(FLAGS_world) % absl::GetFlag(FLAGS_instances) != 0) {
    return absl::InvalidArgumentError("--instances must divide --world");
  }
  return absl::OkStatus();
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "zshard-moves-bench: %s\n",
               std::string(status.message()).c_str());
  return 2;
}

std::vector<zp::Member> Members(int first, int count) {
  std::vector<zp::Member> out;
  for (int i = first; i < first + count; ++i) {
    out.push_back({"w" + std::to_string(i), "n" + std::to_string(i / 8)});
  }
  return out;
}

// The world after `scenario` under `policy`: plan options, members by new
// rank, and the old members whose state survives.
struct Change {
  zp::PlanOptions options;
  std::vector<zp::Member> members;
  std::vector<std::string> alive;
};

// The scenario's world and ranks as the coordinator chooses them
// (ChooseWorld and AssignRanks of server/membership/transition/world_policy.h).
// The job's world spec: keep_i keeps I = --instances, at most the layout's max
// world; keep_d keeps D = --world / --instances, at most --instances
// instances (join-instance: one more, as after an earlier failure
// dissolved one; the D newcomers form it).
absl::StatusOr<Change> PolicyChange(const std::string& scenario,
                                    const std::string& policy,
                                    const zp::PlanOptions& before,
                                    const std::vector<zp::Member>& members) {
  const int world = before.world;
  const int instances = before.instances;
  const int d = world / instances;
  zshard::job::WorldSpec spec;
  spec.min = 1;
  if (policy == "keep_d") {
    spec.resize = zshard::job::ResizePolicy::kKeepD;
    spec.instances = instances + (scenario == "join-instance" ? 1 : 0);
    spec.max = spec.instances * d;
  } else {
    spec.resize = zshard::job::ResizePolicy::kKeepI;
    spec.instances = instances;
    spec.max = before.layout.max_world;
  }
  std::map<std::string, zp::Member> by_id;
  std::vector<zshard::server::RankCandidate> candidates;
  Change c;
  c.options = before;
  for (int r = 0; r < world; ++r) {
    by_id[members[r].id] = members[r];
    if (scenario == "failure-no-spare" && r == 1) continue;  // rank 1 dies
    c.alive.push_back(members[r].id);
    candidates.push_back({members[r].id, r, false, r, ""});
  }
  const int joiners =
      scenario == "join-one" ? 1 : (scenario == "join-instance" ? d : 0);
  const std::vector<zp::Member> fresh = Members(world, joiners);
  for (int j = 0; j < joiners; ++j) {
    by_id[fresh[j].id] = fresh[j];
    candidates.push_back({fresh[j].id, -1, false, world + j, ""});
  }
  const int healthy = static_cast<int>(candidates.size());
  c.options.world = zshard::server::ChooseWorld(healthy, spec, 0);
  c.options.instances = zshard::job::InstancesOf(spec, c.options.world);
  if (c.options.world == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no world for ", healthy,
        " members: ", zshard::server::ExplainWorld(0, healthy, spec, 0)));
  }
  const zshard::server::RankLayout layout{c.options.world, c.options.instances,
                                          spec.resize};
  for (const std::string& id :
       zshard::server::AssignRanks(layout, std::move(candidates))) {
    c.members.push_back(by_id.at(id));
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const zshard::FlagList flags = MovesFlags();
  auto parsed = zshard::ParseCommandLine(zshard::Args(argc, argv), flags);
  if (!parsed.ok()) return Fail(parsed.status());
  if (parsed->help()) {
    std::printf("%s\n%s", kUsage, zshard::FlagsHelp(flags).c_str());
    return 0;
  }
  if (absl::Status s = CheckFlags(); !s.ok()) return Fail(s);
  const std::string preset = absl::GetFlag(FLAGS_preset);
  const std::string scenario = absl::GetFlag(FLAGS_scenario);
  const int world = absl::GetFlag(FLAGS_world);
  const int instances = absl::GetFlag(FLAGS_instances);
  const int iterations = absl::GetFlag(FLAGS_iterations);
  absl::StatusOr<zp::ModelSpec> model = zp::PresetModel(preset);
  if (!model.ok()) return Fail(model.status());
  const std::string policy = absl::GetFlag(FLAGS_policy);
  zp::PlanOptions before_options, after_options;
  before_options.world = world;
  before_options.instances = instances;
  // The bucket size is fixed by the largest world either side reaches.
  before_options.layout.max_world =
      world + std::max(instances, world / instances);
  after_options = before_options;
  std::vector<zp::Member> before_members = Members(0, world);
  std::vector<zp::Member> after_members = before_members;
  std::vector<std::string> alive;
  for (const zp::Member& m : before_members) alive.push_back(m.id);
  if (scenario != "failure" && scenario != "join") {
    absl::StatusOr<Change> c =
        PolicyChange(scenario, policy, before_options, before_members);
    if (!c.ok()) return Fail(c.status());
    after_options = c->options;
    after_members = std::move(c->members);
    alive = std::move(c->alive);
  } else if (scenario == "failure") {
    after_members[1] = {"spare", "n-spare"};
    alive.erase(alive.begin() + 1);
  } else {
    after_options.world = world + instances;
    for (const zp::Member& m : Members(world, instances)) {
      after_members.push_back(m);
    }
  }
  std::vector<double> ownership_ms, moves_ms;
  zp::MovePlan result;
  for (int it = 0; it < iterations; ++it) {
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<zp::Plan> before = zp::MakePlan(*model, before_options);
    if (!before.ok()) return Fail(before.status());
    absl::StatusOr<zp::Plan> after = zp::MakePlan(*model, after_options);
    if (!after.ok()) return Fail(after.status());
    absl::StatusOr<zp::Ownership> old_own =
        zp::MakeOwnership(*model, *before, before_members);
    if (!old_own.ok()) return Fail(old_own.status());
    absl::StatusOr<zp::Ownership> new_own =
        zp::MakeOwnership(*model, *after, after_members);
    if (!new_own.ok()) return Fail(new_own.status());
    const Clock::time_point t1 = Clock::now();
    absl::StatusOr<zp::MovePlan> plan =
        zp::PlanMoves(*old_own, alive, {}, *new_own);
    if (!plan.ok()) return Fail(plan.status());
    const Clock::time_point t2 = Clock::now();
    ownership_ms.push_back(Ms(t1 - t0));
    moves_ms.push_back(Ms(t2 - t1));
    result = *std::move(plan);
  }
  std::sort(ownership_ms.begin(), ownership_ms.end());
  std::sort(moves_ms.begin(), moves_ms.end());
  // Every replica's master, m and v before the change.
  const int64_t total_state_bytes =
      model->numel() * zp::kStateBytesPerElement * instances;
  if (absl::GetFlag(FLAGS_output) == "json") {
    std::printf(
        "{\"bytes_moved\": %lld, \"lower_bound\": %lld, "
        "\"total_state_bytes\": %lld, \"moves\": %zu, \"world_after\": %d, "
        "\"instances_after\": %d, \"plan_ms\": %.3f}\n",
        static_cast<long long>(result.bytes_moved),
        static_cast<long long>(result.lower_bound_bytes),
        static_cast<long long>(total_state_bytes), result.moves.size(),
        after_options.world, after_options.instances,
        ownership_ms[ownership_ms.size() / 2] + moves_ms[moves_ms.size() / 2]);
    return result.bytes_moved == result.lower_bound_bytes ? 0 : 1;
  }
  std::printf(
      "moves: %s  W=%d  I=%d  scenario=%s  %d iterations\n"
      "  plans + ownerships (old and new): median %.3f ms\n"
      "  PlanMoves: median %.3f ms  min %.3f ms\n"
      "  %zu moves, bytes moved %lld, lower bound %lld, same node %lld\n",
      preset.c_str(), world, instances, scenario.c_str(), iterations,
      ownership_ms[ownership_ms.size() / 2], moves_ms[moves_ms.size() / 2],
      moves_ms.front(), result.moves.size(),
      static_cast<long long>(result.bytes_moved),
      static_cast<long long>(result.lower_bound_bytes),
      static_cast<long long>(result.bytes_same_node));
  return result.bytes_moved == result.lower_bound_bytes ? 0 : 1;
}
