// PeerLinks: pair communicators joined lazily, closed with a barrier,
// all reachable by Abort.
#include "client/worker/reshard/peer_links.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace zshard::reshard {

PeerLinks::PeerLinks(PeerLinkOptions options)
    : options_(std::move(options)), store_(options_.store, options_.aborted) {}

PeerLinks::~PeerLinks() = default;

std::string PeerLinks::GroupName(const std::string& group, const std::string& a,
                                 const std::string& b) {
  return a < b ? absl::StrCat(group, "/", a, "/", b)
               : absl::StrCat(group, "/", b, "/", a);
}

int PeerLinks::PeerRank(const std::string& peer) const {
  return peer < options_.self ? 0 : 1;
}

absl::StatusOr<comm::Communicator*> PeerLinks::Open(const std::string& peer) {
  {
    absl::MutexLock lock(&mu_);
    auto it = open_.find(peer);
    if (it != open_.end()) return it->second.get();
  }
  if (options_.store == nullptr) {
    return absl::InvalidArgumentError(
        "state moves: a rendezvous store is required for member moves");
  }
  if (peer == options_.self) {
    return absl::InvalidArgumentError(
        absl::StrCat("state moves: no link from ", peer, " to itself"));
  }
  comm::CommOptions co;
  co.rank = 1 - PeerRank(peer);
  co.size = 2;
  co.group = GroupName(options_.group, options_.self, peer);
  co.store = &store_;
  co.timeout_ms = options_.timeout_ms;
  co.hostname = options_.hostname;
  co.host_transport = options_.host_transport;
  ZSHARD_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> comm,
                          comm::CreateCommunicator(co));
  absl::MutexLock lock(&mu_);
  comm::Communicator* out = comm.get();
  open_[peer] = std::move(comm);
  // An Abort that came while joining found no communicator to abort.
  if (options_.aborted->load()) out->Abort();
  return out;
}

absl::Status PeerLinks::Close(const std::string& peer) {
  comm::Communicator* comm = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = open_.find(peer);
    if (it == open_.end()) return absl::OkStatus();
    comm = it->second.get();
  }
  // Only this thread removes entries: `comm` stays valid here.
  absl::Status barrier = comm->Barrier();
  std::unique_ptr<comm::Communicator> closing;
  {
    absl::MutexLock lock(&mu_);
    auto it = open_.find(peer);
    closing = std::move(it->second);
    open_.erase(it);
  }
  return barrier;
}

void PeerLinks::Abort() {
  absl::MutexLock lock(&mu_);
  for (auto& [peer, comm] : open_) comm->Abort();
}

int PeerLinks::open() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(open_.size());
}

}  // namespace zshard::reshard
