// A pod's GPU model constraint (linkfit.io/gpu-model) is applied per GPU: a node of mixed models
// serves it on the GPUs of the accepted models only, and a GPU lost at the query level (model
// "unknown", unhealthy) never makes the node refuse a pod its healthy GPUs can serve.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "linkfit/extender/node_fit.h"
#include "linkfit/model/node_model.h"
#include "testing/cluster.h"

namespace linkfit::extender {
namespace {

using state::NodeState;
using state::NodeStatePtr;
using testing::Mask;

constexpr const char* kL40s0 = "NVIDIA A100-SXM4-80GB";
constexpr const char* kL40s = "NVIDIA L40S";

GpuRequest Whole(int count, std::vector<std::string> models) {
  GpuRequest request;
  request.kind = GpuRequest::Kind::kWhole;
  request.count = count;
  request.gpu_models = std::move(models);
  return request;
}

GpuRequest Share(int milli, int count, std::vector<std::string> models) {
  GpuRequest request;
  request.kind = GpuRequest::Kind::kShared;
  request.share_milli = milli;
  request.count = count;
  request.gpu_models = std::move(models);
  return request;
}

GpuRequest Mig(const std::string& profile, std::vector<std::string> models) {
  GpuRequest request;
  request.kind = GpuRequest::Kind::kMig;
  request.mig_profile = profile;
  request.count = 1;
  request.gpu_models = std::move(models);
  return request;
}

// A node of the fixture `fixture_id`, its GPUs' model, MIG set and health changed by `edit`,
// built the way the cluster file and Node objects are (NodeModelFactory).
template <typename Edit>
NodeStatePtr EditedNode(const std::string& fixture_id, Edit edit,
                        topology::GpuMask mig_enabled = 0) {
  topology::TopologySpec spec = testing::LoadFixture(fixture_id)->spec();
  for (topology::GpuSpec& gpu : spec.gpus) edit(gpu);
  auto topo = topology::BuildTopology(std::move(spec));
  EXPECT_TRUE(topo.has_value()) << (topo ? "" : topo.error().message);
  model::NodeModelFactory factory(testing::Registry(), testing::Catalog(),
                                  topology::BandwidthModel::Defaults());
  model::NodeFacts facts;
  facts.name = "n";
  facts.topology = *topo;
  facts.mig_enabled = mig_enabled;
  auto info = factory.Build(std::move(facts));
  EXPECT_TRUE(info.has_value()) << (info ? "" : info.error().message);
  return std::make_shared<const NodeState>(*info);
}

void MakeA100(topology::GpuSpec& gpu) {
  gpu.model = kL40s0;
  gpu.memory_mib = 81920;
  gpu.mig_capable = true;
  gpu.mig_profile_set = "a100-80gb";
}

// dgx-a100 with GPUs 4..7 turned into L40S (not MIG-capable); `mig_enabled`: GPUs in MIG mode.
NodeStatePtr MixedNode(topology::GpuMask mig_enabled = 0) {
  return EditedNode(
      "dgx-a100",
      [](topology::GpuSpec& gpu) {
        MakeA100(gpu);
        if (gpu.index >= 4) {
          gpu.model = kL40s;
          gpu.memory_mib = 24576;
          gpu.mig_capable = false;
          gpu.mig_profile_set.clear();
        }
      },
      mig_enabled);
}

// dgx2-v100's 16 GPUs as A100s, GPU 0 lost at the query level: what the agent publishes when
// every NVML query of it answers GPU_IS_LOST.
NodeStatePtr SixteenWithGpu0Lost(topology::GpuMask mig_enabled = 0) {
  return EditedNode(
      "dgx2-v100",
      [](topology::GpuSpec& gpu) {
        MakeA100(gpu);
        if (gpu.index == 0) {
          gpu.model = "unknown";
          gpu.memory_mib = 0;
          gpu.mig_capable = false;
          gpu.mig_profile_set.clear();
          gpu.healthy = false;
          gpu.health_problem = "GPU is lost";
        }
      },
      mig_enabled);
}

void ExpectNoFit(const NodeFit& fit, bool unresolvable, const std::string& reason) {
  EXPECT_FALSE(fit.fits);
  EXPECT_EQ(fit.unresolvable, unresolvable) << fit.reason;
  EXPECT_EQ(fit.reason, reason);
}

TEST(ModelConstraintTest, MixedNodeServesEachModelOnItsOwnGpus) {
  const NodeStatePtr node = MixedNode();
  const NodeFit l40s = FitOnNode(Whole(4, {"l40s"}), *node, {});
  ASSERT_TRUE(l40s.fits) << l40s.reason;
  EXPECT_EQ(l40s.assignment.gpus, Mask({4, 5, 6, 7}));
  const NodeFit either = FitOnNode(Whole(6, {"h100", "l40s", "a100"}), *node, {});
  EXPECT_TRUE(either.fits) << either.reason;
  const NodeFit a100 = FitOnNode(Whole(4, {"a100"}), *node, {});
  ASSERT_TRUE(a100.fits) << a100.reason;
  EXPECT_EQ(a100.assignment.gpus, Mask({0, 1, 2, 3}));
  // Five A100s: the node has four, and no eviction makes a fifth.
  ExpectNoFit(FitOnNode(Whole(5, {"a100"}), *node, {}), true,
              "4 free GPUs, 5 requested (of the GPUs 0,1,2,3 of the requested model)");
  ExpectNoFit(FitOnNode(Whole(1, {"h100"}), *node, {}), true,
              "GPU models NVIDIA A100-SXM4-80GB (GPUs 0,1,2,3), NVIDIA L40S (GPUs 4,5,6,7): none "
              "is one of h100");
}

TEST(ModelConstraintTest, BusyGpusOfTheModelAreResolvableAndOthersStayUnused) {
  const NodeStatePtr node = MixedNode();
  state::Assignment holder;
  holder.pod_uid = "holder";
  holder.node = "n";
  holder.gpus = Mask({0, 1, 2});
  const auto busy = node->Apply(holder);
  ASSERT_TRUE(busy.has_value());
  const NodeFit one = FitOnNode(Whole(1, {"a100"}), **busy, {});
  ASSERT_TRUE(one.fits) << one.reason;
  EXPECT_EQ(one.assignment.gpus, Mask({3}));
  // Two A100s: only GPU 3 is free, the A10s do not count; evicting the holder helps.
  ExpectNoFit(FitOnNode(Whole(2, {"a100"}), **busy, {}), false,
              "1 free GPU, 2 requested (of the GPUs 0,1,2,3 of the requested model)");
}

TEST(ModelConstraintTest, SharesAndMigStayOnTheModelsGpus) {
  const NodeStatePtr node = MixedNode();
  const NodeFit shares = FitOnNode(Share(500, 3, {"l40s"}), *node, {});
  ASSERT_TRUE(shares.fits) << shares.reason;
  EXPECT_EQ(shares.assignment.gpus & Mask({0, 1, 2, 3}), 0) << shares.assignment.gpus;
  ExpectNoFit(FitOnNode(Share(500, 5, {"a100"}), *node, {}), true,
              "node has 4 GPUs of the requested model that can be shared (8 in all), shares on 5 "
              "distinct GPUs requested");
  const NodeStatePtr in_mig_mode = MixedNode(Mask({2, 3}));
  const NodeFit mig = FitOnNode(Mig("1g.10gb", {"a100"}), *in_mig_mode, {});
  ASSERT_TRUE(mig.fits) << mig.reason;
  EXPECT_NE(mig.assignment.gpus & Mask({2, 3}), 0);
  EXPECT_FALSE(FitOnNode(Mig("1g.10gb", {"l40s"}), *in_mig_mode, {}).fits);
}

TEST(ModelConstraintTest, GpuLostAtTheQueryLevelKeepsTheNodeServingItsModel) {
  const NodeStatePtr node = SixteenWithGpu0Lost();
  EXPECT_EQ(NodeGpuModel(*node), kL40s0);  // the summary reads the healthy GPUs
  const NodeFit eight = FitOnNode(Whole(8, {"a100"}), *node, {});
  ASSERT_TRUE(eight.fits) << eight.reason;
  EXPECT_EQ(eight.assignment.gpus & Mask({0}), 0);
  const NodeFit fifteen = FitOnNode(Whole(15, {"a100"}), *node, {});
  ASSERT_TRUE(fifteen.fits) << fifteen.reason;
  EXPECT_EQ(fifteen.assignment.gpus, static_cast<topology::GpuMask>(0xFFFE));
  ExpectNoFit(FitOnNode(Whole(16, {"a100"}), *node, {}), true,
              "15 free GPUs, 16 requested (of the GPUs 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 of the "
              "requested model) (GPUs 0 are unhealthy)");
  // MIG comes from the healthy GPUs' profile set, not GPU 0's (none).
  const NodeFit mig = FitOnNode(Mig("1g.10gb", {"a100"}), *SixteenWithGpu0Lost(Mask({5})), {});
  ASSERT_TRUE(mig.fits) << mig.reason;
  EXPECT_EQ(mig.assignment.gpus, Mask({5}));
  ExpectNoFit(FitOnNode(Whole(1, {"h100"}), *node, {}), true,
              "GPU models unknown (GPUs 0, unhealthy), NVIDIA A100-SXM4-80GB (GPUs "
              "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15): none is one of h100");
}

TEST(ModelConstraintTest, OnlyUnhealthyGpusOfTheModel) {
  const NodeStatePtr node = EditedNode("dgx-a100", [](topology::GpuSpec& gpu) {
    MakeA100(gpu);
    if (gpu.index == 7) {
      gpu.model = kL40s;
      gpu.healthy = false;
    }
  });
  ExpectNoFit(FitOnNode(Whole(1, {"l40s"}), *node, {}), true,
              "the GPUs of model l40s (7) are unhealthy");
}

TEST(ModelConstraintTest, OneModelNodeKeepsItsMessage) {
  const NodeStatePtr node = EditedNode("dgx-a100", MakeA100);
  EXPECT_EQ(node->info().topology().model_groups().size(), 1u);
  ExpectNoFit(FitOnNode(Whole(1, {"h100"}), *node, {}), true,
              "GPU model NVIDIA A100-SXM4-80GB is not one of h100");
  const NodeFit any = FitOnNode(Whole(8, {}), *node, {});
  EXPECT_TRUE(any.fits) << any.reason;
}

}  // namespace
}  // namespace linkfit::extender
