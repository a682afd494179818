// Pickles: what the writer writes the reader reads back (every kind of
// value, integers of every width), pickles of Python's own making
// (memo, protocol 4 opcodes) are read, and damaged or unknown input is
// refused in one line.
#include <cmath>
#include <limits>
#include <string>

#include "common/checkpoint/pickle_reader.h"
#include "common/checkpoint/pickle_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zshard::checkpoint {
namespace {

using ::testing::HasSubstr;
using Kind = PickleValue::Kind;

TEST(PickleTest, IntegersOfEveryWidthRoundTrip) {
  const int64_t values[] = {0,
                            1,
                            255,
                            256,
                            65535,
                            65536,
                            -1,
                            -129,
                            std::numeric_limits<int32_t>::max(),
                            std::numeric_limits<int32_t>::min(),
                            int64_t{1} << 31,
                            -(int64_t{1} << 31) - 1,
                            int64_t{1} << 40,
                            -(int64_t{1} << 40),
                            std::numeric_limits<int64_t>::max(),
                            std::numeric_limits<int64_t>::min()};
  PickleWriter w;
  w.EmptyList();
  w.Mark();
  for (int64_t v : values) w.Int(v);
  w.Appends();
  const std::string bytes = w.Finish();
  absl::StatusOr<PickleDocument> doc = ReadPickle(bytes, "ints");
  ASSERT_TRUE(doc.ok()) << doc.status();
  const PickleValue* list = doc->root();
  ASSERT_EQ(list->kind, Kind::kList);
  ASSERT_EQ(list->items.size(), std::size(values));
  for (size_t i = 0; i < std::size(values); ++i) {
    EXPECT_EQ(list->items[i]->kind, Kind::kInt);
    EXPECT_EQ(list->items[i]->integer, values[i]) << i;
  }
}

TEST(PickleTest, EveryKindRoundTrips) {
  PickleWriter w;
  w.EmptyDict();
  w.Mark();
  w.String("none");
  w.None();
  w.String("flags");
  w.Bool(true);
  w.Bool(false);
  w.SmallTuple(2);
  w.String("float");
  w.Float(-0.1);
  w.String("tuple4");
  w.Mark();
  for (int i = 0; i < 4; ++i) w.Int(i);
  w.Tuple();
  w.String("call");
  w.Global("collections", "OrderedDict");
  w.EmptyTuple();
  w.Reduce();  // an OrderedDict(): a dict
  w.EmptyDict();
  w.Build();
  w.String("pid");
  w.Mark();
  w.String("storage");
  w.Int(7);
  w.Tuple();
  w.PersistentId();
  w.String("other call");
  w.Global("torch._utils", "_rebuild_tensor_v2");
  w.Int(1);
  w.SmallTuple(1);
  w.Reduce();
  w.String("\xc3\xa9t\xc3\xa9");  // UTF-8 passes as is
  w.EmptyList();
  w.SetItems();
  absl::StatusOr<PickleDocument> doc = ReadPickle(w.Finish(), "kinds");
  ASSERT_TRUE(doc.ok()) << doc.status();
  const PickleValue* d = doc->root();
  ASSERT_EQ(d->kind, Kind::kDict);
  ASSERT_EQ(d->dict.size(), 8u);
  EXPECT_EQ(d->dict[0].first->text, "none");
  EXPECT_EQ(d->dict[0].second->kind, Kind::kNone);
  const PickleValue* flags = d->dict[1].second;
  ASSERT_EQ(flags->kind, Kind::kTuple);
  EXPECT_TRUE(flags->items[0]->boolean);
  EXPECT_FALSE(flags->items[1]->boolean);
  EXPECT_EQ(d->dict[2].second->number, -0.1);
  EXPECT_EQ(d->dict[3].second->items.size(), 4u);
  EXPECT_EQ(d->dict[4].second->kind, Kind::kDict);
  ASSERT_NE(d->dict[4].second->state, nullptr);
  const PickleValue* pid = d->dict[5].second;
  ASSERT_EQ(pid->kind, Kind::kPersistentId);
  EXPECT_EQ(pid->args->items[1]->integer, 7);
  const PickleValue* call = d->dict[6].second;
  ASSERT_EQ(call->kind, Kind::kCall);
  EXPECT_TRUE(call->callable->IsGlobal("torch._utils", "_rebuild_tensor_v2"));
  EXPECT_EQ(call->args->items[0]->integer, 1);
  EXPECT_EQ(d->dict[6].first->text, "other call");
  EXPECT_EQ(d->dict[7].first->text, "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(d->dict[7].second->kind, Kind::kList);
}

TEST(PickleTest, FloatsKeepTheirBits) {
  for (double v : {0.0, -0.0, 1e-308, 5e-324, 0.001, 1e300,
                   std::numeric_limits<double>::infinity()}) {
    PickleWriter w;
    w.Float(v);
    absl::StatusOr<PickleDocument> doc = ReadPickle(w.Finish(), "f");
    ASSERT_TRUE(doc.ok());
    EXPECT_EQ(doc->root()->number, v);
    EXPECT_EQ(std::signbit(doc->root()->number), std::signbit(v));
  }
}

// pickle.dumps([("ab", "ab")], protocol=2) shares the string through the
// memo: one value, twice.
TEST(PickleTest, ReadsTheMemo) {
  const std::string bytes(
      "\x80\x02]q\x00X\x02\x00\x00\x00"
      "ab"
      "q\x01h\x01\x86q\x02"
      "a.",
      21);
  absl::StatusOr<PickleDocument> doc = ReadPickle(bytes, "memo");
  ASSERT_TRUE(doc.ok()) << doc.status();
  const PickleValue* pair = doc->root()->items[0];
  ASSERT_EQ(pair->items.size(), 2u);
  EXPECT_EQ(pair->items[0], pair->items[1]);
  EXPECT_EQ(pair->items[0]->text, "ab");
}

// pickle.dumps({"a": ("m", "n")}, protocol=4): FRAME, SHORT_BINUNICODE,
// MEMOIZE.
TEST(PickleTest, ReadsProtocol4) {
  const std::string bytes(
      "\x80\x04\x95\x12\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01"
      "a\x94\x8c\x01m\x94\x8c\x01n\x94\x86\x94s.",
      29);
  absl::StatusOr<PickleDocument> doc = ReadPickle(bytes, "p4");
  ASSERT_TRUE(doc.ok()) << doc.status();
  ASSERT_EQ(doc->root()->dict.size(), 1u);
  EXPECT_EQ(doc->root()->dict[0].first->text, "a");
  EXPECT_EQ(doc->root()->dict[0].second->items[1]->text, "n");
}

TEST(PickleTest, RefusesAnUnknownOpcode) {
  // 'I' (INT, protocol 0 text) is not read.
  absl::StatusOr<PickleDocument> doc =
      ReadPickle(std::string("\x80\x02I1\n.", 6), "x.pt data.pkl");
  EXPECT_EQ(doc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(doc.status().message(),
            "x.pt data.pkl: unknown pickle opcode 0x49 at byte 2");
}

TEST(PickleTest, RefusesDamagedPickles) {
  struct Case {
    std::string bytes;
    const char* message;
  };
  const Case cases[] = {
      {std::string("\x80\x02X\x09\x00\x00\x00"
                   "ab",
                   9),
       "p: damaged pickle: truncated operand at byte 2"},
      {std::string("\x80\x02N", 3),
       "p: damaged pickle: ends before STOP at "
       "byte 2"},
      {std::string("\x80\x02s.", 4),
       "p: damaged pickle: pop from an empty stack at byte 2"},
      {std::string("\x80\x02h\x05.", 5),
       "p: damaged pickle: memo entry 5 is not set at byte 2"},
      {std::string("\x80\x02NN.", 5),
       "p: damaged pickle: STOP with a stack that is not one value at byte 4"},
      {std::string("\x80\x02t.", 4), "p: damaged pickle: no MARK at byte 2"},
      {std::string("\x80\x02NNu.", 6), "p: damaged pickle: no MARK at byte 4"},
      {std::string("\x80\x02(N\x85.", 6),
       "p: damaged pickle: STOP with a stack that is not one value at byte 5"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<PickleDocument> doc = ReadPickle(c.bytes, "p");
    ASSERT_FALSE(doc.ok()) << c.message;
    EXPECT_EQ(doc.status().code(), absl::StatusCode::kDataLoss) << c.message;
    EXPECT_EQ(doc.status().message(), c.message);
  }
}

TEST(PickleTest, RefusesANewerProtocol) {
  absl::StatusOr<PickleDocument> doc =
      ReadPickle(std::string("\x80\x06N.", 4), "p");
  EXPECT_EQ(doc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(doc.status().message(), HasSubstr("pickle protocol 6"));
}

}  // namespace
}  // namespace zshard::checkpoint
