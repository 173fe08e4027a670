#pragma once

// The terms of the NIC side of the objective (nic_choice.h, terms 4-9) for one GPU set: what
// ChooseNics and the joint placement add up and compare.
//
// Thread-safety: NicTerms is immutable after construction; NicScore is a plain value.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "linkfit/alloc/nic_choice.h"

namespace linkfit::alloc {

// A partial or whole NIC choice's score. Scores of disjoint NIC sets add up.
struct NicScore {
  int close = 0;      // GPUs with a close NIC: more is better
  int rails = 0;      // NICs on the group's rails: more is better
  int relation = 0;   // summed PCIe relations of the pairs (PIX 4 .. SYS 0): more is better
  int untouched = 0;  // NICs nobody used before: fewer is better
  int left = 0;       // thousandths left free on the chosen NICs: less is better
  int damage = 0;     // free GPUs at the asked closeness of the chosen NICs: fewer is better
  std::uint64_t mask_low = 0;   // the chosen NICs: the set holding the lowest NIC where two
  std::uint64_t mask_high = 0;  // differ is better

  NicScore Plus(const NicScore& other) const {
    return NicScore{close + other.close,       rails + other.rails,
                    relation + other.relation, untouched + other.untouched,
                    left + other.left,         damage + other.damage,
                    mask_low | other.mask_low, mask_high | other.mask_high};
  }
};

// Whether `a` is strictly better than `b` (terms 4-8 with 4b, then the lowest NIC indexes).
bool BetterNics(const NicScore& a, const NicScore& b);
// Terms 4-8 with 4b only: -1 when `a` is better, 1 when `b` is, 0 when equal.
int CompareNicTerms(const NicScore& a, const NicScore& b);

class NicTerms {
 public:
  NicTerms(const topology::Topology& topology, topology::GpuMask gpus, topology::GpuMask free_after,
           const NicAvailability& nics, const NicRequest& request);

  std::vector<int> gpus;        // the pod's GPUs, ascending
  std::vector<int> candidates;  // the NICs that can take the request, ascending
  int milli = 0;

  // Candidate i serving gpus[j]; candidate i unpaired (its relation to its closest GPU).
  NicScore Pair(std::size_t i, int j) const;
  NicScore Extra(std::size_t i) const;
  bool Close(std::size_t i, int j) const;
  // The GPU of the pod candidate i is closest to (the lowest of equals); -1 without GPUs.
  int ClosestGpu(std::size_t i) const;
  // What makes candidate i interchangeable with another for this GPU set.
  std::vector<int> KindOf(std::size_t i) const;

  // Fewer NICs than GPUs: the score of candidates `set` when each GPU uses its closest NIC of
  // the set (the lowest of equals); the GPU each NIC serves first (-1: none); the GPUs left
  // without a close NIC.
  NicScore Covering(const std::vector<std::size_t>& set) const;
  std::vector<int> ServedGpus(const std::vector<std::size_t>& set) const;
  topology::GpuMask FarGpus(const std::vector<std::size_t>& set) const;

  // Every NIC of the node at the asked closeness of any GPU of `gpus`.
  NicMask ReachOf(topology::GpuMask gpus) const;

 private:
  int Relation(std::size_t i, std::size_t j) const { return relation_[i * gpus.size() + j]; }
  // The position in the set of the NIC GPU j uses (Covering's rule).
  std::size_t ClosestInSet(const std::vector<std::size_t>& set, std::size_t j) const;

  const topology::Topology& topology_;
  NicCloseness closeness_;
  std::vector<NicScore> own_;  // per candidate: untouched, left, damage, mask
  std::vector<int> relation_;  // [candidate * gpus + j]: PcieRelation as an int
};

// "NICs 2,3 in use; NIC 7 down or virtual functions": which NICs of `only` cannot take `milli`
// thousandths; empty when all can. By index, not name: nodes in one state share one answer (the
// callers memoize per state), and names are the node's own (`linkfit explain` shows them).
std::string DescribeUnavailableNics(const topology::Topology& topology, const NicAvailability& nics,
                                    int milli, NicMask only);

}  // namespace linkfit::alloc
