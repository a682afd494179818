// Tests of ParseCommandLine: the forms, the refusals and their one-line
// messages, help, positional arguments and the integer range check.
#include "common/flags.h"

#include <string>
#include <vector>

#include "absl/flags/reflection.h"
#include "gtest/gtest.h"

ABSL_FLAG(int64_t, test_count, 3, "how many");
ABSL_FLAG(std::string, test_name, "", "a name");
ABSL_FLAG(bool, test_quiet, false, "say less");
ABSL_FLAG(double, test_ratio, 0.5, "a ratio");
ABSL_FLAG(std::string, test_other, "", "not in the list");

namespace zshard {
namespace {

FlagList Listed() {
  return {FlagOf(FLAGS_test_count), FlagOf(FLAGS_test_name),
          FlagOf(FLAGS_test_quiet), FlagOf(FLAGS_test_ratio)};
}

TEST(FlagsTest, ParsesEveryForm) {
  absl::FlagSaver saver;
  auto parsed = ParseCommandLine({"--test-count", "7", "--test-name=a=b",
                                  "--test-quiet", "--test-ratio=0.25"},
                                 Listed());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 7);
  EXPECT_EQ(absl::GetFlag(FLAGS_test_name), "a=b");
  EXPECT_TRUE(absl::GetFlag(FLAGS_test_quiet));
  EXPECT_EQ(absl::GetFlag(FLAGS_test_ratio), 0.25);
  EXPECT_TRUE(parsed->Given(FLAGS_test_count));
  EXPECT_FALSE(parsed->Given(FLAGS_test_other));
  EXPECT_FALSE(parsed->help());
  EXPECT_EQ(parsed->next(), 5u);
}

TEST(FlagsTest, NegativeValueAfterTheFlag) {
  absl::FlagSaver saver;
  ASSERT_TRUE(ParseCommandLine({"--test-count", "-2"}, Listed()).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), -2);
}

TEST(FlagsTest, ErrorsAreOneLineNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--test-other", "x"}, "unknown flag '--test-other'"},
      {{"--test_count", "1"}, "unknown flag '--test_count'"},
      {{"stray"}, "unexpected argument 'stray'"},
      {{"--"}, "unexpected argument '--'"},
      {{"--test-name"}, "flag --test-name needs a value"},
      {{"--test-quiet=yes"}, "flag --test-quiet takes no value"},
      {{"--test-count", "x"}, "--test-count must be an integer (got 'x')"},
      {{"--test-ratio", "y"}, "--test-ratio must be a number (got 'y')"}};
  for (const auto& [args, message] : cases) {
    absl::FlagSaver saver;
    auto parsed = ParseCommandLine(args, Listed());
    ASSERT_FALSE(parsed.ok()) << message;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), message);
  }
}

TEST(FlagsTest, EachParseStartsFromTheDefaults) {
  absl::FlagSaver saver;
  ASSERT_TRUE(
      ParseCommandLine({"--test-count=9", "--test-quiet"}, Listed()).ok());
  ASSERT_TRUE(ParseCommandLine({"--test-name=x"}, Listed()).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 3);
  EXPECT_FALSE(absl::GetFlag(FLAGS_test_quiet));
}

TEST(FlagsTest, RepeatsWinOrAreRefused) {
  absl::FlagSaver saver;
  const std::vector<std::string> args = {"--test-count=1", "--test-count=2"};
  ASSERT_TRUE(ParseCommandLine(args, Listed()).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 2);
  ParseOptions strict;
  strict.refuse_repeats = true;
  EXPECT_EQ(ParseCommandLine(args, Listed(), strict).status().message(),
            "flag --test-count is given twice");
}

TEST(FlagsTest, HelpAndPositionals) {
  absl::FlagSaver saver;
  auto help = ParseCommandLine({"--test-count=1", "-h", "--bogus"}, Listed());
  ASSERT_TRUE(help.ok());
  EXPECT_TRUE(help->help());
  ParseOptions stop;
  stop.stop_at_positional = true;
  auto command =
      ParseCommandLine({"--test-quiet", "plan", "--bogus"}, Listed(), stop);
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(command->next(), 1u);
}

TEST(FlagsTest, RangeAndHelpText) {
  absl::FlagSaver saver;
  EXPECT_TRUE(CheckRange(FLAGS_test_count, 1, 5).ok());
  EXPECT_EQ(CheckRange(FLAGS_test_count, 4, 5).message(),
            "--test-count must be >= 4 (got 3)");
  EXPECT_EQ(CheckRange(FLAGS_test_count, 0, 2).message(),
            "--test-count must be <= 2 (got 3)");
  const std::string help = FlagsHelp(Listed());
  EXPECT_NE(help.find("  --test-count  how many (default: 3)\n"),
            std::string::npos)
      << help;
  EXPECT_NE(help.find("  --test-quiet  say less\n"), std::string::npos);
  // Names are aligned; a help text naming its default is left alone.
  EXPECT_NE(help.find("  --test-name   a name\n"), std::string::npos) << help;
}

}  // namespace
}  // namespace zshard
