// Tests of zshard-loadgen's statistics: percentiles and /proc CPU parsing.

#include "gtest/gtest.h"
#include "tools/loadgen/cpu_usage.h"
#include "tools/loadgen/latency_stats.h"

namespace zshard::loadgen {
namespace {

TEST(LatencyStatsTest, NearestRankPercentiles) {
  LatencyStats stats;
  EXPECT_EQ(stats.Summarize().count, 0);
  EXPECT_EQ(stats.Summarize().p99_ms, 0);
  for (int i = 100; i >= 1; --i) stats.Add(i * 1000);  // 1..100 ms
  LatencySummary s = stats.Summarize();
  EXPECT_EQ(s.count, 100);
  EXPECT_DOUBLE_EQ(s.p50_ms, 50);
  EXPECT_DOUBLE_EQ(s.p90_ms, 90);
  EXPECT_DOUBLE_EQ(s.p99_ms, 99);
  EXPECT_DOUBLE_EQ(s.max_ms, 100);
  EXPECT_EQ(Percentile({7}, 0), 7);
  EXPECT_EQ(Percentile({1, 2, 3}, 100), 3);
}

TEST(CpuUsageTest, ParsesProcStat) {
  // Field 14 utime = 250, field 15 stime = 50; the name has spaces and ')'.
  const char* stat =
      "1234 (zshard (co) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 "
      "20 0 9 0 100 1000 10";
  auto seconds = ParseProcStatCpuSeconds(stat, 100);
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  EXPECT_DOUBLE_EQ(*seconds, 3.0);
  EXPECT_FALSE(ParseProcStatCpuSeconds("garbage", 100).ok());
  EXPECT_FALSE(ParseProcStatCpuSeconds("1 (x) S 1 2", 100).ok());
  EXPECT_TRUE(ProcessCpuSeconds(0).ok());
  EXPECT_EQ(ProcessCpuSeconds(999999999).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace zshard::loadgen
