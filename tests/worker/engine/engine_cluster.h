// Test support: a world of StepEngines, one per rank, run as threads of this
// process over real Gloo on 127.0.0.1 with an in-process rendezvous store.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "client/worker/comm/memory_kv_store.h"
#include "client/worker/engine/step_engine.h"
#include "client/worker/engine/synthetic_workload.h"
#include "common/plan/plan.h"
#include "gtest/gtest.h"

namespace zshard::engine::testing {

// Six params "p0".."p5" of 1000, 300, 2500, 7, 130 and 700 elements in
// `dtype`: with bucket_size 600 three buckets, each padded. Param
// `no_decay` (-1: none) has no weight decay.
inline plan::ModelSpec SmallModel(plan::DType dtype, int no_decay = -1) {
  plan::ModelSpec spec;
  spec.name = "small";
  const int64_t sizes[] = {1000, 300, 2500, 7, 130, 700};
  for (int i = 0; i < 6; ++i) {
    plan::ParamSpec p;
    p.name = "p" + std::to_string(i);
    p.shape = {sizes[i]};
    p.dtype = dtype;
    p.no_weight_decay = i == no_decay;
    spec.params.push_back(p);
  }
  return spec;
}

// Runs fn(rank) for every rank on its own thread and joins them all.
inline void RunRanks(int world, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

// Every rank's engine and workload. Not thread-safe as a whole; each rank's
// entries are used by that rank's thread only.
struct Cluster {
  comm::MemoryKvStore store;
  std::vector<std::unique_ptr<Workload>> workloads;
  std::vector<std::unique_ptr<StepEngine>> engines;
  std::vector<absl::Status> create_status;

  // Creates the engines of `plan` concurrently (they rendezvous together).
  // workloads[r] must be set for every rank first.
  // `customize` may adjust each rank's options.
  void Create(
      const plan::ModelSpec& model, const plan::Plan& plan,
      const job::OptimizerSpec& optimizer, int64_t timeout_ms = 10000,
      const std::function<void(int, EngineOptions&)>& customize = nullptr) {
    engines.resize(plan.world);
    create_status.assign(plan.world, absl::OkStatus());
    RunRanks(plan.world, [&](int r) {
      EngineConfig config;
      config.model = model;
      config.plan = plan;
      config.rank = r;
      config.optimizer = optimizer;
      config.store = &store;
      EngineOptions options;
      options.comm_timeout_ms = timeout_ms;
      options.adam_threads = 1;
      if (customize) customize(r, options);
      auto engine = StepEngine::Create(config, options, *workloads[r]);
      if (engine.ok()) {
        engines[r] = std::move(*engine);
      } else {
        create_status[r] = engine.status();
      }
    });
  }

  // Synthetic workloads for every rank of a world of `world`.
  void MakeSynthetic(const plan::ModelSpec& model, int world,
                     int64_t global_batch) {
    workloads.clear();
    for (int r = 0; r < world; ++r) {
      SyntheticWorkload::Options o;
      o.global_batch = global_batch;
      o.world = world;
      o.rank = r;
      workloads.push_back(std::make_unique<SyntheticWorkload>(model, o));
    }
  }

  // One step on every rank; returns each rank's result.
  std::vector<StepResult> Step() {
    std::vector<StepResult> results(engines.size());
    RunRanks(static_cast<int>(engines.size()),
             [&](int r) { results[r] = engines[r]->Step(*workloads[r]); });
    return results;
  }
};

// A run's cluster and every step's results, [step][rank].
struct Training {
  Cluster cluster;
  std::vector<std::vector<StepResult>> results;
};

// Creates `run`'s engines over `plan` (its workloads as pushed, or the
// synthetic ones of `global_batch` when none were) with AdamW at lr 1e-3,
// weight decay 0.01 and a clipping bound of 0.05, which clips, so that the
// norm enters every rank's update; then runs `steps` steps. Asserts that
// every rank was created and stepped.
inline void Train(Training& run, const plan::ModelSpec& model,
                  const plan::Plan& plan, int64_t global_batch, int steps) {
  job::OptimizerSpec opt;
  opt.lr = 1e-3;
  opt.weight_decay = 0.01;
  opt.clip_grad_norm = 0.05;
  if (run.cluster.workloads.empty()) {
    run.cluster.MakeSynthetic(model, plan.world, global_batch);
  }
  run.cluster.Create(model, plan, opt);
  for (int r = 0; r < plan.world; ++r) {
    ASSERT_TRUE(run.cluster.create_status[r].ok())
        << run.cluster.create_status[r];
  }
  for (int step = 1; step <= steps; ++step) {
    run.results.push_back(run.cluster.Step());
    for (int r = 0; r < plan.world; ++r) {
      ASSERT_TRUE(run.results.back()[r].status.ok())
          << "step " << step << " rank " << r << ": "
          << run.results.back()[r].status;
    }
  }
}

}  // namespace zshard::engine::testing
