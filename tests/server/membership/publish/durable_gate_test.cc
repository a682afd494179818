// DurableGate: staged items are shown in order once their ticket is
// durable, never before they are sealed.
#include "server/membership/publish/durable_gate.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace zshard::server {
namespace {

using Shown = std::vector<std::string>;

TEST(DurableGateTest, ItemsAreShownInOrderOnceTheirTicketIsDurable) {
  DurableGate<std::string> gate;
  gate.Stage("a");
  gate.Stage("b");
  EXPECT_EQ(gate.Release(5), Shown());  // not sealed yet
  EXPECT_EQ(gate.Seal(7), Shown());
  gate.Stage("c");
  EXPECT_EQ(gate.Seal(8), Shown());
  gate.Stage("d");  // unsealed: waits even when 8 is durable
  EXPECT_EQ(gate.Release(6), Shown());
  EXPECT_EQ(gate.Release(8), Shown({"a", "b", "c"}));
  EXPECT_EQ(gate.Release(3), Shown());  // durable never goes back
  EXPECT_EQ(gate.Seal(8), Shown({"d"}));
  gate.Stage("e");
  EXPECT_EQ(gate.Seal(0), Shown({"e"}));  // no write to wait for
}

TEST(DurableGateTest, ALaterItemNeverOvertakesAnEarlierOne) {
  DurableGate<std::string> gate;
  gate.Stage("waits");
  EXPECT_EQ(gate.Seal(2), Shown());
  gate.Stage("empty write");  // sealed with an older ticket
  EXPECT_EQ(gate.Seal(1), Shown());
  EXPECT_EQ(gate.Release(1), Shown());
  EXPECT_EQ(gate.Release(2), Shown({"waits", "empty write"}));
}

}  // namespace
}  // namespace zshard::server
