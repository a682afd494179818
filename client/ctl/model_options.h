// The model and world options shared by zshardctl's offline plan and ledger
// commands: their Abseil flags, read into a model spec and plan options.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/flags.h"
#include "common/plan/model_spec.h"
#include "common/plan/plan.h"

namespace zshard::ctl {

enum class OutputFormat { kTable, kJson };

struct ModelOptions {
  plan::ModelSpec model;
  plan::PlanOptions plan;
  OutputFormat output = OutputFormat::kTable;
};

// --model, --preset, --world, --instances, --bucket-size, --max-world,
// --expert-parallel, --grad-reduce-in-fp32, --pad-for-high-nccl-busbw and
// --output.
FlagList ModelFlagList();

// Reads the model (a spec file or a preset), the world options and the
// output format. InvalidArgument or NotFound with one line naming the
// problem: the file, the param and field, the flag.
// Whether --model or --preset is on the command line.
bool ModelGiven(const ParsedCommandLine& parsed);

// `parsed` is the command line those flags were parsed from.
absl::StatusOr<ModelOptions> ReadModelOptions(const ParsedCommandLine& parsed);

// Exit status for a failed status: 2 for bad input (InvalidArgument,
// NotFound, OutOfRange), 1 otherwise; prints "zshardctl COMMAND: MESSAGE"
// as one line on stderr.
int ReportError(const char* command, const absl::Status& status);

}  // namespace zshard::ctl
