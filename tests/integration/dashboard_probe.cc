// DashboardProbe: one stub per channel, every call with a deadline.

#include "tests/integration/dashboard_probe.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <regex>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace zshard::testing {
namespace {

std::unique_ptr<grpc::ClientContext> Context(int64_t timeout_ms) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(timeout_ms));
  return context;
}

std::optional<int64_t> FirstNumber(const std::string& text,
                                   const std::regex& pattern) {
  std::smatch match;
  if (!std::regex_search(text, match, pattern)) return std::nullopt;
  return std::strtoll(match[1].str().c_str(), nullptr, 10);
}

}  // namespace

DashboardProbe::DashboardProbe(std::string address, int64_t timeout_ms)
    : address_(std::move(address)), timeout_ms_(timeout_ms) {}

v1::DashboardService::Stub* DashboardProbe::stub() {
  if (stub_ == nullptr) {
    channel_ =
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    stub_ = v1::DashboardService::NewStub(channel_);
  }
  return stub_.get();
}

absl::Status DashboardProbe::Failed(absl::string_view what,
                                    const grpc::Status& status) {
  stub_.reset();
  channel_.reset();
  return absl::UnavailableError(absl::StrCat(what, " failed: code ",
                                             status.error_code(), " ",
                                             status.error_message()));
}

absl::StatusOr<v1::GetClusterStatusResponse> DashboardProbe::Status() {
  v1::GetClusterStatusResponse response;
  grpc::Status s = stub()->GetClusterStatus(
      Context(timeout_ms_).get(), v1::GetClusterStatusRequest(), &response);
  if (!s.ok()) return Failed("GetClusterStatus", s);
  return response;
}

absl::StatusOr<std::vector<v1::Event>> DashboardProbe::Events() {
  std::vector<v1::Event> events;
  v1::ListEventsRequest request;
  request.set_page_size(1000);
  while (true) {
    v1::ListEventsResponse response;
    grpc::Status s =
        stub()->ListEvents(Context(timeout_ms_).get(), request, &response);
    if (!s.ok()) return Failed("ListEvents", s);
    events.insert(events.end(), response.events().begin(),
                  response.events().end());
    if (!response.more() || response.next_seq() <= request.after_seq()) break;
    request.set_after_seq(response.next_seq());
  }
  return events;
}

absl::StatusOr<std::vector<v1::Reshard>> DashboardProbe::Reshards() {
  v1::GetReshardHistoryResponse response;
  v1::GetReshardHistoryRequest request;
  request.set_limit(1000);
  grpc::Status s =
      stub()->GetReshardHistory(Context(timeout_ms_).get(), request, &response);
  if (!s.ok()) return Failed("GetReshardHistory", s);
  return std::vector<v1::Reshard>(response.reshards().begin(),
                                  response.reshards().end());
}

absl::StatusOr<std::vector<v1::CheckpointManifest>>
DashboardProbe::Checkpoints() {
  ZSHARD_ASSIGN_OR_RETURN(v1::ListCheckpointsResponse response,
                          CheckpointList());
  return std::vector<v1::CheckpointManifest>(response.checkpoints().begin(),
                                             response.checkpoints().end());
}

absl::StatusOr<v1::ListCheckpointsResponse> DashboardProbe::CheckpointList() {
  v1::ListCheckpointsResponse response;
  grpc::Status s = stub()->ListCheckpoints(
      Context(timeout_ms_).get(), v1::ListCheckpointsRequest(), &response);
  if (!s.ok()) return Failed("ListCheckpoints", s);
  return response;
}

std::vector<v1::Event> EventsOfKind(const std::vector<v1::Event>& events,
                                    absl::string_view kind, int64_t after_seq) {
  std::vector<v1::Event> out;
  for (const v1::Event& e : events) {
    if (e.kind() == kind && e.seq() > after_seq) out.push_back(e);
  }
  return out;
}

int64_t LastSeq(const std::vector<v1::Event>& events) {
  int64_t seq = 0;
  for (const v1::Event& e : events) seq = std::max(seq, e.seq());
  return seq;
}

std::string DescribeEvents(const std::vector<v1::Event>& events) {
  std::string out;
  for (const v1::Event& e : events) {
    absl::StrAppend(&out, e.seq(), " ", e.kind(), " epoch ", e.epoch(), ": ",
                    e.reason(), "\n");
  }
  return out;
}

std::optional<int64_t> BytesInReason(const std::string& reason) {
  static const std::regex kBytes(R"(([0-9]+) bytes)");
  return FirstNumber(reason, kBytes);
}

std::optional<int64_t> LowerBoundInReason(const std::string& reason) {
  static const std::regex kLowerBound(R"(lower bound:? ([0-9]+))");
  return FirstNumber(reason, kLowerBound);
}

const v1::MemberStatus* FindMemberStatus(
    const v1::GetClusterStatusResponse& status, absl::string_view name) {
  for (const v1::MemberStatus& m : status.members()) {
    if (m.name() == name) return &m;
  }
  return nullptr;
}

std::vector<v1::MemberStatus> RankedMembers(
    const v1::GetClusterStatusResponse& status) {
  std::vector<v1::MemberStatus> out;
  for (const v1::MemberStatus& m : status.members()) {
    if (m.state() == v1::MEMBER_STATE_ACTIVE && m.rank() >= 0) {
      out.push_back(m);
    }
  }
  return out;
}

int64_t MinRankedStep(const v1::GetClusterStatusResponse& status) {
  int64_t step = -1;
  for (const v1::MemberStatus& m : RankedMembers(status)) {
    step = step < 0 ? m.step() : std::min(step, m.step());
  }
  return step;
}

}  // namespace zshard::testing
