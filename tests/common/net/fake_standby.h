// A standby coordinator as clients see it (common/net/leader_redirect.h):
// a gRPC server on 127.0.0.1 that answers every call of every service
// UNAVAILABLE, "standby coordinator: the leader is HOST:PORT", with the
// leader's address in the trailing metadata (or "... no leader yet" and no
// metadata). For the client tests of the worker, zshardctl and the load
// generator.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/server.h"

namespace zshard::testing {

// Thread-safe. Shuts its server down when destroyed.
class FakeStandby {
 public:
  // Starts on 127.0.0.1:0 naming `leader` ("" for no leader yet).
  static absl::StatusOr<std::unique_ptr<FakeStandby>> Start(
      const std::string& leader);
  ~FakeStandby();
  FakeStandby(const FakeStandby&) = delete;
  FakeStandby& operator=(const FakeStandby&) = delete;

  // 127.0.0.1:PORT.
  const std::string& address() const { return address_; }
  // The leader named from now on ("" for none).
  void set_leader(const std::string& leader);
  // Calls answered so far, and the method of the last one
  // ("/zshard.v1.WorkerService/Join").
  int calls() const;
  std::string last_method() const;

 private:
  class Service;
  FakeStandby();

  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace zshard::testing
