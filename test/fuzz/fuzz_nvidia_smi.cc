// libFuzzer target: nvidia-smi text through ParseTopologyText(), the text splitter and
// ParseNvidiaSmi().
//
// Besides "no crash, no sanitizer report", it checks the contract that the rest of linkfit relies
// on: an accepted spec has 1..kMaxGpus GPUs indexed 0..n-1, one link per pair and one relation
// per GPU for each NIC, and BuildTopology() accepts it.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "linkfit/topology/spec.h"
#include "linkfit/topology/topology.h"
#include "topology/nvidia_smi_text.h"

namespace {

using linkfit::Result;
using linkfit::topology::TopologySpec;

void CheckAccepted(const Result<TopologySpec>& spec) {
  if (!spec) return;
  const std::size_t n = spec->gpus.size();
  if (n == 0 || n > linkfit::topology::kMaxGpus) std::abort();
  for (std::size_t g = 0; g < n; ++g) {
    if (spec->gpus[g].index != static_cast<int>(g)) std::abort();
  }
  if (spec->links.size() != n * (n - 1) / 2) std::abort();
  for (const linkfit::topology::NicSpec& nic : spec->nics) {
    if (nic.gpu_relations.size() != n) std::abort();
  }
  if (!linkfit::topology::BuildTopology(*spec)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The public entry point (JSON goes to the document parser: must not crash either), then the
  // nvidia-smi path it takes for text, whose results are checked.
  (void)linkfit::topology::ParseTopologyText(text);
  CheckAccepted(linkfit::topology::internal::ParseNvidiaSmiText(text));

  // A NUL byte splits the input into the two arguments, so that each is fuzzed on its own.
  const std::size_t nul = text.find('\0');
  if (nul != std::string_view::npos) {
    CheckAccepted(linkfit::topology::ParseNvidiaSmi(text.substr(0, nul), text.substr(nul + 1)));
  }
  return 0;
}
