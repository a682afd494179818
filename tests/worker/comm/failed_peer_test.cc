// FailedPeer payloads, the closed-connection wording and the mapping of a
// Gloo error's address to its rank.
#include "client/worker/comm/failed_peer.h"

#include <string>
#include <vector>

#include "client/worker/comm/gloo_mesh.h"
#include "gtest/gtest.h"

namespace zshard::comm {
namespace {

TEST(FailedPeerTest, PayloadRoundTripsAndSurvivesANewMessage) {
  absl::Status s = WithFailedPeer(absl::UnavailableError("peer lost"),
                                  FailedPeer{"job/e3/intra/0", 1, true});
  std::optional<FailedPeer> peer = FailedPeerOf(s);
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->group, "job/e3/intra/0");
  EXPECT_EQ(peer->rank, 1);
  EXPECT_TRUE(peer->closed);
  EXPECT_FALSE(FailedPeerOf(s, kEpochPeerPayload).has_value());
  // A group name may hold the separator.
  s = WithFailedPeer(s, FailedPeer{"a|b", 5, false}, kEpochPeerPayload);
  peer = FailedPeerOf(s, kEpochPeerPayload);
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->group, "a|b");
  EXPECT_EQ(peer->rank, 5);
  EXPECT_FALSE(peer->closed);
  absl::Status renamed = WithMessage(s, "communicator failed earlier");
  EXPECT_EQ(renamed.message(), "communicator failed earlier");
  EXPECT_EQ(renamed.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FailedPeerOf(renamed)->rank, 1);
  EXPECT_EQ(FailedPeerOf(renamed, kEpochPeerPayload)->rank, 5);
}

TEST(FailedPeerTest, OkStatusesAndNoRankCarryNothing) {
  EXPECT_TRUE(WithFailedPeer(absl::OkStatus(), FailedPeer{"g", 1, true}).ok());
  absl::Status s =
      WithFailedPeer(absl::AbortedError("x"), FailedPeer{"g", -1, true});
  EXPECT_FALSE(FailedPeerOf(s).has_value());
  absl::Status bad = absl::UnavailableError("x");
  bad.SetPayload(kPeerPayload, absl::Cord("one|1|g"));
  EXPECT_FALSE(FailedPeerOf(bad).has_value());
}

TEST(FailedPeerTest, ClosedConnectionsAreToldFromBrokenLinks) {
  EXPECT_TRUE(
      SaysPeerClosed("Read error [10.0.0.3]:4100: "
                     "Connection reset by peer"));
  EXPECT_TRUE(SaysPeerClosed("Connection closed by peer [10.0.0.3]:4100"));
  EXPECT_TRUE(SaysPeerClosed("peer lost: rank 1 exited"));
  EXPECT_FALSE(SaysPeerClosed("Connect timeout [10.0.0.3]:4100"));
  EXPECT_FALSE(SaysPeerClosed("connect [10.0.0.3]:4100: Invalid argument"));
  EXPECT_FALSE(SaysPeerClosed("gloo wait for recv: timed out"));
}

TEST(FailedPeerTest, AnAddressIsMatchedWholeNotAsAPrefix) {
  const std::vector<std::string> addresses = {"[10.0.0.2]:45678", "",
                                              "[10.0.0.2]:4567"};
  EXPECT_EQ(PeerNamedBy(addresses, "Read error [10.0.0.2]:4567: reset"), 2);
  EXPECT_EQ(PeerNamedBy(addresses, "closed by peer [10.0.0.2]:45678"), 0);
  EXPECT_EQ(PeerNamedBy(addresses, "closed by peer [10.0.0.9]:4567"), -1);
  EXPECT_EQ(PeerNamedBy(addresses, "no address here"), -1);
}

TEST(FailedPeerTest, AnEphemeralPortIsNamedByItsHostWhenTheHostIsOnePeers) {
  const std::vector<std::string> addresses = {
      "[10.0.0.2]:4567", "", "[10.0.0.3]:4567", "[10.0.0.3]:4600"};
  // The accepting side prints the connecting peer's ephemeral port.
  EXPECT_EQ(PeerNamedBy(addresses, "Read error [10.0.0.2]:51234: reset"), 0);
  // Two peers on that host: unknown.
  EXPECT_EQ(PeerNamedBy(addresses, "Read error [10.0.0.3]:51234: reset"), -1);
  // The published address still names exactly.
  EXPECT_EQ(PeerNamedBy(addresses, "closed by peer [10.0.0.3]:4600"), 3);
}

}  // namespace
}  // namespace zshard::comm
