#include "linkfit/topology/bandwidth.h"

#include <nlohmann/json.hpp>

namespace linkfit::topology {

BandwidthModel BandwidthModel::Defaults() {
  // ../shared/bandwidth/link-bandwidth.json, model_defaults_assumption.pair_effective_GBps:
  // line rates and measurements at ~80% protocol efficiency (GB/s per direction per pair).
  BandwidthModel model;
  model.values_ = {
      {"NVSWITCH_H100", 370},
      {"NVSWITCH_A100", 230},
      {"NVSWITCH_V100_DGX2", 120},
      {"NVLINK_DIRECT_per_link_gen2", 20},
      {"NVLINK_DIRECT_per_link_gen3_sxm", 20},
      {"NVLINK_DIRECT_per_link_ga102", 11},
      {"NVLINK_DIRECT_per_link_gen4", 20},
      {"PIX_gen3", 12},
      {"PXB_gen3", 12},
      {"PHB_gen3", 10},
      {"NODE_gen3", 10},
      {"SYS_gen3", 6},
      {"PIX_gen4", 24},
      {"PXB_gen4", 24},
      {"PHB_gen4", 20},
      {"NODE_gen4", 20},
      {"SYS_gen4", 12},
      {"PIX_gen5", 48},
      {"PXB_gen5", 48},
      {"PHB_gen5", 40},
      {"NODE_gen5", 40},
      {"SYS_gen5", 20},
  };
  return model;
}

Result<BandwidthModel> BandwidthModel::FromDocument(std::string_view json_text) {
  const auto root = nlohmann::json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (root.is_discarded() || !root.is_object()) {
    return MakeError("bandwidth document is not a JSON object");
  }
  const auto assumption = root.find("model_defaults_assumption");
  if (assumption == root.end() || !assumption->is_object()) {
    return MakeError("bandwidth document: missing model_defaults_assumption");
  }
  const auto pairs = assumption->find("pair_effective_GBps");
  if (pairs == assumption->end() || !pairs->is_object()) {
    return MakeError("bandwidth document: missing model_defaults_assumption.pair_effective_GBps");
  }
  BandwidthModel model = Defaults();
  for (const auto& [key, value] : pairs->items()) {
    if (!value.is_number()) continue;  // prose entries such as NO_P2P_any_pcie_level
    auto overridden = model.Override(key, value.get<double>());
    if (!overridden) return tl::unexpected(overridden.error());
  }
  return model;
}

Result<void> BandwidthModel::Override(const std::string& key, double gbps) {
  const auto it = values_.find(key);
  if (it == values_.end()) {
    std::string known;
    for (const auto& entry : values_) {
      if (!known.empty()) known += ", ";
      known += entry.first;
    }
    return MakeError("unknown bandwidth key \"" + key + "\" (known: " + known + ")");
  }
  if (!(gbps > 0) || gbps > 10000) {
    return MakeError("bandwidth " + key + " must be a positive number of GB/s, got " +
                     std::to_string(gbps));
  }
  it->second = gbps;
  return {};
}

Result<double> BandwidthModel::Get(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end()) return MakeError("unknown bandwidth key \"" + key + "\"");
  return it->second;
}

}  // namespace linkfit::topology
