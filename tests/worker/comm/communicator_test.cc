// Tests of the Communicator's argument checks and options, on a group of
// one (no peers needed).
#include "client/worker/comm/communicator.h"

#include <vector>

#include "gtest/gtest.h"

namespace zshard::comm {
namespace {

std::unique_ptr<Communicator> Solo() {
  CommOptions options;  // rank 0 of 1, no store needed
  auto comm = CreateCommunicator(options);
  EXPECT_TRUE(comm.ok()) << comm.status();
  return comm.ok() ? std::move(comm).value() : nullptr;
}

TEST(CommunicatorTest, RejectsBadOptions) {
  CommOptions o;
  o.size = 0;
  EXPECT_EQ(ValidateCommOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o.size = 2;
  o.rank = 2;
  EXPECT_EQ(ValidateCommOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o.rank = 1;
  EXPECT_EQ(CreateCommunicator(o).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "a group of two needs a store";
  o = CommOptions();
  o.timeout_ms = 0;
  EXPECT_EQ(ValidateCommOptions(o).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CommunicatorTest, GroupOfOneCopies) {
  auto comm = Solo();
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->backend(), "gloo");
  std::vector<float> in = {1, 2, 3}, out(3);
  ASSERT_TRUE(comm->ReduceScatter(in.data(), out.data(), 3, DataType::kFp32,
                                  ReduceOp::kSum)
                  .ok());
  EXPECT_EQ(out, in);
  ASSERT_TRUE(
      comm->AllReduce(in.data(), 3, DataType::kFp32, ReduceOp::kMax).ok());
  EXPECT_TRUE(comm->Barrier().ok());
}

TEST(CommunicatorTest, RejectsBadArguments) {
  auto comm = Solo();
  ASSERT_NE(comm, nullptr);
  std::vector<float> buf(8);
  EXPECT_EQ(comm->AllReduce(nullptr, 4, DataType::kFp32, ReduceOp::kSum).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      comm->AllReduce(buf.data(), 4, static_cast<DataType>(99), ReduceOp::kSum)
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      comm->AllReduce(buf.data(), 4, DataType::kFp32, static_cast<ReduceOp>(7))
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->Send(0, buf.data(), 4, 0).code(),
            absl::StatusCode::kInvalidArgument)
      << "sending to oneself";
  EXPECT_EQ(comm->Recv(3, buf.data(), 4, 0).code(),
            absl::StatusCode::kInvalidArgument);
  // Partial overlap of send and receive buffers.
  EXPECT_EQ(comm->ReduceScatter(buf.data(), buf.data() + 1, 4, DataType::kFp32,
                                ReduceOp::kSum)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->AllReduce(buf.data(), size_t{1} << 62, DataType::kFp32,
                            ReduceOp::kSum)
                .code(),
            absl::StatusCode::kInvalidArgument)
      << "size overflow";
}

TEST(CommunicatorTest, AbortFailsLaterOperations) {
  auto comm = Solo();
  ASSERT_NE(comm, nullptr);
  comm->Abort();
  comm->Abort();  // idempotent
  float x = 1;
  EXPECT_EQ(comm->AllReduce(&x, 1, DataType::kFp32, ReduceOp::kSum).code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(comm->Barrier().code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace zshard::comm
