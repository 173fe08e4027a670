#include <algorithm>

#include "harness/experiment.h"
#include "linkfit/common/strings.h"

namespace linkfit::bench {

Result<std::vector<std::uint64_t>> ParseSeeds(const std::string& text) {
  std::vector<std::uint64_t> seeds;
  for (std::string_view part : Split(text, ',')) {
    part = Trim(part);
    const std::size_t dash = part.find('-');
    std::optional<std::int64_t> first = ParseInt(part.substr(0, dash));
    std::optional<std::int64_t> last =
        dash == std::string_view::npos ? first : ParseInt(part.substr(dash + 1));
    if (!first || !last || *first < 0 || *last < *first || *last - *first > 10000) {
      return MakeError("bad --seeds '" + text + "' (expected e.g. 42-51 or 1,2,3)");
    }
    for (std::int64_t seed = *first; seed <= *last; ++seed) {
      seeds.push_back(static_cast<std::uint64_t>(seed));
    }
  }
  if (seeds.empty()) return MakeError("--seeds names no seed");
  return seeds;
}

Result<PlacerPtr> MakePlacer(const std::string& policy, std::uint64_t seed,
                             const std::vector<PodSpec>& trace, const Cluster& cluster,
                             const BenchOptions& options) {
  if (policy == "linkfit") return MakeExtenderPlacer(seed, cluster, options);
  const bool paper = options.baseline_mode == "paper";
  auto baseline = MakeBaseline(policy, trace, paper);
  if (!baseline) return tl::unexpected(baseline.error());
  // `random` scores every node alike; its draw must stay uniform whatever the tie-break (the
  // paper's RandomScore gives every node a random score).
  const TieBreak tie_break = paper && policy != "random" ? TieBreak::kOrdered : TieBreak::kRandom;
  return PlacerPtr(std::make_unique<PolicyPlacer>(std::move(*baseline), seed, tie_break));
}

}  // namespace linkfit::bench
