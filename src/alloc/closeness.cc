#include "linkfit/alloc/closeness.h"

#include <string>

#include "linkfit/common/strings.h"

namespace linkfit::alloc {

Result<Closeness> ParseCloseness(std::string_view text) {
  if (text == "nvlink") return Closeness::kNvlink;
  if (text == "pcie-switch") return Closeness::kPcieSwitch;
  if (text == "numa") return Closeness::kNuma;
  if (text == "socket") return Closeness::kSocket;
  if (text == "node") return Closeness::kNode;
  return MakeError("unknown closeness " + QuoteForMessage(text) +
                   " (expected nvlink, pcie-switch, numa, socket or node)");
}

std::string_view ToString(Closeness closeness) {
  switch (closeness) {
    case Closeness::kNvlink:
      return "nvlink";
    case Closeness::kPcieSwitch:
      return "pcie-switch";
    case Closeness::kNuma:
      return "numa";
    case Closeness::kSocket:
      return "socket";
    case Closeness::kNode:
      return "node";
  }
  return "node";
}

Result<ClosenessPolicy> ParseClosenessPolicy(std::string_view text) {
  if (text == "required") return ClosenessPolicy::kRequired;
  if (text == "preferred") return ClosenessPolicy::kPreferred;
  return MakeError("unknown closeness policy " + QuoteForMessage(text) +
                   " (expected required or preferred)");
}

std::string_view ToString(ClosenessPolicy policy) {
  return policy == ClosenessPolicy::kRequired ? "required" : "preferred";
}

}  // namespace linkfit::alloc
