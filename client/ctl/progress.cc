// Progress lines on stderr, delayed by a second.
#include "client/ctl/progress.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace zshard::ctl {

ProgressOptions DefaultProgressOptions() {
  ProgressOptions options;
  options.terminal = isatty(STDERR_FILENO) == 1;
  return options;
}

Progress::Progress(std::string command, ProgressOptions options)
    : command_(std::move(command)),
      options_([&options] {
        if (options.clock == nullptr) options.clock = RealClock::Get();
        return options;
      }()),
      start_ms_(options_.clock->NowMs()) {}

Progress::~Progress() { Done(); }

void Progress::Update(absl::string_view what) {
  if (done_) return;
  const int64_t elapsed_ms = options_.clock->NowMs() - start_ms_;
  if (elapsed_ms < options_.delay_ms) return;
  std::string line;
  if (options_.terminal) {
    // Erase the previous line and draw this one without a newline.
    line = absl::StrCat("\r\033[K", "zshardctl ", command_, ": ", what, " (",
                        elapsed_ms / 1000, "s)");
    line_open_ = true;
  } else {
    if (what == last_shown_) return;
    last_shown_ = std::string(what);
    line = absl::StrCat("zshardctl ", command_, ": ", what, "\n");
  }
  std::fputs(line.c_str(), options_.out);
  std::fflush(options_.out);
}

void Progress::Done() {
  if (done_) return;
  done_ = true;
  if (line_open_) {
    std::fputs("\r\033[K", options_.out);
    std::fflush(options_.out);
  }
}

}  // namespace zshard::ctl
