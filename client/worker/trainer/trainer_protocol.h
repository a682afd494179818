// The trainer protocol: how a user's training process (python/zshard) and
// its worker daemon talk over the daemon's Unix socket
// (--trainer-socket). Every message is a frame: a 4-byte little-endian
// length, then that many bytes of a JSON object with a "type"; file
// descriptors (memfd segments of the buffers) ride with a frame's first
// byte (SCM_RIGHTS).
//
//   trainer -> daemon  hello          {"version", "pid", "job" (or null),
//                                      "model": the job spec's model object}
//   daemon -> trainer  welcome        {"version", "job", "pid"} or
//                      error          {"message"} and the socket closes
//   daemon -> trainer  init           {"numel"} + 1 fd of numel * 4 bytes
//   trainer -> daemon  init_done      {} (it wrote every param's values, fp32,
//                                      flattened in registration order)
//   daemon -> trainer  layout         {"generation", "buffers":
//                                      [{"param_dtype", "grad_dtype",
//                                        "expert", "numel",
//                                        "params": [{"name", "start"}],
//                                        "buckets": [[start, end], ...]}]}
//                                     + 2 fds per buffer: params, grads;
//                                     on a GPU instead "cuda_device": N and
//                                     per buffer "param_ipc", "grad_ipc":
//                                     the hex of each allocation's
//                                     cudaIpcMemHandle_t (no fds)
//   daemon -> trainer  step           {"step", "rank", "world",
//                                      "global_batch", "lr", "steps" (the
//                                      job's length), "generation"; in a
//                                      model-parallel job also "tp_rank",
//                                      "pp_rank", "cp_rank", "replica" and
//                                      "model_parallel": {"init_method",
//                                      "generation", "rank", "world",
//                                      "tensor", "pipeline", "context"}}
//   trainer -> daemon  bucket_ready   {"step", "buffer", "bucket"}: every
//                                      param of the bucket has its final
//                                      gradient (sent during backward; the
//                                      daemon reduce-scatters it then)
//   trainer -> daemon  discard        {"step", "reason"}: a gradient changed
//                                      after its bucket was handed over;
//                                      the step is skipped on every rank
//   trainer -> daemon  backward_done  {"step", "loss" (a number or null),
//                                      "overlap_param_gather" (optional,
//                                      default false)}: every bucket not
//                                      signalled is final
//   daemon -> trainer  result         {"step", "failed", "applied",
//                                      "grad_norm", "loss" (both null for a
//                                      failed step), "param_gather" (only
//                                      when true)}
//   daemon -> trainer  gathered       {"step", "buffer", "bucket", "ok"}:
//                                      the bucket holds the step's updated
//                                      params (ok false: its all-gather
//                                      failed; see below)
//   daemon -> trainer  done           {"failed", "reason"}: the job's steps
//                                      are done (failed false; also to a
//                                      spare's trainer), or the coordinator
//                                      failed the job for "reason"
//   trainer -> daemon  detach         {}
//
// Before a trainer of a model-parallel job builds its slot's module it asks
// its daemon where it sits, on a connection of its own:
//
//   trainer -> daemon  position_query {"version"}
//   daemon -> trainer  position       {"job", "tp_rank", "pp_rank",
//                                      "cp_rank", "replica", "rank",
//                                      "tensor", "pipeline", "context"}, or
//                      done (the job ended first) or error; then the
//                      daemon closes the connection. A spare's daemon
//                      answers once it holds a position.
//
// In a model-parallel step, "rank" and "world" are the replica and the
// number of replicas (the samples are split among replicas; the ranks of a
// context-parallel group take the same samples), "model_parallel.rank" is
// the trainer's rank among the replica's T x P x C trainers
// (tp + T x (cp + C x pp)), and "init_method" is the TCPStore that the
// trainer of replica rank 0 hosts (it listens there; the others connect),
// with the trainers' keys under "generation": it changes whenever the
// replica's members change, and the trainers then rebuild their groups.
//
// init comes once, when the job starts fresh (the daemon takes its initial
// params from the trainer's model). A layout precedes the first step and every
// step whose generation differs from the last layout's (a re-shard changed the
// buffers). Param "start" is in elements of its buffer; a param of numel n
// occupies [start, start + n).
//
// overlap_param_gather: a trainer that sets "overlap_param_gather" in its
// backward_done lets the daemon send the result once Adam is done and
// all-gather the params afterwards. Such a result has "param_gather": true,
// and one "gathered" follows for every bucket of every buffer, in forward
// order (by the first registered param of the bucket), after the result
// and before the next step's result; they may come before or after the
// next step's "step" message and "done", and the trainer must not read a
// bucket's params until its "gathered" came (its forward pre-hooks wait
// for them). Every "gathered" comes, ok or not; a failed one means the
// params are stale and the next step fails on the daemon (its result has
// "failed": true, and a new layout precedes the step that redoes it). A
// layout is sent only once every bucket was gathered, so a trainer that
// (re)attaches never waits for a bucket.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/worker/device/fd_passing.h"
#include "nlohmann/json.hpp"

namespace zshard::trainer {

// Bumped on any incompatible change; hello and welcome carry it.
inline constexpr int kProtocolVersion = 2;

// The largest frame either side accepts.
inline constexpr uint32_t kMaxFrameBytes = 16 << 20;

struct Message {
  nlohmann::json body;  // an object with a string "type"
  std::vector<device::OwnedFd> fds;
  std::string type() const;
};

// Sends one frame with `fds` (at most device::kMaxPassedFds) attached.
// Blocks at most `timeout_ms`; Unavailable when the peer has gone.
absl::Status SendMessage(int socket, const nlohmann::json& body,
                         absl::Span<const int> fds, int64_t timeout_ms);

// OK when a trainer's first message speaks kProtocolVersion ("version");
// InvalidArgument naming both versions otherwise.
absl::Status CheckProtocolVersion(const nlohmann::json& first);

// Receives one frame. Blocks at most `timeout_ms` (DeadlineExceeded);
// Unavailable when the peer closed; InvalidArgument for a frame that is too
// large, not JSON or not an object with a string "type".
absl::StatusOr<Message> ReceiveMessage(int socket, int64_t timeout_ms);

}  // namespace zshard::trainer
