#pragma once

// BandwidthModel: the per-pair effective bandwidth assumptions (GB/s per direction) used to turn
// links into the pair matrix b(i,j). Defaults are ../shared/bandwidth/link-bandwidth.json's
// `model_defaults_assumption` (copied to config/link-bandwidth.json); operators override single
// keys in the linkfit config (`bandwidth_overrides: {PIX_gen4: 26}`).
//
// Keys: NVSWITCH_H100, NVSWITCH_A100, NVSWITCH_V100_DGX2, NVLINK_DIRECT_per_link_gen2,
// NVLINK_DIRECT_per_link_gen3_sxm, NVLINK_DIRECT_per_link_ga102, NVLINK_DIRECT_per_link_gen4,
// and {PIX,PXB,PHB,NODE,SYS}_gen{3,4,5}.
//
// Thread-safety: plain value; const methods are safe to call concurrently.

#include <map>
#include <string>
#include <string_view>

#include "linkfit/common/result.h"

namespace linkfit::topology {

class BandwidthModel {
 public:
  // The built-in defaults (identical to config/link-bandwidth.json).
  static BandwidthModel Defaults();

  // Reads `model_defaults_assumption.pair_effective_GBps` from a gpu-link-bandwidth/v1 document.
  static Result<BandwidthModel> FromDocument(std::string_view json_text);

  // Replaces one key's value; unknown keys and non-positive values are errors.
  Result<void> Override(const std::string& key, double gbps);

  // Returns the value of a key, or an error naming the unknown key.
  Result<double> Get(const std::string& key) const;

  const std::map<std::string, double>& values() const { return values_; }

 private:
  std::map<std::string, double> values_;
};

}  // namespace linkfit::topology
