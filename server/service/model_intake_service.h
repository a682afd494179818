// A job started without a model (workload 'trainer') takes the model of
// its first trainer. Until one arrives there is no membership to serve:
// the leading coordinator serves ModelIntakeService instead, whose Join
// answers FAILED_PRECONDITION with the net::kAwaitingModelMetadataKey
// trailer (the job's name) and whose ProvideModel takes the model a worker
// got from its trainer's hello; every other RPC is answered by
// AwaitingModelService (FAILED_PRECONDITION saying what the job waits
// for). Once a model is taken the coordinator builds its Leadership with
// it, on the same address.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "common/job/job_spec.h"
#include "common/plan/model_spec.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::server {

// The model a worker gave (its trainer's model object as JSON), checked
// against the job: InvalidArgument when it does not parse or the job cannot
// run it (its plan at world.max fails, or the workload refuses it).
absl::StatusOr<plan::ModelSpec> CheckGivenModel(const job::JobSpec& job,
                                                const std::string& model_json);

// What a call gets while the job waits for its model.
std::string AwaitingModelMessage(const std::string& job_name);

class ModelIntakeService final : public v1::WorkerService::Service {
 public:
  // `take` is called for each ProvideModel with the worker's name and the
  // model JSON; its status is the answer.
  using Take = std::function<absl::Status(const std::string& worker,
                                          const std::string& model_json)>;
  ModelIntakeService(std::string job_name, Take take)
      : job_name_(std::move(job_name)), take_(std::move(take)) {}

  grpc::Status Join(grpc::ServerContext* ctx, const v1::JoinRequest* req,
                    v1::JoinResponse* resp) override;
  grpc::Status ProvideModel(grpc::ServerContext* ctx,
                            const v1::ProvideModelRequest* req,
                            v1::ProvideModelResponse* resp) override;

 private:
  const std::string job_name_;
  const Take take_;
};

// Every other method while the job waits for its model.
class AwaitingModelService final : public grpc::CallbackGenericService {
 public:
  explicit AwaitingModelService(std::string job_name)
      : job_name_(std::move(job_name)) {}
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* ctx) override;

 private:
  const std::string job_name_;
};

}  // namespace zshard::server
