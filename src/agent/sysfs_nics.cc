// ReadNics (sysfs_nics.h): RDMA NICs, their ports and their PCIe relation to each GPU.

#include "agent/sysfs_nics.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "agent/gpu_nvml_links.h"
#include "linkfit/common/strings.h"

namespace linkfit::agent {
namespace {

namespace fs = std::filesystem;
using topology::NicSpec;
using topology::PcieRelation;

constexpr std::size_t kMaxVpdBytes = 32768;  // the PCI VPD address space
constexpr std::size_t kMaxNetdevs = 64;
constexpr std::int64_t kMaxPortNumber = 255;  // InfiniBand port numbers are 8 bits

std::string ReadFirstLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(Trim(line));
}

std::optional<std::string> ReadBinary(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string data(kMaxVpdBytes, '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<std::size_t>(in.gcount()));
  if (in.bad()) return std::nullopt;
  return data;
}

bool IsFunctionName(std::string_view name) {
  return name.size() == 12 && name[4] == ':' && name[7] == ':' && name[10] == '.';
}

// The path of a PCI function below devices/: pci<domain>:<bus>, then functions; empty when the
// link does not resolve to such a path.
std::vector<std::string> PciPath(const fs::path& devices, const fs::path& link) {
  std::error_code error;
  const fs::path real = fs::canonical(link, error);
  if (error) return {};
  std::vector<std::string> parts;
  for (const fs::path& part : real.lexically_relative(devices)) parts.push_back(part.string());
  if (parts.size() < 2 || parts.front().rfind("pci", 0) != 0 ||
      !std::all_of(parts.begin() + 1, parts.end(), IsFunctionName)) {
    return {};
  }
  return parts;
}

// The switches on a path: the upstream ports below the root port (parts[2], parts[4], ...),
// the function itself excluded.
std::vector<std::string> Switches(const std::vector<std::string>& path) {
  std::vector<std::string> switches;
  for (std::size_t up = 2; up + 2 <= path.size() - 1; up += 2) switches.push_back(path[up]);
  return switches;
}

// "400 Gb/sec (4X NDR)" -> 400; 0 for anything else.
double ParseRate(std::string_view text) {
  const std::string_view trimmed = Trim(text);
  const std::size_t end = trimmed.find_first_not_of("0123456789.");
  if (end == 0 || end == std::string_view::npos ||
      trimmed.substr(end).find("Gb/sec") == std::string_view::npos) {
    return 0;
  }
  const std::string number(trimmed.substr(0, end));
  const double value = std::strtod(number.c_str(), nullptr);
  return value > 0 && value < 100000 ? value : 0;
}

// "4: ACTIVE" -> "ACTIVE"; a state without number as is; empty for odd text.
std::string ParseState(std::string_view text) {
  std::string_view state = Trim(text);
  if (const std::size_t colon = state.find(':'); colon != std::string_view::npos) {
    state = Trim(state.substr(colon + 1));
  }
  const bool plain =
      !state.empty() && state.size() <= 32 && std::all_of(state.begin(), state.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
      });
  return plain ? std::string(state) : std::string();
}

// Names compared with digit runs as numbers: mlx5_2 < mlx5_10.
bool NaturalLess(const std::string& a, const std::string& b) {
  std::size_t i = 0;
  std::size_t j = 0;
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      std::size_t ie = i;
      std::size_t je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      const std::string_view da = std::string_view(a).substr(i, ie - i);
      const std::string_view db = std::string_view(b).substr(j, je - j);
      const std::string_view ta = da.substr(std::min(da.find_first_not_of('0'), da.size()));
      const std::string_view tb = db.substr(std::min(db.find_first_not_of('0'), db.size()));
      if (ta.size() != tb.size()) return ta.size() < tb.size();
      if (ta != tb) return ta < tb;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

// The port the NIC is used through, of those under <device>/ports: the lowest-numbered ACTIVE
// one, else the lowest-numbered one (a card cabled on its second port only is used there).
void ReadPort(const fs::path& device, NicSpec& nic) {
  std::error_code error;
  std::map<std::int64_t, fs::path> ports;
  for (const fs::directory_entry& entry : fs::directory_iterator(device / "ports", error)) {
    const auto number = ParseInt(entry.path().filename().string());
    if (number && *number >= 1 && *number <= kMaxPortNumber) ports.emplace(*number, entry.path());
  }
  if (ports.empty()) return;
  auto used = ports.begin();
  for (auto it = ports.begin(); it != ports.end(); ++it) {
    if (ParseState(ReadFirstLine(it->second / "state")) == "ACTIVE") {
      used = it;
      break;
    }
  }
  const fs::path& port = used->second;
  nic.port = static_cast<int>(used->first);
  nic.rate_gbps = ParseRate(ReadFirstLine(port / "rate"));
  nic.state = ParseState(ReadFirstLine(port / "state"));
  const auto layer = topology::ParseNicLinkLayer(ReadFirstLine(port / "link_layer"));
  nic.link_layer = layer.value_or(topology::NicLinkLayer::kUnknown);
}

// The verbs device, netdevs and SR-IOV facts of the NIC's PCI function.
void ReadFunctionFacts(const fs::path& function, NicSpec& nic) {
  std::error_code error;
  std::vector<std::string> uverbs;
  for (const auto& entry : fs::directory_iterator(function / "infiniband_verbs", error)) {
    if (ReadFirstLine(entry.path() / "ibdev") == nic.name) {
      uverbs.push_back(entry.path().filename().string());
    }
  }
  std::sort(uverbs.begin(), uverbs.end(), NaturalLess);
  if (!uverbs.empty()) nic.uverbs = uverbs.front();
  for (const auto& entry : fs::directory_iterator(function / "net", error)) {
    if (nic.netdevs.size() < kMaxNetdevs) nic.netdevs.push_back(entry.path().filename().string());
  }
  std::sort(nic.netdevs.begin(), nic.netdevs.end(), NaturalLess);
  const fs::path physfn = fs::canonical(function / "physfn", error);
  if (!error && IsFunctionName(physfn.filename().string())) {
    nic.sriov_physfn = physfn.filename().string();
  }
  const auto vfs = ParseInt(ReadFirstLine(function / "sriov_numvfs"));
  if (vfs && *vfs > 0 && *vfs <= 4096) nic.sriov_num_vfs = static_cast<int>(*vfs);
  const auto numa = ParseInt(ReadFirstLine(function / "numa_node"));
  if (numa && *numa >= 0 && *numa <= 1024) nic.numa_node = static_cast<int>(*numa);
}

}  // namespace

PcieRelation RelationOfPciPaths(const std::vector<std::string>& a,
                                const std::vector<std::string>& b, bool same_socket) {
  if (a.size() < 2 || b.size() < 2) return PcieRelation::kSys;
  if (a[0] != b[0]) return same_socket ? PcieRelation::kNode : PcieRelation::kSys;
  if (a[1] != b[1]) return PcieRelation::kPhb;
  const std::vector<std::string> sa = Switches(a);
  const std::vector<std::string> sb = Switches(b);
  std::size_t common = 0;
  while (common < sa.size() && common < sb.size() && sa[common] == sb[common]) ++common;
  if (common == 0) return PcieRelation::kPhb;
  const std::size_t crossed = (sa.size() - common) + (sb.size() - common);
  return crossed == 0 ? PcieRelation::kPix : PcieRelation::kPxb;
}

std::string VpdVendorUniqueId(std::string_view vpd) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(vpd[i]); };
  std::size_t pos = 0;
  while (pos < vpd.size()) {
    const unsigned tag = byte(pos);
    if ((tag & 0x80u) == 0) {                        // small resource
      if (((tag >> 3) & 0x0fu) == 0x0fu) return "";  // end tag
      pos += 1 + (tag & 0x07u);
      continue;
    }
    if (pos + 3 > vpd.size()) return "";
    const std::size_t length = byte(pos + 1) | (static_cast<std::size_t>(byte(pos + 2)) << 8);
    const std::size_t data = pos + 3;
    if (data + length > vpd.size()) return "";
    if (tag == 0x90u || tag == 0x91u) {  // VPD-R, VPD-W: keyword (2), length (1), value
      for (std::size_t k = data; k + 3 <= data + length;) {
        const std::size_t size = byte(k + 2);
        if (k + 3 + size > data + length) return "";
        if (vpd[k] == 'V' && vpd[k + 1] == 'U') {
          return std::string(Trim(std::string_view(vpd).substr(k + 3, size)));
        }
        k += 3 + size;
      }
    }
    pos = data + length;
  }
  return "";
}

namespace {

struct DataDirect {
  std::string bus_id;
  std::vector<std::string> path;
};

// Data Direct functions (15b3:2100) by the VU keyword of their VPD.
std::map<std::string, DataDirect> DataDirectFunctions(const fs::path& root, const fs::path& devices,
                                                      std::vector<std::string>& warnings) {
  std::map<std::string, DataDirect> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root / "bus" / "pci" / "devices", error)) {
    if (ToLower(ReadFirstLine(entry.path() / "vendor")) != "0x15b3" ||
        ToLower(ReadFirstLine(entry.path() / "device")) != "0x2100") {
      continue;
    }
    const std::string bus = entry.path().filename().string();
    const std::optional<std::string> vpd = ReadBinary(entry.path() / "vpd");
    const std::string vuid = vpd ? VpdVendorUniqueId(*vpd) : std::string();
    std::vector<std::string> path = PciPath(devices, entry.path());
    if (vuid.empty() || path.empty()) {
      warnings.push_back("Data Direct function " + bus +
                         ": no readable VPD id or PCI path; not paired with a NIC");
      continue;
    }
    found.emplace(vuid, DataDirect{bus, std::move(path)});
  }
  return found;
}

// The CPU socket of a NIC's NUMA node: that of a GPU on it, else sysfs's; a NIC whose NUMA node
// is unknown is on the GPUs' socket when they all share one.
std::optional<int> NicSocket(const fs::path& root, const topology::TopologySpec& spec, int numa) {
  std::set<int> gpu_sockets;
  for (const topology::GpuSpec& gpu : spec.gpus) {
    if (numa >= 0 && gpu.numa_node == numa) return gpu.socket;
    gpu_sockets.insert(gpu.socket);
  }
  if (numa >= 0) return nvml::SocketFromSysfs(root.string(), numa);
  if (gpu_sockets.size() == 1) return *gpu_sockets.begin();
  return std::nullopt;
}

}  // namespace

std::vector<NicSpec> ReadNics(const std::string& sysfs_root, const topology::TopologySpec& spec,
                              std::vector<std::string>& warnings) {
  std::vector<NicSpec> nics;
  const fs::path root(sysfs_root);
  std::error_code error;
  const fs::path devices = fs::canonical(root / "devices", error);
  if (error) return nics;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(root / "class" / "infiniband", error)) {
    names.push_back(entry.path().filename().string());
  }
  if (names.empty()) return nics;
  std::sort(names.begin(), names.end(), NaturalLess);

  std::vector<std::vector<std::string>> gpu_paths;
  for (const topology::GpuSpec& gpu : spec.gpus) {
    gpu_paths.push_back(gpu.pci_bus_id.empty()
                            ? std::vector<std::string>()
                            : PciPath(devices, root / "bus" / "pci" / "devices" /
                                                   nvml::CanonicalBusId(gpu.pci_bus_id)));
  }
  const std::map<std::string, DataDirect> data_direct =
      DataDirectFunctions(root, devices, warnings);
  std::vector<std::string> unpaired;
  for (const std::string& name : names) {
    const fs::path device = root / "class" / "infiniband" / name;
    const std::vector<std::string> path = PciPath(devices, device / "device");
    if (path.empty()) {
      warnings.push_back("RDMA device " + QuoteForMessage(name) +
                         " is not a PCI function (software RDMA?); not published");
      continue;
    }
    NicSpec nic;
    nic.name = name;
    nic.pci_bus_id = path.back();
    ReadFunctionFacts(fs::canonical(device / "device", error), nic);
    ReadPort(device, nic);
    const std::vector<std::string>* data_path = &path;
    if (!data_direct.empty()) {
      const std::optional<std::string> vpd = ReadBinary(device / "device" / "vpd");
      const auto paired = data_direct.find(vpd ? VpdVendorUniqueId(*vpd) : std::string());
      if (paired != data_direct.end()) {
        nic.data_path_pci_bus_id = paired->second.bus_id;
        data_path = &paired->second.path;
      } else if (nic.sriov_physfn.empty()) {
        unpaired.push_back(name);
      }
    }
    const std::optional<int> socket = NicSocket(root, spec, nic.numa_node);
    for (std::size_t g = 0; g < spec.gpus.size(); ++g) {
      const bool same_socket = socket && *socket == spec.gpus[g].socket;
      nic.gpu_relations.push_back(RelationOfPciPaths(gpu_paths[g], *data_path, same_socket));
    }
    nics.push_back(std::move(nic));
  }
  if (!unpaired.empty() && unpaired.size() < nics.size()) {
    std::string list;
    for (const std::string& name : unpaired) list += (list.empty() ? "" : ", ") + name;
    warnings.push_back("NICs " + list + " have no Data Direct function although others do; " +
                       "their relations are those of their own PCI function");
  }
  return nics;
}

}  // namespace linkfit::agent
