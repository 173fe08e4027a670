// ParseGpuRequest's RDMA NICs, table-driven: every NIC resource and annotation gpu_request.h
// documents, their defaults and agreements, pods with and without GPUs, and every bad value or
// contradiction, whose error must name the annotation or resource at fault.

#include <gtest/gtest.h>

#include "linkfit/extender/gpu_request.h"
#include "linkfit/kube/object_json.h"

namespace linkfit::extender {
namespace {

using Kind = GpuRequest::Kind;
using alloc::ClosenessPolicy;
using alloc::NicCloseness;
using alloc::NicRequest;

constexpr std::int64_t kOne = 1000;  // one unit of a resource, in thousandths
constexpr int kPerGpu = NicRequest::kPerGpu;

kube::PodView Pod(kube::ResourceMap requests, kube::StringMap annotations) {
  kube::PodView pod;
  pod.name = "p";
  pod.pod_namespace = "ns";
  pod.uid = "uid-1";
  pod.requests = std::move(requests);
  pod.annotations = std::move(annotations);
  return pod;
}

NicRequest Nics(int count, int milli = 1000, NicCloseness closeness = NicCloseness::kPxb,
                ClosenessPolicy policy = ClosenessPolicy::kPreferred) {
  return NicRequest{count, milli, closeness, policy, {}};
}

// A cluster that also counts Mellanox's shared-device plugin and rdma/hca as whole NICs.
RequestDefaults WithClusterResources() {
  RequestDefaults defaults;
  defaults.nic_resources = {"rdma/rdma_shared_device_a", "rdma/hca"};
  return defaults;
}

struct ValidCase {
  const char* name;
  kube::ResourceMap requests;
  kube::StringMap annotations;
  Kind kind;
  NicRequest nics;
};

TEST(ParseNicRequestTest, EverySourceAndItsDefaults) {
  const std::vector<ValidCase> cases = {
      {"nothing", {}, {}, Kind::kNone, NicRequest{}},
      {"gpus only", {{"nvidia.com/gpu", 2 * kOne}}, {}, Kind::kWhole, NicRequest{}},
      {"nic resource, no GPU", {{"linkfit.io/rdma", 2 * kOne}}, {}, Kind::kNone, Nics(2)},
      {"zero nic resource", {{"linkfit.io/rdma", 0}}, {}, Kind::kNone, NicRequest{}},
      {"nic resource beside GPUs",
       {{"nvidia.com/gpu", 8 * kOne}, {"linkfit.io/rdma", 4 * kOne}},
       {},
       Kind::kWhole,
       Nics(4)},
      {"cluster resource", {{"rdma/hca", kOne}}, {}, Kind::kNone, Nics(1)},
      {"shared-device plugin resource",
       {{"nvidia.com/gpu", 2 * kOne}, {"rdma/rdma_shared_device_a", 2 * kOne}},
       {},
       Kind::kWhole,
       Nics(2)},
      {"per-gpu",
       {{"nvidia.com/gpu", 4 * kOne}},
       {{"linkfit.io/nics", "per-gpu"}},
       Kind::kWhole,
       Nics(kPerGpu)},
      {"count annotation",
       {{"nvidia.com/gpu", 4 * kOne}},
       {{"linkfit.io/nics", "2"}},
       Kind::kWhole,
       Nics(2)},
      {"count annotation agrees with resource",
       {{"linkfit.io/rdma", 3 * kOne}},
       {{"linkfit.io/nics", "3"}},
       Kind::kNone,
       Nics(3)},
      {"per-gpu agrees with resource",
       {{"nvidia.com/gpu", 2 * kOne}, {"linkfit.io/rdma", 2 * kOne}},
       {{"linkfit.io/nics", "per-gpu"}},
       Kind::kWhole,
       Nics(2)},
      {"per-gpu without GPUs is one NIC",
       {{"linkfit.io/rdma", kOne}},
       {{"linkfit.io/nics", "per-gpu"}},
       Kind::kNone,
       Nics(1)},
      {"share resource, one per GPU",
       {{"nvidia.com/gpu", kOne}, {"linkfit.io/rdma-share", 250 * kOne}},
       {},
       Kind::kWhole,
       Nics(kPerGpu, 250)},
      {"share annotation without GPUs (a CPU pod of the 2025 trace)",
       {{"cpu", 4000}},
       {{"linkfit.io/nic-share", "100"}},
       Kind::kNone,
       Nics(kPerGpu, 100)},
      {"share annotation with a count",
       {},
       {{"linkfit.io/nic-share", "500"}, {"linkfit.io/nics", "2"}},
       Kind::kNone,
       Nics(2, 500)},
      {"share resource and agreeing annotation",
       {{"linkfit.io/rdma-share", 300 * kOne}},
       {{"linkfit.io/nic-share", "300"}},
       Kind::kNone,
       Nics(kPerGpu, 300)},
      {"a share of 1000 is the whole NIC",
       {{"linkfit.io/rdma-share", 1000 * kOne}},
       {},
       Kind::kNone,
       Nics(kPerGpu, 1000)},
      {"closeness and policy",
       {{"nvidia.com/gpu", 4 * kOne}},
       {{"linkfit.io/nics", "per-gpu"},
        {"linkfit.io/nic-closeness", "pix"},
        {"linkfit.io/nic-closeness-policy", "required"}},
       Kind::kWhole,
       Nics(kPerGpu, 1000, NicCloseness::kPix, ClosenessPolicy::kRequired)},
      {"numa and node",
       {{"linkfit.io/rdma", kOne}},
       {{"linkfit.io/nic-closeness", "numa"}, {"linkfit.io/nic-closeness-policy", "preferred"}},
       Kind::kNone,
       Nics(1, 1000, NicCloseness::kNuma)},
      {"GPU closeness does not set the NICs'",
       {{"nvidia.com/gpu", 2 * kOne}},
       {{"linkfit.io/nics", "per-gpu"}, {"linkfit.io/closeness-policy", "required"}},
       Kind::kWhole,
       Nics(kPerGpu)},
      // As linkfit.io/closeness on a pod without GPUs: checked, then without effect.
      {"nic closeness without a NIC request",
       {{"nvidia.com/gpu", 2 * kOne}},
       {{"linkfit.io/nic-closeness", "pix"}, {"linkfit.io/nic-closeness-policy", "required"}},
       Kind::kWhole,
       NicRequest{}},
      {"GPU shares ask NICs",
       {{"linkfit.io/gpu-share", 300 * kOne}},
       {{"linkfit.io/nics", "per-gpu"}, {"linkfit.io/gpus", "2"}},
       Kind::kShared,
       Nics(kPerGpu)},
      {"per-gpu agrees with shared GPUs",
       {{"linkfit.io/gpu-share", 300 * kOne}, {"linkfit.io/rdma", 2 * kOne}},
       {{"linkfit.io/nics", "per-gpu"}, {"linkfit.io/gpus", "2"}},
       Kind::kShared,
       Nics(2)},
      {"MIG pods ask NICs",
       {{"nvidia.com/mig-3g.20gb", kOne}, {"linkfit.io/rdma-share", 500 * kOne}},
       {},
       Kind::kMig,
       Nics(kPerGpu, 500)},
      {"MIG instances name the NICs the share resource spreads over",
       {{"nvidia.com/mig-3g.20gb", 2 * kOne}, {"linkfit.io/rdma-share", 500 * kOne}},
       {{"linkfit.io/nics", "2"}},
       Kind::kMig,
       Nics(2, 250)},
      {"MIG instances with a per-NIC share annotation",
       {{"nvidia.com/mig-3g.20gb", 2 * kOne}},
       {{"linkfit.io/nic-share", "500"}},
       Kind::kMig,
       Nics(kPerGpu, 500)},
      // The share resource counts as the kubelet counts it: the pod's thousandths of all its
      // NICs, spread evenly (one replica ID per thousandth); the annotation is per NIC.
      {"share resource spread over one NIC per GPU",
       {{"nvidia.com/gpu", 2 * kOne}, {"linkfit.io/rdma-share", 500 * kOne}},
       {},
       Kind::kWhole,
       Nics(kPerGpu, 250)},
      {"share resource spread over a count",
       {{"linkfit.io/rdma-share", 500 * kOne}},
       {{"linkfit.io/nics", "2"}},
       Kind::kNone,
       Nics(2, 250)},
      {"share resource spread over shared GPUs' NICs",
       {{"linkfit.io/gpu-share", 600 * kOne}, {"linkfit.io/rdma-share", 400 * kOne}},
       {{"linkfit.io/gpus", "2"}},
       Kind::kShared,
       Nics(kPerGpu, 200)},
      {"share resource total agrees with the per-NIC annotation",
       {{"linkfit.io/rdma-share", 600 * kOne}},
       {{"linkfit.io/nics", "2"}, {"linkfit.io/nic-share", "300"}},
       Kind::kNone,
       Nics(2, 300)},
      {"share resource of two whole NICs",
       {{"linkfit.io/rdma-share", 2000 * kOne}},
       {{"linkfit.io/nics", "2"}},
       Kind::kNone,
       Nics(2, 1000)},
      {"unlisted RDMA resources are not NICs",
       {{"rdma/other", kOne}},
       {},
       Kind::kNone,
       NicRequest{}},
  };
  for (const ValidCase& c : cases) {
    SCOPED_TRACE(c.name);
    const auto request = ParseGpuRequest(Pod(c.requests, c.annotations), WithClusterResources());
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->kind, c.kind);
    EXPECT_EQ(request->nics, c.nics) << request->Describe();
    EXPECT_EQ(request->WantsDevices(), c.kind != Kind::kNone || c.nics.wanted());
  }
}

TEST(ParseNicRequestTest, DefaultsComeFromTheConfig) {
  RequestDefaults defaults;
  defaults.nic_resource = "example.com/ib";
  defaults.nic_share_resource = "example.com/ib-milli";
  defaults.nic_closeness = NicCloseness::kNuma;
  auto whole = ParseGpuRequest(Pod({{"example.com/ib", 2 * kOne}}, {}), defaults);
  ASSERT_TRUE(whole.has_value()) << whole.error().message;
  EXPECT_EQ(whole->nics, Nics(2, 1000, NicCloseness::kNuma));
  auto share = ParseGpuRequest(Pod({{"example.com/ib-milli", 125 * kOne}}, {}), defaults);
  ASSERT_TRUE(share.has_value()) << share.error().message;
  EXPECT_EQ(share->nics, Nics(kPerGpu, 125, NicCloseness::kNuma));
  // The default names mean nothing once others are configured.
  auto renamed = ParseGpuRequest(
      Pod({{"linkfit.io/rdma", 2 * kOne}, {"linkfit.io/rdma-share", 100 * kOne}}, {}), defaults);
  ASSERT_TRUE(renamed.has_value()) << renamed.error().message;
  EXPECT_FALSE(renamed->WantsDevices());
  // An annotation overrides the default closeness.
  auto pix = ParseGpuRequest(Pod({{"example.com/ib", kOne}}, {{"linkfit.io/nic-closeness", "pix"}}),
                             defaults);
  ASSERT_TRUE(pix.has_value()) << pix.error().message;
  EXPECT_EQ(pix->nics.closeness, NicCloseness::kPix);
  // Without a config: linkfit.io/rdma, linkfit.io/rdma-share, pxb, preferred.
  auto plain = ParseGpuRequest(Pod({{"linkfit.io/rdma", kOne}}, {}), RequestDefaults{});
  ASSERT_TRUE(plain.has_value()) << plain.error().message;
  EXPECT_EQ(plain->nics, Nics(1));
}

// NIC resources count as nvidia.com/gpu does: app containers summed, init containers as
// Kubernetes counts them (the largest of them, when larger than the app containers' sum).
TEST(ParseNicRequestTest, ContainersCountAsForGpus) {
  const auto pod = kube::DecodePod(R"({
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
    "spec": {
      "initContainers": [{"name": "setup", "resources": {"limits":
          {"nvidia.com/gpu": "1", "linkfit.io/rdma": "3"}}}],
      "containers": [
        {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2", "linkfit.io/rdma": "1"}}},
        {"name": "b", "resources": {"requests": {"nvidia.com/gpu": "2", "linkfit.io/rdma": "1"},
                                    "limits": {"nvidia.com/gpu": "2", "linkfit.io/rdma": "1"}}}]
    }})");
  ASSERT_TRUE(pod.has_value()) << pod.error().message;
  const auto request = ParseGpuRequest(*pod, RequestDefaults{});
  ASSERT_TRUE(request.has_value()) << request.error().message;
  EXPECT_EQ(request->count, 4);       // max(2 + 2, 1)
  EXPECT_EQ(request->nics.count, 3);  // max(1 + 1, 3)
}

// A quantity the pod's codec (kube/quantity) cannot read is an error naming the key and value.
TEST(ParseNicRequestTest, GarbageQuantitiesNameKeyAndValue) {
  for (const char* resource : {"linkfit.io/rdma", "linkfit.io/rdma-share", "rdma/hca"}) {
    SCOPED_TRACE(resource);
    const auto pod =
        kube::DecodePod(std::string(R"({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
                        "spec": {"containers": [{"name": "a", "resources": {"limits": {")") +
                        resource + R"(": "lots"}}}]}})");
    ASSERT_TRUE(pod.has_value()) << pod.error().message;
    const auto request = ParseGpuRequest(*pod, WithClusterResources());
    ASSERT_FALSE(request.has_value()) << "accepted: " << request->Describe();
    EXPECT_NE(request.error().message.find(resource), std::string::npos) << request.error().message;
    EXPECT_NE(request.error().message.find("lots"), std::string::npos) << request.error().message;
  }
}

struct BadCase {
  const char* name;
  kube::ResourceMap requests;
  kube::StringMap annotations;
  std::vector<std::string> must_name;  // substrings the error message must contain
};

TEST(ParseNicRequestTest, BadValuesAreErrorsNamingTheirSource) {
  const std::vector<BadCase> cases = {
      // linkfit.io/nics
      {"count not a number", {}, {{"linkfit.io/nics", "two"}}, {"linkfit.io/nics", "\"two\""}},
      {"count empty", {}, {{"linkfit.io/nics", ""}}, {"linkfit.io/nics", "per-gpu"}},
      {"count zero", {}, {{"linkfit.io/nics", "0"}}, {"linkfit.io/nics", "\"0\""}},
      {"count 129", {}, {{"linkfit.io/nics", "129"}}, {"linkfit.io/nics", "1 to 128", "129"}},
      {"count fractional", {}, {{"linkfit.io/nics", "1.5"}}, {"linkfit.io/nics", "1.5"}},
      {"per-gpu is lower case", {}, {{"linkfit.io/nics", "Per-GPU"}}, {"linkfit.io/nics"}},
      // linkfit.io/nic-share
      {"share 0", {}, {{"linkfit.io/nic-share", "0"}}, {"linkfit.io/nic-share", "\"0\""}},
      {"share 1001", {}, {{"linkfit.io/nic-share", "1001"}}, {"linkfit.io/nic-share", "1001"}},
      {"share text", {}, {{"linkfit.io/nic-share", "half"}}, {"linkfit.io/nic-share", "half"}},
      // closeness and policy: checked with or without a NIC request
      {"bad closeness",
       {{"linkfit.io/rdma", kOne}},
       {{"linkfit.io/nic-closeness", "close"}},
       {"linkfit.io/nic-closeness", "close"}},
      {"closeness is lower case",
       {{"linkfit.io/rdma", kOne}},
       {{"linkfit.io/nic-closeness", "PXB"}},
       {"linkfit.io/nic-closeness", "PXB"}},
      {"bad closeness without a NIC request",
       {},
       {{"linkfit.io/nic-closeness", "phb"}},
       {"linkfit.io/nic-closeness", "phb"}},
      {"bad policy",
       {{"linkfit.io/rdma", kOne}},
       {{"linkfit.io/nic-closeness-policy", "always"}},
       {"linkfit.io/nic-closeness-policy", "always"}},
      // resources
      {"fractional nic resource", {{"linkfit.io/rdma", 500}}, {}, {"resource linkfit.io/rdma"}},
      {"129 nics", {{"linkfit.io/rdma", 129 * kOne}}, {}, {"resource linkfit.io/rdma", "129"}},
      {"fractional cluster resource", {{"rdma/hca", 1500}}, {}, {"resource rdma/hca", "1.5"}},
      {"share resource 1001",
       {{"linkfit.io/rdma-share", 1001 * kOne}},
       {},
       {"resource linkfit.io/rdma-share", "1001", "1 NIC"}},
      {"share resource fractional",
       {{"linkfit.io/rdma-share", 500}},
       {},
       {"resource linkfit.io/rdma-share"}},
      // contradictions
      {"two whole-NIC resources",
       {{"linkfit.io/rdma", kOne}, {"rdma/hca", kOne}},
       {},
       {"resource linkfit.io/rdma", "resource rdma/hca"}},
      {"whole resource and share resource",
       {{"linkfit.io/rdma", kOne}, {"linkfit.io/rdma-share", 250 * kOne}},
       {},
       {"resource linkfit.io/rdma", "resource linkfit.io/rdma-share"}},
      {"whole resource and share annotation",
       {{"rdma/hca", kOne}},
       {{"linkfit.io/nic-share", "250"}},
       {"resource rdma/hca", "annotation linkfit.io/nic-share"}},
      {"resource says 2, annotation 4",
       {{"linkfit.io/rdma", 2 * kOne}},
       {{"linkfit.io/nics", "4"}},
       {"annotation linkfit.io/nics (4)", "resource linkfit.io/rdma (2)"}},
      {"per-gpu with 4 GPUs, resource 2",
       {{"nvidia.com/gpu", 4 * kOne}, {"linkfit.io/rdma", 2 * kOne}},
       {{"linkfit.io/nics", "per-gpu"}},
       {"annotation linkfit.io/nics (per-gpu)", "resource linkfit.io/rdma (2)"}},
      {"per-gpu with MIG instances, resource 1",
       {{"nvidia.com/mig-1g.10gb", kOne}, {"linkfit.io/rdma", kOne}},
       {{"linkfit.io/nics", "per-gpu"}},
       {"annotation linkfit.io/nics", "resource linkfit.io/rdma"}},
      {"share resource and annotation disagree",
       {{"linkfit.io/rdma-share", 200 * kOne}},
       {{"linkfit.io/nic-share", "300"}},
       {"annotation linkfit.io/nic-share (300", "resource linkfit.io/rdma-share (200 in all"}},
      {"per-NIC annotation is not the total",
       {{"linkfit.io/rdma-share", 500 * kOne}},
       {{"linkfit.io/nics", "2"}, {"linkfit.io/nic-share", "500"}},
       {"annotation linkfit.io/nic-share (500", "resource linkfit.io/rdma-share (500 in all",
        "2 NICs", "250 of each"}},
      {"share resource uneven over a count",
       {{"linkfit.io/rdma-share", 500 * kOne}},
       {{"linkfit.io/nics", "3"}},
       {"resource linkfit.io/rdma-share", "500", "3 NICs"}},
      {"share resource uneven over one NIC per GPU",
       {{"nvidia.com/gpu", 4 * kOne}, {"linkfit.io/rdma-share", 250 * kOne}},
       {},
       {"resource linkfit.io/rdma-share", "250", "4 NICs"}},
      {"share resource more than each NIC",
       {{"linkfit.io/rdma-share", 2400 * kOne}},
       {{"linkfit.io/nics", "2"}},
       {"resource linkfit.io/rdma-share", "2400", "2 NICs", "1200"}},
      {"share resource over MIG instances without a count",
       {{"nvidia.com/mig-1g.10gb", 2 * kOne}, {"linkfit.io/rdma-share", 500 * kOne}},
       {},
       {"resource linkfit.io/rdma-share", "500", "linkfit.io/nics"}},
      // a GPU error still wins, and names the GPU key
      {"bad GPU hint beside NICs",
       {{"linkfit.io/rdma", kOne}},
       {{"linkfit.io/gpus", "many"}},
       {"linkfit.io/gpus"}},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    const auto request = ParseGpuRequest(Pod(c.requests, c.annotations), WithClusterResources());
    ASSERT_FALSE(request.has_value()) << "accepted: " << request->Describe();
    for (const std::string& needle : c.must_name) {
      EXPECT_NE(request.error().message.find(needle), std::string::npos)
          << "'" << request.error().message << "' does not name " << needle;
    }
  }
}

TEST(ParseNicRequestTest, DescribeEqualityAndWantsDevices) {
  GpuRequest whole;
  whole.kind = Kind::kWhole;
  whole.count = 4;
  whole.closeness = alloc::Closeness::kNvlink;
  whole.policy = ClosenessPolicy::kRequired;
  EXPECT_EQ(whole.Describe(), "4 GPUs, nvlink required");
  GpuRequest with_nics = whole;
  with_nics.nics = Nics(kPerGpu);
  EXPECT_EQ(with_nics.Describe(), "4 GPUs, nvlink required; 1 NIC per GPU at pxb");
  EXPECT_EQ(with_nics.DescribeGpus(), "4 GPUs, nvlink required");
  EXPECT_NE(whole, with_nics);
  GpuRequest other_share = with_nics;
  other_share.nics.milli = 250;
  EXPECT_NE(with_nics, other_share);
  EXPECT_EQ(other_share.Describe(), "4 GPUs, nvlink required; 1 NIC per GPU x 250/1000 at pxb");

  GpuRequest cpu_pod;
  EXPECT_FALSE(cpu_pod.WantsDevices());
  cpu_pod.nics = Nics(kPerGpu, 250);
  EXPECT_TRUE(cpu_pod.WantsDevices());
  EXPECT_EQ(cpu_pod.kind, Kind::kNone);
  EXPECT_EQ(cpu_pod.Describe(), "no GPUs; 1 NIC x 250/1000 at pxb");
  cpu_pod.nics = Nics(2, 1000, NicCloseness::kNuma, ClosenessPolicy::kRequired);
  EXPECT_EQ(cpu_pod.Describe(), "no GPUs; 2 NICs at numa, required");
}

}  // namespace
}  // namespace linkfit::extender
