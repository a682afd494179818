// Runs the conformance suite against the host backend (HostCommunicator) on
// Gloo's TCP pairs, ranks 1..8.
#include "tests/worker/comm/conformance_suite.h"

namespace zshard::comm::testing {

INSTANTIATE_TEST_SUITE_P(Gloo, CommConformance,
                         ::testing::Combine(::testing::Values(GlooBackend()),
                                            ::testing::Values(1, 2, 3, 4, 5,
                                                              8)),
                         ConformanceName);

INSTANTIATE_TEST_SUITE_P(Gloo, CommFaults, ::testing::Values(GlooBackend()),
                         FaultsName);

}  // namespace zshard::comm::testing
