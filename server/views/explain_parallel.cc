// ExplainParallel: a model-parallel job's replicas, slots and placement, in
// words.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/job/job_slot.h"
#include "common/plan/parallel.h"
#include "server/membership/transition/parallel_policy.h"
#include "server/views/explain.h"

namespace zshard::server {

std::vector<std::string> ExplainParallel(const ClusterView& view,
                                         const job::JobSpec& job) {
  const plan::ParallelSizes& s = job.parallel;
  if (!s.model_parallel()) return {};
  std::vector<std::string> out;
  out.push_back(absl::StrCat(
      "Model-parallel job: tensor ", s.tensor, " x pipeline ", s.pipeline,
      " x context ", s.context, " = ", s.replica_size(), " workers a replica, ",
      s.slots(),
      " slot(s) (tp, pp), each with its own params; a slot's optimizer "
      "state is sharded over its data-parallel domain (the replicas' "
      "workers at that slot, times context), and the grad norm and the "
      "non-finite check span every slot."));
  int healthy = 0;
  for (const MemberView& mv : view.members) {
    const MemberState st = mv.member.state;
    if (st == MemberState::kActive || st == MemberState::kSpare ||
        st == MemberState::kJoining) {
      ++healthy;
    }
  }
  if (view.epoch > 0 && plan::CheckParallelWorld(s, view.world).ok()) {
    const int dp = plan::DataParallelSize(s, view.world);
    const int instances =
        job::JobParallelPlanOptions(job, view.world).instances;
    out.push_back(absl::StrCat(
        "Epoch ", view.epoch, " runs ", plan::Replicas(s, view.world),
        " replica(s): every slot's data-parallel domain has ", dp,
        " rank(s) in ", instances, " instance(s) of ",
        instances > 0 ? dp / instances : dp, "."));
  }
  const int chosen = ChooseParallelWorld(healthy, job, view.target_world,
                                         [](int) { return true; });
  out.push_back(absl::StrCat(
      "With ", healthy, " healthy member(s) the policy gives ",
      ExplainParallelWorld(chosen, healthy, job, view.target_world),
      "; the elastic unit is a whole replica: a spare takes a failed "
      "worker's position (only its slot's shard moves), and with no spare "
      "the replica that lost a worker is dissolved, its other workers "
      "becoming spares."));
  if (view.epoch > 0 && plan::CheckParallelWorld(s, view.world).ok()) {
    std::vector<std::string> nodes(static_cast<size_t>(view.world));
    for (const MemberView& mv : view.members) {
      const Member& m = mv.member;
      if (m.rank < 0 || m.rank >= view.world || !IsLive(m.state)) continue;
      auto node = m.labels.find("node");
      if (node != m.labels.end())
        nodes[static_cast<size_t>(m.rank)] = node->second;
    }
    for (std::string& line : DescribeTensorPlacement(s, view.world, nodes)) {
      out.push_back(std::move(line));
    }
  }
  return out;
}

}  // namespace zshard::server
