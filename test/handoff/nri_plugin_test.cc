// linkfit's NRI plugin driven as a runtime drives it, through the real framing (mux + ttrpc):
// Configure's event mask, CreateContainer injecting the plan or refusing with the reason,
// chunked Synchronize rebuilding the ledger after a restart, StopContainer and StateChange
// releasing devices. The messages' bytes are checked against hand-written golden encodings.

#include <gtest/gtest.h>

#include <deque>

#include "handoff/go_ttrpc_reader.h"
#include "handoff/node_testing.h"
#include "linkfit/handoff/nri_plugin.h"
#include "linkfit/kube/annotations.h"

namespace linkfit::handoff {
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

// The runtime's side: frames requests to the plugin as a Go runtime does and reads its answers as
// one does (GoTtrpcReader: an answer a real runtime could not read fails the test).
class FakeRuntime {
 public:
  explicit FakeRuntime(NriPlugin& plugin) : plugin_(plugin) {}
  TtrpcResponse Call(const std::string& method, const std::string& payload) {
    TtrpcRequest request{kPluginService, method, payload, 2'000'000'000, {}};
    auto frame = EncodeTtrpcFrame({stream_, TtrpcType::kRequest, 0, EncodeTtrpcRequest(request)});
    EXPECT_TRUE(frame);
    const std::string wire = EncodeMuxMessage(kPluginConn, *frame);
    // Delivered in two pieces, as a socket may.
    auto first = plugin_.HandleFrames(std::string_view(wire).substr(0, wire.size() / 2));
    auto second = plugin_.HandleFrames(std::string_view(wire).substr(wire.size() / 2));
    EXPECT_TRUE(first && second);
    MuxReader mux;
    EXPECT_TRUE(mux.Feed(first.value_or("") + second.value_or("")));
    std::deque<std::string> frames;
    reply_frame_sizes_.clear();
    while (auto out = mux.Next()) {
      EXPECT_EQ(out->conn, kPluginConn);
      reply_frame_sizes_.push_back(out->payload.size());
      frames.push_back(std::move(out->payload));
    }
    linkfit::testing::GoTtrpcReader go([&]() -> std::optional<std::string> {
      if (frames.empty()) return std::nullopt;
      std::string next = std::move(frames.front());
      frames.pop_front();
      return next;
    });
    auto message = go.Recv();
    EXPECT_TRUE(message) << "a Go runtime could not read the answer: " << message.error().message;
    EXPECT_TRUE(frames.empty()) << "frames beyond the answer";
    if (!message) return {};
    EXPECT_EQ(message->stream, stream_);
    EXPECT_EQ(message->type, TtrpcType::kResponse);
    stream_ += 2;
    reply_bytes_ = message->payload;
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

  const std::vector<std::size_t>& reply_frame_sizes() const { return reply_frame_sizes_; }
  // The last answer's ttrpc Response bytes.
  const std::string& reply_bytes() const { return reply_bytes_; }

 private:
  NriPlugin& plugin_;
  std::uint32_t stream_ = 1;
  std::vector<std::size_t> reply_frame_sizes_;
  std::string reply_bytes_;
};

TEST(NriPlugin, InjectsPlansRefusesCollisionsAndReleases) {
  NriPlugin plugin({"n1"}, Node);
  FakeRuntime runtime(plugin);
  const TtrpcResponse configured =
      runtime.Call("Configure", EncodeConfigureRequest({"", "containerd", "v2.1.0"}));
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
  // The pod sandbox goes away (as a runtime before NRI v0.12.0 says it): its containers' devices
  // with it.
  StateChange removed;
  removed.event = static_cast<int>(NriEvent::kRemovePodSandbox);
  removed.pod = {"sandbox-u2", "p-u2", "u2", "ml", {}, {}};
  EXPECT_EQ(runtime.Call("StateChange", EncodeStateChange(removed)).status_code, 0);
  EXPECT_EQ(plugin.ledger().containers(), 0u);
  EXPECT_EQ(runtime.Call("UpdateContainer", "").status_code, 12);  // not subscribed
}

// CDI names go only to runtimes that inject them (containerd >= 2.1, CRI-O >= 1.34), and to none
// with the operator's `cdi` off. Every other runtime (containerd 1.7 and 2.0 ignore CDI_devices)
// gets the device files of the plan instead, which it creates with a cgroup rule each.
TEST(NriPlugin, CdiNamesOnlyForRuntimesThatInjectThem) {
  const std::string proc = linkfit::testing::WriteFakeProc(Node(), "nri-plugin");
  const std::vector<LinuxDevice> files = {{"/dev/nvidiactl", "c", 195, 255, 0666},
                                          {"/dev/nvidia-uvm", "c", 510, 0, 0666},
                                          {"/dev/nvidia-uvm-tools", "c", 510, 1, 0666},
                                          {"/dev/nvidia12", "c", 195, 12, 0666}};
  struct Case {
    std::string name;
    std::string version;
    bool cdi_option;
    bool gets_cdi;
  };
  for (const Case& c : std::vector<Case>{{"containerd", "1.7.24", true, false},
                                         {"containerd", "v2.0.5", true, false},
                                         {"containerd", "v2.1.0", true, true},
                                         {"containerd", "v2.1.0", false, false},
                                         {"cri-o", "1.33.2", true, false},
                                         {"cri-o", "1.34.0", true, true}}) {
    SCOPED_TRACE(c.name + " " + c.version + (c.cdi_option ? "" : ", cdi off"));
    NriPluginOptions options{"n1"};
    options.cdi = c.cdi_option;
    std::string mode;
    options.on_configured = [&](const std::string& configured, const std::string&) {
      mode = configured;
    };
    options.device_files = [&] { return ReadDeviceFiles(proc, Node()); };
    NriPlugin plugin(options, Node);
    FakeRuntime runtime(plugin);
    ASSERT_EQ(
        runtime.Call("Configure", EncodeConfigureRequest({"", c.name, c.version})).status_code, 0);
    EXPECT_EQ(mode, c.gets_cdi ? "nri-cdi" : "nri-env");
    const TtrpcResponse created = runtime.Create("u1", Plan("u1", {2}));
    ASSERT_EQ(created.status_code, 0) << created.status_message;
    auto adjust = DecodeCreateContainerResponse(created.payload);
    ASSERT_TRUE(adjust) << adjust.error().message;
    if (c.gets_cdi) {
      EXPECT_EQ(adjust->cdi_devices, (std::vector<std::string>{"nvidia.com/gpu=GPU-2"}));
      EXPECT_TRUE(adjust->devices.empty());
    } else {
      EXPECT_TRUE(adjust->cdi_devices.empty());
      EXPECT_EQ(adjust->devices, files);
    }
    EXPECT_EQ(adjust->env[0],
              (std::pair<std::string, std::string>{"NVIDIA_VISIBLE_DEVICES", "GPU-2"}));
    EXPECT_EQ(adjust->annotations.at(kAnnotationHanded), "gpus=GPU-2;mig=;shares=");
  }
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

// The events subscribed to, by api.proto's Event numbers (REMOVE_POD_SANDBOX = 3,
// CREATE_CONTAINER = 4, STOP_CONTAINER = 10, REMOVE_CONTAINER = 11) and event.go's mask bit
// 1 << (event - 1), written out here rather than taken from the plugin's enum.
TEST(NriPlugin, ConfigureSubscribesByUpstreamEventNumbers) {
  EXPECT_EQ(static_cast<int>(NriEvent::kRemovePodSandbox), 3);
  EXPECT_EQ(static_cast<int>(NriEvent::kCreateContainer), 4);
  EXPECT_EQ(static_cast<int>(NriEvent::kStopContainer), 10);
  EXPECT_EQ(static_cast<int>(NriEvent::kRemoveContainer), 11);
  EXPECT_EQ(static_cast<int>(NriEvent::kValidateContainerAdjustment), 14);
  NriPlugin plugin({"n1"}, Node);
  FakeRuntime runtime(plugin);
  const TtrpcResponse configured = runtime.Call("Configure", "");
  ASSERT_EQ(configured.status_code, 0);
  EXPECT_EQ(configured.payload,
            EncodeConfigureResponse((1 << 2) | (1 << 3) | (1 << 9) | (1 << 10)));
}

// RemoveContainer and RemovePodSandbox (NRI v0.12.0) as api.proto defines them: the request's
// pod = 1 (and container = 2), an empty response message, so the ttrpc Response carries no
// payload; they free what the StateChange path frees.
TEST(NriPlugin, RemoveEventsFreeTheirEntriesAndAnswerEmpty) {
  int ledger_changes = 0;
  NriPluginOptions options{"n1"};
  options.on_ledger_change = [&](const Ledger&) { ++ledger_changes; };
  NriPlugin plugin(options, Node);
  FakeRuntime runtime(plugin);
  ASSERT_EQ(runtime.Call("Configure", "").status_code, 0);
  // Pod u1 has containers "main" (GPU 0) and "side" (GPU 1); pod u2 has "main" (GPU 2).
  kube::AllocationRecord record;
  record.pod = "ml/u1";
  record.uid = "u1";
  record.node = "n1";
  record.devices.gpus = {0, 1};
  record.containers = {{"main", false, {}}, {"side", false, {}}};
  record.containers[0].devices.gpus = {0};
  record.containers[1].devices.gpus = {1};
  const std::string two_containers = kube::EncodeAllocationRecord(record);
  const PodSandbox u1{"sandbox-u1", "p-u1", "u1",
                      "ml",         {},     {{kube::kAnnotationAllocation, two_containers}}};
  for (const std::string name : {"main", "side"}) {
    const TtrpcResponse created = runtime.Call(
        "CreateContainer", EncodeContainerEvent({u1, {"ctr-" + name, "sandbox-u1", name, {}, {}}}));
    ASSERT_EQ(created.status_code, 0) << created.status_message;
  }
  ASSERT_EQ(runtime.Create("u2", Plan("u2", {2})).status_code, 0);
  ASSERT_EQ(plugin.ledger().containers(), 3u);

  ledger_changes = 0;
  const TtrpcResponse removed = runtime.Call(
      "RemoveContainer", EncodeContainerEvent({u1, {"ctr-side", "sandbox-u1", "side", {}, {}}}));
  EXPECT_EQ(removed, (TtrpcResponse{0, "", ""}));
  // Response{status: {}} (OK, as ttrpc's Go server writes it), RemoveContainerResponse{}: empty.
  EXPECT_EQ(runtime.reply_bytes(), std::string("\x0a\x00", 2));
  EXPECT_EQ(plugin.ledger().containers(), 2u);
  EXPECT_EQ(ledger_changes, 1);
  // GPU 1 is free again, GPU 0 still u1's.
  EXPECT_EQ(runtime.Create("u3", Plan("u3", {1})).status_code, 0);
  EXPECT_EQ(runtime.Create("u4", Plan("u4", {0})).status_code, 2);

  const TtrpcResponse gone = runtime.Call("RemovePodSandbox", EncodePodSandboxEvent(u1));
  EXPECT_EQ(gone, (TtrpcResponse{0, "", ""}));
  EXPECT_EQ(runtime.reply_bytes(), std::string("\x0a\x00", 2));  // RemovePodSandboxResponse{}
  EXPECT_EQ(plugin.ledger().containers(), 2u);                   // u2's and u3's
  EXPECT_EQ(runtime.Create("u4", Plan("u4", {0})).status_code, 0);
  EXPECT_EQ(runtime.Create("u5", Plan("u5", {2})).status_code, 2);  // u2 kept GPU 2

  // The bytes of RemovePodSandboxRequest{pod: {id: "s", uid: "u2"}}, written out by hand.
  const TtrpcResponse by_bytes =
      runtime.Call("RemovePodSandbox", Bytes({0x0a, 7, 0x0a, 1, 's', 0x1a, 2, 'u', '2'}));
  EXPECT_EQ(by_bytes.status_code, 0);
  EXPECT_EQ(runtime.Create("u5", Plan("u5", {2})).status_code, 0);

  // Without the pod, or cut short: refused as invalid, the ledger untouched.
  const std::size_t held = plugin.ledger().containers();
  const TtrpcResponse no_pod = runtime.Call("RemovePodSandbox", "");
  EXPECT_EQ(no_pod.status_code, 3);
  EXPECT_NE(no_pod.status_message.find("without pod"), std::string::npos) << no_pod.status_message;
  EXPECT_EQ(runtime.Call("RemoveContainer", EncodePodSandboxEvent(u1)).status_code, 3);
  EXPECT_EQ(runtime.Call("RemovePodSandbox", Bytes({0x0a, 9, 0x0a})).status_code, 3);
  EXPECT_EQ(plugin.ledger().containers(), held);
}

// Runtimes before NRI v0.12.0 send the same events as StateChange: still honoured.
TEST(NriPlugin, StateChangeStillReleasesForOlderRuntimes) {
  NriPlugin plugin({"n1"}, Node);
  FakeRuntime runtime(plugin);
  ASSERT_EQ(
      runtime.Call("Configure", EncodeConfigureRequest({"", "containerd", "1.7.24"})).status_code,
      0);
  ASSERT_EQ(runtime.Create("u1", Plan("u1", {0})).status_code, 0);
  ASSERT_EQ(runtime.Create("u2", Plan("u2", {1})).status_code, 0);
  StateChange container_gone;
  container_gone.event = 11;  // REMOVE_CONTAINER
  container_gone.pod = {"sandbox-u1", "p-u1", "u1", "ml", {}, {}};
  container_gone.container = {"ctr-u1", "sandbox-u1", "main", {}, {}};
  const TtrpcResponse answered = runtime.Call("StateChange", EncodeStateChange(container_gone));
  EXPECT_EQ(answered, (TtrpcResponse{0, "", ""}));  // Empty
  EXPECT_EQ(plugin.ledger().containers(), 1u);
  StateChange pod_gone;
  pod_gone.event = 3;  // REMOVE_POD_SANDBOX
  pod_gone.pod = {"sandbox-u2", "p-u2", "u2", "ml", {}, {}};
  EXPECT_EQ(runtime.Call("StateChange", EncodeStateChange(pod_gone)).status_code, 0);
  EXPECT_EQ(plugin.ledger().containers(), 0u);
}

// Messages above ttrpc's 4096-byte channel buffer in both directions: a CreateContainer request
// with a long environment for a container given 16 GPUs arrives as a Go runtime writes it (a
// 4096-byte frame, then the rest), and an answer naming 56 MIG instances goes out the same way,
// which the Go reader model takes (FakeRuntime fails the test otherwise).
TEST(NriPlugin, MessagesAbove4KiBCrossInBothDirections) {
  const auto sixteen = linkfit::testing::SixteenGpuNode;
  ASSERT_EQ(sixteen().gpus.size(), 16u);
  NriPlugin plugin({"n1"}, sixteen);
  FakeRuntime runtime(plugin);
  ASSERT_EQ(
      runtime.Call("Configure", EncodeConfigureRequest({"", "containerd", "v2.1.0"})).status_code,
      0);
  ContainerEvent event;
  event.pod = {"sandbox-big",
               "p-big",
               "u-big",
               "ml",
               {},
               {{kube::kAnnotationAllocation,
                 Plan("u-big", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})}}};
  event.container = {"ctr-big", "sandbox-big", "main", {}, {}};
  for (int i = 0; i < 300; ++i) {
    event.container.env.push_back("SERVICE_" + std::to_string(i) + "_PORT_443_TCP_ADDR=10.96.0." +
                                  std::to_string(i % 250));
  }
  const std::string request = EncodeContainerEvent(event);
  ASSERT_GT(request.size(), 3u * kTtrpcChannelBuffer);
  const TtrpcResponse created = runtime.Call("CreateContainer", request);
  ASSERT_EQ(created.status_code, 0) << created.status_message;
  auto adjust = DecodeCreateContainerResponse(created.payload);
  ASSERT_TRUE(adjust);
  ASSERT_EQ(adjust->cdi_devices.size(), 16u);
  EXPECT_EQ(adjust->cdi_devices[15], "nvidia.com/gpu=" + linkfit::testing::LongUuid("GPU", 15));
  EXPECT_EQ(plugin.ledger().containers(), 1u);

  // Every MIG instance of a node of H100s cut into seven 1g.10gb each, given to one container.
  const auto sliced = linkfit::testing::MigSlicedNode;
  const std::string all_instances = linkfit::testing::AllMigInstancesPlan("u-mig");
  NriPlugin mig_plugin({"n1"}, sliced);
  FakeRuntime mig_runtime(mig_plugin);
  ASSERT_EQ(mig_runtime.Call("Configure", EncodeConfigureRequest({"", "containerd", "v2.1.0"}))
                .status_code,
            0);
  const TtrpcResponse answer = mig_runtime.Create("u-mig", all_instances);
  ASSERT_EQ(answer.status_code, 0) << answer.status_message;
  const std::size_t message = kTtrpcHeaderBytes + mig_runtime.reply_bytes().size();
  ASSERT_GT(message, kTtrpcChannelBuffer + kTtrpcChannelBuffer / 2);  // 7983 bytes
  EXPECT_EQ(mig_runtime.reply_frame_sizes(),
            (std::vector<std::size_t>{kTtrpcChannelBuffer, message - kTtrpcChannelBuffer}));
  auto mig_adjust = DecodeCreateContainerResponse(answer.payload);
  ASSERT_TRUE(mig_adjust);
  ASSERT_EQ(mig_adjust->cdi_devices.size(), 56u);
  EXPECT_EQ(mig_adjust->cdi_devices[55], "nvidia.com/gpu=" + linkfit::testing::LongUuid("MIG", 55));
}

}  // namespace
}  // namespace linkfit::handoff
