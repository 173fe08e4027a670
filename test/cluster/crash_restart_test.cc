// kill -9 during a bind storm, then restart: linkfit's state equals the API's truth. The real
// `linkfit serve --kubeconfig` binary of this build tree runs against the fake API server; eight
// threads bind pods as fast as they can while the process is killed without warning.

#include <fcntl.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cluster/cluster_testing.h"
#include "kube/fake_api_server.h"
#include "linkfit/kube/annotations.h"
#include "testing/fixtures.h"

#ifdef LINKFIT_SERVE_BINARY

namespace linkfit::cluster {
namespace {

using nlohmann::json;

// `linkfit serve` as a child process; its port is read from its first stdout line.
class Child {
 public:
  // `config` empty: a config of the test's own (small pages); else that file, as given.
  Child(const std::string& kubeconfig, const std::string& log_path,
        const std::vector<std::string>& extra = {}, const std::string& config = "") {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    const std::string mig = linkfit::testing::SourcePath("config/mig");
    const std::string config_path = config.empty() ? log_path + ".yaml" : config;
    if (config.empty()) {
      FILE* file = std::fopen(config_path.c_str(), "w");
      if (file == nullptr) return;
      std::fprintf(file,
                   "mig_profiles_dir: %s\nlimits: {threads: 16}\n"
                   "kubernetes: {request_timeout_ms: 2000, list_page_size: 5}\n",
                   mig.c_str());
      std::fclose(file);
    }
    std::vector<std::string> args = {LINKFIT_SERVE_BINARY, "serve",    "--config", config_path,
                                     "--kubeconfig",       kubeconfig, "--listen", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      if (log_fd >= 0) dup2(log_fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    if (log_fd >= 0) close(log_fd);
    std::string line;
    pollfd poll_fd{fds[0], POLLIN, 0};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      if (poll(&poll_fd, 1, 100) <= 0) continue;
      char buffer[256];
      const ssize_t n = read(fds[0], buffer, sizeof buffer);
      if (n <= 0) break;
      line.append(buffer, static_cast<std::size_t>(n));
    }
    close(fds[0]);
    const std::string prefix = "linkfit listening on http://127.0.0.1:";
    if (const auto at = line.find(prefix); at != std::string::npos) {
      port_ = std::atoi(line.c_str() + at + prefix.size());
    }
  }
  ~Child() { Kill(); }
  int port() const { return port_; }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  bool WaitReady() const {
    httplib::Client client("127.0.0.1", port_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      auto reply = client.Get("/readyz");
      if (reply && reply->status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

std::string BindBody(const json& pod, const std::string& node) {
  return json{{"PodName", pod["metadata"]["name"]},
              {"PodNamespace", pod["metadata"]["namespace"]},
              {"PodUID", pod["metadata"]["uid"]},
              {"Node", node}}
      .dump();
}

TEST(CrashRestartTest, KillNineDuringABindStormThenRestartMatchesTheApi) {
  linkfit::testing::FakeApiServerOptions options;
  options.bookmark_interval = std::chrono::milliseconds(200);
  auto fake = linkfit::testing::StartFakeApiServer(options);
  ASSERT_TRUE(fake.has_value()) << fake.error().message;
  auto kubeconfig = (*fake)->WriteKubeconfig();
  ASSERT_TRUE(kubeconfig.has_value());
  const std::vector<std::string> nodes = {"h100-0", "h100-1", "v100-0", "v100-1"};
  for (const std::string& node : nodes) {
    const std::string fixture = node.starts_with("h100") ? "dgx-h100" : "dgx1-v100";
    ASSERT_TRUE((*fake)
                    ->AddNode(testing::NodeObject(node, testing::TopologyDocument(fixture)))
                    .has_value());
  }
  std::vector<json> pods;
  for (int i = 0; i < 60; ++i) {
    auto pod =
        (*fake)->AddPod(testing::PodObject({.name = "p" + std::to_string(i), .gpus = 1 + i % 2}));
    ASSERT_TRUE(pod.has_value());
    pods.push_back(*pod);
  }
  (*fake)->SetBindingDelay(std::chrono::milliseconds(5));
  const std::string log = (*fake)->work_dir() + "/linkfit.log";
  auto first = std::make_unique<Child>(*kubeconfig, log);
  ASSERT_GT(first->port(), 0) << "see " << log;
  ASSERT_TRUE(first->WaitReady());

  std::atomic<int> next{0};
  std::atomic<bool> killed{false};
  std::vector<std::thread> schedulers;
  for (int t = 0; t < 8; ++t) {
    schedulers.emplace_back([&, port = first->port()] {
      httplib::Client client("127.0.0.1", port);
      client.set_read_timeout(5);
      for (int i = next++; i < static_cast<int>(pods.size()) && !killed; i = next++) {
        const json& pod = pods[static_cast<std::size_t>(i)];
        client.Post("/scheduler/bind", BindBody(pod, nodes[static_cast<std::size_t>(i) % 4]),
                    "application/json");
      }
    });
  }
  // Kill in the middle of the storm.
  while ((*fake)->Bindings().size() < 15) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  first->Kill();
  killed = true;
  for (std::thread& scheduler : schedulers) scheduler.join();
  (*fake)->SetBindingDelay(std::chrono::milliseconds(0));
  // Bindings the dead process sent may still be landing at the API server: wait until the
  // count of answered bindings holds still for 200 ms (bounded by 10 s).
  for (int stable = 0, rounds = 0; stable < 20 && rounds < 1000; ++rounds) {
    const std::size_t before = (*fake)->Bindings().size();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stable = (*fake)->Bindings().size() == before ? stable + 1 : 0;
  }

  // The truth: every bound pod's record; no GPU twice.
  std::map<std::string, std::map<std::string, unsigned>> truth;
  for (const json& pod : (*fake)->Pods()) {
    if (!pod["spec"].contains("nodeName")) continue;
    const auto annotations = pod["metadata"].value("annotations", json::object());
    ASSERT_TRUE(annotations.contains(kube::kAnnotationAllocation)) << pod.dump();
    auto record =
        kube::DecodeAllocationRecord(annotations[kube::kAnnotationAllocation].get<std::string>());
    ASSERT_TRUE(record.has_value());
    unsigned mask = 0;
    for (int gpu : record->devices.gpus) mask |= 1u << gpu;
    for (const auto& [other, held] : truth[record->node]) {
      ASSERT_EQ(held & mask, 0u) << record->uid << " and " << other << " share a GPU";
    }
    truth[record->node][record->uid] = mask;
  }
  ASSERT_FALSE(truth.empty());

  auto second = std::make_unique<Child>(*kubeconfig, log);
  ASSERT_GT(second->port(), 0);
  ASSERT_TRUE(second->WaitReady());
  httplib::Client client("127.0.0.1", second->port());
  const json inspect = json::parse(client.Get("/inspect")->body);
  std::map<std::string, std::map<std::string, unsigned>> rebuilt;
  for (const json& node : inspect["nodes"]) {
    for (const json& gpu : node["gpus"]) {
      for (const json& uid : gpu["pods"]) {
        rebuilt[node["name"]][uid.get<std::string>()] |= 1u << gpu["index"].get<int>();
      }
    }
  }
  EXPECT_EQ(rebuilt, truth);
  // And the restarted linkfit goes on scheduling the rest without sharing a GPU.
  for (const json& pod : pods) {
    const auto stored = (*fake)->GetPod("ml", pod["metadata"]["name"]);
    if (stored && (*stored)["spec"].contains("nodeName")) continue;
    for (const std::string& node : nodes) {
      auto reply = client.Post("/scheduler/bind", BindBody(pod, node), "application/json");
      if (reply && json::parse(reply->body)["Error"] == "") break;
    }
  }
  std::map<std::string, unsigned> used;
  for (const json& pod : (*fake)->Pods()) {
    if (!pod["spec"].contains("nodeName")) continue;
    auto record = kube::DecodeAllocationRecord(
        pod["metadata"]["annotations"][kube::kAnnotationAllocation].get<std::string>());
    ASSERT_TRUE(record.has_value());
    unsigned mask = 0;
    for (int gpu : record->devices.gpus) mask |= 1u << gpu;
    EXPECT_EQ(used[record->node] & mask, 0u);
    used[record->node] |= mask;
  }
}

// As an outside check runs it: the demo config (which names a cluster file: --kubeconfig wins),
// a kubeconfig, an operations listener; ready, then a Binding with the GPUs under "gpus".
TEST(CrashRestartTest, TheDemoConfigWithAKubeconfigBecomesReadyAndBinds) {
  auto fake = linkfit::testing::StartFakeApiServer();
  ASSERT_TRUE(fake.has_value()) << fake.error().message;
  auto kubeconfig = (*fake)->WriteKubeconfig();
  ASSERT_TRUE(kubeconfig.has_value());
  ASSERT_TRUE((*fake)
                  ->AddNode(testing::NodeObject("dgx-0", testing::TopologyDocument("dgx-h100")))
                  .has_value());
  auto pod = (*fake)->AddPod(testing::PodObject({.name = "train", .gpus = 4}));
  ASSERT_TRUE(pod.has_value());
  const std::string log = (*fake)->work_dir() + "/demo.log";
  Child child(*kubeconfig, log, {"--ops-listen", "127.0.0.1:0"},
              linkfit::testing::SourcePath("config/demo.yaml"));
  ASSERT_GT(child.port(), 0) << "see " << log;
  ASSERT_TRUE(child.WaitReady());
  httplib::Client client("127.0.0.1", child.port());
  auto bound = client.Post("/scheduler/bind", BindBody(*pod, "dgx-0"), "application/json");
  ASSERT_TRUE(bound);
  EXPECT_EQ(bound->body, R"({"Error":""})");
  const auto bindings = (*fake)->Bindings();
  ASSERT_EQ(bindings.size(), 1u);
  const json record = json::parse(
      bindings[0].body["metadata"]["annotations"][kube::kAnnotationAllocation].get<std::string>());
  EXPECT_EQ(record["gpus"].size(), 4u);
  // The extender listener does not serve the operations routes.
  EXPECT_EQ(client.Get("/metrics")->status, 404);
}

}  // namespace
}  // namespace linkfit::cluster

#endif  // LINKFIT_SERVE_BINARY
