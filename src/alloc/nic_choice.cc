#include "linkfit/alloc/nic_choice.h"

#include <string>
#include <vector>

#include "linkfit/common/strings.h"

namespace linkfit::alloc {

Result<NicCloseness> ParseNicCloseness(std::string_view text) {
  if (text == "pix") return NicCloseness::kPix;
  if (text == "pxb") return NicCloseness::kPxb;
  if (text == "numa") return NicCloseness::kNuma;
  if (text == "node") return NicCloseness::kNode;
  return MakeError("unknown NIC closeness " + QuoteForMessage(text) +
                   " (expected pix, pxb, numa or node)");
}

std::string_view ToString(NicCloseness closeness) {
  switch (closeness) {
    case NicCloseness::kPix:
      return "pix";
    case NicCloseness::kPxb:
      return "pxb";
    case NicCloseness::kNuma:
      return "numa";
    case NicCloseness::kNode:
      return "node";
  }
  return "node";
}

std::string_view Describe(NicCloseness closeness) {
  switch (closeness) {
    case NicCloseness::kPix:
      return "PIX";
    case NicCloseness::kPxb:
      return "PXB or closer";
    case NicCloseness::kNuma:
      return "on the GPU's NUMA node";
    case NicCloseness::kNode:
      return "on the node";
  }
  return "on the node";
}

bool Within(topology::PcieRelation relation, NicCloseness closeness) {
  using topology::PcieRelation;
  switch (closeness) {
    case NicCloseness::kPix:
      return relation == PcieRelation::kPix;
    case NicCloseness::kPxb:
      return relation == PcieRelation::kPix || relation == PcieRelation::kPxb;
    case NicCloseness::kNuma:
      return relation != PcieRelation::kSys;
    case NicCloseness::kNode:
      return true;
  }
  return true;
}

std::string NicRequest::Describe() const {
  if (count == 0) return "no NIC";
  std::string text =
      count == kPerGpu ? "1 NIC per GPU" : std::to_string(count) + (count == 1 ? " NIC" : " NICs");
  if (milli != kWhole) text += " x " + std::to_string(milli) + "/1000";
  text += " at " + std::string(ToString(closeness));
  if (policy == ClosenessPolicy::kRequired) text += ", required";
  if (rails.any()) {
    std::vector<int> listed;
    for (std::size_t r = 0; r < rails.size(); ++r) {
      if (rails.test(r)) listed.push_back(static_cast<int>(r));
    }
    text += std::string(listed.size() == 1 ? ", rail " : ", rails ") + JoinInts(listed);
  }
  return text;
}

}  // namespace linkfit::alloc
