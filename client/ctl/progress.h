// Progress for zshardctl commands that may take more than a second: a line
// on stderr that appears only once the command has run for a second, kept
// in place on a terminal and printed once per change otherwise, so that
// stdout carries only the result.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/strings/string_view.h"
#include "common/clock.h"

namespace zshard::ctl {

struct ProgressOptions {
  // Where progress goes. Default stderr.
  std::FILE* out = stderr;
  // Rewrite one line in place (a terminal) instead of printing a line per
  // change. Default: whether `out` is a terminal.
  bool terminal = false;
  // Nothing is shown before this many milliseconds. Default 1000.
  int64_t delay_ms = 1000;
  // Measures the delay and the elapsed time shown. Default the real clock.
  Clock* clock = nullptr;
};

// ProgressOptions with `terminal` set from isatty(stderr).
ProgressOptions DefaultProgressOptions();

// Not thread-safe; one per command. Borrows options.out and options.clock.
class Progress {
 public:
  // `command` prefixes every line: "zshardctl COMMAND: ...".
  Progress(std::string command, ProgressOptions options);
  ~Progress();

  // Reports what the command is waiting for now. Shown once the delay has
  // passed: on a terminal as "\r...: WHAT (Ns)" over the previous line,
  // else as a new line when WHAT differs from the last line shown.
  void Update(absl::string_view what);
  // Ends the progress: a terminal line is erased. Idempotent.
  void Done();

 private:
  const std::string command_;
  const ProgressOptions options_;
  const int64_t start_ms_;
  std::string last_shown_;
  bool line_open_ = false;  // a terminal line is on screen
  bool done_ = false;
};

}  // namespace zshard::ctl
