// Test support: a known value of master, m and v for every param element
// (a function of param and element only, so any rank of any world that
// owns an element holds the same value), written into and checked against
// EngineBuffers; and the buffers of a small model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/engine_buffers.h"
#include "client/worker/engine/synthetic_workload.h"
#include "common/plan/plan.h"
#include "gtest/gtest.h"
#include "tests/worker/engine/buffer_readback.h"

namespace zshard::testing {

// Which of the three state arrays.
enum class StateKind { kMaster = 0, kExpAvg = 1, kExpAvgSq = 2 };

// The pattern's value of element j of param p. Exact in fp32 arithmetic.
inline float PatternValue(int p, int64_t j, StateKind kind) {
  const float base = static_cast<float>(p + 1) + static_cast<float>(j) / 8192.f;
  switch (kind) {
    case StateKind::kMaster:
      return base;
    case StateKind::kExpAvg:
      return -base / 4.f;
    case StateKind::kExpAvgSq:
      return base * base;
  }
  return 0;
}

// Sets every owned element's master, m and v to the pattern.
inline void FillPattern(engine::EngineBuffers& b) {
  using engine::StateArray;
  for (size_t w = 0; w < b.windows().size(); ++w) {
    const engine::WindowState& win = b.windows()[w];
    const int wi = static_cast<int>(w);
    std::vector<float> master = ReadArray(b, StateArray::kMaster, wi);
    std::vector<float> exp_avg = ReadArray(b, StateArray::kExpAvg, wi);
    std::vector<float> exp_avg_sq = ReadArray(b, StateArray::kExpAvgSq, wi);
    for (const plan::Piece& piece : win.pieces) {
      for (int64_t i = piece.start; i < piece.end; ++i) {
        const int64_t j = piece.param_start + (i - piece.start);
        const int64_t at = i - win.start;
        master[at] = PatternValue(piece.param_index, j, StateKind::kMaster);
        exp_avg[at] = PatternValue(piece.param_index, j, StateKind::kExpAvg);
        exp_avg_sq[at] =
            PatternValue(piece.param_index, j, StateKind::kExpAvgSq);
      }
    }
    WriteArray(b, StateArray::kMaster, wi, master);
    WriteArray(b, StateArray::kExpAvg, wi, exp_avg);
    WriteArray(b, StateArray::kExpAvgSq, wi, exp_avg_sq);
  }
}

// Counts the owned elements whose master, m or v differ from the pattern
// (reporting the first few through gtest).
inline int64_t PatternMismatches(const engine::EngineBuffers& b,
                                 const std::string& who) {
  using engine::StateArray;
  int64_t bad = 0;
  for (size_t w = 0; w < b.windows().size(); ++w) {
    const engine::WindowState& win = b.windows()[w];
    const int wi = static_cast<int>(w);
    const std::vector<float> master = ReadArray(b, StateArray::kMaster, wi);
    const std::vector<float> exp_avg = ReadArray(b, StateArray::kExpAvg, wi);
    const std::vector<float> exp_avg_sq =
        ReadArray(b, StateArray::kExpAvgSq, wi);
    for (const plan::Piece& piece : win.pieces) {
      for (int64_t i = piece.start; i < piece.end; ++i) {
        const int64_t j = piece.param_start + (i - piece.start);
        const int64_t at = i - win.start;
        const int p = piece.param_index;
        if (master[at] != PatternValue(p, j, StateKind::kMaster) ||
            exp_avg[at] != PatternValue(p, j, StateKind::kExpAvg) ||
            exp_avg_sq[at] != PatternValue(p, j, StateKind::kExpAvgSq)) {
          if (++bad <= 3) {
            ADD_FAILURE() << who << ": param " << p << " element " << j
                          << " master " << master[at] << " m " << exp_avg[at]
                          << " v " << exp_avg_sq[at];
          }
        }
      }
    }
  }
  return bad;
}

// Five bf16 params; with bucket_size 1000 several buckets, each padded.
inline plan::ModelSpec PatternModel(plan::DType dtype = plan::DType::kBf16) {
  plan::ModelSpec spec;
  spec.name = "pattern";
  const int64_t sizes[] = {700, 130, 1900, 7, 600};
  for (int i = 0; i < 5; ++i) {
    plan::ParamSpec p;
    p.name = absl::StrCat("p", i);
    p.shape = {sizes[i]};
    p.dtype = dtype;
    spec.params.push_back(p);
  }
  return spec;
}

inline plan::Plan PatternPlan(const plan::ModelSpec& model, int world,
                              int instances) {
  plan::PlanOptions po;
  po.world = world;
  po.instances = instances;
  po.layout.bucket_size = 1000;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

// Fresh buffers of `rank` (initial params, m = v = 0).
inline std::unique_ptr<engine::EngineBuffers> FreshBuffers(
    const plan::ModelSpec& model, const plan::Plan& plan, int rank) {
  engine::SyntheticWorkload::Options o;
  o.world = plan.world;
  o.rank = rank;
  engine::SyntheticWorkload workload(model, o);
  absl::StatusOr<std::unique_ptr<engine::EngineBuffers>> b =
      engine::EngineBuffers::Create(model, plan, rank, workload);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : nullptr;
}

}  // namespace zshard::testing
