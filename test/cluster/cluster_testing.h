#pragma once

// Test helpers for cluster mode: Pod and Node objects as the API server serves them.

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "linkfit/extender/extender.h"
#include "linkfit/wire/verb_calls.h"
#include "testing/fixtures.h"

namespace linkfit::cluster::testing {

// The topology document of a fixture machine (config/topologies/<id>.json), as a node annotation.
inline std::string TopologyDocument(const std::string& fixture_id) {
  return linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath("config/topologies/" + fixture_id + ".json"));
}

struct PodSpec {
  std::string ns = "ml";
  std::string name = "";
  std::string uid = "";
  std::string node = "";  // "" = pending
  int gpus = 0;           // nvidia.com/gpu limit of the one container
  std::string cpu = "1";
  std::string memory = "1Gi";
  std::string phase = "Running";
  std::map<std::string, std::string> annotations = {};
  std::string scheduler = "linkfit-scheduler";
};

inline nlohmann::json PodObject(const PodSpec& spec) {
  nlohmann::json limits = {{"cpu", spec.cpu}, {"memory", spec.memory}};
  if (spec.gpus > 0) limits["nvidia.com/gpu"] = std::to_string(spec.gpus);
  nlohmann::json pod = {
      {"metadata",
       {{"name", spec.name},
        {"namespace", spec.ns},
        {"uid", spec.uid},
        {"resourceVersion", "1"},
        {"annotations", spec.annotations}}},
      {"spec",
       {{"schedulerName", spec.scheduler},
        {"containers", {{{"name", "main"}, {"resources", {{"limits", limits}}}}}}}},
      {"status", {{"phase", spec.phase}}}};
  if (!spec.node.empty()) pod["spec"]["nodeName"] = spec.node;
  if (spec.uid.empty()) pod["metadata"].erase("uid");  // the API server assigns one
  return pod;
}

inline nlohmann::json NodeObject(const std::string& name, const std::string& topology,
                                 const std::string& mig_mode = "", const std::string& cpu = "224",
                                 const std::string& memory = "2Ti") {
  nlohmann::json annotations = nlohmann::json::object();
  if (!topology.empty()) annotations["linkfit.io/topology"] = topology;
  if (!mig_mode.empty()) annotations["linkfit.io/mig-mode"] = mig_mode;
  return {{"metadata",
           {{"name", name},
            {"resourceVersion", "1"},
            {"labels", {{"kubernetes.io/hostname", name}, {"nvidia.com/gpu.product", "X"}}},
            {"annotations", annotations}}},
          {"status", {{"allocatable", {{"cpu", cpu}, {"memory", memory}, {"pods", "110"}}}}}};
}

// kube-scheduler's filter call for a pod asking for `gpus` whole GPUs over `names` (which must
// outlive the result: its passing names point into them). No bind is made.
inline wire::FilterResult FilterWholeGpus(state::ClusterCache& cache, MetricsSink& metrics,
                                          int gpus, const std::vector<std::string_view>& names) {
  extender::PodMemo memo({});
  struct NoBinder final : extender::Binder {
    extender::BindReply Bind(const extender::BindRequest&) override { return {}; }
    void Released(const std::string&) override {}
  } binder;
  extender::Extender ext(cache, {}, binder, memo, metrics);
  wire::ExtenderArgs args;
  args.pod.name = "p";
  args.pod.uid = "probe";
  args.pod.requests["nvidia.com/gpu"] = gpus * 1000;
  args.node_names_given = true;
  args.node_names = names;
  return wire::RunFilter(ext, args);
}

}  // namespace linkfit::cluster::testing
