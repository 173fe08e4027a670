#include "alloc/nic_score.h"

#include <string>

namespace linkfit::alloc {
namespace {

// -1 when a is better, 1 when b is, 0 when equal; `more` says which way is better.
int Order(int a, int b, bool more) {
  if (a == b) return 0;
  return (a > b) == more ? -1 : 1;
}

}  // namespace

int CompareNicTerms(const NicScore& a, const NicScore& b) {
  if (int o = Order(a.close, b.close, true)) return o;
  if (int o = Order(a.rails, b.rails, true)) return o;
  if (int o = Order(a.relation, b.relation, true)) return o;
  if (int o = Order(a.untouched, b.untouched, false)) return o;
  if (int o = Order(a.left, b.left, false)) return o;
  return Order(a.damage, b.damage, false);
}

bool BetterNics(const NicScore& a, const NicScore& b) {
  if (int o = CompareNicTerms(a, b)) return o < 0;
  const std::uint64_t low = a.mask_low ^ b.mask_low;
  if (low != 0) return (a.mask_low & (low & -low)) != 0;
  const std::uint64_t high = a.mask_high ^ b.mask_high;
  return high != 0 && (a.mask_high & (high & -high)) != 0;
}

NicTerms::NicTerms(const topology::Topology& topology, topology::GpuMask gpu_mask,
                   topology::GpuMask free_after, const NicAvailability& nics,
                   const NicRequest& request)
    : milli(request.milli), topology_(topology), closeness_(request.closeness) {
  for (int g = 0; g < topology.gpu_count(); ++g) {
    if (((gpu_mask >> g) & 1) != 0) gpus.push_back(g);
  }
  for (int n = 0; n < topology.nic_count(); ++n) {
    const auto at = static_cast<std::size_t>(n);
    if (nics.excluded.test(at) || nics.free_milli[at] < request.milli) continue;
    candidates.push_back(n);
    NicScore own;
    own.untouched = nics.free_milli[at] == NicRequest::kWhole ? 1 : 0;
    own.left = nics.free_milli[at] - request.milli;
    const int rail = topology.nics()[at].rail;
    own.rails =
        rail >= 0 && rail < topology::kMaxNics && request.rails.test(static_cast<std::size_t>(rail))
            ? 1
            : 0;
    for (int g = 0; g < topology.gpu_count(); ++g) {
      if (((free_after >> g) & 1) != 0 && Within(topology.nic_relation(n, g), closeness_)) {
        ++own.damage;
      }
    }
    (n < 64 ? own.mask_low : own.mask_high) = std::uint64_t{1} << (n & 63);
    own_.push_back(own);
    for (int g : gpus) relation_.push_back(static_cast<int>(topology.nic_relation(n, g)));
  }
}

bool NicTerms::Close(std::size_t i, int j) const {
  return Within(static_cast<topology::PcieRelation>(Relation(i, static_cast<std::size_t>(j))),
                closeness_);
}

NicScore NicTerms::Pair(std::size_t i, int j) const {
  NicScore score = own_[i];
  score.close = Close(i, j) ? 1 : 0;
  score.relation = Relation(i, static_cast<std::size_t>(j));
  return score;
}

int NicTerms::ClosestGpu(std::size_t i) const {
  int best = -1;
  for (std::size_t j = 0; j < gpus.size(); ++j) {
    if (best < 0 || Relation(i, j) > Relation(i, static_cast<std::size_t>(best))) {
      best = static_cast<int>(j);
    }
  }
  return best < 0 ? -1 : gpus[static_cast<std::size_t>(best)];
}

NicScore NicTerms::Extra(std::size_t i) const {
  NicScore score = own_[i];
  for (std::size_t j = 0; j < gpus.size(); ++j) {
    score.relation = std::max(score.relation, Relation(i, j));
  }
  return score;
}

std::vector<int> NicTerms::KindOf(std::size_t i) const {
  std::vector<int> kind{own_[i].rails, own_[i].untouched, own_[i].left, own_[i].damage};
  for (std::size_t j = 0; j < gpus.size(); ++j) kind.push_back(Relation(i, j));
  return kind;
}

std::size_t NicTerms::ClosestInSet(const std::vector<std::size_t>& set, std::size_t j) const {
  std::size_t best = 0;
  for (std::size_t c = 1; c < set.size(); ++c) {
    const int gpu = static_cast<int>(j);
    const bool close = Close(set[c], gpu);
    const bool best_close = Close(set[best], gpu);
    if (close != best_close ? close : Relation(set[c], j) > Relation(set[best], j)) best = c;
  }
  return best;
}

NicScore NicTerms::Covering(const std::vector<std::size_t>& set) const {
  NicScore score;
  for (std::size_t i : set) score = score.Plus(own_[i]);
  for (std::size_t j = 0; j < gpus.size(); ++j) {
    const std::size_t i = set[ClosestInSet(set, j)];
    score.close += Close(i, static_cast<int>(j)) ? 1 : 0;
    score.relation += Relation(i, j);
  }
  return score;
}

std::vector<int> NicTerms::ServedGpus(const std::vector<std::size_t>& set) const {
  std::vector<int> serving(set.size(), -1);
  for (std::size_t j = 0; j < gpus.size(); ++j) {
    int& first = serving[ClosestInSet(set, j)];
    if (first < 0) first = gpus[j];
  }
  return serving;
}

topology::GpuMask NicTerms::FarGpus(const std::vector<std::size_t>& set) const {
  unsigned far = 0;
  for (std::size_t j = 0; j < gpus.size(); ++j) {
    if (!Close(set[ClosestInSet(set, j)], static_cast<int>(j))) far |= 1u << gpus[j];
  }
  return static_cast<topology::GpuMask>(far);
}

NicMask NicTerms::ReachOf(topology::GpuMask gpu_mask) const {
  NicMask reach;
  for (int n = 0; n < topology_.nic_count(); ++n) {
    for (int g = 0; g < topology_.gpu_count(); ++g) {
      if (((gpu_mask >> g) & 1) != 0 && Within(topology_.nic_relation(n, g), closeness_)) {
        reach.set(static_cast<std::size_t>(n));
      }
    }
  }
  return reach;
}

}  // namespace linkfit::alloc
