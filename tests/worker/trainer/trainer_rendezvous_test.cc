// TrainerRendezvous: the replica's rank 0 publishes the trainers' TCPStore
// and generation in the epoch's store, the others read it; the generation
// stays while the replica's members stay and becomes the epoch's when one
// changes; another replica's members do not count.
#include "client/worker/train/trainer_rendezvous.h"

#include <gtest/gtest.h>

#include <string>
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

// Epoch `n` of 8 ranks (2 replicas), rank r held by ids[r].
EpochInfo Epoch(int64_t n, int rank, const std::vector<std::string>& ids) {
  EpochInfo e;
  e.epoch = n;
  e.world = 8;
  e.rank = rank;
  for (int r = 0; r < 8; ++r) {
    plan::Assignment a;
    a.worker_id = ids[r];
    a.rank = r;
    e.assignments.push_back(a);
  }
  return e;
}

absl::StatusOr<trainer::ModelParallelStep> Meet(TrainerRendezvous& r,
                                                const EpochInfo& e,
                                                comm::KvStore& store) {
  absl::StatusOr<job::SlotJob> slot = job::SlotJobOf(Job(), e.world, e.rank);
  if (!slot.ok()) return slot.status();
  return r.Meet(Job(), e, *slot, store, 1000);
}

TEST(TrainerRendezvousTest,
     RankZeroPublishesAndKeepsTheGenerationOfItsMembers) {
  // Rank order tp + T x (replica + R x pp): replica 0 is ranks 0, 1, 4, 5;
  // replica 1 is 2, 3, 6, 7.
  std::vector<std::string> ids = {"a", "b", "c", "d", "e", "f", "g", "h"};
  TrainerRendezvous leader("127.0.0.1", 29555);
  TrainerRendezvous other("127.0.0.1", 0);
  comm::MemoryKvStore store1;
  absl::StatusOr<trainer::ModelParallelStep> led =
      Meet(leader, Epoch(1, 0, ids), store1);
  ASSERT_TRUE(led.ok()) << led.status();
  EXPECT_EQ(led->init_method, "tcp://127.0.0.1:29555");
  EXPECT_EQ(led->generation, 1);
  EXPECT_EQ(led->rank, 0);
  absl::StatusOr<trainer::ModelParallelStep> read =
      Meet(other, Epoch(1, 5, ids), store1);  // tp 1, pp 1 of replica 0
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->init_method, "tcp://127.0.0.1:29555");
  EXPECT_EQ(read->generation, 1);
  EXPECT_EQ(read->tp, 1);
  EXPECT_EQ(read->pp, 1);
  EXPECT_EQ(read->replica, 0);
  EXPECT_EQ(read->rank, 3);  // tp + T x (cp + C x pp)
  // Replica 1 lost a member: replica 0's generation stays.
  ids[7] = "spare";
  comm::MemoryKvStore store2;
  led = Meet(leader, Epoch(2, 0, ids), store2);
  ASSERT_TRUE(led.ok());
  EXPECT_EQ(led->generation, 1);
  // Replica 0 lost one: its generation becomes the epoch's.
  ids[4] = "spare2";
  comm::MemoryKvStore store3;
  led = Meet(leader, Epoch(3, 0, ids), store3);
  ASSERT_TRUE(led.ok());
  EXPECT_EQ(led->generation, 3);
  read = Meet(other, Epoch(3, 1, ids), store3);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->generation, 3);
  // Nobody published for replica 1 in this store: its ranks wait, then
  // fail with the store's DeadlineExceeded.
  TrainerRendezvous waiting("127.0.0.1", 0);
  EXPECT_EQ(Meet(waiting, Epoch(3, 3, ids), store3).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(TrainerRendezvousTest, WithoutAPortRankZeroPicksAFreeOneOnce) {
  std::vector<std::string> ids = {"a", "b", "c", "d", "e", "f", "g", "h"};
  TrainerRendezvous leader("127.0.0.1", 0);
  comm::MemoryKvStore store1, store2;
  absl::StatusOr<trainer::ModelParallelStep> first =
      Meet(leader, Epoch(1, 2, ids), store1);  // rank 0 of replica 1
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->replica, 1);
  EXPECT_NE(first->init_method, "tcp://127.0.0.1:0");
  absl::StatusOr<trainer::ModelParallelStep> second =
      Meet(leader, Epoch(2, 2, ids), store2);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->init_method, first->init_method);
}

}  // namespace
}  // namespace zshard::worker
