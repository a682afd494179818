// SettleWindow: when changes still settle, and the reason a proposal gives
// for the changes it gathered.
#include "server/membership/transition/settle_window.h"

#include "gtest/gtest.h"

namespace zshard::server {
namespace {

TEST(SettleWindowTest, NoWindowSettlesNothing) {
  SettleWindow w;
  EXPECT_FALSE(w.Settling(0, 300, 10));
  EXPECT_FALSE(w.Close());
  EXPECT_EQ(w.ProposalReason(), "");
}

TEST(SettleWindowTest, QuietForOneWindowEndsIt) {
  SettleWindow w;
  w.Change("member a joined", 1000);
  EXPECT_TRUE(w.Settling(1000, 300, 10));
  EXPECT_TRUE(w.Settling(1299, 300, 10));
  EXPECT_FALSE(w.Settling(1300, 300, 10));
  // Settling <= 0: never waits.
  EXPECT_FALSE(w.Settling(1000, 0, 10));
}

TEST(SettleWindowTest, AStormIsCutAtMaxWindows) {
  SettleWindow w;
  // A change every 200 ms keeps the window open, up to 10 windows.
  for (int64_t t = 0; t < 3000; t += 200) w.Change("member joined", t);
  EXPECT_TRUE(w.Settling(2900, 300, 10));
  EXPECT_FALSE(w.Settling(3000, 300, 10));
  EXPECT_TRUE(w.Settling(3000, 300, 100));
}

TEST(SettleWindowTest, TheProposalCountsTheGatheredChanges) {
  SettleWindow w;
  w.Change("member a joined", 0);
  w.Change("member b joined", 10);
  w.Change("member c joined", 20);
  // Before the window closes no count is known.
  EXPECT_EQ(w.ProposalReason(), "member c joined");
  EXPECT_TRUE(w.Close());
  EXPECT_FALSE(w.Close());
  EXPECT_EQ(w.ProposalReason(),
            "member c joined (with 2 more changes gathered into this "
            "proposal)");
  EXPECT_EQ(w.TakeProposalReason(),
            "member c joined (with 2 more changes gathered into this "
            "proposal)");
  // The next proposal counts afresh.
  EXPECT_EQ(w.ProposalReason(), "member c joined");
}

TEST(SettleWindowTest, ASetReasonOpensNoWindow) {
  SettleWindow w;
  w.set_reason("epoch 3 timed out");
  EXPECT_EQ(w.reason(), "epoch 3 timed out");
  EXPECT_FALSE(w.Settling(0, 300, 10));
  EXPECT_FALSE(w.Close());
}

}  // namespace
}  // namespace zshard::server
