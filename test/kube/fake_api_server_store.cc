#include "kube/fake_api_server_internal.h"

#include <algorithm>
#include <array>
#include <utility>

namespace linkfit::testing::fake_internal {
namespace {

using Clock = std::chrono::steady_clock;

std::string ResourceName(Kind kind) { return kind == Kind::kPod ? "pods" : "nodes"; }

std::string ListKindName(Kind kind) { return kind == Kind::kPod ? "PodList" : "NodeList"; }

std::string NotFoundMessage(Kind kind, const std::string& name) {
  return ResourceName(kind) + " \"" + name + "\" not found";
}

std::string ConflictMessage(const std::string& resource, const std::string& name,
                            const std::string& detail) {
  return "Operation cannot be fulfilled on " + resource + " \"" + name + "\": " + detail;
}

json Details(const std::string& kind, const std::string& name) {
  return json{{"name", name}, {"kind", kind}};
}

std::optional<uint64_t> ParseRevision(const std::string& text) {
  if (text.empty() || text.size() > 19 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoull(text);
}

constexpr char kExpiredContinue[] =
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter.";

}  // namespace

FakeStore::FakeStore(uint64_t initial_resource_version, size_t history_limit, size_t max_snapshots)
    : history_limit_(history_limit),
      max_snapshots_(max_snapshots),
      resource_version_(initial_resource_version),
      compacted_(initial_resource_version),
      random_(std::random_device{}()) {}

std::map<std::string, json>& FakeStore::Objects(Kind kind) {
  return kind == Kind::kPod ? pods_ : nodes_;
}

const std::map<std::string, json>& FakeStore::Objects(Kind kind) const {
  return kind == Kind::kPod ? pods_ : nodes_;
}

std::string FakeStore::NewUid() {
  std::lock_guard<std::mutex> lock(mutex_);
  return NewUidLocked();
}

std::string FakeStore::NewUidLocked() {
  static constexpr char kHex[] = "0123456789abcdef";
  const uint64_t high = random_();
  const uint64_t low = random_();
  std::string hex;
  for (int shift = 60; shift >= 0; shift -= 4) hex += kHex[(high >> shift) & 0xf];
  for (int shift = 60; shift >= 0; shift -= 4) hex += kHex[(low >> shift) & 0xf];
  hex[12] = '4';                                           // version 4
  hex[16] = kHex[8 + (static_cast<size_t>(hex[16]) & 3)];  // variant 10xx
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20, 12);
}

Result<std::string> FakeStore::KeyOfLocked(Kind kind, json& object) {
  if (!object.is_object()) return MakeError(std::string(KindName(kind)) + " is not an object");
  object.erase("kind");
  object.erase("apiVersion");
  json& metadata = object["metadata"];
  if (!metadata.is_object()) return MakeError("metadata is not an object");
  if (!metadata.contains("name") || !metadata["name"].is_string() ||
      metadata["name"].get<std::string>().empty()) {
    return MakeError(std::string(KindName(kind)) + " has no metadata.name");
  }
  const std::string name = metadata["name"].get<std::string>();
  if (kind == Kind::kNode) return name;
  if (!metadata.contains("namespace") || !metadata["namespace"].is_string() ||
      metadata["namespace"].get<std::string>().empty()) {
    metadata["namespace"] = "default";
  }
  return metadata["namespace"].get<std::string>() + "/" + name;
}

json FakeStore::CommitLocked(Kind kind, const std::string& key, const std::string& type,
                             json object, json previous) {
  const uint64_t revision = ++resource_version_;
  object["metadata"]["resourceVersion"] = std::to_string(revision);
  if (type == "DELETED") {
    Objects(kind).erase(key);
  } else {
    Objects(kind)[key] = object;
  }
  json stored = object;
  history_.push_back(Event{revision, kind, type, std::move(object), std::move(previous)});
  while (history_.size() > history_limit_) {
    compacted_ = history_.front().resource_version;
    history_.pop_front();
  }
  DropExpiredSnapshotsLocked();
  changed_.notify_all();
  return stored;
}

void FakeStore::DropExpiredSnapshotsLocked() {
  for (auto it = snapshots_.begin(); it != snapshots_.end();) {
    it = it->second.resource_version < compacted_ ? snapshots_.erase(it) : std::next(it);
  }
  while (snapshots_.size() > max_snapshots_) snapshots_.erase(snapshots_.begin());
}

Result<json> FakeStore::Create(Kind kind, json object) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string key;
  LINKFIT_ASSIGN_OR_RETURN(key, KeyOfLocked(kind, object));
  if (Objects(kind).count(key)) {
    return MakeError(std::string(KindName(kind)) + " " + key + " already exists");
  }
  json& metadata = object["metadata"];
  if (!metadata.contains("uid")) metadata["uid"] = NewUidLocked();
  if (!metadata.contains("creationTimestamp")) metadata["creationTimestamp"] = NowRfc3339();
  if (kind == Kind::kPod && !object["status"].contains("phase")) {
    object["status"]["phase"] = "Pending";
  }
  const json stored = CommitLocked(kind, key, "ADDED", std::move(object), nullptr);
  return stored;
}

Result<json> FakeStore::Replace(Kind kind, json object) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string key;
  LINKFIT_ASSIGN_OR_RETURN(key, KeyOfLocked(kind, object));
  auto it = Objects(kind).find(key);
  if (it == Objects(kind).end()) {
    return MakeError(std::string(KindName(kind)) + " " + key + " does not exist");
  }
  const json& old = it->second;
  json& metadata = object["metadata"];
  for (const char* field : {"uid", "creationTimestamp"}) {
    if (!metadata.contains(field) && old["metadata"].contains(field)) {
      metadata[field] = old["metadata"][field];
    }
  }
  metadata["resourceVersion"] = old["metadata"]["resourceVersion"];
  if (object == old) return old;  // a no-op update: no event, no new revision
  json previous = old;
  const json stored = CommitLocked(kind, key, "MODIFIED", std::move(object), std::move(previous));
  return stored;
}

Result<json> FakeStore::Mutate(Kind kind, const std::string& key,
                               const std::function<void(json&)>& mutate) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = Objects(kind).find(key);
  if (it == Objects(kind).end()) {
    return MakeError(std::string(KindName(kind)) + " " + key + " does not exist");
  }
  json object = it->second;
  mutate(object);
  if (object == it->second) return it->second;
  json previous = it->second;
  const json stored = CommitLocked(kind, key, "MODIFIED", std::move(object), std::move(previous));
  return stored;
}

Result<json> FakeStore::Delete(Kind kind, const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = Objects(kind).find(key);
  if (it == Objects(kind).end()) {
    return MakeError(std::string(KindName(kind)) + " " + key + " does not exist");
  }
  json last = it->second;
  json previous = it->second;
  const json stored = CommitLocked(kind, key, "DELETED", std::move(last), std::move(previous));
  return stored;
}

std::optional<json> FakeStore::Get(Kind kind, const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = Objects(kind).find(key);
  if (it == Objects(kind).end()) return std::nullopt;
  return it->second;
}

std::vector<json> FakeStore::All(Kind kind) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<json> all;
  for (const auto& [key, object] : Objects(kind)) all.push_back(object);
  return all;
}

uint64_t FakeStore::CurrentResourceVersion() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return resource_version_;
}

void FakeStore::Compact() {
  std::lock_guard<std::mutex> lock(mutex_);
  compacted_ = resource_version_;
  history_.clear();
  snapshots_.clear();
  changed_.notify_all();
}

uint64_t FakeStore::NextResourceVersion() {
  std::lock_guard<std::mutex> lock(mutex_);
  return ++resource_version_;
}

Reply FakeStore::List(Kind kind, const ListRequest& request) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool paginate = request.limit > 0 && request.resource_version != "0";
  uint64_t snapshot_id = 0;
  size_t offset = 0;
  uint64_t revision = resource_version_;
  std::vector<json> current;
  const std::vector<json>* items = nullptr;
  if (!request.continue_token.empty()) {
    std::optional<std::string> decoded = Base64Decode(request.continue_token);
    json token = decoded ? json::parse(*decoded, nullptr, false) : json();
    if (!token.is_object() || !token["id"].is_number_unsigned() ||
        !token["offset"].is_number_unsigned()) {
      return StatusReply(400, "BadRequest",
                         "continue key is not valid: incorrect encoded start "
                         "resourceVersion (version meta.k8s.io/v1)");
    }
    snapshot_id = token["id"].get<uint64_t>();
    offset = token["offset"].get<size_t>();
    auto it = snapshots_.find(snapshot_id);
    if (it == snapshots_.end() || it->second.resource_version < compacted_) {
      return StatusReply(410, "Expired", kExpiredContinue);
    }
    if (it->second.kind != kind) {
      return StatusReply(400, "BadRequest", "continue token was issued for another resource");
    }
    revision = it->second.resource_version;
    items = &it->second.items;
  } else {
    for (const auto& [key, object] : Objects(kind)) current.push_back(object);
    items = &current;
  }

  std::string page;
  size_t index = offset;
  int64_t count = 0;
  for (; index < items->size(); ++index) {
    if (paginate && count == request.limit) break;
    if (!request.selector.Matches((*items)[index])) continue;
    if (count > 0) page += ",";
    page += (*items)[index].dump();
    ++count;
  }
  int64_t remaining = 0;
  for (size_t rest = index; rest < items->size(); ++rest) {
    if (request.selector.Matches((*items)[rest])) ++remaining;
  }

  json metadata = {{"resourceVersion", std::to_string(revision)}};
  if (paginate && remaining > 0) {
    if (snapshot_id == 0) {
      // The first page of a paginated list: keep what it saw, so that the following pages show
      // the same revision (etcd reads them at the list's revision).
      snapshot_id = next_snapshot_id_++;
      snapshots_[snapshot_id] = Snapshot{revision, kind, std::move(current)};
      DropExpiredSnapshotsLocked();
    }
    const json token = {
        {"v", "linkfit.fake/v1"}, {"rv", revision}, {"id", snapshot_id}, {"offset", index}};
    metadata["continue"] = Base64Encode(token.dump(), true);
    if (!request.selector.HasTerms()) metadata["remainingItemCount"] = remaining;
  }
  std::string body = R"({"kind":")" + ListKindName(kind) + R"(","apiVersion":"v1","metadata":)" +
                     metadata.dump() + R"(,"items":[)" + page + "]}";
  return Reply{200, std::move(body)};
}

Reply FakeStore::GetOne(Kind kind, const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = Objects(kind).find(key);
  const std::string name = key.substr(key.find('/') + 1);
  if (it == Objects(kind).end()) {
    return StatusReply(404, "NotFound", NotFoundMessage(kind, name),
                       Details(ResourceName(kind), name));
  }
  return Reply{200, WithKind(kind, it->second)};
}

Reply FakeStore::Bind(const std::string& namespace_name, const std::string& name,
                      const json& binding) {
  // BindingREST.Create and setPodHostAndAnnotations (pkg/registry/core/pod/storage/storage.go).
  if (!binding.is_object() || !binding.contains("metadata") || !binding["metadata"].is_object()) {
    return StatusReply(400, "BadRequest", "the body is not a Binding object");
  }
  const json& metadata = binding["metadata"];
  const std::string body_name = metadata.value("name", "");
  if (body_name != name) {
    return StatusReply(400, "BadRequest", "name in URL does not match name in Binding object");
  }
  const std::string body_namespace = metadata.value("namespace", "");
  if (!body_namespace.empty() && body_namespace != namespace_name) {
    return StatusReply(400, "BadRequest",
                       "the namespace of the provided object does not match the namespace sent "
                       "on the request");
  }
  const json target = binding.value("target", json::object());
  const std::string node = target.is_object() ? target.value("name", "") : "";
  const std::string target_kind = target.is_object() ? target.value("kind", "") : "";
  if (node.empty() || (!target_kind.empty() && target_kind != "Node")) {
    return StatusReply(422, "Invalid",
                       "Binding \"" + name + "\" is invalid: target: must name a Node",
                       Details("Binding", name));
  }
  json annotations = metadata.value("annotations", json::object());
  if (!annotations.is_object() ||
      !std::all_of(annotations.begin(), annotations.end(),
                   [](const json& value) { return value.is_string(); })) {
    return StatusReply(400, "BadRequest", "metadata.annotations must map strings to strings");
  }

  std::lock_guard<std::mutex> lock(mutex_);
  const std::string key = namespace_name + "/" + name;
  auto it = pods_.find(key);
  if (it == pods_.end()) {
    return StatusReply(404, "NotFound", NotFoundMessage(Kind::kPod, name), Details("pods", name));
  }
  const json& pod = it->second;
  const std::string uid = metadata.value("uid", "");
  const std::string pod_uid = pod["metadata"].value("uid", "");
  if (!uid.empty() && uid != pod_uid) {
    return StatusReply(
        409, "Conflict",
        ConflictMessage("pods", name,
                        "StorageError: invalid object, Code: 4, Key: /registry/pods/" + key +
                            ", ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID "
                            "in precondition: " +
                            uid + ", UID in object meta: " + pod_uid),
        Details("pods", name));
  }
  const std::string resource_version = metadata.value("resourceVersion", "");
  const std::string pod_resource_version = pod["metadata"].value("resourceVersion", "");
  if (!resource_version.empty() && resource_version != pod_resource_version) {
    return StatusReply(
        409, "Conflict",
        ConflictMessage("pods", name,
                        "StorageError: invalid object, Code: 4, Key: /registry/pods/" + key +
                            ", ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
                            "ResourceVersion in precondition: " +
                            resource_version +
                            ", ResourceVersion in object meta: " + pod_resource_version),
        Details("pods", name));
  }
  std::string refusal;
  const json spec = pod.value("spec", json::object());
  const std::string assigned = spec.value("nodeName", "");
  if (pod["metadata"].contains("deletionTimestamp") &&
      !pod["metadata"]["deletionTimestamp"].is_null()) {
    refusal = "pod " + name + " is being deleted, cannot be assigned to a host";
  } else if (!assigned.empty()) {
    refusal = "pod " + name + " is already assigned to node \"" + assigned + "\"";
  } else if (spec.contains("schedulingGates") && spec["schedulingGates"].is_array() &&
             !spec["schedulingGates"].empty()) {
    refusal = "pod " + name + " has non-empty .spec.schedulingGates";
  }
  if (!refusal.empty()) {
    return StatusReply(409, "Conflict", ConflictMessage("pods/binding", name, refusal),
                       Details("pods/binding", name));
  }

  // Node name, annotations and the PodScheduled condition land in one update (one event).
  json updated = pod;
  updated["spec"]["nodeName"] = node;
  json& pod_annotations = updated["metadata"]["annotations"];
  if (!pod_annotations.is_object()) pod_annotations = json::object();
  for (const auto& [annotation, value] : annotations.items()) pod_annotations[annotation] = value;
  json& conditions = updated["status"]["conditions"];
  if (!conditions.is_array()) conditions = json::array();
  json* scheduled = nullptr;
  for (json& condition : conditions) {
    if (condition.value("type", "") == "PodScheduled") scheduled = &condition;
  }
  if (scheduled == nullptr) {
    conditions.push_back({{"type", "PodScheduled"}});
    scheduled = &conditions.back();
  }
  if ((*scheduled).value("status", "") != "True") {
    (*scheduled)["status"] = "True";
    (*scheduled)["lastProbeTime"] = nullptr;
    (*scheduled)["lastTransitionTime"] = NowRfc3339();
    (*scheduled).erase("reason");
    (*scheduled).erase("message");
  }
  json previous = pod;
  CommitLocked(Kind::kPod, key, "MODIFIED", std::move(updated), std::move(previous));
  nlohmann::ordered_json success;
  success["kind"] = "Status";
  success["apiVersion"] = "v1";
  success["metadata"] = nlohmann::ordered_json::object();
  success["status"] = "Success";
  success["code"] = 201;
  return Reply{201, success.dump()};
}

Reply FakeStore::PatchNode(const std::string& name, const json& patch) {
  if (!patch.is_object()) {
    return StatusReply(400, "BadRequest", "a merge patch must be a JSON object");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return StatusReply(404, "NotFound", NotFoundMessage(Kind::kNode, name), Details("nodes", name));
  }
  const json& node = it->second;
  const std::string current_version = node["metadata"].value("resourceVersion", "");
  if (patch.contains("metadata") && patch["metadata"].is_object() &&
      patch["metadata"].contains("resourceVersion")) {
    const json& wanted = patch["metadata"]["resourceVersion"];
    if (!wanted.is_null() &&
        (!wanted.is_string() || wanted.get<std::string>() != current_version)) {
      return StatusReply(409, "Conflict",
                         ConflictMessage("nodes", name,
                                         "the object has been modified; please apply your "
                                         "changes to the latest version and try again"),
                         Details("nodes", name));
    }
  }
  json patched = node;
  patched.merge_patch(patch);
  if (!patched.is_object() || !patched["metadata"].is_object() ||
      patched["metadata"].value("name", "") != name) {
    return StatusReply(400, "BadRequest",
                       "the name of the object does not match the name on the URL");
  }
  // Fields the server owns are not the patch's to change.
  for (const char* field : {"uid", "creationTimestamp", "resourceVersion"}) {
    if (node["metadata"].contains(field)) {
      patched["metadata"][field] = node["metadata"][field];
    } else {
      patched["metadata"].erase(field);
    }
  }
  patched.erase("kind");
  patched.erase("apiVersion");
  if (patched == node) return Reply{200, WithKind(Kind::kNode, node)};  // no event, no revision
  json previous = node;
  const json stored =
      CommitLocked(Kind::kNode, name, "MODIFIED", std::move(patched), std::move(previous));
  return Reply{200, WithKind(Kind::kNode, stored)};
}

std::string FakeStore::EventLine(const std::string& type, Kind kind, const json& object) const {
  return R"({"type":")" + type + R"(","object":)" + WithKind(kind, object) + "}\n";
}

std::string FakeStore::BookmarkLine(Kind kind, uint64_t revision) const {
  const json object = {
      {"metadata",
       {{"resourceVersion", std::to_string(revision)}, {"creationTimestamp", nullptr}}}};
  return EventLine("BOOKMARK", kind, object);
}

std::string FakeStore::ExpiredLine(uint64_t requested) const {
  // The watch cache's message: "too old resource version: %d (%d)" with the oldest revision it
  // can still serve from, minus one (the compaction point).
  return R"({"type":"ERROR","object":)" +
         StatusBody(410, "Expired",
                    "too old resource version: " + std::to_string(requested) + " (" +
                        std::to_string(compacted_) + ")") +
         "}\n";
}

Result<WatchBatch> FakeStore::StartWatch(const std::string& resource_version, WatchCursor& cursor) {
  std::lock_guard<std::mutex> lock(mutex_);
  cursor.cut_generation = cut_generation_;
  cursor.next_bookmark = Clock::now() + cursor.bookmark_interval;
  WatchBatch batch;
  if (resource_version.empty() || resource_version == "0") {
    // "Any" / "most recent": the current state as synthetic ADDED events, then changes.
    for (const auto& [key, object] : Objects(cursor.kind)) {
      if (cursor.selector.Matches(object)) {
        batch.lines += EventLine("ADDED", cursor.kind, object);
      }
    }
    cursor.resource_version = resource_version_;
    return batch;
  }
  std::optional<uint64_t> requested = ParseRevision(resource_version);
  if (!requested) {
    return MakeError("resourceVersion: Invalid value: \"" + resource_version +
                     "\": must be a valid resource version");
  }
  if (*requested < compacted_) {
    batch.lines = ExpiredLine(*requested);
    batch.end = true;
    return batch;
  }
  cursor.resource_version = *requested;
  return batch;
}

WatchBatch FakeStore::WaitWatch(WatchCursor& cursor, std::chrono::milliseconds max_wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  Clock::time_point wake = std::min(Clock::now() + max_wait, cursor.deadline);
  if (cursor.bookmarks) wake = std::min(wake, cursor.next_bookmark);
  while (true) {
    WatchBatch batch;
    if (shutting_down_ || cut_generation_ != cursor.cut_generation) {
      batch.abort = true;
      return batch;
    }
    if (cursor.resource_version < compacted_ && resource_version_ > cursor.resource_version) {
      // Events this stream has not seen were forgotten (a slow watcher, or Compact()).
      batch.lines = ExpiredLine(cursor.resource_version);
      batch.end = true;
      return batch;
    }
    auto first = std::upper_bound(
        history_.begin(), history_.end(), cursor.resource_version,
        [](uint64_t revision, const Event& event) { return revision < event.resource_version; });
    for (auto it = first; it != history_.end(); ++it) {
      cursor.resource_version = it->resource_version;
      if (it->kind != cursor.kind) continue;
      // cacheWatcher.convertToWatchEvent: a selector turns transitions into ADDED / DELETED.
      const bool current_passes = it->type != "DELETED" && cursor.selector.Matches(it->object);
      const bool previous_passes = !it->previous.is_null() && cursor.selector.Matches(it->previous);
      if (current_passes && !previous_passes) {
        batch.lines += EventLine("ADDED", cursor.kind, it->object);
      } else if (current_passes) {
        batch.lines += EventLine("MODIFIED", cursor.kind, it->object);
      } else if (previous_passes) {
        json last = it->previous;
        last["metadata"]["resourceVersion"] = std::to_string(it->resource_version);
        batch.lines += EventLine("DELETED", cursor.kind, last);
      }
    }
    if (!batch.lines.empty()) return batch;
    const Clock::time_point now = Clock::now();
    if (now >= cursor.deadline) {
      batch.end = true;
      return batch;
    }
    if (cursor.bookmarks && now >= cursor.next_bookmark) {
      // Every event up to resource_version_ has been passed above, so it is a safe resume point.
      cursor.resource_version = resource_version_;
      cursor.next_bookmark = now + cursor.bookmark_interval;
      batch.lines = BookmarkLine(cursor.kind, resource_version_);
      return batch;
    }
    if (now >= wake) return batch;
    changed_.wait_until(lock, wake);
  }
}

void FakeStore::CutWatches() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++cut_generation_;
  changed_.notify_all();
}

void FakeStore::Shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  shutting_down_ = true;
  changed_.notify_all();
}

}  // namespace linkfit::testing::fake_internal
