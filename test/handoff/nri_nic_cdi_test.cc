// RDMA NICs by CDI name only where a CDI spec declares them: the spec reader (JSON and YAML, the
// spec-wide and per-device edits that bring rdma_cm, files that do not parse), the directories'
// order, and the NRI plugin handing a mix of declared and undeclared NICs with rdma_cm once.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "handoff/nic_testing.h"
#include "linkfit/handoff/cdi_specs.h"
#include "linkfit/handoff/nic_device_files.h"

namespace linkfit::handoff {
namespace {

using namespace nic_testing;  // NOLINT: the shared node, plans and NRI calls

// Indented with tabs, as JSON may be and YAML may not.
constexpr const char* kJsonSpec =
    "{\n\t\"cdiVersion\": \"0.6.0\",\n\t\"kind\": \"nvidia.com/rdma\",\n\t\"devices\": [\n"
    "\t\t{\"name\": \"mlx5_0\", \"containerEdits\": {\"deviceNodes\": [\n"
    "\t\t\t{\"path\": \"/dev/infiniband/uverbs0\"}, {\"path\": \"/dev/infiniband/rdma_cm\"}]}},\n"
    "\t\t{\"name\": \"mlx5_1\", \"containerEdits\": {\"env\": [\"A=1\"]}}\n\t]\n}\n";

constexpr const char* kYamlSpec = R"(cdiVersion: "0.6.0"
kind: nvidia.com/rdma
containerEdits:
  deviceNodes:
  - path: /dev/infiniband/rdma_cm
    type: c
devices:
- name: mlx5_2
  containerEdits:
    deviceNodes:
    - {path: /dev/infiniband/uverbs2, major: 231, minor: 194}
)";

TEST(CdiSpecs, JsonAndYamlSpecsSayTheirDevicesAndWhichBringRdmaCm) {
  auto json = ParseCdiSpec(kJsonSpec, "/etc/cdi/rdma.json");
  ASSERT_TRUE(json) << json.error().message;
  EXPECT_EQ(json->kind, "nvidia.com/rdma");
  EXPECT_EQ(json->devices, (std::map<std::string, bool>{{"mlx5_0", true}, {"mlx5_1", false}}));
  auto yaml = ParseCdiSpec(kYamlSpec, "/etc/cdi/rdma.yaml");
  ASSERT_TRUE(yaml) << yaml.error().message;
  // The spec-wide edits come with each of its devices.
  EXPECT_EQ(yaml->devices, (std::map<std::string, bool>{{"mlx5_2", true}}));
}

TEST(CdiSpecs, ASpecThatDoesNotParseIsAnErrorNamingItsPath) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"kind\": ", "neither JSON nor YAML"},
      {"- a\n- b\n", "expected a mapping"},
      {"devices: []\n", "kind"},
      {"kind: rdma\ndevices: []\n", "\"rdma\" is not vendor/class"},
      {"kind: a.com/b/c\ndevices: []\n", "is not vendor/class"},
      {"kind: a.com/rdma\n", "devices"},
      {"kind: a.com/rdma\ndevices: {name: x}\n", "expected a list"},
      {"kind: a.com/rdma\ndevices: [{containerEdits: {}}]\n", "devices[0]"},
      {"kind: a.com/rdma\ndevices: [{name: \"-x\"}]\n", "is not a CDI device name"},
  };
  for (const auto& [text, want] : cases) {
    auto spec = ParseCdiSpec(text, "/var/run/cdi/bad.yaml");
    ASSERT_FALSE(spec) << text;
    EXPECT_NE(spec.error().message.find("/var/run/cdi/bad.yaml"), std::string::npos)
        << spec.error().message;
    EXPECT_NE(spec.error().message.find(want), std::string::npos) << spec.error().message;
  }
}

class CdiDirs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::path(::testing::TempDir()) /
            ("linkfit-cdi-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(root_ / "etc");
    std::filesystem::create_directories(root_ / "run");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::string& relative, const std::string& text) const {
    std::ofstream(root_ / relative) << text;
  }
  std::vector<std::string> Dirs() const {
    return {(root_ / "etc").string(), (root_ / "missing").string(), (root_ / "run").string()};
  }
  std::filesystem::path root_;
};

TEST_F(CdiDirs, EverySpecFileIsReadTheLaterDirectoryWinsAndBrokenFilesAreReported) {
  Write("etc/rdma.json", kJsonSpec);
  Write("etc/notes.txt", "not a spec");
  Write("etc/broken.yaml", "kind: [\n");
  // /var/run/cdi's mlx5_0 brings no rdma_cm: it wins over /etc/cdi's.
  Write("run/rdma.yml", "kind: nvidia.com/rdma\ndevices: [{name: mlx5_0}]\n");
  Write("run/gpu.json", R"({"kind": "nvidia.com/gpu", "devices": [{"name": "mlx5_3"}]})");
  const CdiDevices specs = ReadCdiSpecDirs(Dirs());
  EXPECT_EQ(specs.devices, (std::map<std::string, bool>{{"nvidia.com/gpu=mlx5_3", false},
                                                        {"nvidia.com/rdma=mlx5_0", false},
                                                        {"nvidia.com/rdma=mlx5_1", false}}));
  ASSERT_EQ(specs.problems.size(), 1u);
  EXPECT_NE(specs.problems[0].find((root_ / "etc/broken.yaml").string()), std::string::npos)
      << specs.problems[0];
  // Only the node's NICs under the kind asked for.
  EXPECT_EQ(DeclaredNicCdi(specs, "nvidia.com/rdma", Node()),
            (std::map<std::string, bool>{{"mlx5_0", false}, {"mlx5_1", false}}));
  EXPECT_TRUE(DeclaredNicCdi(specs, "example.com/rdma", Node()).empty());
  EXPECT_TRUE(ReadCdiSpecDirs({(root_ / "missing").string()}).devices.empty());
}

// The plugin where NICs have CDI names: files for the NICs no spec declares, and rdma_cm once.
class NicCdiPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    files_.rdma_cm = DeviceFile{"/dev/infiniband/rdma_cm", 10, 58};
    for (int i = 0; i < 4; ++i) {
      files_.by_nic["mlx5_" + std::to_string(i)] =
          DeviceFile{"/dev/infiniband/uverbs" + std::to_string(i), 231, 192 + i};
    }
  }
  // Hands pod `uid` GPU 0 and `nics` with `declared` as the node's CDI declarations.
  ContainerAdjustment Hand(const std::map<std::string, bool>& declared,
                           const std::vector<std::string>& nics, std::string* nic_mode = nullptr) {
    NriPluginOptions options;
    options.node_name = "n1";
    options.nics.cdi_kind = "nvidia.com/rdma";
    options.nic_device_files = [this]() -> Result<NicDeviceFiles> {
      ++files_read_;
      return files_;
    };
    options.nic_cdi_declared = [declared] { return declared; };
    options.on_nic_configured = [nic_mode](const std::string& mode) {
      if (nic_mode != nullptr) *nic_mode = mode;
    };
    NriPlugin plugin(options, Node);
    Call(plugin, "Configure", EncodeConfigureRequest({"", "containerd", "v2.1.1"}));
    std::vector<kube::AllocationRecord::Nic> planned;
    for (const std::string& nic : nics) planned.push_back(Nic(nic, 250));
    const TtrpcResponse reply = Call(
        plugin, "CreateContainer", EncodeContainerEvent(Event("t", "ml", Plan("t", {0}, planned))));
    EXPECT_EQ(reply.status_code, 0) << reply.status_message;
    return DecodeCreateContainerResponse(reply.payload).value_or(ContainerAdjustment{});
  }
  static std::vector<std::string> Paths(const ContainerAdjustment& adjust) {
    std::vector<std::string> paths;
    for (const LinuxDevice& device : adjust.devices) paths.push_back(device.path);
    return paths;
  }
  NicDeviceFiles files_;
  int files_read_ = 0;
};

TEST_F(NicCdiPlugin, UndeclaredNicsGoAsFilesAndRdmaCmComesOnce) {
  using Names = std::vector<std::string>;
  // mlx5_0 declared (without rdma_cm), mlx5_1 not: mlx5_1's verbs device and rdma_cm as files.
  ContainerAdjustment mixed = Hand({{"mlx5_0", false}}, {"mlx5_0", "mlx5_1"});
  EXPECT_EQ(mixed.cdi_devices, (Names{"nvidia.com/gpu=GPU-0", "nvidia.com/rdma=mlx5_0"}));
  EXPECT_EQ(Paths(mixed), (Names{"/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs1"}));
  EXPECT_EQ(Env(mixed, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1");
  // mlx5_0's CDI device brings rdma_cm: not again as a file.
  ContainerAdjustment brought = Hand({{"mlx5_0", true}}, {"mlx5_0", "mlx5_1"});
  EXPECT_EQ(Paths(brought), (Names{"/dev/infiniband/uverbs1"}));
  // Every NIC by CDI: rdma_cm as a file only where none of them brings it.
  EXPECT_EQ(Paths(Hand({{"mlx5_0", false}, {"mlx5_1", false}}, {"mlx5_0", "mlx5_1"})),
            (Names{"/dev/infiniband/rdma_cm"}));
  files_read_ = 0;
  ContainerAdjustment all = Hand({{"mlx5_0", false}, {"mlx5_1", true}}, {"mlx5_0", "mlx5_1"});
  EXPECT_TRUE(all.devices.empty());
  EXPECT_EQ(files_read_, 0);
  EXPECT_EQ(all.cdi_devices,
            (Names{"nvidia.com/gpu=GPU-0", "nvidia.com/rdma=mlx5_0", "nvidia.com/rdma=mlx5_1"}));
  // No NIC declared: all as files. The node's NIC mode still says CDI names may be sent (the
  // runtime configures the plugin before the agent may know its NICs).
  std::string mode;
  ContainerAdjustment none = Hand({}, {"mlx5_2"}, &mode);
  EXPECT_EQ(none.cdi_devices, (Names{"nvidia.com/gpu=GPU-0"}));
  EXPECT_EQ(Paths(none), (Names{"/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs2"}));
  EXPECT_EQ(mode, "nri-cdi");
}

}  // namespace
}  // namespace linkfit::handoff
