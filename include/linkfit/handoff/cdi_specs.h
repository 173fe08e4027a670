#pragma once

// The CDI devices a node's CDI spec files declare (the Container Device Interface,
// https://github.com/cncf-tags/container-device-interface SPEC.md), as far as the hand-off needs
// them: whether a runtime that injects CDI can resolve `kind=name`, and whether injecting it
// brings /dev/infiniband/rdma_cm. A spec file is JSON or YAML:
//
//   cdiVersion: "0.6.0"
//   kind: nvidia.com/rdma               vendor/class; a device's CDI name is <kind>=<name>
//   devices:
//   - name: mlx5_0
//     containerEdits:                   edits made when this device is injected
//       deviceNodes: [{path: /dev/infiniband/uverbs0}, {path: /dev/infiniband/rdma_cm}]
//   containerEdits: {deviceNodes: []}   edits made when any device of the spec is injected
//
// Other keys (env, mounts, hooks, annotations, ...) are read past. A runtime's CDI cache reads
// /etc/cdi, then /var/run/cdi (the later directory wins a device both declare); ReadCdiSpecDirs
// reads directories in the order given, the same way.
//
// Thread-safety: plain values and pure functions (ReadCdiSpecDirs reads files).

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/topology/spec.h"

namespace linkfit::handoff {

// The default CDI spec directories, lowest priority first (as CDI's own library orders them).
inline const std::vector<std::string>& DefaultCdiSpecDirs() {
  static const std::vector<std::string> dirs = {"/etc/cdi", "/var/run/cdi"};
  return dirs;
}

struct CdiSpec {
  std::string kind;
  // Device name -> whether injecting it brings rdma_cm (its own edits or the spec's).
  std::map<std::string, bool> devices;
};

// Parses one spec file's text; `source` (the file's path) begins every message. Errors: text
// that is neither JSON nor YAML, no mapping, a missing or malformed kind (not vendor/class), no
// device list, a device without a name or with a name CDI refuses.
Result<CdiSpec> ParseCdiSpec(std::string_view text, const std::string& source);

struct CdiDevices {
  // "<kind>=<name>" -> whether injecting it brings rdma_cm.
  std::map<std::string, bool> devices;
  // One message per spec file that could not be read or parsed, naming its path.
  std::vector<std::string> problems;
};

// Reads every *.json, *.yaml and *.yml file in `dirs` (a directory that does not exist holds
// none), directory by directory in the order given and by name within each; a file that does not
// parse is a problem and is otherwise ignored. Files are read up to 1 MiB each.
CdiDevices ReadCdiSpecDirs(const std::vector<std::string>& dirs);

// The NICs of `node` the hand-off serves whose CDI device `<kind>=<name>` `specs` declares, each
// with whether injecting it brings rdma_cm.
std::map<std::string, bool> DeclaredNicCdi(const CdiDevices& specs, const std::string& kind,
                                           const topology::TopologySpec& node);

}  // namespace linkfit::handoff
