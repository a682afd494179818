// TrainerHub's part for model-parallel jobs: the position a trainer asks for
// before it builds its slot's module, and the position fields of each step.

#include <string>
#include <utility>

#include "client/worker/trainer/trainer_hub.h"
#include "client/worker/trainer/trainer_protocol.h"
#include "common/logging.h"

namespace zshard::trainer {
namespace {

nlohmann::json PositionFields(const ModelParallelStep& p) {
  return {{"tp_rank", p.tp},      {"pp_rank", p.pp},
          {"cp_rank", p.cp},      {"replica", p.replica},
          {"tensor", p.tensor},   {"pipeline", p.pipeline},
          {"context", p.context}, {"rank", p.rank}};
}

}  // namespace

void AddModelParallel(const ModelParallelStep& position,
                      nlohmann::json& message) {
  message["tp_rank"] = position.tp;
  message["pp_rank"] = position.pp;
  message["cp_rank"] = position.cp;
  message["replica"] = position.replica;
  message["model_parallel"] = {
      {"init_method", position.init_method},
      {"generation", position.generation},
      {"rank", position.rank},
      {"world", position.tensor * position.pipeline * position.context},
      {"tensor", position.tensor},
      {"pipeline", position.pipeline},
      {"context", position.context}};
}

nlohmann::json TrainerHub::PositionMessage() const {
  nlohmann::json message = PositionFields(*position_);
  message["type"] = "position";
  message["job"] = job_name_;
  return message;
}

void TrainerHub::AnswerPosition(device::OwnedFd conn,
                                const nlohmann::json& query) {
  const absl::Status speaks = CheckProtocolVersion(query);
  absl::MutexLock lock(&mu_);
  if (!speaks.ok()) {
    (void)SendMessage(
        conn.get(),
        {{"type", "error"}, {"message", std::string(speaks.message())}}, {},
        options_.io_timeout_ms);
    return;
  }
  if (done_.has_value()) {
    (void)SendMessage(conn.get(), *done_, {}, options_.io_timeout_ms);
  } else if (position_.has_value()) {
    (void)SendMessage(conn.get(), PositionMessage(), {},
                      options_.io_timeout_ms);
  } else if (!shutdown_) {
    position_waiters_.push_back(std::move(conn));
  }
}

absl::Status TrainerHub::SetPosition(
    const std::optional<ModelParallelStep>& position,
    const std::string& job_name, const plan::ModelSpec& slot_model) {
  if (position.has_value()) {
    absl::MutexLock lock(&mu_);
    position_ = position;
    const nlohmann::json message = PositionMessage();
    for (const device::OwnedFd& waiter : position_waiters_) {
      (void)SendMessage(waiter.get(), message, {}, options_.io_timeout_ms);
    }
    if (!position_waiters_.empty()) {
      ZSHARD_LOG_INFO("position told to waiting trainers",
                      {{"trainers", absl::StrCat(position_waiters_.size())},
                       {"position", message.dump()}});
    }
    position_waiters_.clear();
  } else {
    absl::MutexLock lock(&mu_);
    position_.reset();
    return absl::OkStatus();
  }
  return AdoptJob(job_name, slot_model);
}

}  // namespace zshard::trainer
