#include "kube/device_json.h"

#include "linkfit/common/json_string.h"

namespace linkfit::kube::json {

void AppendInts(std::string& out, const std::vector<int>& values) {
  out += '[';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  out += ']';
}

void AppendStrings(std::string& out, const std::vector<std::string>& values) {
  out += '[';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    json::AppendString(out, values[i]);
  }
  out += ']';
}

void AppendMigList(std::string& out, const std::vector<AllocationRecord::Mig>& mig) {
  if (mig.empty()) return;
  out += ",\"mig\":[";
  for (std::size_t i = 0; i < mig.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"gpu\":" + std::to_string(mig[i].gpu) + ",\"profile\":";
    json::AppendString(out, mig[i].profile);
    out += ",\"start\":" + std::to_string(mig[i].start);
    if (!mig[i].uuid.empty()) {
      out += ",\"uuid\":";
      json::AppendString(out, mig[i].uuid);
    }
    out += '}';
  }
  out += ']';
}

bool ReadIntField(Ctx& c, od::value& v, const std::string& where, int min, int max, int* out) {
  std::int64_t value = 0;
  if (!ReadInt(c, v, where, min, max, &value, nullptr)) return false;
  *out = static_cast<int>(value);
  return true;
}

bool UnknownKey(Ctx& c, const std::string& where, std::string_view key) {
  return Fail(c, where + ": unknown key " + Quoted(key));
}

bool ReadGpuList(Ctx& c, od::value& v, const std::string& where, std::vector<int>* out) {
  return ForEachElement(c, v, where, [&](std::size_t index, od::value& element) {
    return ReadIntField(c, element, Indexed(where, index), 0, kMaxGpuIndex, &out->emplace_back());
  });
}

bool ReadStringList(Ctx& c, od::value& v, const std::string& where, std::vector<std::string>* out) {
  return ForEachElement(c, v, where, [&](std::size_t index, od::value& element) {
    return ReadString(c, element, Indexed(where, index), &out->emplace_back());
  });
}

bool ReadMigEntry(Ctx& c, od::value& v, const std::string& where, AllocationRecord::Mig* mig) {
  const bool ok = ForEachField(c, v, where, false, [&](std::string_view key, od::value& child) {
    if (key == "gpu") return ReadIntField(c, child, where + ".gpu", 0, kMaxGpuIndex, &mig->gpu);
    if (key == "start") return ReadIntField(c, child, where + ".start", 0, 7, &mig->start);
    if (key == "uuid") return ReadString(c, child, where + ".uuid", &mig->uuid);
    if (key == "profile") return ReadString(c, child, where + ".profile", &mig->profile);
    return UnknownKey(c, where, key);
  });
  if (ok && mig->profile.empty()) return Fail(c, where + ".profile: expected a MIG profile name");
  return ok;
}

}  // namespace linkfit::kube::json
