#pragma once

// Test helpers: paths of the repo's fixtures and loading a topology document into a Topology.

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "linkfit/topology/topology.h"

namespace linkfit::testing {

inline std::string SourcePath(const std::string& relative) {
  return std::string(LINKFIT_SOURCE_DIR) + "/" + relative;
}

inline std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The fixture topologies copied from ../shared/topologies into config/topologies.
inline std::vector<std::string> FixtureIds() {
  return {"dgx1-v100",
          "dgx2-v100",
          "dgx-a100",
          "dgx-h100",
          "pcie-8x-l40s-2socket",
          "ws-4x-rtxa6000-nvlink-pairs",
          "pcie-8x-a100-nvlink-bridge-pairs",
          "pcie-8x-cascaded-switch-2socket",
          "pcie-8x-rtx4090-all-sys"};
}

inline std::string FixturePath(const std::string& id) {
  return SourcePath("config/topologies/" + id + ".json");
}

inline topology::TopologyPtr LoadFixture(const std::string& id) {
  auto spec = topology::ParseTopologyDocument(ReadFileOrDie(FixturePath(id)));
  EXPECT_TRUE(spec.has_value()) << id << ": " << (spec ? "" : spec.error().message);
  if (!spec) return nullptr;
  auto topo = topology::BuildTopology(std::move(*spec));
  EXPECT_TRUE(topo.has_value()) << id << ": " << (topo ? "" : topo.error().message);
  return topo ? *topo : nullptr;
}

// The fixture `id` with every NIC at `rate_gbps`, as a node agent reads it from sysfs (the
// fixtures state no rate).
inline topology::TopologyPtr LoadFixtureWithNicRate(const std::string& id, double rate_gbps) {
  const topology::TopologyPtr base = LoadFixture(id);
  if (!base) return nullptr;
  topology::TopologySpec spec = base->spec();
  for (topology::NicSpec& nic : spec.nics) nic.rate_gbps = rate_gbps;
  auto topo = topology::BuildTopology(std::move(spec));
  EXPECT_TRUE(topo.has_value()) << id << ": " << (topo ? "" : topo.error().message);
  return topo ? *topo : nullptr;
}

}  // namespace linkfit::testing
