#include "linkfit/handoff/cdi_specs.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "linkfit/common/strings.h"
#include "linkfit/common/yaml_reader.h"
#include "linkfit/handoff/plugin_devices.h"

namespace linkfit::handoff {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxSpecBytes = 1 << 20;

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// CDI's name grammar: alphanumerics, with '-', '_', '.' (and ':' for device names) between.
bool IsCdiName(std::string_view name, bool colon) {
  if (name.empty() || !IsAlnum(name.front()) || !IsAlnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) {
    return IsAlnum(c) || c == '-' || c == '_' || c == '.' || (colon && c == ':');
  });
}

// vendor/class: a DNS-like vendor, a class name.
bool IsCdiKind(std::string_view kind) {
  const std::size_t slash = kind.find('/');
  if (slash == std::string_view::npos || kind.find('/', slash + 1) != std::string_view::npos) {
    return false;
  }
  return IsCdiName(kind.substr(0, slash), false) && IsCdiName(kind.substr(slash + 1), false);
}

// The value of `key` in `map`; a null node where `map` is no mapping or has no such key (yaml-cpp
// answers a missing key with an invalid node, which throws on every question but IsDefined).
YAML::Node Child(const YAML::Node& map, const char* key) {
  if (!map.IsDefined() || !map.IsMap()) return YAML::Node();
  const YAML::Node child = map[key];
  return child.IsDefined() ? child : YAML::Node();
}

// Whether `edits` (a containerEdits mapping, or nothing) names rdma_cm among its device nodes.
bool BringsRdmaCm(const YAML::Node& edits) {
  const YAML::Node nodes = Child(edits, "deviceNodes");
  if (!nodes.IsSequence()) return false;
  return std::any_of(nodes.begin(), nodes.end(), [](const YAML::Node& node) {
    const YAML::Node path = Child(node, "path");
    return path.IsScalar() && path.Scalar() == kRdmaCmPath;
  });
}

Result<CdiSpec> ReadSpec(const yaml::Reader& reader, const YAML::Node& root) {
  if (!root.IsMap())
    return reader.Fail(root, "", "expected a mapping, got " + yaml::Describe(root));
  CdiSpec spec;
  LINKFIT_ASSIGN_OR_RETURN(spec.kind, reader.String(root, "kind", "", yaml::Empty::kRefused));
  if (!IsCdiKind(spec.kind)) {
    return reader.Fail(Child(root, "kind"), "kind",
                       QuoteForMessage(spec.kind) + " is not vendor/class");
  }
  YAML::Node devices;
  LINKFIT_ASSIGN_OR_RETURN(devices, reader.Require(root, "devices", ""));
  if (!devices.IsSequence()) {
    return reader.Fail(devices, "devices", "expected a list, got " + yaml::Describe(devices));
  }
  const bool whole_spec = BringsRdmaCm(Child(root, "containerEdits"));
  std::size_t index = 0;
  for (const YAML::Node& device : devices) {
    const std::string path = "devices[" + std::to_string(index++) + "]";
    if (!device.IsMap()) {
      return reader.Fail(device, path, "expected a mapping, got " + yaml::Describe(device));
    }
    std::string name;
    LINKFIT_ASSIGN_OR_RETURN(name, reader.String(device, "name", path, yaml::Empty::kRefused));
    if (!IsCdiName(name, true)) {
      return reader.Fail(Child(device, "name"), path + ".name",
                         QuoteForMessage(name) + " is not a CDI device name");
    }
    spec.devices[name] = whole_spec || BringsRdmaCm(Child(device, "containerEdits"));
  }
  return spec;
}

bool IsSpecFile(const fs::path& path) {
  const std::string extension = path.extension().string();
  return extension == ".json" || extension == ".yaml" || extension == ".yml";
}

}  // namespace

Result<CdiSpec> ParseCdiSpec(std::string_view text, const std::string& source) {
  yaml::ReaderOptions options;
  options.syntax_error = "neither JSON nor YAML";
  const yaml::Reader reader(source, "", options);
  try {
    YAML::Node root;
    LINKFIT_ASSIGN_OR_RETURN(root, reader.Load(text));
    return ReadSpec(reader, root);
  } catch (const YAML::Exception& e) {
    return MakeError(reader.Where(e.mark) + ": " + e.msg);
  } catch (const std::exception& e) {
    return MakeError(source + ": " + e.what());
  }
}

CdiDevices ReadCdiSpecDirs(const std::vector<std::string>& dirs) {
  CdiDevices out;
  for (const std::string& dir : dirs) {
    std::error_code error;
    std::vector<fs::path> files;
    for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
      std::error_code kind_error;
      if (IsSpecFile(it->path()) && it->is_regular_file(kind_error)) files.push_back(it->path());
    }
    if (error && error != std::errc::no_such_file_or_directory) {
      out.problems.push_back(dir + ": " + error.message());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      auto text = yaml::ReadFile(file.string(), kMaxSpecBytes);
      auto spec =
          text ? ParseCdiSpec(*text, file.string()) : Result<CdiSpec>(tl::unexpected(text.error()));
      if (!spec) {
        out.problems.push_back(spec.error().message);
        continue;
      }
      for (const auto& [name, rdma_cm] : spec->devices) {
        out.devices[spec->kind + "=" + name] = rdma_cm;
      }
    }
  }
  return out;
}

std::map<std::string, bool> DeclaredNicCdi(const CdiDevices& specs, const std::string& kind,
                                           const topology::TopologySpec& node) {
  std::map<std::string, bool> declared;
  for (const topology::NicSpec& nic : node.nics) {
    if (!ServedNic(nic)) continue;
    const auto found = specs.devices.find(kind + "=" + nic.name);
    if (found != specs.devices.end()) declared[nic.name] = found->second;
  }
  return declared;
}

}  // namespace linkfit::handoff
