// FitOnNode: whole GPUs, MIG instances, shares and model constraints, and whether a failure is
// resolvable by freeing devices (FailedNodes) or not (FailedAndUnresolvableNodes).

#include "linkfit/extender/node_fit.h"

#include <gtest/gtest.h>

#include "testing/cluster.h"

namespace linkfit::extender {
namespace {

using state::Assignment;
using state::NodeState;
using state::NodeStatePtr;
using testing::Mask;

GpuRequest Whole(int count, alloc::Closeness closeness = alloc::Closeness::kNode,
                 alloc::ClosenessPolicy policy = alloc::ClosenessPolicy::kPreferred) {
  GpuRequest request;
  request.kind = GpuRequest::Kind::kWhole;
  request.count = count;
  request.closeness = closeness;
  request.policy = policy;
  return request;
}

GpuRequest MigRequest(const std::string& profile, int count = 1) {
  GpuRequest request;
  request.kind = GpuRequest::Kind::kMig;
  request.mig_profile = profile;
  request.count = count;
  return request;
}

GpuRequest Share(int milli, int count = 1) {
  GpuRequest request;
  request.kind = GpuRequest::Kind::kShared;
  request.share_milli = milli;
  request.count = count;
  return request;
}

NodeStatePtr Node(const std::string& fixture, topology::GpuMask mig = 0) {
  return std::make_shared<const NodeState>(testing::MakeNodeInfo("n", fixture, mig));
}

// `node` with the GPUs of `used` held whole by one pod.
NodeStatePtr WithWhole(const NodeStatePtr& node, topology::GpuMask used,
                       const std::string& uid = "holder") {
  Assignment a;
  a.pod_uid = uid;
  a.node = node->name();
  a.gpus = used;
  auto next = node->Apply(a);
  EXPECT_TRUE(next.has_value()) << (next ? "" : next.error().message);
  return next ? *next : node;
}

// Applies the fit of `request` (which must fit) under `uid`.
NodeStatePtr Place(const NodeStatePtr& node, const GpuRequest& request, const std::string& uid) {
  NodeFit fit = FitOnNode(request, *node, {});
  EXPECT_TRUE(fit.fits) << uid << ": " << fit.reason;
  if (!fit.fits) return node;
  fit.assignment.pod_uid = uid;
  auto next = node->Apply(fit.assignment);
  EXPECT_TRUE(next.has_value()) << (next ? "" : next.error().message);
  return next ? *next : node;
}

void ExpectNoFit(const NodeFit& fit, bool unresolvable, const std::string& reason_part) {
  EXPECT_FALSE(fit.fits);
  EXPECT_EQ(fit.unresolvable, unresolvable) << fit.reason;
  EXPECT_NE(fit.reason.find(reason_part), std::string::npos)
      << "'" << fit.reason << "' lacks '" << reason_part << "'";
}

TEST(FitOnNodeTest, NoGpusAlwaysFits) {
  const NodeFit fit = FitOnNode(GpuRequest{}, *Node("dgx1-v100"), {});
  EXPECT_TRUE(fit.fits);
  EXPECT_EQ(fit.assignment.gpus, 0);
}

TEST(FitOnNodeTest, WholeGpusPickAConnectedSet) {
  const NodeStatePtr dgx1 = Node("dgx1-v100");
  const NodeFit fit =
      FitOnNode(Whole(4, alloc::Closeness::kNvlink, alloc::ClosenessPolicy::kRequired), *dgx1, {});
  ASSERT_TRUE(fit.fits) << fit.reason;
  EXPECT_EQ(fit.reason, "");
  EXPECT_EQ(fit.assignment.kind, Assignment::Kind::kWhole);
  EXPECT_EQ(__builtin_popcount(fit.assignment.gpus), 4);
  EXPECT_GT(fit.quality.ring_mbps, 0u);
  EXPECT_EQ(fit.assignment.node, "n");
  EXPECT_TRUE(fit.assignment.pod_uid.empty());
}

TEST(FitOnNodeTest, WholeGpuFailuresResolvableOrNot) {
  const NodeStatePtr dgx1 = Node("dgx1-v100");
  // More GPUs than the node has: never.
  ExpectNoFit(FitOnNode(Whole(9), *dgx1, {}), true, "9");
  // Busy GPUs: freeing them helps.
  ExpectNoFit(FitOnNode(Whole(4), *WithWhole(dgx1, Mask({0, 1, 2, 3, 4, 5})), {}), false, "");
  // NVLink required on a PCIe-only box: never.
  const NodeStatePtr l40s = Node("pcie-8x-l40s-2socket");
  ExpectNoFit(
      FitOnNode(Whole(2, alloc::Closeness::kNvlink, alloc::ClosenessPolicy::kRequired), *l40s, {}),
      true, "");
  // Preferred: it fits anyway and says which preference was missed.
  const NodeFit preferred = FitOnNode(Whole(2, alloc::Closeness::kNvlink), *l40s, {});
  EXPECT_TRUE(preferred.fits);
  EXPECT_FALSE(preferred.reason.empty());
  // NVLink pairs {0,1} and {2,3}: with 0 and 2 busy, the free 1 and 3 are not linked, but
  // freeing a GPU would give a pair.
  const NodeStatePtr ws = Node("ws-4x-rtxa6000-nvlink-pairs");
  ExpectNoFit(FitOnNode(Whole(2, alloc::Closeness::kNvlink, alloc::ClosenessPolicy::kRequired),
                        *WithWhole(ws, Mask({0, 2})), {}),
              false, "");
  // An NVLink-connected triple does not exist on that workstation at all.
  ExpectNoFit(
      FitOnNode(Whole(3, alloc::Closeness::kNvlink, alloc::ClosenessPolicy::kRequired), *ws, {}),
      true, "");
}

TEST(FitOnNodeTest, GpusInMigModeNeverServeWholeOrSharedPods) {
  // Half of a DGX A100 is in MIG mode: at most 4 whole GPUs, and shares on at most 4 GPUs, can
  // ever fit there, so asking for more is not something preemption can fix.
  const NodeStatePtr a100 = Node("dgx-a100", Mask({0, 1, 2, 3}));
  const NodeFit four = FitOnNode(Whole(4), *a100, {});
  ASSERT_TRUE(four.fits);
  EXPECT_EQ(four.assignment.gpus, Mask({4, 5, 6, 7}));
  ExpectNoFit(FitOnNode(Whole(5), *a100, {}), true, "");
  ExpectNoFit(FitOnNode(Share(100, 5), *a100, {}), true, "");
  // With some of the four busy, 3 GPUs is resolvable.
  ExpectNoFit(FitOnNode(Whole(3), *WithWhole(a100, Mask({4, 5})), {}), false, "");
}

TEST(FitOnNodeTest, ModelConstraint) {
  GpuRequest request = Whole(1);
  request.gpu_models = {"h100"};
  ExpectNoFit(FitOnNode(request, *Node("dgx-a100"), {}), true, "A100");
  EXPECT_TRUE(FitOnNode(request, *Node("dgx-h100"), {}).fits);
  request.gpu_models = {"v100", "a100"};
  EXPECT_TRUE(FitOnNode(request, *Node("dgx-a100"), {}).fits);
  // The model check comes first, for every kind of request.
  GpuRequest mig = MigRequest("1g.10gb");
  mig.gpu_models = {"a100"};
  ExpectNoFit(FitOnNode(mig, *Node("dgx-h100", Mask({0})), {}), true, "H100");
}

TEST(FitOnNodeTest, MigInstances) {
  const NodeStatePtr a100 = Node("dgx-a100", Mask({0, 1}));
  const NodeFit fit = FitOnNode(MigRequest("3g.20gb", 2), *a100, {});
  ASSERT_TRUE(fit.fits) << fit.reason;
  EXPECT_EQ(fit.assignment.kind, Assignment::Kind::kMig);
  ASSERT_EQ(fit.assignment.mig.size(), 2u);
  for (const Assignment::MigSlot& slot : fit.assignment.mig) {
    EXPECT_TRUE(slot.gpu == 0 || slot.gpu == 1);
    EXPECT_NE((fit.assignment.gpus >> slot.gpu) & 1, 0);
  }
  // Not MIG-capable hardware, and a profile of another GPU model: never.
  ExpectNoFit(FitOnNode(MigRequest("1g.5gb"), *Node("dgx1-v100"), {}), true, "not MIG-capable");
  ExpectNoFit(FitOnNode(MigRequest("3g.40gb"), *a100, {}), true, "3g.20gb");
  // MIG-capable but no GPU in MIG mode: preemption cannot help (a reconfiguration could).
  ExpectNoFit(FitOnNode(MigRequest("1g.5gb"), *Node("dgx-a100"), {}), true, "");
  // Both MIG GPUs full: freeing instances helps.
  NodeStatePtr full = Place(a100, MigRequest("7g.40gb"), "m1");
  full = Place(full, MigRequest("7g.40gb"), "m2");
  ExpectNoFit(FitOnNode(MigRequest("1g.5gb"), *full, {}), false, "");
  // Three full-GPU instances can never fit on two MIG GPUs.
  ExpectNoFit(FitOnNode(MigRequest("7g.40gb", 3), *a100, {}), true, "");
}

TEST(FitOnNodeTest, SharesGoOnDistinctGpus) {
  const NodeStatePtr dgx1 = Node("dgx1-v100");
  const NodeFit fit = FitOnNode(Share(300, 2), *dgx1, {});
  ASSERT_TRUE(fit.fits) << fit.reason;
  EXPECT_EQ(fit.assignment.kind, Assignment::Kind::kShared);
  ASSERT_EQ(fit.assignment.shares.size(), 2u);
  EXPECT_NE(fit.assignment.shares[0].gpu, fit.assignment.shares[1].gpu);
  EXPECT_EQ(fit.assignment.shares[0].milli, 300);
  EXPECT_EQ(__builtin_popcount(fit.assignment.gpus), 2);
  // Pack: a second share goes onto a GPU already shared.
  const NodeStatePtr one = Place(dgx1, Share(300), "s1");
  const NodeFit packed = FitOnNode(Share(300), *one, {});
  ASSERT_TRUE(packed.fits);
  EXPECT_EQ(packed.assignment.shares[0].gpu, one->pods().at("s1").shares[0].gpu);
  // Spread: onto an idle GPU.
  const NodeFit spread = FitOnNode(Share(300), *one, {alloc::SharePolicy::kSpread});
  ASSERT_TRUE(spread.fits);
  EXPECT_NE(spread.assignment.shares[0].gpu, one->pods().at("s1").shares[0].gpu);
  // More distinct GPUs than the node has: never. No room now: resolvable.
  ExpectNoFit(FitOnNode(Share(100, 9), *dgx1, {}), true, "9");
  ExpectNoFit(FitOnNode(Share(100), *WithWhole(dgx1, Mask({0, 1, 2, 3, 4, 5, 6, 7})), {}), false,
              "");
}

}  // namespace
}  // namespace linkfit::extender
