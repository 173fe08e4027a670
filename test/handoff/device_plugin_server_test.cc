// linkfit's device plugin as the kubelet meets it: the real gRPC servers driven by a fake kubelet
// device manager that allocates as the kubelet's devicesToAllocate does
// (fake_device_manager.h), verify mode, and random admission orders.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>

#include "handoff/device_plugin_testing.h"
#include "handoff/fake_device_manager.h"
#include "linkfit/agent/steering.h"
#include "linkfit/handoff/device_plugin.h"

namespace linkfit::handoff {
namespace {

using linkfit::testing::AdmittedContainer;
using linkfit::testing::FakeDeviceManager;
using linkfit::testing::FakePodSpec;
using plugin_testing::Gpus;
using plugin_testing::Nic;
using plugin_testing::Node;
using plugin_testing::Record;

struct Harness {
  std::unique_ptr<FakeDeviceManager> kubelet;
  std::unique_ptr<DevicePlugins> plugins;
  std::mutex mutex;
  std::vector<PlannedPod> plans;  // GUARDED_BY(mutex)

  explicit Harness(unsigned seed, bool verify = false, std::set<std::string> exempt = {}) {
    const topology::TopologySpec node = Node();
    auto started = linkfit::testing::StartFakeDeviceManager(seed);
    EXPECT_TRUE(started.has_value()) << started.error().message;
    kubelet = std::move(*started);
    DevicePluginConfig config;
    config.directory = kubelet->directory();
    config.verify = verify;
    config.exempt_namespaces = std::move(exempt);
    auto served = StartDevicePlugins(config, node, [this]() -> Result<SteeringView> {
      SteeringView view;
      {
        std::lock_guard lock(mutex);
        view.plans = plans;
      }
      view.kubelet = agent::HoldingsOf(kubelet->PodResources());
      return view;
    });
    EXPECT_TRUE(served.has_value()) << served.error().message;
    plugins = std::move(*served);
    EXPECT_TRUE(kubelet->WaitForDevices("nvidia.com/gpu", 7, std::chrono::seconds(10)));
    EXPECT_TRUE(kubelet->WaitForDevices("linkfit.io/gpu-share", 7000, std::chrono::seconds(10)));
    EXPECT_TRUE(kubelet->WaitForDevices("nvidia.com/mig-3g.40gb", 2, std::chrono::seconds(10)));
    EXPECT_TRUE(kubelet->WaitForDevices("linkfit.io/rdma", 4, std::chrono::seconds(10)));
    EXPECT_TRUE(kubelet->WaitForDevices("linkfit.io/rdma-share", 4000, std::chrono::seconds(10)));
  }
  void AddPlan(PlannedPod pod) {
    std::lock_guard lock(mutex);
    plans.push_back(std::move(pod));
  }
};

TEST(NodeDevicePlugin, RegistersEveryResourceAndListsDevicesWithHealth) {
  Harness harness(1);
  EXPECT_EQ(
      harness.plugins->resources(),
      (std::vector<std::string>{"linkfit.io/gpu-share", "linkfit.io/rdma", "linkfit.io/rdma-share",
                                "nvidia.com/gpu", "nvidia.com/mig-3g.40gb"}));
  EXPECT_EQ(harness.kubelet->registrations(), 5);
  EXPECT_TRUE(
      harness.kubelet->WaitForDevices("nvidia.com/mig-3g.40gb", 2, std::chrono::seconds(5)));
  EXPECT_TRUE(harness.kubelet->Devices("nvidia.com/gpu").at("GPU-3"));
  // GPU 3 fails: the kubelet hears it on the ListAndWatch stream.
  topology::TopologySpec node = Node();
  node.gpus[3].healthy = false;
  ASSERT_TRUE(harness.plugins->Update(node).has_value());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (harness.kubelet->Devices("nvidia.com/gpu").at("GPU-3") &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(harness.kubelet->Devices("nvidia.com/gpu").at("GPU-3"));
  // The MIG layout goes away: that resource is served empty, so its capacity drops to zero.
  node.gpus[7].mig_mode = topology::MigMode::kDisabled;
  node.gpus[7].mig_instances.clear();
  ASSERT_TRUE(harness.plugins->Update(node).has_value());
  const auto later = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!harness.kubelet->Devices("nvidia.com/mig-3g.40gb").empty() &&
         std::chrono::steady_clock::now() < later) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(harness.kubelet->Devices("nvidia.com/mig-3g.40gb").empty());
}

TEST(NodeDevicePlugin, AllocateLabelsTheContainerWithTheKubeletsIds) {
  Harness harness(2);
  harness.AddPlan({"ml/a", Record("a", {{"main", false, Gpus({4, 5})}})});
  FakePodSpec pod{"ml", "a", {{"main", false, false, {{"nvidia.com/gpu", 2}}}}, std::nullopt};
  auto admitted = harness.kubelet->Admit(pod);
  ASSERT_TRUE(admitted.has_value()) << admitted.error().message;
  const AdmittedContainer& container = admitted->at("main");
  EXPECT_TRUE(container.asked_preferred);
  EXPECT_EQ(container.ids.at("nvidia.com/gpu"), (std::vector<std::string>{"GPU-4", "GPU-5"}));
  EXPECT_EQ(container.annotations.at("linkfit.io/kubelet-ids.nvidia.com/gpu"), "GPU-4,GPU-5");
  EXPECT_EQ(harness.plugins->stats().allocations, 1u);
  EXPECT_EQ(harness.plugins->stats().preferred, 1u);
}

// The verify-only mode: the plugin injects what the kubelet chose and refuses to start a container
// whose devices are not its plan.
TEST(NodeDevicePlugin, VerifyModeInjectsAndRefusesADifferentChoice) {
  Harness harness(4, /*verify=*/true);
  harness.AddPlan({"ml/a", Record("a", {{"main", false, Gpus({4, 5})}})});
  auto steered = harness.kubelet->Admit(
      {"ml", "a", {{"main", false, false, {{"nvidia.com/gpu", 2}}}}, std::nullopt});
  ASSERT_TRUE(steered.has_value()) << steered.error().message;
  EXPECT_EQ(steered->at("main").envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-4,GPU-5");
  EXPECT_TRUE(harness.kubelet->StartContainer("ml", "a", "main").has_value());
  // Pod b is admitted before its plan is known: the kubelet picks on its own. Its plan then names
  // two GPUs it does not hold.
  auto unsteered = harness.kubelet->Admit(
      {"ml", "b", {{"main", false, false, {{"nvidia.com/gpu", 2}}}}, std::nullopt});
  ASSERT_TRUE(unsteered.has_value()) << unsteered.error().message;
  const auto& held = unsteered->at("main").ids.at("nvidia.com/gpu");
  std::vector<int> other;
  for (int g : {0, 1, 2, 3, 6}) {
    if (std::find(held.begin(), held.end(), "GPU-" + std::to_string(g)) == held.end()) {
      other.push_back(g);
    }
  }
  other.resize(2);
  harness.AddPlan({"ml/b", Record("b", {{"main", false, Gpus(other)}})});
  const auto refused = harness.kubelet->StartContainer("ml", "b", "main");
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("linkfit's plan is"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(harness.plugins->stats().verified, 1u);
  EXPECT_EQ(harness.plugins->stats().refused, 1u);
  // Shares: the replicas the kubelet chose, as their GPU and thousandths.
  kube::AllocationRecord::Devices share;
  share.shares = {{3, 250}};
  harness.AddPlan({"ml/nb", Record("nb", {{"nb", false, share}})});
  auto shared = harness.kubelet->Admit(
      {"ml", "nb", {{"nb", false, false, {{"linkfit.io/gpu-share", 250}}}}, std::nullopt});
  ASSERT_TRUE(shared.has_value()) << shared.error().message;
  EXPECT_EQ(shared->at("nb").envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-3");
  EXPECT_EQ(shared->at("nb").envs.at("LINKFIT_GPU_SHARES"), "GPU-3=250");
}

// Verify mode for NICs: the chosen NICs' verbs devices, rdma_cm and NCCL's and UCX's environment;
// a container holding other NICs than its plan does not start, and the refusal names them.
TEST(NodeDevicePlugin, VerifyModeInjectsTheChosenNicsAndRefusesOthers) {
  Harness harness(5, /*verify=*/true);
  kube::AllocationRecord::Devices trainer = Gpus({0, 2});
  trainer.nics = {Nic("mlx5_0"), Nic("mlx5_2")};
  harness.AddPlan({"ml/t", Record("t", {{"main", false, trainer}})});
  auto steered = harness.kubelet->Admit(
      {"ml",
       "t",
       {{"main", false, false, {{"nvidia.com/gpu", 2}, {"linkfit.io/rdma", 2}}}},
       std::nullopt});
  ASSERT_TRUE(steered.has_value()) << steered.error().message;
  const AdmittedContainer& main = steered->at("main");
  EXPECT_EQ(main.ids.at("linkfit.io/rdma"), (std::vector<std::string>{"mlx5_0", "mlx5_2"}));
  EXPECT_EQ(main.annotations.at("linkfit.io/kubelet-ids.linkfit.io/rdma"), "mlx5_0,mlx5_2");
  EXPECT_EQ(main.devices,
            (std::vector<std::string>{"/dev/infiniband/rdma_cm=/dev/infiniband/rdma_cm:rw",
                                      "/dev/infiniband/uverbs0=/dev/infiniband/uverbs0:rw",
                                      "/dev/infiniband/uverbs2=/dev/infiniband/uverbs2:rw"}));
  EXPECT_EQ(main.envs.at("NCCL_IB_HCA"), "=mlx5_0:1,mlx5_2:1");
  EXPECT_EQ(main.envs.at("UCX_NET_DEVICES"), "mlx5_0:1,mlx5_2:1");
  EXPECT_EQ(main.envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-0,GPU-2");
  EXPECT_TRUE(harness.kubelet->StartContainer("ml", "t", "main").has_value());
  // Pod u is admitted before its plan is known; its plan names a NIC the kubelet did not pick.
  auto unsteered = harness.kubelet->Admit(
      {"ml", "u", {{"main", false, false, {{"linkfit.io/rdma", 1}}}}, std::nullopt});
  ASSERT_TRUE(unsteered.has_value()) << unsteered.error().message;
  const std::string picked = unsteered->at("main").ids.at("linkfit.io/rdma").at(0);
  kube::AllocationRecord::Devices other;
  other.nics = {Nic(picked == "mlx5_1" ? "mlx5_3" : "mlx5_1")};
  harness.AddPlan({"ml/u", Record("u", {{"main", false, other}})});
  const auto refused = harness.kubelet->StartContainer("ml", "u", "main");
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("linkfit.io/rdma " + picked + " but linkfit's plan is " +
                                         other.nics[0].name),
            std::string::npos)
      << refused.error().message;
}

// Verify mode with --exempt-namespace: a pod of that namespace whose plan is not what the kubelet
// chose starts all the same, while one elsewhere is refused.
TEST(NodeDevicePlugin, VerifyModeLetsExemptNamespacesStartOnTheKubeletsChoice) {
  Harness harness(6, /*verify=*/true, {"gpu-operator"});
  for (const std::string ns : {"gpu-operator", "ml"}) {
    auto admitted = harness.kubelet->Admit(
        {ns, "d", {{"main", false, false, {{"nvidia.com/gpu", 1}}}}, std::nullopt});
    ASSERT_TRUE(admitted.has_value()) << admitted.error().message;
    const std::string held = admitted->at("main").ids.at("nvidia.com/gpu").at(0);
    harness.AddPlan({ns + "/d", Record("d", {{"main", false, Gpus({held == "GPU-0" ? 1 : 0})}})});
    const auto started = harness.kubelet->StartContainer(ns, "d", "main");
    EXPECT_EQ(started.has_value(), ns == "gpu-operator") << ns;
  }
  EXPECT_EQ(harness.plugins->stats().verified, 1u);
  EXPECT_EQ(harness.plugins->stats().refused, 1u);
}

TEST(NodeDevicePlugin, KubeletRestartIsNoticed) {
  Harness harness(3);
  EXPECT_FALSE(harness.plugins->KubeletRestarted());
  // The kubelet restarting removes every socket in its directory.
  ::unlink((harness.kubelet->directory() + "/" + PluginSocketName("nvidia.com/gpu")).c_str());
  EXPECT_TRUE(harness.plugins->KubeletRestarted());
}

// Property: pods whose plans are disjoint, admitted one at a time in random order, with init
// containers, shares, MIG, NUMA hints and RDMA NICs (two whole NICs for a 2-GPU pod, four pods
// with a quarter of one NIC each): every container's kubelet IDs equal its plan (so the NRI side
// sees no mismatch), no device ID is ever held by two pods, and no NIC is held whole by one pod
// and shared by another.
TEST(NodeDevicePlugin, RandomAdmissionOrdersFollowThePlans) {
  for (unsigned seed = 1; seed <= 12; ++seed) {
    std::mt19937 random(seed);
    Harness harness(seed);
    std::vector<int> gpus = {0, 1, 2, 3, 4, 5, 6};
    std::shuffle(gpus.begin(), gpus.end(), random);
    std::vector<FakePodSpec> pods;
    std::map<std::string, kube::AllocationRecord::Devices> planned;  // pod -> its one container
    // Pod 0: init container on 2 GPUs, app container on those 2 and 1 more.
    {
      const std::vector<int> init(gpus.begin(), gpus.begin() + 2);
      const std::vector<int> app(gpus.begin(), gpus.begin() + 3);
      harness.AddPlan(
          {"ml/p0", Record("p0", {{"setup", true, Gpus(init)}, {"train", false, Gpus(app)}})});
      pods.push_back({"ml",
                      "p0",
                      {{"train", false, false, {{"nvidia.com/gpu", 3}}},
                       {"setup", true, false, {{"nvidia.com/gpu", 2}}}},
                      std::nullopt});
      planned["p0"] = Gpus(app);
    }
    // Pod 1: two GPUs with a whole NIC each, with the Topology Manager's NUMA hint where both GPUs
    // are on one NUMA node (linkfit plans NUMA itself, so the hint agrees with the plan: the NICs
    // are then that node's).
    std::vector<std::string> nics = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"};
    std::shuffle(nics.begin(), nics.end(), random);
    {
      const std::vector<int> mine(gpus.begin() + 3, gpus.begin() + 5);
      std::optional<int> hint;
      if ((mine[0] < 4) == (mine[1] < 4)) hint = mine[0] < 4 ? 0 : 1;
      if (hint)
        nics = *hint == 0 ? std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2"}
                          : std::vector<std::string>{"mlx5_2", "mlx5_3", "mlx5_0"};
      kube::AllocationRecord::Devices devices = Gpus(mine);
      devices.nics = {Nic(nics[0]), Nic(nics[1])};
      harness.AddPlan({"ml/p1", Record("p1", {{"main", false, devices}})});
      pods.push_back({"ml",
                      "p1",
                      {{"main", false, false, {{"nvidia.com/gpu", 2}, {"linkfit.io/rdma", 2}}}},
                      hint});
      planned["p1"] = devices;
    }
    // Pod 2: one MIG instance; pods 3-6: 250 thousandths of a GPU and of one NIC each.
    {
      kube::AllocationRecord::Devices mig;
      mig.mig = {{7, "3g.40gb", (random() % 2) ? 4 : 0, ""}};
      harness.AddPlan({"ml/p2", Record("p2", {{"main", false, mig}})});
      pods.push_back(
          {"ml", "p2", {{"main", false, false, {{"nvidia.com/mig-3g.40gb", 1}}}}, std::nullopt});
      for (int p = 3; p <= 6; ++p) {
        const std::string name = "p" + std::to_string(p);
        kube::AllocationRecord::Devices share;
        share.shares = {{gpus[p == 3 ? 5 : 6], 250}};
        share.nics = {Nic(nics[2], 250)};
        harness.AddPlan({"ml/" + name, Record(name, {{"nb", false, share}})});
        pods.push_back({"ml",
                        name,
                        {{"nb",
                          false,
                          false,
                          {{"linkfit.io/gpu-share", 250}, {"linkfit.io/rdma-share", 250}}}},
                        std::nullopt});
        planned[name] = share;
      }
    }
    std::shuffle(pods.begin(), pods.end(), random);
    std::map<std::string, std::string> holder;  // device ID -> pod
    for (const FakePodSpec& pod : pods) {
      auto admitted = harness.kubelet->Admit(pod);
      ASSERT_TRUE(admitted.has_value()) << "seed " << seed << ": " << admitted.error().message;
      for (const auto& [container, result] : *admitted) {
        for (const auto& [resource, ids] : result.ids) {
          for (const std::string& id : ids) {
            const auto [it, fresh] = holder.emplace(id, pod.name);
            EXPECT_TRUE(fresh || it->second == pod.name)
                << "seed " << seed << ": " << id << " held by " << it->second << " and "
                << pod.name;
          }
        }
      }
      if (!planned.count(pod.name)) continue;
      const kube::AllocationRecord::Devices& plan = planned[pod.name];
      const AdmittedContainer& got =
          admitted->at(pod.name == "p0" ? "train" : pod.containers[0].name);
      for (const std::string resource :
           {"nvidia.com/gpu", "linkfit.io/gpu-share", "linkfit.io/rdma", "linkfit.io/rdma-share"}) {
        const PlannedResource want = PlannedFor(plan, resource, Node(), PluginOptions{});
        if (want.wanted == 0) continue;
        std::map<std::string, int> physical;
        for (const std::string& id : got.ids.at(resource)) ++physical[id.substr(0, id.find("::"))];
        std::map<std::string, int> expected;
        for (const std::string& id : want.ids) ++expected[id];
        for (const auto& [base, milli] : want.shares) expected[base] += milli;
        EXPECT_EQ(physical, expected) << "seed " << seed << " " << pod.name << " " << resource;
      }
    }
    // A NIC held whole is nobody's share.
    for (const auto& [id, pod] : holder) {
      const std::size_t replica = id.find("::");
      if (replica == std::string::npos) continue;
      const auto whole = holder.find(id.substr(0, replica));
      EXPECT_TRUE(whole == holder.end() || whole->second == pod) << "seed " << seed << " " << id;
    }
    EXPECT_EQ(harness.plugins->stats().no_preference, 0u) << "seed " << seed;
  }
}

}  // namespace
}  // namespace linkfit::handoff
