// Progress: nothing within the delay, then one line per change off a
// terminal, or one line rewritten in place (and erased at the end) on one.
#include "client/ctl/progress.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/clock.h"
#include "gtest/gtest.h"

namespace zshard::ctl {
namespace {

class ProgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = open_memstream(&buffer_, &size_);
    ASSERT_NE(out_, nullptr);
  }
  void TearDown() override {
    std::fclose(out_);
    std::free(buffer_);
  }
  std::string Written() {
    std::fflush(out_);
    return std::string(buffer_, size_);
  }
  ProgressOptions Options(bool terminal) {
    ProgressOptions o;
    o.out = out_;
    o.terminal = terminal;
    o.clock = &clock_;
    return o;
  }

  FakeClock clock_{5000};
  std::FILE* out_ = nullptr;
  char* buffer_ = nullptr;
  size_t size_ = 0;
};

TEST_F(ProgressTest, LinesAppearAfterTheDelayOncePerChange) {
  Progress p("drain", Options(false));
  p.Update("worker w1 is DRAINING");
  clock_.AdvanceMs(999);
  p.Update("worker w1 is DRAINING");
  EXPECT_EQ(Written(), "");
  clock_.AdvanceMs(1);
  p.Update("worker w1 is DRAINING");
  p.Update("worker w1 is DRAINING");
  clock_.AdvanceMs(500);
  p.Update("epoch 4 is moving its state");
  p.Done();
  EXPECT_EQ(Written(),
            "zshardctl drain: worker w1 is DRAINING\n"
            "zshardctl drain: epoch 4 is moving its state\n");
}

TEST_F(ProgressTest, ATerminalLineIsRewrittenAndErased) {
  {
    Progress p("drain", Options(true));
    p.Update("hidden");
    clock_.AdvanceMs(2500);
    p.Update("waiting");
    clock_.AdvanceMs(1000);
    p.Update("waiting");
  }  // the destructor ends it
  EXPECT_EQ(Written(),
            "\r\033[Kzshardctl drain: waiting (2s)"
            "\r\033[Kzshardctl drain: waiting (3s)"
            "\r\033[K");
}

TEST_F(ProgressTest, NothingToEraseWhenNothingWasShown) {
  Progress p("drain", Options(true));
  p.Update("quick");
  p.Done();
  p.Done();
  p.Update("after done");
  EXPECT_EQ(Written(), "");
}

}  // namespace
}  // namespace zshard::ctl
