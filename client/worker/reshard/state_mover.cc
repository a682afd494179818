// StateMover: keeps the local ranges, walks this worker's moves in index
// order (send to or receive from a peer over the pair's link, read a
// checkpoint, copy locally), and checks that every owned element of the
// new buffers was filled.
#include "client/worker/reshard/state_mover.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "client/worker/checkpoint/checkpoint_file.h"
#include "client/worker/comm/failed_peer.h"
#include "client/worker/reshard/abortable_store.h"
#include "client/worker/reshard/param_space.h"
#include "client/worker/reshard/range_transfer.h"
#include "common/status.h"

namespace zshard::reshard {
namespace {

constexpr int64_t kStateBytes = 12;  // master, m and v per element

// Param-space intervals filled so far, per param.
class Coverage {
 public:
  explicit Coverage(int num_params) : filled_(num_params) {}

  void Add(int param, int64_t begin, int64_t end) {
    filled_[param].emplace_back(begin, end);
  }

  // The first element range of `space`'s slices not filled, if any.
  std::optional<std::pair<int, std::pair<int64_t, int64_t>>> FirstGap(
      const ParamSpace& space) {
    for (int p = 0; p < space.num_params(); ++p) {
      std::vector<std::pair<int64_t, int64_t>>& v = filled_[p];
      std::sort(v.begin(), v.end());
      for (const Slice& s : space.slices(p)) {
        int64_t cursor = s.begin;
        for (const auto& [b, e] : v) {
          if (b > cursor) break;
          cursor = std::max(cursor, e);
        }
        if (cursor < s.end)
          return std::make_pair(p, std::make_pair(cursor, s.end));
      }
    }
    return std::nullopt;
  }

 private:
  std::vector<std::vector<std::pair<int64_t, int64_t>>> filled_;
};

std::string RangeName(const engine::EngineBuffers& b, int param, int64_t begin,
                      int64_t end) {
  const std::string name =
      param >= 0 && param < static_cast<int>(b.model().params.size())
          ? b.model().params[param].name
          : absl::StrCat("#", param);
  return absl::StrCat("param '", name, "' elements [", begin, ", ", end, ")");
}

// Copies every element that both buffers own from `from` into `to`, device
// to device: of an expert param, only when both hold the same
// expert-parallel rank's state. Returns the elements copied.
absl::StatusOr<int64_t> KeepLocal(const engine::EngineBuffers& from,
                                  const ParamSpace& old_space,
                                  engine::EngineBuffers& to,
                                  const ParamSpace& new_space,
                                  Coverage& coverage) {
  int64_t elements = 0;
  for (int p = 0; p < new_space.num_params(); ++p) {
    if (old_space.expert_rank(p) != new_space.expert_rank(p)) continue;
    for (const Slice& ns : new_space.slices(p)) {
      for (const Slice& os : old_space.slices(p)) {
        const int64_t b = std::max(ns.begin, os.begin);
        const int64_t e = std::min(ns.end, os.end);
        if (b >= e) continue;
        ZSHARD_RETURN_IF_ERROR(
            to.CopyStateFrom(from, os.window, os.offset + (b - os.begin),
                             ns.window, ns.offset + (b - ns.begin), e - b));
        coverage.Add(p, b, e);
        elements += e - b;
      }
    }
  }
  return elements;
}

// Copies [begin, end) of a param held by `from` at `from_slices` into `to`
// at `to_slices` (both as Find returns them), device to device.
absl::Status CopyRange(const engine::EngineBuffers& from,
                       absl::Span<const Slice> from_slices,
                       engine::EngineBuffers& to,
                       absl::Span<const Slice> to_slices) {
  for (const Slice& ts : to_slices) {
    for (const Slice& fs : from_slices) {
      const int64_t b = std::max(ts.begin, fs.begin);
      const int64_t e = std::min(ts.end, fs.end);
      if (b >= e) continue;
      ZSHARD_RETURN_IF_ERROR(
          to.CopyStateFrom(from, fs.window, fs.offset + (b - fs.begin),
                           ts.window, ts.offset + (b - ts.begin), e - b));
    }
  }
  return absl::OkStatus();
}

// Reads [begin, end) of a param from a checkpoint file into `to`, through
// host arrays of at most kReadElements elements each.
absl::Status ReadRange(const checkpoint::RankFileReader& reader,
                       const plan::Move& move, engine::EngineBuffers& to,
                       absl::Span<const Slice> slices) {
  constexpr int64_t kReadElements = int64_t{1} << 20;
  std::vector<float> master, exp_avg, exp_avg_sq;
  for (const Slice& s : slices) {
    for (int64_t b = s.begin; b < s.end; b += kReadElements) {
      const int64_t e = std::min(s.end, b + kReadElements);
      const size_t n = static_cast<size_t>(e - b);
      master.resize(n);
      exp_avg.resize(n);
      exp_avg_sq.resize(n);
      absl::Status st =
          reader.Read(move.param_index, move.expert_rank, b, e, master.data(),
                      exp_avg.data(), exp_avg_sq.data());
      if (!st.ok()) return absl::DataLossError(st.message());
      const Slice part{s.window, s.offset + (b - s.begin), b, e};
      ZSHARD_RETURN_IF_ERROR(CopyIn(to, {&part, 1}, b, e, master.data(),
                                    exp_avg.data(), exp_avg_sq.data()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string FailedSourceMember(const absl::Status& status) {
  auto source = status.GetPayload(kFailedSourcePayload);
  return source.has_value() ? std::string(*source) : std::string();
}

std::string FailedLinkMember(const absl::Status& status) {
  auto member = status.GetPayload(kFailedLinkPayload);
  return member.has_value() ? std::string(*member) : std::string();
}

absl::Status WithContext(const absl::Status& status,
                         const std::string& context) {
  absl::Status out(status.code(),
                   absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload([&out](absl::string_view key, const absl::Cord& value) {
    out.SetPayload(key, value);
  });
  return out;
}

namespace {

PeerLinkOptions LinkOptions(const MoveInput& in,
                            const std::atomic<bool>* aborted) {
  PeerLinkOptions o;
  o.self = in.self;
  o.store = in.store;
  o.group = in.group;
  o.timeout_ms = in.timeout_ms;
  o.hostname = in.hostname;
  o.host_transport = in.host_transport;
  o.aborted = aborted;
  return o;
}

}  // namespace

StateMover::StateMover(MoveInput input)
    : input_(std::move(input)), links_(LinkOptions(input_, &aborted_)) {}

StateMover::~StateMover() = default;

void StateMover::Abort() {
  aborted_ = true;
  links_.Abort();
}

absl::StatusOr<MoveStats> StateMover::Run() {
  const auto t0 = std::chrono::steady_clock::now();
  MoveStats stats;
  absl::Status status = RunMoves(stats);
  if (!status.ok() && aborted_) {
    return absl::AbortedError(
        absl::StrCat("state moves aborted: ", status.message()));
  }
  ZSHARD_RETURN_IF_ERROR(status);
  stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return stats;
}

absl::Status StateMover::RunMoves(MoveStats& stats) {
  if (aborted_) return absl::AbortedError("state moves: aborted");
  const engine::EngineBuffers* old_state = input_.old_state;
  engine::EngineBuffers* new_state = input_.new_state;
  std::optional<ParamSpace> old_space, new_space;
  if (old_state != nullptr) old_space.emplace(*old_state);
  if (new_state != nullptr) new_space.emplace(*new_state);
  Coverage coverage(new_space ? new_space->num_params() : 0);
  if (old_space && new_space && input_.keep_local) {
    ZSHARD_ASSIGN_OR_RETURN(
        const int64_t kept,
        KeepLocal(*old_state, *old_space, *new_state, *new_space, coverage));
    stats.bytes_kept = kStateBytes * kept;
  }

  // This worker's moves in index order, each resolved before any traffic,
  // so that a move it cannot serve fails here.
  const std::string& self = input_.self;
  struct Mine {
    const plan::Move* move = nullptr;
    bool sends = false, receives = false;
    std::string peer;  // the other member of a move between two
    std::vector<Slice> from, to;
  };
  std::vector<Mine> mine;
  for (const plan::Move& m : input_.moves) {
    Mine x;
    x.move = &m;
    x.sends = m.source == plan::MoveSource::kMember && m.source_member == self;
    x.receives = m.dest_member == self;
    if (!x.sends && !x.receives) continue;
    if (x.sends && !x.receives) x.peer = m.dest_member;
    if (x.receives && !x.sends && m.source == plan::MoveSource::kMember) {
      x.peer = m.source_member;
    }
    mine.push_back(std::move(x));
  }
  std::stable_sort(mine.begin(), mine.end(), [](const Mine& a, const Mine& b) {
    return a.move->index < b.move->index;
  });
  std::map<std::string, size_t> last_with;  // peer -> its last move in mine
  int previous_index = -1;
  for (size_t k = 0; k < mine.size(); ++k) {
    Mine& x = mine[k];
    const plan::Move& m = *x.move;
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(
          "state moves: move ", m.index, " of param ", m.param_index,
          " elements [", m.begin, ", ", m.end, "): ", why));
    };
    if (!x.peer.empty()) {
      if (m.index < 0) return bad("it has no index in the epoch's moves");
      if (m.index == previous_index) return bad("its index is seen twice");
      previous_index = m.index;
      last_with[x.peer] = k;
    }
    if (x.sends) {
      if (!old_space) return bad("this worker holds no state to send");
      if (m.source_rank != old_state->rank_plan().rank) {
        return bad(absl::StrCat("it names sender rank ", m.source_rank,
                                ", this worker held rank ",
                                old_state->rank_plan().rank));
      }
      ZSHARD_ASSIGN_OR_RETURN(
          x.from,
          old_space->Find(m.param_index, m.expert_rank, m.begin, m.end));
    }
    if (x.receives) {
      if (!new_space) return bad("this worker has no new buffers");
      if (m.dest_rank != new_state->rank_plan().rank) {
        return bad(absl::StrCat("it names receiver rank ", m.dest_rank,
                                ", this worker has rank ",
                                new_state->rank_plan().rank));
      }
      ZSHARD_ASSIGN_OR_RETURN(
          x.to, new_space->Find(m.param_index, m.expert_rank, m.begin, m.end));
    }
  }

  RangeTransfer transfer(input_.chunk_bytes, input_.tamper_chunk, &aborted_);
  std::map<std::string, checkpoint::RankFileReader> readers;
  for (size_t k = 0; k < mine.size(); ++k) {
    const Mine& x = mine[k];
    const plan::Move& m = *x.move;
    if (aborted_) return absl::AbortedError("state moves: aborted");
    const std::string what = absl::StrCat(
        "state moves: ", RangeName(x.receives ? *new_state : *old_state,
                                   m.param_index, m.begin, m.end));
    const int64_t bytes = kStateBytes * (m.end - m.begin);
    const uint32_t tag = static_cast<uint32_t>(m.index);
    if (m.source == plan::MoveSource::kCheckpoint) {
      if (m.fragment < 0 ||
          m.fragment >= static_cast<int>(input_.checkpoint_files.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": it names checkpoint file ", m.fragment,
                         " of ", input_.checkpoint_files.size()));
      }
      const std::string& file = input_.checkpoint_files[m.fragment];
      auto it = readers.find(file);
      if (it == readers.end()) {
        const std::string path =
            input_.checkpoint_dir.empty()
                ? file
                : absl::StrCat(input_.checkpoint_dir, "/", file);
        absl::StatusOr<checkpoint::RankFileReader> reader =
            checkpoint::RankFileReader::Open(path);
        // Missing, unreadable or damaged: the checkpoint cannot serve
        // this epoch (DataLoss, which the coordinator answers with an older
        // checkpoint).
        if (!reader.ok()) {
          return WithContext(absl::DataLossError(reader.status().message()),
                             what);
        }
        it = readers.emplace(file, std::move(*reader)).first;
      }
      absl::Status s = ReadRange(it->second, m, *new_state, x.to);
      if (!s.ok()) return WithContext(s, what);
      stats.bytes_from_checkpoint += bytes;
      coverage.Add(m.param_index, m.begin, m.end);
      continue;
    }
    if (x.sends && x.receives) {  // to itself: a local copy
      absl::Status s = CopyRange(*old_state, x.from, *new_state, x.to);
      if (!s.ok()) return WithContext(s, what);
      stats.bytes_kept += bytes;
      coverage.Add(m.param_index, m.begin, m.end);
      continue;
    }
    absl::StatusOr<comm::Communicator*> link = links_.Open(x.peer);
    absl::Status s = link.status();
    // A transport that named the link's other end: say which member it is.
    auto name_link = [&x](absl::Status failed) {
      if (comm::FailedPeerOf(failed).has_value()) {
        failed.SetPayload(kFailedLinkPayload, absl::Cord(x.peer));
      }
      return failed;
    };
    if (x.sends) {
      if (s.ok()) {
        s = transfer.Send(**link, links_.PeerRank(x.peer), tag, *old_state,
                          x.from, m.begin, m.end);
      }
      if (!s.ok()) {
        return name_link(WithContext(s, absl::StrCat(what, " to ", x.peer)));
      }
      stats.bytes_sent += bytes;
    } else {
      if (s.ok()) {
        s = transfer.Recv(**link, links_.PeerRank(x.peer), tag, *new_state,
                          x.to, m.begin, m.end);
      }
      if (!s.ok()) {
        absl::Status failed =
            name_link(WithContext(s, absl::StrCat(what, " from ", x.peer)));
        failed.SetPayload(kFailedSourcePayload, absl::Cord(x.peer));
        return failed;
      }
      stats.bytes_received += bytes;
      coverage.Add(m.param_index, m.begin, m.end);
    }
    if (last_with.at(x.peer) == k) {
      absl::Status closed = links_.Close(x.peer);
      if (!closed.ok()) {
        return name_link(WithContext(
            closed, absl::StrCat("state moves: closing the link to ", x.peer)));
      }
    }
  }

  if (new_space) {
    if (auto gap = coverage.FirstGap(*new_space)) {
      return absl::InternalError(
          absl::StrCat("state moves: ",
                       RangeName(*new_state, gap->first, gap->second.first,
                                 gap->second.second),
                       " of rank ", new_state->rank_plan().rank,
                       " were neither kept, received nor read"));
    }
  }
  return absl::OkStatus();
}

}  // namespace zshard::reshard
