// Runs the conformance suite and the fault suite against the host backend
// (HostCommunicator) on the shared-memory transport, ranks 1..8.
#include "tests/worker/comm/conformance_suite.h"

namespace zshard::comm::testing {

INSTANTIATE_TEST_SUITE_P(Shm, CommConformance,
                         ::testing::Combine(::testing::Values(ShmBackend()),
                                            ::testing::Values(1, 2, 3, 4, 5,
                                                              8)),
                         ConformanceName);

INSTANTIATE_TEST_SUITE_P(Shm, CommFaults, ::testing::Values(ShmBackend()),
                         FaultsName);

}  // namespace zshard::comm::testing
