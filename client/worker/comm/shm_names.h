// Names of the shm transport's segments in /dev/shm, and the removal of
// those a killed process left behind. A name carries its creator's pid
// namespace and pid, so that a later process of the same namespace can
// tell that the creator is gone and unlink it.
#pragma once

#include <cstdint>
#include <string>

namespace zshard::comm {

// "/zshard-<group hash>-<pid namespace>-<pid>-<nonce>" for this process.
std::string ShmSegmentName(const std::string& group);

// Unlinks every segment in /dev/shm named by ShmSegmentName in this pid
// namespace whose creating process has exited. Returns how many it
// removed. Names of live processes, of other namespaces and of other
// programs are left alone.
int RemoveStaleShmSegments();

// The inode of this process's pid namespace, as names carry it (0 when it
// cannot be read: then nothing is ever removed).
uint64_t ShmPidNamespace();

}  // namespace zshard::comm
