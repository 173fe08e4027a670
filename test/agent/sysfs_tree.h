#pragma once

// SysfsTree: a small sysfs tree under a temporary directory, built by a test: PCI functions
// under devices/ (linked from bus/pci/devices/), RDMA devices under class/infiniband/. Removed
// with the object.
//
// Thread-safety: test code; one thread.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace linkfit::agent::testing {

class SysfsTree {
 public:
  SysfsTree() {
    static int counter = 0;
    root_ = std::filesystem::temp_directory_path() /
            ("linkfit-sysfs-tree-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(root_ / "devices");
  }
  ~SysfsTree() { std::filesystem::remove_all(root_); }
  SysfsTree(const SysfsTree&) = delete;
  SysfsTree& operator=(const SysfsTree&) = delete;

  std::string root() const { return root_.string(); }

  // Writes `content` (as is) to root/relative.
  void Write(const std::string& relative, const std::string& content) const {
    const std::filesystem::path path = root_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << content;
  }

  // A PCI function at devices/<path> ("pci0000:17/0000:17:01.0/.../0000:1b:00.0"), listed in
  // bus/pci/devices/, with its vendor and device ids and NUMA node.
  void Function(const std::string& path, const std::string& vendor = "0x10de",
                const std::string& device = "0x2330", int numa = -1) const {
    Write("devices/" + path + "/vendor", vendor + "\n");
    Write("devices/" + path + "/device", device + "\n");
    Write("devices/" + path + "/numa_node", std::to_string(numa) + "\n");
    std::filesystem::create_directories(root_ / "bus" / "pci" / "devices");
    std::filesystem::create_symlink("../../../devices/" + path,
                                    root_ / "bus" / "pci" / "devices" / Name(path));
  }

  // An RDMA device `name` on the function at devices/<path> (made by Function()), with port 1,
  // verbs device uverbs<verbs> and a network interface.
  void Rdma(const std::string& name, const std::string& path, const std::string& layer,
            const std::string& rate, const std::string& state, int verbs,
            const std::string& netdev) const {
    const std::filesystem::path device = root_ / "class" / "infiniband" / name;
    std::filesystem::create_directories(device);
    std::filesystem::create_symlink("../../../devices/" + path, device / "device");
    Write("class/infiniband/" + name + "/ports/1/link_layer", layer + "\n");
    Write("class/infiniband/" + name + "/ports/1/rate", rate + "\n");
    Write("class/infiniband/" + name + "/ports/1/state", state + "\n");
    Write("devices/" + path + "/infiniband_verbs/uverbs" + std::to_string(verbs) + "/ibdev",
          name + "\n");
    if (!netdev.empty()) {
      std::filesystem::create_directories(root_ / "devices" / path / "net" / netdev);
    }
  }

  // Makes the function at devices/<vf> a virtual function of the one at devices/<pf>.
  void VirtualFunction(const std::string& vf, const std::string& pf, int pf_vfs) const {
    std::filesystem::create_symlink("../" + Name(pf), root_ / "devices" / vf / "physfn");
    Write("devices/" + pf + "/sriov_numvfs", std::to_string(pf_vfs) + "\n");
  }

  // Writes a PCI VPD image with a read-only "VU" keyword `vuid` for the function at
  // devices/<path> (the identifier string, VPD-R with VU, the end tag).
  void Vpd(const std::string& path, const std::string& vuid) const {
    std::string image = {'\x82', '\x04', '\x00', 'C', 'X', '-', '8'};
    const std::string keyword = std::string("VU") + static_cast<char>(vuid.size()) + vuid;
    image += '\x90';
    image += static_cast<char>(keyword.size());
    image += '\x00';
    image += keyword + '\x78';
    Write("devices/" + path + "/vpd", image);
  }

 private:
  static std::string Name(const std::string& path) {
    return std::filesystem::path(path).filename().string();
  }

  std::filesystem::path root_;
};

}  // namespace linkfit::agent::testing
