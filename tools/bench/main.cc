// zshard-bench: throughput benchmarks of zshard's engines, printed as a
// table or as JSON, to compare with baselines measured in the same run.
#include <cstdio>
#include <cstring>

#include "common/mutex_mode.h"
#include "tools/bench/bench_commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

const Command kCommands[] = {
    {"adam", zshard::bench::RunAdamBench,
     "AdamW shard step: params/s and bytes/s vs streaming bandwidth"},
    {"collectives", zshard::bench::RunCollectivesBench,
     "reduce-scatter / all-gather / all-reduce bus bandwidth"},
    {"step", zshard::bench::RunStepBench,
     "ZeRO-1 step over gloo vs a torch DDP step, with elements on the wire"},
};

void Usage(FILE* out) {
  std::fprintf(out, "usage: zshard-bench COMMAND [options]\n\ncommands:\n");
  for (const Command& c : kCommands) {
    std::fprintf(out, "  %-12s %s\n", c.name, c.help);
  }
  std::fprintf(out, "\nrun 'zshard-bench COMMAND --help' for its options\n");
}

}  // namespace

int main(int argc, char** argv) {
  zshard::SetBinaryMutexMode();
  if (argc < 2) {
    Usage(stderr);
    return 2;
  }
  if (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    Usage(stdout);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) == 0) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "zshard-bench: unknown command '%s'\n", argv[1]);
  Usage(stderr);
  return 2;
}
