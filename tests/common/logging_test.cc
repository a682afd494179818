// The logger's two formats: JSON lines parse as one object each with time,
// level, msg, fields and context; context fields are set and cleared one
// at a time; lines from many threads never interleave.
#include "common/logging.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace zshard {
namespace {

// Captures the logger's lines in memory for one test.
class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = open_memstream(&buffer_, &size_);
    ASSERT_NE(out_, nullptr);
    SetLogOutput(out_);
    SetLogLevel(LogLevel::kInfo);
    SetLogContext(std::map<std::string, std::string>{});
  }

  void TearDown() override {
    SetLogOutput(stderr);
    SetLogFormat(LogFormat::kText);
    SetLogContext(std::map<std::string, std::string>{});
    std::fclose(out_);
    std::free(buffer_);
  }

  // Every line written so far.
  std::vector<std::string> Lines() {
    std::fflush(out_);
    std::istringstream in(std::string(buffer_, size_));
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  std::vector<nlohmann::json> JsonLines() {
    std::vector<nlohmann::json> out;
    for (const std::string& line : Lines()) {
      out.push_back(nlohmann::json::parse(line, nullptr, false));
      EXPECT_TRUE(out.back().is_object()) << line;
    }
    return out;
  }

  std::FILE* out_ = nullptr;
  char* buffer_ = nullptr;
  size_t size_ = 0;
};

TEST_F(LoggingTest, JsonLinesCarryTimeLevelMessageFieldsAndContext) {
  SetLogFormat(LogFormat::kJson);
  SetLogContext({{"job", "demo"}, {"worker", "w1"}});
  SetLogContext("epoch", "7");
  SetLogContext("rank", "3");
  ZSHARD_LOG_INFO("epoch stable", {{"step", "120"}, {"note", "a \"quoted\""}});
  ZSHARD_LOG_WARN("lease \n expired", {{"epoch", "8"}, {"msg", "dropped"}});
  // time, level and msg come first, in that order.
  EXPECT_EQ(Lines()[0].rfind("{\"time\":\"", 0), 0u) << Lines()[0];
  EXPECT_NE(Lines()[0].find("\",\"level\":\"info\",\"msg\":\"epoch stable\","),
            std::string::npos)
      << Lines()[0];
  std::vector<nlohmann::json> lines = JsonLines();
  ASSERT_EQ(lines.size(), 2u);
  const nlohmann::json& j = lines[0];
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["msg"], "epoch stable");
  EXPECT_EQ(j["job"], "demo");
  EXPECT_EQ(j["worker"], "w1");
  EXPECT_EQ(j["epoch"], 7);  // numeric context keys are integers
  EXPECT_EQ(j["rank"], 3);
  EXPECT_EQ(j["step"], 120);
  EXPECT_EQ(j["note"], "a \"quoted\"");
  // RFC 3339 in UTC with milliseconds: 2026-11-29T11:40:00.123Z.
  const std::string time = j["time"];
  ASSERT_EQ(time.size(), 24u) << time;
  EXPECT_EQ(time[4], '-');
  EXPECT_EQ(time[10], 'T');
  EXPECT_EQ(time[19], '.');
  EXPECT_EQ(time.back(), 'Z');
  EXPECT_EQ(lines[1]["level"], "warning");
  EXPECT_EQ(lines[1]["msg"], "lease \n expired");  // escaped, one line
  EXPECT_EQ(lines[1]["epoch"], 8);                 // the field wins
}

TEST_F(LoggingTest, ContextFieldsAreSetAndClearedOneAtATime) {
  SetLogFormat(LogFormat::kJson);
  SetLogContext("worker", "w0");
  SetLogContext("rank", "1");
  ZSHARD_LOG_INFO("ranked");
  ClearLogContext("rank");
  ClearLogContext("absent");
  SetLogContext("epoch", "not-a-number");
  ZSHARD_LOG_INFO("spare");
  std::vector<nlohmann::json> lines = JsonLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["rank"], 1);
  EXPECT_FALSE(lines[1].contains("rank"));
  EXPECT_EQ(lines[1]["worker"], "w0");
  EXPECT_EQ(lines[1]["epoch"], "not-a-number");
}

TEST_F(LoggingTest, TextLinesAndLevels) {
  SetLogContext("job", "demo");
  SetLogLevel(LogLevel::kWarning);
  ZSHARD_LOG_INFO("hidden");
  ZSHARD_LOG_ERROR("disk full", {{"job", "other"}, {"path", "/x"}});
  std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(" error disk full job=other path=/x"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(lines[0].find("job=demo"), std::string::npos) << lines[0];
}

TEST_F(LoggingTest, ThreadsNeverInterleaveLines) {
  SetLogFormat(LogFormat::kJson);
  constexpr int kThreads = 4;
  constexpr int kLines = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kLines; ++i) {
        if (i % 50 == 0) SetLogContext("rank", std::to_string(t));
        ZSHARD_LOG_INFO(std::string(100, 'a' + t),
                        {{"step", std::to_string(i)}});
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<nlohmann::json> lines = JsonLines();
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kLines));
  for (const nlohmann::json& j : lines) {
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["msg"].get<std::string>().size(), 100u);
  }
}

}  // namespace
}  // namespace zshard
