#pragma once

// FakeLeases: coordination.k8s.io/v1 Leases for the fake API server (fake_api_server.h), served
// as upstream's generic registry serves them with the lease strategy (pkg/registry/coordination/
// lease: AllowCreateOnUpdate true, AllowUnconditionalUpdate false). Each method takes the request
// as sent and returns the HTTP answer.
//
//   decode      the body as upstream decodes it into a v1.Lease and encodes it back: unknown
//               fields dropped, null and empty optional fields absent, acquireTime / renewTime
//               parsed as MicroTime (RFC 3339, exactly six fractional digits) and written in UTC;
//               a value of the wrong type answers 400.
//   Create      POST: 201; 400 namespace mismatch; 422 invalid (validation comes first); 500 a
//               resourceVersion set; 409 AlreadyExists. generateName is honoured.
//   Update      PUT: 400 namespace / name mismatch; 409 uid precondition; an absent lease is
//               created (201); 422 no resourceVersion; 409 Conflict on a stale one; 200.
//   Patch       merge patch (RFC 7386; other media types 415): 404 absent; then as Update, the
//               patched metadata.resourceVersion being the precondition (the current one when the
//               patch names none); 422 a changed uid.
//   Delete      200 with a Status (Success), as the registry answers for a kind without
//               ReturnDeletedObject; DeleteOptions.preconditions (uid, resourceVersion) -> 409.
//   no-op       an update or patch that leaves the lease as it is answers 200 and takes no
//               resourceVersion.
//
// Every write takes the next revision of the store's one counter (FakeStore). No lists, no
// watches.
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

  Reply Create(const std::string& namespace_name, const std::string& body);
  Reply Get(const std::string& namespace_name, const std::string& name) const;
  Reply Update(const std::string& namespace_name, const std::string& name, const std::string& body);
  Reply Patch(const std::string& namespace_name, const std::string& name,
              const std::string& content_type, const std::string& body);
  Reply Delete(const std::string& namespace_name, const std::string& name, const std::string& body);

  // Leases as stored (without kind and apiVersion); All() sorted by "namespace/name".
  std::optional<json> Find(const std::string& namespace_name, const std::string& name) const;
  std::vector<json> All() const;

 private:
  // Takes the next revision for `lease` and stores it under `key`. REQUIRES: mutex_ held.
  json CommitLocked(const std::string& key, json lease);
  // The update half of Update and Patch: `lease` (decoded, name and namespace checked) replaces
  // `current`. REQUIRES: mutex_ held.
  Reply ReplaceLocked(const std::string& key, json lease, const json& current);
  // Returns a name that no lease of the namespace has: `prefix` and five random characters.
  // REQUIRES: mutex_ held.
  std::string GenerateNameLocked(const std::string& namespace_name, const std::string& prefix);

  FakeStore& store_;
  mutable std::mutex mutex_;
  std::map<std::string, json> leases_;  // GUARDED_BY(mutex_), key "namespace/name"
};

}  // namespace linkfit::testing::fake_internal
