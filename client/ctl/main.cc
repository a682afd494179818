// zshardctl: inspect zshard plans and memory ledgers offline (from a model
// spec or preset) and, with --coordinator, a running job.
//   zshardctl [--coordinator HOST:PORT[,HOST:PORT...]] [--tls-ca F]
//             [--tls-cert F --tls-key F]
//             [--token-file F] COMMAND [options]
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/flags/flag.h"
#include "client/ctl/commands.h"
#include "client/ctl/online_commands.h"
#include "client/ctl/shared_flags.h"
#include "client/ctl/status_command.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/mutex_mode.h"

namespace {

using zshard::ctl::CommandFn;
using zshard::ctl::GlobalFlags;

struct Command {
  const char* name;
  CommandFn run;
  const char* help;
};

// One line per command.
const Command kCommands[] = {
    {"plan", zshard::ctl::RunPlanAnyCommand,
     "buffers, buckets and per-rank shards of a model's layout"},
    {"ledger", zshard::ctl::RunLedgerAnyCommand,
     "memory per rank for DDP and ZeRO-1/2/3, exact and by formula"},
    {"status", zshard::ctl::RunStatusCommand,
     "members, ranks and epoch of a running job"},
    {"events", zshard::ctl::RunEventsCommand,
     "membership changes and transitions with their reasons (--follow)"},
    {"top", zshard::ctl::RunTopCommand,
     "a live per-rank view: step, phases, bytes/s, memory, loss (--once)"},
    {"explain", zshard::ctl::RunExplainCommand,
     "why the world, the ranks and the spares are what they are"},
    {"drain", zshard::ctl::RunDrainCommand,
     "hand a worker's state over and let it exit (admin; --wait)"},
    {"checkpoint", zshard::ctl::RunCheckpointCommand,
     "checkpoints: list (committed); export, import (torch files)"},
    {"reshards", zshard::ctl::RunReshardsCommand,
     "re-shard history: moves, bytes vs lower bound, duration, outcome"},
};

void Usage(FILE* out) {
  std::fprintf(
      out,
      "usage: zshardctl [--coordinator HOST:PORT[,HOST:PORT...]] [--tls-ca F] "
      "[--tls-cert F --tls-key F] [--token-file F] COMMAND "
      "[options]\n\ncommands:\n");
  for (const Command& c : kCommands) {
    std::fprintf(out, "  %-10s %s\n", c.name, c.help);
  }
  std::fprintf(out, "\nrun 'zshardctl COMMAND --help' for its options\n");
}

}  // namespace

int main(int argc, char** argv) {
  zshard::SetBinaryMutexMode();
  // A command's output and its one-line errors are all it prints: the
  // libraries' info logs (e.g. following a standby to the leader) stay
  // quiet.
  zshard::SetLogLevel(zshard::LogLevel::kWarning);
  const zshard::FlagList global_flags = zshard::ctl::GlobalFlagList();
  zshard::ParseOptions options;
  options.stop_at_positional = true;
  auto parsed =
      zshard::ParseCommandLine(zshard::Args(argc, argv), global_flags, options);
  if (!parsed.ok()) {
    return zshard::UsageError("zshardctl", parsed.status().message());
  }
  if (parsed->help()) {
    Usage(stdout);
    std::fprintf(stdout, "\nglobal flags:\n%s",
                 zshard::FlagsHelp(global_flags).c_str());
    return 0;
  }
  GlobalFlags global;
  global.coordinator = absl::GetFlag(FLAGS_coordinator);
  global.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  global.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  global.tls_key = absl::GetFlag(FLAGS_tls_key);
  global.token_file = absl::GetFlag(FLAGS_token_file);
  const int i = 1 + static_cast<int>(parsed->next());
  if (global.token_file.empty()) {
    const char* env = std::getenv("ZSHARD_ADMIN_TOKEN_FILE");
    if (env != nullptr) global.token_file = env;
  }
  if (i >= argc) {
    std::fprintf(stderr, "zshardctl: missing command (try zshardctl --help)\n");
    return 2;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[i], c.name) == 0) {
      return c.run(global, argc - i, argv + i);
    }
  }
  std::fprintf(stderr, "zshardctl: unknown command '%.80s'\n", argv[i]);
  return 2;
}
