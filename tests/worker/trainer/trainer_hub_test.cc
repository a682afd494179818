// TrainerHub against a trainer that speaks the protocol over a real Unix
// socket and maps real shared segments: attach, refusals (a second
// trainer, another job, another model), initial params, the step exchange
// with its layout, a trainer that dies and one that comes back, and the
// "gathered" messages of overlap_param_gather.
#include "client/worker/trainer/trainer_hub.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/device/shared_memory.h"
#include "client/worker/trainer/trainer_protocol.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait_for.h"

namespace zshard::trainer {
namespace {

constexpr int64_t kTimeoutMs = 10000;

plan::ModelSpec JobModel() {
  plan::ModelSpec m;
  m.name = "m";
  plan::ParamSpec a;
  a.name = "w";
  a.shape = {4, 3};
  a.dtype = plan::DType::kFp32;
  plan::ParamSpec b = a;
  b.name = "b";
  b.shape = {3};
  m.params = {a, b};
  return m;
}

nlohmann::json ModelJson(const plan::ModelSpec& m) {
  return nlohmann::json::parse(plan::ModelSpecToJson(m));
}

// The trainer's side: a connected socket speaking the protocol.
class Trainer {
 public:
  explicit Trainer(const std::string& path) {
    fd_ = device::OwnedFd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    connected_ = connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr),
                         sizeof(addr)) == 0;
  }
  // Sends hello and returns the daemon's answer.
  Message Hello(const nlohmann::json& model, const std::string& job = "") {
    nlohmann::json hello = {{"type", "hello"},
                            {"version", kProtocolVersion},
                            {"pid", 4242},
                            {"model", model}};
    hello["job"] = job.empty() ? nlohmann::json() : nlohmann::json(job);
    EXPECT_TRUE(SendMessage(fd_.get(), hello, {}, kTimeoutMs).ok());
    return Receive();
  }
  Message Receive() {
    absl::StatusOr<Message> m = ReceiveMessage(fd_.get(), kTimeoutMs);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::move(*m) : Message{};
  }
  // The next message, if one comes within `ms`.
  absl::StatusOr<Message> ReceiveWithin(int64_t ms) {
    return ReceiveMessage(fd_.get(), ms);
  }
  void Send(const nlohmann::json& body) {
    EXPECT_TRUE(SendMessage(fd_.get(), body, {}, kTimeoutMs).ok());
  }
  bool connected() const { return connected_; }
  int fd() const { return fd_.get(); }
  void Close() { fd_ = device::OwnedFd(); }

 private:
  device::OwnedFd fd_;
  bool connected_ = false;
};

class TrainerHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TrainerHubOptions o;
    o.socket_path = dir_.File("trainer.sock");
    o.job_name = "job";
    o.model = JobModel();
    o.io_timeout_ms = kTimeoutMs;
    o.on_event = [this](const std::string& kind, const std::string& reason) {
      absl::MutexLock lock(&events_mu_);
      events_.push_back(kind + ": " + reason);
    };
    absl::StatusOr<std::unique_ptr<TrainerHub>> hub = TrainerHub::Start(o);
    ASSERT_TRUE(hub.ok()) << hub.status();
    hub_ = std::move(*hub);
  }
  std::string path() const { return dir_.File("trainer.sock"); }
  std::vector<std::string> events() {
    absl::MutexLock lock(&events_mu_);
    return events_;
  }
  // Waits for an event that starts with `prefix`.
  bool HasEvent(const std::string& prefix) {
    return testing::WaitFor(
        [&] {
          for (const std::string& e : events()) {
            if (e.rfind(prefix, 0) == 0) return true;
          }
          return false;
        },
        kTimeoutMs);
  }

  absl::Mutex events_mu_;
  std::vector<std::string> events_;
  testing::TempDir dir_;
  std::unique_ptr<TrainerHub> hub_;
};

TEST_F(TrainerHubTest, AttachesOneTrainerAndRefusesASecond) {
  Trainer first(path());
  ASSERT_TRUE(first.connected());
  EXPECT_EQ(first.Hello(ModelJson(JobModel()), "job").type(), "welcome");
  ASSERT_TRUE(hub_->WaitForTrainer(kTimeoutMs).ok());
  EXPECT_EQ(hub_->attach_count(), 1);
  Trainer second(path());
  Message refused = second.Hello(ModelJson(JobModel()));
  EXPECT_EQ(refused.type(), "error");
  EXPECT_EQ(refused.body["message"],
            "a trainer is already attached to this daemon (pid 4242)");
  EXPECT_TRUE(hub_->attached());
  EXPECT_EQ(hub_->attach_count(), 1);
  // The coordinator hears of it; the first attach is no event.
  EXPECT_TRUE(HasEvent(
      "trainer_refused: trainer pid 4242 refused: a trainer is already "
      "attached"))
      << ::testing::PrintToString(events());
  EXPECT_EQ(events().size(), 1u);
}

TEST_F(TrainerHubTest, RefusesAnotherJobOrModelNamingIt) {
  Trainer other_job(path());
  Message m = other_job.Hello(ModelJson(JobModel()), "other");
  EXPECT_EQ(m.type(), "error");
  EXPECT_EQ(m.body["message"],
            "the trainer is for job 'other', this daemon runs job 'job'");

  plan::ModelSpec wrong = JobModel();
  wrong.params[1].shape = {5};
  Trainer bad_shape(path());
  m = bad_shape.Hello(ModelJson(wrong));
  EXPECT_EQ(m.body["message"],
            "the trainer's model does not match the job's: param 1 'b' has "
            "shape [5], the job's 'b' has [3]");

  wrong = JobModel();
  wrong.params.pop_back();
  Trainer short_model(path());
  m = short_model.Hello(ModelJson(wrong));
  EXPECT_EQ(m.body["message"],
            "the trainer's model does not match the job's: it has 1 params, "
            "the job's has 2 (first missing: 'b')");
  EXPECT_FALSE(hub_->attached());
  EXPECT_EQ(hub_->WaitForTrainer(10).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(TrainerHubTest, FetchesInitialParamsThroughASharedSegment) {
  Trainer t(path());
  ASSERT_EQ(t.Hello(ModelJson(JobModel())).type(), "welcome");
  ASSERT_TRUE(hub_->WaitForTrainer(kTimeoutMs).ok());
  std::thread trainer([&t] {
    Message init = t.Receive();
    ASSERT_EQ(init.type(), "init");
    ASSERT_EQ(init.fds.size(), 1u);
    const int64_t numel = init.body["numel"];
    auto region = device::SharedMemory::Map(init.fds[0].get(), numel * 4);
    ASSERT_TRUE(region.ok()) << region.status();
    float* values = static_cast<float*>((*region)->data());
    for (int64_t i = 0; i < numel; ++i) values[i] = 0.5f * i;
    t.Send({{"type", "init_done"}});
  });
  absl::StatusOr<std::vector<float>> values =
      hub_->FetchInitialParams(15, kTimeoutMs);
  trainer.join();
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), 15u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ((*values)[i], 0.5f * i);
}

TEST_F(TrainerHubTest, StepsThroughSharedBuffersAndSurvivesATrainerRestart) {
  auto params = device::SharedMemory::Create("params", 256 * 4);
  auto grads = device::SharedMemory::Create("grads", 256 * 4);
  ASSERT_TRUE(params.ok() && grads.ok());
  TrainerLayout layout;
  layout.generation = 7;
  engine::SharedBuffers::Buffer b;
  b.key.param_dtype = b.key.grad_dtype = plan::DType::kFp32;
  b.numel = 256;
  b.buckets = {{0, 256}};
  b.param_starts = {{"b", 0}, {"w", 64}};
  b.param_fd = (*params)->fd();
  b.grad_fd = (*grads)->fd();
  layout.buffers = {b};
  static_cast<float*>((*params)->data())[64] = 3.0f;

  // The trainer reads a param through its mapping and writes a grad.
  auto run_trainer = [&](Trainer& t, int64_t step, bool expect_layout) {
    Message first = t.Receive();
    if (expect_layout) {
      ASSERT_EQ(first.type(), "layout");
      EXPECT_EQ(first.body["generation"], 7);
      EXPECT_EQ(first.body["buffers"][0]["params"][1]["name"], "w");
      ASSERT_EQ(first.fds.size(), 2u);
      auto p = device::SharedMemory::Map(first.fds[0].get(), 256 * 4);
      auto g = device::SharedMemory::Map(first.fds[1].get(), 256 * 4);
      ASSERT_TRUE(p.ok() && g.ok());
      const float w0 = static_cast<float*>((*p)->data())[64];
      static_cast<float*>((*g)->data())[64] = 2 * w0 + step;
      first = t.Receive();
    }
    ASSERT_EQ(first.type(), "step");
    EXPECT_EQ(first.body["step"], step);
    EXPECT_EQ(first.body["rank"], 1);
    EXPECT_EQ(first.body["world"], 2);
    t.Send({{"type", "backward_done"}, {"step", step}, {"loss", 1.25}});
  };
  TrainerStep step{1, 1, 2, 8, 0.01};

  Trainer t1(path());
  ASSERT_EQ(t1.Hello(ModelJson(JobModel())).type(), "welcome");
  ASSERT_TRUE(hub_->WaitForTrainer(kTimeoutMs).ok());
  std::thread trainer([&] { run_trainer(t1, 1, true); });
  absl::StatusOr<BackwardDone> done =
      hub_->RunBackward(layout, step, kTimeoutMs);
  trainer.join();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->has_loss);
  EXPECT_EQ(done->loss, 1.25);
  EXPECT_EQ(static_cast<float*>((*grads)->data())[64], 7.0f);
  hub_->SendResult({1, false, true, 0.5, 0.125});
  Message result = t1.Receive();
  EXPECT_EQ(result.type(), "result");
  EXPECT_EQ(result.body["loss"], 0.125);

  // The trainer dies before answering step 2: the hub says so at once.
  step.step = 2;
  std::thread dying([&] {
    EXPECT_EQ(t1.Receive().type(), "step");
    t1.Close();
  });
  done = hub_->RunBackward(layout, step, kTimeoutMs);
  dying.join();
  EXPECT_EQ(done.status().code(), absl::StatusCode::kUnavailable)
      << done.status();
  EXPECT_FALSE(hub_->attached());
  EXPECT_TRUE(HasEvent("trainer_lost: trainer pid 4242: the trainer left"))
      << ::testing::PrintToString(events());

  // A new trainer resumes step 2 and gets the layout again.
  Trainer t2(path());
  ASSERT_EQ(t2.Hello(ModelJson(JobModel())).type(), "welcome");
  ASSERT_TRUE(hub_->WaitForTrainer(kTimeoutMs).ok());
  std::thread again([&] { run_trainer(t2, 2, true); });
  done = hub_->RunBackward(layout, step, kTimeoutMs);
  again.join();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(static_cast<float*>((*grads)->data())[64], 8.0f);
  EXPECT_EQ(hub_->attach_count(), 2);
  EXPECT_TRUE(
      HasEvent("trainer_attached: trainer pid 4242 attached "
               "(trainer 2 of this daemon)"))
      << ::testing::PrintToString(events());
}

TEST_F(TrainerHubTest, GatheredMessagesFollowADeferredResult) {
  auto params = device::SharedMemory::Create("params", 256 * 4);
  auto grads = device::SharedMemory::Create("grads", 256 * 4);
  ASSERT_TRUE(params.ok() && grads.ok());
  TrainerLayout layout;
  layout.generation = 3;
  engine::SharedBuffers::Buffer b;
  b.key.param_dtype = b.key.grad_dtype = plan::DType::kFp32;
  b.numel = 256;
  b.buckets = {{0, 128}, {128, 256}};
  b.param_starts = {{"b", 0}, {"w", 128}};
  b.param_fd = (*params)->fd();
  b.grad_fd = (*grads)->fd();
  layout.buffers = {b};

  Trainer t1(path());
  ASSERT_EQ(t1.Hello(ModelJson(JobModel())).type(), "welcome");
  ASSERT_TRUE(hub_->WaitForTrainer(kTimeoutMs).ok());
  std::thread first([&] {
    EXPECT_EQ(t1.Receive().type(), "layout");
    EXPECT_EQ(t1.Receive().type(), "step");
    t1.Send({{"type", "backward_done"},
             {"step", 1},
             {"loss", nullptr},
             {"overlap_param_gather", true}});
  });
  absl::StatusOr<BackwardDone> done =
      hub_->RunBackward(layout, {1, 0, 1, 8, 0.01}, kTimeoutMs);
  first.join();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->overlap_param_gather);
  TrainerStepResult result{1, false, true, 0.5, std::nullopt, 2};
  hub_->SendResult(result);
  Message r = t1.Receive();
  EXPECT_EQ(r.type(), "result");
  EXPECT_EQ(r.body["param_gather"], true);

  // Step 2's exchange holds the connection while the trainer waits for
  // the gathers in its forward: they must not wait for that exchange.
  std::thread second([&] {
    std::vector<std::string> got;
    for (int i = 0; i < 3; ++i) {
      Message m = t1.Receive();
      got.push_back(m.type() == "gathered"
                        ? absl::StrCat("gathered ", m.body["step"].dump(), " ",
                                       m.body["bucket"].dump(), " ",
                                       m.body["ok"].dump())
                        : m.type());
    }
    std::vector<std::string> gathered(got.begin(), got.end());
    gathered.erase(std::remove(gathered.begin(), gathered.end(), "step"),
                   gathered.end());
    EXPECT_EQ(gathered, (std::vector<std::string>{"gathered 1 1 true",
                                                  "gathered 1 0 true"}))
        << ::testing::PrintToString(got);
    t1.Send({{"type", "backward_done"}, {"step", 2}, {"loss", nullptr}});
  });
  std::thread gatherer([&] {
    hub_->SendGathered(1, 0, 1, true);
    hub_->SendGathered(1, 0, 0, true);
  });
  done = hub_->RunBackward(layout, {2, 0, 1, 8, 0.01}, kTimeoutMs);
  gatherer.join();
  second.join();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_FALSE(done->overlap_param_gather);

  // A trainer that attaches while a deferred result's buckets are still
  // being gathered gets its layout only once they are all reported.
  result.step = 2;
  hub_->SendResult(result);
  EXPECT_EQ(t1.Receive().type(), "result");
  t1.Close();
  Trainer t2(path());
  ASSERT_EQ(t2.Hello(ModelJson(JobModel())).type(), "welcome");
  ASSERT_TRUE(
      testing::WaitFor([&] { return hub_->attach_count() == 2; }, kTimeoutMs));
  absl::StatusOr<BackwardDone> third_done;
  std::thread third([&] {
    third_done = hub_->RunBackward(layout, {3, 0, 1, 8, 0.01}, kTimeoutMs);
  });
  EXPECT_EQ(t2.ReceiveWithin(300).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  hub_->SendGathered(2, 0, 1, true);
  EXPECT_EQ(t2.ReceiveWithin(300).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  hub_->SendGathered(2, 0, 0, true);
  // The gathers were the old trainer's: t2 gets none of them.
  EXPECT_EQ(t2.Receive().type(), "layout");
  EXPECT_EQ(t2.Receive().type(), "step");
  t2.Send({{"type", "backward_done"}, {"step", 3}, {"loss", nullptr}});
  third.join();
  EXPECT_TRUE(third_done.ok()) << third_done.status();
}

TEST_F(TrainerHubTest, FieldsOfTheWrongTypeAreRefusedNotThrown) {
  TrainerLayout layout;  // no buffers: nothing to map
  layout.generation = 3;
  Trainer t(path());
  ASSERT_EQ(t.Hello(ModelJson(JobModel())).type(), "welcome");
  ASSERT_TRUE(hub_->WaitForTrainer(kTimeoutMs).ok());
  std::thread trainer([&] {
    EXPECT_EQ(t.Receive().type(), "layout");
    EXPECT_EQ(t.Receive().type(), "step");
    // Ignored without a stream, whatever its fields hold.
    t.Send({{"type", "bucket_ready"}, {"step", 1}, {"buffer", "x"}});
    t.Send({{"type", "discard"}, {"step", 1}, {"reason", 7}});
    t.Send({{"type", "backward_done"}, {"step", "one"}});
  });
  absl::StatusOr<BackwardDone> done =
      hub_->RunBackward(layout, TrainerStep{1, 0, 1, 8, 0.01}, kTimeoutMs);
  trainer.join();
  EXPECT_EQ(done.status().code(), absl::StatusCode::kUnavailable)
      << done.status();
  EXPECT_THAT(std::string(done.status().message()),
              ::testing::HasSubstr("want backward_done of step 1"));
  EXPECT_FALSE(hub_->attached());
}

TEST_F(TrainerHubTest, ALiveSocketIsRefusedAStaleOneReplaced) {
  TrainerHubOptions o;
  o.socket_path = path();
  o.job_name = "job";
  o.model = JobModel();
  absl::StatusOr<std::unique_ptr<TrainerHub>> second = TrainerHub::Start(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(),
            "trainer socket " + path() + " is in use by another process");
  hub_.reset();  // unlinks
  // A socket file nobody listens on (a daemon killed with SIGKILL).
  device::OwnedFd stale(socket(AF_UNIX, SOCK_STREAM, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path().c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(stale.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
            0);
  stale = device::OwnedFd();
  ASSERT_EQ(access(path().c_str(), F_OK), 0);
  absl::StatusOr<std::unique_ptr<TrainerHub>> third = TrainerHub::Start(o);
  ASSERT_TRUE(third.ok()) << third.status();
}

// A model-parallel job's trainer asks where it sits before it builds its
// slot's module: the daemon answers once it holds a position (a spare's
// later), and the slot's model is what hellos are checked against from
// then on; a trainer of another slot is refused naming the param.
TEST_F(TrainerHubTest, APositionQueryWaitsForThePositionAndTheSlotModel) {
  Trainer asking(path());
  ASSERT_TRUE(asking.connected());
  asking.Send({{"type", "position_query"}, {"version", kProtocolVersion}});
  EXPECT_FALSE(asking.ReceiveWithin(200).ok()) << "no position yet";
  plan::ModelSpec slot = JobModel();
  slot.params[0].shape = {2, 3};  // tensor rank 1's half of "w"
  ModelParallelStep position;
  position.tp = 1;
  position.pp = 0;
  position.replica = 1;
  position.tensor = 2;
  position.pipeline = 2;
  position.rank = 1;
  ASSERT_TRUE(hub_->SetPosition(position, "job", slot).ok());
  Message told = asking.Receive();
  EXPECT_EQ(told.type(), "position");
  EXPECT_EQ(told.body["tp_rank"], 1);
  EXPECT_EQ(told.body["pp_rank"], 0);
  EXPECT_EQ(told.body["replica"], 1);
  EXPECT_EQ(told.body["rank"], 1);
  EXPECT_EQ(told.body["tensor"], 2);
  EXPECT_EQ(told.body["job"], "job");
  EXPECT_EQ(ReceiveMessage(asking.fd(), kTimeoutMs).status().code(),
            absl::StatusCode::kUnavailable)
      << "the daemon closes the query";
  // Another query is answered at once.
  Trainer again(path());
  again.Send({{"type", "position_query"}, {"version", kProtocolVersion}});
  EXPECT_EQ(again.Receive().body["tp_rank"], 1);
  // The whole model is not the slot's.
  Trainer whole(path());
  Message refused = whole.Hello(ModelJson(JobModel()), "job");
  EXPECT_EQ(refused.type(), "error");
  EXPECT_THAT(refused.body["message"].get<std::string>(),
              ::testing::HasSubstr("param 0 'w' has shape [4, 3], the "
                                   "job's 'w' has [2, 3]"));
  Trainer right(path());
  EXPECT_EQ(right.Hello(ModelJson(slot), "job").type(), "welcome");
  // A step of the slot carries the position and the rendezvous.
  nlohmann::json message = {{"type", "step"}};
  position.init_method = "tcp://10.0.0.1:29500";
  position.generation = 7;
  AddModelParallel(position, message);
  EXPECT_EQ(message["model_parallel"]["world"], 4);
  EXPECT_EQ(message["model_parallel"]["init_method"], "tcp://10.0.0.1:29500");
  EXPECT_EQ(message["model_parallel"]["generation"], 7);
  EXPECT_EQ(message["cp_rank"], 0);
}

TEST_F(TrainerHubTest, APositionQueryOfAJobThatEndsGetsDone) {
  Trainer asking(path());
  asking.Send({{"type", "position_query"}, {"version", kProtocolVersion}});
  EXPECT_FALSE(asking.ReceiveWithin(200).ok());
  hub_->SendDone(true, "range lost");
  Message done = asking.Receive();
  EXPECT_EQ(done.type(), "done");
  EXPECT_EQ(done.body["failed"], true);
  EXPECT_EQ(done.body["reason"], "range lost");
  Trainer old(path());
  old.Send({{"type", "position_query"}, {"version", 1}});
  EXPECT_EQ(old.Receive().body["message"],
            absl::StrCat("the trainer speaks protocol version 1, this "
                         "daemon ",
                         kProtocolVersion));
}

}  // namespace
}  // namespace zshard::trainer
