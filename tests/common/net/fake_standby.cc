// FakeStandby: a callback generic service, so one reactor answers the
// methods of every service alike.

#include "tests/common/net/fake_standby.h"

#include "absl/strings/str_cat.h"
#include "common/net/leader_redirect.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace zshard::testing {

class FakeStandby::Service final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    std::string leader;
    {
      absl::MutexLock lock(&mu_);
      ++calls_;
      last_method_ = context->method();
      leader = leader_;
    }
    return new Refusal(context, leader);
  }

  void set_leader(const std::string& leader) {
    absl::MutexLock lock(&mu_);
    leader_ = leader;
  }
  int calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  std::string last_method() const {
    absl::MutexLock lock(&mu_);
    return last_method_;
  }

 private:
  // Ends the call at once, as a standby does.
  class Refusal final : public grpc::ServerGenericBidiReactor {
   public:
    Refusal(grpc::GenericCallbackServerContext* context,
            const std::string& leader) {
      if (!leader.empty()) {
        context->AddTrailingMetadata(net::kLeaderMetadataKey, leader);
      }
      Finish(grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          leader.empty() ? std::string("standby coordinator: no leader yet")
                         : "standby coordinator: the leader is " + leader));
    }
    void OnDone() override { delete this; }
  };

  mutable absl::Mutex mu_;
  std::string leader_ ABSL_GUARDED_BY(mu_);
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_method_ ABSL_GUARDED_BY(mu_);
};

FakeStandby::FakeStandby() : service_(std::make_unique<Service>()) {}

FakeStandby::~FakeStandby() {
  if (server_ != nullptr) server_->Shutdown();
}

absl::StatusOr<std::unique_ptr<FakeStandby>> FakeStandby::Start(
    const std::string& leader) {
  std::unique_ptr<FakeStandby> standby(new FakeStandby());
  standby->service_->set_leader(leader);
  grpc::ServerBuilder builder;
  builder.RegisterCallbackGenericService(standby->service_.get());
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  standby->server_ = builder.BuildAndStart();
  if (standby->server_ == nullptr || port == 0) {
    return absl::UnavailableError("fake standby cannot listen on 127.0.0.1");
  }
  standby->address_ = absl::StrCat("127.0.0.1:", port);
  return standby;
}

void FakeStandby::set_leader(const std::string& leader) {
  service_->set_leader(leader);
}

int FakeStandby::calls() const { return service_->calls(); }

std::string FakeStandby::last_method() const { return service_->last_method(); }

}  // namespace zshard::testing
