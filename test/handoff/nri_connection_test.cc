// linkfit's NRI plugin on a real socket: a fake container runtime on the other end of a
// socketpair() registers it, configures it, synchronises in chunks, creates and removes
// containers, refuses or never answers a registration, and closes the connection; a reconnected
// plugin rebuilds its ledger from Synchronize (design §5.4).

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "handoff/fake_nri_runtime.h"
#include "handoff/node_testing.h"
#include "linkfit/handoff/nri_connection.h"
#include "linkfit/kube/annotations.h"

namespace linkfit::handoff {
namespace {

using linkfit::testing::FakeNriRuntime;

topology::TopologySpec Node() { return linkfit::testing::H100Node(); }

std::string Plan(const std::string& uid, std::vector<int> gpus) {
  return linkfit::testing::WholeGpuPlan(uid, std::move(gpus));
}

struct Connected {
  int plugin_fd = -1;
  int runtime_fd = -1;
  Connected() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    plugin_fd = fds[0];
    runtime_fd = fds[1];
  }
  ~Connected() {
    if (plugin_fd >= 0) ::close(plugin_fd);
  }
};

TEST(NriConnection, RegistersServesAndEndsWhenTheRuntimeCloses) {
  Connected sockets;
  NriPlugin plugin({"n1"}, Node);
  std::atomic<bool> stop{false};
  Result<void> served;
  std::thread serving([&] { served = ServeNri(sockets.plugin_fd, plugin, {}, stop); });
  {
    FakeNriRuntime runtime(sockets.runtime_fd);
    const TtrpcRequest registration = runtime.AcceptRegistration();
    EXPECT_EQ(registration.service, kRuntimeService);
    EXPECT_EQ(registration.method, "RegisterPlugin");
    EXPECT_EQ(registration.payload, EncodeRegisterPlugin("linkfit", "10"));
    EXPECT_EQ(runtime.Call("Configure", "").payload, EncodeConfigureResponse(1548));
    SynchronizeRequest chunk;
    chunk.pods = {{"sandbox-a", "p-a", "ua", "ml", {}, {}}};
    chunk.containers = {
        {"ctr-a", "sandbox-a", "main", {{kAnnotationHanded, "gpus=GPU-0;mig=;shares="}}, {}}};
    chunk.more = true;
    EXPECT_EQ(runtime.Call("Synchronize", EncodeSynchronizeRequest(chunk)).status_code, 0);
    EXPECT_EQ(runtime.Call("Synchronize", EncodeSynchronizeRequest({})).status_code, 0);
    // GPU 0 is ua's since before the plugin started; GPUs 1 and 2 are free.
    const auto started = std::chrono::steady_clock::now();
    const TtrpcResponse refused = runtime.Create("ub", Plan("ub", {0, 1}));
    EXPECT_EQ(refused.status_code, 2);
    EXPECT_NE(refused.status_message.find("held by pod ua"), std::string::npos);
    const TtrpcResponse injected = runtime.Create("uc", Plan("uc", {1, 2}));
    EXPECT_EQ(injected.status_code, 0) << injected.status_message;
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  }  // the runtime closes the connection
  serving.join();
  EXPECT_TRUE(served) << served.error().message;
  EXPECT_EQ(plugin.ledger().containers(), 2u);

  // The plugin reconnects as a new process would: an empty ledger, rebuilt by Synchronize.
  Connected again;
  NriPlugin restarted({"n1"}, Node);
  std::thread second([&] { served = ServeNri(again.plugin_fd, restarted, {}, stop); });
  {
    FakeNriRuntime runtime(again.runtime_fd);
    runtime.AcceptRegistration();
    runtime.Call("Configure", "");
    SynchronizeRequest all;
    all.pods = {{"sandbox-c", "p-c", "uc", "ml", {}, {}}};
    all.containers = {
        {"ctr-c", "sandbox-c", "main", {{kAnnotationHanded, "gpus=GPU-1,GPU-2;mig=;shares="}}, {}}};
    runtime.Call("Synchronize", EncodeSynchronizeRequest(all));
    EXPECT_EQ(runtime.Create("ud", Plan("ud", {2})).status_code, 2);
  }
  second.join();
  EXPECT_TRUE(served);
}

TEST(NriConnection, ARefusedOrUnansweredRegistrationIsAnError) {
  std::atomic<bool> stop{false};
  {
    Connected sockets;
    NriPlugin plugin({"n1"}, Node);
    Result<void> served;
    std::thread serving([&] { served = ServeNri(sockets.plugin_fd, plugin, {}, stop); });
    FakeNriRuntime runtime(sockets.runtime_fd);
    runtime.AcceptRegistration(/*status=*/9);
    serving.join();
    ASSERT_FALSE(served);
    EXPECT_NE(served.error().message.find("refused the registration: no more plugins"),
              std::string::npos);
  }
  {
    Connected sockets;
    NriPlugin plugin({"n1"}, Node);
    NriServeOptions options;
    options.registration_timeout = std::chrono::milliseconds(300);
    auto served = ServeNri(sockets.plugin_fd, plugin, options, stop);  // nobody answers
    ::close(sockets.runtime_fd);
    ASSERT_FALSE(served);
    EXPECT_NE(served.error().message.find("did not answer RegisterPlugin"), std::string::npos);
  }
  {
    Connected sockets;
    NriPlugin plugin({"n1"}, Node);
    Result<void> served;
    std::thread serving([&] { served = ServeNri(sockets.plugin_fd, plugin, {}, stop); });
    const char garbage[] = {0, 0, 0, 1, 0x7f, 0, 0, 0};
    ASSERT_EQ(::send(sockets.runtime_fd, garbage, sizeof(garbage), MSG_NOSIGNAL), 8);
    serving.join();
    ::close(sockets.runtime_fd);
    ASSERT_FALSE(served);
  }
  EXPECT_FALSE(DialNri("/nonexistent/nri.sock"));
}

// On a real socket: a request far above 4 KiB (a long environment) reaches the plugin in the
// frames a Go runtime writes, the answer naming 56 MIG instances comes back in the frames a Go
// peer writes (4096 bytes, then the rest) and reads; RemoveContainer and RemovePodSandbox answer
// empty and free the ledger.
TEST(NriConnection, LargeMessagesAndRemoveEventsOnTheSocket) {
  Connected sockets;
  NriPlugin plugin({"n1"}, linkfit::testing::MigSlicedNode);
  std::atomic<bool> stop{false};
  Result<void> served;
  std::thread serving([&] { served = ServeNri(sockets.plugin_fd, plugin, {}, stop); });
  {
    FakeNriRuntime runtime(sockets.runtime_fd);
    runtime.AcceptRegistration();
    ASSERT_EQ(
        runtime.Call("Configure", EncodeConfigureRequest({"", "containerd", "v2.1.0"})).status_code,
        0);
    ContainerEvent event;
    event.pod = {
        "sandbox-m", "p-m",
        "um",        "ml",
        {},          {{kube::kAnnotationAllocation, linkfit::testing::AllMigInstancesPlan("um")}}};
    event.container = {"ctr-m", "sandbox-m", "main", {}, {}};
    for (int i = 0; i < 400; ++i) {
      event.container.env.push_back("VARIABLE_" + std::to_string(i) + "=" + std::string(30, 'v'));
    }
    const std::size_t before = runtime.frame_sizes(kPluginConn).size();
    const TtrpcResponse created = runtime.Call("CreateContainer", EncodeContainerEvent(event));
    ASSERT_EQ(created.status_code, 0) << created.status_message;
    auto adjust = DecodeCreateContainerResponse(created.payload);
    ASSERT_TRUE(adjust);
    EXPECT_EQ(adjust->cdi_devices.size(), 56u);
    const std::vector<std::size_t>& sizes = runtime.frame_sizes(kPluginConn);
    ASSERT_EQ(sizes.size(), before + 2);
    EXPECT_EQ(sizes[before], kTtrpcChannelBuffer);
    EXPECT_GT(sizes[before + 1], kTtrpcChannelBuffer / 2);

    // The ledger belongs to the serving thread: what it holds shows in what is refused.
    ContainerEvent other = event;
    other.pod.uid = "un";
    other.pod.annotations[kube::kAnnotationAllocation] =
        linkfit::testing::AllMigInstancesPlan("un");
    EXPECT_EQ(runtime.Call("CreateContainer", EncodeContainerEvent(other)).status_code, 2);
    const TtrpcResponse removed = runtime.Call("RemoveContainer", EncodeContainerEvent(event));
    EXPECT_EQ(removed, (TtrpcResponse{0, "", ""}));
    EXPECT_EQ(runtime.Call("CreateContainer", EncodeContainerEvent(other)).status_code, 0);
    EXPECT_EQ(runtime.Call("CreateContainer", EncodeContainerEvent(event)).status_code, 2);
    EXPECT_EQ(runtime.Call("RemovePodSandbox", EncodePodSandboxEvent(other.pod)),
              (TtrpcResponse{0, "", ""}));
    EXPECT_EQ(runtime.Call("CreateContainer", EncodeContainerEvent(event)).status_code, 0);
  }
  serving.join();
  EXPECT_TRUE(served) << served.error().message;
  EXPECT_EQ(plugin.ledger().containers(), 1u);
}

}  // namespace
}  // namespace linkfit::handoff
