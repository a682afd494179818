// The plan index answers "who owns param X elements [a, b)?" exactly as
// the per-rank plans do (every element owned once per instance), pages
// without loss, and (disabled test, a measurement) how long one query
// takes on a llama2-70b plan at W=1024.
#include "server/views/plan_index.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <tuple>

#include "common/plan/presets.h"
#include "gtest/gtest.h"

namespace zshard::server {
namespace {

std::vector<plan::Member> Members(int world) {
  std::vector<plan::Member> m;
  for (int r = 0; r < world; ++r) m.push_back({"w" + std::to_string(r), ""});
  return m;
}

// (param, begin, end, rank) of every piece, from MakeRankPlan.
using PieceKey = std::tuple<int, int64_t, int64_t, int>;

std::vector<PieceKey> BruteForce(const plan::ModelSpec& model,
                                 const plan::Plan& p, int param, int64_t lo,
                                 int64_t hi) {
  std::vector<PieceKey> out;
  for (int r = 0; r < p.world; ++r) {
    plan::RankPlan rp = plan::MakeRankPlan(model, p, r);
    for (const plan::Shard& s : rp.shards) {
      for (const plan::Piece& piece : s.pieces) {
        if (piece.param_index != param) continue;
        int64_t b = std::max(piece.param_start, lo);
        int64_t e = std::min(piece.param_end, hi);
        if (e > b) out.emplace_back(param, b, e, r);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PlanIndexTest, AgreesWithRankPlansAndPages) {
  plan::ModelSpec model;
  model.name = "t";
  const int64_t sizes[] = {1000, 300, 5000, 7};
  for (int i = 0; i < 4; ++i) {
    plan::ParamSpec s;
    s.name = "p" + std::to_string(i);
    s.shape = {sizes[i]};
    model.params.push_back(s);
  }
  plan::PlanOptions o;
  o.world = 8;
  o.instances = 2;
  o.layout.bucket_size = 4000;
  plan::Plan p = plan::MakePlan(model, o).value();
  PlanIndex index = BuildPlanIndex(model, p, Members(8)).value();
  ASSERT_EQ(index.param_by_name.at("p2"), 2);
  for (int param = 0; param < 4; ++param) {
    for (auto [lo, hi] :
         {std::pair<int64_t, int64_t>{0, 1 << 20}, {100, 2100}, {5, 6}}) {
      PieceQuery q;
      q.param = param;
      q.begin = lo;
      q.end = hi;
      PieceAnswer a = QueryPieces(index, q);
      EXPECT_EQ(a.next, 0u);
      std::vector<PieceKey> got;
      int64_t covered = 0;
      for (const plan::OwnedRange& r : a.ranges) {
        got.emplace_back(r.param_index, r.begin, r.end, r.rank);
        covered += r.end - r.begin;
      }
      std::sort(got.begin(), got.end());
      std::vector<PieceKey> want = BruteForce(model, p, param, lo, hi);
      EXPECT_EQ(got, want) << "param " << param << " [" << lo << ", " << hi
                           << ")";
      // Every element in range is owned once per instance.
      int64_t n = std::min<int64_t>(hi, sizes[param]) -
                  std::min<int64_t>(lo, sizes[param]);
      EXPECT_EQ(covered, 2 * n);
    }
  }
  // Pages of one range each cover the same answer, in order.
  PieceQuery q;
  q.param = 2;
  PieceAnswer all = QueryPieces(index, q);
  q.limit = 1;
  std::vector<plan::OwnedRange> paged;
  for (int i = 0; i < 100; ++i) {
    PieceAnswer a = QueryPieces(index, q);
    paged.insert(paged.end(), a.ranges.begin(), a.ranges.end());
    if (a.next == 0) break;
    q.start = a.next;
  }
  ASSERT_EQ(paged.size(), all.ranges.size());
  for (size_t i = 0; i < paged.size(); ++i) {
    EXPECT_EQ(paged[i].begin, all.ranges[i].begin);
    EXPECT_EQ(paged[i].rank, all.ranges[i].rank);
  }
  // Rank and bucket filters.
  PieceQuery by_rank;
  by_rank.rank = 3;
  for (const plan::OwnedRange& r : QueryPieces(index, by_rank).ranges) {
    EXPECT_EQ(r.rank, 3);
  }
  PieceQuery by_bucket;
  by_bucket.buffer = 0;
  by_bucket.bucket = 1;
  PieceAnswer b1 = QueryPieces(index, by_bucket);
  EXPECT_FALSE(b1.ranges.empty());
  for (const plan::OwnedRange& r : b1.ranges) EXPECT_EQ(r.bucket, 1);
}

// A measurement, not a check of speed: run with
// --gtest_also_run_disabled_tests --gtest_filter='*Llama70b*'.
TEST(PlanIndexTest, DISABLED_Llama70bW1024OneParamQuery) {
  plan::ModelSpec model = plan::PresetModel("llama2-70b").value();
  plan::PlanOptions o;
  o.world = 1024;
  o.instances = 8;
  auto t0 = std::chrono::steady_clock::now();
  plan::Plan p = plan::MakePlan(model, o).value();
  auto t1 = std::chrono::steady_clock::now();
  PlanIndex index = BuildPlanIndex(model, p, Members(1024)).value();
  auto t2 = std::chrono::steady_clock::now();
  const std::string name = model.params[model.params.size() / 2].name;
  PieceQuery q;
  q.param = index.param_by_name.at(name);
  q.end = 4096;
  PieceAnswer a;
  const int kRuns = 1000;
  for (int i = 0; i < kRuns; ++i) {
    q.param = index.param_by_name.at(name);
    a = QueryPieces(index, q);
  }
  auto t3 = std::chrono::steady_clock::now();
  auto ms = [](auto d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  std::printf(
      "llama2-70b W=1024 I=8: plan %.1f ms, index %.1f ms (%zu ranges), "
      "query '%s' elements [0,4096): %.4f ms per query, %zu pieces\n",
      ms(t1 - t0), ms(t2 - t1), index.ownership.ranges.size(), name.c_str(),
      ms(t3 - t2) / kRuns, a.ranges.size());
  EXPECT_FALSE(a.ranges.empty());
}

}  // namespace
}  // namespace zshard::server
