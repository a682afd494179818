// Placeholder until the adam benchmark lands; replaced by its implementation.
#include <cstdio>

#include "tools/bench/bench_commands.h"

namespace zshard::bench {

int RunAdamBench(int, char**) {
  std::fprintf(stderr, "zshard-bench: 'adam' is not built yet\n");
  return 1;
}

}  // namespace zshard::bench
