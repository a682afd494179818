// zshard-store-bench: the latency of the coordinator's state store writes
// on either store (--store as zshard-coordinator takes it; an etcd store
// campaigns for its prefix first, as the coordinator does). Writes, each
// one transaction: --writes small batches (one member upsert and one event:
// a join, a death, a drain), then --epochs epoch commits (every one of
// --members members rewritten, a new epoch row with --moves moves); then
// one Load. Reports p50, p99 and max of each kind, and the Load time.
//   zshard-store-bench --store sqlite:DIR|etcd:HOST:PORT/PREFIX
//                      [--members N] [--writes K] [--epochs E] [--moves M]
//                      [--output text|json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "server/store/store_spec.h"

ABSL_FLAG(std::string, store, "", "sqlite:DIR or etcd:HOST:PORT/PREFIX");
ABSL_FLAG(int, members, 1000, "members of the job");
ABSL_FLAG(int, writes, 200, "small batches (one member, one event)");
ABSL_FLAG(int, epochs, 10, "epoch commits (every member, one epoch)");
ABSL_FLAG(int, moves, 4096, "moves of each epoch");
ABSL_FLAG(std::string, output, "text", "text or json");

namespace {

namespace zs = zshard::server;
using Clock = std::chrono::steady_clock;

constexpr char kUsage[] =
    "usage: zshard-store-bench --store sqlite:DIR|etcd:HOST:PORT/PREFIX\n"
    "    [--members N] [--writes K] [--epochs E] [--moves M]\n"
    "    [--output text|json]\n";

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "zshard-store-bench: %s\n",
               std::string(status.message()).c_str());
  return 2;
}

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

struct Summary {
  double p50 = 0, p99 = 0, max = 0;
};

Summary Summarize(std::vector<double> ms) {
  Summary s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  s.p50 = at(0.5);
  s.p99 = at(0.99);
  s.max = ms.back();
  return s;
}

zs::Member MemberOf(int i, int64_t epoch) {
  zs::Member m;
  m.worker_id = absl::StrCat("w-", i);
  m.name = absl::StrCat("worker-", i);
  m.token = std::string(32, 'a' + i % 26);
  m.address = absl::StrCat("10.0.", i / 256, ".", i % 256, ":7000");
  m.labels = {{"node", absl::StrCat("n", i / 8)}};
  m.state = zs::MemberState::kActive;
  m.rank = i;
  m.join_seq = i;
  m.epoch = epoch;
  return m;
}

zs::StoredEpoch EpochOf(int64_t epoch, int members, int moves) {
  zs::StoredEpoch e;
  e.status = zs::EpochStatus::kCommitted;
  e.plan.epoch = epoch;
  e.plan.base_epoch = epoch - 1;
  e.plan.world = members;
  e.plan.plan_hash = absl::StrCat("hash-", epoch);
  for (int i = 0; i < members; ++i) {
    zs::Slot s;
    s.worker_id = absl::StrCat("w-", i);
    s.rank = i;
    s.instance = 0;
    s.shard_rank = i;
    e.plan.slots.push_back(s);
  }
  for (int i = 0; i < moves; ++i) {
    zshard::plan::Move m;
    m.source_member = absl::StrCat("w-", i % members);
    m.source_rank = i % members;
    m.dest_member = absl::StrCat("w-", (i + 1) % members);
    m.dest_rank = (i + 1) % members;
    m.param_index = i % 300;
    m.begin = int64_t{i} * 4096;
    m.end = m.begin + 4096;
    e.plan.moves.push_back(m);
  }
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  using zshard::FlagOf;
  const zshard::FlagList flags = {FlagOf(FLAGS_store),  FlagOf(FLAGS_members),
                                  FlagOf(FLAGS_writes), FlagOf(FLAGS_epochs),
                                  FlagOf(FLAGS_moves),  FlagOf(FLAGS_output)};
  auto parsed = zshard::ParseCommandLine(zshard::Args(argc, argv), flags);
  if (!parsed.ok()) return Fail(parsed.status());
  if (parsed->help()) {
    std::printf("%s\n%s", kUsage, zshard::FlagsHelp(flags).c_str());
    return 0;
  }
  for (absl::Status s : {zshard::CheckRange(FLAGS_members, 1, 1 << 20),
                         zshard::CheckRange(FLAGS_writes, 0, 1 << 20),
                         zshard::CheckRange(FLAGS_epochs, 0, 1 << 20),
                         zshard::CheckRange(FLAGS_moves, 0, 1 << 24)}) {
    if (!s.ok()) return Fail(s);
  }
  auto spec = zs::ParseStoreSpec(absl::GetFlag(FLAGS_store));
  if (!spec.ok()) return Fail(spec.status());
  zs::StoreOpenOptions open_options;
  open_options.candidate_id = "zshard-store-bench";
  auto opened = zs::OpenStateStore(*spec, open_options);
  if (!opened.ok()) return Fail(opened.status());
  zs::StateStore* store = opened->store.get();
  if (absl::Status s = store->SaveJob("store-bench", "{}"); !s.ok()) {
    return Fail(s);
  }
  const int members = absl::GetFlag(FLAGS_members);
  std::vector<double> small, commits;
  for (int i = 0; i < absl::GetFlag(FLAGS_writes); ++i) {
    zs::StoreWrite w;
    w.members = {MemberOf(i % members, 0)};
    w.events = {zs::Event{i, 0, "join", "store bench", 0}};
    const Clock::time_point start = Clock::now();
    if (absl::Status s = store->Apply(w); !s.ok()) return Fail(s);
    small.push_back(Ms(Clock::now() - start));
  }
  for (int e = 1; e <= absl::GetFlag(FLAGS_epochs); ++e) {
    zs::StoreWrite w;
    for (int i = 0; i < members; ++i) w.members.push_back(MemberOf(i, e));
    w.epochs = {EpochOf(e, members, absl::GetFlag(FLAGS_moves))};
    w.meta = {{"next_epoch", e + 1}};
    w.events = {zs::Event{e, e, "commit", "store bench", 0}};
    const Clock::time_point start = Clock::now();
    if (absl::Status s = store->Apply(w); !s.ok()) return Fail(s);
    commits.push_back(Ms(Clock::now() - start));
  }
  const Clock::time_point start = Clock::now();
  auto loaded = store->Load();
  if (!loaded.ok()) return Fail(loaded.status());
  const double load_ms = Ms(Clock::now() - start);
  if (loaded->members.size() != static_cast<size_t>(members)) {
    std::fprintf(stderr, "zshard-store-bench: loaded %zu members, wrote %d\n",
                 loaded->members.size(), members);
    return 1;
  }
  const Summary a = Summarize(small);
  const Summary b = Summarize(commits);
  if (absl::GetFlag(FLAGS_output) == "json") {
    nlohmann::json j = {{"store", absl::GetFlag(FLAGS_store)},
                        {"members", members},
                        {"small_writes",
                         {{"n", small.size()},
                          {"p50_ms", a.p50},
                          {"p99_ms", a.p99},
                          {"max_ms", a.max}}},
                        {"epoch_commits",
                         {{"n", commits.size()},
                          {"p50_ms", b.p50},
                          {"p99_ms", b.p99},
                          {"max_ms", b.max}}},
                        {"load_ms", load_ms},
                        {"loaded_members", loaded->members.size()}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "%s: %zu small writes p50 %.2f ms p99 %.2f ms max %.2f ms; %zu epoch "
        "commits (%d members, %d moves) p50 %.2f ms p99 %.2f ms max %.2f ms; "
        "load %.2f ms (%zu members)\n",
        absl::GetFlag(FLAGS_store).c_str(), small.size(), a.p50, a.p99, a.max,
        commits.size(), members, absl::GetFlag(FLAGS_moves), b.p50, b.p99,
        b.max, load_ms, loaded->members.size());
  }
  return 0;
}
