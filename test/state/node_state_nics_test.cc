// NodeState's RDMA NICs: Apply rejects every way of giving a NIC twice (naming the NIC), Remove
// frees exactly what Apply took, eligibility leaves out down NICs and SR-IOV virtual functions,
// SameGpuState tells NIC use apart, and random Apply/Remove sequences agree with a reference
// model.

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "linkfit/state/cluster_cache.h"
#include "linkfit/state/node_state.h"
#include "linkfit/topology/topology.h"
#include "testing/cluster.h"

namespace linkfit::state {
namespace {

using testing::CheckConsistent;
using testing::Mask;
using Slot = Assignment::NicSlot;

// A DGX A100 read from nvidia-smi text: 8 GPUs, 8 NICs mlx5_0..3 and mlx5_6..9, states unknown
// (up). The fixture document's NICs (config/topologies) are in a shape linkfit does not read.
NodeInfoPtr DgxA100() {
  static const topology::TopologyPtr topo = [] {
    auto spec = topology::ParseNvidiaSmi(
        testing::ReadFileOrDie(testing::SourcePath("test/data/nvidia-smi/dgx-a100.topo.txt")), "");
    EXPECT_TRUE(spec.has_value()) << (spec ? "" : spec.error().message);
    auto built = topology::BuildTopology(std::move(*spec));
    EXPECT_TRUE(built.has_value()) << (built ? "" : built.error().message);
    return *built;
  }();
  auto info = std::make_shared<NodeInfo>();
  info->name = "dgx";
  info->table = testing::Registry().Get(topo);
  info->reported = topo;
  return info;
}

// test/data/topology-documents/nics.json as the node's own topology: mlx5_0 ACTIVE, mlx5_1
// state unknown, mlx5_2 a virtual function of mlx5_0.
NodeInfoPtr NicsDocumentNode(bool first_down) {
  auto spec = topology::ParseTopologyDocument(
      testing::ReadFileOrDie(testing::SourcePath("test/data/topology-documents/nics.json")));
  EXPECT_TRUE(spec.has_value()) << (spec ? "" : spec.error().message);
  auto topo = topology::BuildTopology(std::move(*spec));
  EXPECT_TRUE(topo.has_value()) << (topo ? "" : topo.error().message);
  auto info = std::make_shared<NodeInfo>();
  info->name = "nics";
  info->table = testing::Registry().Get(*topo);
  info->reported = *topo;
  info->nic_down[0] = first_down;
  return info;
}

Assignment WithNics(const std::string& uid, GpuMask gpus, std::vector<Slot> nics) {
  Assignment a;
  a.pod_uid = uid;
  a.pod_namespace = "ns";
  a.pod_name = uid;
  a.node = "dgx";
  a.gpus = gpus;
  a.nics = std::move(nics);
  return a;
}

NodeStatePtr MustApply(const NodeStatePtr& state, const Assignment& a) {
  auto next = state->Apply(a);
  EXPECT_TRUE(next.has_value()) << a.pod_uid << ": " << (next ? "" : next.error().message);
  if (!next) return state;
  EXPECT_EQ(CheckConsistent(**next), "");
  return *next;
}

std::string ApplyError(const NodeStatePtr& state, const Assignment& a) {
  auto next = state->Apply(a);
  EXPECT_FALSE(next.has_value()) << a.pod_uid << " was accepted";
  return next ? "" : next.error().message;
}

TEST(NodeStateNicsTest, NicLessNodesKeepNoNicFigures) {
  const auto state =
      std::make_shared<const NodeState>(testing::MakeNodeInfo("h", "pcie-8x-rtx4090-all-sys"));
  EXPECT_EQ(state->nic_count(), 0);
  EXPECT_TRUE(state->nic_usable().none());
  EXPECT_TRUE(state->nic_whole_free().none());
  Assignment a = WithNics("p", Mask({0}), {{0, 1000, 0}});
  a.node = "h";
  EXPECT_NE(ApplyError(state, a).find("NIC 0 does not exist on h (0 NICs)"), std::string::npos);
}

TEST(NodeStateNicsTest, WholeNicsAndSharesAreCountedAndFreed) {
  const auto empty = std::make_shared<const NodeState>(DgxA100());
  ASSERT_EQ(empty->nic_count(), 8);
  EXPECT_EQ(empty->nic_usable().count(), 8u);
  NodeStatePtr state =
      MustApply(empty, WithNics("whole", Mask({0, 1}), {{0, 1000, 0}, {1, 1000, 1}}));
  state = MustApply(state, WithNics("share-a", 0, {{2, 300, -1}}));
  state = MustApply(state, WithNics("share-b", Mask({2}), {{2, 700, 2}}));
  EXPECT_EQ(state->nic_used_milli(0), 1000);
  EXPECT_EQ(state->nic_used_milli(2), 1000);
  EXPECT_EQ(state->pods_on_nic(2), 2);
  EXPECT_FALSE(state->nic_whole_free().test(0));
  EXPECT_TRUE(state->nic_whole_free().test(3));
  EXPECT_EQ(state->UsedGpuEquivalents(), 3.0);  // GPUs only: NICs are not GPU equivalents
  // A pod without GPUs holding NICs is an assignment, not a load.
  EXPECT_EQ(state->pods().size(), 3u);

  NodeStatePtr freed = state->Remove("whole");
  EXPECT_EQ(freed->nic_used_milli(0), 0);
  EXPECT_EQ(freed->nic_used_milli(1), 0);
  EXPECT_EQ(CheckConsistent(*freed), "");
  freed = freed->Remove("share-a");
  EXPECT_EQ(freed->nic_used_milli(2), 700);
  EXPECT_EQ(freed->pods_on_nic(2), 1);
  freed = freed->Remove("share-b");
  EXPECT_TRUE(NodeState::SameGpuState(*freed, *empty));
  EXPECT_EQ(freed->gpu_state_hash(), empty->gpu_state_hash());
  // The earlier states are values: unchanged.
  EXPECT_EQ(state->nic_used_milli(0), 1000);
}

TEST(NodeStateNicsTest, ApplyRejectsEveryDoubleGiftNamingTheNic) {
  const auto empty = std::make_shared<const NodeState>(DgxA100());
  const NodeStatePtr state = MustApply(empty, WithNics("a", 0, {{3, 600, -1}}));
  const NodeStatePtr whole = MustApply(empty, WithNics("w", 0, {{3, 1000, -1}}));
  struct Case {
    const char* name;
    NodeStatePtr on;
    Assignment a;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"index below", state, WithNics("x", 0, {{-1, 100, -1}}),
       "NIC -1 does not exist on dgx (8 NICs)"},
      {"index beyond", state, WithNics("x", 0, {{8, 100, -1}}),
       "NIC 8 does not exist on dgx (8 NICs)"},
      {"milli 0", state, WithNics("x", 0, {{4, 0, -1}}),
       "0 thousandths of NIC mlx5_6 of dgx (expected 1..1000)"},
      {"milli 1001", state, WithNics("x", 0, {{4, 1001, -1}}), "1001 thousandths of NIC mlx5_6"},
      {"beyond 1000", state, WithNics("x", 0, {{3, 401, -1}}),
       "NIC mlx5_3 of dgx has 400 milli free, 401 requested"},
      {"whole on used", state, WithNics("x", 0, {{3, 1000, -1}}),
       "NIC mlx5_3 of dgx is in use (600/1000 held by 1 pods)"},
      {"share on whole", whole, WithNics("x", 0, {{3, 1, -1}}),
       "NIC mlx5_3 of dgx has 0 milli free"},
      {"whole on whole", whole, WithNics("x", 0, {{3, 1000, -1}}), "NIC mlx5_3 of dgx is in use"},
      {"twice", state, WithNics("x", 0, {{5, 100, -1}, {5, 100, -1}}),
       "holds NIC mlx5_7 of dgx twice"},
      {"gpu not held", state, WithNics("x", Mask({1}), {{5, 1000, 0}}),
       "NIC mlx5_7 of dgx serves GPU 0, which the pod does not hold"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string message = ApplyError(c.on, c.a);
    EXPECT_NE(message.find(c.message), std::string::npos) << message;
  }
  // A rejected NIC leaves the state as it was (GPUs included).
  auto rejected = state->Apply(WithNics("x", Mask({6}), {{6, 1000, 6}, {3, 1000, -1}}));
  ASSERT_FALSE(rejected.has_value());
  EXPECT_EQ(state->whole_used(), 0);
  EXPECT_EQ(state->nic_used_milli(6), 0);
}

TEST(NodeStateNicsTest, DownNicsAndVirtualFunctionsAreNotUsableButTheirPodsCount) {
  const auto up = std::make_shared<const NodeState>(NicsDocumentNode(false));
  ASSERT_EQ(up->nic_count(), 3);
  EXPECT_TRUE(up->nic_usable().test(0));
  EXPECT_TRUE(up->nic_usable().test(1));   // state unknown counts as up
  EXPECT_FALSE(up->nic_usable().test(2));  // a virtual function: the SR-IOV CNI's
  const auto down = std::make_shared<const NodeState>(NicsDocumentNode(true));
  EXPECT_FALSE(down->nic_usable().test(0));
  EXPECT_FALSE(down->nic_whole_free().test(0));
  EXPECT_FALSE(NodeState::SameGpuState(*up, *down));
  // Pods reported on a down NIC or a virtual function still count.
  Assignment a = WithNics("p", 0, {{0, 1000, -1}, {2, 500, -1}});
  a.node = "nics";
  const NodeStatePtr held = MustApply(down, a);
  EXPECT_EQ(held->nic_used_milli(0), 1000);
  EXPECT_EQ(held->nic_used_milli(2), 500);
}

TEST(NodeStateNicsTest, SameGpuStateTellsNicUseApart) {
  const auto empty = std::make_shared<const NodeState>(DgxA100());
  const NodeStatePtr gpu_only = MustApply(empty, WithNics("p", Mask({0}), {}));
  const NodeStatePtr with_nic = MustApply(empty, WithNics("p", Mask({0}), {{0, 1000, 0}}));
  const NodeStatePtr other_nic = MustApply(empty, WithNics("p", Mask({0}), {{1, 1000, 0}}));
  const NodeStatePtr share = MustApply(empty, WithNics("p", Mask({0}), {{0, 500, 0}}));
  const std::vector<NodeStatePtr> states = {gpu_only, with_nic, other_nic, share};
  for (std::size_t i = 0; i < states.size(); ++i) {
    for (std::size_t j = 0; j < states.size(); ++j) {
      EXPECT_EQ(NodeState::SameGpuState(*states[i], *states[j]), i == j) << i << " " << j;
      if (i != j) {
        EXPECT_NE(states[i]->gpu_state_hash(), states[j]->gpu_state_hash());
      }
    }
  }
  // Which pod holds the thousandths does not matter to a fit.
  const NodeStatePtr two = MustApply(MustApply(empty, WithNics("a", Mask({0}), {{0, 250, 0}})),
                                     WithNics("b", 0, {{0, 250, -1}}));
  const NodeStatePtr one = MustApply(empty, WithNics("c", Mask({0}), {{0, 500, 0}}));
  EXPECT_TRUE(NodeState::SameGpuState(*two, *one));
  EXPECT_EQ(two->gpu_state_hash(), one->gpu_state_hash());
  // A NIC-less node is never alike a node with NICs.
  const auto h100 = std::make_shared<const NodeState>(testing::MakeNodeInfo("h", "dgx-h100"));
  EXPECT_FALSE(NodeState::SameGpuState(*h100, *empty));
}

// The reference: what each pod holds, and the rules of node_state.h in the plainest form.
struct Reference {
  std::map<std::string, std::vector<Slot>> pods;

  int Used(int nic) const {
    int used = 0;
    for (const auto& [uid, slots] : pods) {
      for (const Slot& slot : slots) used += slot.nic == nic ? slot.milli : 0;
    }
    return used;
  }
  bool Accepts(const std::vector<Slot>& slots, int nic_count) const {
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const Slot& slot = slots[i];
      if (slot.nic < 0 || slot.nic >= nic_count || slot.milli < 1 || slot.milli > 1000) {
        return false;
      }
      for (std::size_t j = 0; j < i; ++j) {
        if (slots[j].nic == slot.nic) return false;
      }
      const int used = Used(slot.nic);
      if (used + slot.milli > 1000 || (slot.milli == 1000 && used > 0)) return false;
    }
    return true;
  }
};

TEST(NodeStateNicsTest, RandomApplyAndRemoveNeverGiveANicTwice) {
  std::mt19937 random(37);
  const auto pick = [&](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(random);
  };
  const std::vector<int> millis = {0, 1, 100, 250, 500, 999, 1000, 1000, 1000, 1001};
  NodeStatePtr state = std::make_shared<const NodeState>(DgxA100());
  Reference reference;
  int accepted = 0;
  for (int step = 0; step < 3000; ++step) {
    if (!reference.pods.empty() && pick(0, 2) == 0) {
      auto it = reference.pods.begin();
      std::advance(it, pick(0, static_cast<int>(reference.pods.size()) - 1));
      state = state->Remove(it->first);
      reference.pods.erase(it);
    } else {
      std::vector<Slot> slots;
      for (int n = pick(1, 3); n > 0; --n) {
        slots.push_back({pick(-1, 8), millis[static_cast<std::size_t>(pick(0, 9))], -1});
      }
      const std::string uid = "p" + std::to_string(step);
      const bool expected = reference.Accepts(slots, 8);
      auto next = state->Apply(WithNics(uid, 0, slots));
      ASSERT_EQ(next.has_value(), expected)
          << "step " << step << ": " << (next ? "accepted" : next.error().message);
      if (next) {
        state = *next;
        reference.pods[uid] = slots;
        ++accepted;
      }
    }
    ASSERT_EQ(CheckConsistent(*state), "") << "step " << step;
    for (int nic = 0; nic < 8; ++nic) {
      ASSERT_EQ(state->nic_used_milli(nic), reference.Used(nic)) << "step " << step;
      ASSERT_LE(state->nic_used_milli(nic), 1000);
    }
  }
  EXPECT_GT(accepted, 300);  // the sequence exercised acceptance, not only rejection
}

// The cache's rails of a group follow its members from bind to release, and follow a node whose
// NICs are renumbered onto other rails while the members stay.
TEST(GroupRailsInTheCache, FollowMembersAndRenumberedNodes) {
  ClusterCache cache;
  const NodeInfoPtr node = testing::MakeNodeInfo("h1", "dgx-h100");
  cache.UpsertNode(node);
  Assignment member;
  member.pod_uid = "m1";
  member.pod_namespace = "ml";
  member.pod_name = "trainer-0";
  member.node = "h1";
  member.group = "ml/job";
  member.gpus = Mask({2, 3});
  member.nics = {Slot{2, 1000, 2}, Slot{3, 1000, 3}};
  ASSERT_TRUE(cache.AddBound(member).has_value());
  const std::vector<int> rails_before = {node->table->topology().nics()[2].rail,
                                         node->table->topology().nics()[3].rail};
  alloc::NicMask expected;
  for (int rail : rails_before) expected.set(static_cast<std::size_t>(rail));
  EXPECT_EQ(cache.GroupRailsOf("ml/job"), expected);
  EXPECT_TRUE(cache.GroupRailsOf("ml/other").none());

  // The same machine with its NICs on rails counted from the other end.
  topology::TopologySpec spec = node->table->topology().spec();
  const int count = static_cast<int>(spec.nics.size());
  for (int n = 0; n < count; ++n) spec.nics[static_cast<std::size_t>(n)].rail = count - 1 - n;
  auto renumbered = topology::BuildTopology(std::move(spec));
  ASSERT_TRUE(renumbered.has_value()) << renumbered.error().message;
  auto changed = std::make_shared<NodeInfo>(*node);
  changed->table = testing::Registry().Get(*renumbered);
  EXPECT_EQ(cache.UpsertNode(changed), 0);
  alloc::NicMask after;
  after.set(static_cast<std::size_t>(count - 1 - 2)).set(static_cast<std::size_t>(count - 1 - 3));
  EXPECT_EQ(cache.GroupRailsOf("ml/job"), after);

  EXPECT_TRUE(cache.Remove("m1"));
  EXPECT_TRUE(cache.GroupRailsOf("ml/job").none());
}

}  // namespace
}  // namespace linkfit::state
