// FitOnNode with NICs (issue 37): whole GPUs and NICs chosen together on a DGX A100 (two NICs at
// PXB per GPU pair, config/topologies/dgx-a100.json), NICs for GPU shares and for pods without
// GPUs, refusals that name what is missing, and binds that never give a NIC twice.

#include <gtest/gtest.h>

#include "linkfit/extender/node_fit.h"
#include "linkfit/extender/scoring.h"
#include "testing/cluster.h"

namespace linkfit::extender {
namespace {

using state::Assignment;
using state::NodeState;
using state::NodeStatePtr;
using testing::Mask;

GpuRequest WholeWithNics(int gpus, int nics = alloc::NicRequest::kPerGpu, int milli = 1000,
                         alloc::ClosenessPolicy policy = alloc::ClosenessPolicy::kPreferred) {
  GpuRequest request;
  request.kind = gpus > 0 ? GpuRequest::Kind::kWhole : GpuRequest::Kind::kNone;
  request.count = gpus;
  request.nics.count = nics;
  request.nics.milli = milli;
  request.nics.policy = policy;
  return request;
}

NodeStatePtr DgxA100() {
  return std::make_shared<const NodeState>(testing::MakeNodeInfo("a100", "dgx-a100"));
}

NodeStatePtr Place(const NodeStatePtr& node, const GpuRequest& request, const std::string& uid) {
  NodeFit fit = FitOnNode(request, *node, {});
  EXPECT_TRUE(fit.fits) << uid << ": " << fit.reason;
  if (!fit.fits) return node;
  fit.assignment.pod_uid = uid;
  auto next = node->Apply(fit.assignment);
  EXPECT_TRUE(next.has_value()) << (next ? "" : next.error().message);
  EXPECT_EQ(testing::CheckConsistent(next ? **next : *node), "");
  return next ? *next : node;
}

// The GPU each NIC of a fit serves is one of the pod's, at PXB or closer.
void ExpectAligned(const NodeState& node, const NodeFit& fit) {
  EXPECT_TRUE(fit.nics_aligned) << fit.reason;
  for (const Assignment::NicSlot& slot : fit.assignment.nics) {
    ASSERT_GE(slot.gpu, 0);
    EXPECT_NE(fit.assignment.gpus & (1u << slot.gpu), 0u);
    EXPECT_TRUE(alloc::Within(node.table().topology().nic_relation(slot.nic, slot.gpu),
                              alloc::NicCloseness::kPxb));
  }
}

TEST(FitOnNodeNics, TwoGpusGetTheirPairsTwoNics) {
  const NodeStatePtr node = DgxA100();
  ASSERT_EQ(node->nic_count(), 8);
  const NodeFit fit = FitOnNode(WholeWithNics(2), *node, {});
  ASSERT_TRUE(fit.fits) << fit.reason;
  ASSERT_EQ(fit.assignment.nics.size(), 2u);
  ExpectAligned(*node, fit);
  EXPECT_EQ(fit.reason, "");
}

TEST(FitOnNodeNics, GpusFollowTheFreeNics) {
  // The NICs of GPU pairs 0-1 and 2-3 are taken: a 2-GPU pod goes where its NICs are free.
  NodeStatePtr node = DgxA100();
  Assignment nics_only;
  nics_only.pod_uid = "nic-holder";
  nics_only.node = node->name();
  for (int n = 0; n < 4; ++n) nics_only.nics.push_back({n, 1000, -1});
  auto held = node->Apply(nics_only);
  ASSERT_TRUE(held) << held.error().message;
  node = *held;
  const NodeFit fit = FitOnNode(WholeWithNics(2), *node, {});
  ASSERT_TRUE(fit.fits) << fit.reason;
  ExpectAligned(*node, fit);
  EXPECT_EQ(fit.assignment.gpus & Mask({0, 1, 2, 3}), 0) << fit.assignment.gpus;

  // Eight GPUs, one NIC each: four NICs are left, so it does not fit, and the reason says why.
  const NodeFit eight = FitOnNode(WholeWithNics(8), *node, {});
  EXPECT_FALSE(eight.fits);
  EXPECT_FALSE(eight.unresolvable) << eight.reason;
  EXPECT_NE(eight.reason.find("needs 8 NICs to itself, 4 of 8 can take it (NICs 0,1,2,3 in use)"),
            std::string::npos)
      << eight.reason;
}

TEST(FitOnNodeNics, RequiredClosenessRefusesWithTheNicsInTheWay) {
  NodeStatePtr node = DgxA100();
  // Every GPU but 0 held; GPU 0's two NICs held: GPU 0 has no NIC at PXB.
  Assignment holder;
  holder.pod_uid = "holder";
  holder.node = node->name();
  holder.gpus = Mask({1, 2, 3, 4, 5, 6, 7});
  holder.nics = {{0, 1000, 1}, {1, 1000, 1}};
  auto held = node->Apply(holder);
  ASSERT_TRUE(held) << held.error().message;
  node = *held;
  const NodeFit refused = FitOnNode(
      WholeWithNics(1, alloc::NicRequest::kPerGpu, 1000, alloc::ClosenessPolicy::kRequired), *node,
      {});
  EXPECT_FALSE(refused.fits);
  EXPECT_EQ(refused.reason, "no 1 free GPUs with a NIC PXB or closer each: NICs 0,1 in use");
  const NodeFit preferred = FitOnNode(WholeWithNics(1), *node, {});
  ASSERT_TRUE(preferred.fits) << preferred.reason;
  EXPECT_FALSE(preferred.nics_aligned);
  EXPECT_NE(preferred.reason.find("no NIC PXB or closer for GPUs 0"), std::string::npos)
      << preferred.reason;
}

TEST(FitOnNodeNics, SharesOfANicPackAndPodsWithoutGpusTakeThemToo) {
  NodeStatePtr node = DgxA100();
  // Four 1-GPU pods with a quarter of a NIC each: shares pack onto NICs already in use.
  for (int i = 0; i < 4; ++i) {
    node = Place(node, WholeWithNics(1, 1, 250), "pod-" + std::to_string(i));
  }
  int nics_in_use = 0;
  for (int n = 0; n < node->nic_count(); ++n) nics_in_use += node->nic_used_milli(n) > 0 ? 1 : 0;
  EXPECT_LE(nics_in_use, 4);
  // A pod without GPUs asking a share (the 2025 trace's CPU pods): it fits and takes a share.
  const NodeFit cpu_pod = FitOnNode(WholeWithNics(0, 1, 100), *node, {});
  ASSERT_TRUE(cpu_pod.fits) << cpu_pod.reason;
  ASSERT_EQ(cpu_pod.assignment.nics.size(), 1u);
  EXPECT_EQ(cpu_pod.assignment.nics[0].milli, 100);
  EXPECT_GT(node->nic_used_milli(cpu_pod.assignment.nics[0].nic), 0) << "packs onto a used NIC";
  // A NIC-less node refuses a pod that asks NICs, for good.
  const auto plain =
      std::make_shared<const NodeState>(testing::MakeNodeInfo("plain", "pcie-8x-rtx4090-all-sys"));
  const NodeFit none = FitOnNode(WholeWithNics(1), *plain, {});
  EXPECT_FALSE(none.fits);
  EXPECT_TRUE(none.unresolvable) << none.reason;
}

TEST(FitOnNodeNics, GpuSharesGetNicsNextToTheirGpu) {
  const NodeStatePtr node = DgxA100();
  GpuRequest share;
  share.kind = GpuRequest::Kind::kShared;
  share.count = 1;
  share.share_milli = 500;
  share.nics.count = alloc::NicRequest::kPerGpu;
  share.nics.milli = 250;
  const NodeFit fit = FitOnNode(share, *node, {});
  ASSERT_TRUE(fit.fits) << fit.reason;
  ASSERT_EQ(fit.assignment.nics.size(), 1u);
  ExpectAligned(*node, fit);
}

TEST(FitOnNodeNics, RandomPodsNeverGetANicTwice) {
  NodeStatePtr node = DgxA100();
  std::uint32_t seed = 7;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  std::vector<std::string> placed;
  for (int step = 0; step < 400; ++step) {
    if (!placed.empty() && next() % 3 == 0) {
      const std::size_t victim = next() % placed.size();
      node = node->Remove(placed[victim]);
      placed.erase(placed.begin() + static_cast<std::ptrdiff_t>(victim));
      continue;
    }
    const int gpus = static_cast<int>(next() % 4);
    const int milli = next() % 2 == 0 ? 1000 : 250;
    const GpuRequest request = WholeWithNics(gpus, alloc::NicRequest::kPerGpu, milli);
    NodeFit fit = FitOnNode(request, *node, {});
    if (!fit.fits) continue;
    fit.assignment.pod_uid = "p" + std::to_string(step);
    auto applied = node->Apply(fit.assignment);
    ASSERT_TRUE(applied) << applied.error().message;  // a fit always applies
    node = *applied;
    ASSERT_EQ(testing::CheckConsistent(*node), "");
    placed.push_back(fit.assignment.pod_uid);
  }
  EXPECT_GT(placed.size(), 3u);
}

// Prioritize's N term: where one candidate gives every GPU a close NIC and another cannot, the
// aligned one scores higher, though the other is the tighter pack.
TEST(FitOnNodeNics, AlignedCandidatesScoreAboveMisalignedOnes) {
  const NodeStatePtr idle = DgxA100();
  // A node with 6 GPUs held and the NICs of the two free GPUs (6, 7) taken: misaligned, but
  // packing prefers it.
  Assignment holder;
  holder.pod_uid = "holder";
  holder.node = idle->name();
  holder.gpus = Mask({0, 1, 2, 3, 4, 5});
  const auto& nics = idle->table().topology().nics();
  for (int n = 0; n < idle->nic_count(); ++n) {
    const auto relation = nics[static_cast<std::size_t>(n)].gpu_relations[6];
    if (alloc::Within(relation, alloc::NicCloseness::kPxb)) holder.nics.push_back({n, 1000, 0});
  }
  ASSERT_EQ(holder.nics.size(), 2u);
  auto busy = idle->Apply(holder);
  ASSERT_TRUE(busy) << busy.error().message;
  const GpuRequest request = WholeWithNics(1);
  const NodeFit on_idle = FitOnNode(request, *idle, {});
  const NodeFit on_busy = FitOnNode(request, **busy, {});
  ASSERT_TRUE(on_idle.fits && on_busy.fits);
  EXPECT_TRUE(on_idle.nics_aligned);
  EXPECT_FALSE(on_busy.nics_aligned);
  const std::vector<Candidate> candidates{{idle.get(), &on_idle}, {busy->get(), &on_busy}};
  const auto scores = ScoreNodes(request, candidates, {}, ScoreWeights{}, 100);
  EXPECT_GT(scores[0], scores[1]);
  // Without the NIC request the busy node wins (it is the tighter pack).
  GpuRequest gpu_only = request;
  gpu_only.nics = {};
  const NodeFit idle_plain = FitOnNode(gpu_only, *idle, {});
  const NodeFit busy_plain = FitOnNode(gpu_only, **busy, {});
  const std::vector<Candidate> plain{{idle.get(), &idle_plain}, {busy->get(), &busy_plain}};
  const auto plain_scores = ScoreNodes(gpu_only, plain, {}, ScoreWeights{}, 100);
  EXPECT_LT(plain_scores[0], plain_scores[1]);
}

// A node of `fixture_id` whose NICs run at `rate_gbps`, as a node agent reads it from sysfs.
NodeStatePtr WithNicRate(const std::string& name, const std::string& fixture_id, double rate_gbps) {
  const topology::TopologyPtr topo = testing::LoadFixtureWithNicRate(fixture_id, rate_gbps);
  auto info = std::make_shared<state::NodeInfo>();
  info->name = name;
  info->table = testing::Registry().Get(topo);
  return std::make_shared<const NodeState>(std::move(info));
}

// policy.nic_alignment: a quarter of a 100 Gb/s NIC reaches a GPU of the PCIe gen 3 machine at the
// NIC's rate through host memory, so under `rate` that machine (its one NIC never within PXB of a
// GPU) loses no NIC points and a partly used one takes the pod before an idle DGX H100 is broken;
// under `aligned` (the default) the DGX's close NIC wins. A whole NIC is never carried so.
TEST(FitOnNodeNics, UnderRateAlignmentAShareTheHostPathCarriesLosesNoPoints) {
  const NodeStatePtr dgx = WithNicRate("dgx", "dgx-h100", 400);
  const NodeStatePtr idle_gen3 = WithNicRate("gen3", "pcie-8x-cascaded-switch-2socket", 100);
  Assignment holder;
  holder.pod_uid = "holder";
  holder.node = idle_gen3->name();
  holder.gpus = Mask({4});
  auto gen3 = idle_gen3->Apply(holder);
  ASSERT_TRUE(gen3) << gen3.error().message;
  const GpuRequest share = WholeWithNics(1, alloc::NicRequest::kPerGpu, 250);
  auto scores_under = [&](const GpuRequest& request, NicAlignment alignment) {
    FitOptions options;
    options.nic_alignment = alignment;
    const NodeFit on_dgx = FitOnNode(request, *dgx, options);
    const NodeFit on_gen3 = FitOnNode(request, **gen3, options);
    EXPECT_TRUE(on_dgx.fits && on_gen3.fits);
    EXPECT_TRUE(on_dgx.nics_aligned);
    const std::vector<Candidate> candidates{{dgx.get(), &on_dgx}, {gen3->get(), &on_gen3}};
    return std::make_pair(on_gen3.nics_aligned, ScoreNodes(request, candidates, {}, {}, 100));
  };
  const auto [aligned_counts, aligned_scores] = scores_under(share, NicAlignment::kAligned);
  EXPECT_FALSE(aligned_counts);
  EXPECT_GT(aligned_scores[0], aligned_scores[1]);
  const auto [rate_counts, rate_scores] = scores_under(share, NicAlignment::kRate);
  EXPECT_TRUE(rate_counts);
  EXPECT_LT(rate_scores[0], rate_scores[1]);
  const GpuRequest whole = WholeWithNics(1);
  const auto [whole_counts, whole_scores] = scores_under(whole, NicAlignment::kRate);
  EXPECT_FALSE(whole_counts);
  EXPECT_GT(whole_scores[0], whole_scores[1]);
}

TEST(NicAlignment, ParsesBothSettingsAndNamesABadOne) {
  for (NicAlignment setting : {NicAlignment::kAligned, NicAlignment::kRate}) {
    auto parsed = ParseNicAlignment(ToString(setting));
    ASSERT_TRUE(parsed) << ToString(setting);
    EXPECT_EQ(*parsed, setting);
  }
  auto bad = ParseNicAlignment("strict");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("\"strict\""), std::string::npos) << bad.error().message;
}

// Fragmentation counts NICs: where the pods seen ask a NIC share with their GPU, a node whose last
// NIC with room a whole-NIC pod would take leaves its free GPUs useless to them, and scores below
// a node that keeps NICs for them.
TEST(FitOnNodeNics, FragmentationCountsTheNicsTheShapesNeed) {
  const NodeStatePtr roomy = DgxA100();
  Assignment nic_holder;
  nic_holder.pod_uid = "nic-holder";
  nic_holder.node = roomy->name();
  for (int n = 0; n + 1 < roomy->nic_count(); ++n) nic_holder.nics.push_back({n, 1000, -1});
  auto last_nic = roomy->Apply(nic_holder);
  ASSERT_TRUE(last_nic) << last_nic.error().message;
  Shape share_with_nic;
  share_with_nic.gpus = 1;
  share_with_nic.milli = 1000;
  share_with_nic.weight = 1.0;
  share_with_nic.nics = 1;
  share_with_nic.nic_milli = 250;
  const std::vector<Shape> shapes{share_with_nic};
  EXPECT_EQ(Fragmentation(*roomy, shapes), 0.0);
  EXPECT_EQ(Fragmentation(**last_nic, shapes), 0.0) << "one NIC still has room";

  const GpuRequest request = WholeWithNics(1);
  const NodeFit on_roomy = FitOnNode(request, *roomy, {});
  const NodeFit on_last = FitOnNode(request, **last_nic, {});
  ASSERT_TRUE(on_roomy.fits && on_last.fits);
  ASSERT_TRUE(on_roomy.nics_aligned && on_last.nics_aligned);
  ScoreWeights fragmentation_only;
  fragmentation_only.topology = 0;
  fragmentation_only.packing = 0;
  fragmentation_only.balance = 0;
  fragmentation_only.whole_machines = WholeMachinePolicy::kOff;
  const std::vector<Candidate> candidates{{roomy.get(), &on_roomy}, {last_nic->get(), &on_last}};
  const auto scores = ScoreNodes(request, candidates, shapes, fragmentation_only, 100);
  EXPECT_GT(scores[0], scores[1]);
  // Shapes without NICs see no difference.
  std::vector<Shape> plain = shapes;
  plain[0].nics = 0;
  plain[0].nic_milli = 0;
  const auto plain_scores = ScoreNodes(request, candidates, plain, fragmentation_only, 100);
  EXPECT_EQ(plain_scores[0], plain_scores[1]);
}

}  // namespace
}  // namespace linkfit::extender
