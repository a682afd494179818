// The model and world options shared by zshardctl's offline plan and ledger
// commands: their Abseil flags, read into a model spec and plan options, or
// into a model-parallel model (one spec per slot) and its plan options.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/flags.h"
#include "common/plan/model_spec.h"
#include "common/plan/parallel_plan.h"
#include "common/plan/plan.h"

namespace zshard::ctl {

enum class OutputFormat { kTable, kJson };

struct ModelOptions {
  // A job of one slot (T = P = C = 1): its model and plan options.
  plan::ModelSpec model;
  plan::PlanOptions plan;
  OutputFormat output = OutputFormat::kTable;
  // True when T x P x C > 1 (--tensor, --pipeline, --context, or a job
  // file's parallel): the model is `parallel` and the options
  // `parallel_plan`; `model` and `plan` are then left empty.
  bool model_parallel = false;
  std::string name;  // the preset's, the job's or the model file's name
  plan::ParallelModel parallel;
  plan::ParallelPlanOptions parallel_plan;
};

// --model, --preset, --job, --world, --instances, --tensor, --pipeline,
// --context, --bucket-size, --max-world, --expert-parallel,
// --grad-reduce-in-fp32, --pad-for-high-nccl-busbw and --output.
FlagList ModelFlagList();

// Whether --model, --preset or --job is on the command line.
bool ModelGiven(const ParsedCommandLine& parsed);

// Reads the model (a spec file, a preset, or a job file's model), the world
// options and the output format from the flags of ModelFlagList; `parsed`
// is the command line those flags were parsed from. With --job FILE the
// world is --world or the job's world.max, and the parallel sizes, the
// instances (under the job's resize policy) and the layout are the job's,
// each layout flag given overriding the job's value. InvalidArgument or
// NotFound with one line naming the problem: the file, the param and
// field, the flag, the slot.
absl::StatusOr<ModelOptions> ReadModelOptions(const ParsedCommandLine& parsed);

// Exit status for a failed status: 2 for bad input (InvalidArgument,
// NotFound, OutOfRange), 1 otherwise; prints "zshardctl COMMAND: MESSAGE"
// as one line on stderr.
int ReportError(const char* command, const absl::Status& status);

}  // namespace zshard::ctl
