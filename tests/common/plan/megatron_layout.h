// A layout oracle for the planner's tests: the buffer, bucket and shard
// ranges of docs/design.md sections 3 and 4 computed the way Megatron-LM
// computes them (_ParamAndGradBuffer.__init__ and DistributedOptimizer.
// _build_model_gbuf_range), written independently of common/plan/plan.cc,
// and a comparison of a plan against it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "common/plan/plan.h"
#include "gtest/gtest.h"

namespace zshard::plan::testing {

struct MegatronBuffer {
  BufferKey key;
  int dp = 1;  // the ranks the buffer is sharded over
  std::vector<std::pair<int64_t, int64_t>> buckets;  // [start, end)
  std::vector<int64_t> unpadded;                     // per bucket
  std::vector<int> params;                           // placement order
  std::vector<int64_t> starts;                       // per placed param
  std::vector<int> bucket_of;                        // per placed param
  int64_t numel = 0;
};

inline int64_t MegatronPad(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// _ParamAndGradBuffer.__init__ for the params `indices` (registration
// order) with use_distributed_optimizer = True.
inline MegatronBuffer MegatronParamBuffer(const ModelSpec& m,
                                          const std::vector<int>& indices,
                                          BufferKey key, int dp,
                                          int64_t bucket_size, bool busbw) {
  MegatronBuffer b;
  b.key = key;
  b.dp = dp;
  int64_t divisor = std::lcm(int64_t{dp}, int64_t{128});
  if (busbw) divisor = std::lcm(divisor, int64_t{1} << 16);
  int64_t param_start = 0, bucket_start = 0;
  int open = 0;
  auto update_bucket = [&](int64_t param_end) {
    const int64_t end = MegatronPad(param_end, divisor);
    b.buckets.emplace_back(bucket_start, end);
    b.unpadded.push_back(param_end - bucket_start);
    bucket_start = end;
    open = 0;
    return end;
  };
  for (auto it = indices.rbegin(); it != indices.rend(); ++it) {
    const ParamSpec& p = m.params[*it];
    param_start = MegatronPad(param_start, 64);
    if (p.shared_embedding && open > 0) {
      param_start = update_bucket(param_start);
    }
    const int64_t param_end = param_start + p.numel();
    b.params.push_back(*it);
    b.starts.push_back(param_start);
    b.bucket_of.push_back(static_cast<int>(b.buckets.size()));
    ++open;
    if (param_end - bucket_start >= bucket_size || p.shared_embedding) {
      param_start = update_bucket(param_end);
    } else {
      param_start = param_end;
    }
  }
  if (open > 0) update_bucket(param_start);
  b.numel = bucket_start;
  return b;
}

// Every buffer of `m` for a shard group of `d` ranks (expert buffers d / e).
inline std::vector<MegatronBuffer> MegatronBuffers(const ModelSpec& m, int d,
                                                   const LayoutOptions& l,
                                                   int64_t bucket_size) {
  std::vector<BufferKey> keys;
  std::vector<std::vector<int>> members;
  for (int i = 0; i < static_cast<int>(m.params.size()); ++i) {
    const ParamSpec& p = m.params[i];
    BufferKey key{p.dtype, l.grad_reduce_in_fp32 ? DType::kFp32 : p.dtype,
                  p.expert};
    auto it = std::find(keys.begin(), keys.end(), key);
    if (it == keys.end()) {
      keys.push_back(key);
      members.emplace_back();
      it = keys.end() - 1;
    }
    members[it - keys.begin()].push_back(i);
  }
  std::vector<MegatronBuffer> out;
  for (size_t k = 0; k < keys.size(); ++k) {
    const int dp = keys[k].expert ? d / l.expert_parallel : d;
    out.push_back(MegatronParamBuffer(m, members[k], keys[k], dp, bucket_size,
                                      l.pad_for_high_nccl_busbw));
  }
  return out;
}

// Expects `plan` (made from `m`) to equal the oracle: every buffer's
// buckets and param places, and each shard rank's windows and pieces
// (_build_model_gbuf_range: rank r owns [r * s, (r + 1) * s) of a bucket
// of size s * dp, intersected with each param's range).
inline void ExpectMegatronLayout(const ModelSpec& m, const Plan& plan,
                                 const std::string& what) {
  SCOPED_TRACE(what);
  const int d = plan.shard_group_size;
  std::vector<MegatronBuffer> want =
      MegatronBuffers(m, d, plan.layout, plan.bucket_size);
  ASSERT_EQ(plan.buffers.size(), want.size());
  std::vector<RankPlan> ranks;
  for (int r = 0; r < d; ++r) ranks.push_back(MakeRankPlan(m, plan, r));
  size_t shard_base = 0;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const Buffer& got = plan.buffers[i];
    auto w = std::find_if(want.begin(), want.end(),
                          [&](const auto& b) { return b.key == got.key; });
    ASSERT_NE(w, want.end()) << "buffer " << i;
    ASSERT_EQ(got.shard_group_size, w->dp);
    ASSERT_EQ(got.numel, w->numel);
    ASSERT_EQ(got.buckets.size(), w->buckets.size());
    for (size_t c = 0; c < got.buckets.size(); ++c) {
      EXPECT_EQ(got.buckets[c].start, w->buckets[c].first) << "bucket " << c;
      EXPECT_EQ(got.buckets[c].end, w->buckets[c].second) << "bucket " << c;
      EXPECT_EQ(got.buckets[c].numel_unpadded, w->unpadded[c]);
    }
    ASSERT_EQ(got.params.size(), w->params.size());
    for (size_t j = 0; j < got.params.size(); ++j) {
      EXPECT_EQ(got.params[j].param_index, w->params[j]);
      EXPECT_EQ(got.params[j].start, w->starts[j]);
      EXPECT_EQ(got.params[j].bucket, w->bucket_of[j]);
    }
    const int e = got.key.expert ? d / w->dp : 1;
    for (int r = 0; r < d; ++r) {
      const int k = r / e;  // expert-parallel rank varies fastest
      for (size_t c = 0; c < w->buckets.size(); ++c) {
        const auto [bs, be] = w->buckets[c];
        const int64_t s = (be - bs) / w->dp;
        const Shard& shard = ranks[r].shards[shard_base + c];
        ASSERT_EQ(shard.start, bs + k * s) << "rank " << r;
        ASSERT_EQ(shard.end, bs + (k + 1) * s) << "rank " << r;
        std::vector<Piece> pieces;
        for (size_t j = 0; j < w->params.size(); ++j) {
          if (w->bucket_of[j] != static_cast<int>(c)) continue;
          const int64_t ps = w->starts[j];
          const int64_t pe = ps + m.params[w->params[j]].numel();
          const int64_t lo = std::max<int64_t>(0, ps - shard.start);
          const int64_t hi = std::min<int64_t>(s, pe - shard.start);
          if (hi <= lo) continue;
          pieces.push_back({w->params[j], shard.start + lo, shard.start + hi,
                            shard.start + lo - ps, shard.start + hi - ps});
        }
        ASSERT_EQ(shard.pieces.size(), pieces.size()) << "rank " << r;
        for (size_t q = 0; q < pieces.size(); ++q) {
          EXPECT_EQ(shard.pieces[q].param_index, pieces[q].param_index);
          EXPECT_EQ(shard.pieces[q].param_start, pieces[q].param_start);
          EXPECT_EQ(shard.pieces[q].param_end, pieces[q].param_end);
          EXPECT_EQ(shard.pieces[q].start, pieces[q].start);
        }
      }
    }
    shard_base += got.buckets.size();
  }
}

}  // namespace zshard::plan::testing
