// The allocation record codec (annotations.h): written by hand into a string, read with
// simdjson On-Demand (a relist decodes one record per bound pod).

#include <simdjson.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "kube/device_json.h"
#include "kube/json_reader.h"
#include "linkfit/common/json_string.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/kube/quantity.h"

namespace linkfit::kube {
namespace {

using namespace json;  // NOLINT: internal helpers of this module

// `,"nics":[...]` (annotations.h: keys with nothing to say, and milli 1000, left out).
void AppendNics(std::string& out, const std::vector<AllocationRecord::Nic>& nics) {
  if (nics.empty()) return;
  out += ",\"nics\":[";
  for (std::size_t i = 0; i < nics.size(); ++i) {
    const AllocationRecord::Nic& nic = nics[i];
    out += i > 0 ? ",{\"name\":" : "{\"name\":";
    json::AppendString(out, nic.name);
    if (!nic.pci_bus_id.empty()) {
      out += ",\"pci_bus_id\":";
      json::AppendString(out, nic.pci_bus_id);
    }
    if (!nic.uverbs.empty()) {
      out += ",\"uverbs\":";
      json::AppendString(out, nic.uverbs);
    }
    if (nic.rail >= 0) out += ",\"rail\":" + std::to_string(nic.rail);
    if (nic.milli != 1000) out += ",\"milli\":" + std::to_string(nic.milli);
    if (nic.gpu >= 0) out += ",\"gpu\":" + std::to_string(nic.gpu);
    out += '}';
  }
  out += ']';
}

void AppendDevices(std::string& out, const AllocationRecord::Devices& devices) {
  if (!devices.gpus.empty()) {
    out += ",\"gpus\":";
    AppendInts(out, devices.gpus);
  }
  if (!devices.uuids.empty()) {
    out += ",\"uuids\":";
    AppendStrings(out, devices.uuids);
  }
  AppendMigList(out, devices.mig);
  if (!devices.shares.empty()) {
    out += ",\"shares\":[";
    for (std::size_t i = 0; i < devices.shares.size(); ++i) {
      if (i > 0) out += ',';
      out += "{\"gpu\":" + std::to_string(devices.shares[i].gpu) +
             ",\"milli\":" + std::to_string(devices.shares[i].milli) + "}";
    }
    out += ']';
  }
  AppendNics(out, devices.nics);
}

bool ReadShare(Ctx& c, od::value& v, const std::string& where, AllocationRecord::Share* share) {
  share->milli = 0;
  const bool ok = ForEachField(c, v, where, false, [&](std::string_view key, od::value& child) {
    if (key == "gpu") return ReadIntField(c, child, where + ".gpu", 0, kMaxGpuIndex, &share->gpu);
    if (key == "milli") return ReadIntField(c, child, where + ".milli", 1, 1000, &share->milli);
    return UnknownKey(c, where, key);
  });
  if (ok && share->milli == 0) return Fail(c, where + ".milli: expected 1..1000 thousandths");
  return ok;
}

bool ReadNic(Ctx& c, od::value& v, const std::string& where, AllocationRecord::Nic* nic) {
  const bool ok = ForEachField(c, v, where, false, [&](std::string_view key, od::value& child) {
    if (key == "name") return ReadString(c, child, where + ".name", &nic->name);
    if (key == "pci_bus_id") return ReadString(c, child, where + ".pci_bus_id", &nic->pci_bus_id);
    if (key == "uverbs") return ReadString(c, child, where + ".uverbs", &nic->uverbs);
    if (key == "rail") return ReadIntField(c, child, where + ".rail", 0, kMaxNicRail, &nic->rail);
    if (key == "milli") return ReadIntField(c, child, where + ".milli", 1, 1000, &nic->milli);
    if (key == "gpu") return ReadIntField(c, child, where + ".gpu", 0, kMaxGpuIndex, &nic->gpu);
    return UnknownKey(c, where, key);
  });
  if (ok && nic->name.empty()) return Fail(c, where + ".name: expected the NIC's device name");
  return ok;
}

// Reads one of the device keys into `devices`; false with *handled = false for other keys.
bool ReadDeviceKey(Ctx& c, std::string_view key, od::value& child, const std::string& where,
                   AllocationRecord::Devices* devices, bool* handled) {
  *handled = true;
  if (key == "gpus") return ReadGpuList(c, child, where + ".gpus", &devices->gpus);
  if (key == "uuids") return ReadStringList(c, child, where + ".uuids", &devices->uuids);
  if (key == "mig") {
    return ForEachElement(c, child, where + ".mig", [&](std::size_t index, od::value& element) {
      return ReadMigEntry(c, element, Indexed(where + ".mig", index), &devices->mig.emplace_back());
    });
  }
  if (key == "shares") {
    return ForEachElement(c, child, where + ".shares", [&](std::size_t index, od::value& element) {
      return ReadShare(c, element, Indexed(where + ".shares", index),
                       &devices->shares.emplace_back());
    });
  }
  if (key == "nics") {
    return ForEachElement(c, child, where + ".nics", [&](std::size_t index, od::value& element) {
      return ReadNic(c, element, Indexed(where + ".nics", index), &devices->nics.emplace_back());
    });
  }
  *handled = false;
  return false;
}

Result<void> CheckDevices(const AllocationRecord::Devices& devices, const std::string& where) {
  std::set<int> seen;
  for (int gpu : devices.gpus) {
    if (!seen.insert(gpu).second) {
      return MakeError(where + ".gpus: GPU " + std::to_string(gpu) + " appears twice");
    }
  }
  if (!devices.uuids.empty() && devices.uuids.size() != devices.gpus.size()) {
    return MakeError(where + ".uuids: " + std::to_string(devices.uuids.size()) + " UUIDs for " +
                     std::to_string(devices.gpus.size()) + " GPUs");
  }
  std::set<int> shared;
  for (const AllocationRecord::Share& share : devices.shares) {
    if (!shared.insert(share.gpu).second) {
      return MakeError(where + ".shares: GPU " + std::to_string(share.gpu) + " appears twice");
    }
  }
  std::set<std::string_view> nics;
  for (const AllocationRecord::Nic& nic : devices.nics) {
    if (!nics.insert(nic.name).second) {
      return MakeError(where + ".nics: NIC " + nic.name + " appears twice");
    }
  }
  return {};
}

// Every device of `part` is one of `whole`'s.
Result<void> CheckSubset(const AllocationRecord::Devices& part,
                         const AllocationRecord::Devices& whole, const std::string& where) {
  for (int gpu : part.gpus) {
    if (std::find(whole.gpus.begin(), whole.gpus.end(), gpu) == whole.gpus.end()) {
      return MakeError(where + ".gpus: GPU " + std::to_string(gpu) + " is not one of the pod's");
    }
  }
  for (const AllocationRecord::Mig& mig : part.mig) {
    const bool found = std::any_of(whole.mig.begin(), whole.mig.end(), [&](const auto& m) {
      return m.gpu == mig.gpu && m.start == mig.start && m.profile == mig.profile;
    });
    if (!found) {
      return MakeError(where + ".mig: instance " + mig.profile + " on GPU " +
                       std::to_string(mig.gpu) + " at " + std::to_string(mig.start) +
                       " is not one of the pod's");
    }
  }
  for (const AllocationRecord::Share& share : part.shares) {
    const bool found = std::any_of(whole.shares.begin(), whole.shares.end(), [&](const auto& s) {
      return s.gpu == share.gpu && s.milli >= share.milli;
    });
    if (!found) {
      return MakeError(where + ".shares: share of GPU " + std::to_string(share.gpu) +
                       " is not one of the pod's");
    }
  }
  for (const AllocationRecord::Nic& nic : part.nics) {
    const bool found = std::any_of(whole.nics.begin(), whole.nics.end(), [&](const auto& n) {
      return n.name == nic.name && n.milli >= nic.milli;
    });
    if (!found) {
      return MakeError(where + ".nics: NIC " + nic.name + " is not one of the pod's");
    }
  }
  return {};
}

bool ReadQuantityField(Ctx& c, od::value& v, const std::string& where, std::int64_t* milli) {
  Result<std::int64_t> value = 0;
  if (!ReadQuantity(c, v, where, &value)) return false;
  if (!value || *value < 0) {
    return Fail(c, where + ": expected a non-negative quantity" +
                       (value ? std::string() : ": " + value.error().message));
  }
  *milli = *value;
  return true;
}

}  // namespace

std::string EncodeAllocationRecord(const AllocationRecord& record) {
  std::string out = "{\"v\":" + std::to_string(record.version) + ",\"pod\":";
  json::AppendString(out, record.pod);
  out += ",\"uid\":";
  json::AppendString(out, record.uid);
  out += ",\"node\":";
  json::AppendString(out, record.node);
  if (!record.group.empty()) {
    out += ",\"group\":";
    json::AppendString(out, record.group);
  }
  AppendDevices(out, record.devices);
  if (record.cpu_milli > 0) out += ",\"cpu\":\"" + std::to_string(record.cpu_milli) + "m\"";
  if (record.memory_bytes > 0) out += ",\"memory\":\"" + std::to_string(record.memory_bytes) + "\"";
  if (!record.containers.empty()) {
    out += ",\"containers\":[";
    for (std::size_t i = 0; i < record.containers.size(); ++i) {
      const AllocationRecord::Container& container = record.containers[i];
      if (i > 0) out += ',';
      out += "{\"name\":";
      json::AppendString(out, container.name);
      if (container.init) out += ",\"init\":true";
      AppendDevices(out, container.devices);
      out += '}';
    }
    out += ']';
  }
  out += '}';
  return out;
}

Result<AllocationRecord> DecodeAllocationRecord(std::string_view text) {
  thread_local Scratch scratch;
  AllocationRecord record;
  record.version = 0;
  Ctx c;
  od::document doc;
  std::int64_t memory_milli = 0;
  const auto on_field = [&](std::string_view key, od::value& child) -> bool {
    if (key == "v") return ReadIntField(c, child, "v", 0, 1 << 30, &record.version);
    if (key == "pod") return ReadString(c, child, "pod", &record.pod);
    if (key == "uid") return ReadString(c, child, "uid", &record.uid);
    if (key == "node") return ReadString(c, child, "node", &record.node);
    if (key == "group") return ReadString(c, child, "group", &record.group);
    if (key == "cpu") return ReadQuantityField(c, child, "cpu", &record.cpu_milli);
    if (key == "memory") return ReadQuantityField(c, child, "memory", &memory_milli);
    if (key == "containers") {
      return ForEachElement(c, child, "containers", [&](std::size_t index, od::value& element) {
        const std::string where = Indexed("containers", index);
        AllocationRecord::Container& container = record.containers.emplace_back();
        return ForEachField(c, element, where, false, [&](std::string_view ckey, od::value& v) {
          if (ckey == "name") return ReadString(c, v, where + ".name", &container.name);
          if (ckey == "init") {
            od::json_type type;
            if (!GetType(c, v, &type, where + ".init")) return false;
            if (type != od::json_type::boolean) {
              return WrongType(c, where + ".init", "a boolean", type);
            }
            bool init = false;
            if (auto code = v.get_bool().get(init)) return JsonFail(c, where + ".init", code);
            container.init = init;
            return true;
          }
          bool handled = false;
          const bool ok = ReadDeviceKey(c, ckey, v, where, &container.devices, &handled);
          return handled ? ok : UnknownKey(c, where, ckey);
        });
      });
    }
    bool handled = false;
    const bool ok = ReadDeviceKey(c, key, child, "allocation", &record.devices, &handled);
    return handled ? ok : UnknownKey(c, "allocation", key);
  };
  if (!Open(c, text, &doc, scratch, "allocation record") ||
      !ReadEnvelope(c, doc, on_field, "allocation record")) {
    return MakeError("allocation record: " + c.error);
  }
  if (record.version != kAllocationRecordVersion) {
    return MakeError(
        "allocation record: version " + std::to_string(record.version) +
        " is not supported (expected \"v\":" + std::to_string(kAllocationRecordVersion) + ")");
  }
  for (const auto& [value, name] : {std::pair{&record.pod, "pod"}, std::pair{&record.uid, "uid"},
                                    std::pair{&record.node, "node"}}) {
    if (value->empty()) return MakeError(std::string("allocation record: missing ") + name);
  }
  record.memory_bytes = (memory_milli + 999) / 1000;
  if (auto ok = CheckDevices(record.devices, "allocation"); !ok) {
    return WithContext(ok.error(), "allocation record");
  }
  for (std::size_t i = 0; i < record.containers.size(); ++i) {
    const std::string where = "allocation.containers[" + std::to_string(i) + "]";
    const AllocationRecord::Container& container = record.containers[i];
    if (container.name.empty()) return MakeError("allocation record: " + where + ": no name");
    if (auto ok = CheckDevices(container.devices, where); !ok) {
      return WithContext(ok.error(), "allocation record");
    }
    if (auto ok = CheckSubset(container.devices, record.devices, where); !ok) {
      return WithContext(ok.error(), "allocation record");
    }
  }
  return record;
}

}  // namespace linkfit::kube
