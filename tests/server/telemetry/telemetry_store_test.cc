// TelemetryStore: the bounded ring, summaries and the limits on names,
// entries and workers.
#include "server/telemetry/telemetry_store.h"

#include <string>

#include "gtest/gtest.h"

namespace zshard::server {
namespace {

TelemetryPoint Point(int64_t step, int64_t time_ms, double rs_ms,
                     double adam_ms, int64_t bytes) {
  TelemetryPoint p;
  p.step = step;
  p.time_ms = time_ms;
  p.phases = {{"reduce_scatter", rs_ms}, {"adam", adam_ms}};
  p.bytes_sent = bytes;
  p.bytes_received = bytes;
  p.memory_bytes = {{"param", 100}, {"master", 200}};
  p.loss = 1.0 / static_cast<double>(step);
  return p;
}

TEST(TelemetryStoreTest, KeepsTheLastWindowAndSummarises) {
  TelemetryStore store(TelemetryOptions{3});
  EXPECT_FALSE(store.Get("w0", 0).has_value());
  for (int step = 1; step <= 5; ++step) {
    store.Record("w0", Point(step, 1000 * step, step, 10, 500));
  }
  auto s = store.Get("w0", 10);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->reports, 5);
  EXPECT_EQ(s->latest.step, 5);
  EXPECT_DOUBLE_EQ(s->latest.step_ms, 15.0);  // the sum of the phases
  ASSERT_EQ(s->samples.size(), 3u);           // steps 3, 4, 5 kept
  EXPECT_EQ(s->samples.front().step, 3);
  EXPECT_DOUBLE_EQ(s->mean_step_ms, (13.0 + 14.0 + 15.0) / 3);
  ASSERT_EQ(s->mean_phases.size(), 2u);
  EXPECT_EQ(s->mean_phases[0].first, "reduce_scatter");
  EXPECT_DOUBLE_EQ(s->mean_phases[0].second, 4.0);
  // Steps 4 and 5 moved 2 x 1000 bytes in the 2 s after step 3.
  EXPECT_DOUBLE_EQ(s->bytes_per_s, 1000.0);
  EXPECT_EQ(store.Get("w0", 1)->samples.size(), 1u);
  EXPECT_EQ(store.Get("w0", 0)->samples.size(), 0u);
}

TEST(TelemetryStoreTest, AStepPhaseIsTheWholeStep) {
  TelemetryStore store;
  TelemetryPoint p = Point(1, 1, 4, 3, 0);
  p.phases.push_back({"step", 6});  // phases overlapped: 6 ms, not 13
  store.Record("w0", p);
  EXPECT_DOUBLE_EQ(store.Get("w0", 0)->latest.step_ms, 6.0);
}

TEST(TelemetryStoreTest, BoundsNamesEntriesAndWorkers) {
  TelemetryOptions options;
  options.max_workers = 2;
  options.max_keys = 2;
  options.max_key_len = 4;
  TelemetryStore store(options);
  TelemetryPoint p = Point(1, 1, 1, 1, 0);
  p.phases.push_back({"all_gather_long_name", 7});
  p.memory_bytes["exp_avg"] = 5;
  store.Record("w0", p);
  auto s = store.Get("w0", 1);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->latest.phases.size(), 2u);
  EXPECT_EQ(s->latest.phases[0].first, "redu");
  EXPECT_EQ(s->latest.memory_bytes.size(), 2u);
  store.Record("w1", Point(1, 2, 1, 1, 0));
  store.Record("w2", Point(1, 3, 1, 1, 0));  // w0 is silent longest
  EXPECT_EQ(store.size(), 2);
  EXPECT_FALSE(store.Get("w0", 0).has_value());
  EXPECT_TRUE(store.Get("w2", 0).has_value());
  store.Forget("w2");
  EXPECT_FALSE(store.Get("w2", 0).has_value());
}

}  // namespace
}  // namespace zshard::server
