// DashboardService adapter: ListEvents and WatchEvents.
#include <algorithm>

#include "server/service/dashboard_service.h"
#include "server/service/rpc_scope.h"

namespace zshard::server {
namespace {

constexpr int kDefaultPage = 100;
constexpr int kMaxPage = 1000;

}  // namespace

grpc::Status DashboardServiceImpl::ListEvents(grpc::ServerContext*,
                                              const v1::ListEventsRequest* req,
                                              v1::ListEventsResponse* resp) {
  RpcScope scope(metrics_, "ListEvents");
  int limit = req->page_size() <= 0 ? kDefaultPage
                                    : std::min(req->page_size(), kMaxPage);
  EventPage page = membership_->events()->After(req->after_seq(), limit);
  for (const Event& e : page.events) ToProto(e, resp->add_events());
  resp->set_next_seq(page.next_seq);
  resp->set_more(page.more);
  return scope.Finish(grpc::Status::OK);
}

grpc::ServerWriteReactor<v1::Event>* DashboardServiceImpl::WatchEvents(
    grpc::CallbackServerContext*, const v1::WatchEventsRequest* req) {
  RpcScope scope(metrics_, "WatchEvents");
  scope.Finish(grpc::Status::OK);  // counts the opening; the stream runs on
  return watch_hub_.Open(req->after_seq());
}

}  // namespace zshard::server
