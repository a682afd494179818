// The communicator conformance suite: one set of parameterized tests that
// every backend instantiates (gloo_conformance_test.cc,
// nccl_conformance_test.cc). Results are checked exactly.
#pragma once

#include <memory>
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "tests/worker/comm/comm_test_util.h"

namespace zshard::comm::testing {

// (backend, ranks): collectives, send/recv and barrier.
class CommConformance
    : public ::testing::TestWithParam<std::tuple<Backend, int>> {
 protected:
  void SetUp() override;
  const Backend& backend() const { return std::get<0>(GetParam()); }
  int ranks() const { return std::get<1>(GetParam()); }
  // Options of `rank` in this test's group.
  CommOptions Options(int rank) const;

  std::unique_ptr<BufferSpace> space_;
  std::unique_ptr<KvStore> store_;
};

// (backend): lost peers, missing ranks, aborts and timeouts.
class CommFaults : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override;
  CommOptions Options(int rank, int size, int64_t timeout_ms) const;

  std::unique_ptr<BufferSpace> space_;
  std::unique_ptr<KvStore> store_;
};

// Test-name generators for the instantiations.
std::string ConformanceName(
    const ::testing::TestParamInfo<std::tuple<Backend, int>>& info);
std::string FaultsName(const ::testing::TestParamInfo<Backend>& info);

}  // namespace zshard::comm::testing
