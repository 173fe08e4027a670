// What PodStore compares of two claims on one pod's devices (device_compare.h).

#include "cluster/device_compare.h"

#include <algorithm>
#include <string>

namespace linkfit::cluster::internal {

bool SameDevices(const state::Assignment& a, const state::Assignment& b) {
  return a.node == b.node && a.kind == b.kind && a.gpus == b.gpus && a.mig == b.mig &&
         a.shares == b.shares && a.nics == b.nics;
}

void FillReportedNics(state::Assignment& reported, const state::Assignment& recorded) {
  for (state::Assignment::NicSlot& slot : reported.nics) {
    const auto held = std::find_if(recorded.nics.begin(), recorded.nics.end(),
                                   [&](const auto& r) { return r.nic == slot.nic; });
    if (held != recorded.nics.end()) {
      slot.milli = held->milli;
      slot.gpu = held->gpu >= 0 && ((reported.gpus >> held->gpu) & 1) != 0 ? held->gpu : -1;
    }
  }
}

bool PartOf(const state::Assignment& part, const state::Assignment& whole) {
  if (part.node != whole.node || part.kind != whole.kind || (part.gpus & ~whole.gpus) != 0) {
    return false;
  }
  for (const auto& slot : part.mig) {
    if (std::find(whole.mig.begin(), whole.mig.end(), slot) == whole.mig.end()) return false;
  }
  for (const auto& share : part.shares) {
    const auto held = std::find_if(whole.shares.begin(), whole.shares.end(),
                                   [&](const auto& s) { return s.gpu == share.gpu; });
    if (held == whole.shares.end() || held->milli < share.milli) return false;
  }
  for (const auto& nic : part.nics) {
    const auto held = std::find_if(whole.nics.begin(), whole.nics.end(),
                                   [&](const auto& n) { return n.nic == nic.nic; });
    if (held == whole.nics.end() || held->milli < nic.milli) return false;
  }
  return true;
}

std::string NicDifference(const state::Assignment& reported, const state::Assignment& recorded,
                          const state::NodeInfo& node) {
  const auto& nics = node.own_topology().nics();
  const auto names = [&](const state::Assignment& assignment, const state::Assignment& other) {
    std::string out;
    for (const state::Assignment::NicSlot& slot : assignment.nics) {
      const bool shared = std::any_of(other.nics.begin(), other.nics.end(),
                                      [&](const auto& o) { return o.nic == slot.nic; });
      if (shared) continue;
      if (!out.empty()) out.append(", ");
      if (slot.nic >= 0 && static_cast<std::size_t>(slot.nic) < nics.size()) {
        out.append(nics[static_cast<std::size_t>(slot.nic)].name);
      } else {
        out.append("#").append(std::to_string(slot.nic));
      }
    }
    return out;
  };
  const std::string extra = names(reported, recorded);
  const std::string missing = names(recorded, reported);
  if (extra.empty() && missing.empty()) return "";
  std::string text = "NICs ";
  text.append(extra.empty() ? "none" : extra).append(" held, not ");
  text.append(missing.empty() ? "none" : missing).append(" as planned");
  return text;
}

}  // namespace linkfit::cluster::internal
