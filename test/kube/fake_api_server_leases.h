#pragma once

// FakeLeases: coordination.k8s.io/v1 Leases for the fake API server (fake_api_server.h), as
// upstream's generic registry serves them: create (201; 409 AlreadyExists), get, update (PUT) and
// merge patch with metadata.resourceVersion as a precondition (409 Conflict on a mismatch), a
// patch that changes nothing keeps its resourceVersion, delete. Revisions come from the store's
// one counter. No watches of leases.
//
// Thread-safety: every method may be called concurrently.

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/fake_api_server_internal.h"

namespace linkfit::testing::fake_internal {

class FakeLeases {
 public:
  explicit FakeLeases(FakeStore& store) : store_(store) {}

  Reply Create(const std::string& namespace_name, const json& lease);
  Reply Get(const std::string& namespace_name, const std::string& name) const;
  Reply Update(const std::string& namespace_name, const std::string& name, const json& lease);
  Reply Patch(const std::string& namespace_name, const std::string& name, const json& patch);
  Reply Delete(const std::string& namespace_name, const std::string& name);

  std::optional<json> Find(const std::string& namespace_name, const std::string& name) const;
  std::vector<json> All() const;

 private:
  // Stores `lease` (validated) over `current` (null: a create). REQUIRES: mutex_ held.
  Reply StoreLocked(const std::string& key, json lease, const json* current, int status);

  FakeStore& store_;
  mutable std::mutex mutex_;
  std::map<std::string, json> leases_;  // GUARDED_BY(mutex_), key "namespace/name"
};

}  // namespace linkfit::testing::fake_internal
