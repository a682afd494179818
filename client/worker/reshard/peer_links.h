// PeerLinks: the host communicators of one StateMover run, one 2-member
// group per peer this member exchanges moves with. The pair of members
// a < b (worker ids) meets in group "<prefix>/<a>/<b>" of the epoch-scoped
// rendezvous store, a taking rank 0; both ends derive the name from their
// own moves alone, so a member needs no list of the other participants.
// Links are joined on first use and closed (a barrier, then dropped) after
// the last move with that peer, so a member holds a connection only to the
// peers it still has moves with.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/comm/communicator.h"
#include "client/worker/comm/kv_store.h"
#include "client/worker/reshard/abortable_store.h"

namespace zshard::reshard {

struct PeerLinkOptions {
  // This member's worker id. Required.
  std::string self;
  // Rendezvous store scoped to the epoch. Not owned. Required for Open.
  comm::KvStore* store = nullptr;
  // Prefix of the pairs' group names. Default "moves".
  std::string group = "moves";
  // Bound on each rendezvous and on every operation. Default 30 s.
  int64_t timeout_ms = 30000;
  // Local address to listen on (tcp). Default loopback.
  std::string hostname = "127.0.0.1";
  // How the two members exchange bytes. Default kAuto.
  comm::HostTransport host_transport = comm::HostTransport::kAuto;
  // Raised by the owner's Abort; rendezvous waits end promptly once it is
  // (Aborted). Not owned. Required.
  const std::atomic<bool>* aborted = nullptr;
};

// Open and Close from one thread; Abort from any. Destroying the links
// drops every open communicator without a barrier (after an error).
class PeerLinks {
 public:
  explicit PeerLinks(PeerLinkOptions options);
  ~PeerLinks();
  PeerLinks(const PeerLinks&) = delete;
  PeerLinks& operator=(const PeerLinks&) = delete;

  // "<group>/<a>/<b>" for the sorted pair {a, b}.
  static std::string GroupName(const std::string& group, const std::string& a,
                               const std::string& b);

  // The communicator shared with `peer` (!= self), joining its rendezvous
  // on first use (blocks until the peer joins too). The communicator's
  // status, Aborted, or InvalidArgument without a store.
  absl::StatusOr<comm::Communicator*> Open(const std::string& peer);
  // `peer`'s rank in that communicator (0 when its id is the smaller).
  int PeerRank(const std::string& peer) const;
  // Meets `peer` in a barrier (neither end drops the connection while the
  // other may still read from it), then drops the communicator. OK when
  // none is open.
  absl::Status Close(const std::string& peer);
  // Aborts every open communicator, and any opened later. Thread-safe.
  void Abort();
  // Communicators open now.
  int open() const;

 private:
  const PeerLinkOptions options_;
  AbortableStore store_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<comm::Communicator>> open_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::reshard
