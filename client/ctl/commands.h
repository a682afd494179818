// zshardctl's commands. Each takes the arguments after its name (argv[0] is
// the command name) and the global flags, writes its whole output to stdout
// only on success, and returns the process exit status: 0 ok, 2 bad input
// (one line on stderr), 1 other failure.
#pragma once

#include <string>

namespace zshard::ctl {

// Flags given before the command name.
struct GlobalFlags {
  // --coordinator HOST:PORT; empty when not given (offline use).
  std::string coordinator;
  // --tls-ca F, --tls-cert F, --tls-key F: TLS to the coordinator (the CA
  // of its certificate; a client certificate for mutual TLS). Empty: none.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // --token-file F: the admin token for AdminService calls (drain); main
  // falls back to $ZSHARD_ADMIN_TOKEN_FILE. Empty: no token sent.
  std::string token_file;
};

using CommandFn = int (*)(const GlobalFlags& global, int argc, char** argv);

// zshardctl plan --model FILE | --preset NAME --world W [--instances I]
//   [--bucket-size N] [--max-world M] [--expert-parallel E]
//   [--grad-reduce-in-fp32] [--pad-for-high-nccl-busbw] [--rank R]
//   [--output table|json]
int RunPlanCommand(const GlobalFlags& global, int argc, char** argv);

// zshardctl ledger with the model and world options of plan (no --rank).
int RunLedgerCommand(const GlobalFlags& global, int argc, char** argv);

// zshardctl checkpoint export DIR --format torch OUT.pt --job JOB.json:
// the checkpoint directory DIR as a torch.save file. argv[0] is "export".
// On success one line on stdout: "exported step S (Adam step A): N params
// in G param group(s) to OUT.pt". Exit 2 for bad usage, 1 for an input
// that cannot be used (the job, the checkpoint), with one line on stderr.
int RunCheckpointExportCommand(const GlobalFlags& global, int argc,
                               char** argv);

// zshardctl checkpoint import IN.pt --format torch --job JOB.json OUT_DIR:
// a new checkpoint directory OUT_DIR of the job's model from a torch.save
// file, for zshard-coordinator --restore OUT_DIR. argv[0] is "import".
// On success one line on stdout naming OUT_DIR's absolute path; exit
// statuses as export's.
int RunCheckpointImportCommand(const GlobalFlags& global, int argc,
                               char** argv);

}  // namespace zshard::ctl
