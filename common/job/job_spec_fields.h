// The job spec's field table: one row for each scalar field (number,
// boolean, string or enum), with its JSON path, type, range and one-line
// doc. The parser reads these fields through the table, JobSpecToJson
// writes them from it, and docs/reference/job-spec.md's table is rendered
// from it (JobSpecFieldsMarkdown; a test keeps the file in step). A row's
// default is the field's value in a default-constructed JobSpec, so every
// default is written once, in job_spec.h.
//
// The structured parts (the model's params, the objects themselves) and the
// checks that tie fields together (world.min <= world.max, instances
// dividing max, the schedule against lr, expert_parallel against the shard
// group) stay explicit code in job_spec.cc; the rows' docs state them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/job/job_spec.h"
#include "common/job/json_fields.h"
#include "nlohmann/json.hpp"

namespace zshard::job {

enum class FieldType { kInteger, kNumber, kBoolean, kString, kEnum };

// What a field is read with: its default and, for integers, its range.
struct FieldRule {
  nlohmann::json fallback;
  int64_t int_min = 0;
  int64_t int_max = 0;
};

// One row of the table. Trivially destructible, so the table may be static.
struct JobSpecField {
  // The JSON path, dotted: "lease_timeout_ms", "workload.kind".
  const char* path = "";
  FieldType type = FieldType::kInteger;
  // One line of plain text for the docs; no '|'.
  const char* doc = "";
  // kInteger: the range [int_min, int_max].
  int64_t int_min = 0;
  int64_t int_max = 0;
  // kNumber: the range [min, max], or (min, max] when min_exclusive.
  double min = 0.0;
  double max = 0.0;
  bool min_exclusive = false;
  // kString and kEnum: the longest value accepted, in characters.
  size_t max_len = 0;
  // kEnum: the number of values and the name of each, 0 .. choices - 1.
  int choices = 0;
  const char* (*choice)(int index) = nullptr;
  // The field has no default: the spec must set it (model.preset: it or
  // model.params).
  bool required = false;
  // Cross-field code, or null: called with the spec read so far before the
  // field is read, it sets the default and the integer range that depend
  // on other fields.
  void (*relate)(const JobSpec& spec, FieldRule& rule) = nullptr;
  // What the docs show for the default and the range when they are not
  // plain values: a required field, or what relate does. In range_doc,
  // {min} and {max} stand for int_min and int_max.
  const char* default_doc = nullptr;
  const char* range_doc = nullptr;
  // When not null, JobSpecToJson leaves the field out of a spec for which
  // this returns true; omitted_doc says when, in one sentence.
  bool (*omitted)(const JobSpec& spec) = nullptr;
  const char* omitted_doc = nullptr;
  // The field's value in a spec as JSON, and its setter (InvalidArgument
  // naming the field for an unknown enum name).
  nlohmann::json (*get)(const JobSpec& spec) = nullptr;
  absl::Status (*set)(JobSpec& spec, const nlohmann::json& value) = nullptr;

  // The last component of the path ("kind"), and the rest ("workload"; ""
  // for a top-level field).
  absl::string_view Key() const;
  absl::string_view Parent() const;
};

// Every row, in the order the parser reads them and the docs list them.
absl::Span<const JobSpecField> JobSpecFields();

// The row at `path`, or null.
const JobSpecField* FindJobSpecField(absl::string_view path);

// The row's default: its field's value in a default-constructed JobSpec.
// For a row with a relate function this is the default under the other
// fields' defaults.
nlohmann::json JobSpecFieldDefault(const JobSpecField& field);

// The value of one row in `fields` (the object of its parent), or its
// default when absent, checked for type and range but not yet set: the
// caller sets it with field.set. InvalidArgument naming the field.
absl::StatusOr<nlohmann::json> ReadJobSpecField(JsonFields& fields,
                                                const JobSpecField& field,
                                                const JobSpec& spec);

// Reads into `spec` the rows of the object that `fields` reads (the rows
// whose parent is fields.path()), in table order, skipping those already
// asked for, and stopping after the row keyed `through` when it is not
// empty. A row that is absent takes its default. Rows with min_exclusive
// are checked after the others ("optimizer.lr must be > 0").
// InvalidArgument in one line naming the field on any problem.
absl::Status ReadJobSpecFields(JsonFields& fields, JobSpec& spec,
                               absl::string_view through = {});

// Writes every row of `spec` into the object `json` at its path, except
// those its omitted function leaves out.
void WriteJobSpecFields(const JobSpec& spec, nlohmann::json& json);

// The table as a Markdown table (a header row, then one row per field,
// each line ending in a newline): field, type, default, range, doc.
std::string JobSpecFieldsMarkdown();

}  // namespace zshard::job
