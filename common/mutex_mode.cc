// SetBinaryMutexMode: deadlock detection off unless asked for.
#include "common/mutex_mode.h"

#include <cstdlib>
#include <cstring>

#include "absl/synchronization/mutex.h"

namespace zshard {

void SetBinaryMutexMode() {
  const char* check = std::getenv("ZSHARD_MUTEX_DEADLOCK_CHECK");
  if (check != nullptr && std::strcmp(check, "1") == 0) return;
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace zshard
