// linkfit's NRI plugin driven as a runtime drives it, through the real framing (mux + ttrpc):
// Configure's event mask, CreateContainer injecting the plan or refusing with the reason,
// chunked Synchronize rebuilding the ledger after a restart, StopContainer and StateChange
// releasing devices. The messages' bytes are checked against hand-written golden encodings.

#include <gtest/gtest.h>

#include "linkfit/kube/annotations.h"
#include "linkfit/node/nri_plugin.h"
#include "node/node_testing.h"

namespace linkfit::node {
namespace {

using linkfit::testing::Bytes;

TEST(NriMessages, GoldenEncodings) {
  // RegisterPluginRequest{plugin_name: "linkfit", plugin_idx: "10"}.
  EXPECT_EQ(EncodeRegisterPlugin("linkfit", "10"),
            Bytes({0x0a, 7}) + "linkfit" + Bytes({0x12, 2}) + "10");
  // ConfigureResponse{events: 1548} = field 2, varint 1548 = 0x8c 0x0c.
  EXPECT_EQ(EncodeConfigureResponse(1548), Bytes({0x10, 0x8c, 0x0c}));
  // CreateContainerResponse{adjust: {env: [{key: "A", value: "b"}], CDI_devices: [{name: "x"}]}}.
  ContainerAdjustment adjust;
  adjust.env = {{"A", "b"}};
  adjust.cdi_devices = {"x"};
  const std::string inner = Bytes({0x22, 6, 0x0a, 1, 'A', 0x12, 1, 'b', 0x42, 3, 0x0a, 1, 'x'});
  EXPECT_EQ(EncodeCreateContainerResponse(adjust), Bytes({0x0a, 13}) + inner);
  // ...with linux: {devices: [{path: "/d", type: "c", major: 195, minor: 3, file_mode: {value:
  // 0666 = 438}}]} as field 6 before the CDI devices.
  adjust.devices = {{"/d", "c", 195, 3, 0666}};
  const std::string device = Bytes(
      {0x0a, 2, '/', 'd', 0x12, 1, 'c', 0x18, 0xc3, 0x01, 0x20, 3, 0x2a, 3, 0x08, 0xb6, 0x03});
  const std::string with_device =
      Bytes({0x22, 6, 0x0a, 1, 'A', 0x12, 1, 'b', 0x32, static_cast<int>(device.size()) + 2, 0x0a,
             static_cast<int>(device.size())}) +
      device + Bytes({0x42, 3, 0x0a, 1, 'x'});
  EXPECT_EQ(EncodeCreateContainerResponse(adjust),
            Bytes({0x0a, static_cast<int>(with_device.size())}) + with_device);
  EXPECT_EQ(DecodeCreateContainerResponse(EncodeCreateContainerResponse(adjust))->devices,
            adjust.devices);
  // A CreateContainerRequest as the runtime writes it, with fields linkfit skips (pod linux = 8,
  // container state = 4, args = 7) between the ones it reads.
  const std::string pod = Bytes({0x0a, 2}) + "s1" + Bytes({0x1a, 2}) + "u1" +
                          Bytes({0x42, 2, 0x08, 0x01}) +
                          Bytes({0x32, 7, 0x0a, 1, 'k', 0x12, 2, 'v', 'w'});
  const std::string container = Bytes({0x0a, 2}) + "c1" + Bytes({0x1a, 4}) + "main" +
                                Bytes({0x20, 2}) + Bytes({0x3a, 2}) + "sh" + Bytes({0x42, 3}) +
                                "X=1";
  auto event = DecodeContainerEvent(Bytes({0x0a, static_cast<int>(pod.size())}) + pod +
                                    Bytes({0x12, static_cast<int>(container.size())}) + container);
  ASSERT_TRUE(event) << event.error().message;
  EXPECT_EQ(event->pod.id, "s1");
  EXPECT_EQ(event->pod.uid, "u1");
  EXPECT_EQ(event->pod.annotations.at("k"), "vw");
  EXPECT_EQ(event->container.name, "main");
  EXPECT_EQ(event->container.env, (std::vector<std::string>{"X=1"}));
  EXPECT_FALSE(DecodeContainerEvent(Bytes({0x0a, 2}) + "s1"));  // no container
  EXPECT_FALSE(DecodeContainerEvent(Bytes({0x0a, 9}) + "s1"));  // cut short
}

TEST(NriMessages, HandedAnnotationRoundTrips) {
  const HandedDevices devices{{"GPU-0", "GPU-1"}, {"MIG-6-4"}, {{"GPU-7", 600}}};
  EXPECT_EQ(EncodeHanded(devices), "gpus=GPU-0,GPU-1;mig=MIG-6-4;shares=GPU-7:600");
  EXPECT_EQ(DecodeHanded(EncodeHanded(devices)).value(), devices);
  EXPECT_EQ(DecodeHanded(EncodeHanded({})).value(), HandedDevices{});
  EXPECT_FALSE(DecodeHanded("gpus=a"));
  EXPECT_FALSE(DecodeHanded("gpus=;mig=;shares=GPU-7:0"));
}

topology::TopologySpec Node() { return linkfit::testing::H100Node(); }

std::string Plan(const std::string& uid, std::vector<int> gpus) {
  return linkfit::testing::WholeGpuPlan(uid, std::move(gpus));
}

// The runtime's side: frames requests to the plugin and reads its answers.
class FakeRuntime {
 public:
  explicit FakeRuntime(NriPlugin& plugin) : plugin_(plugin) {}
  TtrpcResponse Call(const std::string& method, const std::string& payload) {
    TtrpcRequest request{kPluginService, method, payload, 2'000'000'000, {}};
    auto frame = EncodeTtrpcFrame({stream_, TtrpcType::kRequest, 0, EncodeTtrpcRequest(request)});
    EXPECT_TRUE(frame);
    const std::string wire = EncodeMuxFrame(kPluginConn, *frame);
    std::string reply_bytes;
    // Delivered in two pieces, as a socket may.
    auto first = plugin_.HandleFrames(std::string_view(wire).substr(0, wire.size() / 2));
    auto second = plugin_.HandleFrames(std::string_view(wire).substr(wire.size() / 2));
    EXPECT_TRUE(first && second);
    reply_bytes = *first + *second;
    MuxReader mux;
    EXPECT_TRUE(mux.Feed(reply_bytes));
    auto out = mux.Next();
    EXPECT_TRUE(out);
    TtrpcReader ttrpc;
    EXPECT_TRUE(ttrpc.Feed(out->payload));
    auto message = ttrpc.Next();
    EXPECT_TRUE(message);
    EXPECT_EQ(message->stream, stream_);
    EXPECT_EQ(message->type, TtrpcType::kResponse);
    stream_ += 2;
    return DecodeTtrpcResponse(message->payload).value();
  }
  TtrpcResponse Create(const std::string& uid, std::optional<std::string> plan,
                       std::map<std::string, std::string> container_annotations = {}) {
    ContainerEvent event;
    event.pod = {"sandbox-" + uid, "p-" + uid, uid, "ml", {}, {}};
    if (plan) event.pod.annotations[kube::kAnnotationAllocation] = *plan;
    event.container = {"ctr-" + uid, "sandbox-" + uid, "main", container_annotations, {}};
    return Call("CreateContainer", EncodeContainerEvent(event));
  }

 private:
  NriPlugin& plugin_;
  std::uint32_t stream_ = 1;
};

TEST(NriPlugin, InjectsPlansRefusesCollisionsAndReleases) {
  NriPlugin plugin({"n1"}, Node);
  FakeRuntime runtime(plugin);
  const TtrpcResponse configured = runtime.Call("Configure", "");
  ASSERT_EQ(configured.status_code, 0);
  // CreateContainer (bit 3), StopContainer (9), RemoveContainer (10), RemovePodSandbox (2).
  EXPECT_EQ(configured.payload, EncodeConfigureResponse(1548));

  const TtrpcResponse first = runtime.Create(
      "u1", Plan("u1", {0, 1}), {{"linkfit.io/kubelet-ids.nvidia.com/gpu", "GPU-2,GPU-3"}});
  ASSERT_EQ(first.status_code, 0) << first.status_message;
  auto adjust = DecodeCreateContainerResponse(first.payload);
  ASSERT_TRUE(adjust) << adjust.error().message;
  EXPECT_EQ(adjust->cdi_devices,
            (std::vector<std::string>{"nvidia.com/gpu=GPU-0", "nvidia.com/gpu=GPU-1"}));
  EXPECT_EQ(adjust->annotations.at(kAnnotationHanded), "gpus=GPU-0,GPU-1;mig=;shares=");
  EXPECT_EQ(plugin.mismatches(), 1u);  // the kubelet's label named GPUs 2 and 3

  // Another pod whose plan names GPU 1: refused, with the reason the kubelet will show.
  const TtrpcResponse clash = runtime.Create("u2", Plan("u2", {1, 2}));
  EXPECT_EQ(clash.status_code, 2);
  EXPECT_NE(clash.status_message.find("held by pod u1"), std::string::npos) << clash.status_message;
  // A container without a plan: no GPU at all.
  const TtrpcResponse plain = runtime.Create("u3", std::nullopt);
  ASSERT_EQ(plain.status_code, 0);
  EXPECT_EQ(DecodeCreateContainerResponse(plain.payload)->env,
            (std::vector<std::pair<std::string, std::string>>{{"NVIDIA_VISIBLE_DEVICES", "void"}}));

  // u1 stops: its devices are free for u2's retry.
  ContainerEvent stop;
  stop.pod = {"sandbox-u1", "p-u1", "u1", "ml", {}, {}};
  stop.container = {"ctr-u1", "sandbox-u1", "main", {}, {}};
  EXPECT_EQ(runtime.Call("StopContainer", EncodeContainerEvent(stop)).status_code, 0);
  EXPECT_EQ(runtime.Create("u2", Plan("u2", {1, 2})).status_code, 0);
  // The pod sandbox goes away: its containers' devices with it.
  StateChange removed;
  removed.event = static_cast<int>(NriEvent::kRemovePodSandbox);
  removed.pod = {"sandbox-u2", "p-u2", "u2", "ml", {}, {}};
  EXPECT_EQ(runtime.Call("StateChange", EncodeStateChange(removed)).status_code, 0);
  EXPECT_EQ(plugin.ledger().containers(), 0u);
  EXPECT_EQ(runtime.Call("UpdateContainer", "").status_code, 12);  // not subscribed
}

// A runtime that does not inject CDI devices (containerd 1.7): the adjustment lists the device
// files of the plan, which the runtime creates with a cgroup rule each.
TEST(NriPlugin, RuntimesWithoutCdiGetTheDeviceFiles) {
  const std::string proc = linkfit::testing::WriteFakeProc(Node(), "nri-plugin");
  NriPluginOptions options{"n1"};
  std::string mode;
  options.on_configured = [&](const std::string& configured, const std::string&) {
    mode = configured;
  };
  options.device_files = [&] { return ReadDeviceFiles(proc, Node()); };
  NriPlugin plugin(options, Node);
  FakeRuntime runtime(plugin);
  ASSERT_EQ(
      runtime.Call("Configure", EncodeConfigureRequest({"", "containerd", "1.7.24"})).status_code,
      0);
  EXPECT_EQ(mode, "nri-env");
  const TtrpcResponse created = runtime.Create("u1", Plan("u1", {2}));
  ASSERT_EQ(created.status_code, 0) << created.status_message;
  auto adjust = DecodeCreateContainerResponse(created.payload);
  ASSERT_TRUE(adjust) << adjust.error().message;
  EXPECT_EQ(adjust->devices, (std::vector<LinuxDevice>{{"/dev/nvidiactl", "c", 195, 255, 0666},
                                                       {"/dev/nvidia-uvm", "c", 510, 0, 0666},
                                                       {"/dev/nvidia-uvm-tools", "c", 510, 1, 0666},
                                                       {"/dev/nvidia12", "c", 195, 12, 0666}}));
  EXPECT_EQ(adjust->env[0],
            (std::pair<std::string, std::string>{"NVIDIA_VISIBLE_DEVICES", "GPU-2"}));
  // A runtime that injects CDI devices gets the CDI names and no device files.
  NriPlugin modern(options, Node);
  FakeRuntime runtime2(modern);
  ASSERT_EQ(
      runtime2.Call("Configure", EncodeConfigureRequest({"", "containerd", "v2.1.0"})).status_code,
      0);
  EXPECT_EQ(mode, "nri-cdi");
  auto cdi = DecodeCreateContainerResponse(runtime2.Create("u1", Plan("u1", {2})).payload);
  ASSERT_TRUE(cdi);
  EXPECT_TRUE(cdi->devices.empty());
  EXPECT_EQ(cdi->cdi_devices, (std::vector<std::string>{"nvidia.com/gpu=GPU-2"}));
  std::filesystem::remove_all(proc);
}

// A GPU system daemon in an exempt namespace keeps its own NVIDIA_VISIBLE_DEVICES; the same
// container elsewhere gets no GPU, and a planned pod in the namespace still gets its plan.
TEST(NriPlugin, ExemptNamespacesKeepTheirDaemons) {
  NriPluginOptions options{"n1"};
  options.exempt_namespaces = {"gpu-operator"};
  NriPlugin plugin(options, Node);
  FakeRuntime runtime(plugin);
  ASSERT_EQ(runtime.Call("Configure", "").status_code, 0);
  const auto create = [&](const std::string& ns, std::optional<std::string> plan) {
    ContainerEvent event;
    event.pod = {"sandbox-" + ns, "dcgm", "u-" + ns, ns, {}, {}};
    if (plan) event.pod.annotations[kube::kAnnotationAllocation] = *plan;
    event.container = {"ctr-" + ns, "sandbox-" + ns, "main", {}, {"NVIDIA_VISIBLE_DEVICES=all"}};
    return DecodeCreateContainerResponse(
               runtime.Call("CreateContainer", EncodeContainerEvent(event)).payload)
        .value();
  };
  EXPECT_TRUE(create("gpu-operator", std::nullopt).env.empty());
  EXPECT_EQ(create("ml", std::nullopt).env,
            (std::vector<std::pair<std::string, std::string>>{{"NVIDIA_VISIBLE_DEVICES", "void"}}));
  const ContainerAdjustment planned = create("gpu-operator", Plan("u-gpu-operator", {5}));
  EXPECT_EQ(planned.env[0],
            (std::pair<std::string, std::string>{"NVIDIA_VISIBLE_DEVICES", "GPU-5"}));
}

TEST(NriPlugin, ARestartedPluginRebuildsItsLedgerFromChunkedSynchronize) {
  NriPlugin plugin({"n1"}, Node);
  FakeRuntime runtime(plugin);
  SynchronizeRequest first;
  first.pods = {{"sandbox-a", "p-a", "ua", "ml", {}, {}}};
  first.containers = {
      {"ctr-a", "sandbox-a", "main", {{kAnnotationHanded, "gpus=GPU-4;mig=;shares="}}, {}}};
  first.more = true;
  const TtrpcResponse chunk = runtime.Call("Synchronize", EncodeSynchronizeRequest(first));
  ASSERT_EQ(chunk.status_code, 0);
  EXPECT_EQ(chunk.payload, EncodeSynchronizeResponse(true));
  EXPECT_EQ(plugin.ledger().containers(), 0u);  // not before the last chunk
  SynchronizeRequest last;
  last.pods = {{"sandbox-b", "p-b", "ub", "ml", {}, {}}};
  last.containers = {
      {"ctr-b", "sandbox-b", "main", {{kAnnotationHanded, "gpus=;mig=;shares=GPU-5:300"}}, {}},
      {"ctr-x", "sandbox-b", "sidecar", {}, {}}};
  ASSERT_EQ(runtime.Call("Synchronize", EncodeSynchronizeRequest(last)).status_code, 0);
  EXPECT_EQ(plugin.ledger().containers(), 2u);
  // GPU 4 is held by pod ua after the restart: a plan naming it is refused.
  const TtrpcResponse clash = runtime.Create("uc", Plan("uc", {4}));
  EXPECT_EQ(clash.status_code, 2);
  EXPECT_NE(clash.status_message.find("held by pod ua"), std::string::npos);
}

TEST(NriPlugin, GarbageOnTheSocketIsAFramingErrorNotACrash) {
  NriPlugin plugin({"n1"}, Node);
  auto bad = plugin.HandleFrames(Bytes({0, 0, 0, 1, 0x7f, 0, 0, 0}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("exceeds the limit"), std::string::npos);
  NriPlugin other({"n1"}, Node);
  FakeRuntime runtime(other);
  const TtrpcResponse malformed = runtime.Call("CreateContainer", Bytes({0x0a, 9, 1}));
  EXPECT_EQ(malformed.status_code, 3);
}

}  // namespace
}  // namespace linkfit::node
