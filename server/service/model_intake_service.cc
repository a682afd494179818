#include "server/service/model_intake_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/job/workload_model.h"
#include "common/net/awaiting_model.h"
#include "common/plan/plan.h"

namespace zshard::server {

absl::StatusOr<plan::ModelSpec> CheckGivenModel(const job::JobSpec& job,
                                                const std::string& model_json) {
  absl::StatusOr<plan::ModelSpec> model = plan::ParseModelSpec(model_json);
  if (!model.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the trainer's model spec is invalid: ", model.status().message()));
  }
  absl::Status runs = job::CheckWorkloadModel(job.workload.kind, *model);
  if (runs.ok()) {
    runs = plan::MakePlan(*model, job::JobPlanOptions(job, job.world.max))
               .status();
  }
  if (!runs.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the trainer's model cannot run job '", job.name,
                     "': ", runs.message()));
  }
  return model;
}

std::string AwaitingModelMessage(const std::string& job_name) {
  return absl::StrCat("job '", job_name,
                      "' has no model yet: it takes the model of the first "
                      "trainer that attaches to a worker");
}

grpc::Status ModelIntakeService::Join(grpc::ServerContext* ctx,
                                      const v1::JoinRequest*,
                                      v1::JoinResponse*) {
  ctx->AddTrailingMetadata(net::kAwaitingModelMetadataKey, job_name_);
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      AwaitingModelMessage(job_name_));
}

grpc::Status ModelIntakeService::ProvideModel(
    grpc::ServerContext*, const v1::ProvideModelRequest* req,
    v1::ProvideModelResponse*) {
  if (req->name().empty() || req->model_json().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "ProvideModel needs the worker's name and a model");
  }
  return ToGrpcStatus(take_(req->name(), req->model_json()));
}

grpc::ServerGenericBidiReactor* AwaitingModelService::CreateReactor(
    grpc::GenericCallbackServerContext*) {
  class Reactor final : public grpc::ServerGenericBidiReactor {
   public:
    explicit Reactor(const std::string& message) {
      Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, message));
    }
    void OnDone() override { delete this; }
  };
  return new Reactor(AwaitingModelMessage(job_name_));
}

}  // namespace zshard::server
