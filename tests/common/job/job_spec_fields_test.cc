// The job spec's field table: each row's default parses back to itself, a
// value outside a row's range or of the wrong type is refused in one line
// naming the row, every row is serialised or says when it is left out, and
// docs/reference/job-spec.md carries the table that JobSpecFieldsMarkdown
// renders.
#include "common/job/job_spec_fields.h"

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/file_io.h"
#include "common/job/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zshard::job {
namespace {

using ::testing::HasSubstr;

constexpr char kMinimal[] =
    R"({"name": "j", "model": {"preset": "gpt2-small"}})";

nlohmann::json::json_pointer Pointer(absl::string_view path) {
  return nlohmann::json::json_pointer(
      absl::StrCat("/", absl::StrReplaceAll(path, {{".", "/"}})));
}

// The minimal spec with `value` at `path`.
std::string WithField(absl::string_view path, const nlohmann::json& value) {
  nlohmann::json j = nlohmann::json::parse(kMinimal);
  j[Pointer(path)] = value;
  return j.dump();
}

// Parsing `json` fails with one InvalidArgument line that names `path`.
void ExpectRefused(const std::string& json, const std::string& path) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(json);
  ASSERT_FALSE(spec.ok()) << json;
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(spec.status().message());
  EXPECT_THAT(message, HasSubstr(path)) << json;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

bool FitsOneCell(const char* text) {
  if (text == nullptr) return true;
  const std::string s(text);
  return s.find('|') == std::string::npos && s.find('\n') == std::string::npos;
}

TEST(JobSpecFieldsTest, RowsAreWholeAndUnique) {
  std::set<std::string> paths;
  for (const JobSpecField& row : JobSpecFields()) {
    EXPECT_TRUE(paths.insert(row.path).second) << row.path;
    EXPECT_EQ(FindJobSpecField(row.path), &row);
    EXPECT_NE(row.get, nullptr) << row.path;
    EXPECT_NE(row.set, nullptr) << row.path;
    EXPECT_FALSE(std::string(row.doc).empty()) << row.path;
    EXPECT_TRUE(FitsOneCell(row.doc)) << row.path;
    EXPECT_TRUE(FitsOneCell(row.default_doc)) << row.path;
    EXPECT_TRUE(FitsOneCell(row.range_doc)) << row.path;
    EXPECT_TRUE(FitsOneCell(row.omitted_doc)) << row.path;
    EXPECT_EQ(row.omitted == nullptr, row.omitted_doc == nullptr) << row.path;
    EXPECT_TRUE(!row.required || row.default_doc != nullptr) << row.path;
    EXPECT_TRUE(row.relate == nullptr || row.default_doc != nullptr ||
                row.range_doc != nullptr)
        << row.path;
    if (row.type == FieldType::kEnum) {
      EXPECT_GT(row.choices, 1) << row.path;
      EXPECT_NE(row.choice, nullptr) << row.path;
    }
  }
  EXPECT_EQ(FindJobSpecField("no.such.field"), nullptr);
}

TEST(JobSpecFieldsTest, EachDefaultParsesBackToItself) {
  for (const JobSpecField& row : JobSpecFields()) {
    if (row.required) continue;
    const nlohmann::json value = JobSpecFieldDefault(row);
    absl::StatusOr<JobSpec> spec = ParseJobSpec(WithField(row.path, value));
    ASSERT_TRUE(spec.ok()) << row.path << ": " << spec.status();
    EXPECT_EQ(row.get(*spec), value) << row.path;
  }
}

TEST(JobSpecFieldsTest, AbsentFieldsTakeTheirDefaults) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(kMinimal);
  ASSERT_TRUE(spec.ok()) << spec.status();
  for (const JobSpecField& row : JobSpecFields()) {
    if (row.required || row.default_doc != nullptr) continue;
    EXPECT_EQ(row.get(*spec), JobSpecFieldDefault(row)) << row.path;
  }
}

TEST(JobSpecFieldsTest, DerivedDefaultsFollowTheFieldsTheyDependOn) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(kMinimal);
  ASSERT_TRUE(spec.ok()) << spec.status();
  // Under the default lease the derived defaults are the rows' defaults.
  for (const char* path : {"transition_timeout_ms", "transition_settle_ms"}) {
    const JobSpecField& row = *FindJobSpecField(path);
    EXPECT_EQ(row.get(*spec), JobSpecFieldDefault(row)) << path;
  }
  EXPECT_EQ(spec->transition_timeout_ms, 4 * spec->lease_timeout_ms);
  EXPECT_EQ(spec->world.resize, ResizePolicy::kKeepD);

  spec = ParseJobSpec(WithField("lease_timeout_ms", 400));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->transition_timeout_ms, 1600);
  EXPECT_EQ(spec->transition_settle_ms, 200);

  spec = ParseJobSpec(WithField("world", {{"instances", 1}}));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->world.resize, ResizePolicy::kKeepI);
}

TEST(JobSpecFieldsTest, ValuesOutsideEachRangeAreRefusedNamingTheRow) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  int checked = 0;
  for (const JobSpecField& row : JobSpecFields()) {
    SCOPED_TRACE(row.path);
    switch (row.type) {
      case FieldType::kInteger:
        ExpectRefused(WithField(row.path, row.int_min - 1), row.path);
        if (row.int_max < std::numeric_limits<int64_t>::max()) {
          ExpectRefused(WithField(row.path, row.int_max + 1), row.path);
        }
        ExpectRefused(WithField(row.path, "1"), row.path);
        ExpectRefused(WithField(row.path, 1.5), row.path);
        ++checked;
        break;
      case FieldType::kNumber:
        ExpectRefused(WithField(row.path, row.min_exclusive
                                              ? row.min
                                              : std::nextafter(row.min, -kInf)),
                      row.path);
        ExpectRefused(WithField(row.path, std::nextafter(row.max, kInf)),
                      row.path);
        ExpectRefused(WithField(row.path, "1"), row.path);
        ++checked;
        break;
      case FieldType::kBoolean:
        ExpectRefused(WithField(row.path, 1), row.path);
        break;
      case FieldType::kString:
      case FieldType::kEnum:
        ExpectRefused(WithField(row.path, std::string(row.max_len + 1, 'x')),
                      row.path);
        ExpectRefused(WithField(row.path, 1), row.path);
        if (row.type == FieldType::kEnum) {
          ExpectRefused(WithField(row.path, "no-such-value"), row.path);
        }
        break;
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(JobSpecFieldsTest, EveryEnumNameSetsAndReadsBack) {
  for (const JobSpecField& row : JobSpecFields()) {
    for (int i = 0; i < row.choices; ++i) {
      JobSpec spec;
      ASSERT_TRUE(row.set(spec, row.choice(i)).ok()) << row.path;
      EXPECT_EQ(row.get(spec), row.choice(i)) << row.path;
    }
  }
}

TEST(JobSpecFieldsTest, EveryRowIsSerialisedOrSaysWhenItIsLeftOut) {
  absl::StatusOr<JobSpec> plain = ParseJobSpec(kMinimal);
  ASSERT_TRUE(plain.ok()) << plain.status();
  const nlohmann::json j = nlohmann::json::parse(JobSpecToJson(*plain));
  for (const JobSpecField& row : JobSpecFields()) {
    if (j.contains(Pointer(row.path))) {
      EXPECT_EQ(j.at(Pointer(row.path)), row.get(*plain)) << row.path;
    } else {
      ASSERT_NE(row.omitted, nullptr) << row.path << " is not serialised";
      EXPECT_TRUE(row.omitted(*plain)) << row.path;
      EXPECT_NE(row.omitted_doc, nullptr) << row.path;
    }
  }
  // Set away from their defaults, the fields left out above are written.
  absl::StatusOr<JobSpec> full = ParseJobSpec(R"({"name": "j",
      "model": {"preset": "llama2-7b"},
      "parallel": {"tensor": 2, "pipeline": 2, "context": 2},
      "optimizer": {"lr_schedule": {"kind": "cosine", "warmup_steps": 2,
                                    "decay_steps": 10, "min_lr": 0.0001}},
      "world": {"resize": "keep_i", "min": 8, "max": 8},
      "workload": {"kind": "trainer"}})");
  ASSERT_TRUE(full.ok()) << full.status();
  const nlohmann::json all = nlohmann::json::parse(JobSpecToJson(*full));
  for (const JobSpecField& row : JobSpecFields()) {
    EXPECT_TRUE(all.contains(Pointer(row.path))) << row.path;
  }
}

// docs/reference/job-spec.md holds the rendered table between these lines,
// with a blank line on each side.
constexpr char kBegin[] = "<!-- job-spec-fields:begin -->\n";
constexpr char kEnd[] = "<!-- job-spec-fields:end -->";

TEST(JobSpecFieldsDocsTest, ReferenceTableIsTheFieldTable) {
  const char* source = std::getenv("ZSHARD_SOURCE_DIR");
  if (source == nullptr) {
    GTEST_SKIP() << "ZSHARD_SOURCE_DIR is not set (ctest sets it)";
  }
  const std::string path = absl::StrCat(source, "/docs/reference/job-spec.md");
  absl::StatusOr<std::string> text = ReadFile(path);
  ASSERT_TRUE(text.ok()) << text.status();
  size_t begin = text->find(kBegin);
  const size_t end = text->find(kEnd);
  ASSERT_TRUE(begin != std::string::npos && end != std::string::npos &&
              begin < end)
      << path << " lacks the lines " << kBegin << " and " << kEnd;
  begin += sizeof(kBegin) - 1;
  const std::string want = absl::StrCat("\n", JobSpecFieldsMarkdown(), "\n");
  if (text->compare(begin, end - begin, want) == 0) return;
  const char* update = std::getenv("ZSHARD_UPDATE_DOCS");
  if (update != nullptr && std::string(update) == "1") {
    text->replace(begin, end - begin, want);
    ASSERT_TRUE(WriteFileAtomic(path, *text).ok());
    std::cout << "rewrote the field table in " << path << "\n";
    return;
  }
  FAIL() << path
         << ": the table between the job-spec-fields markers differs from "
            "the field table (common/job/job_spec_fields.cc). Regenerate it "
            "with: ZSHARD_UPDATE_DOCS=1 ctest --test-dir BUILD_DIR -R "
            "job_spec_test";
}

}  // namespace
}  // namespace zshard::job
