// A node of mixed GPU models in MIG mode: each GPU plans with its own model's profile set
// (NodeInfo::mig_of), a MIG request goes only to GPUs whose model offers its profile, and the
// reason says which models offer what when none does.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "linkfit/extender/mig_fragmentation.h"
#include "linkfit/extender/node_fit.h"
#include "linkfit/extender/pod_source.h"
#include "linkfit/model/node_model.h"
#include "testing/cluster.h"

namespace linkfit::extender {
namespace {

using state::NodeState;
using state::NodeStatePtr;

constexpr const char* k40 = "NVIDIA A100-SXM4-40GB";
constexpr const char* k80 = "NVIDIA A100-SXM4-80GB";

GpuRequest Mig(const std::string& profile, int count = 1, std::vector<std::string> models = {}) {
  GpuRequest request;
  request.kind = GpuRequest::Kind::kMig;
  request.mig_profile = profile;
  request.count = count;
  request.gpu_models = std::move(models);
  return request;
}

// DGX A100 whose GPUs 4-7 are A100 80GB (set a100-80gb), every GPU in MIG mode, built as the
// cluster file and Node objects are (NodeModelFactory).
NodeStatePtr MixedNode() {
  topology::TopologySpec spec = testing::LoadFixture("dgx-a100")->spec();
  for (topology::GpuSpec& gpu : spec.gpus) {
    if (gpu.index < 4) continue;
    gpu.model = k80;
    gpu.memory_mib = 81920;
    gpu.mig_profile_set = "a100-80gb";
  }
  auto topo = topology::BuildTopology(std::move(spec));
  EXPECT_TRUE(topo.has_value()) << (topo ? "" : topo.error().message);
  model::NodeModelFactory factory(testing::Registry(), testing::Catalog(),
                                  topology::BandwidthModel::Defaults());
  model::NodeFacts facts;
  facts.name = "mixed";
  facts.topology = *topo;
  facts.mig_enabled = 0xff;
  auto info = factory.Build(std::move(facts));
  EXPECT_TRUE(info.has_value()) << (info ? "" : info.error().message);
  return std::make_shared<const NodeState>(*info);
}

NodeStatePtr Place(const NodeStatePtr& node, const GpuRequest& request, const std::string& uid,
                   NodeFit* placed = nullptr) {
  NodeFit fit = FitOnNode(request, *node, {});
  EXPECT_TRUE(fit.fits) << uid << ": " << fit.reason;
  if (!fit.fits) return node;
  fit.assignment.pod_uid = uid;
  if (placed != nullptr) *placed = fit;
  auto next = node->Apply(fit.assignment);
  EXPECT_TRUE(next.has_value()) << (next ? "" : next.error().message);
  return next ? *next : node;
}

TEST(MigMixedModels, EachGpuHasItsModelsPlanner) {
  const NodeStatePtr node = MixedNode();
  ASSERT_EQ(node->info().mig_planners.size(), 2u);
  for (int g = 0; g < 8; ++g) {
    ASSERT_NE(node->info().MigPlannerOf(g), nullptr) << g;
    EXPECT_EQ(node->info().MigPlannerOf(g)->set().id, g < 4 ? "a100-40gb" : "a100-80gb") << g;
  }
  EXPECT_EQ(node->info().GpusOfPlanner(node->info().MigPlannerOf(0)), 0x0f);
  EXPECT_EQ(node->info().GpusOfPlanner(node->info().MigPlannerOf(7)), 0xf0);
}

// 3g.20gb exists only on the 40GB model, 3g.40gb only on the 80GB one: each lands on its own
// model's GPUs, two per GPU, and the ninth 3g.40gb finds no room on the 80GB GPUs although the
// 40GB ones are half empty.
TEST(MigMixedModels, ARequestGoesOnlyToGpusWhoseModelOffersItsProfile) {
  NodeStatePtr node = MixedNode();
  for (int i = 0; i < 8; ++i) {
    NodeFit fit;
    node = Place(node, Mig("3g.40gb"), "big" + std::to_string(i), &fit);
    ASSERT_EQ(fit.assignment.mig.size(), 1u);
    EXPECT_GE(fit.assignment.mig[0].gpu, 4) << "3g.40gb on an A100 40GB";
  }
  const NodeFit full = FitOnNode(Mig("3g.40gb"), *node, {});
  EXPECT_FALSE(full.fits);
  for (int i = 0; i < 4; ++i) {
    NodeFit fit;
    node = Place(node, Mig("3g.20gb"), "small" + std::to_string(i), &fit);
    ASSERT_EQ(fit.assignment.mig.size(), 1u);
    EXPECT_LT(fit.assignment.mig[0].gpu, 4) << "3g.20gb on an A100 80GB";
  }
  EXPECT_EQ(testing::CheckConsistent(*node), "");
}

// 1g.10gb is a profile of both sets, at different indexes (2 in a100-40gb, 0 in a100-80gb): an
// instance on an 80GB GPU is placed, counted and named with the 80GB set.
TEST(MigMixedModels, AProfileOfBothModelsIsReadWithEachGpusSet) {
  NodeStatePtr node = MixedNode();
  NodeFit fit;
  node = Place(node, Mig("1g.10gb", 1, {"80gb"}), "on80", &fit);
  ASSERT_EQ(fit.assignment.mig.size(), 1u);
  const int gpu = fit.assignment.mig[0].gpu;
  EXPECT_GE(gpu, 4);
  const alloc::MigProfileSet& set80 = node->info().MigPlannerOf(gpu)->set();
  EXPECT_EQ(set80.profiles[static_cast<std::size_t>(fit.assignment.mig[0].instance.profile)].name,
            "1g.10gb");
  EXPECT_EQ(node->mig_state(gpu).compute_used(), 1);
  EXPECT_EQ(KnownPodOf(fit.assignment, *node).request.mig_profile, "1g.10gb");
  // Without a model constraint the first model that fits (by first GPU) serves it.
  node = Place(node, Mig("1g.10gb"), "first", &fit);
  EXPECT_LT(fit.assignment.mig[0].gpu, 4);
  const alloc::MigProfileSet& set40 = node->info().MigPlannerOf(0)->set();
  EXPECT_EQ(set40.profiles[static_cast<std::size_t>(fit.assignment.mig[0].instance.profile)].name,
            "1g.10gb");
  // Scoring reads each GPU's own set.
  MigFragmentationScorer scorer(nullptr);
  EXPECT_GT(scorer.Score(*node, FitOnNode(Mig("1g.10gb", 1, {"80gb"}), *node, {}).assignment)
                .gpu_tightness,
            0.0);
  EXPECT_EQ(testing::CheckConsistent(*node), "");
}

TEST(MigMixedModels, TheReasonSaysWhichModelsOfferWhatWhenNoneOffersTheProfile) {
  const NodeStatePtr node = MixedNode();
  const NodeFit fit = FitOnNode(Mig("1g.12gb"), *node, {});
  EXPECT_FALSE(fit.fits);
  EXPECT_TRUE(fit.unresolvable);
  EXPECT_EQ(fit.reason,
            std::string("no GPU model of the node has MIG profile 1g.12gb: ") + k40 +
                " (GPUs 0,1,2,3) offer 1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, "
                "7g.40gb; " +
                k80 +
                " (GPUs 4,5,6,7) offer 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, "
                "7g.80gb");
  // The model that offers it is not one the pod accepts: no GPU to plan on.
  const NodeFit excluded = FitOnNode(Mig("3g.20gb", 1, {"80gb"}), *node, {});
  EXPECT_FALSE(excluded.fits);
  EXPECT_TRUE(excluded.unresolvable) << excluded.reason;
}

}  // namespace
}  // namespace linkfit::extender
