// zshardctl checkpoint export / import --format torch: offline conversion
// between a checkpoint directory and a torch.save file
// (common/checkpoint/torch_convert.h), the model and the AdamW settings
// taken from the job's JSON. One line on stderr on failure: exit 2 for bad
// usage, 1 for an input file that cannot be used.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/ctl/commands.h"
#include "client/ctl/shared_flags.h"
#include "common/checkpoint/torch_convert.h"
#include "common/clock.h"
#include "common/file_io.h"
#include "common/flags.h"
#include "common/job/job_spec.h"

ABSL_FLAG(std::string, format, "",
          "the other side's file format; required: torch");

namespace zshard::ctl {
namespace {

constexpr char kExportUsage[] =
    "usage: zshardctl checkpoint export DIR --format torch OUT.pt "
    "--job JOB.json\n"
    "  writes the checkpoint DIR (CHECKPOINT_ROOT/step-NNNNNNNN) as a "
    "torch.save file:\n"
    "  {\"model\": state_dict, \"optimizer\": AdamW state_dict}\n";
constexpr char kImportUsage[] =
    "usage: zshardctl checkpoint import IN.pt --format torch --job JOB.json "
    "OUT_DIR\n"
    "  makes OUT_DIR a checkpoint of the job's model from a torch.save file "
    "(a state_dict,\n"
    "  or {\"model\": ..., \"optimizer\": ...}) for zshard-coordinator "
    "--restore OUT_DIR\n";

// The command's arguments: its flags' values and the positional ones.
struct Args {
  ParsedCommandLine parsed;
  std::vector<std::string> positional;
};

FlagList TorchFlags() { return {FlagOf(FLAGS_format), FlagOf(FLAGS_job)}; }

// Splits argv[1..argc) into flags (with the value of --format and --job
// when given apart) and positional arguments, and parses the flags.
absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  std::vector<std::string> flags;
  Args out;
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (only_positional || arg.size() < 2 || arg[0] != '-') {
      out.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    flags.push_back(arg);
    if ((arg == "--format" || arg == "--job") && i + 1 < argc) {
      flags.push_back(argv[++i]);
    }
  }
  ParseOptions options;
  options.refuse_repeats = true;
  absl::StatusOr<ParsedCommandLine> parsed =
      ParseCommandLine(flags, TorchFlags(), options);
  if (!parsed.ok()) return parsed.status();
  out.parsed = *std::move(parsed);
  return out;
}

int Usage(const std::string& command, absl::string_view message) {
  return UsageError(absl::StrCat("zshardctl ", command), message);
}

// An input file that cannot be used: one line, exit 1.
int InputError(const std::string& command, const absl::Status& status) {
  std::string line(status.message());
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "zshardctl %s: %s\n", command.c_str(), line.c_str());
  return 1;
}

// The checks both subcommands make of their command line: --help, two
// positional arguments, --format torch, --job given. Returns the exit
// status to stop with, or -1 to go on.
int CheckArgs(const std::string& command, const char* usage,
              const absl::StatusOr<Args>& args, const char* positional) {
  if (!args.ok()) return Usage(command, args.status().message());
  if (args->parsed.help()) {
    std::fputs(usage, stdout);
    std::fprintf(stdout, "\nflags:\n%s", FlagsHelp(TorchFlags()).c_str());
    return 0;
  }
  if (args->positional.size() != 2) {
    return Usage(command, absl::StrCat("needs ", positional, " (got ",
                                       args->positional.size(), " arguments)"));
  }
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format.empty()) return Usage(command, "--format torch is required");
  if (format != "torch") {
    return Usage(command, absl::StrCat("--format must be torch (got '",
                                       Shown(format), "')"));
  }
  if (absl::GetFlag(FLAGS_job).empty()) {
    return Usage(command,
                 absl::StrCat("--job JOB.json is required: ",
                              command == "checkpoint export"
                                  ? "the checkpoint's manifest records each "
                                    "param's element count but not its "
                                    "shape, nor the optimizer's settings"
                                  : "it gives the model the checkpoint is "
                                    "for"));
  }
  return -1;
}

absl::StatusOr<job::JobSpec> ReadJob() {
  const std::string path = absl::GetFlag(FLAGS_job);
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<job::JobSpec> spec = job::ParseJobSpec(*text);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job '", path, "': ", spec.status().message()));
  }
  if (spec->parallel.model_parallel()) {
    // Each slot is its own param space; one torch file per slot is not
    // written yet.
    return absl::InvalidArgumentError(absl::StrCat(
        "job '", path, "' is model-parallel (tensor ", spec->parallel.tensor,
        ", pipeline ", spec->parallel.pipeline, ", context ",
        spec->parallel.context,
        "): torch export and import of model-parallel checkpoints are not "
        "supported"));
  }
  return spec;
}

}  // namespace

int RunCheckpointExportCommand(const GlobalFlags&, int argc, char** argv) {
  const std::string command = "checkpoint export";
  const absl::StatusOr<Args> args = ParseArgs(argc, argv);
  const int stop = CheckArgs(command, kExportUsage, args, "DIR and OUT.pt");
  if (stop >= 0) return stop;
  absl::StatusOr<job::JobSpec> spec = ReadJob();
  if (!spec.ok()) return InputError(command, spec.status());
  checkpoint::ExportOptions options;
  options.adamw.lr = spec->optimizer.lr;
  options.adamw.beta1 = spec->optimizer.beta1;
  options.adamw.beta2 = spec->optimizer.beta2;
  options.adamw.eps = spec->optimizer.eps;
  options.adamw.weight_decay = spec->optimizer.weight_decay;
  const std::string& out = args->positional[1];
  absl::StatusOr<checkpoint::ExportSummary> done =
      checkpoint::ExportTorchCheckpoint(args->positional[0], spec->model, out,
                                        options);
  if (!done.ok()) return InputError(command, done.status());
  std::printf(
      "exported step %lld (Adam step %lld): %d params in %d param "
      "group(s) to %s\n",
      static_cast<long long>(done->step),
      static_cast<long long>(done->adam_step), done->params, done->param_groups,
      out.c_str());
  return 0;
}

int RunCheckpointImportCommand(const GlobalFlags&, int argc, char** argv) {
  const std::string command = "checkpoint import";
  const absl::StatusOr<Args> args = ParseArgs(argc, argv);
  const int stop = CheckArgs(command, kImportUsage, args, "IN.pt and OUT_DIR");
  if (stop >= 0) return stop;
  absl::StatusOr<job::JobSpec> spec = ReadJob();
  if (!spec.ok()) return InputError(command, spec.status());
  checkpoint::ImportOptions options;
  options.job = spec->name;
  options.expert_parallel = spec->layout.expert_parallel;
  options.committed_ms = WallTimeMs();
  absl::StatusOr<checkpoint::ImportSummary> done =
      checkpoint::ImportTorchCheckpoint(args->positional[0], spec->model,
                                        args->positional[1], options);
  if (!done.ok()) return InputError(command, done.status());
  const std::string state =
      done->with_optimizer ? absl::StrCat("with their AdamW state (Adam step ",
                                          done->adam_step, ")")
                           : "without optimizer state (Adam step 0)";
  std::printf(
      "imported %d params %s into %s; start the job with "
      "zshard-coordinator --restore %s\n",
      done->params, state.c_str(), done->dir.c_str(), done->dir.c_str());
  return 0;
}

}  // namespace zshard::ctl
