// linkfit's NRI plugin on a real socket: a fake container runtime on the other end of a
// socketpair() registers it, configures it, synchronises in chunks, creates and removes
// containers, refuses or never answers a registration, and closes the connection; a reconnected
// plugin rebuilds its ledger from Synchronize (design §5.4).

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "linkfit/kube/annotations.h"
#include "linkfit/node/nri_connection.h"
#include "testing/fixtures.h"

namespace linkfit::node {
namespace {

topology::TopologySpec Node() {
  topology::TopologySpec spec = linkfit::testing::LoadFixture("dgx-h100")->spec();
  for (topology::GpuSpec& gpu : spec.gpus) gpu.uuid = "GPU-" + std::to_string(gpu.index);
  return spec;
}

std::string Plan(const std::string& uid, std::vector<int> gpus) {
  kube::AllocationRecord record;
  record.pod = "ml/" + uid;
  record.uid = uid;
  record.node = "n1";
  record.devices.gpus = gpus;
  record.containers = {{"main", false, record.devices}};
  return kube::EncodeAllocationRecord(record);
}

// The runtime's end of the socket.
class FakeNriRuntime {
 public:
  explicit FakeNriRuntime(int fd) : fd_(fd) {}
  ~FakeNriRuntime() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Reads until a whole ttrpc message arrives on `conn`.
  TtrpcFrame Read(std::uint32_t conn) {
    for (;;) {
      if (auto message = ttrpc_[conn].Next()) return *message;
      while (auto frame = mux_.Next()) {
        EXPECT_TRUE(ttrpc_[frame->conn].Feed(frame->payload));
      }
      if (auto message = ttrpc_[conn].Next()) return *message;
      char buffer[4096];
      const ssize_t got = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (got <= 0) {
        ADD_FAILURE() << "the plugin closed the connection";
        return {};
      }
      EXPECT_TRUE(mux_.Feed(std::string_view(buffer, static_cast<std::size_t>(got))));
    }
  }
  void Write(std::uint32_t conn, const TtrpcFrame& frame) {
    const std::string bytes = EncodeMuxFrame(conn, EncodeTtrpcFrame(frame).value());
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Reads the plugin's RegisterPlugin and answers it (status 0 accepts).
  TtrpcRequest AcceptRegistration(std::int32_t status = 0) {
    const TtrpcFrame frame = Read(kRuntimeConn);
    auto request = DecodeTtrpcRequest(frame.payload);
    EXPECT_TRUE(request);
    Write(kRuntimeConn, {frame.stream, TtrpcType::kResponse, 0,
                         EncodeTtrpcResponse({status, status == 0 ? "" : "no more plugins", ""})});
    return request.value_or(TtrpcRequest{});
  }
  TtrpcResponse Call(const std::string& method, const std::string& payload) {
    const std::uint32_t stream = next_stream_;
    next_stream_ += 2;
    Write(kPluginConn, {stream, TtrpcType::kRequest, 0,
                        EncodeTtrpcRequest({kPluginService, method, payload, 2'000'000'000, {}})});
    const TtrpcFrame reply = Read(kPluginConn);
    EXPECT_EQ(reply.stream, stream);
    return DecodeTtrpcResponse(reply.payload).value_or(TtrpcResponse{});
  }
  TtrpcResponse Create(const std::string& uid, const std::string& plan) {
    ContainerEvent event;
    event.pod = {
        "sandbox-" + uid, "p-" + uid, uid, "ml", {}, {{kube::kAnnotationAllocation, plan}}};
    event.container = {"ctr-" + uid, "sandbox-" + uid, "main", {}, {}};
    return Call("CreateContainer", EncodeContainerEvent(event));
  }

 private:
  int fd_;
  MuxReader mux_;
  std::map<std::uint32_t, TtrpcReader> ttrpc_;
  std::uint32_t next_stream_ = 1;
};

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

}  // namespace
}  // namespace linkfit::node
