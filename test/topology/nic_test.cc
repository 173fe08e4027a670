// NICs in the node model: the topology document's `nics` (round trip, errors), BuildTopology's
// validation and the NIC columns of `nvidia-smi topo -m`, on real published outputs
// (test/data/nvidia-smi/nics, sources in config/topologies/README.md) and on the samples
// generated from the fixtures.

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "linkfit/topology/spec.h"
#include "linkfit/topology/topology.h"

namespace linkfit::topology {
namespace {

using R = PcieRelation;

// The fingerprint of config/topologies/dgx-h100.json (read without NICs) as linkfit computed it
// before NICs were modelled: NICs enter the fingerprint only where a node has some, so NIC-less
// nodes keep the fingerprints, and the shared placement tables, they had.
constexpr const char* kDgxH100Fingerprint = "9a3565931f464e2f";

std::string ReadFile(const std::string& relative) {
  std::ifstream file(std::string(LINKFIT_SOURCE_DIR) + "/" + relative, std::ios::binary);
  EXPECT_TRUE(file) << "cannot open " << relative;
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// A 2-GPU document, with `nics_json` as its "nics" value when not empty.
std::string TwoGpuDocument(const std::string& nics_json) {
  std::string doc = R"({"schema": "linkfit-topology/v1", "gpus": [{"index": 0}, {"index": 1}],
    "links": [{"a": 0, "b": 1, "pcie_relation": "PHB"}])";
  if (!nics_json.empty()) doc += R"(, "nics": )" + nics_json;
  return doc + "}";
}

NicSpec FullNic() {
  NicSpec nic;
  nic.name = "mlx5_3";
  nic.pci_bus_id = "0000:18:00.0";
  nic.data_path_pci_bus_id = "0000:1a:00.1";
  nic.numa_node = 1;
  nic.link_layer = NicLinkLayer::kInfiniband;
  nic.port = 2;
  nic.rate_gbps = 400;
  nic.state = "ACTIVE";
  nic.uverbs = "uverbs3";
  nic.netdevs = {"ibp24s0"};
  nic.sriov_num_vfs = 4;
  nic.rail = 5;
  nic.gpu_relations = {R::kPxb, R::kNode};
  return nic;
}

TEST(NicDocument, RoundTripsEveryField) {
  auto spec = ParseTopologyDocument(TwoGpuDocument(""));
  ASSERT_TRUE(spec) << spec.error().message;
  NicSpec vf;
  vf.name = "mlx5_7";
  vf.pci_bus_id = "0000:18:00.2";
  vf.sriov_physfn = "0000:18:00.0";
  vf.link_layer = NicLinkLayer::kEthernet;
  vf.rate_gbps = 2.5;
  vf.gpu_relations = {R::kSys, R::kPix};
  spec->nics = {FullNic(), vf};
  const std::string document = ToTopologyDocument(*spec);
  auto again = ParseTopologyDocument(document);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->nics, spec->nics);
  const nlohmann::json written = nlohmann::json::parse(document);
  EXPECT_EQ(written["nics"][0]["gpu_relations"], nlohmann::json::parse(R"(["PXB", "NODE"])"));
  EXPECT_EQ(written["nics"][0]["link_layer"], "InfiniBand");
  EXPECT_EQ(written["nics"][0]["port"], 2);
  // Port 1 goes unsaid, as documents from before ports were kept mean it.
  EXPECT_FALSE(written["nics"][1].contains("port"));
  // What is unknown is left out: no rail (the NIC's order), no NUMA node, no data path.
  EXPECT_FALSE(written["nics"][1].contains("rail"));
  EXPECT_FALSE(written["nics"][1].contains("numa_node"));
  EXPECT_FALSE(written["nics"][1].contains("data_path_pci_bus_id"));
}

// Documents without NICs write no "nics" key: the node annotations of NIC-less clusters are
// byte-for-byte what they were.
TEST(NicDocument, NicLessDocumentsHaveNoNicsKey) {
  for (const char* id : {"pcie-8x-rtx4090-all-sys", "ws-4x-rtxa6000-nvlink-pairs"}) {
    auto spec = ParseTopologyDocument(ReadFile(std::string("config/topologies/") + id + ".json"));
    ASSERT_TRUE(spec) << spec.error().message;
    EXPECT_TRUE(spec->nics.empty()) << id;
    EXPECT_FALSE(nlohmann::json::parse(ToTopologyDocument(*spec)).contains("nics")) << id;
  }
}

// The fixture schema's own `nics` entries (name, numa_node, pcie_parent, pix/pxb/phb_gpus): the
// listed GPUs at their relation, the others NODE on the NIC's NUMA node and SYS elsewhere.
TEST(NicDocument, FixtureSchemaNicsAreRead) {
  auto a100 = ParseTopologyDocument(ReadFile("config/topologies/dgx-a100.json"));
  ASSERT_TRUE(a100) << a100.error().message;
  ASSERT_EQ(a100->nics.size(), 8u);
  EXPECT_EQ(a100->nics[0].name, "mlx5_0");
  EXPECT_EQ(a100->nics[0].numa_node, 3);
  for (std::size_t g = 0; g < a100->gpus.size(); ++g) {
    const R expected = g < 2 ? R::kPxb : a100->gpus[g].numa_node == 3 ? R::kNode : R::kSys;
    EXPECT_EQ(a100->nics[0].gpu_relations[g], expected) << "GPU" << g;
  }
  auto h100 = ParseTopologyDocument(ReadFile("config/topologies/dgx-h100.json"));
  ASSERT_TRUE(h100) << h100.error().message;
  ASSERT_EQ(h100->nics.size(), 8u);
  for (std::size_t n = 0; n < 8; ++n) {
    EXPECT_EQ(h100->nics[n].gpu_relations[n], R::kPxb) << "NIC" << n;  // one NIC per GPU
  }
  auto cascaded =
      ParseTopologyDocument(ReadFile("config/topologies/pcie-8x-cascaded-switch-2socket.json"));
  ASSERT_TRUE(cascaded) << cascaded.error().message;
  ASSERT_EQ(cascaded->nics.size(), 1u);
  EXPECT_EQ(cascaded->nics[0].gpu_relations[4], R::kPhb);
  EXPECT_EQ(cascaded->nics[0].gpu_relations[0], R::kSys);
  ASSERT_TRUE(BuildTopology(*cascaded));
}

TEST(NicDocument, FixtureSchemaNicErrorsNameTheField) {
  const std::string base = ReadFile("config/topologies/dgx1-v100.json");
  const struct {
    const char* from;
    const char* to;
    const char* error;
  } cases[] = {
      {"\"pix_gpus\": [\n        0,", "\"pix_gpus\": [\n        9,", "$.nics[0].pix_gpus"},
      {R"("pcie_parent": "plx0")", R"("pcie_parent": "nowhere")", "$.nics[0].pcie_parent"},
      {R"("name": "mlx5_0")", R"("name": 7)", "$.nics[0].name"},
  };
  for (const auto& c : cases) {
    std::string doc = base;
    const std::size_t at = doc.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    doc.replace(at, std::string(c.from).size(), c.to);
    auto spec = ParseTopologyDocument(doc);
    ASSERT_FALSE(spec) << c.to;
    EXPECT_NE(spec.error().message.find(c.error), std::string::npos) << spec.error().message;
  }
}

// The sample document (also a seed of fuzz_topology_document): three NICs, one with a stated
// rail, one with a Data Direct function, one a virtual function.
TEST(NicDocument, SampleDocumentBuilds) {
  auto spec = ParseTopologyDocument(ReadFile("test/data/topology-documents/nics.json"));
  ASSERT_TRUE(spec) << spec.error().message;
  auto built = BuildTopology(*spec);
  ASSERT_TRUE(built) << built.error().message;
  ASSERT_EQ((*built)->nic_count(), 3);
  EXPECT_EQ((*built)->nics()[0].rail, 0);
  EXPECT_EQ((*built)->nics()[1].rail, 3);
  EXPECT_EQ((*built)->nics()[2].rail, 2);
  EXPECT_EQ((*built)->nics()[1].data_path_pci_bus_id, "0000:0a:00.0");
  EXPECT_EQ((*built)->nics()[2].sriov_physfn, "0000:04:00.0");
  // A document from before ports were kept: every NIC is used through port 1.
  for (const NicSpec& nic : (*built)->nics()) EXPECT_EQ(nic.port, 1) << nic.name;
  EXPECT_EQ((*built)->nic_relation(1, 1), R::kPix);
}

TEST(NicDocument, BadNicsAreErrorsNamingTheField) {
  const struct {
    const char* nics;
    const char* error;
  } cases[] = {
      {R"({"name": "mlx5_0"})", "$.nics: expected an array"},
      {R"([{"gpu_relations": ["PIX", "SYS"]}])", "$.nics[0].name: missing"},
      {R"([{"name": "mlx5 0", "gpu_relations": ["PIX", "SYS"]}])", "$.nics[0].name:"},
      {R"([{"name": "mlx5_0"}])", "$.nics[0].gpu_relations: expected an array"},
      {R"([{"name": "mlx5_0", "gpu_relations": ["PIX"]}])", "1 entries for 2 GPUs"},
      {R"([{"name": "mlx5_0", "gpu_relations": ["PIX", "NV18"]}])", "$.nics[0].gpu_relations[1]"},
      {R"([{"name": "mlx5_0", "gpu_relations": ["PIX", 3]}])", "gpu_relations[1]: not a string"},
      {R"([{"name": "mlx5_0", "link_layer": "Token Ring", "gpu_relations": ["PIX", "SYS"]}])",
       "$.nics[0].link_layer"},
      {R"([{"name": "mlx5_0", "rate_gbps": -1, "gpu_relations": ["PIX", "SYS"]}])",
       "$.nics[0].rate_gbps"},
      {R"([{"name": "mlx5_0", "rail": -1, "gpu_relations": ["PIX", "SYS"]}])", "$.nics[0].rail"},
      {R"([{"name": "mlx5_0", "port": 0, "gpu_relations": ["PIX", "SYS"]}])", "$.nics[0].port"},
      {R"([{"name": "mlx5_0", "port": 256, "gpu_relations": ["PIX", "SYS"]}])",
       "$.nics[0].port: 256 is outside 1..255"},
      {R"([{"name": "mlx5_0", "port": "2", "gpu_relations": ["PIX", "SYS"]}])",
       "$.nics[0].port: expected an integer"},
      {R"([{"name": "mlx5_0", "numa_node": 1.5, "gpu_relations": ["PIX", "SYS"]}])",
       "$.nics[0].numa_node"},
      {R"([{"name": "mlx5_0", "netdevs": ["ib 0"], "gpu_relations": ["PIX", "SYS"]}])",
       "$.nics[0].netdevs[0]"},
      {R"([{"name": "a", "gpu_relations": ["PIX", "SYS"]},
           {"name": "a", "gpu_relations": ["PIX", "SYS"]}])",
       "$.nics[1].name: duplicate a"},
  };
  for (const auto& c : cases) {
    auto spec = ParseTopologyDocument(TwoGpuDocument(c.nics));
    ASSERT_FALSE(spec) << c.nics;
    EXPECT_NE(spec.error().message.find(c.error), std::string::npos)
        << c.nics << " -> " << spec.error().message;
  }
}

TopologySpec TwoGpus() {
  auto spec = ParseTopologyDocument(TwoGpuDocument(""));
  EXPECT_TRUE(spec) << spec.error().message;
  return spec ? *spec : TopologySpec();
}

TEST(NicModel, RailsDefaultToTheNicsOrderAndRelationsAreKept) {
  TopologySpec spec = TwoGpus();
  NicSpec first = FullNic();
  first.rail = -1;
  NicSpec second = FullNic();
  second.name = "mlx5_4";
  second.pci_bus_id = "0000:19:00.0";
  second.data_path_pci_bus_id.clear();
  second.rail = 0;
  second.gpu_relations = {R::kSys, R::kPix};
  spec.nics = {first, second};
  auto built = BuildTopology(spec);
  ASSERT_TRUE(built) << built.error().message;
  ASSERT_EQ((*built)->nic_count(), 2);
  EXPECT_EQ((*built)->nics()[0].rail, 0);  // its position
  EXPECT_EQ((*built)->nics()[1].rail, 0);  // as configured
  EXPECT_EQ((*built)->nic_relation(0, 0), R::kPxb);
  EXPECT_EQ((*built)->nic_relation(1, 1), R::kPix);
}

TEST(NicModel, NicsChangeTheFingerprintOnlyWhenPresent) {
  const TopologySpec plain = TwoGpus();
  TopologySpec with_nic = plain;
  with_nic.nics = {FullNic()};
  TopologySpec other_relation = with_nic;
  other_relation.nics[0].gpu_relations = {R::kNode, R::kPxb};
  auto a = BuildTopology(plain);
  auto b = BuildTopology(with_nic);
  auto c = BuildTopology(other_relation);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ((*a)->nic_count(), 0);
  EXPECT_NE((*a)->fingerprint(), (*b)->fingerprint());
  EXPECT_NE((*b)->fingerprint(), (*c)->fingerprint());
  // A NIC-less node's fingerprint is what it was before NICs existed (recorded on main).
  auto fixture = ParseTopologyDocument(ReadFile("config/topologies/dgx-h100.json"));
  ASSERT_TRUE(fixture);
  fixture->nics.clear();
  auto dgx = BuildTopology(*fixture);
  ASSERT_TRUE(dgx);
  EXPECT_EQ((*dgx)->fingerprint(), kDgxH100Fingerprint);
}

TEST(NicModel, ValidationSaysWhatIsWrong) {
  const struct {
    void (*mutate)(std::vector<NicSpec>&);
    const char* error;
  } cases[] = {
      {[](std::vector<NicSpec>& n) { n[0].name.clear(); }, "NIC 0 has no name"},
      {[](std::vector<NicSpec>& n) { n[1].name = n[0].name; }, "duplicate NIC name mlx5_3"},
      {[](std::vector<NicSpec>& n) { n[1].pci_bus_id = n[0].pci_bus_id; },
       "PCI function 0000:18:00.0 is listed for another NIC too"},
      {[](std::vector<NicSpec>& n) { n[1].pci_bus_id = n[0].data_path_pci_bus_id; },
       "PCI function 0000:1a:00.1 is listed for another NIC too"},
      {[](std::vector<NicSpec>& n) { n[0].gpu_relations.pop_back(); },
       "NIC mlx5_3 has 1 GPU relations; the node has 2 GPUs"},
      {[](std::vector<NicSpec>& n) { n[0].rail = kMaxNics; }, "rail 128 is outside"},
      {[](std::vector<NicSpec>& n) { n[0].numa_node = -2; }, "negative NUMA node"},
      {[](std::vector<NicSpec>& n) { n.resize(kMaxNics + 1, n[1]); }, "at most 128"},
  };
  for (const auto& c : cases) {
    TopologySpec spec = TwoGpus();
    NicSpec second = FullNic();
    second.name = "mlx5_4";
    second.pci_bus_id = "0000:19:00.0";
    second.data_path_pci_bus_id.clear();
    spec.nics = {FullNic(), second};
    c.mutate(spec.nics);
    auto built = BuildTopology(spec);
    ASSERT_FALSE(built) << c.error;
    EXPECT_NE(built.error().message.find(c.error), std::string::npos) << built.error().message;
  }
}

}  // namespace
}  // namespace linkfit::topology
