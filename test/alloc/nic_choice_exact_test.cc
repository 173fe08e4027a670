// The joint GPU+NIC choice against a brute force over every GPU set, NIC set and pairing, on
// the fixtures with NICs and on machines with random NIC placements (the objective is the one
// nic_choice.h states; only the GPU-side figures, ring/sum/span/look-ahead, come from the
// placement table, whose own tests check them against their brute force).

#include <algorithm>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "linkfit/alloc/nic_choice.h"
#include "linkfit/common/strings.h"
#include "testing/fixtures.h"

namespace linkfit::alloc {
namespace {

using topology::GpuMask;
using topology::PcieRelation;
using topology::Topology;
using topology::TopologyPtr;

struct Keys {  // terms 4-8 with 4b
  int close = 0, rails = 0, relation = 0, untouched = 0, left = 0, damage = 0;
  std::vector<int> nics;  // ascending
};

// -1: a better; 1: b better; 0: equal on terms 4-8.
int CompareKeys(const Keys& a, const Keys& b) {
  auto more = [](int x, int y) { return x == y ? 0 : (x > y ? -1 : 1); };
  if (int o = more(a.close, b.close)) return o;
  if (int o = more(a.rails, b.rails)) return o;
  if (int o = more(a.relation, b.relation)) return o;
  if (int o = -more(a.untouched, b.untouched)) return o;
  if (int o = -more(a.left, b.left)) return o;
  return -more(a.damage, b.damage);
}

// The set holding the lowest index where two differ.
bool LowerSet(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> only_a, only_b;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(only_a));
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(only_b));
  if (only_a.empty() || only_b.empty()) return false;  // equal sets (the sizes are equal)
  return only_a.front() < only_b.front();
}

struct Brute {
  const Topology& topo;
  const NicAvailability& avail;
  const NicRequest& request;

  int Rel(int nic, int gpu) const { return static_cast<int>(topo.nic_relation(nic, gpu)); }
  bool Close(int nic, int gpu) const {
    return Within(topo.nic_relation(nic, gpu), request.closeness);
  }
  std::vector<int> Takers() const {
    std::vector<int> out;
    for (int n = 0; n < topo.nic_count(); ++n) {
      const auto at = static_cast<std::size_t>(n);
      if (!avail.excluded.test(at) && avail.free_milli[at] >= request.milli) out.push_back(n);
    }
    return out;
  }
  Keys Own(const std::vector<int>& nics, GpuMask free_after) const {
    Keys keys;
    keys.nics = nics;
    for (int n : nics) {
      const int free = avail.free_milli[static_cast<std::size_t>(n)];
      keys.untouched += free == 1000 ? 1 : 0;
      keys.left += free - request.milli;
      keys.rails += request.rails.test(
                        static_cast<std::size_t>(topo.nics()[static_cast<std::size_t>(n)].rail))
                        ? 1
                        : 0;
      for (int g = 0; g < topo.gpu_count(); ++g) {
        keys.damage += ((free_after >> g) & 1) != 0 && Close(n, g) ? 1 : 0;
      }
    }
    return keys;
  }
  // The best keys for GPU list `gpus` with NIC set `nics` over every pairing.
  Keys Best(const std::vector<int>& gpus, const std::vector<int>& nics, GpuMask free_after) const {
    Keys best = Own(nics, free_after);
    if (nics.size() < gpus.size()) {
      for (int g : gpus) {
        int pick = nics.front();
        for (int n : nics) {
          if (Close(n, g) != Close(pick, g) ? Close(n, g) : Rel(n, g) > Rel(pick, g)) pick = n;
        }
        best.close += Close(pick, g) ? 1 : 0;
        best.relation += Rel(pick, g);
      }
      return best;
    }
    std::vector<int> order = nics;  // order[j] serves gpus[j] for j < g; the rest are extras
    std::optional<Keys> top;
    do {
      Keys keys = Own(nics, free_after);
      for (std::size_t j = 0; j < order.size(); ++j) {
        if (j < gpus.size()) {
          keys.close += Close(order[j], gpus[j]) ? 1 : 0;
          keys.relation += Rel(order[j], gpus[j]);
        } else {
          int rel = 0;
          for (int g : gpus) rel = std::max(rel, Rel(order[j], g));
          keys.relation += rel;
        }
      }
      if (!top || CompareKeys(keys, *top) < 0) top = keys;
    } while (std::next_permutation(order.begin(), order.end()));
    return *top;
  }
  // The best NIC keys for a GPU set (nullopt: too few NICs).
  std::optional<Keys> ForSet(GpuMask set, GpuMask free_after) const {
    const std::vector<int> gpus = MaskToIndexes(set);
    const std::vector<int> takers = Takers();
    const std::size_t k = static_cast<std::size_t>(request.CountFor(static_cast<int>(gpus.size())));
    if (takers.size() < k) return std::nullopt;
    std::optional<Keys> best;
    std::vector<bool> pick(takers.size(), false);
    std::fill(pick.begin(), pick.begin() + static_cast<std::ptrdiff_t>(k), true);
    do {
      std::vector<int> nics;
      for (std::size_t i = 0; i < takers.size(); ++i) {
        if (pick[i]) nics.push_back(takers[i]);
      }
      const Keys keys = Best(gpus, nics, free_after);
      const int order = best ? CompareKeys(keys, *best) : -1;
      if (order < 0 || (order == 0 && LowerSet(keys.nics, best->nics))) best = keys;
    } while (std::prev_permutation(pick.begin(), pick.end()));
    return best;
  }
};

struct Expected {
  bool fits = false;
  GpuMask gpus = 0;
  Keys keys;
};

Expected BruteForce(const PlacementTable& table, GpuMask free, const NicAvailability& avail,
                    const WholeGpuRequest& gpus, const NicRequest& request) {
  const Brute brute{table.topology(), avail, request};
  struct Option {
    GpuMask set;
    Keys keys;
    bool meets, aligned;
  };
  std::vector<Option> options;
  const bool level = gpus.closeness != Closeness::kNode && gpus.gpus > 1;
  for (unsigned s = free; s != 0; s = (s - 1) & free) {
    const auto set = static_cast<GpuMask>(s);
    if (__builtin_popcount(s) != gpus.gpus) continue;
    const auto keys = brute.ForSet(set, static_cast<GpuMask>(free & ~set));
    if (!keys) return {};
    const bool meets = !level || table.Meets(set, gpus.closeness);
    const bool aligned = keys->close == gpus.gpus;
    if (level && gpus.policy == ClosenessPolicy::kRequired && !meets) continue;
    if (request.policy == ClosenessPolicy::kRequired && !aligned) continue;
    options.push_back({set, *keys, meets, aligned});
  }
  if (options.empty()) return {};
  auto prefer = [&](auto keep) {
    std::vector<Option> kept;
    for (const Option& o : options) {
      if (keep(o)) kept.push_back(o);
    }
    if (!kept.empty()) options = kept;
  };
  prefer([](const Option& o) { return o.meets; });
  prefer([](const Option& o) { return o.aligned; });
  auto better = [&](const Option& a, const Option& b) {
    const SetQuality qa = table.Quality(a.set), qb = table.Quality(b.set);
    if (qa.ring_mbps != qb.ring_mbps) return qa.ring_mbps > qb.ring_mbps;
    if (qa.sum_mbps != qb.sum_mbps) return qa.sum_mbps > qb.sum_mbps;
    if (qa.numa_span != qb.numa_span) return qa.numa_span < qb.numa_span;
    const auto la = table.Lookahead(static_cast<GpuMask>(free & ~a.set));
    const auto lb = table.Lookahead(static_cast<GpuMask>(free & ~b.set));
    if (la != lb) return la > lb;
    if (a.keys.rails != b.keys.rails) return a.keys.rails > b.keys.rails;
    return LowerSet(MaskToIndexes(a.set), MaskToIndexes(b.set));
  };
  const Option best =
      *std::min_element(options.begin(), options.end(),
                        [&](const Option& a, const Option& b) { return better(a, b); });
  return {true, best.set, best.keys};
}

// A copy of `base`'s GPUs with `nic_count` NICs placed at random relations.
TopologyPtr WithRandomNics(const Topology& base, int nic_count, std::mt19937& rng) {
  topology::TopologySpec spec = base.spec();
  spec.nics.clear();
  for (int n = 0; n < nic_count; ++n) {
    topology::NicSpec nic;
    nic.name = "mlx5_" + std::to_string(n);
    for (int g = 0; g < base.gpu_count(); ++g) {
      nic.gpu_relations.push_back(static_cast<PcieRelation>(rng() % 5));
    }
    spec.nics.push_back(nic);
  }
  auto built = topology::BuildTopology(std::move(spec));
  EXPECT_TRUE(built) << (built ? "" : built.error().message);
  return built ? *built : nullptr;
}

// Cases checked, cases that fit, cases that fit aligned: the test asserts each kind is common.
struct Tally {
  int checked = 0, fitting = 0, aligned = 0;
};

void CheckRandomCases(const PlacementTable& table, int cases, int max_gpus, std::mt19937& rng,
                      Tally& tally) {
  int& checked = tally.checked;
  int& fitting = tally.fitting;
  int& aligned = tally.aligned;
  const Topology& topo = table.topology();
  const int n = topo.gpu_count();
  for (int c = 0; c < cases; ++c) {
    const auto free = static_cast<GpuMask>((rng() | rng()) & topo.all_gpus());
    NicAvailability avail;
    for (int i = 0; i < topo.nic_count(); ++i) {
      // Mostly free; some shared (750, 500 left), some full, some excluded.
      const int roll = static_cast<int>(rng() % 8);
      if (roll == 7) avail.excluded.set(static_cast<std::size_t>(i));
      avail.free_milli.push_back(roll <= 3 ? 1000 : roll == 4 ? 750 : roll == 5 ? 500 : 0);
    }
    WholeGpuRequest gpus;
    gpus.gpus = 1 + static_cast<int>(rng() % static_cast<unsigned>(std::min(max_gpus, n)));
    gpus.closeness = static_cast<Closeness>(rng() % kClosenessLevels);
    gpus.policy = rng() % 3 == 0 ? ClosenessPolicy::kRequired : ClosenessPolicy::kPreferred;
    NicRequest request;
    request.count = rng() % 2 == 0 ? NicRequest::kPerGpu : 1 + static_cast<int>(rng() % 3);
    request.milli = rng() % 2 == 0 ? 1000 : 250 * (1 + static_cast<int>(rng() % 3));
    request.closeness = static_cast<NicCloseness>(rng() % 4);
    request.policy = rng() % 3 == 0 ? ClosenessPolicy::kRequired : ClosenessPolicy::kPreferred;
    if (rng() % 2 == 0) {  // a group already on some rails
      for (int r = 0; r < topo.nic_count(); ++r) {
        if (rng() % 3 == 0) request.rails.set(static_cast<std::size_t>(r));
      }
    }
    ++checked;
    const JointPlacement got = PlaceWholeGpusWithNics(table, free, avail, gpus, request);
    const Expected want = BruteForce(table, free, avail, gpus, request);
    const std::string where =
        topo.spec().id + " case " + std::to_string(c) + ": free " + std::to_string(free) + ", " +
        std::to_string(gpus.gpus) + " GPUs at " + std::string(ToString(gpus.closeness)) +
        (gpus.policy == ClosenessPolicy::kRequired ? " required, " : ", ") + request.Describe() +
        "; NICs free " + JoinInts(avail.free_milli) + " excluded " +
        avail.excluded.to_string().substr(topology::kMaxNics - 12);
    ASSERT_EQ(got.fits(), want.fits) << where << ": " << got.gpus.reason << got.nics.reason;
    if (!want.fits) {
      EXPECT_FALSE(got.gpus.reason.empty() && got.nics.reason.empty()) << where;
      continue;
    }
    ++fitting;
    aligned += want.keys.close == gpus.gpus ? 1 : 0;
    ASSERT_EQ(got.gpus.gpus, want.gpus) << where;
    std::vector<int> nics;
    for (const NicPick& pick : got.nics.nics) {
      nics.push_back(pick.nic);
      EXPECT_EQ(pick.milli, request.milli) << where;
    }
    EXPECT_EQ(nics, want.keys.nics) << where;
    EXPECT_EQ(got.nics.close_gpus, want.keys.close) << where;
    EXPECT_EQ(got.nics.aligned, want.keys.close == gpus.gpus) << where;
    EXPECT_EQ(got.nics.aligned, got.nics.far_gpus == 0) << where;
  }
}

// The real published `nvidia-smi topo -m` outputs with NIC columns (sources in
// config/topologies/README.md).
TopologyPtr LoadSmiSample(const std::string& file) {
  auto spec = topology::ParseNvidiaSmi(
      testing::ReadFileOrDie(testing::SourcePath("test/data/nvidia-smi/nics/" + file)), "");
  EXPECT_TRUE(spec) << file << ": " << (spec ? "" : spec.error().message);
  if (!spec) return nullptr;
  spec->id = file;
  auto built = topology::BuildTopology(std::move(*spec));
  EXPECT_TRUE(built) << file << ": " << (built ? "" : built.error().message);
  return built ? *built : nullptr;
}

TEST(NicChoiceExact, MatchesTheBruteForceOnPublishedMachinesWithNics) {
  std::mt19937 rng(37);
  for (const std::string file : {"hgx-h100-9nic-nccl1453.topo.txt",
                                 "l40s-4x-2socket-nics-one-socket-missalignment106.topo.txt",
                                 "v100-8x-mlx5-columns-nccltests29.topo.txt",
                                 "dgx-a100-12nic-mlx5-columns-ucxpy749.topo.txt",
                                 "h800-8x-topo-mp-nic-per-gpu-pair-tzhelloworld.topo.txt"}) {
    const TopologyPtr topo = LoadSmiSample(file);
    ASSERT_TRUE(topo);
    ASSERT_GT(topo->nic_count(), 0) << file;
    const PlacementTablePtr table = PlacementTable::Build(topo);
    Tally tally;
    CheckRandomCases(*table, 200, 4, rng, tally);
    EXPECT_GT(tally.fitting, tally.checked / 5) << file;  // 48 of 200 on the L40S box
    EXPECT_GT(tally.aligned, tally.fitting / 4) << file;
    EXPECT_LT(tally.aligned, tally.fitting) << file;
  }
}

TEST(NicChoiceExact, MatchesTheBruteForceOnRandomNicPlacements) {
  std::mt19937 rng(2025);
  for (const std::string id : {"pcie-8x-l40s-2socket", "dgx-h100", "ws-4x-rtxa6000-nvlink-pairs"}) {
    const TopologyPtr base = testing::LoadFixture(id);
    ASSERT_TRUE(base);
    Tally tally;
    for (int round = 0; round < 8; ++round) {
      const TopologyPtr topo = WithRandomNics(*base, 1 + static_cast<int>(rng() % 6), rng);
      ASSERT_TRUE(topo);
      CheckRandomCases(*PlacementTable::Build(topo), 40, 4, rng, tally);
    }
    EXPECT_GT(tally.fitting, tally.checked / 4) << id;
    EXPECT_GT(tally.aligned, tally.fitting / 4) << id;
    EXPECT_LT(tally.aligned, tally.fitting) << id;
  }
}

// ChooseNics on GPU sets chosen elsewhere (GPU shares, MIG, pods without GPUs).
TEST(NicChoiceExact, ChooseNicsMatchesTheBruteForceForAnyGpuSet) {
  std::mt19937 rng(38);
  const TopologyPtr topo = LoadSmiSample("hgx-h100-9nic-nccl1453.topo.txt");
  ASSERT_TRUE(topo);
  int without_gpus = 0;
  for (int c = 0; c < 300; ++c) {
    const auto gpus = static_cast<GpuMask>(rng() & rng() & rng() & topo->all_gpus());
    const auto free_after = static_cast<GpuMask>(rng() & topo->all_gpus() & ~gpus);
    NicAvailability avail;
    for (int i = 0; i < topo->nic_count(); ++i) {
      const int roll = static_cast<int>(rng() % 8);
      if (roll == 7) avail.excluded.set(static_cast<std::size_t>(i));
      avail.free_milli.push_back(roll <= 3 ? 1000 : roll == 4 ? 750 : roll == 5 ? 500 : 0);
    }
    NicRequest request;
    request.count = rng() % 2 == 0 ? NicRequest::kPerGpu : 1 + static_cast<int>(rng() % 3);
    request.milli = rng() % 2 == 0 ? 1000 : 250;
    request.closeness = static_cast<NicCloseness>(rng() % 4);
    for (int r = 0; r < topo->nic_count(); ++r) {
      if (rng() % 3 == 0) request.rails.set(static_cast<std::size_t>(r));
    }
    const NicChoice got = ChooseNics(*topo, gpus, free_after, avail, request);
    const auto want = Brute{*topo, avail, request}.ForSet(gpus, free_after);
    const std::string where =
        "case " + std::to_string(c) + ", GPUs " + std::to_string(gpus) + ", " + request.Describe();
    ASSERT_EQ(got.fits, want.has_value()) << where << ": " << got.reason;
    without_gpus += gpus == 0 ? 1 : 0;
    if (!want) continue;
    std::vector<int> nics;
    for (const NicPick& pick : got.nics) nics.push_back(pick.nic);
    EXPECT_EQ(nics, want->nics) << where;
    EXPECT_EQ(got.close_gpus, want->close) << where;
    EXPECT_EQ(got.aligned, want->close == __builtin_popcount(gpus)) << where;
  }
  EXPECT_GT(without_gpus, 10);
}

// A 2-GPU node: GPU 0 with NICs a (PIX) and b (PXB), GPU 1 with NIC c (PIX), d across sockets.
TopologyPtr TwoGpusFourNics() {
  topology::TopologySpec spec = testing::LoadFixture("ws-4x-rtxa6000-nvlink-pairs")->spec();
  spec.gpus.resize(2);
  std::erase_if(spec.links, [](const topology::LinkSpec& l) { return l.a > 1 || l.b > 1; });
  spec.pcie_tree.clear();
  const std::vector<std::pair<std::string, std::vector<PcieRelation>>> nics{
      {"mlx5_a", {PcieRelation::kPix, PcieRelation::kSys}},
      {"mlx5_b", {PcieRelation::kPxb, PcieRelation::kSys}},
      {"mlx5_c", {PcieRelation::kSys, PcieRelation::kPix}},
      {"mlx5_d", {PcieRelation::kSys, PcieRelation::kSys}}};
  for (const auto& [name, relations] : nics) {
    topology::NicSpec nic;
    nic.name = name;
    nic.gpu_relations = relations;
    spec.nics.push_back(nic);
  }
  auto built = topology::BuildTopology(std::move(spec));
  EXPECT_TRUE(built) << (built ? "" : built.error().message);
  return built ? *built : nullptr;
}

TEST(NicChoice, RequiredClosenessNamesTheNicsInTheWay) {
  const TopologyPtr topo = TwoGpusFourNics();
  ASSERT_TRUE(topo);
  const PlacementTablePtr table = PlacementTable::Build(topo);
  NicAvailability avail{{1000, 1000, 0, 1000}, {}};  // mlx5_c is taken
  WholeGpuRequest gpus;
  gpus.gpus = 2;
  NicRequest request;
  request.count = NicRequest::kPerGpu;
  request.policy = ClosenessPolicy::kRequired;
  const JointPlacement refused = PlaceWholeGpusWithNics(*table, 0b11, avail, gpus, request);
  EXPECT_FALSE(refused.fits());
  EXPECT_EQ(refused.nics.reason, "no 2 free GPUs with a NIC PXB or closer each: NIC 2 in use");
  EXPECT_FALSE(refused.nics.unresolvable);

  // Preferred: GPU 0 gets mlx5_a (PIX beats PXB); GPU 1 the lowest of the NICs as far as any
  // (b and d are both SYS to it, and no free GPU is left for either to serve later).
  request.policy = ClosenessPolicy::kPreferred;
  const JointPlacement preferred = PlaceWholeGpusWithNics(*table, 0b11, avail, gpus, request);
  ASSERT_TRUE(preferred.fits());
  EXPECT_FALSE(preferred.nics.aligned);
  EXPECT_EQ(preferred.nics.far_gpus, 0b10);
  EXPECT_EQ(preferred.nics.nics, (std::vector<NicPick>{{0, 1000, 0}, {1, 1000, 1}}));
  EXPECT_EQ(preferred.nics.reason, "no NIC PXB or closer for GPUs 1 (NIC 2 in use)");

  avail.excluded.set(0);  // a and b both unusable: too few NICs for two
  avail.free_milli[0] = 0;
  avail.free_milli[1] = 0;
  const JointPlacement short_of_nics = PlaceWholeGpusWithNics(*table, 0b11, avail, gpus, request);
  EXPECT_FALSE(short_of_nics.fits());
  EXPECT_EQ(short_of_nics.nics.reason,
            "needs 2 NICs to itself, 1 of 4 can take it (NICs 1,2 in use; NIC 0 down or a virtual "
            "function)");
}

// On a DGX H100 every GPU pair is alike over NVSwitch: without rails a 2-GPU pod takes GPUs 0
// and 1; a member of a group whose pods hold NICs on rails 4 and 5 takes the GPUs beside them.
TEST(NicChoice, AGroupsRailsChooseAmongEqualGpuSets) {
  const TopologyPtr topo = testing::LoadFixture("dgx-h100");
  ASSERT_TRUE(topo);
  const PlacementTablePtr table = PlacementTable::Build(topo);
  NicAvailability avail;
  avail.free_milli.assign(static_cast<std::size_t>(topo->nic_count()), 1000);
  WholeGpuRequest gpus;
  gpus.gpus = 2;
  NicRequest request;
  request.count = NicRequest::kPerGpu;
  const JointPlacement plain = PlaceWholeGpusWithNics(*table, 0xff, avail, gpus, request);
  ASSERT_TRUE(plain.fits());
  EXPECT_EQ(plain.gpus.gpus, 0b11);
  request.rails.set(4).set(5);
  const JointPlacement railed = PlaceWholeGpusWithNics(*table, 0xff, avail, gpus, request);
  ASSERT_TRUE(railed.fits());
  EXPECT_TRUE(railed.nics.aligned);
  std::vector<int> rails;
  for (const NicPick& pick : railed.nics.nics) {
    rails.push_back(topo->nics()[static_cast<std::size_t>(pick.nic)].rail);
  }
  EXPECT_EQ(rails, (std::vector<int>{4, 5}));
  EXPECT_EQ(request.Describe(), "1 NIC per GPU at pxb, rails 4,5");
  // The rails never cost GPU quality: with GPUs 4 and 5 taken the pod keeps an aligned pair
  // elsewhere.
  const JointPlacement elsewhere = PlaceWholeGpusWithNics(*table, 0xcf, avail, gpus, request);
  ASSERT_TRUE(elsewhere.fits());
  EXPECT_TRUE(elsewhere.nics.aligned);
  EXPECT_EQ(elsewhere.gpus.gpus & 0x30, 0);
}

TEST(NicChoice, SharesPackOntoNicsInUse) {
  const TopologyPtr topo = TwoGpusFourNics();
  ASSERT_TRUE(topo);
  NicRequest request;
  request.count = NicRequest::kPerGpu;
  request.milli = 250;
  request.closeness = NicCloseness::kNode;
  // GPU 0: a (PIX) is untouched, b (PXB) has 500 free: the closer pair comes first (term 5),
  // before packing (term 6).
  NicAvailability avail{{1000, 500, 1000, 1000}, {}};
  NicChoice choice = ChooseNics(*topo, 0b01, 0, avail, request);
  ASSERT_TRUE(choice.fits);
  EXPECT_EQ(choice.nics, (std::vector<NicPick>{{0, 250, 0}}));
  // A pod without GPUs: every NIC is equally close, so the one in use takes the share.
  avail = NicAvailability{{1000, 1000, 1000, 750}, {}};
  request.closeness = NicCloseness::kNode;
  choice = ChooseNics(*topo, 0, 0, avail, request);  // a pod without GPUs
  ASSERT_TRUE(choice.fits);
  EXPECT_TRUE(choice.aligned);
  EXPECT_EQ(choice.nics, (std::vector<NicPick>{{3, 250, -1}}));
}

}  // namespace
}  // namespace linkfit::alloc
