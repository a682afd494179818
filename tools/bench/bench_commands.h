// The subcommands of zshard-bench. Each takes the arguments after its name
// and returns the process exit status (0 ok, 2 bad usage, 1 failure).
#pragma once

namespace zshard::bench {

// zshard-bench adam [--params N] [--threads T] [--device cpu|cuda]
//                   [--output table|json]
int RunAdamBench(int argc, char** argv);

// zshard-bench collectives [--ranks N] [--bytes B] [--device cpu|cuda]
//                          [--output table|json]
int RunCollectivesBench(int argc, char** argv);

// zshard-bench step [--ranks N] [--params P] [--steps S] [--baseline]
//                   [--output table|json]
int RunStepBench(int argc, char** argv);

}  // namespace zshard::bench
