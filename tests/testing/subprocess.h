// A child process for integration tests: started with its stdout and stderr
// redirected to files, signalled (SIGKILL, SIGTERM) and reaped with a
// deadline. Never leaks: the destructor kills and reaps a running child.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zshard::testing {

// One child process. Not thread-safe; owned by one test.
class Subprocess {
 public:
  struct Options {
    // argv[0] is the executable's path; required.
    std::vector<std::string> argv;
    // Files that receive the child's stdout and stderr (truncated). Empty:
    // inherit the test's.
    std::string stdout_path;
    std::string stderr_path;
    // Extra "KEY=VALUE" entries added to the inherited environment.
    std::vector<std::string> env;
  };

  // Starts the child. InvalidArgument for an empty argv, Internal when fork
  // or exec fails (an exec failure shows as exit status 127).
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(
      const Options& options);

  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }

  // Sends `signal` to the child if it has not been reaped yet.
  void Signal(int signal);

  // Waits up to `timeout_ms` for the child to exit. Returns its exit status
  // (128 + signal when killed by a signal), or nullopt while still running.
  std::optional<int> Wait(int64_t timeout_ms);

  // True until the child has been reaped.
  bool Running();

  // SIGKILL and reap.
  void Kill();

 private:
  explicit Subprocess(pid_t pid) : pid_(pid) {}
  // Non-blocking reap; sets exit_status_.
  bool TryReap();

  pid_t pid_;
  std::optional<int> exit_status_;
};

}  // namespace zshard::testing
