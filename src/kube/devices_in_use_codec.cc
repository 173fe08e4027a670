// The linkfit.io/devices-in-use codec (annotations.h): what the node agent publishes and linkfit
// reads on every node event. Written by hand, read with simdjson On-Demand.

#include <simdjson.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "kube/device_json.h"
#include "kube/json_reader.h"
#include "linkfit/common/json_string.h"
#include "linkfit/kube/annotations.h"

namespace linkfit::kube {
namespace {

using namespace json;  // NOLINT: internal helpers of this module

void AppendContainer(std::string& out, const DevicesInUse::Container& container) {
  out += "{\"name\":";
  json::AppendString(out, container.name);
  if (!container.gpus.empty()) {
    out += ",\"gpus\":";
    AppendInts(out, container.gpus);
  }
  AppendMigList(out, container.mig);
  if (!container.shares.empty()) {
    out += ",\"shares\":[";
    for (std::size_t i = 0; i < container.shares.size(); ++i) {
      out += (i > 0 ? ",{\"gpu\":" : "{\"gpu\":") + std::to_string(container.shares[i].gpu) +
             ",\"replicas\":" + std::to_string(container.shares[i].replicas) + "}";
    }
    out += ']';
  }
  if (!container.nics.empty()) {
    out += ",\"nics\":";
    AppendStrings(out, container.nics);
  }
  out += '}';
}

bool ReadShareEntry(Ctx& c, od::value& v, const std::string& where, DevicesInUse::Share* share) {
  const bool ok = ForEachField(c, v, where, false, [&](std::string_view key, od::value& child) {
    if (key == "gpu") return ReadIntField(c, child, where + ".gpu", 0, kMaxGpuIndex, &share->gpu);
    if (key == "replicas") {
      return ReadIntField(c, child, where + ".replicas", 1, 1 << 20, &share->replicas);
    }
    return UnknownKey(c, where, key);
  });
  if (ok && share->replicas == 0) return Fail(c, where + ".replicas: expected at least 1");
  return ok;
}

bool ReadContainer(Ctx& c, od::value& v, const std::string& where,
                   DevicesInUse::Container* container) {
  return ForEachField(c, v, where, false, [&](std::string_view key, od::value& child) {
    if (key == "name") return ReadString(c, child, where + ".name", &container->name);
    if (key == "gpus") return ReadGpuList(c, child, where + ".gpus", &container->gpus);
    if (key == "mig") {
      return ForEachElement(c, child, where + ".mig", [&](std::size_t i, od::value& element) {
        return ReadMigEntry(c, element, Indexed(where + ".mig", i), &container->mig.emplace_back());
      });
    }
    if (key == "shares") {
      return ForEachElement(c, child, where + ".shares", [&](std::size_t i, od::value& element) {
        return ReadShareEntry(c, element, Indexed(where + ".shares", i),
                              &container->shares.emplace_back());
      });
    }
    if (key == "nics") return ReadStringList(c, child, where + ".nics", &container->nics);
    return UnknownKey(c, where, key);
  });
}

bool ReadPod(Ctx& c, od::value& v, const std::string& where, DevicesInUse::Pod* pod) {
  return ForEachField(c, v, where, false, [&](std::string_view key, od::value& child) {
    if (key == "uid") return ReadString(c, child, where + ".uid", &pod->uid);
    if (key == "pod") return ReadString(c, child, where + ".pod", &pod->pod);
    if (key == "containers") {
      return ForEachElement(c, child, where + ".containers", [&](std::size_t i, od::value& e) {
        return ReadContainer(c, e, Indexed(where + ".containers", i),
                             &pod->containers.emplace_back());
      });
    }
    return UnknownKey(c, where, key);
  });
}

Result<void> CheckPod(const DevicesInUse::Pod& pod, const std::string& where) {
  if (pod.uid.empty()) return MakeError(where + ".uid: missing");
  for (std::size_t i = 0; i < pod.containers.size(); ++i) {
    const DevicesInUse::Container& container = pod.containers[i];
    const std::string at = where + ".containers[" + std::to_string(i) + "]";
    if (container.name.empty()) return MakeError(at + ".name: missing");
    std::set<int> gpus;
    for (int gpu : container.gpus) {
      if (!gpus.insert(gpu).second) {
        return MakeError(at + ".gpus: GPU " + std::to_string(gpu) + " appears twice");
      }
    }
    std::set<std::pair<int, int>> instances;
    for (const AllocationRecord::Mig& mig : container.mig) {
      if (!instances.emplace(mig.gpu, mig.start).second) {
        return MakeError(at + ".mig: the instance on GPU " + std::to_string(mig.gpu) + " at " +
                         std::to_string(mig.start) + " appears twice");
      }
    }
    std::set<int> shared;
    for (const DevicesInUse::Share& share : container.shares) {
      if (!shared.insert(share.gpu).second) {
        return MakeError(at + ".shares: GPU " + std::to_string(share.gpu) + " appears twice");
      }
    }
    std::set<std::string_view> nics;
    for (std::size_t n = 0; n < container.nics.size(); ++n) {
      const std::string& nic = container.nics[n];
      if (nic.empty()) return MakeError(at + ".nics[" + std::to_string(n) + "]: empty NIC name");
      if (!nics.insert(nic).second) return MakeError(at + ".nics: NIC " + nic + " appears twice");
    }
  }
  return {};
}

}  // namespace

std::string EncodeDevicesInUse(const DevicesInUse& devices) {
  std::string out = "{\"v\":" + std::to_string(devices.version) + ",\"pods\":[";
  for (std::size_t p = 0; p < devices.pods.size(); ++p) {
    const DevicesInUse::Pod& pod = devices.pods[p];
    out += p > 0 ? ",{\"uid\":" : "{\"uid\":";
    json::AppendString(out, pod.uid);
    if (!pod.pod.empty()) {
      out += ",\"pod\":";
      json::AppendString(out, pod.pod);
    }
    out += ",\"containers\":[";
    for (std::size_t i = 0; i < pod.containers.size(); ++i) {
      if (i > 0) out += ',';
      AppendContainer(out, pod.containers[i]);
    }
    out += "]}";
  }
  out += "]}";
  return out;
}

Result<DevicesInUse> DecodeDevicesInUse(std::string_view text) {
  thread_local Scratch scratch;
  DevicesInUse devices;
  devices.version = 0;
  Ctx c;
  od::document doc;
  const auto on_field = [&](std::string_view key, od::value& child) -> bool {
    if (key == "v") return ReadIntField(c, child, "v", 0, 1 << 30, &devices.version);
    if (key == "pods") {
      return ForEachElement(c, child, "pods", [&](std::size_t i, od::value& element) {
        return ReadPod(c, element, Indexed("pods", i), &devices.pods.emplace_back());
      });
    }
    return UnknownKey(c, "devices-in-use", key);
  };
  if (!Open(c, text, &doc, scratch, "devices-in-use") ||
      !ReadEnvelope(c, doc, on_field, "devices-in-use")) {
    return MakeError("devices-in-use: " + c.error);
  }
  if (devices.version != 1) {
    return MakeError("devices-in-use: version " + std::to_string(devices.version) +
                     " is not supported (expected \"v\":1)");
  }
  std::set<std::string> uids;
  for (std::size_t i = 0; i < devices.pods.size(); ++i) {
    const std::string where = Indexed("pods", i);
    if (auto ok = CheckPod(devices.pods[i], where); !ok) {
      return WithContext(ok.error(), "devices-in-use");
    }
    if (!uids.insert(devices.pods[i].uid).second) {
      return MakeError("devices-in-use: " + where + ": pod " + devices.pods[i].uid +
                       " appears twice");
    }
  }
  return devices;
}

}  // namespace linkfit::kube
