// Test support: host copies of what EngineBuffers hold on their device
// (owned state arrays, whole param buffers, params), and writes of state
// arrays, so tests read and set buffers the same way on every device.
#pragma once

#include <cstdint>
#include <vector>

#include "client/worker/engine/engine_buffers.h"
#include "gtest/gtest.h"

namespace zshard::testing {

// Array `a` of window w, all of it.
inline std::vector<float> ReadArray(const engine::EngineBuffers& b,
                                    engine::StateArray a, int w) {
  std::vector<float> out(b.windows()[w].size());
  const absl::Status s =
      b.ReadState(a, w, 0, static_cast<int64_t>(out.size()), out.data());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Writes `values` over array `a` of window w.
inline void WriteArray(engine::EngineBuffers& b, engine::StateArray a, int w,
                       const std::vector<float>& values) {
  const absl::Status s =
      b.WriteState(a, w, 0, static_cast<int64_t>(values.size()), values.data());
  EXPECT_TRUE(s.ok()) << s;
}

// The bytes of param buffer `buffer`, padding included.
inline std::vector<uint8_t> ReadParamBytes(const engine::EngineBuffers& b,
                                           int buffer) {
  const device::Buffer& params = b.buffers()[buffer].params;
  std::vector<uint8_t> out(static_cast<size_t>(params.size()));
  const absl::Status s =
      b.device().CopyToHost(out.data(), params.data(), params.size());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Param p's values, or an empty vector (with a test failure) on error.
inline std::vector<float> Param(const engine::EngineBuffers& b, int p) {
  absl::StatusOr<std::vector<float>> v = b.ReadParam(p);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *std::move(v) : std::vector<float>();
}

}  // namespace zshard::testing
