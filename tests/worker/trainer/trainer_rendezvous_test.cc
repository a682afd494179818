// TrainerRendezvous: the replica's rank 0 publishes the trainers' TCPStore
// and generation in the epoch's store, the others read it; the generation
// stays while the replica's members stay and becomes the epoch's when one
// changes; another replica's members do not count.
#include "client/worker/train/trainer_rendezvous.h"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "client/worker/comm/memory_kv_store.h"

namespace zshard::worker {
namespace {

job::JobSpec Job() {
  job::JobSpec job;
  job.name = "mp";
  job.parallel.tensor = 2;
  job.parallel.pipeline = 2;
  plan::ModelSpec slot;
  slot.name = "s";
  plan::ParamSpec p;
  p.name = "w";
  p.shape = {8};
  p.dtype = plan::DType::kFp32;
  slot.params = {p};
  job.slots = {slot, slot, slot, slot};
  return job;
}

// Rank `rank` of epoch `n` of 8 ranks (2 replicas), held by ids[rank].
EpochInfo Epoch(int64_t n, int rank, const std::vector<std::string>& ids) {
  EpochInfo e;
  e.epoch = n;
  e.world = 8;
  e.rank = rank;
  e.worker_id = ids[rank];
  return e;
}

absl::StatusOr<trainer::ModelParallelStep> Meet(TrainerRendezvous& r,
                                                const EpochInfo& e,
                                                comm::KvStore& store) {
  absl::StatusOr<job::SlotJob> slot = job::SlotJobOf(Job(), e.world, e.rank);
  if (!slot.ok()) return slot.status();
  return r.Meet(Job(), e, *slot, store, 2000);
}

using Met = absl::StatusOr<trainer::ModelParallelStep>;

// Replica 0's ranks 1, 4 and 5 (replica ranks 1, 2, 3) meet in `store`
// while `leader` (rank 0) does; returns the leader's answer and rank 5's.
std::pair<Met, Met> MeetReplicaZero(TrainerRendezvous& leader, int64_t n,
                                    const std::vector<std::string>& ids,
                                    comm::KvStore& store) {
  std::vector<std::future<Met>> others;
  for (int rank : {1, 4, 5}) {
    others.push_back(std::async(std::launch::async, [&ids, &store, n, rank] {
      TrainerRendezvous r("127.0.0.1", 0);
      return Meet(r, Epoch(n, rank, ids), store);
    }));
  }
  Met led = Meet(leader, Epoch(n, 0, ids), store);
  for (int k = 0; k < 2; ++k) {
    Met met = others[k].get();
    EXPECT_TRUE(met.ok()) << met.status();
  }
  return {led, others[2].get()};
}

TEST(TrainerRendezvousTest,
     RankZeroPublishesAndKeepsTheGenerationOfItsMembers) {
  // Rank order tp + T x (replica + R x pp): replica 0 is ranks 0, 1, 4, 5;
  // replica 1 is 2, 3, 6, 7.
  std::vector<std::string> ids = {"a", "b", "c", "d", "e", "f", "g", "h"};
  TrainerRendezvous leader("127.0.0.1", 29555);
  comm::MemoryKvStore store1;
  auto [led, read] = MeetReplicaZero(leader, 1, ids, store1);
  ASSERT_TRUE(led.ok()) << led.status();
  EXPECT_EQ(led->init_method, "tcp://127.0.0.1:29555");
  EXPECT_EQ(led->generation, 1);
  EXPECT_EQ(led->rank, 0);
  ASSERT_TRUE(read.ok()) << read.status();  // rank 5: tp 1, pp 1
  EXPECT_EQ(read->init_method, "tcp://127.0.0.1:29555");
  EXPECT_EQ(read->generation, 1);
  EXPECT_EQ(read->tp, 1);
  EXPECT_EQ(read->pp, 1);
  EXPECT_EQ(read->replica, 0);
  EXPECT_EQ(read->rank, 3);  // tp + T x (cp + C x pp)
  // Replica 1 lost a member: replica 0's generation stays.
  ids[7] = "spare";
  comm::MemoryKvStore store2;
  std::tie(led, read) = MeetReplicaZero(leader, 2, ids, store2);
  ASSERT_TRUE(led.ok()) << led.status();
  EXPECT_EQ(led->generation, 1);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->generation, 1);
  // Replica 0 lost one: its generation becomes the epoch's.
  ids[4] = "spare2";
  comm::MemoryKvStore store3;
  std::tie(led, read) = MeetReplicaZero(leader, 3, ids, store3);
  ASSERT_TRUE(led.ok()) << led.status();
  EXPECT_EQ(led->generation, 3);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->generation, 3);
  // Nobody published for replica 1 in this store: a rank of it waits for
  // rank 0, and its rank 0 for the others' names, until DeadlineExceeded.
  TrainerRendezvous waiting("127.0.0.1", 0);
  EXPECT_EQ(Meet(waiting, Epoch(3, 3, ids), store3).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Meet(waiting, Epoch(3, 2, ids), store3).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(TrainerRendezvousTest, WithoutAPortRankZeroPicksAFreeOneOnce) {
  std::vector<std::string> ids = {"a", "b", "c", "d", "e", "f", "g", "h"};
  TrainerRendezvous leader("127.0.0.1", 0);
  comm::MemoryKvStore store1, store2;
  Met first = MeetReplicaZero(leader, 1, ids, store1).first;
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_NE(first->init_method, "tcp://127.0.0.1:0");
  Met second = MeetReplicaZero(leader, 2, ids, store2).first;
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->init_method, first->init_method);
}

}  // namespace
}  // namespace zshard::worker
