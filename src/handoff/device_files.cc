#include "linkfit/handoff/device_files.h"

#include <algorithm>
#include <filesystem>

#include "linkfit/common/files.h"
#include "linkfit/common/strings.h"

namespace linkfit::handoff {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kFrontendMajor = 195;  // the NVIDIA driver's fixed major
constexpr std::int64_t kControlMinor = 255;   // /dev/nvidiactl

Result<std::string> ReadSmallFile(const fs::path& path) {
  return ReadFile(path.string(), 64 * 1024);
}

// The value after "key:" on its line, trimmed; "" when absent.
std::string ValueOf(std::string_view text, std::string_view key) {
  for (std::string_view line : Split(text, '\n')) {
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || Trim(line.substr(0, colon)) != key) continue;
    return std::string(Trim(line.substr(colon + 1)));
  }
  return {};
}

Result<std::int64_t> Number(std::string_view text, const std::string& what) {
  std::int64_t value = 0;
  if (text.empty() || text.size() > 9)
    return MakeError(what + ": not a number: '" + std::string(text) + "'");
  for (const char c : text) {
    if (c < '0' || c > '9') return MakeError(what + ": not a number: '" + std::string(text) + "'");
    value = value * 10 + (c - '0');
  }
  return value;
}

// Char device majors by driver name from /proc/devices ("Character devices:" section).
Result<std::map<std::string, std::int64_t>> CharMajors(const fs::path& proc) {
  std::string text;
  LINKFIT_ASSIGN_OR_RETURN(text, ReadSmallFile(proc / "devices"));
  std::map<std::string, std::int64_t> majors;
  bool character = false;
  for (std::string_view line : Split(text, '\n')) {
    line = Trim(line);
    if (line == "Character devices:") character = true;
    if (line == "Block devices:") character = false;
    if (!character) continue;
    const std::vector<std::string_view> fields = SplitWhitespace(line);
    if (fields.size() != 2) continue;
    auto major = Number(fields[0], "/proc/devices");
    if (major) majors[std::string(fields[1])] = *major;
  }
  return majors;
}

Result<std::int64_t> CapabilityMinor(const fs::path& access) {
  std::string text;
  LINKFIT_ASSIGN_OR_RETURN(text, ReadSmallFile(access));
  return Number(ValueOf(text, "DeviceFileMinor"), access.string() + " DeviceFileMinor");
}

}  // namespace

Result<NodeDeviceFiles> ReadDeviceFiles(const std::string& proc_root,
                                        const topology::TopologySpec& node) {
  const fs::path proc(proc_root);
  std::map<std::string, std::int64_t> majors;
  LINKFIT_ASSIGN_OR_RETURN(majors, CharMajors(proc));
  const auto major = [&](const std::string& name) -> Result<std::int64_t> {
    const auto it = majors.find(name);
    if (it == majors.end()) return MakeError((proc / "devices").string() + " lists no " + name);
    return it->second;
  };
  NodeDeviceFiles files;
  std::int64_t uvm = 0;
  LINKFIT_ASSIGN_OR_RETURN(uvm, major("nvidia-uvm"));
  files.control = {{"/dev/nvidiactl", kFrontendMajor, kControlMinor},
                   {"/dev/nvidia-uvm", uvm, 0},
                   {"/dev/nvidia-uvm-tools", uvm, 1}};

  // GPU UUID -> device minor, from every GPU the driver lists.
  std::map<std::string, std::int64_t> minor_of;
  const fs::path gpus = proc / "driver" / "nvidia" / "gpus";
  std::error_code error;
  for (fs::directory_iterator it(gpus, error), end; !error && it != end; it.increment(error)) {
    std::string text;
    LINKFIT_ASSIGN_OR_RETURN(text, ReadSmallFile(it->path() / "information"));
    const std::string uuid = ValueOf(text, "GPU UUID");
    std::int64_t minor = 0;
    LINKFIT_ASSIGN_OR_RETURN(minor,
                             Number(ValueOf(text, "Device Minor"),
                                    (it->path() / "information").string() + " Device Minor"));
    if (!uuid.empty()) minor_of[uuid] = minor;
  }
  if (error) return MakeError("cannot list " + gpus.string() + ": " + error.message());

  for (const topology::GpuSpec& gpu : node.gpus) {
    if (gpu.uuid.empty()) continue;
    const auto minor = minor_of.find(gpu.uuid);
    if (minor == minor_of.end()) {
      return MakeError("GPU " + std::to_string(gpu.index) + " (" + gpu.uuid + ") is not under " +
                       gpus.string());
    }
    const DeviceFile gpu_file{"/dev/nvidia" + std::to_string(minor->second), kFrontendMajor,
                              minor->second};
    files.by_uuid[gpu.uuid] = {gpu_file};
    for (const topology::MigInstanceSpec& instance : gpu.mig_instances) {
      if (instance.uuid.empty()) continue;
      if (instance.gpu_instance < 0) {
        return MakeError("MIG instance " + instance.uuid + ": its GPU instance id is unknown");
      }
      std::int64_t caps = 0;
      LINKFIT_ASSIGN_OR_RETURN(caps, major("nvidia-caps"));
      const fs::path gi = proc / "driver" / "nvidia" / "capabilities" /
                          ("gpu" + std::to_string(minor->second)) / "mig" /
                          ("gi" + std::to_string(instance.gpu_instance));
      std::vector<fs::path> compute;
      for (fs::directory_iterator it(gi, error), end; !error && it != end; it.increment(error)) {
        if (StartsWith(it->path().filename().string(), "ci")) compute.push_back(it->path());
      }
      if (error || compute.size() != 1) {
        return MakeError("MIG instance " + instance.uuid +
                         ": expected one compute instance under " + gi.string() + ", found " +
                         std::to_string(compute.size()));
      }
      std::int64_t gi_minor = 0;
      std::int64_t ci_minor = 0;
      LINKFIT_ASSIGN_OR_RETURN(gi_minor, CapabilityMinor(gi / "access"));
      LINKFIT_ASSIGN_OR_RETURN(ci_minor, CapabilityMinor(compute[0] / "access"));
      files.by_uuid[instance.uuid] = {
          gpu_file,
          {"/dev/nvidia-caps/nvidia-cap" + std::to_string(gi_minor), caps, gi_minor},
          {"/dev/nvidia-caps/nvidia-cap" + std::to_string(ci_minor), caps, ci_minor}};
    }
  }
  return files;
}

Result<std::vector<DeviceFile>> DeviceFilesFor(const HandedDevices& devices,
                                               const NodeDeviceFiles& files) {
  std::vector<DeviceFile> out = files.control;
  const auto add = [&](const std::string& uuid) -> Result<void> {
    const auto it = files.by_uuid.find(uuid);
    if (it == files.by_uuid.end()) return MakeError("no device files known for " + uuid);
    for (const DeviceFile& file : it->second) {
      if (std::find(out.begin(), out.end(), file) == out.end()) out.push_back(file);
    }
    return {};
  };
  std::vector<std::string> uuids = devices.gpus;
  uuids.insert(uuids.end(), devices.mig.begin(), devices.mig.end());
  for (const auto& [uuid, milli] : devices.shares) uuids.push_back(uuid);
  for (const std::string& uuid : uuids) {
    if (auto added = add(uuid); !added) return tl::unexpected(added.error());
  }
  return out;
}

}  // namespace linkfit::handoff
