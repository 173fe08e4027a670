// Parsing and validation of `mig-profile-set/v1` documents, and the MigCatalog loader.

#include <algorithm>
#include <exception>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "linkfit/alloc/mig.h"
#include "linkfit/common/files.h"

namespace linkfit::alloc {
namespace {

using nlohmann::json;

constexpr std::string_view kSchema = "mig-profile-set/v1";

Result<const json*> Member(const json& object, const std::string& path, const char* key) {
  if (!object.is_object()) return MakeError(path + ": expected an object");
  auto it = object.find(key);
  if (it == object.end()) {
    return MakeError((path.empty() ? std::string() : path + ".") + key + ": missing");
  }
  return &*it;
}

Result<std::string> GetString(const json& object, const std::string& path, const char* key) {
  auto member = Member(object, path, key);
  if (!member) return tl::unexpected(member.error());
  std::string field = (path.empty() ? std::string() : path + ".") + key;
  if (!(*member)->is_string()) return MakeError(field + ": expected a string");
  return (*member)->get<std::string>();
}

Result<int> AsInt(const json& value, const std::string& field, int min, int max) {
  if (!value.is_number_integer()) return MakeError(field + ": expected an integer");
  const auto number = value.get<std::int64_t>();
  if (number < min || number > max) {
    return MakeError(field + ": " + std::to_string(number) + " is outside " + std::to_string(min) +
                     ".." + std::to_string(max));
  }
  return static_cast<int>(number);
}

Result<int> GetInt(const json& object, const std::string& path, const char* key, int min, int max) {
  auto member = Member(object, path, key);
  if (!member) return tl::unexpected(member.error());
  return AsInt(**member, (path.empty() ? std::string() : path + ".") + key, min, max);
}

Result<MigProfile> ParseProfile(const json& value, const std::string& path, int compute_slices) {
  MigProfile profile;
  auto name = GetString(value, path, "name");
  if (!name) return tl::unexpected(name.error());
  profile.name = std::move(*name);
  auto compute = GetInt(value, path, "compute_slices", 1, compute_slices);
  if (!compute) return tl::unexpected(compute.error());
  profile.compute_slices = *compute;
  auto memory = GetInt(value, path, "memory_slices", 1, kMigMemorySlices);
  if (!memory) return tl::unexpected(memory.error());
  profile.memory_slices = *memory;
  auto max = GetInt(value, path, "max_instances", 1, kMaxMigInstancesPerProfile);
  if (!max) return tl::unexpected(max.error());
  profile.max_instances = *max;
  if (value.contains("media_extensions_profile")) {
    const json& me = value["media_extensions_profile"];
    if (!me.is_boolean()) return MakeError(path + ".media_extensions_profile: expected a boolean");
    profile.media_extensions = me.get<bool>();
  }
  auto placements = Member(value, path, "placements");
  if (!placements) return tl::unexpected(placements.error());
  const std::string placements_path = path + ".placements";
  auto size = GetInt(**placements, placements_path, "size", 1, kMigMemorySlices);
  if (!size) return tl::unexpected(size.error());
  profile.size = *size;
  auto starts = Member(**placements, placements_path, "starts");
  if (!starts) return tl::unexpected(starts.error());
  if (!(*starts)->is_array()) return MakeError(placements_path + ".starts: expected an array");
  int i = 0;
  for (const json& start_value : **starts) {
    const std::string field = placements_path + ".starts[" + std::to_string(i++) + "]";
    auto start = AsInt(start_value, field, 0, kMigMemorySlices - 1);
    if (!start) return tl::unexpected(start.error());
    profile.starts.push_back(*start);
  }
  std::sort(profile.starts.begin(), profile.starts.end());
  return profile;
}

Result<MigProfileSet> ParseDocument(const json& document) {
  if (!document.is_object()) return MakeError("expected a JSON object at the top level");
  auto schema = GetString(document, "", "schema");
  if (!schema) return tl::unexpected(schema.error());
  if (*schema != kSchema) {
    return MakeError("schema: expected \"" + std::string(kSchema) + "\", got \"" + *schema + "\"");
  }
  MigProfileSet set;
  auto id = GetString(document, "", "id");
  if (!id) return tl::unexpected(id.error());
  set.id = std::move(*id);
  if (document.contains("gpu_model")) {
    auto model = GetString(document, "", "gpu_model");
    if (!model) return tl::unexpected(model.error());
    set.gpu_model = std::move(*model);
  }
  auto geometry = Member(document, "", "geometry");
  if (!geometry) return tl::unexpected(geometry.error());
  auto memory = GetInt(**geometry, "geometry", "memory_slices", 1, 64);
  if (!memory) return tl::unexpected(memory.error());
  if (*memory != kMigMemorySlices) {
    return MakeError("geometry.memory_slices: " + std::to_string(*memory) +
                     " is not supported (linkfit models 8 memory slices)");
  }
  set.memory_slices = *memory;
  auto compute = GetInt(**geometry, "geometry", "compute_slices", 1, kMigMemorySlices);
  if (!compute) return tl::unexpected(compute.error());
  set.compute_slices = *compute;
  auto max_gi = GetInt(**geometry, "geometry", "max_gpu_instances", 1, kMigMemorySlices);
  if (!max_gi) return tl::unexpected(max_gi.error());
  set.max_gpu_instances = *max_gi;

  auto profiles = Member(document, "", "profiles");
  if (!profiles) return tl::unexpected(profiles.error());
  if (!(*profiles)->is_array()) return MakeError("profiles: expected an array");
  int i = 0;
  for (const json& value : **profiles) {
    auto profile = ParseProfile(value, "profiles[" + std::to_string(i++) + "]", set.compute_slices);
    if (!profile) return tl::unexpected(profile.error());
    set.profiles.push_back(std::move(*profile));
  }
  auto valid = ValidateMigProfileSet(set);
  if (!valid) return tl::unexpected(valid.error());
  return set;
}

}  // namespace

int MigProfileSet::FindProfile(std::string_view name) const {
  for (std::size_t i = 0; i < profiles.size(); ++i) {
    if (profiles[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

Result<void> ValidateMigProfileSet(const MigProfileSet& set) {
  if (set.id.empty()) return MakeError("id: must not be empty");
  if (set.memory_slices != kMigMemorySlices) {
    return MakeError("geometry.memory_slices: must be 8");
  }
  if (set.compute_slices < 1 || set.compute_slices > kMigMemorySlices) {
    return MakeError("geometry.compute_slices: " + std::to_string(set.compute_slices) +
                     " is outside 1..8");
  }
  if (set.max_gpu_instances < 1 || set.max_gpu_instances > kMigMemorySlices) {
    return MakeError("geometry.max_gpu_instances: " + std::to_string(set.max_gpu_instances) +
                     " is outside 1..8");
  }
  if (set.profiles.empty()) return MakeError("profiles: must not be empty");
  if (set.profiles.size() > static_cast<std::size_t>(kMaxMigProfiles)) {
    return MakeError("profiles: " + std::to_string(set.profiles.size()) +
                     " profiles, at most 8 are supported");
  }
  for (std::size_t i = 0; i < set.profiles.size(); ++i) {
    const MigProfile& p = set.profiles[i];
    const std::string path = "profiles[" + std::to_string(i) + "]";
    if (p.name.empty()) return MakeError(path + ".name: must not be empty");
    for (std::size_t j = 0; j < i; ++j) {
      if (set.profiles[j].name == p.name) {
        return MakeError(path + ".name: duplicate profile name \"" + p.name + "\"");
      }
    }
    if (p.compute_slices < 1 || p.compute_slices > set.compute_slices) {
      return MakeError(path + ".compute_slices: " + std::to_string(p.compute_slices) +
                       " is outside 1.." + std::to_string(set.compute_slices));
    }
    if (p.max_instances < 1 || p.max_instances > kMaxMigInstancesPerProfile) {
      return MakeError(path + ".max_instances: " + std::to_string(p.max_instances) +
                       " is outside 1..15");
    }
    if (p.size < 1 || p.size > kMigMemorySlices) {
      return MakeError(path + ".placements.size: " + std::to_string(p.size) + " is outside 1..8");
    }
    if (p.memory_slices != p.size) {
      return MakeError(path + ".placements.size: " + std::to_string(p.size) +
                       " differs from memory_slices " + std::to_string(p.memory_slices));
    }
    if (p.starts.empty()) return MakeError(path + ".placements.starts: must not be empty");
    for (std::size_t k = 0; k < p.starts.size(); ++k) {
      const int start = p.starts[k];
      const std::string field = path + ".placements.starts[" + std::to_string(k) + "]";
      if (start < 0 || start >= kMigMemorySlices) {
        return MakeError(field + ": " + std::to_string(start) + " is outside 0..7");
      }
      if (start + p.size > kMigMemorySlices) {
        return MakeError(field + ": start " + std::to_string(start) + " + size " +
                         std::to_string(p.size) + " exceeds 8 memory slices");
      }
      if (k > 0 && p.starts[k - 1] >= start) {
        return MakeError(field + ": starts must be strictly ascending (duplicate " +
                         std::to_string(start) + "?)");
      }
    }
  }
  return {};
}

Result<MigProfileSet> ParseMigProfileSet(std::string_view text) {
  try {
    json document = json::parse(text.begin(), text.end());
    return ParseDocument(document);
  } catch (const std::exception& e) {
    return MakeError(std::string("invalid JSON: ") + e.what());
  }
}

Result<MigProfileSet> LoadMigProfileSetFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text) return tl::unexpected(text.error());
  auto set = ParseMigProfileSet(*text);
  if (!set) return WithContext(set.error(), path);
  return set;
}

Result<MigCatalog> MigCatalog::FromSets(std::vector<MigProfileSet> sets) {
  MigCatalog catalog;
  catalog.planners_.reserve(sets.size());
  for (MigProfileSet& set : sets) {
    if (catalog.FindSet(set.id) != nullptr) {
      return MakeError("duplicate MIG profile set id \"" + set.id + "\"");
    }
    std::string id = set.id;
    auto planner = MigPlanner::Create(std::move(set));
    if (!planner) return WithContext(planner.error(), "MIG profile set \"" + id + "\"");
    catalog.planners_.push_back(std::move(*planner));
  }
  return catalog;
}

Result<MigCatalog> MigCatalog::LoadDirectory(const std::string& directory) {
  std::vector<std::string> paths;
  try {
    std::error_code ec;
    std::filesystem::directory_iterator it(directory, ec);
    if (ec) return MakeError(directory + ": cannot list directory: " + ec.message());
    for (const auto& entry : it) {
      if (entry.path().extension() == ".json" && entry.is_regular_file()) {
        paths.push_back(entry.path().string());
      }
    }
  } catch (const std::exception& e) {
    return MakeError(directory + ": " + e.what());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<MigProfileSet> sets;
  std::vector<std::string> origins;
  for (const std::string& path : paths) {
    auto set = LoadMigProfileSetFile(path);
    if (!set) return tl::unexpected(set.error());
    for (std::size_t i = 0; i < sets.size(); ++i) {
      if (sets[i].id == set->id) {
        return MakeError(path + ": duplicate MIG profile set id \"" + set->id + "\" (also in " +
                         origins[i] + ")");
      }
    }
    sets.push_back(std::move(*set));
    origins.push_back(path);
  }
  return FromSets(std::move(sets));
}

const MigPlanner* MigCatalog::FindPlanner(std::string_view id) const {
  for (const MigPlanner& planner : planners_) {
    if (planner.set().id == id) return &planner;
  }
  return nullptr;
}

const MigProfileSet* MigCatalog::FindSet(std::string_view id) const {
  const MigPlanner* planner = FindPlanner(id);
  return planner == nullptr ? nullptr : &planner->set();
}

std::vector<MigCatalog::ProfileRef> MigCatalog::FindProfile(std::string_view name) const {
  std::vector<ProfileRef> refs;
  for (const MigPlanner& planner : planners_) {
    const int index = planner.set().FindProfile(name);
    if (index >= 0) refs.push_back(ProfileRef{&planner, index});
  }
  return refs;
}

}  // namespace linkfit::alloc
