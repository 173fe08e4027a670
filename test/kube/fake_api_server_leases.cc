#include "kube/fake_api_server_leases.h"

namespace linkfit::testing::fake_internal {
namespace {

const char* kResource = "leases.coordination.k8s.io";

json Details(const std::string& name) {
  return {{"name", name}, {"group", "coordination.k8s.io"}, {"kind", "leases"}};
}

std::string WithKind(const json& lease) {
  json out = lease;
  out["kind"] = "Lease";
  out["apiVersion"] = "coordination.k8s.io/v1";
  return out.dump();
}

Reply NotFound(const std::string& name) {
  return StatusReply(404, "NotFound",
                     std::string(kResource) + " \"" + name + "\" not found", Details(name));
}

Reply Modified(const std::string& name) {
  return StatusReply(409, "Conflict",
                     "Operation cannot be fulfilled on " + std::string(kResource) + " \"" + name +
                         "\": the object has been modified; please apply your changes to the "
                         "latest version and try again",
                     Details(name));
}

// The resourceVersion precondition of an update or patch: absent or null means none.
bool VersionMatches(const json& object, const json& current) {
  if (!object.contains("metadata") || !object["metadata"].is_object()) return true;
  const json& metadata = object["metadata"];
  if (!metadata.contains("resourceVersion") || metadata["resourceVersion"].is_null()) return true;
  const json& wanted = metadata["resourceVersion"];
  return wanted.is_string() && !wanted.get<std::string>().empty()
             ? wanted.get<std::string>() == current["metadata"].value("resourceVersion", "")
             : wanted.is_string();  // "" means unconditional, as upstream
}

}  // namespace

Reply FakeLeases::StoreLocked(const std::string& key, json lease, const json* current,
                              int status) {
  const std::string name = lease["metadata"].value("name", "");
  if (lease.contains("spec") && !lease["spec"].is_null()) {
    const json& spec = lease["spec"];
    if (!spec.is_object()) return StatusReply(400, "BadRequest", "spec must be an object");
    if (spec.contains("leaseDurationSeconds") && !spec["leaseDurationSeconds"].is_null() &&
        (!spec["leaseDurationSeconds"].is_number_integer() ||
         spec["leaseDurationSeconds"].get<std::int64_t>() <= 0)) {
      return StatusReply(422, "Invalid",
                         "Lease.coordination.k8s.io \"" + name +
                             "\" is invalid: spec.leaseDurationSeconds: Invalid value: must be "
                             "greater than 0",
                         Details(name));
    }
  }
  lease.erase("kind");
  lease.erase("apiVersion");
  if (current != nullptr) {
    for (const char* field : {"uid", "creationTimestamp", "resourceVersion", "namespace"}) {
      lease["metadata"][field] = (*current)["metadata"][field];
    }
    if (lease == *current) return Reply{status, WithKind(*current)};  // no new revision
  } else {
    lease["metadata"]["uid"] = store_.NewUid();
    lease["metadata"]["creationTimestamp"] = NowRfc3339();
  }
  lease["metadata"]["resourceVersion"] = std::to_string(store_.NextResourceVersion());
  leases_[key] = lease;
  return Reply{status, WithKind(lease)};
}

Reply FakeLeases::Create(const std::string& namespace_name, const json& body) {
  if (!body.is_object()) return StatusReply(400, "BadRequest", "a Lease must be a JSON object");
  json lease = body;
  if (!lease.contains("metadata") || !lease["metadata"].is_object() ||
      !lease["metadata"].contains("name") || !lease["metadata"]["name"].is_string() ||
      lease["metadata"]["name"].get<std::string>().empty()) {
    return StatusReply(422, "Invalid",
                       "Lease.coordination.k8s.io \"\" is invalid: metadata.name: Required value: "
                       "name or generateName is required");
  }
  json& metadata = lease["metadata"];
  if (metadata.contains("namespace") && metadata["namespace"] != namespace_name) {
    return StatusReply(400, "BadRequest",
                       "the namespace of the provided object does not match the namespace sent "
                       "on the request");
  }
  metadata["namespace"] = namespace_name;
  metadata.erase("resourceVersion");
  const std::string name = metadata["name"];
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string key = namespace_name + "/" + name;
  if (leases_.count(key) != 0) {
    return StatusReply(409, "AlreadyExists",
                       std::string(kResource) + " \"" + name + "\" already exists",
                       Details(name));
  }
  return StoreLocked(key, std::move(lease), nullptr, 201);
}

Reply FakeLeases::Get(const std::string& namespace_name, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = leases_.find(namespace_name + "/" + name);
  if (it == leases_.end()) return NotFound(name);
  return Reply{200, WithKind(it->second)};
}

Reply FakeLeases::Update(const std::string& namespace_name, const std::string& name,
                         const json& body) {
  if (!body.is_object() || !body.contains("metadata") || !body["metadata"].is_object()) {
    return StatusReply(400, "BadRequest", "a Lease must be a JSON object with metadata");
  }
  if (body["metadata"].value("name", "") != name) {
    return StatusReply(400, "BadRequest",
                       "the name of the object does not match the name on the URL");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string key = namespace_name + "/" + name;
  const auto it = leases_.find(key);
  if (it == leases_.end()) return NotFound(name);
  if (!VersionMatches(body, it->second)) return Modified(name);
  const json current = it->second;
  return StoreLocked(key, body, &current, 200);
}

Reply FakeLeases::Patch(const std::string& namespace_name, const std::string& name,
                        const json& patch) {
  if (!patch.is_object()) {
    return StatusReply(400, "BadRequest", "a merge patch must be a JSON object");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string key = namespace_name + "/" + name;
  const auto it = leases_.find(key);
  if (it == leases_.end()) return NotFound(name);
  if (!VersionMatches(patch, it->second)) return Modified(name);
  json patched = it->second;
  patched.merge_patch(patch);
  if (!patched.is_object() || !patched["metadata"].is_object() ||
      patched["metadata"].value("name", "") != name) {
    return StatusReply(400, "BadRequest",
                       "the name of the object does not match the name on the URL");
  }
  const json current = it->second;
  return StoreLocked(key, std::move(patched), &current, 200);
}

Reply FakeLeases::Delete(const std::string& namespace_name, const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = leases_.find(namespace_name + "/" + name);
  if (it == leases_.end()) return NotFound(name);
  json last = it->second;
  leases_.erase(it);
  store_.NextResourceVersion();
  return Reply{200, WithKind(last)};
}

std::optional<json> FakeLeases::Find(const std::string& namespace_name,
                                     const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = leases_.find(namespace_name + "/" + name);
  if (it == leases_.end()) return std::nullopt;
  return it->second;
}

std::vector<json> FakeLeases::All() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<json> all;
  for (const auto& [key, lease] : leases_) all.push_back(lease);
  return all;
}

}  // namespace linkfit::testing::fake_internal
