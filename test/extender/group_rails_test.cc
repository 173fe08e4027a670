// Pods of one group prefer the NIC rails its members hold (issue 37): the group is read from
// linkfit.io/group or the coscheduling pod-group label, the cache tracks each group's rails from
// bind to release, and filter, prioritize and bind prefer them among equally good GPU sets.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "extender/extender_testing.h"
#include "linkfit/extender/gpu_request.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/model/allocation.h"
#include "testing/cluster.h"

namespace linkfit::extender {
namespace {

using testing::BindArgs;
using testing::GpuPod;
using testing::NamesArgs;

kube::PodView GroupPod(const std::string& uid, int gpus, const std::string& group) {
  kube::PodView pod = GpuPod(uid, gpus, {{"linkfit.io/nics", "per-gpu"}});
  if (!group.empty()) pod.labels["scheduling.x-k8s.io/pod-group"] = group;
  return pod;
}

TEST(GroupParse, LinkfitGroupFirstThenTheCoschedulingLabels) {
  kube::PodView pod = GpuPod("p", 1);
  auto none = ParseGpuRequest(pod, {});
  ASSERT_TRUE(none);
  EXPECT_EQ(none->group, "");
  pod.labels["pod-group.scheduling.sigs.k8s.io"] = "old-job";
  EXPECT_EQ(ParseGpuRequest(pod, {})->group, "ml/old-job");
  pod.labels["scheduling.x-k8s.io/pod-group"] = "job";
  EXPECT_EQ(ParseGpuRequest(pod, {})->group, "ml/job");
  pod.labels["linkfit.io/group"] = "label-group";
  EXPECT_EQ(ParseGpuRequest(pod, {})->group, "ml/label-group");
  pod.annotations["linkfit.io/group"] = "annotated";
  EXPECT_EQ(ParseGpuRequest(pod, {})->group, "ml/annotated");
  pod.annotations["linkfit.io/group"] = "no/slashes";
  const auto bad = ParseGpuRequest(pod, {});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message,
            "annotation linkfit.io/group \"no/slashes\": expected 1-63 letters, digits, '-', '_' "
            "or '.'");
  pod.annotations["linkfit.io/group"] = "";
  EXPECT_FALSE(ParseGpuRequest(pod, {}));
}

TEST(GroupRecord, TheAllocationRecordCarriesTheGroup) {
  const state::NodeInfoPtr node = linkfit::testing::MakeNodeInfo("h1", "dgx-h100");
  state::Assignment assignment;
  assignment.pod_uid = "u1";
  assignment.pod_namespace = "ml";
  assignment.pod_name = "trainer-0";
  assignment.node = "h1";
  assignment.gpus = 0b11;
  assignment.nics = {{0, 1000, 0}, {1, 1000, 1}};
  assignment.group = "ml/job";
  const std::string text = kube::EncodeAllocationRecord(model::RecordOf(assignment, *node));
  EXPECT_NE(text.find(R"("node":"h1","group":"ml/job")"), std::string::npos) << text;
  const auto decoded = kube::DecodeAllocationRecord(text);
  ASSERT_TRUE(decoded) << decoded.error().message;
  const auto back = model::AssignmentOf(*decoded, *node);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->group, "ml/job");
  assignment.group.clear();  // records without a group say nothing of it
  EXPECT_EQ(kube::EncodeAllocationRecord(model::RecordOf(assignment, *node)).find("group"),
            std::string::npos);
}

class GroupRailsTest : public testing::ExtenderFixture {
 protected:
  // Filters, prioritizes and binds `pod` on `node`; returns the rails of the NICs it got.
  std::vector<int> Place(const kube::PodView& pod, const std::string& node) {
    const std::vector<std::string> names{node};
    extender_.Filter(NamesArgs(pod, names));
    extender_.Prioritize(NamesArgs(pod, names));
    EXPECT_EQ(extender_.Bind(BindArgs(pod, node)), "");
    const auto held = cache_.Find(pod.uid);
    std::vector<int> rails;
    if (!held) {
      ADD_FAILURE() << pod.uid << " is not bound";
      return rails;
    }
    const state::NodeState& state = *cache_.Snapshot()->Find(node);
    for (const state::Assignment::NicSlot& slot : held->nics) {
      rails.push_back(state.table().topology().nics()[static_cast<std::size_t>(slot.nic)].rail);
    }
    return rails;
  }
  std::vector<int> RailsOf(const std::string& group) const {
    std::vector<int> rails;
    const alloc::NicMask mask = cache_.GroupRailsOf(group);
    for (std::size_t r = 0; r < mask.size(); ++r) {
      if (mask.test(r)) rails.push_back(static_cast<int>(r));
    }
    return rails;
  }
};

// On DGX H100s every GPU pair is alike over NVSwitch and each GPU has its own NIC: a member of a
// group follows the rails the first member took, where a pod without a group takes GPUs 0 and 1.
TEST_F(GroupRailsTest, MembersOnOtherNodesTakeTheGroupsRails) {
  AddNode("h1", "dgx-h100");
  AddNode("h2", "dgx-h100");
  AddNode("h3", "dgx-h100");
  Hold("busy", "h1", 0x0f);  // the first member finds GPUs 0-3 taken
  EXPECT_EQ(Place(GroupPod("a", 2, "job"), "h1"), (std::vector<int>{4, 5}));
  EXPECT_EQ(RailsOf("ml/job"), (std::vector<int>{4, 5}));
  EXPECT_EQ(Place(GroupPod("b", 2, "job"), "h2"), (std::vector<int>{4, 5}));
  EXPECT_EQ(Place(GroupPod("c", 2, ""), "h3"), (std::vector<int>{0, 1}));
  // Another group's pods are not steered by this one's.
  EXPECT_EQ(Place(GroupPod("d", 2, "other-job"), "h3"), (std::vector<int>{2, 3}));
  EXPECT_EQ(RailsOf("ml/other-job"), (std::vector<int>{2, 3}));
  // Released members take their rails with them.
  EXPECT_EQ(extender_.Release("a"), state::RemoveOutcome::kRemoved);
  EXPECT_EQ(RailsOf("ml/job"), (std::vector<int>{4, 5}));
  EXPECT_EQ(extender_.Release("b"), state::RemoveOutcome::kRemoved);
  EXPECT_TRUE(RailsOf("ml/job").empty());
}

// linkfit explain reads the pod as filter and prioritize do: with its group's rails.
TEST_F(GroupRailsTest, ExplainSeesTheGroupsRails) {
  AddNode("h1", "dgx-h100");
  AddNode("h2", "dgx-h100");
  Hold("busy", "h1", 0x0f);
  EXPECT_EQ(Place(GroupPod("a", 2, "job"), "h1"), (std::vector<int>{4, 5}));
  const std::vector<std::string> lines = extender_.Explain(GroupPod("b", 2, "job"));
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.front().find("rails 4,5"), std::string::npos) << lines.front();
  EXPECT_NE(lines.back().find("h2: fits on GPUs 4,5"), std::string::npos) << lines.back();
}

// The rails never cost GPU quality or alignment: where the group's rails are taken, a member
// gets an aligned pair on other rails.
TEST_F(GroupRailsTest, ARailInUseYieldsToAlignment) {
  AddNode("h1", "dgx-h100");
  AddNode("h2", "dgx-h100");
  Hold("busy", "h1", 0x0f);
  EXPECT_EQ(Place(GroupPod("a", 2, "job"), "h1"), (std::vector<int>{4, 5}));
  Hold("busy2", "h2", 0x30);  // GPUs 4 and 5 of h2 taken
  EXPECT_EQ(Place(GroupPod("b", 2, "job"), "h2"), (std::vector<int>{0, 1}));
  EXPECT_EQ(RailsOf("ml/job"), (std::vector<int>{0, 1, 4, 5}));
}

}  // namespace
}  // namespace linkfit::extender
