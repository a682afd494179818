#include "client/worker/train/trainer_rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/worker/device/fd_passing.h"
#include "common/status.h"

namespace zshard::worker {
namespace {

// A port nobody listens on at `host` now (the kernel's pick).
absl::StatusOr<int> FreePort(const std::string& host) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
  }
  device::OwnedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  socklen_t len = sizeof(addr);
  if (fd.get() < 0 ||
      bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::UnavailableError(
        absl::StrCat("no free port for the trainers' store on ", host, ": ",
                     std::strerror(errno)));
  }
  return ntohs(addr.sin_port);
}

}  // namespace

trainer::ModelParallelStep PositionOf(const job::JobSpec& job,
                                      const job::SlotJob& slot) {
  const plan::ParallelSizes& sizes = job.parallel;
  trainer::ModelParallelStep p;
  p.tp = slot.position.tp;
  p.pp = slot.position.pp;
  p.cp = slot.position.cp;
  p.replica = slot.position.replica;
  p.tensor = sizes.tensor;
  p.pipeline = sizes.pipeline;
  p.context = sizes.context;
  p.rank = p.tp + sizes.tensor * (p.cp + sizes.context * p.pp);
  return p;
}

absl::StatusOr<trainer::ModelParallelStep> TrainerRendezvous::Meet(
    const job::JobSpec& job, const EpochInfo& epoch, const job::SlotJob& slot,
    comm::KvStore& store, int64_t timeout_ms) {
  trainer::ModelParallelStep me = PositionOf(job, slot);
  const std::string key = absl::StrCat("trainer-store/replica-", me.replica);
  // Each daemon names itself (a worker sees only its own assignment).
  ZSHARD_RETURN_IF_ERROR(
      store.Set(absl::StrCat(key, "/member-", me.rank), epoch.worker_id));
  if (me.rank != 0) {
    ZSHARD_ASSIGN_OR_RETURN(const std::string value,
                            store.Get(key, timeout_ms));
    std::vector<std::string> parts = absl::StrSplit(value, ' ');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &me.generation)) {
      return absl::InternalError(
          absl::StrCat("the trainers' rendezvous of replica ", me.replica,
                       " reads '", value, "'"));
    }
    me.init_method = parts[0];
    return me;
  }
  // Rank 0 of the replica: its members by replica rank.
  std::vector<std::string> members(job.parallel.replica_size());
  for (size_t k = 0; k < members.size(); ++k) {
    ZSHARD_ASSIGN_OR_RETURN(
        members[k], store.Get(absl::StrCat(key, "/member-", k), timeout_ms));
  }
  if (port_ == 0) {
    ZSHARD_ASSIGN_OR_RETURN(port_, FreePort(host_));
  }
  if (members != members_) {
    members_ = members;
    generation_ = epoch.epoch;
  }
  me.init_method = absl::StrCat("tcp://", host_, ":", port_);
  me.generation = generation_;
  ZSHARD_RETURN_IF_ERROR(
      store.Set(key, absl::StrCat(me.init_method, " ", me.generation)));
  return me;
}

}  // namespace zshard::worker
