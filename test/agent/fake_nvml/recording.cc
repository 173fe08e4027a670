#include "recording.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

namespace fake_nvml {
namespace {

using linkfit::MakeError;
using linkfit::Result;
using nlohmann::json;

// Returns the error of a Result<void>, if any, from the enclosing function.
#define FAKE_NVML_RETURN_IF_ERROR(expr)                             \
  do {                                                              \
    if (auto fake_nvml_checked_ = (expr); !fake_nvml_checked_) {    \
      return tl::unexpected(std::move(fake_nvml_checked_).error()); \
    }                                                               \
  } while (false)

constexpr unsigned kMaxDevices = 64;
constexpr unsigned kMaxNvLinks = 18;         // NVML_NVLINK_MAX_LINKS
constexpr unsigned kProfileIndexCount = 17;  // NVML_GPU_INSTANCE_PROFILE_COUNT (R570)
constexpr unsigned kMemorySlices = 8;
constexpr unsigned kMaxNvLinkVersion = 7;  // NVML_NVLINK_VERSION_5_0

std::string Quoted(const json& value) { return value.dump(); }

// The members of an object, each checked against the keys it may have.
Result<void> CheckObject(const json& value, const std::string& path,
                         std::initializer_list<const char*> required,
                         std::initializer_list<const char*> optional = {}) {
  if (!value.is_object()) return MakeError(path + ": expected an object, got " + Quoted(value));
  for (const char* key : required) {
    if (!value.contains(key)) return MakeError(path + ": missing \"" + key + "\"");
  }
  for (const auto& [key, ignored] : value.items()) {
    const auto is_key = [&key](const char* known) { return key == known; };
    if (std::none_of(required.begin(), required.end(), is_key) &&
        std::none_of(optional.begin(), optional.end(), is_key)) {
      return MakeError(path + ": unknown key \"" + key + "\"");
    }
  }
  return {};
}

Result<std::string> String(const json& value, const std::string& path) {
  if (!value.is_string()) return MakeError(path + ": expected a string, got " + Quoted(value));
  return value.get<std::string>();
}

Result<unsigned long long> Unsigned(const json& value, const std::string& path,
                                    unsigned long long max) {
  if (!value.is_number_unsigned() || value.get<unsigned long long>() > max) {
    return MakeError(path + ": expected an integer 0.." + std::to_string(max) + ", got " +
                     Quoted(value));
  }
  return value.get<unsigned long long>();
}

Result<unsigned> Small(const json& value, const std::string& path, unsigned max) {
  Result<unsigned long long> number = Unsigned(value, path, max);
  if (!number) return tl::unexpected(number.error());
  return static_cast<unsigned>(*number);
}

Result<const json*> Array(const json& value, const std::string& path, std::size_t max) {
  if (!value.is_array()) return MakeError(path + ": expected an array, got " + Quoted(value));
  if (value.size() > max) {
    return MakeError(path + ": " + std::to_string(value.size()) + " entries, at most " +
                     std::to_string(max));
  }
  return &value;
}

Result<std::string> BusId(const json& value, const std::string& path) {
  Result<std::string> text = String(value, path);
  if (!text) return text;
  unsigned parts[4];
  if (!SplitBusId(*text, parts[0], parts[1], parts[2], parts[3])) {
    return MakeError(path + ": \"" + *text + "\" is not a PCI bus id (domain:bus:device.function)");
  }
  return text;
}

Result<NvLink> ParseNvLink(const json& value, const std::string& path) {
  NvLink link;
  FAKE_NVML_RETURN_IF_ERROR(
      CheckObject(value, path, {"remote_bus_id", "remote_type"}, {"version"}));
  LINKFIT_ASSIGN_OR_RETURN(link.remote_bus_id,
                           BusId(value["remote_bus_id"], path + ".remote_bus_id"));
  std::string type;
  LINKFIT_ASSIGN_OR_RETURN(type, String(value["remote_type"], path + ".remote_type"));
  if (type == "gpu") {
    link.remote_type = RemoteType::kGpu;
  } else if (type == "switch") {
    link.remote_type = RemoteType::kSwitch;
  } else if (type == "ibmnpu") {
    link.remote_type = RemoteType::kIbmNpu;
  } else {
    return MakeError(path + ".remote_type: \"" + type + "\" is not gpu, switch or ibmnpu");
  }
  if (value.contains("version")) {
    LINKFIT_ASSIGN_OR_RETURN(link.version,
                             Small(value["version"], path + ".version", kMaxNvLinkVersion));
    if (*link.version == 0) {
      return MakeError(path + ".version: 0 is NVML_NVLINK_VERSION_INVALID (omit it instead)");
    }
  }
  return link;
}

Result<Mig> ParseMig(const json& value, const std::string& path,
                     const std::vector<MigProfile>& profiles) {
  Mig mig;
  FAKE_NVML_RETURN_IF_ERROR(CheckObject(value, path, {"current", "pending", "instances"}));
  LINKFIT_ASSIGN_OR_RETURN(mig.current, Small(value["current"], path + ".current", 1));
  LINKFIT_ASSIGN_OR_RETURN(mig.pending, Small(value["pending"], path + ".pending", 1));
  const json* instances = nullptr;
  LINKFIT_ASSIGN_OR_RETURN(instances, Array(value["instances"], path + ".instances", 7));
  if (!instances->empty() && mig.current != 1) {
    return MakeError(path + ".instances: GPU instances exist only in MIG mode (current 1)");
  }
  std::set<unsigned> ids;
  for (std::size_t i = 0; i < instances->size(); ++i) {
    const json& entry = (*instances)[i];
    const std::string at = path + ".instances[" + std::to_string(i) + "]";
    GpuInstance gi;
    FAKE_NVML_RETURN_IF_ERROR(CheckObject(entry, at, {"id", "profile", "start", "size", "uuid"}));
    LINKFIT_ASSIGN_OR_RETURN(gi.id, Small(entry["id"], at + ".id", 1000));
    LINKFIT_ASSIGN_OR_RETURN(gi.profile, Small(entry["profile"], at + ".profile", 1000));
    LINKFIT_ASSIGN_OR_RETURN(gi.start, Small(entry["start"], at + ".start", kMemorySlices - 1));
    LINKFIT_ASSIGN_OR_RETURN(gi.size, Small(entry["size"], at + ".size", kMemorySlices));
    LINKFIT_ASSIGN_OR_RETURN(gi.uuid, String(entry["uuid"], at + ".uuid"));
    if (gi.size == 0 || gi.start + gi.size > kMemorySlices) {
      return MakeError(at + ": slices " + std::to_string(gi.start) + "+" + std::to_string(gi.size) +
                       " do not fit in 8 memory slices");
    }
    if (!ids.insert(gi.id).second) {
      return MakeError(at + ".id: GPU instance id " + std::to_string(gi.id) + " repeated");
    }
    const auto profile = std::find_if(profiles.begin(), profiles.end(), [&gi](const MigProfile& p) {
      return p.profile == gi.profile;
    });
    if (profile == profiles.end()) {
      return MakeError(at + ".profile: " + std::to_string(gi.profile) + " is not in mig_profiles");
    }
    // nvmlDeviceGetGpuInstances' callers size their array by the profile's instanceCount.
    const auto same_profile = [&gi](const GpuInstance& other) {
      return other.profile == gi.profile;
    };
    if (std::count_if(mig.instances.begin(), mig.instances.end(), same_profile) >=
        static_cast<std::ptrdiff_t>(profile->instance_count)) {
      return MakeError(at + ".profile: more than " + std::to_string(profile->instance_count) +
                       " instances of profile " + std::to_string(gi.profile));
    }
    mig.instances.push_back(std::move(gi));
  }
  return mig;
}

Result<Device> ParseDevice(const json& value, const std::string& path,
                           const std::vector<MigProfile>& profiles) {
  Device device;
  FAKE_NVML_RETURN_IF_ERROR(CheckObject(
      value, path, {"name", "uuid", "bus_id", "memory_mib", "numa_node", "nvlinks", "mig"},
      {"lost", "xid", "errors", "pcie", "memory_affinity", "pci_device_id"}));
  LINKFIT_ASSIGN_OR_RETURN(device.name, String(value["name"], path + ".name"));
  LINKFIT_ASSIGN_OR_RETURN(device.uuid, String(value["uuid"], path + ".uuid"));
  LINKFIT_ASSIGN_OR_RETURN(device.bus_id, BusId(value["bus_id"], path + ".bus_id"));
  LINKFIT_ASSIGN_OR_RETURN(device.memory_mib,
                           Unsigned(value["memory_mib"], path + ".memory_mib", 1ull << 30));
  if (!value["numa_node"].is_null()) {
    LINKFIT_ASSIGN_OR_RETURN(device.numa_node,
                             Small(value["numa_node"], path + ".numa_node", 1023));
  }
  if (value.contains("pcie")) {
    const std::string at = path + ".pcie";
    FAKE_NVML_RETURN_IF_ERROR(CheckObject(value["pcie"], at, {"max_generation", "max_width"}));
    PcieLink pcie;
    LINKFIT_ASSIGN_OR_RETURN(pcie.max_generation,
                             Small(value["pcie"]["max_generation"], at + ".max_generation", 7));
    LINKFIT_ASSIGN_OR_RETURN(pcie.max_width,
                             Small(value["pcie"]["max_width"], at + ".max_width", 32));
    if (pcie.max_generation == 0 || pcie.max_width == 0) {
      return MakeError(at + ": max_generation and max_width must be at least 1");
    }
    device.pcie = pcie;
  }
  if (value.contains("pci_device_id")) {
    LINKFIT_ASSIGN_OR_RETURN(device.pci_device_id,
                             Small(value["pci_device_id"], path + ".pci_device_id", 0xffffffffu));
  }
  if (value.contains("memory_affinity")) {
    const std::string at = path + ".memory_affinity";
    const json* nodes = nullptr;
    LINKFIT_ASSIGN_OR_RETURN(nodes, Array(value["memory_affinity"], at, 64));
    if (nodes->empty()) return MakeError(at + ": at least one NUMA node");
    std::vector<unsigned> affinity;
    for (std::size_t i = 0; i < nodes->size(); ++i) {
      unsigned node = 0;
      LINKFIT_ASSIGN_OR_RETURN(node, Small((*nodes)[i], at + "[" + std::to_string(i) + "]", 1023));
      affinity.push_back(node);
    }
    device.memory_affinity = std::move(affinity);
  }
  if (value.contains("lost")) {
    if (!value["lost"].is_boolean()) {
      return MakeError(path + ".lost: expected true or false, got " + Quoted(value["lost"]));
    }
    device.lost = value["lost"].get<bool>();
  }
  if (value.contains("errors")) {
    if (!value["errors"].is_object()) {
      return MakeError(path + ".errors: expected an object, got " + Quoted(value["errors"]));
    }
    for (const auto& [function, code] : value["errors"].items()) {
      const auto& known = InjectableFunctions();
      if (std::find(known.begin(), known.end(), function) == known.end()) {
        return MakeError(path + ".errors: \"" + function +
                         "\" is not a function the fake can fail");
      }
      unsigned number = 0;
      LINKFIT_ASSIGN_OR_RETURN(number, Small(code, path + ".errors." + function, 999));
      if (number == 0) return MakeError(path + ".errors." + function + ": 0 is NVML_SUCCESS");
      device.errors[function] = static_cast<int>(number);
    }
  }
  const json* links = nullptr;
  LINKFIT_ASSIGN_OR_RETURN(links, Array(value["nvlinks"], path + ".nvlinks", kMaxNvLinks));
  for (std::size_t i = 0; i < links->size(); ++i) {
    NvLink link;
    LINKFIT_ASSIGN_OR_RETURN(
        link, ParseNvLink((*links)[i], path + ".nvlinks[" + std::to_string(i) + "]"));
    device.nvlinks.push_back(std::move(link));
  }
  if (value.contains("xid")) {
    const json* xids = nullptr;
    LINKFIT_ASSIGN_OR_RETURN(xids, Array(value["xid"], path + ".xid", 64));
    for (std::size_t i = 0; i < xids->size(); ++i) {
      unsigned long long xid = 0;
      LINKFIT_ASSIGN_OR_RETURN(
          xid, Unsigned((*xids)[i], path + ".xid[" + std::to_string(i) + "]", 1000));
      device.xids.push_back(xid);
    }
  }
  if (!value["mig"].is_null()) {
    LINKFIT_ASSIGN_OR_RETURN(device.mig, ParseMig(value["mig"], path + ".mig", profiles));
  }
  return device;
}

Result<std::vector<MigProfile>> ParseProfiles(const json& value) {
  std::vector<MigProfile> profiles;
  const json* entries = nullptr;
  LINKFIT_ASSIGN_OR_RETURN(entries, Array(value, "mig_profiles", kProfileIndexCount));
  for (std::size_t i = 0; i < entries->size(); ++i) {
    const json& entry = (*entries)[i];
    const std::string at = "mig_profiles[" + std::to_string(i) + "]";
    MigProfile profile;
    FAKE_NVML_RETURN_IF_ERROR(
        CheckObject(entry, at, {"profile", "id", "slices", "memory_mb", "instance_count"}));
    LINKFIT_ASSIGN_OR_RETURN(profile.profile,
                             Small(entry["profile"], at + ".profile", kProfileIndexCount - 1));
    LINKFIT_ASSIGN_OR_RETURN(profile.id, Small(entry["id"], at + ".id", 1000));
    LINKFIT_ASSIGN_OR_RETURN(profile.slices, Small(entry["slices"], at + ".slices", 8));
    LINKFIT_ASSIGN_OR_RETURN(profile.memory_mb,
                             Unsigned(entry["memory_mb"], at + ".memory_mb", 1ull << 30));
    LINKFIT_ASSIGN_OR_RETURN(profile.instance_count,
                             Small(entry["instance_count"], at + ".instance_count", 7));
    if (profile.slices == 0 || profile.instance_count == 0) {
      return MakeError(at + ": slices and instance_count must be at least 1");
    }
    for (const MigProfile& earlier : profiles) {
      if (earlier.profile == profile.profile) {
        return MakeError(at + ".profile: " + std::to_string(profile.profile) + " repeated");
      }
    }
    profiles.push_back(profile);
  }
  return profiles;
}

Result<std::vector<std::vector<int>>> ParseAncestors(const json& value, std::size_t n) {
  static const std::set<unsigned> kLevels = {0, 10, 20, 30, 40, 50};
  std::vector<std::vector<int>> levels(n, std::vector<int>(n, 0));
  if (!value.is_array() || value.size() != n) {
    return MakeError("ancestors: expected " + std::to_string(n) + " rows (one per device)");
  }
  for (std::size_t a = 0; a < n; ++a) {
    const std::string row = "ancestors[" + std::to_string(a) + "]";
    if (!value[a].is_array() || value[a].size() != n) {
      return MakeError(row + ": expected " + std::to_string(n) + " levels");
    }
    for (std::size_t b = 0; b < n; ++b) {
      const std::string at = row + "[" + std::to_string(b) + "]";
      unsigned level = 0;
      LINKFIT_ASSIGN_OR_RETURN(level, Small(value[a][b], at, 50));
      if (kLevels.count(level) == 0) {
        return MakeError(at + ": " + std::to_string(level) +
                         " is not an nvmlGpuTopologyLevel_t (0, 10, 20, 30, 40, 50)");
      }
      levels[a][b] = static_cast<int>(level);
    }
  }
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < a; ++b) {
      if (levels[a][b] != levels[b][a]) {
        return MakeError("ancestors[" + std::to_string(a) + "][" + std::to_string(b) +
                         "]: not the same as [" + std::to_string(b) + "][" + std::to_string(a) +
                         "]");
      }
    }
  }
  return levels;
}

}  // namespace

const std::vector<std::string>& InjectableFunctions() {
  static const std::vector<std::string> kFunctions = {"nvmlDeviceGetHandleByIndex_v2",
                                                      "nvmlDeviceGetUUID",
                                                      "nvmlDeviceGetName",
                                                      "nvmlDeviceGetMemoryInfo",
                                                      "nvmlDeviceGetPciInfo_v3",
                                                      "nvmlDeviceGetNumaNodeId",
                                                      "nvmlDeviceGetMemoryAffinity",
                                                      "nvmlDeviceGetNvLinkState",
                                                      "nvmlDeviceGetNvLinkRemotePciInfo_v2",
                                                      "nvmlDeviceGetNvLinkVersion",
                                                      "nvmlDeviceGetMaxPcieLinkGeneration",
                                                      "nvmlDeviceGetMaxPcieLinkWidth",
                                                      "nvmlDeviceGetMigMode",
                                                      "nvmlDeviceGetTopologyCommonAncestor",
                                                      "nvmlDeviceRegisterEvents"};
  return kFunctions;
}

bool SplitBusId(std::string_view bus_id, unsigned& domain, unsigned& bus, unsigned& device,
                unsigned& function) {
  const std::string text(bus_id);
  char tail = 0;
  return text.size() <= 16 &&
         std::sscanf(text.c_str(), "%8x:%2x:%2x.%1x%c", &domain, &bus, &device, &function, &tail) ==
             4 &&
         device < 32 && function < 8;
}

Result<Recording> ParseRecording(std::string_view json_text) {
  const json document = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return MakeError("not JSON");
  Recording recording;
  FAKE_NVML_RETURN_IF_ERROR(CheckObject(document, "recording",
                                        {"nvml_version", "devices", "ancestors"},
                                        {"driver_version", "mig_profiles"}));
  LINKFIT_ASSIGN_OR_RETURN(recording.nvml_version,
                           String(document["nvml_version"], "nvml_version"));
  if (recording.nvml_version.empty() || recording.nvml_version.size() >= 80) {
    return MakeError("nvml_version: must have 1..79 characters");
  }
  if (document.contains("driver_version")) {
    LINKFIT_ASSIGN_OR_RETURN(recording.driver_version,
                             String(document["driver_version"], "driver_version"));
  }
  if (document.contains("mig_profiles")) {
    LINKFIT_ASSIGN_OR_RETURN(recording.mig_profiles, ParseProfiles(document["mig_profiles"]));
  }
  const json* devices = nullptr;
  LINKFIT_ASSIGN_OR_RETURN(devices, Array(document["devices"], "devices", kMaxDevices));
  for (std::size_t i = 0; i < devices->size(); ++i) {
    Device device;
    LINKFIT_ASSIGN_OR_RETURN(
        device,
        ParseDevice((*devices)[i], "devices[" + std::to_string(i) + "]", recording.mig_profiles));
    recording.devices.push_back(std::move(device));
  }
  LINKFIT_ASSIGN_OR_RETURN(recording.ancestors,
                           ParseAncestors(document["ancestors"], recording.devices.size()));
  return recording;
}

}  // namespace fake_nvml
