// The re-sharding RPCs over real gRPC on 127.0.0.1: ReportCheckpoint
// writes manifest.json once complete, ListCheckpoints, GetReshardHistory,
// Leave with hand-over, the PlanUpdate's new fields, and the --restore
// validation of zshard-coordinator (the library call and the binary), and
// the binary's refusal of a job its workload cannot run.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/checkpoint/manifest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/service/checkpoint_convert.h"
#include "server/service/proto_convert.h"
#include "server/store/sqlite_state_store.h"
#include "tests/server/coordinator_fixture.h"
#include "tests/server/test_checkpoint.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace zshard::server {
namespace {

using ::testing::HasSubstr;

class ReshardServiceTest : public testing::CoordinatorFixture {
 protected:
  // Two workers settle epoch 1 (world 2, I = 2: D = 1).
  void SettleTwo() {
    w0_ = Join("w0");
    w1_ = Join("w1");
    for (const auto& w : {w0_, w1_}) {
      ASSERT_TRUE(Ack(w, 1, v1::ACK_PHASE_PREPARED).ok());
    }
    for (const auto& w : {w0_, w1_}) {
      ASSERT_TRUE(Ack(w, 1, v1::ACK_PHASE_ACTIVE).ok());
    }
    ASSERT_EQ(coordinator_->membership()->StablePlan().epoch, 1);
  }

  v1::JoinResponse w0_, w1_;
};

TEST_F(ReshardServiceTest, ReportCheckpointWritesTheManifestWhenComplete) {
  SettleTwo();
  zshard::testing::TempDir tmp;
  std::string dir = tmp.File("step-00000010");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const EpochPlan p = coordinator_->membership()->StablePlan();
  const v1::JoinResponse& rank0 =
      p.slots[0].worker_id == w0_.worker_id() ? w0_ : w1_;
  v1::ReportCheckpointRequest req;
  req.set_worker_id(rank0.worker_id());
  req.set_token(rank0.token());
  req.set_epoch(1);
  req.set_step(10);
  req.set_adam_step(10);
  req.set_dir(dir);
  v1::CheckpointFile* f = req.mutable_file();
  f->set_path("rank-00000.zsc");
  f->set_rank(0);
  f->set_bytes(37200);
  f->set_checksum("abcd");
  v1::ParamRange* a = f->add_ranges();
  a->set_param_index(0);
  a->set_end(999);  // one element short
  v1::ParamRange* b = f->add_ranges();
  b->set_param_index(1);
  b->set_end(2100);
  v1::ReportCheckpointResponse resp;
  grpc::Status s = worker_->ReportCheckpoint(Ctx().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("param 'a'"));
  EXPECT_FALSE(checkpoint::ReadManifest(dir).ok());
  a->set_end(1000);
  s = worker_->ReportCheckpoint(Ctx().get(), req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(resp.manifest_committed());
  auto manifest = checkpoint::ReadManifest(dir);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->step(), 10);
  EXPECT_EQ(manifest->job(), "demo");
  EXPECT_EQ(manifest->files_size(), 1);
  EXPECT_EQ(manifest->bytes(), 37200);
  EXPECT_TRUE(checkpoint::ValidateManifest(
                  *manifest, coordinator_->membership()->spec().model)
                  .ok());

  v1::ListCheckpointsResponse list;
  ASSERT_TRUE(
      dashboard_
          ->ListCheckpoints(Ctx().get(), v1::ListCheckpointsRequest(), &list)
          .ok());
  ASSERT_EQ(list.checkpoints_size(), 1);
  EXPECT_EQ(list.checkpoints(0).step(), 10);
  EXPECT_EQ(list.checkpoints(0).files_size(), 0);
  EXPECT_EQ(list.file_count(0), 1);

  v1::ListEventsRequest ev;
  ev.set_page_size(1000);
  v1::ListEventsResponse events;
  ASSERT_TRUE(dashboard_->ListEvents(Ctx().get(), ev, &events).ok());
  bool found = false;
  for (const v1::Event& e : events.events()) {
    found |= e.kind() == "checkpoint" &&
             e.reason().find("step 10: 1 files, 37200 bytes") == 0;
  }
  EXPECT_TRUE(found);
}

TEST_F(ReshardServiceTest, HistoryLeaveHandoverAndPlanUpdateFields) {
  SettleTwo();
  v1::JoinResponse w2 = Join("w2");
  v1::JoinResponse w3 = Join("w3");
  int64_t e = coordinator_->membership()->View().pending_epoch;
  ASSERT_EQ(e, 2);
  for (const auto& w : {w0_, w1_, w2, w3}) {
    ASSERT_TRUE(Ack(w, e, v1::ACK_PHASE_PREPARED).ok());
  }
  // The committed update carries the moves in param space.
  PlanUpdate u{0, PlanPhase::kCommitted,
               coordinator_->membership()->CommittedPlan()};
  v1::PlanUpdate proto;
  ToProto(u, &proto);
  ASSERT_GT(proto.moves_size(), 0);
  EXPECT_EQ(proto.move_summary().moves(), proto.moves_size());
  EXPECT_GT(proto.move_summary().bytes_moved(), 0);
  EXPECT_FALSE(proto.moves(0).from_worker_id().empty());
  EXPECT_EQ(proto.moves(0).end() - proto.moves(0).begin(),
            proto.moves(0).length());
  EXPECT_FALSE(proto.has_restore());
  for (const auto& w : {w0_, w1_, w2, w3}) {
    ASSERT_TRUE(Ack(w, e, v1::ACK_PHASE_ACTIVE).ok());
  }
  v1::GetReshardHistoryRequest hreq;
  v1::GetReshardHistoryResponse history;
  ASSERT_TRUE(dashboard_->GetReshardHistory(Ctx().get(), hreq, &history).ok());
  ASSERT_EQ(history.reshards_size(), 2);
  EXPECT_EQ(history.reshards(1).epoch(), 2);
  EXPECT_EQ(history.reshards(1).base_epoch(), 1);
  EXPECT_EQ(history.reshards(1).world_before(), 2);
  EXPECT_EQ(history.reshards(1).world_after(), 4);
  EXPECT_EQ(history.reshards(1).outcome(), "stable");
  EXPECT_EQ(history.reshards(1).summary().bytes_moved(),
            proto.move_summary().bytes_moved());
  hreq.set_limit(-1);
  EXPECT_EQ(
      dashboard_->GetReshardHistory(Ctx().get(), hreq, &history).error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);

  v1::LeaveRequest leave;
  leave.set_worker_id(w3.worker_id());
  leave.set_token(w3.token());
  leave.set_reason("sigterm");
  v1::LeaveResponse lresp;
  ASSERT_TRUE(worker_->Leave(Ctx().get(), leave, &lresp).ok());
  EXPECT_TRUE(lresp.handover());
  v1::HeartbeatRequest hb;
  hb.set_worker_id(w3.worker_id());
  hb.set_token(w3.token());
  v1::HeartbeatResponse hresp;
  ASSERT_TRUE(worker_->Heartbeat(Ctx().get(), hb, &hresp).ok());
  EXPECT_EQ(hresp.state(), v1::MEMBER_STATE_DRAINING);
  EXPECT_EQ(hresp.command(), v1::COMMAND_UNSPECIFIED);
  EXPECT_FALSE(hresp.job_failed());
}

TEST(RestoreCheckpointTest, ValidatesTheManifestAgainstTheJob) {
  zshard::testing::TempDir tmp;
  job::JobSpec spec = testing::TestJob();
  EXPECT_EQ(LoadRestoreCheckpoint(tmp.path(), spec).status().code(),
            absl::StatusCode::kNotFound);
  v1::CheckpointManifest m = testing::GoodManifest(tmp.path());
  ASSERT_TRUE(checkpoint::WriteManifest(m).ok());
  auto ok = LoadRestoreCheckpoint(tmp.path(), spec);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->step, 40);
  EXPECT_EQ(ok->files.size(), 1u);

  v1::CheckpointManifest renamed = m;
  renamed.set_param_names(1, "c");
  ASSERT_TRUE(checkpoint::WriteManifest(renamed).ok());
  auto r = LoadRestoreCheckpoint(tmp.path(), spec);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("param 1 is 'c' in the checkpoint but 'b'"));

  v1::CheckpointManifest resized = m;
  resized.set_param_numels(0, 999);
  ASSERT_TRUE(checkpoint::WriteManifest(resized).ok());
  r = LoadRestoreCheckpoint(tmp.path(), spec);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("param 'a' has 999 elements in the checkpoint"));

  v1::CheckpointManifest holey = m;
  holey.mutable_files(0)->mutable_ranges(1)->set_begin(5);
  ASSERT_TRUE(checkpoint::WriteManifest(holey).ok());
  r = LoadRestoreCheckpoint(tmp.path(), spec);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("incomplete"));

  // A rank file that no longer matches its manifest: named, DataLoss.
  ASSERT_TRUE(checkpoint::WriteManifest(m).ok());
  {
    std::fstream f(tmp.File("rank-00000.zsc"),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3);
    f.put('#');
  }
  r = LoadRestoreCheckpoint(tmp.path(), spec);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("rank-00000.zsc: checksum mismatch"));
  ASSERT_EQ(std::remove(tmp.File("rank-00000.zsc").c_str()), 0);
  r = LoadRestoreCheckpoint(tmp.path(), spec);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("rank-00000.zsc is missing"));

  std::ofstream(checkpoint::ManifestPath(tmp.path())) << "{not json";
  EXPECT_EQ(LoadRestoreCheckpoint(tmp.path(), spec).status().code(),
            absl::StatusCode::kDataLoss);
}

// Runs zshard-coordinator (from $ZSHARD_BIN_DIR) with `args` until it exits
// (20 s at most): its exit status (-1 when it did not exit) and its stderr.
std::pair<int, std::string> RunCoordinator(const zshard::testing::TempDir& tmp,
                                           std::vector<std::string> args) {
  args.insert(args.begin(), std::string(std::getenv("ZSHARD_BIN_DIR")) +
                                "/zshard-coordinator");
  zshard::testing::Subprocess::Options o;
  o.argv = std::move(args);
  o.stdout_path = tmp.File("out.txt");
  o.stderr_path = tmp.File("err.txt");
  auto p = zshard::testing::Subprocess::Start(o).value();
  std::optional<int> code = p->Wait(20000);
  std::ifstream err(tmp.File("err.txt"));
  std::string text((std::istreambuf_iterator<char>(err)),
                   std::istreambuf_iterator<char>());
  return std::make_pair(code.value_or(-1), text);
}

TEST(RestoreCheckpointTest, CoordinatorRefusesRestoreIntoAStateDirWithAJob) {
  if (std::getenv("ZSHARD_BIN_DIR") == nullptr) {
    GTEST_SKIP() << "ZSHARD_BIN_DIR is not set";
  }
  zshard::testing::TempDir tmp;
  ASSERT_TRUE(
      checkpoint::WriteManifest(testing::GoodManifest(tmp.path())).ok());
  std::ofstream(tmp.File("job.json")) << testing::TestJobJson();
  ASSERT_EQ(mkdir(tmp.File("state").c_str(), 0700), 0);
  {
    // The state dir gets the job.
    auto store = SqliteStateStore::Open(tmp.File("state"));
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->SaveJob("demo", "{}").ok());
  }
  auto run = [&](const std::string& restore) {
    return RunCoordinator(
        tmp, {"--job", tmp.File("job.json"), "--listen", "127.0.0.1:0",
              "--state-dir", tmp.File("state"), "--restore", restore});
  };
  auto [code, err] = run(tmp.path());
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("fresh state dir"));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
  auto [code2, err2] = run(tmp.File("nowhere"));
  EXPECT_EQ(code2, 2);
  EXPECT_THAT(err2, HasSubstr("flag --restore"));
}

// A job whose workload cannot run its model is refused at start (exit 2,
// one line), not accepted and left to fail on every worker.
TEST(JobValidationTest, CoordinatorRefusesAJobItsWorkloadCannotRun) {
  if (std::getenv("ZSHARD_BIN_DIR") == nullptr) {
    GTEST_SKIP() << "ZSHARD_BIN_DIR is not set";
  }
  zshard::testing::TempDir tmp;
  std::string job = testing::TestJobJson();
  const std::string synthetic = R"("kind": "synthetic")";
  job.replace(job.find(synthetic), synthetic.size(), R"("kind": "regression")");
  std::ofstream(tmp.File("bad.json")) << job;
  auto [code, err] =
      RunCoordinator(tmp, {"--job", tmp.File("bad.json"), "--listen",
                           "127.0.0.1:0", "--state-dir", tmp.File("state")});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("bad.json"));
  EXPECT_THAT(err, HasSubstr("the model must be the two-layer mlp"));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

}  // namespace
}  // namespace zshard::server
