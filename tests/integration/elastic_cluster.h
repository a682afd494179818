// A training cluster of real processes for the elastic integration tests:
// a job spec for the synthetic workload (bf16 params reduced in fp32), a
// coordinator and named workers that dump their masters into one
// directory, waits on the dashboard (steps, events) with deadlines, and
// the reference of the run's own world history (from its commit events).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job/job_spec.h"
#include "nlohmann/json.hpp"
#include "tests/integration/dashboard_probe.h"
#include "tests/integration/elastic_reference.h"
#include "tests/integration/process_cluster.h"

namespace zshard::testing {

// The knobs of an elastic test job; every field has a default that keeps a
// test short on two cores.
struct ElasticJob {
  std::string name = "elastic";
  int instances = 1;
  int min_world = 2;
  int max_world = 4;
  // world.resize: "keep_d", "keep_i", or "" for the job's default (keep_d
  // when instances >= 2).
  std::string resize;
  int64_t steps = 40;
  int64_t step_delay_ms = 50;
  int64_t lease_timeout_ms = 1500;
  int64_t heartbeat_interval_ms = 100;
  // 0: a proposal at each membership change, so that a change lands in a
  // run of steps that may last well under the default settle window.
  int64_t transition_settle_ms = 0;
  int64_t global_batch = 16;
  // "bf16" (masters apart from params) or "fp32" (params are masters).
  std::string dtype = "bf16";
  // Param sizes; the bucket size splits them into several padded buckets.
  std::vector<int64_t> param_sizes = {1000, 300, 2500, 7, 130, 700};
  // Indices into param_sizes of the params flagged expert. Default none.
  std::vector<int> expert_params;
  // layout.expert_parallel. Default 1.
  int expert_parallel = 1;
  // layout.grad_reduce_in_fp32. Default true (see the file comment).
  bool grad_reduce_in_fp32 = true;
  int64_t bucket_size = 600;
  double lr = 1e-3;
  double weight_decay = 0.01;
  // Empty: no checkpoints. A relative path is taken inside the run's temp
  // dir (ElasticRun resolves it).
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  // optimizer.clip_grad_norm (0: no clipping).
  double clip_grad_norm = 0;
  // parallel.tensor and parallel.pipeline (and context): above 1 the model
  // becomes one
  // spec per slot (tp, pp), slot s's params param_sizes[i] + 8 x s
  // elements (so that slots differ), the first param tp_replicated.
  int tensor = 1;
  int pipeline = 1;
  // parallel.context.
  int context = 1;

  nlohmann::json ToJson() const;
  // The parsed spec (what the coordinator and the reference read).
  absl::StatusOr<job::JobSpec> Spec() const;

 private:
  // The params, each param_sizes[i] + extra elements.
  nlohmann::json ParamsJson(int64_t extra) const;
  // Everything but the model and the optimizer's clipping.
  nlohmann::json BaseJson(const nlohmann::json& model) const;
};

// One coordinator and its workers. Not thread-safe; owns its processes.
class ElasticRun {
 public:
  // A relative job.checkpoint_dir becomes File(checkpoint_dir).
  explicit ElasticRun(ElasticJob job);

  // Before Start(): the coordinator runs under `placement` (e.g. in a
  // NetHosts host) and the probes call it there. Workers and zshardctl are
  // placed with cluster().PlaceWorker() and PlaceCtl().
  void PlaceCoordinator(Placement placement);
  // Starts the coordinator with `extra_flags` (e.g. --restore DIR).
  absl::Status Start(const std::vector<std::string>& extra_flags = {});
  // Instead of Start(), for several coordinators the caller starts and
  // stops (e.g. on one etcd prefix) with the spec of WriteJobFile(): the
  // workers get --coordinator with every address of `addresses` (after
  // ProcessCluster's own, which the last one overrides), and the probe
  // calls go to whichever address answers (the leader: standbys answer
  // UNAVAILABLE), the last one that did first.
  void FollowCoordinators(std::vector<std::string> addresses);
  // Writes the job spec to File("job.json"); returns its path.
  absl::StatusOr<std::string> WriteJobFile() const;
  // Starts worker `name` with --dump-master dump_dir() and `extra` flags.
  absl::Status StartWorker(const std::string& name,
                           const std::vector<std::string>& extra = {});
  absl::Status StartWorkers(const std::vector<std::string>& names);

  // Waits until the cluster is stable with `world` ranks, every rank at
  // step >= `step`; returns that status.
  absl::StatusOr<v1::GetClusterStatusResponse> WaitForRanksAtStep(
      int world, int64_t step, int64_t timeout_ms);
  // Waits until some event of `kind` with seq > after_seq exists; returns
  // the first such.
  absl::StatusOr<v1::Event> WaitForEvent(const std::string& kind,
                                         int64_t after_seq, int64_t timeout_ms);
  // Waits for each named worker to exit; the exit status per name (-1 for
  // one still running at the deadline, which is then killed).
  std::map<std::string, int> WaitForExits(const std::vector<std::string>& names,
                                          int64_t timeout_ms);

  // The cluster status of the coordinator that answers.
  absl::StatusOr<v1::GetClusterStatusResponse> Status();
  // Events now (empty on error, which is logged into the returned list's
  // absence; callers assert on contents).
  std::vector<v1::Event> Events();
  // The tail of worker `name`'s log, and the coordinator's, for messages.
  std::string WorkerLog(const std::string& name) const;
  std::string CoordinatorLog() const;
  // Every worker log and the event log, for a failed assertion's message.
  std::string Diagnostics();

  // The topology each step 1..job().steps ran at, from the "commit"
  // events ("... world W resume step S ...": steps after S ran at W in
  // the instances the job's resize policy gives W; a later commit
  // overrides, as after a rollback).
  // Steps no commit covers take `before` (e.g. the steps a restored
  // checkpoint was trained with), else the first commit's world.
  std::vector<Topology> Schedule(const std::vector<Topology>& before = {});
  // Compares the dump directory with the reference of Schedule(before).
  absl::StatusOr<DumpCheck> CheckMasters(
      const std::vector<Topology>& before = {});

  ProcessCluster& cluster() { return cluster_; }
  // The probe of the coordinator that answered last.
  DashboardProbe& probe() { return *probes_[current_]; }
  const ElasticJob& job() const { return job_; }
  std::string dump_dir() const { return cluster_.dir().File("masters"); }
  std::string File(const std::string& name) const {
    return cluster_.dir().File(name);
  }

 private:
  // Tries `call` on each probe, the current one first, until one succeeds;
  // that one becomes the current one. The last error when none does.
  template <typename T>
  absl::StatusOr<T> Ask(absl::StatusOr<T> (DashboardProbe::*call)());

  ElasticJob job_;
  ProcessCluster cluster_;
  // One per coordinator address (cluster_'s alone unless
  // FollowCoordinators).
  std::vector<std::unique_ptr<DashboardProbe>> probes_;
  size_t current_ = 0;
  // "--coordinator LIST" for the workers; empty: cluster_'s own.
  std::vector<std::string> coordinator_flags_;
  std::vector<std::string> started_;
};

// "w0", "w1", ... "w<n-1>".
std::vector<std::string> WorkerNames(int n, int first = 0);

}  // namespace zshard::testing
