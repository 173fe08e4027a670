#include "linkfit/handoff/nic_device_files.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "linkfit/common/strings.h"
#include "linkfit/handoff/plugin_devices.h"

namespace linkfit::handoff {
namespace {

namespace fs = std::filesystem;

// The numbers of the character device at `path` (following links), nullopt when it is none.
std::optional<std::pair<std::int64_t, std::int64_t>> CharDeviceNumbers(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISCHR(info.st_mode)) return std::nullopt;
  return std::make_pair(static_cast<std::int64_t>(major(info.st_rdev)),
                        static_cast<std::int64_t>(minor(info.st_rdev)));
}

// sysfs's "MAJOR:MINOR\n"; nullopt when the file is absent, an error when it says something else.
Result<std::optional<std::pair<std::int64_t, std::int64_t>>> SysfsNumbers(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::optional<std::pair<std::int64_t, std::int64_t>>();
  std::string line;
  std::getline(in, line);
  const std::vector<std::string_view> parts = Split(Trim(line), ':');
  const auto major_number = parts.size() == 2 ? ParseInt(parts[0]) : std::nullopt;
  const auto minor_number = parts.size() == 2 ? ParseInt(parts[1]) : std::nullopt;
  if (!major_number || !minor_number || *major_number < 0 || *minor_number < 0) {
    return MakeError(path.string() + ": " + QuoteForMessage(line) + " is not MAJOR:MINOR");
  }
  return std::optional(std::make_pair(*major_number, *minor_number));
}

// The device file /dev/infiniband/<name>: from the host's /dev, else from sysfs.
Result<std::optional<DeviceFile>> Locate(const std::string& dev_root, const fs::path& sysfs_dev,
                                         const std::string& name) {
  const std::string path = std::string(kInfinibandDir) + name;
  if (auto numbers = CharDeviceNumbers(fs::path(dev_root) / "infiniband" / name)) {
    return std::optional(DeviceFile{path, numbers->first, numbers->second});
  }
  std::optional<std::pair<std::int64_t, std::int64_t>> numbers;
  LINKFIT_ASSIGN_OR_RETURN(numbers, SysfsNumbers(sysfs_dev));
  if (!numbers) return std::optional<DeviceFile>();
  return std::optional(DeviceFile{path, numbers->first, numbers->second});
}

}  // namespace

Result<NicDeviceFiles> ReadNicDeviceFiles(const std::string& dev_root,
                                          const std::string& sysfs_root,
                                          const topology::TopologySpec& node) {
  NicDeviceFiles files;
  const fs::path sysfs(sysfs_root);
  LINKFIT_ASSIGN_OR_RETURN(files.rdma_cm,
                           Locate(dev_root, sysfs / "class/misc/rdma_cm/dev", "rdma_cm"));
  for (const topology::NicSpec& nic : node.nics) {
    if (nic.uverbs.empty() || !ServedNic(nic)) continue;
    if (nic.uverbs.find('/') != std::string::npos || !StartsWith(nic.uverbs, "uverbs")) {
      return MakeError("NIC " + nic.name + ": verbs device " + QuoteForMessage(nic.uverbs) +
                       " is not uverbsN");
    }
    std::optional<DeviceFile> verbs;
    LINKFIT_ASSIGN_OR_RETURN(
        verbs, Locate(dev_root, sysfs / "class/infiniband_verbs" / nic.uverbs / "dev", nic.uverbs));
    if (!verbs) {
      return MakeError("NIC " + nic.name + ": neither " + dev_root + "/infiniband/" + nic.uverbs +
                       " nor " + sysfs_root + "/class/infiniband_verbs/" + nic.uverbs +
                       "/dev gives its device numbers");
    }
    files.by_nic[nic.name] = *verbs;
  }
  return files;
}

Result<std::vector<DeviceFile>> NicDeviceFilesFor(const HandedDevices& devices,
                                                  const NicDeviceFiles& files) {
  if (devices.nics.empty()) return std::vector<DeviceFile>();
  std::vector<std::string> nics;
  for (const auto& [name, milli] : devices.nics) nics.push_back(name);
  return NicDeviceFilesFor(nics, files, true);
}

Result<std::vector<DeviceFile>> NicDeviceFilesFor(const std::vector<std::string>& nics,
                                                  const NicDeviceFiles& files, bool rdma_cm) {
  std::vector<DeviceFile> out;
  if (rdma_cm && files.rdma_cm) out.push_back(*files.rdma_cm);
  for (const std::string& name : nics) {
    const auto found = files.by_nic.find(name);
    if (found == files.by_nic.end()) {
      return MakeError("NIC " + name + " has no verbs device on this node");
    }
    if (std::find(out.begin(), out.end(), found->second) == out.end()) out.push_back(found->second);
  }
  return out;
}

}  // namespace linkfit::handoff
