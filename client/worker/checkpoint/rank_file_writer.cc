// WriteRankFile: streams one rank's owned master, m and v (the layout of
// rank_file_format.h) window by window from the engine's buffers (copied
// out of the device in bounded chunks) into <name>.tmp, hashing as it
// goes, then syncs and renames it into place.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/worker/checkpoint/checkpoint_file.h"
#include "client/worker/engine/engine_groups.h"
#include "common/checkpoint/rank_file_format.h"
#include "common/plan/plan_hash.h"
#include "common/status.h"

namespace zshard::checkpoint {
namespace {

absl::Status IoError(const std::string& what, const std::string& path,
                     int error) {
  const std::string message = absl::StrCat("checkpoint file ", path, ": ", what,
                                           ": ", std::strerror(error));
  if (error == EACCES || error == EPERM || error == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  return absl::InternalError(message);
}

// A file being written, with the running checksum of what went in.
class HashingWriter {
 public:
  HashingWriter() = default;
  ~HashingWriter() {
    if (file_ != nullptr) std::fclose(file_);
  }
  HashingWriter(const HashingWriter&) = delete;
  HashingWriter& operator=(const HashingWriter&) = delete;

  absl::Status Open(const std::string& path) {
    path_ = path;
    file_ = std::fopen(path.c_str(), "wb");
    if (file_ == nullptr) return IoError("cannot create", path, errno);
    return absl::OkStatus();
  }

  absl::Status Write(const void* data, size_t size, bool hash = true) {
    if (size == 0) return absl::OkStatus();
    if (std::fwrite(data, 1, size, file_) != size) {
      return IoError("write failed", path_, errno);
    }
    if (hash) hash_.Bytes(data, size);
    bytes_ += static_cast<int64_t>(size);
    return absl::OkStatus();
  }

  // Flushes, syncs to disk and closes.
  absl::Status Close() {
    FILE* f = std::exchange(file_, nullptr);
    if (std::fflush(f) != 0) {
      const int error = errno;
      std::fclose(f);
      return IoError("flush failed", path_, error);
    }
    if (fsync(fileno(f)) != 0) {
      const int error = errno;
      std::fclose(f);
      return IoError("sync failed", path_, error);
    }
    if (std::fclose(f) != 0) return IoError("close failed", path_, errno);
    return absl::OkStatus();
  }

  uint64_t digest() const { return hash_.digest(); }
  int64_t bytes() const { return bytes_; }

 private:
  std::string path_;
  FILE* file_ = nullptr;
  plan::Fnv1a64 hash_;
  int64_t bytes_ = 0;
};

// One range of the file and where its state lives in the buffers.
struct Source {
  format::RangeRecord record;
  int window = 0;
  int64_t offset = 0;  // of the range's first element in the window
};

std::vector<Source> Sources(const engine::EngineBuffers& state) {
  std::vector<Source> out;
  for (size_t w = 0; w < state.windows().size(); ++w) {
    const engine::WindowState& win = state.windows()[w];
    for (const plan::Piece& piece : win.pieces) {
      if (piece.end <= piece.start) continue;
      Source s;
      s.record.param_index = piece.param_index;
      s.record.expert_rank =
          engine::StateExpertRank(state.model(), state.plan(),
                                  state.rank_plan().rank, piece.param_index);
      s.record.begin = piece.param_start;
      s.record.end = piece.param_end;
      s.window = static_cast<int>(w);
      s.offset = piece.start - win.start;
      out.push_back(s);
    }
  }
  return out;
}

// Elements copied out of the device per write.
constexpr int64_t kChunkElements = int64_t{1} << 20;

// Makes a completed rename survive a crash.
void SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  fsync(fd);
  close(fd);
}

}  // namespace

std::string RankFileName(int rank) {
  return absl::StrFormat("rank-%05d.zsc", rank);
}

std::string StepDir(const std::string& root, int64_t step) {
  return absl::StrFormat("%s/step-%08d", root, step);
}

absl::StatusOr<RankFileInfo> WriteRankFile(const engine::EngineBuffers& state,
                                           const std::string& dir, int rank,
                                           int64_t step, int64_t adam_step) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create directory", dir, ec.value());

  std::vector<Source> sources = Sources(state);
  format::Header header;
  header.ranges = static_cast<uint32_t>(sources.size());
  header.step = step;
  header.adam_step = adam_step;
  header.rank = rank;
  std::string head = format::EncodeHeader(header);
  int64_t offset = format::kHeaderBytes +
                   format::kRangeBytes * static_cast<int64_t>(sources.size());
  for (Source& s : sources) {
    s.record.offset = offset;
    offset += (s.record.end - s.record.begin) * format::kBytesPerElement;
    head += format::EncodeRange(s.record);
  }

  const std::string name = RankFileName(rank);
  const std::string path = absl::StrCat(dir, "/", name);
  const std::string tmp = absl::StrCat(path, ".tmp");
  HashingWriter out;
  uint64_t digest = 0;
  absl::Status written = [&]() -> absl::Status {
    ZSHARD_RETURN_IF_ERROR(out.Open(tmp));
    ZSHARD_RETURN_IF_ERROR(out.Write(head.data(), head.size()));
    std::vector<float> chunk;
    for (const Source& s : sources) {
      const int64_t n = s.record.end - s.record.begin;
      for (const engine::StateArray a :
           {engine::StateArray::kMaster, engine::StateArray::kExpAvg,
            engine::StateArray::kExpAvgSq}) {
        for (int64_t b = 0; b < n; b += kChunkElements) {
          const int64_t m = std::min(kChunkElements, n - b);
          chunk.resize(static_cast<size_t>(m));
          ZSHARD_RETURN_IF_ERROR(
              state.ReadState(a, s.window, s.offset + b, m, chunk.data()));
          ZSHARD_RETURN_IF_ERROR(
              out.Write(chunk.data(), static_cast<size_t>(m) * sizeof(float)));
        }
      }
    }
    digest = out.digest();
    ZSHARD_RETURN_IF_ERROR(out.Write(&digest, sizeof(digest), /*hash=*/false));
    ZSHARD_RETURN_IF_ERROR(out.Close());
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      return IoError("rename failed", tmp, errno);
    }
    return absl::OkStatus();
  }();
  if (!written.ok()) {
    std::remove(tmp.c_str());
    return written;
  }
  SyncDirectory(dir);

  RankFileInfo file;
  file.path = name;
  file.rank = rank;
  file.bytes = out.bytes();
  file.checksum = absl::StrFormat("%016x", digest);
  for (const Source& s : sources) {
    file.ranges.push_back(
        plan::CheckpointFragment{s.record.param_index, s.record.expert_rank,
                                 s.record.begin, s.record.end});
  }
  return file;
}

}  // namespace zshard::checkpoint
