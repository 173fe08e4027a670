// The standalone state file: every allocation as an allocation record (kube/annotations.h), read
// back at start-up, rewritten atomically after every bind and release.

#include <filesystem>
#include <fstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "linkfit/common/files.h"
#include "linkfit/common/log.h"
#include "linkfit/common/mutex.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/model/allocation.h"
#include "linkfit/standalone/standalone.h"

namespace linkfit::standalone {
namespace {

namespace fs = std::filesystem;

}  // namespace

Result<int> LoadStateFile(const std::string& path, state::ClusterCache& cache) {
  std::error_code missing;
  if (!fs::exists(path, missing)) {
    if (missing) return MakeError(path + ": " + missing.message());
    return 0;
  }
  std::string text;
  LINKFIT_ASSIGN_OR_RETURN(text, ReadFile(path));
  const nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return MakeError(path + ": expected a JSON object {\"allocations\":[...]}");
  }
  for (const auto& [key, value] : root.items()) {
    if (key != "allocations") return MakeError(path + ": $." + key + ": unknown key");
  }
  const nlohmann::json& list =
      root.contains("allocations") ? root["allocations"] : nlohmann::json();
  if (!list.is_null() && !list.is_array())
    return MakeError(path + ": allocations: expected a list");
  // The state file holds every allocation of the previous run, the cluster file's included and
  // those released since left out, so it replaces the cluster file's allocations.
  const std::vector<state::Assignment> seeded = cache.BoundAssignments(true);
  for (const state::Assignment& a : seeded) cache.Remove(a.pod_uid);
  int count = 0;
  // One snapshot serves every record: adding pods changes no node's model (NodeInfo).
  const state::SnapshotPtr snapshot = cache.Snapshot();
  for (std::size_t i = 0; list.is_array() && i < list.size(); ++i) {
    const std::string where = path + ": allocations[" + std::to_string(i) + "]";
    auto record = kube::DecodeAllocationRecord(list[i].dump());
    if (!record) return WithContext(record.error(), where);
    const state::NodeState* node = snapshot->Find(record->node);
    if (node == nullptr) return MakeError(where + ".node: unknown node " + record->node);
    auto assignment = model::AssignmentOf(*record, node->info());
    if (!assignment) return WithContext(assignment.error(), where);
    if (auto added = cache.AddBound(*assignment); !added) {
      return WithContext(added.error(), where);
    }
    ++count;
  }
  for (const state::Assignment& a : seeded) {
    if (!cache.Find(a.pod_uid)) {
      log::Warning(path + ": allocation of " + a.PodKey() + " (" + a.pod_uid +
                   ") from the cluster file is not in the state file (released, or added "
                   "after the state file was written); the state file wins");
    }
  }
  return count;
}

std::string AllocationsToJson(const std::vector<state::Assignment>& assignments,
                              const state::Snapshot& snapshot) {
  std::string out = "{\"allocations\":[";
  bool first = true;
  for (const state::Assignment& a : assignments) {
    const state::NodeState* node = snapshot.Find(a.node);
    if (node == nullptr) continue;  // the node left; its pods went with it
    kube::AllocationRecord record = model::RecordOf(a, node->info());
    record.cpu_milli = a.cpu_milli;
    record.memory_bytes = a.memory_bytes;
    out += first ? "\n " : ",\n ";
    out += kube::EncodeAllocationRecord(record);
    first = false;
  }
  out += "\n]}";
  return out;
}

StateFileBinder::StateFileBinder(std::string path, state::ClusterCache& cache)
    : path_(std::move(path)), cache_(cache) {}

Result<void> StateFileBinder::Save() {
  if (path_.empty()) return {};
  MutexLock lock(mutex_);
  // Assumed pods are included: a concurrent bind's assignment must not vanish from the file
  // between its save and its confirmation. A bind whose save fails is forgotten and disappears
  // from the next save.
  const std::vector<state::Assignment> all = cache_.BoundAssignments(/*include_assumed=*/true);
  const std::string text = AllocationsToJson(all, *cache_.Snapshot());
  // Atomic replace: write a temporary file beside the target, flush it, rename over.
  const std::string temporary = path_ + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text << "\n";
    out.flush();
    if (!out.good()) return MakeError("cannot write state file " + temporary);
  }
  std::error_code error;
  fs::rename(temporary, path_, error);
  if (error) return MakeError("cannot replace state file " + path_ + ": " + error.message());
  return {};
}

extender::BindReply StateFileBinder::Bind(const extender::BindRequest& request) {
  if (request.assignment.pod_uid.empty()) return {};  // no devices to record
  if (auto saved = Save(); !saved) return {state::BindEvent::kRefused, saved.error().message};
  return {};
}

void StateFileBinder::Released(const std::string& pod_uid) {
  if (auto saved = Save(); !saved) {
    log::Error("pod " + pod_uid +
               " released but the state file was not updated: " + saved.error().message);
  }
}

}  // namespace linkfit::standalone
