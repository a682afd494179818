// A cancellable full-mesh connect for Gloo's TCP transport: the same
// rendezvous as gloo::rendezvous::Context::connectFullMesh (every rank
// publishes its pairs' addresses, then connects each pair), except that a
// cancellation closes the pairs still waiting, so a rank whose peer never
// comes (or died after publishing its address) stops promptly instead of
// waiting out every pair's connect timeout.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/device.h"

namespace zshard::comm {

// A rendezvous context whose pairs ConnectMesh connects.
class MeshContext final : public gloo::rendezvous::Context {
 public:
  using gloo::rendezvous::Context::Context;

  // Makes `transport` (connected pairs on `device`) this context's.
  void Adopt(std::shared_ptr<gloo::transport::Device> device,
             std::shared_ptr<gloo::transport::Context> transport);

  // Each rank's pair address as Gloo's errors print it ("" for this rank
  // and for ranks not reached yet), so a failure's text names its peer.
  std::vector<std::string> peer_addresses;
};

// The rank whose address `message` (a Gloo error) names, or -1: its
// published address, or else its host when no other rank shares it (the
// side that accepted a connection prints the peer's ephemeral port).
int PeerNamedBy(const std::vector<std::string>& addresses,
                const std::string& message);

// Connects `context`'s rank to every other rank through `store`, each pair
// bounded by the context's timeout. `cancelled` (may be empty) is polled
// every 20 ms while connecting; once it returns true the pairs are closed
// and this returns false promptly, leaving `context` unconnected. Returns
// true when every pair is connected. Throws Gloo's exceptions (a store
// failure, a connect timeout, a refused connection) as connectFullMesh
// does, unless cancelled; when a pair's connect threw, `failed_peer` (may
// be null) is that pair's rank, else -1.
bool ConnectMesh(gloo::rendezvous::Store& store,
                 const std::shared_ptr<gloo::transport::Device>& device,
                 MeshContext& context, const std::function<bool()>& cancelled,
                 int* failed_peer);

}  // namespace zshard::comm
