// zshard-moves-bench: times the state-movement planner on a preset layout
// for one membership change and reports the moves, bytes moved and the
// lower bound. Scenarios: `failure` (rank 1 dies, a spare takes its rank)
// and `join` (I newcomers grow D by one). Eight ranks per node label.
//   zshard-moves-bench [--preset NAME] [--world W] [--instances I]
//                      [--scenario failure|join] [--iterations N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/plan/moves.h"
#include "common/plan/ownership.h"
#include "common/plan/plan.h"
#include "common/plan/presets.h"

namespace {

namespace zp = zshard::plan;
using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

int Usage() {
  std::fprintf(stderr,
               "usage: zshard-moves-bench [--preset NAME] [--world W] "
               "[--instances I] [--scenario failure|join] "
               "[--iterations N]\n");
  return 2;
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

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "llama2-70b", scenario = "failure";
  int world = 1024, instances = 8, iterations = 5;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 >= argc) return Usage();
    const char* flag = argv[i];
    const char* value = argv[++i];
    bool ok = true;
    if (std::strcmp(flag, "--preset") == 0) {
      preset = value;
    } else if (std::strcmp(flag, "--scenario") == 0) {
      scenario = value;
      ok = scenario == "failure" || scenario == "join";
    } else if (std::strcmp(flag, "--world") == 0) {
      ok = absl::SimpleAtoi(value, &world) && world >= 2;
    } else if (std::strcmp(flag, "--instances") == 0) {
      ok = absl::SimpleAtoi(value, &instances);
    } else if (std::strcmp(flag, "--iterations") == 0) {
      ok = absl::SimpleAtoi(value, &iterations) && iterations >= 1;
    } else {
      ok = false;
    }
    if (!ok) return Usage();
  }
  absl::StatusOr<zp::ModelSpec> model = zp::PresetModel(preset);
  if (!model.ok()) return Fail(model.status());
  zp::PlanOptions before_options, after_options;
  before_options.world = world;
  before_options.instances = instances;
  before_options.layout.max_world = world + instances;
  after_options = before_options;
  std::vector<zp::Member> before_members = Members(0, world);
  std::vector<zp::Member> after_members = before_members;
  std::vector<std::string> alive;
  for (const zp::Member& m : before_members) alive.push_back(m.id);
  if (scenario == "failure") {
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
