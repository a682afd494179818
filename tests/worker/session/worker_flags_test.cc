// Tests of zshard-worker's flag parsing: forms, defaults from the
// environment, and one-line errors.

#include "client/worker/session/worker_flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace zshard::worker {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(WorkerFlagsTest, ParsesAllFlags) {
  auto flags = ParseWorkerFlags(
      {"--coordinator", "127.0.0.1:7000", "--name=w1", "--device", "cuda",
       "--labels", "node=a,zone=b", "--address", "10.0.0.1:9000", "--tls-ca",
       "ca.pem", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--log-format",
       "json"},
      Env({}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->channel.target, "127.0.0.1:7000");
  EXPECT_EQ(flags->session.name, "w1");
  EXPECT_EQ(flags->session.device, "cuda");
  EXPECT_EQ(flags->session.train.engine.device,
            (device::DeviceSpec{device::DeviceKind::kCuda, 0}));
  EXPECT_EQ(flags->session.labels.at("zone"), "b");
  EXPECT_EQ(flags->session.address, "10.0.0.1:9000");
  EXPECT_EQ(flags->channel.tls_key_file, "k.pem");
  EXPECT_EQ(flags->log_format, LogFormat::kJson);
}

TEST(WorkerFlagsTest, DeviceOrdinal) {
  auto flags = ParseWorkerFlags(
      {"--coordinator", "a:1", "--name", "w", "--device", "cuda:2"}, Env({}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->session.device, "cuda");
  EXPECT_EQ(flags->session.train.engine.device.ordinal, 2);
}

TEST(WorkerFlagsTest, TrainerSocketFromFlagOrEnvironment) {
  auto flags =
      ParseWorkerFlags({"--coordinator", "a:1", "--name", "w"},
                       Env({{"ZSHARD_TRAINER_SOCKET", "/run/t.sock"}}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->session.train.trainer_socket, "/run/t.sock");
  flags = ParseWorkerFlags(
      {"--coordinator", "a:1", "--name", "w", "--trainer-socket", "/x.sock"},
      Env({{"ZSHARD_TRAINER_SOCKET", "/run/t.sock"}}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->session.train.trainer_socket, "/x.sock");
  flags = ParseWorkerFlags(
      {"--coordinator", "a:1", "--name", "w", "--trainer-socket="}, Env({}));
  ASSERT_FALSE(flags.ok());
  EXPECT_EQ(flags.status().message(), "--trainer-socket must not be empty");
}

TEST(WorkerFlagsTest, DumpMasterDirectory) {
  auto flags = ParseWorkerFlags(
      {"--coordinator", "c:1", "--name", "w", "--dump-master", "/tmp/m"},
      Env({}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->session.train.dump_master_dir, "/tmp/m");
  flags = ParseWorkerFlags({"--coordinator", "c:1", "--name", "w"}, Env({}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->session.train.dump_master_dir, "");
  EXPECT_FALSE(
      ParseWorkerFlags({"--coordinator", "c:1", "--name", "w", "--dump-master"},
                       Env({}))
          .ok());
}

TEST(WorkerFlagsTest, CommHostFromFlagPodIpOrAddress) {
  const std::vector<std::string> base = {"--coordinator", "c:1", "--name", "w"};
  auto flags = ParseWorkerFlags(base, Env({}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->session.train.engine.hostname, "127.0.0.1");
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--address", "w-0.zshard:9000"});
  flags = ParseWorkerFlags(args, Env({}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->session.train.engine.hostname, "w-0.zshard");
  flags = ParseWorkerFlags(args, Env({{"POD_IP", "10.1.2.3"}}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->session.train.engine.hostname, "10.1.2.3");
  args.insert(args.end(), {"--comm-host", "192.168.0.7"});
  flags = ParseWorkerFlags(args, Env({{"POD_IP", "10.1.2.3"}}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->session.train.engine.hostname, "192.168.0.7");
  args = base;
  args.insert(args.end(), {"--comm-host="});
  EXPECT_FALSE(ParseWorkerFlags(args, Env({})).ok());
}

TEST(WorkerFlagsTest, CommTransport) {
  const std::vector<std::string> base = {"--coordinator", "c:1", "--name", "w"};
  auto flags = ParseWorkerFlags(base, Env({}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->session.train.engine.host_transport,
            comm::HostTransport::kAuto);
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--comm-transport", "tcp"});
  flags = ParseWorkerFlags(args, Env({}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->session.train.engine.host_transport,
            comm::HostTransport::kTcp);
  args = base;
  args.insert(args.end(), {"--comm-transport=udp"});
  flags = ParseWorkerFlags(args, Env({}));
  ASSERT_FALSE(flags.ok());
  EXPECT_EQ(flags.status().message(),
            "--comm-transport must be auto, tcp or shm, not 'udp'");
}

TEST(WorkerFlagsTest, CoordinatorTakesAList) {
  auto flags = ParseWorkerFlags({"--coordinator", "a:1,b:2,c:3", "--name", "w"},
                                Env({}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->channel.target, "a:1,b:2,c:3");
  flags = ParseWorkerFlags({"--name", "w"},
                           Env({{"ZSHARD_COORDINATOR", "a:1,b:2"}}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->channel.target, "a:1,b:2");
  flags =
      ParseWorkerFlags({"--name", "w"}, Env({{"ZSHARD_COORDINATOR", "a:1,"}}));
  ASSERT_FALSE(flags.ok());
  EXPECT_EQ(flags.status().message(),
            "coordinator list 'a:1,' has an empty entry");
}

TEST(WorkerFlagsTest, DefaultsFromEnvironment) {
  auto flags = ParseWorkerFlags(
      {}, Env({{"POD_NAME", "pod-3"}, {"ZSHARD_COORDINATOR", "coord:1"}}));
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->session.name, "pod-3");
  EXPECT_EQ(flags->channel.target, "coord:1");
  // Flags win over the environment.
  flags = ParseWorkerFlags(
      {"--name", "w2"},
      Env({{"POD_NAME", "pod-3"}, {"ZSHARD_COORDINATOR", "c:1"}}));
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->session.name, "w2");
}

TEST(WorkerFlagsTest, ErrorsNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string message_part;
  };
  const std::vector<Case> cases = {
      {{"--coordinator", "a:1"}, "--name"},
      {{"--name", "w"}, "--coordinator"},
      {{"--name", "w", "--coordinator", "a:1", "--device", "tpu"}, "--device"},
      {{"--name", "w", "--coordinator", "a:1", "--labels", "node"}, "--labels"},
      {{"--name", "w", "--coordinator", "a:1", "--bogus", "1"}, "--bogus"},
      {{"--name", "w", "--coordinator"}, "needs a value"},
      {{"--name", "w", "--coordinator", "a:1", "--tls-cert", "c"}, "--tls-key"},
      {{"--name", std::string(300, 'x'), "--coordinator", "a:1"}, "256"},
      {{"stray"}, "stray"},
      {{"--name", "w", "--coordinator", "a:1,,b:2"},
       "coordinator list 'a:1,,b:2' has an empty entry"},
      {{"--name", "w", "--coordinator", "a:1,b"},
       "coordinator address 'b' has no port"},
      {{"--name", "w", "--coordinator", "a:1", "--bogus"}, "unknown flag"},
  };
  for (const Case& c : cases) {
    auto flags = ParseWorkerFlags(c.args, Env({}));
    ASSERT_FALSE(flags.ok()) << c.message_part;
    EXPECT_EQ(flags.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(flags.status().message().find(c.message_part),
              absl::string_view::npos)
        << flags.status().message();
    EXPECT_EQ(flags.status().message().find('\n'), absl::string_view::npos);
  }
}

}  // namespace
}  // namespace zshard::worker
