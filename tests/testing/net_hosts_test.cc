// NetHosts with real processes: two hosts reach each other over TCP, a cut
// stops that in both directions and a heal restores it, random loss and a
// rate limit act on the link, and nothing is left behind (the destructor,
// and the sweep of a dead process's leftovers). Skipped without root.

#include "tests/testing/net_hosts.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

constexpr int kPort = 7100;

#define SKIP_WITHOUT_NET_HOSTS(need_nft)                               \
  do {                                                                 \
    const std::string why = NetHosts::Unavailable(need_nft);           \
    if (!why.empty()) GTEST_SKIP() << "NetHosts unavailable: " << why; \
  } while (0)

// zshard_net_probe, built next to this test.
std::string ProbePath() {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string path(self, n > 0 ? static_cast<size_t>(n) : 0);
  return path.substr(0, path.rfind('/') + 1) + "zshard_net_probe";
}

// The probe server in `host` on its address, for `seconds`, sending
// `bytes` after its greeting.
std::unique_ptr<Subprocess> Serve(NetHosts& net, int host, const TempDir& dir,
                                  int seconds = 60, int64_t bytes = 0) {
  Subprocess::Options options;
  options.argv = net.Command(host);
  for (const std::string& arg :
       {ProbePath(), std::string("serve"), net.Address(host),
        absl::StrCat(kPort), absl::StrCat(seconds), absl::StrCat(bytes)}) {
    options.argv.push_back(arg);
  }
  options.stderr_path = dir.File(absl::StrCat("serve-", host, ".log"));
  auto child = Subprocess::Start(options);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return nullptr;
  EXPECT_TRUE(WaitFor(
      [&] { return LogContains(options.stderr_path, "serving"); }, 10000))
      << ReadLog(options.stderr_path);
  return *std::move(child);
}

// Connects from `from` to `to`'s server; the probe's exit status (0: the
// greeting came back) and its output.
struct Reached {
  int rc = -1;
  std::string out;
};
Reached Connect(NetHosts& net, int from, int to, int64_t timeout_ms = 1000) {
  std::vector<std::string> argv = {ProbePath(), "connect", net.Address(to),
                                   absl::StrCat(kPort),
                                   absl::StrCat(timeout_ms)};
  absl::StatusOr<std::string> out = net.Run(from, argv, timeout_ms * 3);
  if (out.ok()) return {0, *out};
  return {1, std::string(out.status().message())};
}

// A plain connect from the test process itself.
bool ConnectFromTest(const std::string& address, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, address.c_str(), &addr.sin_addr);
  const bool ok =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// `ip netns list` and `ip -o link show` of the test's namespace.
std::string Namespaces() {
  TempDir dir;
  Subprocess::Options options;
  options.argv = {"/bin/sh", "-c",
                  "PATH=$PATH:/usr/sbin:/sbin; ip netns list; ip -o link show"};
  options.stdout_path = dir.File("out");
  auto child = Subprocess::Start(options);
  if (!child.ok() || (*child)->Wait(10000) != 0) return "";
  return ReadLog(options.stdout_path);
}

TEST(NetHostsTest, TwoHostsReachEachOtherOverTcp) {
  SKIP_WITHOUT_NET_HOSTS(false);
  auto net = NetHosts::Create(2);
  ASSERT_TRUE(net.ok()) << net.status();
  NetHosts& hosts = **net;
  EXPECT_NE(hosts.Address(0), hosts.Address(1));
  auto shown = hosts.Run(1, {"ip", "-4", "-o", "addr", "show", "dev", "eth0"});
  ASSERT_TRUE(shown.ok()) << shown.status();
  EXPECT_NE(shown->find(hosts.Address(1) + "/24"), std::string::npos) << *shown;
  TempDir dir;
  std::unique_ptr<Subprocess> server = Serve(hosts, 1, dir);
  ASSERT_NE(server, nullptr);
  Reached r;
  EXPECT_TRUE(WaitFor(
      [&] {
        r = Connect(hosts, 0, 1);
        return r.rc == 0;
      },
      10000))
      << r.out;
  EXPECT_NE(r.out.find("received 7 bytes"), std::string::npos) << r.out;
  EXPECT_TRUE(ConnectFromTest(hosts.Address(1), kPort));
  // Inside a host, loopback is up.
  EXPECT_TRUE(hosts.Run(0, {"ip", "-o", "link", "show", "lo"})->find("UP") !=
              std::string::npos);
}

TEST(NetHostsTest, CutStopsBothDirectionsAndHealRestores) {
  SKIP_WITHOUT_NET_HOSTS(false);
  auto net = NetHosts::Create(3);
  ASSERT_TRUE(net.ok()) << net.status();
  NetHosts& hosts = **net;
  TempDir dir;
  std::unique_ptr<Subprocess> s0 = Serve(hosts, 0, dir);
  std::unique_ptr<Subprocess> s1 = Serve(hosts, 1, dir);
  ASSERT_TRUE(s0 != nullptr && s1 != nullptr);
  ASSERT_TRUE(WaitFor([&] { return Connect(hosts, 0, 1).rc == 0; }, 10000));

  ASSERT_TRUE(hosts.Cut(0, 1).ok());
  EXPECT_FALSE(hosts.Cut(1, 0).ok());  // cut already
  Reached r = Connect(hosts, 0, 1);
  EXPECT_NE(r.rc, 0) << r.out;
  r = Connect(hosts, 1, 0);
  EXPECT_NE(r.rc, 0) << r.out;
  // Other links and the test's own stay up.
  EXPECT_EQ(Connect(hosts, 2, 1).rc, 0);
  EXPECT_EQ(Connect(hosts, 2, 0).rc, 0);
  EXPECT_TRUE(ConnectFromTest(hosts.Address(1), kPort));

  ASSERT_TRUE(hosts.Heal(0, 1).ok());
  EXPECT_FALSE(hosts.Heal(0, 1).ok());  // not cut
  EXPECT_TRUE(WaitFor([&] { return Connect(hosts, 0, 1).rc == 0; }, 10000));
  EXPECT_EQ(Connect(hosts, 1, 0).rc, 0);

  ASSERT_TRUE(hosts.CutAll(2).ok());
  EXPECT_NE(Connect(hosts, 2, 0).rc, 0);
  EXPECT_NE(Connect(hosts, 2, 1).rc, 0);
  EXPECT_EQ(Connect(hosts, 0, 1).rc, 0);
  ASSERT_TRUE(hosts.HealAll(2).ok());
  EXPECT_TRUE(WaitFor([&] { return Connect(hosts, 2, 0).rc == 0; }, 10000));
}

TEST(NetHostsTest, RandomLossAndRateLimitActOnTheLink) {
  SKIP_WITHOUT_NET_HOSTS(true);
  auto net = NetHosts::Create(2);
  ASSERT_TRUE(net.ok()) << net.status();
  NetHosts& hosts = **net;
  TempDir dir;
  const int64_t bytes = 1000000;
  std::unique_ptr<Subprocess> server = Serve(hosts, 1, dir, 60, bytes);
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(WaitFor([&] { return Connect(hosts, 0, 1).rc == 0; }, 10000));

  // Half of host 1's packets dropped: the rule is in place; then every
  // packet: no connect gets through.
  absl::Status dropped = hosts.DropRandom(1, 50);
  ASSERT_TRUE(dropped.ok()) << dropped;
  EXPECT_NE(hosts.Run(1, {"nft", "list", "ruleset"})->find("numgen random"),
            std::string::npos);
  dropped = hosts.DropRandom(1, 100);
  ASSERT_TRUE(dropped.ok()) << dropped;
  Reached r = Connect(hosts, 0, 1, 500);
  EXPECT_NE(r.rc, 0) << r.out;
  ASSERT_TRUE(hosts.ClearFaults(1).ok());
  EXPECT_TRUE(WaitFor([&] { return Connect(hosts, 0, 1).rc == 0; }, 10000));

  // 1 MB from host 1 at 8 Mbit/s takes about a second (the bucket holds
  // 32 KiB); without the limit it takes milliseconds.
  ASSERT_TRUE(hosts.LimitRate(1, 8).ok());
  auto qdisc = hosts.Run(1, {"tc", "qdisc", "show", "dev", "eth0"});
  ASSERT_TRUE(qdisc.ok()) << qdisc.status();
  EXPECT_NE(qdisc->find("tbf"), std::string::npos) << *qdisc;
  EXPECT_NE(qdisc->find("rate 8Mbit"), std::string::npos) << *qdisc;
  r = Connect(hosts, 0, 1, 10000);
  ASSERT_EQ(r.rc, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("in ([0-9]+) ms")))
      << r.out;
  EXPECT_GE(std::stoi(m[1].str()), 700) << r.out;
  EXPECT_NE(r.out.find(absl::StrCat("received ", bytes + 7, " bytes")),
            std::string::npos)
      << r.out;
  ASSERT_TRUE(hosts.ClearFaults(1).ok());
  EXPECT_EQ(hosts.Run(1, {"tc", "qdisc", "show", "dev", "eth0"})->find("tbf"),
            std::string::npos);
}

TEST(NetHostsTest, DestructorLeavesNothingBehind) {
  SKIP_WITHOUT_NET_HOSTS(true);
  std::string tag;
  {
    auto net = NetHosts::Create(2);
    ASSERT_TRUE(net.ok()) << net.status();
    tag = (*net)->tag();
    ASSERT_TRUE((*net)->Cut(0, 1).ok());
    ASSERT_TRUE((*net)->LimitRate(0, 100).ok());
    ASSERT_TRUE((*net)->DropRandom(1, 1).ok());
    const std::string during = Namespaces();
    EXPECT_NE(during.find(tag + "-h0"), std::string::npos) << during;
    EXPECT_NE(during.find(tag + "-sw"), std::string::npos) << during;
    EXPECT_NE(during.find(" " + tag + "@"), std::string::npos) << during;
  }
  const std::string after = Namespaces();
  EXPECT_EQ(after.find(tag), std::string::npos) << after;
}

// What a test killed before its destructor left (a namespace and a root
// link of a pid that no longer exists) goes at the next Create().
TEST(NetHostsTest, CreateSweepsADeadProcesssLeftovers) {
  SKIP_WITHOUT_NET_HOSTS(false);
  int64_t pid_max = 4194304;
  std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
  const std::string dead = absl::StrCat("zsn", pid_max + 1, "-0");
  TempDir dir;
  Subprocess::Options options;
  options.argv = {"/bin/sh", "-c",
                  absl::StrCat("PATH=$PATH:/usr/sbin:/sbin; ip netns add ",
                               dead, "-sw && ip link add ", dead,
                               " type veth peer name ", dead, "-p")};
  options.stderr_path = dir.File("err");
  auto child = Subprocess::Start(options);
  ASSERT_TRUE(child.ok());
  ASSERT_EQ((*child)->Wait(10000), 0) << ReadLog(options.stderr_path);
  ASSERT_NE(Namespaces().find(dead + "-sw"), std::string::npos);
  {
    auto net = NetHosts::Create(1);
    ASSERT_TRUE(net.ok()) << net.status();
  }
  const std::string after = Namespaces();
  EXPECT_EQ(after.find(dead), std::string::npos) << after;
}

}  // namespace
}  // namespace zshard::testing
