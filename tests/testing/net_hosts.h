// Hosts for network-fault tests: each host is a Linux network namespace
// with one veth into a bridge, so real processes started inside a host talk
// over a link the test can cut, slow down or make lossy. Needs root, `ip`
// (iproute2) and, for random loss, `nft` (nftables); the kernel has no
// netem here, so no delay can be added.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/testing/temp_dir.h"

namespace zshard::testing {

// A set of hosts on one private /24, made by Create() and removed (every
// namespace, the bridge, the veths and the nftables tables) by the
// destructor, also after a failed assertion.
//
// Naming: a NetHosts has a tag "zsn<pid>-<k>" (k counts the NetHosts this
// process made). Host i is the namespace "<tag>-h<i>" with the interface
// eth0 at Address(i) = 10.X.Y.(i + 1); the bridge is br0 in the namespace
// "<tag>-sw". The test process reaches every host at its address through a
// veth of its own, the root namespace's link "<tag>" at 10.X.Y.254, which
// no fault touches. 10.X.Y.0/24 lies in 10.128.0.0/9, starts from the pid
// and k, and skips any /24 that a route of this machine already covers, so
// parallel test processes and the machine's own networks never collide.
// Create() first removes the namespaces and links that a dead process of
// the same naming left behind (a test killed before its destructor ran).
//
// Hosts are numbered 0..size()-1. Not thread-safe; owned by one test,
// which should declare it before the processes it starts in the hosts (so
// they are stopped first).
class NetHosts {
 public:
  // "" when this machine can make hosts; otherwise one line saying why not
  // (not root, `ip` missing; with `need_nft`, `nft` missing too), for
  // GTEST_SKIP().
  static std::string Unavailable(bool need_nft = false);

  // Makes `hosts` hosts (1 to 250), each with loopback and eth0 up, all on
  // the bridge. FailedPrecondition when Unavailable() is not empty;
  // Internal with the failing command's message otherwise. On failure
  // whatever was made is removed again.
  static absl::StatusOr<std::unique_ptr<NetHosts>> Create(int hosts);

  ~NetHosts();
  NetHosts(const NetHosts&) = delete;
  NetHosts& operator=(const NetHosts&) = delete;

  int size() const { return static_cast<int>(addresses_.size()); }
  // "zsn<pid>-<k>": the prefix of every namespace, and the root link.
  const std::string& tag() const { return tag_; }
  // The namespace of host `host`.
  std::string Namespace(int host) const;
  // Host `host`'s IPv4 address, e.g. "10.151.3.2".
  const std::string& Address(int host) const { return addresses_[host]; }
  // The test process's own address on the bridge (x.x.x.254).
  const std::string& TestAddress() const { return test_address_; }
  // The prefix that runs a command inside host `host`:
  // {"/path/to/ip", "netns", "exec", Namespace(host)}. Append the argv.
  std::vector<std::string> Command(int host) const;

  // Runs `argv` (argv[0] a path, or a name searched in $PATH and the sbin
  // directories) inside host `host`, waiting up to `timeout_ms`; its
  // stdout, or Internal with its exit status and stderr.
  absl::StatusOr<std::string> Run(int host, std::vector<std::string> argv,
                                  int64_t timeout_ms = 10000);

  // Cuts the link between hosts `a` and `b` in both directions: a
  // blackhole route to b's address in a and to a's address in b. Packets
  // between them are dropped; a connect fails at once (EINVAL). Other
  // links, and the test process's, are untouched. Cutting a cut pair is
  // FailedPrecondition; so is healing a pair that is not cut.
  absl::Status Cut(int a, int b);
  absl::Status Heal(int a, int b);
  // Cut or heal `host` from every other host (not from the test process).
  absl::Status CutAll(int host);
  absl::Status HealAll(int host);

  // Limits what `host` sends over its link to `mbit` Mbit/s (tc tbf on its
  // eth0, replacing an earlier limit). What it receives is limited by the
  // sender's own limit, so limiting every host limits every link.
  absl::Status LimitRate(int host, int mbit);
  // Drops `percent` (0 to 100) of the packets `host` sends or receives over
  // its link, at random (an nftables table "zshard_faults" in its
  // namespace: `numgen random mod 100 < N drop` in the input and output
  // hooks; loopback is exempt). A packet between two such hosts crosses
  // both hosts' rules. Replaces an earlier percentage.
  absl::Status DropRandom(int host, int percent);
  // Removes `host`'s rate limit and random loss (cuts stay).
  absl::Status ClearFaults(int host);

 private:
  NetHosts(std::string tag, std::string subnet);

  // Makes the namespaces, bridge and veths; called once by Create().
  absl::Status Build(int hosts);
  // Removes everything this object made; errors are logged to stderr.
  void Remove();
  absl::Status CheckHost(int host) const;
  // Runs `ip` with `args` in the test's own namespace.
  absl::StatusOr<std::string> Ip(const std::vector<std::string>& args);
  // Runs the tool `tool` (e.g. "tc") with `args` inside host `host`.
  absl::StatusOr<std::string> InHost(int host, const std::string& tool,
                                     const std::vector<std::string>& args);

  const std::string tag_;
  // "10.X.Y" of 10.X.Y.0/24.
  const std::string subnet_;
  std::string ip_path_;
  std::vector<std::string> addresses_;
  std::string test_address_;
  // Cut pairs (a < b).
  std::vector<std::pair<int, int>> cuts_;
  // Per host: a tbf limit, an nftables table in place.
  std::vector<bool> limited_;
  std::vector<bool> dropping_;
  // Namespaces made so far ("<tag>-sw" first), and whether the root link
  // exists, for Remove().
  std::vector<std::string> namespaces_;
  bool root_link_ = false;
  // The outputs of the commands run.
  TempDir dir_;
  int runs_ = 0;
};

}  // namespace zshard::testing
