// `linkfit place`: asks the exact allocator where a request goes on one node.

#include <ostream>

#include <nlohmann/json.hpp>

#include "linkfit/alloc/placement_table.h"
#include "linkfit/app/cli.h"
#include "linkfit/common/flags.h"
#include "linkfit/common/strings.h"
#include "linkfit/topology/topology.h"

namespace linkfit::app {
namespace {

Result<std::vector<int>> ParseIndexList(const std::string& text, int gpu_count) {
  std::vector<int> out;
  if (Trim(text).empty()) return out;
  for (std::string_view field : Split(text, ',')) {
    const auto value = ParseInt(field);
    if (!value || *value < 0 || *value >= gpu_count) {
      return MakeError("--used: " + QuoteForMessage(field) +
                       " is not a GPU index of this node (0.." + std::to_string(gpu_count - 1) +
                       ")");
    }
    out.push_back(static_cast<int>(*value));
  }
  return out;
}

int Fail(bool json, const std::string& message, std::ostream& out, std::ostream& err, int code) {
  if (json) {
    out << nlohmann::json{{"error", message}}.dump() << "\n";
  } else {
    err << "linkfit place: " << message << "\n";
  }
  return code;
}

int PlaceWhole(const Flags& flags, const topology::TopologyPtr& topo, bool json, std::ostream& out,
               std::ostream& err) {
  auto gpus = flags.GetInt("gpus", 1, topology::kMaxGpus);
  if (!gpus || !gpus->has_value()) {
    return Fail(json,
                gpus ? "missing required flag --gpus (or --mig-profile)" : gpus.error().message,
                out, err, 2);
  }
  auto used = ParseIndexList(flags.Get("used").value_or(""), topo->gpu_count());
  if (!used) return Fail(json, used.error().message, out, err, 2);
  alloc::WholeGpuRequest request;
  request.gpus = static_cast<int>(**gpus);
  if (auto level = flags.Get("closeness")) {
    auto parsed = alloc::ParseCloseness(*level);
    if (!parsed) return Fail(json, parsed.error().message, out, err, 2);
    request.closeness = *parsed;
  }
  request.policy = flags.Has("required") ? alloc::ClosenessPolicy::kRequired
                                         : alloc::ClosenessPolicy::kPreferred;
  const topology::GpuMask free =
      static_cast<topology::GpuMask>(topo->all_gpus() & ~alloc::IndexesToMask(*used));
  const alloc::PlacementTablePtr table = alloc::PlacementTable::Build(topo);
  const alloc::WholeGpuPlacement placement = alloc::PlaceWholeGpus(*table, free, request);
  if (!placement.fits) return Fail(json, placement.reason, out, err, 1);
  const std::vector<int> chosen = alloc::MaskToIndexes(placement.gpus);
  const alloc::SetQuality best_possible =
      table->Quality(table->BestOnNode(topo->all_gpus(), request.gpus));
  if (json) {
    nlohmann::json reply = {{"gpus", chosen},
                            {"ring_gbps", placement.quality.ring_mbps / 1000.0},
                            {"sum_gbps", placement.quality.sum_mbps / 1000.0},
                            {"numa_span", placement.quality.numa_span},
                            {"closeness", alloc::ToString(request.closeness)},
                            {"closeness_met", placement.closeness_met},
                            {"best_possible_ring_gbps", best_possible.ring_mbps / 1000.0},
                            {"free_gpus", alloc::MaskToIndexes(free)}};
    if (!placement.reason.empty()) reply["note"] = placement.reason;
    out << reply.dump() << "\n";
  } else {
    out << "GPUs " << JoinInts(chosen) << ": ring " << placement.quality.ring_mbps / 1000.0
        << " GB/s, pair sum " << placement.quality.sum_mbps / 1000.0 << " GB/s, "
        << placement.quality.numa_span << " NUMA node"
        << (placement.quality.numa_span == 1 ? "" : "s")
        << " (best ring on an idle node: " << best_possible.ring_mbps / 1000.0 << " GB/s)\n";
    if (!placement.reason.empty())
      out << "note: preferred closeness missed: " << placement.reason << "\n";
  }
  return 0;
}

}  // namespace

int PlaceMig(const Flags& flags, const topology::TopologyPtr& topo, bool json, std::ostream& out,
             std::ostream& err);

int RunPlace(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto flags = Flags::Parse(args, {{"topology"},
                                   {"gpus"},
                                   {"used"},
                                   {"closeness"},
                                   {"required", false},
                                   {"mig-profile"},
                                   {"mig-used"},
                                   {"mig-profiles-dir"},
                                   {"json", false}});
  if (!flags) return Fail(false, flags.error().message, out, err, 2);
  const bool json = flags->Has("json");
  auto path = flags->Require("topology");
  if (!path) return Fail(json, path.error().message, out, err, 2);
  auto spec = topology::LoadTopologyFile(*path);
  auto topo = spec ? topology::BuildTopology(std::move(*spec)) : tl::unexpected(spec.error());
  if (!topo) return Fail(json, topo.error().message, out, err, 1);
  if (flags->Has("mig-profile")) return PlaceMig(*flags, *topo, json, out, err);
  return PlaceWhole(*flags, *topo, json, out, err);
}

}  // namespace linkfit::app
