#include "harness/experiment.h"

namespace linkfit::bench {

Result<nlohmann::json> RunMigExperiment(const BenchOptions&) {
  return MakeError("not implemented yet");
}
Result<nlohmann::json> RunLatencyExperiment(const BenchOptions&) {
  return MakeError("not implemented yet");
}

}  // namespace linkfit::bench
