// ConnectMesh: connectFullMesh's rendezvous with a watcher that closes the
// pairs when the connect is cancelled.
#include "client/worker/comm/gloo_mesh.h"

#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gloo/common/error.h"
#include "gloo/transport/context.h"
#include "gloo/transport/pair.h"
#include "gloo/transport/tcp/address.h"

namespace zshard::comm {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

// Closes every pair of `transport` once `cancelled` returns true, until
// stopped. The pairs must all exist before it starts.
class CancelWatcher {
 public:
  CancelWatcher(gloo::transport::Context* transport, int rank, int size,
                std::function<bool()> cancelled)
      : transport_(transport),
        rank_(rank),
        size_(size),
        cancelled_(std::move(cancelled)) {
    if (cancelled_) thread_ = std::thread([this] { Run(); });
  }

  ~CancelWatcher() { Stop(); }

  // Ends the watch; returns whether the pairs were closed.
  bool Stop() {
    {
      absl::MutexLock lock(&mu_);
      stopped_ = true;
    }
    if (thread_.joinable()) thread_.join();
    absl::MutexLock lock(&mu_);
    return closed_;
  }

  bool closed() {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

 private:
  void Run() {
    absl::MutexLock lock(&mu_);
    while (!stopped_) {
      if (cancelled_()) {
        closed_ = true;
        for (int i = 0; i < size_; ++i) {
          if (i == rank_) continue;
          try {
            std::unique_ptr<gloo::transport::Pair>& pair =
                transport_->getPair(i);
            if (pair) pair->close();
          } catch (const std::exception&) {
            // A pair that already failed is closed either way.
          }
        }
        return;
      }
      mu_.AwaitWithTimeout(absl::Condition(&stopped_), kPollInterval);
    }
  }

  gloo::transport::Context* const transport_;
  const int rank_;
  const int size_;
  const std::function<bool()> cancelled_;
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace

void MeshContext::Adopt(std::shared_ptr<gloo::transport::Device> device,
                        std::shared_ptr<gloo::transport::Context> transport) {
  device_ = std::move(device);
  transportContext_ = std::move(transport);
}

namespace {

// "[10.0.0.2]" of "[10.0.0.2]:4567" (Gloo's form), or "".
std::string HostPart(const std::string& address) {
  const size_t close = address.find(']');
  return address.empty() || address[0] != '[' || close == std::string::npos
             ? std::string()
             : address.substr(0, close + 1);
}

}  // namespace

int PeerNamedBy(const std::vector<std::string>& addresses,
                const std::string& message) {
  for (size_t i = 0; i < addresses.size(); ++i) {
    const std::string& a = addresses[i];
    if (a.empty()) continue;
    // "[10.0.0.2]:4567" must not match inside "[10.0.0.2]:45678".
    for (size_t at = message.find(a); at != std::string::npos;
         at = message.find(a, at + 1)) {
      const size_t end = at + a.size();
      if (end == message.size() ||
          !absl::ascii_isdigit(static_cast<unsigned char>(message[end]))) {
        return static_cast<int>(i);
      }
    }
  }
  // The side that accepted a pair's connection prints the peer's ephemeral
  // port, not the one it published: the host alone names the peer when no
  // other peer shares it (a pod or host per worker).
  int named = -1;
  for (size_t i = 0; i < addresses.size(); ++i) {
    const std::string host = HostPart(addresses[i]);
    if (host.empty() || message.find(host + ":") == std::string::npos) {
      continue;
    }
    // Peers that share the host, or two hosts named: unknown.
    if (named >= 0) return -1;
    named = static_cast<int>(i);
  }
  return named;
}

bool ConnectMesh(gloo::rendezvous::Store& store,
                 const std::shared_ptr<gloo::transport::Device>& device,
                 MeshContext& context, const std::function<bool()>& cancelled,
                 int* failed_peer) {
  const int rank = context.rank;
  const int size = context.size;
  int connecting = -1;
  if (failed_peer != nullptr) *failed_peer = -1;
  context.peer_addresses.assign(static_cast<size_t>(size), std::string());
  std::shared_ptr<gloo::transport::Context> transport =
      device->createContext(rank, size);
  transport->setTimeout(context.getTimeout());
  // Every pair listens before anything is published; its address goes into
  // this rank's entry, in peer order.
  std::vector<char> addresses;
  size_t address_size = 0;
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    const std::vector<char> bytes = transport->createPair(i)->address().bytes();
    address_size = bytes.size();
    addresses.insert(addresses.end(), bytes.begin(), bytes.end());
  }
  CancelWatcher watcher(transport.get(), rank, size, cancelled);
  try {
    store.set(std::to_string(rank), addresses);
    for (int i = 0; i < size; ++i) {
      if (i == rank) continue;
      const std::string key = std::to_string(i);
      store.wait({key}, context.getTimeout());
      const std::vector<char> peer = store.get(key);
      // Peer i's pair for this rank is its (rank < i ? rank : rank - 1)th.
      const size_t index = static_cast<size_t>(rank < i ? rank : rank - 1);
      if (peer.size() < (index + 1) * address_size) {
        throw gloo::IoException(
            absl::StrCat("rendezvous entry of rank ", i, " has ", peer.size(),
                         " bytes, too short for ", size - 1, " addresses"));
      }
      const std::vector<char> address(
          peer.begin() + index * address_size,
          peer.begin() + (index + 1) * address_size);
      if (watcher.closed()) return false;
      context.peer_addresses[static_cast<size_t>(i)] =
          gloo::transport::tcp::Address(address).str();
      // A pair closed by the watcher returns (or throws) at once.
      connecting = i;
      transport->getPair(i)->connect(address);
      connecting = -1;
    }
  } catch (const std::exception&) {
    if (watcher.Stop()) return false;
    if (failed_peer != nullptr) *failed_peer = connecting;
    throw;
  }
  if (watcher.Stop()) return false;
  context.Adopt(device, std::move(transport));
  return true;
}

}  // namespace zshard::comm
