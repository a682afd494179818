// An in-process coordinator (with its HTTP port) running a model-parallel
// job: deploy/demo/tp2pp2.json (T = 2, P = 2) at eight workers in one
// instance (R = 2, each slot's data-parallel world 2), committed and
// stable, for the dashboard's and zshardctl's per-slot answers.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "common/job/job_spec.h"
#include "tests/server/coordinator_fixture.h"

namespace zshard::server::testing {

class ParallelCoordinatorFixture : public CoordinatorFixture {
 protected:
  static constexpr int kWorld = 8;

  // The demo job, eight workers, one instance, each change at once.
  static job::JobSpec ParallelJob() {
    const char* dir = std::getenv("ZSHARD_SOURCE_DIR");
    const std::string path =
        std::string(dir == nullptr ? "." : dir) + "/deploy/demo/tp2pp2.json";
    auto text = ReadFile(path);
    EXPECT_TRUE(text.ok()) << text.status();
    job::JobSpec spec = job::ParseJobSpec(text.value_or("")).value();
    spec.world.instances = 1;
    spec.world.min = kWorld;
    spec.world.max = kWorld;
    spec.transition_settle_ms = 0;
    return spec;
  }

  void SetUp() override {
    CoordinatorOptions options;
    options.http_listen = "127.0.0.1:0";
    StartCoordinator(options, ParallelJob());
    for (int i = 0; i < kWorld; ++i) {
      workers_.push_back(Join("m" + std::to_string(i)));
    }
    epoch_ = coordinator_->membership()->View().pending_epoch;
    ASSERT_GT(epoch_, 0);
    for (v1::AckPhase phase : {v1::ACK_PHASE_PREPARED, v1::ACK_PHASE_ACTIVE}) {
      for (const v1::JoinResponse& w : workers_) {
        ASSERT_TRUE(Ack(w, epoch_, phase).ok());
      }
    }
  }

  std::vector<v1::JoinResponse> workers_;
  int64_t epoch_ = 0;
};

}  // namespace zshard::server::testing
