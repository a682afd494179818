// NetHosts: namespaces, a bridge and veths made and removed with `ip`;
// faults with blackhole routes, tc tbf and an nftables table.

#include "tests/testing/net_hosts.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/subprocess.h"

namespace zshard::testing {
namespace {

constexpr int64_t kToolTimeoutMs = 10000;
constexpr char kFaultTable[] = "zshard_faults";

// Counts the NetHosts made by this process (the k of the tag).
std::atomic<int> hosts_made{0};

// The path of the executable `name`: $PATH first, then the sbin and bin
// directories (a test's $PATH may lack sbin). "" when there is none.
std::string FindTool(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  std::vector<std::string> dirs;
  const char* path = std::getenv("PATH");
  if (path != nullptr) dirs = absl::StrSplit(path, ':', absl::SkipEmpty());
  for (const char* d : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    dirs.push_back(d);
  }
  for (const std::string& dir : dirs) {
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Runs `argv` with its output in `dir`/tool-`n`.{out,err}; its stdout, or
// Internal naming the command, its exit status and its stderr.
absl::StatusOr<std::string> RunTool(const std::vector<std::string>& argv,
                                    const TempDir& dir, int n,
                                    int64_t timeout_ms = kToolTimeoutMs) {
  Subprocess::Options options;
  options.argv = argv;
  options.stdout_path = dir.File(absl::StrCat("tool-", n, ".out"));
  options.stderr_path = dir.File(absl::StrCat("tool-", n, ".err"));
  ZSHARD_ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> child,
                          Subprocess::Start(options));
  const std::optional<int> rc = child->Wait(timeout_ms);
  const std::string command = absl::StrJoin(argv, " ");
  if (!rc.has_value()) {
    child->Kill();
    return absl::DeadlineExceededError(
        absl::StrCat("'", command, "' ran past ", timeout_ms, " ms"));
  }
  if (*rc != 0) {
    std::string err = ReadLog(options.stderr_path);
    while (!err.empty() && err.back() == '\n') err.pop_back();
    return absl::InternalError(
        absl::StrCat("'", command, "' exited ", *rc, ": ", err));
  }
  return ReadLog(options.stdout_path);
}

// True when a process `pid` exists (possibly another user's).
bool Alive(int64_t pid) {
  return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// True when this process may make a network namespace (root alone is not
// enough in a container without CAP_SYS_ADMIN): tried in a child.
bool CanUnshareNetwork() {
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) _exit(unshare(CLONE_NEWNET) == 0 ? 0 : 1);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Parses "a.b.c.d" or "a.b.c.d/len" into an address and a prefix length.
bool ParsePrefix(const std::string& text, uint32_t* addr, int* len) {
  std::vector<std::string> parts = absl::StrSplit(text, '/');
  *len = 32;
  if (parts.size() == 2 && !absl::SimpleAtoi(parts[1], len)) return false;
  std::vector<std::string> octets = absl::StrSplit(parts[0], '.');
  if (octets.size() != 4 || *len < 0 || *len > 32) return false;
  *addr = 0;
  for (const std::string& o : octets) {
    int v = 0;
    if (!absl::SimpleAtoi(o, &v) || v < 0 || v > 255) return false;
    *addr = (*addr << 8) | static_cast<uint32_t>(v);
  }
  return true;
}

// True when a route of `routes` (`ip -4 -o route show table all`) other
// than the default one overlaps 10.x.y.0/24.
bool Overlaps(const std::string& routes, int x, int y) {
  static const std::vector<std::string> kTypes = {
      "unicast", "local",    "broadcast",   "multicast", "blackhole",
      "throw",   "prohibit", "unreachable", "nat",       "anycast"};
  const uint32_t ours = (10u << 24) | (static_cast<uint32_t>(x) << 16) |
                        (static_cast<uint32_t>(y) << 8);
  for (absl::string_view line : absl::StrSplit(routes, '\n')) {
    std::vector<std::string> tokens =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    size_t i = 0;
    if (i < tokens.size() &&
        std::find(kTypes.begin(), kTypes.end(), tokens[i]) != kTypes.end()) {
      ++i;
    }
    uint32_t addr = 0;
    int len = 0;
    if (i >= tokens.size() || tokens[i] == "default" ||
        !ParsePrefix(tokens[i], &addr, &len) || len == 0) {
      continue;
    }
    // Two prefixes overlap when they agree on the shorter one's bits.
    const int common = std::min(len, 24);
    const uint32_t mask = ~0u << (32 - common);
    if ((addr & mask) == (ours & mask)) return true;
  }
  return false;
}

// Removes the namespaces and root links of the naming scheme whose pid is
// dead, and those of `own_tag` (a pid reused by this process). Best effort.
void Sweep(const std::string& ip, const std::string& own_tag,
           const TempDir& dir) {
  static const std::regex kName(R"(^zsn([0-9]+)-([0-9]+)(-.*)?$)");
  auto stale = [&](const std::string& name) {
    std::smatch m;
    if (!std::regex_match(name, m, kName)) return false;
    const std::string tag = absl::StrCat("zsn", m[1].str(), "-", m[2].str());
    return tag == own_tag || !Alive(std::stoll(m[1].str()));
  };
  int n = 1000;
  absl::StatusOr<std::string> netns = RunTool({ip, "netns", "list"}, dir, n++);
  if (netns.ok()) {
    for (absl::string_view line : absl::StrSplit(*netns, '\n')) {
      const std::string name(line.substr(0, line.find(' ')));
      if (!name.empty() && stale(name)) {
        (void)RunTool({ip, "netns", "del", name}, dir, n++);
      }
    }
  }
  absl::StatusOr<std::string> links =
      RunTool({ip, "-o", "link", "show"}, dir, n++);
  if (!links.ok()) return;
  for (absl::string_view line : absl::StrSplit(*links, '\n')) {
    // "7: zsn123-0@if6: <...": the name between ": " and '@' or ':'.
    std::vector<std::string> fields = absl::StrSplit(line, ": ");
    if (fields.size() < 2) continue;
    const std::string name = fields[1].substr(0, fields[1].find('@'));
    if (stale(name)) (void)RunTool({ip, "link", "del", name}, dir, n++);
  }
}

}  // namespace

std::string NetHosts::Unavailable(bool need_nft) {
  if (geteuid() != 0) {
    return "needs root to make network namespaces (CI runs as root)";
  }
  if (FindTool("ip").empty() || FindTool("tc").empty()) {
    return "needs `ip` and `tc` (iproute2: bash deploy/install-deps.sh)";
  }
  if (need_nft && FindTool("nft").empty()) {
    return "needs `nft` (nftables: bash deploy/install-deps.sh)";
  }
  if (!CanUnshareNetwork()) {
    return "cannot make a network namespace here (no CAP_SYS_ADMIN)";
  }
  return "";
}

absl::StatusOr<std::unique_ptr<NetHosts>> NetHosts::Create(int hosts) {
  if (hosts < 1 || hosts > 250) {
    return absl::InvalidArgumentError(
        absl::StrCat("a NetHosts has 1 to 250 hosts, not ", hosts));
  }
  const std::string why = Unavailable();
  if (!why.empty()) return absl::FailedPreconditionError(why);
  const int k = hosts_made++;
  const int64_t pid = getpid();
  const std::string tag = absl::StrCat("zsn", pid, "-", k);
  const std::string ip = FindTool("ip");
  TempDir scratch;
  Sweep(ip, tag, scratch);

  // A /24 of 10.128.0.0/9 that no route of this machine overlaps, starting
  // from the pid and k so that parallel processes start apart.
  ZSHARD_ASSIGN_OR_RETURN(
      std::string routes,
      RunTool({ip, "-4", "-o", "route", "show", "table", "all"}, scratch, 0));
  const int start = static_cast<int>((pid * 8 + k) % 32768);
  std::string subnet;
  for (int j = 0; j < 512 && subnet.empty(); ++j) {
    const int index = (start + j * 97) % 32768;
    const int x = 128 + index / 256;
    const int y = index % 256;
    if (!Overlaps(routes, x, y)) subnet = absl::StrCat("10.", x, ".", y);
  }
  if (subnet.empty()) {
    return absl::ResourceExhaustedError("no free /24 in 10.128.0.0/9");
  }
  std::unique_ptr<NetHosts> net(new NetHosts(tag, subnet));
  net->ip_path_ = ip;
  absl::Status built = net->Build(hosts);
  if (!built.ok()) return built;  // The destructor removes what was made.
  return net;
}

NetHosts::NetHosts(std::string tag, std::string subnet)
    : tag_(std::move(tag)), subnet_(std::move(subnet)) {
  test_address_ = subnet_ + ".254";
}

NetHosts::~NetHosts() { Remove(); }

std::string NetHosts::Namespace(int host) const {
  return absl::StrCat(tag_, "-h", host);
}

std::vector<std::string> NetHosts::Command(int host) const {
  return {ip_path_, "netns", "exec", Namespace(host)};
}

absl::StatusOr<std::string> NetHosts::Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {ip_path_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunTool(argv, dir_, runs_++);
}

absl::Status NetHosts::Build(int hosts) {
  const std::string sw = tag_ + "-sw";
  ZSHARD_RETURN_IF_ERROR(Ip({"netns", "add", sw}).status());
  namespaces_.push_back(sw);
  ZSHARD_RETURN_IF_ERROR(
      Ip({"-n", sw, "link", "add", "br0", "type", "bridge"}).status());
  ZSHARD_RETURN_IF_ERROR(Ip({"-n", sw, "link", "set", "br0", "up"}).status());
  for (int i = 0; i < hosts; ++i) {
    const std::string ns = Namespace(i);
    const std::string port = absl::StrCat("h", i);
    const std::string address = absl::StrCat(subnet_, ".", i + 1);
    ZSHARD_RETURN_IF_ERROR(Ip({"netns", "add", ns}).status());
    namespaces_.push_back(ns);
    ZSHARD_RETURN_IF_ERROR(Ip({"-n", sw, "link", "add", port, "type", "veth",
                               "peer", "name", "eth0", "netns", ns})
                               .status());
    ZSHARD_RETURN_IF_ERROR(
        Ip({"-n", sw, "link", "set", port, "master", "br0", "up"}).status());
    ZSHARD_RETURN_IF_ERROR(Ip({"-n", ns, "link", "set", "lo", "up"}).status());
    ZSHARD_RETURN_IF_ERROR(
        Ip({"-n", ns, "addr", "add", address + "/24", "dev", "eth0"}).status());
    ZSHARD_RETURN_IF_ERROR(
        Ip({"-n", ns, "link", "set", "eth0", "up"}).status());
    addresses_.push_back(address);
    limited_.push_back(false);
    dropping_.push_back(false);
  }
  // The test process's own port on the bridge: the peer is made in this
  // process's namespace (named by its pid) under the tag.
  ZSHARD_RETURN_IF_ERROR(
      Ip({"-n", sw, "link", "add", "test", "type", "veth", "peer", "name", tag_,
          "netns", absl::StrCat(getpid())})
          .status());
  root_link_ = true;
  ZSHARD_RETURN_IF_ERROR(
      Ip({"-n", sw, "link", "set", "test", "master", "br0", "up"}).status());
  ZSHARD_RETURN_IF_ERROR(
      Ip({"addr", "add", test_address_ + "/24", "dev", tag_}).status());
  return Ip({"link", "set", tag_, "up"}).status();
}

void NetHosts::Remove() {
  auto report = [](const absl::Status& s) {
    if (!s.ok()) std::fprintf(stderr, "NetHosts: %s\n", s.ToString().c_str());
  };
  for (int host = 0; host < size(); ++host) {
    if (limited_[host] || dropping_[host]) report(ClearFaults(host));
  }
  // The root link first: deleting the bridge's namespace would delete it
  // too, but after the call returns. Then the hosts, and the bridge's
  // namespace last (with the bridge and every veth: a veth goes with its
  // peer).
  if (root_link_) {
    report(Ip({"link", "del", tag_}).status());
    root_link_ = false;
  }
  for (auto it = namespaces_.rbegin(); it != namespaces_.rend(); ++it) {
    report(Ip({"netns", "del", *it}).status());
  }
  namespaces_.clear();
}

absl::Status NetHosts::CheckHost(int host) const {
  if (host < 0 || host >= size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no host ", host, " (", size(), " hosts)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> NetHosts::Run(int host,
                                          std::vector<std::string> argv,
                                          int64_t timeout_ms) {
  ZSHARD_RETURN_IF_ERROR(CheckHost(host));
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  const std::string path = FindTool(argv[0]);
  if (path.empty()) {
    return absl::NotFoundError(absl::StrCat("no executable '", argv[0], "'"));
  }
  argv[0] = path;
  std::vector<std::string> full = Command(host);
  full.insert(full.end(), argv.begin(), argv.end());
  return RunTool(full, dir_, runs_++, timeout_ms);
}

absl::StatusOr<std::string> NetHosts::InHost(
    int host, const std::string& tool, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {tool};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(host, std::move(argv));
}

absl::Status NetHosts::Cut(int a, int b) {
  ZSHARD_RETURN_IF_ERROR(CheckHost(a));
  ZSHARD_RETURN_IF_ERROR(CheckHost(b));
  if (a == b)
    return absl::InvalidArgumentError("cannot cut a host from itself");
  const std::pair<int, int> pair = {std::min(a, b), std::max(a, b)};
  if (std::find(cuts_.begin(), cuts_.end(), pair) != cuts_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("hosts ", a, " and ", b, " are cut already"));
  }
  ZSHARD_RETURN_IF_ERROR(
      Ip({"-n", Namespace(a), "route", "add", "blackhole", Address(b) + "/32"})
          .status());
  ZSHARD_RETURN_IF_ERROR(
      Ip({"-n", Namespace(b), "route", "add", "blackhole", Address(a) + "/32"})
          .status());
  cuts_.push_back(pair);
  return absl::OkStatus();
}

absl::Status NetHosts::Heal(int a, int b) {
  ZSHARD_RETURN_IF_ERROR(CheckHost(a));
  ZSHARD_RETURN_IF_ERROR(CheckHost(b));
  const std::pair<int, int> pair = {std::min(a, b), std::max(a, b)};
  auto it = std::find(cuts_.begin(), cuts_.end(), pair);
  if (it == cuts_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("hosts ", a, " and ", b, " are not cut"));
  }
  cuts_.erase(it);
  ZSHARD_RETURN_IF_ERROR(
      Ip({"-n", Namespace(a), "route", "del", "blackhole", Address(b) + "/32"})
          .status());
  return Ip({"-n", Namespace(b), "route", "del", "blackhole",
             Address(a) + "/32"})
      .status();
}

absl::Status NetHosts::CutAll(int host) {
  ZSHARD_RETURN_IF_ERROR(CheckHost(host));
  for (int other = 0; other < size(); ++other) {
    const std::pair<int, int> pair = {std::min(host, other),
                                      std::max(host, other)};
    if (other == host ||
        std::find(cuts_.begin(), cuts_.end(), pair) != cuts_.end()) {
      continue;
    }
    ZSHARD_RETURN_IF_ERROR(Cut(host, other));
  }
  return absl::OkStatus();
}

absl::Status NetHosts::HealAll(int host) {
  ZSHARD_RETURN_IF_ERROR(CheckHost(host));
  for (int other = 0; other < size(); ++other) {
    const std::pair<int, int> pair = {std::min(host, other),
                                      std::max(host, other)};
    if (std::find(cuts_.begin(), cuts_.end(), pair) == cuts_.end()) continue;
    ZSHARD_RETURN_IF_ERROR(Heal(host, other));
  }
  return absl::OkStatus();
}

absl::Status NetHosts::LimitRate(int host, int mbit) {
  ZSHARD_RETURN_IF_ERROR(CheckHost(host));
  if (mbit < 1 || mbit > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("a rate of 1 to 100000 Mbit/s, not ", mbit));
  }
  // A bucket of about 4 ms at the rate (at least 32 KiB, more than one
  // full-size packet); packets queue up to 50 ms before tbf drops them.
  const int64_t burst = std::max<int64_t>(32768, int64_t{mbit} * 125000 / 250);
  ZSHARD_RETURN_IF_ERROR(
      InHost(host, "tc",
             {"qdisc", "replace", "dev", "eth0", "root", "tbf", "rate",
              absl::StrCat(mbit, "mbit"), "burst", absl::StrCat(burst),
              "latency", "50ms"})
          .status());
  limited_[host] = true;
  return absl::OkStatus();
}

absl::Status NetHosts::DropRandom(int host, int percent) {
  ZSHARD_RETURN_IF_ERROR(CheckHost(host));
  if (percent < 0 || percent > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("a loss of 0 to 100 percent, not ", percent));
  }
  if (FindTool("nft").empty()) {
    return absl::FailedPreconditionError(
        "needs `nft` (nftables: bash deploy/install-deps.sh)");
  }
  // Declaring the table first makes the delete valid when it is absent;
  // the file is applied as one transaction.
  std::string rules = absl::StrCat("table inet ", kFaultTable,
                                   "\ndelete table inet ", kFaultTable, "\n");
  if (percent > 0) {
    // numgen's values are 0..99: 100 percent is a plain drop.
    const std::string drop =
        percent == 100
            ? "drop"
            : absl::StrCat("numgen random mod 100 < ", percent, " drop");
    absl::StrAppend(
        &rules, "table inet ", kFaultTable, " {\n",
        "  chain input {\n    type filter hook input priority 0; policy "
        "accept;\n    iifname \"lo\" accept\n    ",
        drop, "\n  }\n",
        "  chain output {\n    type filter hook output priority 0; policy "
        "accept;\n    oifname \"lo\" accept\n    ",
        drop, "\n  }\n}\n");
  }
  const std::string file = dir_.File(absl::StrCat("faults-", host, ".nft"));
  std::ofstream(file) << rules;
  ZSHARD_RETURN_IF_ERROR(InHost(host, "nft", {"-f", file}).status());
  dropping_[host] = percent > 0;
  return absl::OkStatus();
}

absl::Status NetHosts::ClearFaults(int host) {
  ZSHARD_RETURN_IF_ERROR(CheckHost(host));
  if (limited_[host]) {
    ZSHARD_RETURN_IF_ERROR(
        InHost(host, "tc", {"qdisc", "del", "dev", "eth0", "root"}).status());
    limited_[host] = false;
  }
  if (dropping_[host]) {
    ZSHARD_RETURN_IF_ERROR(
        InHost(host, "nft", {"delete", "table", "inet", kFaultTable}).status());
    dropping_[host] = false;
  }
  return absl::OkStatus();
}

}  // namespace zshard::testing
