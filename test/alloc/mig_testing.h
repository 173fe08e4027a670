#pragma once

// The MIG tests' fixtures (mig_test.cc, mig_planner_test.cc): the shipped profile sets, a
// planner per set, profiles by name, and GPU views.

#include <gtest/gtest.h>
#include <algorithm>
#include <bit>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include "linkfit/alloc/mig.h"

namespace linkfit::alloc {
namespace {

using nlohmann::json;

const std::string kMigDir = std::string(LINKFIT_SOURCE_DIR) + "/config/mig";
const std::vector<std::string> kSetIds = {"a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb"};

[[maybe_unused]] std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

[[maybe_unused]] const MigCatalog& Catalog() {
  static const MigCatalog* catalog = [] {
    auto loaded = MigCatalog::LoadDirectory(kMigDir);
    EXPECT_TRUE(loaded.has_value()) << loaded.error().message;
    return new MigCatalog(loaded ? std::move(*loaded) : MigCatalog());
  }();
  return *catalog;
}

[[maybe_unused]] const MigPlanner& Planner(const std::string& id) {
  const MigPlanner* planner = Catalog().FindPlanner(id);
  EXPECT_NE(planner, nullptr) << id;
  return *planner;
}

[[maybe_unused]] int Profile(const MigPlanner& planner, const std::string& name) {
  const int index = planner.set().FindProfile(name);
  EXPECT_GE(index, 0) << name;
  return index;
}

[[maybe_unused]] MigGpuView MigGpu(int index, MigGpuState state = {}, int pods = -1) {
  MigGpuView view;
  view.index = index;
  view.mig_enabled = true;
  view.state = state;
  view.pods = pods >= 0 ? pods : state.instance_count();
  return view;
}

}  // namespace
}  // namespace linkfit::alloc
