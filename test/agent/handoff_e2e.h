#pragma once

// The node hand-off end to end, shared by its tests: the agent fixture (agent_e2e.h) plus the real
// linkfit-agent daemon serving its device plugin to a fake kubelet device manager and its NRI
// plugin to a fake runtime on a listening socket.
//
// Thread-safety: one test thread.

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent_e2e.h"
#include "handoff/fake_device_manager.h"
#include "handoff/fake_nri_runtime.h"
#include "handoff/node_testing.h"
#include "linkfit/common/strings.h"
#include "linkfit/handoff/nri_plugin.h"

namespace linkfit::agent {
namespace testing_e2e {

// The agent daemon, stopped with SIGTERM when the test ends.
class AgentDaemon {
 public:
  AgentDaemon(std::vector<std::string> args, const std::string& log_path) {
    const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = ::fork();
    if (pid_ == 0) {
      if (log_fd >= 0) {
        ::dup2(log_fd, STDOUT_FILENO);
        ::dup2(log_fd, STDERR_FILENO);
      }
      sigset_t none;
      sigemptyset(&none);
      pthread_sigmask(SIG_SETMASK, &none, nullptr);
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      _exit(127);
    }
    if (log_fd >= 0) ::close(log_fd);
  }
  ~AgentDaemon() { Stop(); }
  // SIGTERM, then the exit status (0: it stopped cleanly).
  int Stop() {
    if (pid_ <= 0) return status_;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

inline json Container(const std::string& name, const std::string& resource, int count) {
  json limits = {{"cpu", "1"}, {"memory", "1Gi"}};
  if (count > 0) limits[resource] = std::to_string(count);
  return {{"name", name}, {"resources", {{"limits", limits}}}};
}

inline json Pod(const std::string& name, json containers, json init_containers = json::array()) {
  json pod = PodObject({.name = name});
  pod["spec"]["containers"] = std::move(containers);
  if (!init_containers.empty()) pod["spec"]["initContainers"] = std::move(init_containers);
  return pod;
}

// The UUIDs a container's plan names, as the NRI plugin hands them (NVIDIA_VISIBLE_DEVICES order:
// whole GPUs, MIG instances, then shared GPUs).
inline std::string PlannedUuids(const kube::AllocationRecord& record,
                                const std::string& container) {
  for (const auto& entry : record.containers) {
    if (entry.name != container) continue;
    std::vector<std::string> uuids;
    for (int gpu : entry.devices.gpus) uuids.push_back(Uuid(gpu));
    for (const auto& mig : entry.devices.mig) uuids.push_back(mig.uuid);
    for (const auto& share : entry.devices.shares) uuids.push_back(Uuid(share.gpu));
    return uuids.empty() ? "void" : JoinStrings(uuids);
  }
  return "void";
}

inline std::vector<std::string> Args(std::vector<std::string> args,
                                     std::vector<std::string> extra) {
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

class HandoffEndToEndTest : public AgentEndToEndTest {
 protected:
  void SetUp() override {
    AgentEndToEndTest::SetUp();
    auto manager = linkfit::testing::StartFakeDeviceManager(seed_);
    ASSERT_TRUE(manager) << manager.error().message;
    device_manager_ = std::move(*manager);
    // The kubelet's PodResources answers what its device manager holds.
    device_manager_->SetListener(
        [this](std::vector<PodDeviceUse> pods) { kubelet_->SetPods(std::move(pods)); });
    kubelet_->SetPods({});
    nri_socket_ = device_manager_->directory() + "/nri.sock";
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", nri_socket_.c_str());
    ASSERT_EQ(::bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    ASSERT_EQ(::listen(listener_, 1), 0);
  }
  void TearDown() override {
    daemon_.reset();
    if (listener_ >= 0) ::close(listener_);
    device_manager_.reset();
    AgentEndToEndTest::TearDown();
  }
  void StartAgent() { StartAgent(nri_socket_); }
  void StartAgent(const std::string& nri_socket, std::vector<std::string> extra = {}) {
    setenv("LD_LIBRARY_PATH",
           std::filesystem::path(LINKFIT_FAKE_NVML_FULL).parent_path().string().c_str(), 1);
    setenv("LINKFIT_FAKE_NVML", recording_.c_str(), 1);
    log_path_ = ::testing::TempDir() + "/handoff-agent-" + std::to_string(getpid()) + ".log";
    daemon_ = std::make_unique<AgentDaemon>(
        Args({LINKFIT_AGENT_BINARY, "--node-name", "a100-0", "--kubeconfig", kubeconfig_,
              "--pod-resources-socket", kubelet_->socket_path(), "--nri-socket", nri_socket,
              "--device-plugin-dir", device_manager_->directory(), "--devices-interval", "1",
              "--host-sys", "/nonexistent-sysfs"},  // not this machine's PCIe tree or NICs
             std::move(extra)),
        log_path_);
    unsetenv("LD_LIBRARY_PATH");
  }
  std::string AgentLog() const { return linkfit::testing::ReadFileOrDie(log_path_); }
  // Waits until the node's published topology document states `mode`; returns it then.
  std::optional<topology::TopologySpec> WaitForPublishedMode(const std::string& mode) {
    std::optional<topology::TopologySpec> published;
    WaitFor(
        [&] {
          if (!Annotations().contains(kube::kAnnotationTopology)) return false;
          auto spec = topology::ParseTopologyDocument(
              Annotations()[kube::kAnnotationTopology].get<std::string>());
          if (!spec || spec->handoff_mode != mode) return false;
          published = std::move(*spec);
          return true;
        },
        std::chrono::seconds(10));
    return published;
  }

  unsigned seed_ = 7;
  std::unique_ptr<linkfit::testing::FakeDeviceManager> device_manager_;
  std::string nri_socket_;
  int listener_ = -1;
  std::string log_path_;
  std::unique_ptr<AgentDaemon> daemon_;
};

}  // namespace testing_e2e
}  // namespace linkfit::agent
