// TrainerHub: the accept loop, the hello check and the step exchange.
#include "client/worker/trainer/trainer_hub.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/worker/device/shared_memory.h"
#include "client/worker/trainer/trainer_protocol.h"
#include "common/logging.h"
#include "common/plan/model_match.h"
#include "common/status.h"

namespace zshard::trainer {
namespace {

// How long a new connection has to send its hello.
constexpr int64_t kHelloTimeoutMs = 5000;

absl::StatusOr<sockaddr_un> UnixAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer socket path must have 1 to ",
                     sizeof(addr.sun_path) - 1, " bytes, not ", path.size()));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

// A trainer's frames are input: fields of the wrong type read as absent.
int64_t IntOr(const nlohmann::json& body, const char* key, int64_t fallback) {
  auto it = body.find(key);
  return it != body.end() && it->is_number_integer() ? it->get<int64_t>()
                                                     : fallback;
}

std::string StringOr(const nlohmann::json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && it->is_string() ? it->get<std::string>() : "";
}

// True when `fd`'s peer has closed or the connection broke.
bool HungUp(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

}  // namespace

absl::Status CheckTrainerModel(const plan::ModelSpec& job_model,
                               const nlohmann::json& trainer_model) {
  absl::StatusOr<plan::ModelSpec> got = plan::ModelSpecFromJson(trainer_model);
  if (!got.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the trainer's model spec is invalid: ", got.status().message()));
  }
  // A daemon of a job without a model yet takes any valid model.
  if (job_model.params.empty()) return absl::OkStatus();
  return plan::MatchModel(job_model, *got);
}

TrainerHub::TrainerHub(TrainerHubOptions options)
    : options_(std::move(options)),
      job_name_(options_.job_name),
      model_(options_.model),
      on_event_(options_.on_event) {}

absl::StatusOr<std::unique_ptr<TrainerHub>> TrainerHub::Start(
    const TrainerHubOptions& options) {
  std::unique_ptr<TrainerHub> hub(new TrainerHub(options));
  absl::Status listening = hub->Listen();
  if (!listening.ok()) return listening;
  hub->accept_thread_ = std::thread([h = hub.get()] { h->AcceptLoop(); });
  return hub;
}

absl::Status TrainerHub::Listen() {
  ZSHARD_ASSIGN_OR_RETURN(const sockaddr_un addr,
                          UnixAddress(options_.socket_path));
  const std::string& path = options_.socket_path;
  // A socket file nobody answers on is a dead daemon's: replace it.
  device::OwnedFd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr),
              sizeof(addr)) == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("trainer socket ", path, " is in use by another process"));
  }
  if (errno == ECONNREFUSED) unlink(path.c_str());
  listen_fd_ = device::OwnedFd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listen_fd_.get() < 0 ||
      bind(listen_fd_.get(), reinterpret_cast<const sockaddr*>(&addr),
           sizeof(addr)) != 0 ||
      listen(listen_fd_.get(), 8) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "trainer socket ", path, ": cannot listen: ", std::strerror(errno)));
  }
  wake_fd_ = device::OwnedFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (wake_fd_.get() < 0) {
    return absl::InternalError(
        absl::StrCat("trainer hub: eventfd failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

TrainerHub::~TrainerHub() {
  Shutdown();
  if (accept_thread_.joinable()) accept_thread_.join();
  if (listen_fd_.get() >= 0) unlink(options_.socket_path.c_str());
}

void TrainerHub::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return;
  shutdown_ = true;
  if (wake_fd_.get() >= 0) {
    const uint64_t one = 1;
    (void)!write(wake_fd_.get(), &one, sizeof(one));
  }
  // Ends a wait for the trainer's answer; the fd stays open until Drop.
  if (conn_.get() >= 0) shutdown(conn_.get(), SHUT_RDWR);
  position_waiters_.clear();  // they read the daemon's end as its loss
}

void TrainerHub::AcceptLoop() {
  while (true) {
    pollfd p[2] = {{listen_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      ZSHARD_LOG_ERROR("trainer socket: poll failed",
                       {{"error", std::strerror(errno)}});
      return;
    }
    if (p[1].revents != 0) return;
    device::OwnedFd conn(
        accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.get() < 0) continue;
    Admit(std::move(conn));
  }
}

absl::Status TrainerHub::CheckHello(const nlohmann::json& hello) const {
  std::string job_name;
  plan::ModelSpec job_model;
  {
    absl::MutexLock lock(&mu_);
    job_name = job_name_;
    job_model = model_;
  }
  ZSHARD_RETURN_IF_ERROR(CheckProtocolVersion(hello));
  auto job = hello.find("job");
  if (job != hello.end() && job->is_string() && !job_name.empty() &&
      job->get<std::string>() != job_name) {
    return absl::InvalidArgumentError(
        absl::StrCat("the trainer is for job '", job->get<std::string>(),
                     "', this daemon runs job '", job_name, "'"));
  }
  auto model = hello.find("model");
  if (model == hello.end()) {
    return absl::InvalidArgumentError("the trainer's hello has no model");
  }
  return CheckTrainerModel(job_model, *model);
}

void TrainerHub::Admit(device::OwnedFd conn) {
  absl::StatusOr<Message> hello = ReceiveMessage(conn.get(), kHelloTimeoutMs);
  if (hello.ok() && hello->type() == "position_query") {
    AnswerPosition(std::move(conn), hello->body);
    return;
  }
  absl::Status refused;
  if (!hello.ok()) {
    refused = hello.status();
  } else if (hello->type() != "hello") {
    refused = absl::InvalidArgumentError(absl::StrCat(
        "the trainer's first message is '", hello->type(), "', not hello"));
  } else {
    refused = CheckHello(hello->body);
  }
  int pid = 0;
  if (hello.ok()) {
    auto it = hello->body.find("pid");
    if (it != hello->body.end() && it->is_number_integer()) {
      pid = it->get<int>();
    }
  }
  if (refused.ok()) {
    int old = -1;
    {
      absl::MutexLock lock(&mu_);
      old = conn_.get();
    }
    if (old >= 0 && HungUp(old)) {
      // The last trainer died: whoever talks to it lets go at once.
      absl::MutexLock io(&io_mu_);
      absl::MutexLock lock(&mu_);
      if (conn_.get() == old) Drop();
    }
    absl::MutexLock lock(&mu_);
    if (conn_.get() >= 0) {
      refused = absl::FailedPreconditionError(
          absl::StrCat("a trainer is already attached to this daemon (pid ",
                       trainer_pid_, ")"));
    } else if (shutdown_) {
      refused = absl::CancelledError("the daemon is shutting down");
    }
  }
  if (!refused.ok()) {
    ZSHARD_LOG_WARN("trainer refused",
                    {{"error", std::string(refused.message())}});
    Notify("trainer_refused",
           absl::StrCat("trainer", pid > 0 ? absl::StrCat(" pid ", pid) : "",
                        " refused: ", refused.message()));
    (void)SendMessage(conn.get(),
                      {{"type", "error"}, {"message", refused.message()}}, {},
                      options_.io_timeout_ms);
    return;
  }
  const absl::Status welcomed =
      SendMessage(conn.get(),
                  {{"type", "welcome"},
                   {"version", kProtocolVersion},
                   {"job", job_name()},
                   {"pid", static_cast<int>(getpid())}},
                  {}, options_.io_timeout_ms);
  if (!welcomed.ok()) return;
  int64_t count = 0;
  {
    absl::MutexLock lock(&mu_);
    conn_ = std::move(conn);
    trainer_pid_ = pid;
    attached_model_ = hello->body["model"].dump();
    sent_waiting_.clear();
    sent_generation_ = -1;
    count = ++attach_count_;
  }
  ZSHARD_LOG_INFO("trainer attached", {{"pid", absl::StrCat(pid)}});
  if (count > 1) {
    Notify("trainer_attached",
           absl::StrCat("trainer pid ", pid, " attached (trainer ", count,
                        " of this daemon)"));
  }
}

void TrainerHub::Notify(const std::string& kind,
                        const std::string& reason) const {
  std::function<void(const std::string&, const std::string&)> on_event;
  {
    absl::MutexLock lock(&mu_);
    on_event = on_event_;
  }
  if (on_event) on_event(kind, reason);
}

std::string TrainerHub::job_name() const {
  absl::MutexLock lock(&mu_);
  return job_name_;
}

void TrainerHub::SetEventHandler(
    std::function<void(const std::string& kind, const std::string& reason)>
        on_event) {
  absl::MutexLock lock(&mu_);
  on_event_ = std::move(on_event);
}

std::optional<std::string> TrainerHub::AttachedModel() const {
  absl::MutexLock lock(&mu_);
  if (conn_.get() < 0) return std::nullopt;
  return attached_model_;
}

absl::Status TrainerHub::AdoptJob(const std::string& job_name,
                                  const plan::ModelSpec& model) {
  absl::Status refused;
  int fd = -1;
  {
    absl::MutexLock io(&io_mu_);
    absl::MutexLock lock(&mu_);
    job_name_ = job_name;
    model_ = model;
    if (conn_.get() < 0) return absl::OkStatus();
    refused = CheckTrainerModel(
        model_, nlohmann::json::parse(attached_model_, nullptr, false));
    if (refused.ok()) return absl::OkStatus();
    ZSHARD_LOG_WARN("trainer refused",
                    {{"error", std::string(refused.message())}});
    fd = conn_.get();
    (void)Send(fd, {{"type", "error"}, {"message", refused.message()}}, {});
    Drop();
  }
  Notify("trainer_refused",
         absl::StrCat("trainer refused: ", refused.message()));
  return refused;
}

void TrainerHub::Drop() {
  if (conn_.get() < 0) return;
  ZSHARD_LOG_WARN("trainer detached", {{"pid", absl::StrCat(trainer_pid_)}});
  conn_ = device::OwnedFd();
  trainer_pid_ = 0;
  sent_generation_ = -1;
}

absl::Status TrainerHub::WaitForTrainer(int64_t timeout_ms) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return shutdown_ || conn_.get() >= 0;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(timeout_ms));
  if (shutdown_) return absl::CancelledError("the daemon is shutting down");
  if (conn_.get() < 0) {
    return absl::DeadlineExceededError(
        absl::StrCat("no trainer attached to ", options_.socket_path,
                     " within ", timeout_ms, " ms"));
  }
  return absl::OkStatus();
}

absl::StatusOr<BackwardDone> TrainerHub::RunBackward(
    const TrainerLayout& layout, const TrainerStep& step, int64_t timeout_ms,
    engine::GradientStream* stream) {
  absl::MutexLock io(&io_mu_);
  const int fd = Conn();
  bool send_layout = false;
  {
    absl::MutexLock lock(&mu_);
    send_layout = sent_generation_ != layout.generation;
  }
  if (fd < 0) return absl::FailedPreconditionError("no trainer is attached");
  auto fail = [this](const absl::Status& s) { return Fail(s); };
  if (send_layout) {
    // A trainer that maps the buffers anew has no pending buckets to wait
    // for: the last step's deferred all-gathers must be done first.
    absl::MutexLock lock(&mu_);
    auto gathered = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return gathers_left_ == 0;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&gathered),
                              absl::Milliseconds(timeout_ms))) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the params' all-gather of the last step did not finish within ",
          timeout_ms, " ms"));
    }
  }
  if (send_layout) {
    const bool ipc = layout.cuda_device >= 0;
    if (!ipc && layout.buffers.size() * 2 > device::kMaxPassedFds) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the trainer protocol carries at most ", device::kMaxPassedFds / 2,
          " buffers, this plan has ", layout.buffers.size()));
    }
    nlohmann::json buffers = nlohmann::json::array();
    std::vector<int> fds;
    for (const engine::SharedBuffers::Buffer& b : layout.buffers) {
      nlohmann::json params = nlohmann::json::array();
      for (const auto& [name, start] : b.param_starts) {
        params.push_back({{"name", name}, {"start", start}});
      }
      nlohmann::json buckets = nlohmann::json::array();
      for (const auto& [start, end] : b.buckets) {
        buckets.push_back({start, end});
      }
      nlohmann::json buffer = {
          {"param_dtype", plan::DTypeName(b.key.param_dtype)},
          {"grad_dtype", plan::DTypeName(b.key.grad_dtype)},
          {"expert", b.key.expert},
          {"numel", b.numel},
          {"params", std::move(params)},
          {"buckets", std::move(buckets)}};
      if (ipc) {
        buffer["param_ipc"] = absl::BytesToHexString(b.param_ipc);
        buffer["grad_ipc"] = absl::BytesToHexString(b.grad_ipc);
      } else {
        fds.push_back(b.param_fd);
        fds.push_back(b.grad_fd);
      }
      buffers.push_back(std::move(buffer));
    }
    nlohmann::json message = {{"type", "layout"},
                              {"generation", layout.generation},
                              {"buffers", std::move(buffers)}};
    if (ipc) message["cuda_device"] = layout.cuda_device;
    const absl::Status sent = Send(fd, message, fds);
    if (!sent.ok()) return fail(sent);
    absl::MutexLock lock(&mu_);
    sent_generation_ = layout.generation;
  }
  nlohmann::json message = {{"type", "step"},
                            {"step", step.step},
                            {"rank", step.rank},
                            {"world", step.world},
                            {"global_batch", step.global_batch},
                            {"lr", step.lr},
                            {"steps", step.steps},
                            {"repeated", step.repeated},
                            {"generation", layout.generation}};
  if (step.model_parallel.has_value()) {
    AddModelParallel(*step.model_parallel, message);
  }
  const absl::Status sent = Send(fd, message, {});
  if (!sent.ok()) return fail(sent);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  BackwardDone done;
  while (true) {
    const int64_t left =
        std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now()));
    absl::StatusOr<Message> reply = ReceiveMessage(fd, left);
    if (!reply.ok()) {
      if (reply.status().code() == absl::StatusCode::kDeadlineExceeded) {
        return fail(absl::DeadlineExceededError(
            absl::StrCat("no backward_done for step ", step.step, " within ",
                         timeout_ms, " ms")));
      }
      return fail(reply.status());
    }
    const std::string type = reply->type();
    if (IntOr(reply->body, "step", -1) != step.step ||
        (type != "backward_done" && type != "bucket_ready" &&
         type != "discard")) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("want backward_done of step ", step.step, ", got ",
                       reply->body.dump().substr(0, 200))));
    }
    if (type == "bucket_ready") {
      if (stream == nullptr) continue;
      const absl::Status marked =
          stream->MarkReady(static_cast<int>(IntOr(reply->body, "buffer", -1)),
                            static_cast<int>(IntOr(reply->body, "bucket", -1)));
      if (!marked.ok()) {
        return fail(absl::InvalidArgumentError(
            absl::StrCat("bucket_ready: ", marked.message())));
      }
      continue;
    }
    if (type == "discard") {
      const std::string why = StringOr(reply->body, "reason");
      ZSHARD_LOG_WARN("the trainer discards its step: it is skipped",
                      {{"step", absl::StrCat(step.step)}, {"reason", why}});
      if (stream != nullptr) stream->Discard();
      continue;
    }
    auto loss = reply->body.find("loss");
    if (loss != reply->body.end() && loss->is_number()) {
      done.has_loss = true;
      done.loss = loss->get<double>();
    }
    auto overlap = reply->body.find("overlap_param_gather");
    done.overlap_param_gather = overlap != reply->body.end() &&
                                overlap->is_boolean() && overlap->get<bool>();
    return done;
  }
}

int TrainerHub::Conn() const {
  absl::MutexLock lock(&mu_);
  return conn_.get();
}

absl::Status TrainerHub::Fail(const absl::Status& why) {
  int pid = 0;
  {
    absl::MutexLock lock(&mu_);
    pid = trainer_pid_;
    Drop();
  }
  const std::string what =
      absl::StrCat("the trainer left or broke the protocol: ", why.message());
  Notify("trainer_lost", absl::StrCat("trainer pid ", pid, ": ", what));
  return absl::UnavailableError(what);
}

absl::StatusOr<std::vector<float>> TrainerHub::FetchInitialParams(
    int64_t numel, int64_t timeout_ms) {
  absl::MutexLock io(&io_mu_);
  const int fd = Conn();
  if (fd < 0) return absl::FailedPreconditionError("no trainer is attached");
  ZSHARD_ASSIGN_OR_RETURN(
      std::unique_ptr<device::SharedMemory> region,
      device::SharedMemory::Create("zshard-initial-params",
                                   static_cast<size_t>(numel) * 4));
  const int fds[] = {region->fd()};
  absl::Status sent = Send(fd, {{"type", "init"}, {"numel", numel}}, fds);
  if (!sent.ok()) return Fail(sent);
  absl::StatusOr<Message> reply = ReceiveMessage(fd, timeout_ms);
  if (!reply.ok()) return Fail(reply.status());
  if (reply->type() != "init_done") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("want init_done, got '", reply->type(), "'")));
  }
  const float* values = static_cast<const float*>(region->data());
  return std::vector<float>(values, values + numel);
}

void TrainerHub::SendResult(const TrainerStepResult& r) {
  absl::MutexLock io(&io_mu_);
  if (r.deferred_gathers > 0) {
    // Counted even with no trainer attached: the next one's layout waits.
    absl::MutexLock lock(&mu_);
    gathers_left_ = r.deferred_gathers;
    gathers_for_ = attach_count_;
  }
  const int fd = Conn();
  if (fd < 0) return;
  nlohmann::json body = {{"type", "result"},         {"step", r.step},
                         {"failed", r.failed},       {"applied", r.applied},
                         {"grad_norm", r.grad_norm}, {"loss", nullptr}};
  if (r.loss) body["loss"] = *r.loss;
  // A failed step has no world loss or norm: the world never agreed on one.
  if (r.failed) body["grad_norm"] = nullptr;
  // The trainer's forward pre-hooks wait for each bucket's "gathered".
  if (r.deferred_gathers > 0) body["param_gather"] = true;
  (void)Send(fd, body, {});
}

void TrainerHub::SendGathered(int64_t step, int buffer, int bucket, bool ok) {
  absl::MutexLock lock(&mu_);
  if (gathers_left_ > 0) --gathers_left_;
  // Another trainer attached since the result: it maps the buffers anew.
  if (conn_.get() < 0 || gathers_for_ != attach_count_) return;
  (void)Send(conn_.get(), {{"type", "gathered"},
                           {"step", step},
                           {"buffer", buffer},
                           {"bucket", bucket},
                           {"ok", ok}});
}

absl::Status TrainerHub::Send(int fd, const nlohmann::json& body,
                              absl::Span<const int> fds) {
  absl::MutexLock lock(&send_mu_);
  return SendMessage(fd, body, fds, options_.io_timeout_ms);
}

void TrainerHub::SetWaiting(const std::string& why) {
  {
    absl::MutexLock lock(&mu_);
    waiting_ = why;
    if (conn_.get() < 0 || waiting_ == sent_waiting_) return;
  }
  // A step's exchange holds the connection: the daemon is not waiting.
  if (!io_mu_.TryLock()) return;
  {
    absl::MutexLock lock(&mu_);
    if (conn_.get() >= 0 && waiting_ != sent_waiting_ &&
        Send(conn_.get(), {{"type", "waiting"}, {"reason", waiting_}}, {})
            .ok()) {
      sent_waiting_ = waiting_;
    }
  }
  io_mu_.Unlock();
}

void TrainerHub::SendDone(bool failed, const std::string& reason) {
  absl::MutexLock io(&io_mu_);
  absl::MutexLock lock(&mu_);
  done_ =
      nlohmann::json{{"type", "done"}, {"failed", failed}, {"reason", reason}};
  for (const device::OwnedFd& waiter : position_waiters_) {
    (void)SendMessage(waiter.get(), *done_, {}, options_.io_timeout_ms);
  }
  position_waiters_.clear();
  if (conn_.get() < 0) return;
  (void)Send(conn_.get(), *done_, {});
}

bool TrainerHub::attached() const {
  absl::MutexLock lock(&mu_);
  return conn_.get() >= 0;
}

int64_t TrainerHub::attach_count() const {
  absl::MutexLock lock(&mu_);
  return attach_count_;
}

}  // namespace zshard::trainer
