// A small job spec for coordinator tests: a tiny inline model trained by
// the synthetic workload (its members hold optimizer state), I = 2,
// world in [2, 4], lease 5 s, heartbeat 1 s, each change proposed at once
// (transition_settle_ms 0).
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "common/job/job_spec.h"

namespace zshard::server::testing {

inline std::string TestJobJson(int instances = 2, int min = 2, int max = 4,
                               int64_t steps = 0) {
  return absl::StrCat(
      R"({"name": "demo", "model": {"name": "tiny", "params": [)",
      R"({"name": "a", "shape": [1000], "dtype": "bf16"},)",
      R"({"name": "b", "shape": [300, 7], "dtype": "fp32"}]},)",
      R"("world": {"instances": )", instances, R"(, "min": )", min,
      R"(, "max": )", max, R"(},)",
      R"("lease_timeout_ms": 5000, "heartbeat_interval_ms": 1000,)",
      R"("transition_settle_ms": 0,)",
      R"("workload": {"kind": "synthetic", "steps": )", steps, "}}");
}

inline job::JobSpec TestJob(int instances = 2, int min = 2, int max = 4,
                            int64_t steps = 0) {
  return job::ParseJobSpec(TestJobJson(instances, min, max, steps)).value();
}

}  // namespace zshard::server::testing
