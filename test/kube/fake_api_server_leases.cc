#include "kube/fake_api_server_leases.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>

#include <tl/expected.hpp>

namespace linkfit::testing::fake_internal {
namespace {

constexpr char kGroup[] = "coordination.k8s.io";
constexpr char kApiVersion[] = "coordination.k8s.io/v1";
// What upstream's errors name: the group-qualified resource (NotFound, AlreadyExists, Conflict)
// and the group-qualified kind (Invalid).
constexpr char kQualifiedResource[] = "leases.coordination.k8s.io";
constexpr char kQualifiedKind[] = "Lease.coordination.k8s.io";
constexpr char kOptimisticLock[] =
    "the object has been modified; please apply your changes to the latest version and try again";

// A decoded object, or the reply that refuses the request.
template <typename T>
using Answer = tl::expected<T, Reply>;

std::string Quote(const std::string& text) { return json(text).dump(); }

json ResourceDetails(const std::string& name) {
  return {{"name", name}, {"group", kGroup}, {"kind", "leases"}};
}

Reply BadRequest(const std::string& message) { return StatusReply(400, "BadRequest", message); }

Reply NotFound(const std::string& name) {
  return StatusReply(404, "NotFound",
                     std::string(kQualifiedResource) + " " + Quote(name) + " not found",
                     ResourceDetails(name));
}

// apierrors.NewConflict on the lease resource.
Reply Conflict(const std::string& name, const std::string& detail) {
  return StatusReply(409, "Conflict",
                     "Operation cannot be fulfilled on " + std::string(kQualifiedResource) + " " +
                         Quote(name) + ": " + detail,
                     ResourceDetails(name));
}

// A failed storage precondition (etcd3's Preconditions.Check) as InterpretUpdateError reports it.
Reply PreconditionFailed(const std::string& key, const std::string& name,
                         const std::string& detail) {
  return Conflict(name,
                  "StorageError: invalid object, Code: 4, Key: /registry/leases/" + key +
                      ", ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: " + detail);
}

// An error that is no metav1.Status upstream: ErrorToAPIStatus makes it a 500 whose reason is
// StatusReasonUnknown (""), so absent.
Reply UnknownError(const std::string& message) { return StatusReply(500, "", message); }

// One field.Error: `field`, the cause's reason and ErrorBody() ("Invalid value: 0: must be ...").
struct FieldError {
  std::string field;
  std::string reason;
  std::string body;
};

FieldError InvalidValue(const std::string& field, const std::string& value,
                        const std::string& detail) {
  return FieldError{field, "FieldValueInvalid", "Invalid value: " + value + ": " + detail};
}

// apierrors.NewInvalid: 422 `KIND "NAME" is invalid: FIELD: BODY`, several errors in brackets
// (the message names each error once, as ErrorList.ToAggregate; the causes list every one).
Reply Invalid(const std::string& qualified_kind, const std::string& kind, const std::string& name,
              const std::vector<FieldError>& errors) {
  json causes = json::array();
  std::vector<std::string> messages;
  for (const FieldError& error : errors) {
    causes.push_back({{"reason", error.reason}, {"message", error.body}, {"field", error.field}});
    const std::string message = error.field + ": " + error.body;
    if (std::find(messages.begin(), messages.end(), message) == messages.end()) {
      messages.push_back(message);
    }
  }
  std::string joined;
  for (const std::string& message : messages) joined += (joined.empty() ? "" : ", ") + message;
  if (messages.size() > 1) joined = "[" + joined + "]";
  return StatusReply(
      422, "Invalid", qualified_kind + " " + Quote(name) + " is invalid: " + joined,
      {{"name", name}, {"group", kGroup}, {"kind", kind}, {"causes", std::move(causes)}});
}

// The decoder's refusal (the update and create handlers' transformDecodeError).
Reply DecodeError(const std::string& detail) {
  return BadRequest("Lease in version \"v1\" cannot be handled as a Lease: " + detail);
}

// encoding/json's UnmarshalTypeError for `value` in field `path` of Go struct `go_struct`.
Reply TypeError(const json& value, const std::string& go_struct, const std::string& path,
                const std::string& go_type) {
  std::string what = value.is_object()    ? "object"
                     : value.is_array()   ? "array"
                     : value.is_string()  ? "string"
                     : value.is_boolean() ? "bool"
                                          : "number";
  if (value.is_number() && go_type == "int32") what += " " + value.dump();
  return DecodeError("json: cannot unmarshal " + what + " into Go struct field " + go_struct + "." +
                     path + " of type " + go_type);
}

// Returns `body` as upstream decodes it into a v1.Lease and encodes it back (see the header),
// without kind and apiVersion, with "metadata" and "spec" always present.
Answer<json> DecodeLease(const json& body) {
  if (!body.is_object()) {
    return tl::unexpected(BadRequest(
        "the object provided is unrecognized (must be of type Lease): couldn't get version/kind; "
        "json parse error: the body is not a JSON object"));
  }
  for (const char* field : {"apiVersion", "kind"}) {
    if (body.contains(field) && !body[field].is_null() && !body[field].is_string()) {
      return tl::unexpected(TypeError(body[field], "TypeMeta", field, "string"));
    }
  }
  const std::string api_version =
      body.value("apiVersion", json()).is_string() ? body["apiVersion"].get<std::string>() : "";
  const std::string kind =
      body.value("kind", json()).is_string() ? body["kind"].get<std::string>() : "";
  if (!kind.empty() && kind != "Lease") {
    return tl::unexpected(BadRequest(kind +
                                     " in version \"v1\" cannot be handled as a Lease: no "
                                     "kind \"" +
                                     kind + "\" is registered for version \"" + api_version +
                                     "\""));
  }
  if (!api_version.empty() && api_version != kApiVersion) {
    return tl::unexpected(BadRequest("the API version in the data (" + api_version +
                                     ") does not match the expected API version (" + kApiVersion +
                                     ")"));
  }

  json lease = {{"metadata", json::object()}, {"spec", json::object()}};
  const json null;
  const json& metadata = body.contains("metadata") ? body["metadata"] : null;
  if (!metadata.is_null() && !metadata.is_object()) {
    return tl::unexpected(TypeError(metadata, "Lease", "metadata", "v1.ObjectMeta"));
  }
  json& meta_out = lease["metadata"];
  for (const auto& [field, value] : metadata.items()) {
    if (value.is_null()) continue;
    const std::string path = "metadata." + field;
    if (field == "name" || field == "generateName" || field == "namespace" || field == "uid" ||
        field == "resourceVersion" || field == "selfLink" || field == "creationTimestamp" ||
        field == "deletionTimestamp") {
      if (!value.is_string()) return tl::unexpected(TypeError(value, "ObjectMeta", path, "string"));
      // The system sets the rest (WipeObjectMetaSystemFields, BeforeUpdate).
      const bool kept = field == "name" || field == "generateName" || field == "namespace" ||
                        field == "uid" || field == "resourceVersion";
      if (kept && !value.get<std::string>().empty()) meta_out[field] = value;
    } else if (field == "generation") {
      if (!value.is_number_integer()) {
        return tl::unexpected(TypeError(value, "ObjectMeta", path, "int64"));
      }
      if (value != 0) meta_out[field] = value;
    } else if (field == "labels" || field == "annotations") {
      if (!value.is_object()) {
        return tl::unexpected(TypeError(value, "ObjectMeta", path, "map[string]string"));
      }
      json map = json::object();
      for (const auto& [key, entry] : value.items()) {
        if (!entry.is_null() && !entry.is_string()) {
          return tl::unexpected(TypeError(entry, "ObjectMeta", path, "string"));
        }
        map[key] = entry.is_null() ? "" : entry.get<std::string>();
      }
      if (!map.empty()) meta_out[field] = std::move(map);
    } else if (field == "ownerReferences" || field == "finalizers") {
      if (!value.is_array()) {
        return tl::unexpected(TypeError(
            value, "ObjectMeta", path, field == "finalizers" ? "[]string" : "[]v1.OwnerReference"));
      }
      if (!value.empty()) meta_out[field] = value;
    }
    // Anything else (managedFields included) is dropped.
  }

  const json& spec = body.contains("spec") ? body["spec"] : null;
  if (!spec.is_null() && !spec.is_object()) {
    return tl::unexpected(TypeError(spec, "Lease", "spec", "v1.LeaseSpec"));
  }
  json& spec_out = lease["spec"];
  for (const auto& [field, value] : spec.items()) {
    if (value.is_null()) continue;
    const std::string path = "spec." + field;
    if (field == "holderIdentity" || field == "strategy" || field == "preferredHolder") {
      if (!value.is_string()) return tl::unexpected(TypeError(value, "LeaseSpec", path, "string"));
      // strategy and preferredHolder belong to CoordinatedLeaderElection (1.31+, off by
      // default): the strategy clears them.
      if (field == "holderIdentity") spec_out[field] = value;
    } else if (field == "leaseDurationSeconds" || field == "leaseTransitions") {
      const bool fits = value.is_number_unsigned()
                            ? value.get<uint64_t>() <= std::numeric_limits<int32_t>::max()
                            : value.is_number_integer() &&
                                  value.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
                                  value.get<int64_t>() <= std::numeric_limits<int32_t>::max();
      if (!fits) return tl::unexpected(TypeError(value, "LeaseSpec", path, "int32"));
      spec_out[field] = value.get<int64_t>();
    } else if (field == "acquireTime" || field == "renewTime") {
      if (!value.is_string()) {
        return tl::unexpected(TypeError(value, "LeaseSpec", path, "v1.MicroTime"));
      }
      Result<std::string> time = ParseMicroTime(value.get<std::string>());
      if (!time) return tl::unexpected(DecodeError(time.error().message));
      spec_out[field] = *time;
    }
  }
  return lease;
}

Answer<json> DecodeBody(const std::string& body) {
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::exception& error) {
    return tl::unexpected(BadRequest(
        std::string("the object provided is unrecognized (must be of type Lease): couldn't get "
                    "version/kind; json parse error: ") +
        error.what()));
  }
  return DecodeLease(parsed);
}

// Whether `text` is a DNS-1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])? (without a regex, which
// would recurse as deep as the text is long).
bool IsLabel(std::string_view text) {
  const auto alphanumeric = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  return !text.empty() && alphanumeric(text.front()) && alphanumeric(text.back()) &&
         std::all_of(text.begin(), text.end(), [&](char c) { return alphanumeric(c) || c == '-'; });
}

// Whether `text` is a DNS-1123 subdomain: labels joined by dots.
bool IsSubdomain(std::string_view text) {
  for (size_t start = 0;;) {
    const size_t dot = text.find('.', start);
    if (!IsLabel(text.substr(start, dot == std::string_view::npos ? dot : dot - start))) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// The messages of validation.IsDNS1123Subdomain / IsDNS1123Label for `value`.
std::vector<std::string> NameErrors(const std::string& value, bool label) {
  std::vector<std::string> errors;
  const size_t limit = label ? 63 : 253;
  if (value.size() > limit) {
    errors.push_back("must be no more than " + std::to_string(limit) + " characters");
  }
  if (!(label ? IsLabel(value) : IsSubdomain(value))) {
    errors.push_back(
        label ? "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
                "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
                "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
              : "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character "
                "(e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  }
  return errors;
}

// ValidateLeaseSpec.
void ValidateSpec(const json& spec, std::vector<FieldError>& errors) {
  if (spec.contains("leaseDurationSeconds") && spec["leaseDurationSeconds"] <= 0) {
    errors.push_back(InvalidValue("spec.leaseDurationSeconds", spec["leaseDurationSeconds"].dump(),
                                  "must be greater than 0"));
  }
  if (spec.contains("leaseTransitions") && spec["leaseTransitions"] < 0) {
    errors.push_back(InvalidValue("spec.leaseTransitions", spec["leaseTransitions"].dump(),
                                  "must be greater than or equal to 0"));
  }
}

// ValidateLease for a create: ValidateObjectMeta's name and namespace, then the spec.
std::vector<FieldError> ValidateCreate(const json& lease) {
  std::vector<FieldError> errors;
  const json& metadata = lease["metadata"];
  const std::string name = metadata.value("name", "");
  if (name.empty()) {
    errors.push_back(FieldError{"metadata.name", "FieldValueRequired",
                                "Required value: name or generateName is required"});
  }
  for (const std::string& message :
       name.empty() ? std::vector<std::string>() : NameErrors(name, false)) {
    errors.push_back(InvalidValue("metadata.name", Quote(name), message));
  }
  const std::string namespace_name = metadata.value("namespace", "");
  for (const std::string& message : NameErrors(namespace_name, true)) {
    errors.push_back(InvalidValue("metadata.namespace", Quote(namespace_name), message));
  }
  ValidateSpec(lease["spec"], errors);
  return errors;
}

// rest.EnsureObjectNamespaceMatchesRequestNamespace (create and update handlers).
std::optional<Reply> EnsureNamespace(json& metadata, const std::string& namespace_name) {
  const std::string given = metadata.value("namespace", "");
  if (!given.empty() && given != namespace_name) {
    return BadRequest(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  metadata["namespace"] = namespace_name;
  return std::nullopt;
}

// The handlers' checkName.
std::optional<Reply> CheckName(json& metadata, const std::string& namespace_name,
                               const std::string& name) {
  const std::string given = metadata.value("name", "");
  if (given != name) {
    return BadRequest("the name of the object (" + given +
                      ") does not match the name on the URL (" + name + ")");
  }
  const std::string given_namespace = metadata.value("namespace", "");
  if (!given_namespace.empty() && given_namespace != namespace_name) {
    return BadRequest("the namespace of the object (" + given_namespace +
                      ") does not match the namespace on the request (" + namespace_name + ")");
  }
  metadata["namespace"] = namespace_name;
  return std::nullopt;
}

// The generic registry's resourceVersion check of an update (AllowUnconditionalUpdate false).
std::optional<Reply> CheckVersion(const json& lease, const json& current, const std::string& name) {
  const std::string given = lease["metadata"].value("resourceVersion", "");
  uint64_t version = 0;
  if (!given.empty()) {
    Result<uint64_t> parsed = ParseGoUint(given);
    if (!parsed) return UnknownError(parsed.error().message);
    version = *parsed;
  }
  if (version == 0) {
    return Invalid(
        kQualifiedResource, "leases", name,
        {InvalidValue("metadata.resourceVersion", "0x0", "must be specified for an update")});
  }
  const Result<uint64_t> stored = ParseGoUint(current["metadata"].value("resourceVersion", ""));
  if (!stored || version != *stored) return Conflict(name, kOptimisticLock);
  return std::nullopt;
}

std::string LeaseBody(const json& lease) {
  const std::string object = lease.dump();
  return std::string(R"({"kind":"Lease","apiVersion":")") + kApiVersion + "\"," + object.substr(1);
}

}  // namespace

json FakeLeases::CommitLocked(const std::string& key, json lease) {
  lease["metadata"]["resourceVersion"] = std::to_string(store_.NextResourceVersion());
  leases_[key] = lease;
  return lease;
}

std::string FakeLeases::GenerateNameLocked(const std::string& namespace_name,
                                           const std::string& prefix) {
  // names.SimpleNameGenerator: at most 58 characters of the prefix and five random ones.
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  const std::string base = prefix.substr(0, 58);
  for (;;) {
    const std::string uid = store_.NewUid();
    std::string name = base;
    for (size_t i = 0; i < 5; ++i) {
      name += kAlphabet[static_cast<unsigned char>(uid[i]) % (sizeof(kAlphabet) - 1)];
    }
    if (leases_.count(namespace_name + "/" + name) == 0) return name;
  }
}

Reply FakeLeases::Create(const std::string& namespace_name, const std::string& body) {
  Answer<json> decoded = DecodeBody(body);
  if (!decoded) return decoded.error();
  json lease = std::move(*decoded);
  json& metadata = lease["metadata"];
  metadata.erase("uid");  // WipeObjectMetaSystemFields
  if (std::optional<Reply> refused = EnsureNamespace(metadata, namespace_name)) return *refused;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!metadata.contains("name") && metadata.contains("generateName")) {
    metadata["name"] =
        GenerateNameLocked(namespace_name, metadata["generateName"].get<std::string>());
  }
  const std::string name = metadata.value("name", "");
  if (std::vector<FieldError> errors = ValidateCreate(lease); !errors.empty()) {
    return Invalid(kQualifiedKind, "Lease", name, errors);
  }
  if (metadata.contains("resourceVersion")) {
    // etcd3's Create refuses a set one (a number that is not 0; anything else is ignored).
    const Result<uint64_t> version = ParseGoUint(metadata["resourceVersion"].get<std::string>());
    if (version && *version != 0) {
      return UnknownError("resourceVersion should not be set on objects to be created");
    }
    metadata.erase("resourceVersion");
  }
  const std::string key = namespace_name + "/" + name;
  if (leases_.count(key) != 0) {
    return StatusReply(409, "AlreadyExists",
                       std::string(kQualifiedResource) + " " + Quote(name) + " already exists",
                       ResourceDetails(name));
  }
  metadata["uid"] = store_.NewUid();
  metadata["creationTimestamp"] = NowRfc3339();
  return Reply{201, LeaseBody(CommitLocked(key, std::move(lease)))};
}

Reply FakeLeases::Get(const std::string& namespace_name, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = leases_.find(namespace_name + "/" + name);
  if (it == leases_.end()) return NotFound(name);
  return Reply{200, LeaseBody(it->second)};
}

Reply FakeLeases::ReplaceLocked(const std::string& key, json lease, const json& current) {
  // rest.BeforeUpdate: generation, creationTimestamp and (when none is given) uid are the stored
  // ones; then ValidateLeaseUpdate (uid immutable, the spec).
  json& metadata = lease["metadata"];
  const json& stored = current["metadata"];
  for (const char* field : {"generation", "creationTimestamp"}) {
    if (stored.contains(field)) {
      metadata[field] = stored[field];
    } else {
      metadata.erase(field);
    }
  }
  if (!metadata.contains("uid")) metadata["uid"] = stored["uid"];
  std::vector<FieldError> errors;
  if (metadata["uid"] != stored["uid"]) {
    // Reported twice upstream: by validateCommonFields and by ValidateLeaseUpdate.
    const FieldError immutable =
        InvalidValue("metadata.uid", metadata["uid"].dump(), "field is immutable");
    errors.insert(errors.end(), 2, immutable);
  }
  ValidateSpec(lease["spec"], errors);
  const std::string name = metadata.value("name", "");
  if (!errors.empty()) return Invalid(kQualifiedKind, "Lease", name, errors);
  metadata["resourceVersion"] = stored["resourceVersion"];
  // etcd3's GuaranteedUpdate writes nothing when the encoded object is unchanged.
  if (lease == current) return Reply{200, LeaseBody(current)};
  return Reply{200, LeaseBody(CommitLocked(key, std::move(lease)))};
}

Reply FakeLeases::Update(const std::string& namespace_name, const std::string& name,
                         const std::string& body) {
  Answer<json> decoded = DecodeBody(body);
  if (!decoded) return decoded.error();
  json lease = std::move(*decoded);
  json& metadata = lease["metadata"];
  if (std::optional<Reply> refused = EnsureNamespace(metadata, namespace_name)) return *refused;
  if (std::optional<Reply> refused = CheckName(metadata, namespace_name, name)) return *refused;
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string key = namespace_name + "/" + name;
  const auto it = leases_.find(key);
  // A uid in the object is a storage precondition (DefaultUpdatedObjectInfo.Preconditions).
  const std::string uid = metadata.value("uid", "");
  const std::string stored_uid = it == leases_.end() ? "" : it->second["metadata"].value("uid", "");
  if (!uid.empty() && uid != stored_uid) {
    return PreconditionFailed(
        key, name, "UID in precondition: " + uid + ", UID in object meta: " + stored_uid);
  }
  if (it == leases_.end()) {
    // AllowCreateOnUpdate: the PUT creates it (whatever resourceVersion it names).
    if (std::vector<FieldError> errors = ValidateCreate(lease); !errors.empty()) {
      return Invalid(kQualifiedKind, "Lease", name, errors);
    }
    metadata.erase("resourceVersion");
    metadata["uid"] = store_.NewUid();
    metadata["creationTimestamp"] = NowRfc3339();
    return Reply{201, LeaseBody(CommitLocked(key, std::move(lease)))};
  }
  if (std::optional<Reply> refused = CheckVersion(lease, it->second, name)) return *refused;
  const json current = it->second;
  return ReplaceLocked(key, std::move(lease), current);
}

Reply FakeLeases::Patch(const std::string& namespace_name, const std::string& name,
                        const std::string& content_type, const std::string& body) {
  if (MediaType(content_type) != "application/merge-patch+json") return UnsupportedPatchType();
  const json patch = json::parse(body, nullptr, false);
  if (patch.is_discarded()) return BadRequest("the body of the request is not JSON");
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string key = namespace_name + "/" + name;
  const auto it = leases_.find(key);
  if (it == leases_.end()) return NotFound(name);
  // The patch applies to the stored object as the client would read it.
  json patched = json::parse(LeaseBody(it->second));
  patched.merge_patch(patch);
  Answer<json> decoded = DecodeLease(patched);
  if (!decoded) return decoded.error();
  json lease = std::move(*decoded);
  if (std::optional<Reply> refused = CheckName(lease["metadata"], namespace_name, name)) {
    return *refused;
  }
  // The patched metadata.resourceVersion is the precondition: the stored one unless the patch
  // names another (or removes it).
  if (std::optional<Reply> refused = CheckVersion(lease, it->second, name)) return *refused;
  const json current = it->second;
  return ReplaceLocked(key, std::move(lease), current);
}

Reply FakeLeases::Delete(const std::string& namespace_name, const std::string& name,
                         const std::string& body) {
  // DeleteOptions: only preconditions matter here.
  std::optional<std::string> want_uid;
  std::optional<std::string> want_version;
  if (body.find_first_not_of(" \t\r\n") != std::string::npos) {
    const json options = json::parse(body, nullptr, false);
    if (!options.is_object()) return BadRequest("the body of the request is not DeleteOptions");
    const json preconditions = options.value("preconditions", json());
    if (!preconditions.is_null() && !preconditions.is_object()) {
      return BadRequest("DeleteOptions.preconditions must be an object");
    }
    if (preconditions.is_object()) {
      for (const char* field : {"uid", "resourceVersion"}) {
        const json value = preconditions.value(field, json());
        if (!value.is_null() && !value.is_string()) {
          return BadRequest(std::string("DeleteOptions.preconditions.") + field +
                            " must be a string");
        }
      }
      if (preconditions.value("uid", json()).is_string()) want_uid = preconditions["uid"];
      if (preconditions.value("resourceVersion", json()).is_string()) {
        want_version = preconditions["resourceVersion"];
      }
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = leases_.find(namespace_name + "/" + name);
  if (it == leases_.end()) return NotFound(name);
  const json& metadata = it->second["metadata"];
  // rest.BeforeDelete's early check: NewConflict on {group, Resource: kind}.
  const auto refuse = [&](const std::string& detail) {
    return StatusReply(409, "Conflict",
                       "Operation cannot be fulfilled on " + std::string(kQualifiedKind) + " " +
                           Quote(name) + ": " + detail,
                       {{"name", name}, {"group", kGroup}, {"kind", "Lease"}});
  };
  const std::string uid = metadata.value("uid", "");
  if (want_uid && *want_uid != uid) {
    return refuse("the UID in the precondition (" + *want_uid + ") does not match the UID in " +
                  "record (" + uid + "). The object might have been deleted and then recreated");
  }
  const std::string version = metadata.value("resourceVersion", "");
  if (want_version && *want_version != version) {
    return refuse("the ResourceVersion in the precondition (" + *want_version +
                  ") does not match the ResourceVersion in record (" + version +
                  "). The object might have been modified");
  }
  leases_.erase(it);
  store_.NextResourceVersion();
  // finalizeDelete without ReturnDeletedObject: a Success Status naming what was deleted.
  nlohmann::ordered_json status;
  status["kind"] = "Status";
  status["apiVersion"] = "v1";
  status["metadata"] = nlohmann::ordered_json::object();
  status["status"] = "Success";
  status["details"] = {{"name", name}, {"group", kGroup}, {"kind", "leases"}, {"uid", uid}};
  return Reply{200, status.dump()};
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
