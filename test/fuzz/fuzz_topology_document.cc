// libFuzzer target: topology documents (JSON) through ParseTopologyDocument().
//
// An accepted document must survive BuildTopology() without crashing, and a spec serialised by
// ToTopologyDocument() must parse again (the node annotation round trip) with the same NICs.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "linkfit/topology/spec.h"
#include "linkfit/topology/topology.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const linkfit::Result<linkfit::topology::TopologySpec> spec =
      linkfit::topology::ParseTopologyDocument(text);
  if (!spec) return 0;
  const auto topology = linkfit::topology::BuildTopology(*spec);
  if (!topology) return 0;
  const std::string document = linkfit::topology::ToTopologyDocument(*spec);
  const auto reparsed = linkfit::topology::ParseTopologyDocument(document);
  if (!reparsed || reparsed->nics != spec->nics) std::abort();
  return 0;
}
