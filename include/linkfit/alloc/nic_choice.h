#pragma once

// GPUs and RDMA NICs chosen together (issue 37).
//
// NicCloseness: how close each GPU's NIC must (or should) be, read from the PCIe relation
// `nvidia-smi topo -m` prints between the two (topology::PcieRelation):
//
//   pix   under one PCIe switch (PIX)
//   pxb   through PCIe switches only, no host bridge (PIX, PXB): NCCL uses GPUDirect RDMA at
//         this distance by default (NCCL_NET_GDR_LEVEL); the default level
//   numa  on one NUMA node (PIX, PXB, PHB, NODE): staged through host memory, same socket
//   node  anywhere on the node (SYS too)
//
// NicRequest: `count` NICs (one per GPU of the pod by default), each with `milli` thousandths of
// the NIC: 1000 is the whole NIC, held by this pod alone; less is a share, packed like GPU shares.
//
// Thread-safety: plain values and pure functions.

#include <algorithm>
#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/alloc/closeness.h"
#include "linkfit/common/result.h"
#include "linkfit/topology/spec.h"

namespace linkfit::alloc {

enum class NicCloseness : std::uint8_t { kPix = 0, kPxb = 1, kNuma = 2, kNode = 3 };

// Parses "pix", "pxb", "numa", "node" (exact, lower case).
Result<NicCloseness> ParseNicCloseness(std::string_view text);
std::string_view ToString(NicCloseness closeness);
// "PXB or closer", "on the GPU's NUMA node": the level in a filter reason.
std::string_view Describe(NicCloseness closeness);
// Whether a GPU-NIC pair at `relation` is at `closeness` or closer.
bool Within(topology::PcieRelation relation, NicCloseness closeness);

struct NicRequest {
  static constexpr int kPerGpu = -1;
  static constexpr int kWhole = 1000;
  // NICs asked for: kPerGpu = one per GPU of the pod (one for a pod without GPUs); 0 = none.
  int count = 0;
  // Thousandths of each NIC: kWhole = the whole NIC (no other pod on it), 1..999 = a share.
  int milli = kWhole;
  NicCloseness closeness = NicCloseness::kPxb;
  ClosenessPolicy policy = ClosenessPolicy::kPreferred;

  bool wanted() const { return count != 0; }
  // The NICs a pod of `gpus` GPUs gets.
  int CountFor(int gpus) const { return count == kPerGpu ? std::max(gpus, 1) : count; }
  // "1 NIC per GPU at pxb", "2 NICs x 250/1000 at numa, required".
  std::string Describe() const;
  friend bool operator==(const NicRequest&, const NicRequest&) = default;
};

// A set of NICs of one node, bit i = NIC i (topology::Topology::nics() order).
using NicMask = std::bitset<topology::kMaxNics>;

}  // namespace linkfit::alloc
