// Subprocess: fork + execve with redirected output, and deadline-bound
// reaping.

#include "tests/testing/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace zshard::testing {
namespace {

// Redirects `fd` to `path` in the child; returns false on failure.
bool Redirect(const std::string& path, int fd) {
  if (path.empty()) return true;
  int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (file < 0) return false;
  return dup2(file, fd) >= 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(
    const Options& options) {
  if (options.argv.empty()) {
    return absl::InvalidArgumentError("subprocess argv is empty");
  }
  // Build argv and envp before fork: the child may only call
  // async-signal-safe functions.
  std::vector<char*> argv;
  for (const std::string& arg : options.argv) {
    argv.push_back(const_cast<char*>(arg.c_str()));
  }
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  for (const std::string& e : options.env) env_storage.push_back(e);
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) {
    return absl::InternalError(
        absl::StrCat("fork failed for '", options.argv[0], "'"));
  }
  if (pid == 0) {
    // Own process group, so a test's SIGINT does not reach children first.
    setpgid(0, 0);
    if (!Redirect(options.stdout_path, STDOUT_FILENO) ||
        !Redirect(options.stderr_path, STDERR_FILENO)) {
      _exit(126);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return std::unique_ptr<Subprocess>(new Subprocess(pid));
}

Subprocess::~Subprocess() { Kill(); }

void Subprocess::Signal(int signal) {
  if (!exit_status_.has_value()) kill(pid_, signal);
}

bool Subprocess::TryReap() {
  if (exit_status_.has_value()) return true;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return false;
  exit_status_ = WIFEXITED(status)     ? WEXITSTATUS(status)
                 : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                       : -1;
  return true;
}

std::optional<int> Subprocess::Wait(int64_t timeout_ms) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!TryReap()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    // waitpid has no timeout; poll the child's state at a short interval.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return exit_status_;
}

bool Subprocess::Running() { return !TryReap(); }

void Subprocess::Kill() {
  if (exit_status_.has_value()) return;
  kill(pid_, SIGKILL);
  int status = 0;
  if (waitpid(pid_, &status, 0) == pid_) exit_status_ = 128 + SIGKILL;
}

}  // namespace zshard::testing
