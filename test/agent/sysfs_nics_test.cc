// RDMA NICs from sysfs (src/agent/sysfs_nics.h) on trees of three machine shapes built by the
// tests: a DGX H100-like node (a compute NIC below each GPU's switch, a storage RoCE NIC on a host
// bridge of its own), a two-socket box with its NICs on one socket only (the published
// `nvidia-smi topo -m` of that machine parses to the same relations), and a one-socket box with
// a NIC on a GPU's switch, its SR-IOV virtual function and a ConnectX-8 with a Data Direct
// function. Each discovery is compared with the whole expected document.

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/sysfs_nics.h"
#include "fake_nvml/nvml_test_support.h"
#include "linkfit/topology/topology.h"
#include "sysfs_tree.h"
#include "testing/fixtures.h"

namespace linkfit::agent {
namespace {

using R = topology::PcieRelation;
using testing::SysfsTree;

std::string Hex(int value) {
  char text[8];
  std::snprintf(text, sizeof(text), "%02x", value);
  return text;
}

std::string Fn(int bus, int device = 0, int function = 0) {
  return "0000:" + Hex(bus) + ":" + Hex(device) + "." + std::to_string(function);
}

topology::GpuSpec Gpu(int index, const std::string& bus, int numa, int socket) {
  topology::GpuSpec gpu;
  gpu.index = index;
  gpu.pci_bus_id = "00000000" + bus;  // NVML's 8-digit domain
  gpu.numa_node = numa;
  gpu.socket = socket;
  return gpu;
}

// The published "nics" of `nics`, as the node annotation carries them.
nlohmann::json Published(const std::vector<topology::NicSpec>& nics) {
  topology::TopologySpec spec;
  spec.nics = nics;
  return nlohmann::json::parse(topology::ToTopologyDocument(spec))["nics"];
}

TEST(SysfsNics, RelationOfPciPathsFollowsNvml) {
  const std::vector<std::string> gpu = {"pci0000:10", Fn(0x10, 1), Fn(0x11), Fn(0x12),
                                        Fn(0x13),     Fn(0x14),    Fn(0x15)};
  // Same leaf switch (0000:13:00.0) as the GPU: PIX.
  EXPECT_EQ(
      RelationOfPciPaths(
          gpu, {"pci0000:10", Fn(0x10, 1), Fn(0x11), Fn(0x12), Fn(0x13), Fn(0x14, 1), Fn(0x16)},
          true),
      R::kPix);
  // Below the top switch, on another leaf: PXB.
  EXPECT_EQ(
      RelationOfPciPaths(
          gpu, {"pci0000:10", Fn(0x10, 1), Fn(0x11), Fn(0x12, 1), Fn(0x17), Fn(0x18), Fn(0x19)},
          true),
      R::kPxb);
  // Directly below the top switch while the GPU is below a leaf: still PXB (two switches).
  EXPECT_EQ(
      RelationOfPciPaths(gpu, {"pci0000:10", Fn(0x10, 1), Fn(0x11), Fn(0x12, 2), Fn(0x1a)}, true),
      R::kPxb);
  // Another root port of the same host bridge: PHB.
  EXPECT_EQ(RelationOfPciPaths(gpu, {"pci0000:10", Fn(0x10, 2), Fn(0x1b)}, true), R::kPhb);
  // Another host bridge: NODE on the socket, SYS across.
  EXPECT_EQ(RelationOfPciPaths(gpu, {"pci0000:20", Fn(0x20, 1), Fn(0x21)}, true), R::kNode);
  EXPECT_EQ(RelationOfPciPaths(gpu, {"pci0000:20", Fn(0x20, 1), Fn(0x21)}, false), R::kSys);
  // An unknown path claims nothing.
  EXPECT_EQ(RelationOfPciPaths({}, gpu, true), R::kSys);
}

TEST(SysfsNics, VpdVendorUniqueIdSurvivesMalformedImages) {
  std::string image = {'\x82', '\x02', '\x00', 'C', 'X', '\x90', '\x07', '\x00',
                       'V',    'U',    '\x04', 'a', 'b', 'c',    'd',    '\x78'};
  EXPECT_EQ(VpdVendorUniqueId(image), "abcd");
  for (std::size_t cut = 0; cut < image.size() - 1; ++cut) {
    const std::string truncated = image.substr(0, cut);
    EXPECT_EQ(VpdVendorUniqueId(truncated), "") << cut;
  }
  image[10] = '\x40';  // the keyword claims more than its resource holds
  EXPECT_EQ(VpdVendorUniqueId(image), "");
  EXPECT_EQ(VpdVendorUniqueId(std::string(300, '\xff')), "");
  EXPECT_EQ(VpdVendorUniqueId(std::string(300, '\x00')), "");
}

// DGX H100-like: GPU g below its own host bridge, a top switch and a leaf switch; its compute NIC
// below the same top switch on another leaf (PXB, as DGX H100's topo -m prints); a storage RoCE
// NIC on a host bridge of socket 0 (NODE to GPUs 0-3, SYS to 4-7).
TEST(SysfsNics, DgxH100Like) {
  SysfsTree tree;
  topology::TopologySpec spec;
  const char* compute[] = {"mlx5_0", "mlx5_3", "mlx5_4",  "mlx5_5",
                           "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"};
  for (int g = 0; g < 8; ++g) {
    const int b = 0x10 * (g + 1);
    const int numa = g / 4;
    const std::string top = "pci0000:" + Hex(b) + "/" + Fn(b, 1) + "/" + Fn(b + 1);
    const std::string gpu = top + "/" + Fn(b + 2) + "/" + Fn(b + 3) + "/" + Fn(b + 4);
    const std::string nic = top + "/" + Fn(b + 2, 1) + "/" + Fn(b + 6) + "/" + Fn(b + 7);
    tree.Function(gpu + "/" + Fn(b + 5), "0x10de", "0x2330", numa);
    tree.Function(nic + "/" + Fn(b + 8), "0x15b3", "0x1021", numa);
    tree.Rdma(compute[g], nic + "/" + Fn(b + 8), "InfiniBand", "400 Gb/sec (4X NDR)", "4: ACTIVE",
              g, "ibp" + std::to_string(b + 8) + "s0");
    spec.gpus.push_back(Gpu(g, ":" + Hex(b + 5) + ":00.0", numa, numa));
  }
  tree.Function("pci0000:a0/" + Fn(0xa0, 1) + "/" + Fn(0xa1), "0x15b3", "0x101d", 0);
  tree.Rdma("mlx5_1", "pci0000:a0/" + Fn(0xa0, 1) + "/" + Fn(0xa1), "Ethernet",
            "200 Gb/sec (2X NDR)", "1: DOWN", 8, "enp161s0f0np0");

  std::vector<std::string> warnings;
  const std::vector<topology::NicSpec> nics = ReadNics(tree.root(), spec, warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  nlohmann::json expected = nlohmann::json::parse(R"([
    {"name": "mlx5_0", "pci_bus_id": "0000:18:00.0", "numa_node": 0, "link_layer": "InfiniBand",
     "rate_gbps": 400.0, "state": "ACTIVE", "uverbs": "uverbs0", "netdevs": ["ibp24s0"],
     "gpu_relations": ["PXB", "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]},
    {"name": "mlx5_1", "pci_bus_id": "0000:a1:00.0", "numa_node": 0, "link_layer": "Ethernet",
     "rate_gbps": 200.0, "state": "DOWN", "uverbs": "uverbs8", "netdevs": ["enp161s0f0np0"],
     "gpu_relations": ["NODE", "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]}])");
  const char* relations[][8] = {{"NODE", "PXB", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"},
                                {"NODE", "NODE", "PXB", "NODE", "SYS", "SYS", "SYS", "SYS"},
                                {"NODE", "NODE", "NODE", "PXB", "SYS", "SYS", "SYS", "SYS"},
                                {"SYS", "SYS", "SYS", "SYS", "PXB", "NODE", "NODE", "NODE"},
                                {"SYS", "SYS", "SYS", "SYS", "NODE", "PXB", "NODE", "NODE"},
                                {"SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "PXB", "NODE"},
                                {"SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "NODE", "PXB"}};
  for (int g = 1; g < 8; ++g) {
    const int b = 0x10 * (g + 1);
    expected.push_back({{"name", compute[g]},
                        {"pci_bus_id", Fn(b + 8)},
                        {"numa_node", g / 4},
                        {"link_layer", "InfiniBand"},
                        {"rate_gbps", 400.0},
                        {"state", "ACTIVE"},
                        {"uverbs", "uverbs" + std::to_string(g)},
                        {"netdevs", nlohmann::json::array({"ibp" + std::to_string(b + 8) + "s0"})},
                        {"gpu_relations", relations[g - 1]}});
  }
  EXPECT_EQ(Published(nics), expected) << Published(nics).dump(1);

  // The model takes them: rails follow the order (mlx5_10 after mlx5_9).
  spec.fabric.kind = topology::NvlinkFabricKind::kNvswitch;
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) spec.links.push_back({a, b, 18, true, R::kNode, 0});
  }
  spec.nics = nics;
  auto built = topology::BuildTopology(spec);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ((*built)->nics()[7].name, "mlx5_10");
  EXPECT_EQ((*built)->nics()[7].rail, 7);
}

// A dual-port device cabled on its second port only is used through port 2 (its rate and state
// are port 2's, so it is ACTIVE and planned); a device with no port up keeps its lowest port and
// is DOWN. The published document says port 2 (and leaves port 1 unsaid) and reads back equal.
TEST(SysfsNics, TheLowestActivePortIsTheOneUsed) {
  const testing::RecordedSysfs sysfs("nics-dual-port-second-cabled");
  topology::TopologySpec spec;
  spec.gpus.push_back(Gpu(0, ":03:00.0", 0, 0));
  std::vector<std::string> warnings;
  const std::vector<topology::NicSpec> nics = ReadNics(sysfs.root(), spec, warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  const nlohmann::json expected = nlohmann::json::parse(R"([
    {"name": "mlx5_0", "pci_bus_id": "0000:04:00.0", "numa_node": 0, "port": 2,
     "link_layer": "InfiniBand", "rate_gbps": 200.0, "state": "ACTIVE", "uverbs": "uverbs0",
     "gpu_relations": ["PIX"]},
    {"name": "mlx5_1", "pci_bus_id": "0000:04:00.1", "numa_node": 0,
     "link_layer": "InfiniBand", "rate_gbps": 10.0, "state": "DOWN", "uverbs": "uverbs1",
     "gpu_relations": ["PIX"]}])");
  EXPECT_EQ(Published(nics), expected) << Published(nics).dump(1);
  ASSERT_EQ(nics.size(), 2u);
  EXPECT_EQ(nics[0].port, 2);
  EXPECT_EQ(nics[1].port, 1);

  spec.links = {};
  spec.nics = nics;
  auto again = topology::ParseTopologyDocument(topology::ToTopologyDocument(spec));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->nics, nics);
}

// Two sockets, GPUs 0-1 on socket 0 and 2-3 on socket 1, each below a host bridge of its own;
// one dual-port card (two functions, mlx5_0 and mlx5_1) on socket 1. This is the shape of the
// published `nvidia-smi topo -m` of a 4x L40S box (warpem/miss-alignment#106): discovery gives
// the relations that nvidia-smi printed there.
TEST(SysfsNics, TwoSocketsWithNicsOnOneSocket) {
  SysfsTree tree;
  topology::TopologySpec spec;
  const int bridges[] = {0x00, 0x20, 0x80, 0xa0};
  for (int g = 0; g < 4; ++g) {
    const int b = bridges[g];
    tree.Function("pci0000:" + Hex(b) + "/" + Fn(b, 1) + "/" + Fn(b + 1), "0x10de", "0x26b9",
                  g / 2);
    spec.gpus.push_back(Gpu(g, ":" + Hex(b + 1) + ":00.0", g / 2, g / 2));
  }
  const std::string port = "pci0000:c0/" + Fn(0xc0, 1) + "/";
  for (int f = 0; f < 2; ++f) {
    tree.Function(port + Fn(0xc1, 0, f), "0x15b3", "0x1017", 1);
    tree.Rdma("mlx5_" + std::to_string(f), port + Fn(0xc1, 0, f), "Ethernet", "25 Gb/sec (1X EDR)",
              "4: ACTIVE", f, "ens1f" + std::to_string(f) + "np" + std::to_string(f));
  }
  std::vector<std::string> warnings;
  const std::vector<topology::NicSpec> nics = ReadNics(tree.root(), spec, warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(Published(nics), nlohmann::json::parse(R"([
    {"name": "mlx5_0", "pci_bus_id": "0000:c1:00.0", "numa_node": 1, "link_layer": "Ethernet",
     "rate_gbps": 25.0, "state": "ACTIVE", "uverbs": "uverbs0", "netdevs": ["ens1f0np0"],
     "gpu_relations": ["SYS", "SYS", "NODE", "NODE"]},
    {"name": "mlx5_1", "pci_bus_id": "0000:c1:00.1", "numa_node": 1, "link_layer": "Ethernet",
     "rate_gbps": 25.0, "state": "ACTIVE", "uverbs": "uverbs1", "netdevs": ["ens1f1np1"],
     "gpu_relations": ["SYS", "SYS", "NODE", "NODE"]}])"));

  auto published = topology::ParseNvidiaSmi(
      linkfit::testing::ReadFileOrDie(linkfit::testing::SourcePath(
          "test/data/nvidia-smi/nics/l40s-4x-2socket-nics-one-socket-missalignment106.topo.txt")),
      "");
  ASSERT_TRUE(published) << published.error().message;
  ASSERT_EQ(published->nics.size(), nics.size());
  for (std::size_t n = 0; n < nics.size(); ++n) {
    EXPECT_EQ(published->nics[n].name, nics[n].name);
    EXPECT_EQ(published->nics[n].gpu_relations, nics[n].gpu_relations);
  }
}

// One socket, two GPUs on two root ports of one host bridge. GPU0 shares a switch with a
// ConnectX-7 PF (mlx5_0, PIX) and its virtual function (mlx5_2); a ConnectX-8 (mlx5_1) hangs on a
// host bridge of its own, but its Data Direct function sits on GPU1's switch: its relations are
// the Data Direct function's (PIX to GPU1, PHB to GPU0), not its own (NODE, NODE).
struct OneSocketBox {
  SysfsTree tree;
  topology::TopologySpec spec;
  std::string data_direct;

  OneSocketBox() {
    const std::string sw0 = "pci0000:00/" + Fn(0, 1) + "/" + Fn(1);
    const std::string sw1 = "pci0000:00/" + Fn(0, 2) + "/" + Fn(7);
    tree.Function(sw0 + "/" + Fn(2) + "/" + Fn(3), "0x10de", "0x2330", 0);
    tree.Function(sw1 + "/" + Fn(8) + "/" + Fn(9), "0x10de", "0x2330", 0);
    spec.gpus = {Gpu(0, ":03:00.0", 0, 0), Gpu(1, ":09:00.0", 0, 0)};
    const std::string pf = sw0 + "/" + Fn(2, 1) + "/" + Fn(4);
    const std::string vf = sw0 + "/" + Fn(2, 1) + "/" + Fn(4, 0, 2);
    tree.Function(pf, "0x15b3", "0x1021", 0);
    tree.Function(vf, "0x15b3", "0x101e", 0);
    tree.VirtualFunction(vf, pf, 2);
    tree.Rdma("mlx5_0", pf, "InfiniBand", "400 Gb/sec (4X NDR)", "4: ACTIVE", 0, "ibp4s0");
    tree.Rdma("mlx5_2", vf, "InfiniBand", "400 Gb/sec (4X NDR)", "4: ACTIVE", 2, "");
    const std::string cx8 = "pci0000:40/" + Fn(0x40, 1) + "/" + Fn(0x41);
    data_direct = sw1 + "/" + Fn(8, 1) + "/" + Fn(0x0a);
    tree.Function(cx8, "0x15b3", "0x1023", 0);
    tree.Function(data_direct, "0x15b3", "0x2100", 0);
    tree.Rdma("mlx5_1", cx8, "InfiniBand", "800 Gb/sec (4X XDR)", "4: ACTIVE", 1, "ibp65s0");
    tree.Vpd(cx8, "MT2438XZ0ABC");
    tree.Vpd(data_direct, "MT2438XZ0ABC");
    tree.Vpd(pf, "MT2231XZ0DEF");  // a CX-7: no Data Direct function carries its id
    // A software RDMA device (rdma_rxe) is no PCI function: not published, said so.
    tree.Write("class/infiniband/rxe0/ports/1/link_layer", "Ethernet\n");
  }
};

TEST(SysfsNics, SwitchSharingSriovAndDataDirect) {
  OneSocketBox box;
  std::vector<std::string> warnings;
  const std::vector<topology::NicSpec> nics = ReadNics(box.tree.root(), box.spec, warnings);
  EXPECT_EQ(Published(nics), nlohmann::json::parse(R"([
    {"name": "mlx5_0", "pci_bus_id": "0000:04:00.0", "numa_node": 0, "link_layer": "InfiniBand",
     "rate_gbps": 400.0, "state": "ACTIVE", "uverbs": "uverbs0", "netdevs": ["ibp4s0"],
     "sriov_num_vfs": 2, "gpu_relations": ["PIX", "PHB"]},
    {"name": "mlx5_1", "pci_bus_id": "0000:41:00.0", "data_path_pci_bus_id": "0000:0a:00.0",
     "numa_node": 0, "link_layer": "InfiniBand", "rate_gbps": 800.0, "state": "ACTIVE",
     "uverbs": "uverbs1", "netdevs": ["ibp65s0"], "gpu_relations": ["PHB", "PIX"]},
    {"name": "mlx5_2", "pci_bus_id": "0000:04:00.2", "numa_node": 0, "link_layer": "InfiniBand",
     "rate_gbps": 400.0, "state": "ACTIVE", "uverbs": "uverbs2", "sriov_physfn": "0000:04:00.0",
     "gpu_relations": ["PIX", "PHB"]}])"))
      << Published(nics).dump(1);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("\"rxe0\" is not a PCI function"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("NICs mlx5_0 have no Data Direct function"), std::string::npos)
      << warnings[1];
}

// A Data Direct function whose VPD cannot be read (an agent without root) pairs with nothing:
// the NIC's relations are its own function's, and a warning says why.
TEST(SysfsNics, UnreadableDataDirectVpdIsSaid) {
  OneSocketBox box;
  std::filesystem::remove(box.tree.root() + "/devices/" + box.data_direct + "/vpd");
  std::vector<std::string> warnings;
  const std::vector<topology::NicSpec> nics = ReadNics(box.tree.root(), box.spec, warnings);
  ASSERT_EQ(nics.size(), 3u);
  EXPECT_EQ(nics[1].name, "mlx5_1");
  EXPECT_TRUE(nics[1].data_path_pci_bus_id.empty());
  EXPECT_EQ(nics[1].gpu_relations, (std::vector<R>{R::kNode, R::kNode}));
  bool said = false;
  for (const std::string& warning : warnings) {
    said = said || warning.find("Data Direct function 0000:0a:00.0: no readable VPD id") !=
                       std::string::npos;
  }
  EXPECT_TRUE(said);
}

// No class/infiniband: no NICs, no warning (GPU-only nodes publish what they did before).
TEST(SysfsNics, NoRdmaDevicesNoNics) {
  SysfsTree tree;
  topology::TopologySpec spec;
  spec.gpus = {Gpu(0, ":03:00.0", 0, 0)};
  std::vector<std::string> warnings;
  EXPECT_TRUE(ReadNics(tree.root(), spec, warnings).empty());
  EXPECT_TRUE(ReadNics("/nonexistent-sysfs", spec, warnings).empty());
  EXPECT_TRUE(warnings.empty());
}

}  // namespace
}  // namespace linkfit::agent
