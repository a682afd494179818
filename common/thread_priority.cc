// setpriority on the calling thread's id (Linux: a thread's nice value is
// its own).
#include "common/thread_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace zshard {

void LowerThisThreadPriority(int increment) {
  if (increment <= 0) return;
  const id_t tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (now == -1 && errno != 0) return;
  setpriority(PRIO_PROCESS, tid, now + increment);
}

}  // namespace zshard
