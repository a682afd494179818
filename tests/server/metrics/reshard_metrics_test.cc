// RenderReshardMetrics parses as Prometheus text (prometheus_client's own
// parser, python3-prometheus-client) with the stats' values; the checkpoint
// step and age have no sample before the first checkpoint.
#include "server/metrics/reshard_metrics.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace zshard::server {
namespace {

// "NAME VALUE" per sample, as prometheus_client parses `text`.
std::string Parse(const std::string& text) {
  const std::string path = ::testing::TempDir() + "/reshard_metrics.txt";
  std::ofstream(path) << text;
  const std::string cmd =
      "/usr/bin/python3 -c '"
      "import sys\n"
      "from prometheus_client.parser import text_string_to_metric_families\n"
      "for f in text_string_to_metric_families(open(sys.argv[1]).read()):\n"
      "  print(\"family\", f.name, f.type)\n"
      "  for s in f.samples:\n"
      "    print(s.name, s.value)\n"
      "' " +
      path + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return "popen failed";
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  if (pclose(pipe) != 0) return "parser failed: " + out;
  return out;
}

TEST(ReshardMetricsTest, ValuesParseAsPrometheusText) {
  MembershipStats s;
  s.reshards = 3;
  s.reshard_bytes = 123456789;
  s.last_reshard_seconds = 1.25;
  s.checkpoints = 4;
  s.last_checkpoint_step = 40;
  s.last_checkpoint_ms = 1795000000000;
  const std::string out = Parse(RenderReshardMetrics(s, 1795000012500));
  for (const char* line :
       {"family zshard_reshards counter\n", "zshard_reshards_total 3.0\n",
        "zshard_reshard_bytes_total 123456789.0\n",
        "family zshard_last_reshard_seconds gauge\n",
        "zshard_last_reshard_seconds 1.25\n", "zshard_checkpoints_total 4.0\n",
        "zshard_checkpoint_step 40.0\n",
        "zshard_checkpoint_age_seconds 12.5\n"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << " in\n" << out;
  }
}

TEST(ReshardMetricsTest, NoCheckpointSamplesBeforeTheFirst) {
  MembershipStats s;  // last_checkpoint_step -1, last_checkpoint_ms 0
  const std::string text = RenderReshardMetrics(s, 1795000000000);
  const std::string out = Parse(text);
  EXPECT_NE(out.find("zshard_reshards_total 0.0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("family zshard_checkpoint_age_seconds gauge\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("\nzshard_checkpoint_age_seconds "), std::string::npos)
      << out;
  EXPECT_EQ(out.find("\nzshard_checkpoint_step "), std::string::npos) << out;
  // A clock behind the commit time never shows a negative age.
  s.last_checkpoint_ms = 1795000000000;
  s.last_checkpoint_step = 10;
  EXPECT_NE(RenderReshardMetrics(s, 1794999999000)
                .find("zshard_checkpoint_age_seconds 0.000\n"),
            std::string::npos);
}

}  // namespace
}  // namespace zshard::server
