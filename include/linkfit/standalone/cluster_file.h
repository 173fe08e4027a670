#pragma once

// The cluster file as values, and its writer: what the tools that generate cluster files
// (linkfit-bench, linkfit-load, linkfit_verbs_bench) build instead of writing YAML by hand.
// LoadClusterFile (standalone.h, which documents the format) reads what EncodeClusterFile writes;
// test/standalone/cluster_file_writer_test.cc holds the two to each other.
//
// Thread-safety: plain values and pure functions (WriteClusterFile writes one file).

#include <map>
#include <string>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::standalone {

// One entry of `nodes`: one node (`name`), or `count` nodes named name_prefix0, name_prefix1, ...
struct ClusterFileNode {
  std::string name;
  std::string name_prefix;  // used when `name` is empty
  int count = 0;
  std::string topology;  // path of a topology document or nvidia-smi text (relative: to the file)
  std::map<std::string, std::string> labels;
  bool mig_all = false;       // every GPU in MIG mode (`mig: all`)
  std::vector<int> mig_gpus;  // otherwise these GPUs (`mig: [0, 3]`); empty: none
  std::string cpu;            // allocatable, a Kubernetes quantity ("224", "500m"); "": not given
  std::string memory;         // ("2Ti", "1024Mi"); "": not given
};

// One entry of `allocations`: a pod's devices on a node, and its CPU and memory requests.
struct ClusterFileAllocation {
  struct Mig {
    int gpu = 0;
    std::string profile;  // "3g.40gb"
    int start = 0;
  };
  struct Share {
    int gpu = 0;
    int milli = 0;
  };
  std::string pod;  // namespace/name
  std::string uid;
  std::string node;
  std::vector<int> gpus;  // whole GPUs; or
  std::vector<Mig> mig;   // MIG instances; or
  std::vector<Share> shares;
  std::string cpu;  // Kubernetes quantities; "": not given
  std::string memory;
};

struct ClusterFile {
  std::string comment;  // written as `# ...` lines at the top; "" for none
  std::vector<ClusterFileNode> nodes;
  std::vector<ClusterFileAllocation> allocations;
};

// The YAML text of `file`: one line a node key and one flow mapping an allocation, every string
// double-quoted (so that names, paths and quantities are read back as they are).
std::string EncodeClusterFile(const ClusterFile& file);

// Writes EncodeClusterFile(file) to `path`.
Result<void> WriteClusterFile(const std::string& path, const ClusterFile& file);

}  // namespace linkfit::standalone
