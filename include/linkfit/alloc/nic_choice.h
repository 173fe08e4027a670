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
// The objective, for a pod of g whole GPUs asking k NICs. A candidate is a GPU set S and a NIC
// set N of k NICs that can take the request (a whole NIC: unused; a share: enough left), each
// NIC serving a GPU of S: when k >= g every GPU has its own NIC and the k - g others serve the
// GPU they are closest to; when k < g every GPU uses the closest NIC of N. A GPU is "close" when
// its NIC is at the asked closeness; S is "aligned" when some N makes all of its GPUs close.
// Candidates compare on, in order:
//   1. S meets the pod's GPU closeness (required: only such S)
//   2. S is aligned (NIC closeness required: only aligned S)
//   3. the GPU objective of PlacementTable (ring, sum, span, look-ahead), then, for a pod whose
//      group already holds NICs on some rails (`rails`), the most NICs of S's best N on those
//      rails, then the lowest GPU indexes: a total order, so it settles S
//   then, for that S, N and its pairing:
//   4. the most close GPUs
//   4b. the most NICs on the group's rails (pods of one training job that talk across nodes
//      rail to rail keep their traffic on one leaf switch of a rail-optimized fabric)
//   5. the closest pairs: the sum of each pair's PCIe relation (PIX 4 .. SYS 0); an unpaired
//      NIC counts its relation to its closest GPU of S
//   6. the fewest NICs nobody used before (shares pack: whole NICs stay whole)
//   7. the least share left over on the chosen NICs (best fit)
//   8. the least future damage: over the chosen NICs, the GPUs left free at the asked
//      closeness of each (a NIC next to free GPUs is worth keeping)
//   9. the lowest NIC indexes (the set holding the lowest NIC where two differ)
// ChooseNics applies 4-9 to a GPU set already chosen (pods of GPU shares, MIG instances, no GPU);
// PlaceWholeGpusWithNics chooses S and N together. Both are exact: the tests compare them with
// a brute force over every (S, N) and pairing.
//
// Cost: when the GPU set the placement table picks (a lookup) is aligned and the pod names no
// rails, it is S; otherwise the
// GPU sets of the asked size inside the free GPUs (70 for 4 of 8) are each checked for alignment
// by a bipartite matching. N then comes from a dynamic program over NICs in index order and the
// GPUs already paired (2^g states: 256 for 8 GPUs), or, when fewer NICs than GPUs are asked,
// from the NIC sets that differ in what they offer. Callers memoize per node state.
//
// Thread-safety: plain values and pure functions.

#include <algorithm>
#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/alloc/closeness.h"
#include "linkfit/alloc/placement_table.h"
#include "linkfit/common/result.h"
#include "linkfit/topology/spec.h"
#include "linkfit/topology/topology.h"

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
  // The rails (topology::NicSpec::rail) the members of the pod's group already placed hold NICs
  // on: preferred (terms 3 and 4b above); empty: no preference.
  std::bitset<topology::kMaxNics> rails;

  bool wanted() const { return count != 0; }
  // The NICs a pod of `gpus` GPUs gets.
  int CountFor(int gpus) const { return count == kPerGpu ? std::max(gpus, 1) : count; }
  // "1 NIC per GPU at pxb", "2 NICs x 250/1000 at numa, required", "... at pxb, rails 0,1".
  std::string Describe() const;
  friend bool operator==(const NicRequest&, const NicRequest&) = default;
};

// A set of NICs of one node, bit i = NIC i (topology::Topology::nics() order).
using NicMask = std::bitset<topology::kMaxNics>;

// What a node's NICs can take now, by NIC index (size: the node's NIC count).
struct NicAvailability {
  // Thousandths free: 1000 minus what pods hold; 0 for a NIC linkfit does not place on.
  std::vector<int> free_milli;
  // NICs linkfit does not place on (port down, SR-IOV virtual function), for the reasons.
  NicMask excluded;
};

// One NIC of a choice: its index, the thousandths taken, the GPU it serves (-1: none).
struct NicPick {
  int nic = -1;
  int milli = 0;
  int gpu = -1;
  friend bool operator==(const NicPick&, const NicPick&) = default;
};

struct NicChoice {
  bool fits = false;
  std::vector<NicPick> nics;       // ascending NIC index
  int close_gpus = 0;              // GPUs whose NIC is at the asked closeness
  bool aligned = false;            // every GPU of the pod is close (a pod without GPUs: true)
  topology::GpuMask far_gpus = 0;  // the pod's GPUs without a close NIC
  // Not aligned, but nothing is lost to it: every far GPU has a NIC of its own whose rate is
  // known and whose share of it (rate x milli / 1000) the GPU's host-memory path carries
  // (topology::Topology::staged_mbps). A quarter of a 100 Gb/s NIC (3.1 GB/s) staged on PCIe
  // gen 3 (6 GB/s) runs as fast as through GPUDirect RDMA; a whole 400 Gb/s NIC does not.
  bool staged_at_rate = false;
  // Why it does not fit, or which preference it misses; empty when neither.
  std::string reason;
  // No change of occupancy can make it fit: the node has fewer NICs than asked.
  bool unresolvable = false;
};

// The NICs for a pod that holds `gpus` (0 for none), `free_after` the node's free whole GPUs
// once it is placed (for the future damage). Fits whenever k NICs can take the request.
NicChoice ChooseNics(const topology::Topology& topology, topology::GpuMask gpus,
                     topology::GpuMask free_after, const NicAvailability& nics,
                     const NicRequest& request);

// A whole-GPU pod's GPUs and NICs together (the objective above). `gpus.fits` and `nics.fits`
// both hold when it fits; a missed preference is in gpus.reason (GPU closeness) or nics.reason.
struct JointPlacement {
  WholeGpuPlacement gpus;
  NicChoice nics;
  bool fits() const { return gpus.fits && nics.fits; }
};
JointPlacement PlaceWholeGpusWithNics(const PlacementTable& table, GpuMask free,
                                      const NicAvailability& nics, const WholeGpuRequest& gpus,
                                      const NicRequest& request);

// The most GPUs of `gpus` that can each have a NIC of their own among `nics` (bit i: NIC i may be
// taken) at `closeness`: a maximum bipartite matching of GPUs to NICs. The largest pod asking one
// NIC per GPU that these GPUs and NICs could still align (not necessarily on these same GPUs).
int GpusWithOwnCloseNic(const topology::Topology& topology, GpuMask gpus, const NicMask& nics,
                        NicCloseness closeness);

}  // namespace linkfit::alloc
