// Placeholder until the collectives benchmark lands; replaced by its implementation.
#include <cstdio>

#include "tools/bench/bench_commands.h"

namespace zshard::bench {

int RunCollectivesBench(int, char**) {
  std::fprintf(stderr, "zshard-bench: 'collectives' is not built yet\n");
  return 1;
}

}  // namespace zshard::bench
