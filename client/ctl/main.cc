// zshardctl: inspect zshard plans and memory ledgers offline (from a model
// spec or preset) and, with --coordinator, a running job.
//   zshardctl [--coordinator HOST:PORT] [--tls-ca F] [--tls-cert F --tls-key F]
//             [--token-file F] COMMAND [options]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "client/ctl/commands.h"
#include "client/ctl/online_commands.h"
#include "client/ctl/status_command.h"

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
     "committed checkpoints: step, time, files, bytes, directory (list)"},
    {"reshards", zshard::ctl::RunReshardsCommand,
     "re-shard history: moves, bytes vs lower bound, duration, outcome"},
};

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: zshardctl [--coordinator HOST:PORT] [--tls-ca F] "
               "[--tls-cert F --tls-key F] [--token-file F] COMMAND "
               "[options]\n\ncommands:\n");
  for (const Command& c : kCommands) {
    std::fprintf(out, "  %-10s %s\n", c.name, c.help);
  }
  std::fprintf(out, "\nrun 'zshardctl COMMAND --help' for its options\n");
}

// The GlobalFlags field of a --tls-* or --token-file flag ("--tls-ca" or
// "--tls-ca=F"), or null.
std::string* ValueFlag(GlobalFlags* global, const char* arg) {
  const std::pair<const char*, std::string*> flags[] = {
      {"--tls-ca", &global->tls_ca},
      {"--tls-cert", &global->tls_cert},
      {"--tls-key", &global->tls_key},
      {"--token-file", &global->token_file}};
  for (const auto& [name, field] : flags) {
    const size_t n = std::strlen(name);
    if (std::strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=')) {
      return field;
    }
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  GlobalFlags global;
  int i = 1;
  for (; i < argc && std::strncmp(argv[i], "--", 2) == 0; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0) {
      Usage(stdout);
      return 0;
    }
    if (std::strcmp(arg, "--coordinator") == 0) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "zshardctl: flag --coordinator needs a value\n");
        return 2;
      }
      global.coordinator = argv[++i];
    } else if (std::strncmp(arg, "--coordinator=", 14) == 0) {
      global.coordinator = arg + 14;
    } else if (std::string* value = ValueFlag(&global, arg)) {
      const char* eq = std::strchr(arg, '=');
      if (eq == nullptr && i + 1 >= argc) {
        std::fprintf(stderr, "zshardctl: flag %s needs a value\n", arg);
        return 2;
      }
      *value = eq != nullptr ? eq + 1 : argv[++i];
    } else {
      std::fprintf(stderr, "zshardctl: unknown global flag '%.80s'\n", arg);
      return 2;
    }
  }
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
