// ParseGpuRequest, table-driven: every resource/annotation combination gpu_request.h documents,
// and every bad value, whose error must name the annotation or resource at fault.

#include "linkfit/extender/gpu_request.h"

#include <gtest/gtest.h>

namespace linkfit::extender {
namespace {

using Kind = GpuRequest::Kind;
using alloc::Closeness;
using alloc::ClosenessPolicy;

struct Input {
  kube::ResourceMap requests;  // in thousandths, as the codec produces
  kube::StringMap annotations;
  std::vector<std::string> problems;
};

kube::PodView Pod(const Input& input) {
  kube::PodView pod;
  pod.name = "p";
  pod.pod_namespace = "ns";
  pod.uid = "uid-1";
  pod.requests = input.requests;
  pod.annotations = input.annotations;
  pod.problems = input.problems;
  return pod;
}

constexpr std::int64_t kOne = 1000;  // one unit of a resource, in thousandths

struct ValidCase {
  const char* name;
  Input input;
  Kind kind;
  int count;
  Closeness closeness = Closeness::kNode;
  ClosenessPolicy policy = ClosenessPolicy::kPreferred;
  std::string mig_profile = "";
  int share_milli = 0;
  std::vector<std::string> models = {};
};

TEST(ParseGpuRequestTest, ValidCombinations) {
  const std::vector<ValidCase> cases = {
      {"nothing", {}, Kind::kNone, 0},
      {"cpu only", {{{"cpu", 500}, {"memory", 1024 * kOne}}, {}, {}}, Kind::kNone, 0},
      {"zero gpu resource", {{{"nvidia.com/gpu", 0}}, {}, {}}, Kind::kNone, 0},
      {"gpu resource", {{{"nvidia.com/gpu", 2 * kOne}}, {}, {}}, Kind::kWhole, 2},
      {"gpu resource max", {{{"nvidia.com/gpu", 16 * kOne}}, {}, {}}, Kind::kWhole, 16},
      {"gpus annotation", {{}, {{"linkfit.io/gpus", "4"}}, {}}, Kind::kWhole, 4},
      {"gpus annotation agrees",
       {{{"nvidia.com/gpu", 4 * kOne}}, {{"linkfit.io/gpus", "4"}}, {}},
       Kind::kWhole,
       4},
      {"gpus annotation with zero resource",
       {{{"nvidia.com/gpu", 0}}, {{"linkfit.io/gpus", "3"}}, {}},
       Kind::kWhole,
       3},
      {"nvlink required",
       {{{"nvidia.com/gpu", 4 * kOne}},
        {{"linkfit.io/closeness", "nvlink"}, {"linkfit.io/closeness-policy", "required"}},
        {}},
       Kind::kWhole,
       4,
       Closeness::kNvlink,
       ClosenessPolicy::kRequired},
      {"pcie-switch",
       {{{"nvidia.com/gpu", 2 * kOne}}, {{"linkfit.io/closeness", "pcie-switch"}}, {}},
       Kind::kWhole,
       2,
       Closeness::kPcieSwitch},
      {"numa preferred",
       {{{"nvidia.com/gpu", 2 * kOne}},
        {{"linkfit.io/closeness", "numa"}, {"linkfit.io/closeness-policy", "preferred"}},
        {}},
       Kind::kWhole,
       2,
       Closeness::kNuma},
      {"socket",
       {{{"nvidia.com/gpu", 2 * kOne}}, {{"linkfit.io/closeness", "socket"}}, {}},
       Kind::kWhole,
       2,
       Closeness::kSocket},
      {"node",
       {{{"nvidia.com/gpu", 2 * kOne}}, {{"linkfit.io/closeness", "node"}}, {}},
       Kind::kWhole,
       2},
      {"mig resource",
       {{{"nvidia.com/mig-3g.20gb", 2 * kOne}}, {}, {}},
       Kind::kMig,
       2,
       Closeness::kNode,
       ClosenessPolicy::kPreferred,
       "3g.20gb"},
      {"mig annotation",
       {{}, {{"linkfit.io/mig-profile", "1g.5gb"}}, {}},
       Kind::kMig,
       1,
       Closeness::kNode,
       ClosenessPolicy::kPreferred,
       "1g.5gb"},
      {"mig annotation with count",
       {{}, {{"linkfit.io/mig-profile", "1g.5gb"}, {"linkfit.io/gpus", "3"}}, {}},
       Kind::kMig,
       3,
       Closeness::kNode,
       ClosenessPolicy::kPreferred,
       "1g.5gb"},
      {"mig resource and agreeing annotations",
       {{{"nvidia.com/mig-2g.10gb", 2 * kOne}},
        {{"linkfit.io/mig-profile", "2g.10gb"}, {"linkfit.io/gpus", "2"}},
        {}},
       Kind::kMig,
       2,
       Closeness::kNode,
       ClosenessPolicy::kPreferred,
       "2g.10gb"},
      {"zero mig resource", {{{"nvidia.com/mig-1g.5gb", 0}}, {}, {}}, Kind::kNone, 0},
      {"share resource",
       {{{"linkfit.io/gpu-share", 300 * kOne}}, {}, {}},
       Kind::kShared,
       1,
       Closeness::kNode,
       ClosenessPolicy::kPreferred,
       "",
       300},
      {"share resource full GPU",
       {{{"linkfit.io/gpu-share", 1000 * kOne}}, {}, {}},
       Kind::kShared,
       1,
       Closeness::kNode,
       ClosenessPolicy::kPreferred,
       "",
       1000},
      {"share annotation on two GPUs",
       {{}, {{"linkfit.io/gpu-share", "250"}, {"linkfit.io/gpus", "2"}}, {}},
       Kind::kShared,
       2,
       Closeness::kNode,
       ClosenessPolicy::kPreferred,
       "",
       250},
      // The resource counts as the kubelet counts it: the pod's thousandths of all its GPUs.
      {"share resource spread over two GPUs",
       {{{"linkfit.io/gpu-share", 500 * kOne}}, {{"linkfit.io/gpus", "2"}}, {}},
       Kind::kShared,
       2,
       Closeness::kNode,
       ClosenessPolicy::kPreferred,
       "",
       250},
      {"share resource of four whole GPUs",
       {{{"linkfit.io/gpu-share", 4000 * kOne}}, {{"linkfit.io/gpus", "4"}}, {}},
       Kind::kShared,
       4,
       Closeness::kNode,
       ClosenessPolicy::kPreferred,
       "",
       1000},
      {"share resource and per-GPU annotation agree",
       {{{"linkfit.io/gpu-share", 600 * kOne}},
        {{"linkfit.io/gpu-share", "300"}, {"linkfit.io/gpus", "2"}},
        {}},
       Kind::kShared,
       2,
       Closeness::kNode,
       ClosenessPolicy::kPreferred,
       "",
       300},
      {"share resource and agreeing annotation",
       {{{"linkfit.io/gpu-share", 1 * kOne}}, {{"linkfit.io/gpu-share", "1"}}, {}},
       Kind::kShared,
       1,
       Closeness::kNode,
       ClosenessPolicy::kPreferred,
       "",
       1},
      {"models with |",
       {{{"nvidia.com/gpu", kOne}}, {{"linkfit.io/gpu-model", "A100| H100 "}}, {}},
       Kind::kWhole,
       1,
       Closeness::kNode,
       ClosenessPolicy::kPreferred,
       "",
       0,
       {"a100", "h100"}},
      {"models with ,",
       {{{"nvidia.com/gpu", kOne}}, {{"linkfit.io/gpu-model", "L40S,rtx a6000"}}, {}},
       Kind::kWhole,
       1,
       Closeness::kNode,
       ClosenessPolicy::kPreferred,
       "",
       0,
       {"l40s", "rtx a6000"}},
      {"other extended resources ignored",
       {{{"example.com/fpga", kOne}, {"nvidia.com/gpu", kOne}}, {}, {}},
       Kind::kWhole,
       1},
  };
  for (const ValidCase& c : cases) {
    SCOPED_TRACE(c.name);
    const auto request = ParseGpuRequest(Pod(c.input), RequestDefaults{});
    ASSERT_TRUE(request.has_value()) << request.error().message;
    EXPECT_EQ(request->kind, c.kind);
    EXPECT_EQ(request->count, c.count);
    EXPECT_EQ(request->closeness, c.closeness);
    EXPECT_EQ(request->policy, c.policy);
    EXPECT_EQ(request->mig_profile, c.mig_profile);
    EXPECT_EQ(request->share_milli, c.share_milli);
    EXPECT_EQ(request->gpu_models, c.models);
  }
}

TEST(ParseGpuRequestTest, DefaultsComeFromTheConfig) {
  RequestDefaults defaults;
  defaults.shared_gpu_resource = "example.com/vgpu-milli";
  defaults.closeness = Closeness::kNvlink;
  defaults.policy = ClosenessPolicy::kRequired;
  auto whole = ParseGpuRequest(Pod({{{"nvidia.com/gpu", 2 * kOne}}, {}, {}}), defaults);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->closeness, Closeness::kNvlink);
  EXPECT_EQ(whole->policy, ClosenessPolicy::kRequired);
  auto shared = ParseGpuRequest(Pod({{{"example.com/vgpu-milli", 400 * kOne}}, {}, {}}), defaults);
  ASSERT_TRUE(shared.has_value());
  EXPECT_EQ(shared->kind, Kind::kShared);
  EXPECT_EQ(shared->share_milli, 400);
  // The default resource name means nothing once another is configured.
  auto renamed = ParseGpuRequest(Pod({{{"linkfit.io/gpu-share", 400 * kOne}}, {}, {}}), defaults);
  ASSERT_TRUE(renamed.has_value());
  EXPECT_EQ(renamed->kind, Kind::kNone);
  // An annotation overrides the default policy.
  auto preferred = ParseGpuRequest(
      Pod({{{"nvidia.com/gpu", 2 * kOne}}, {{"linkfit.io/closeness-policy", "preferred"}}, {}}),
      defaults);
  ASSERT_TRUE(preferred.has_value());
  EXPECT_EQ(preferred->policy, ClosenessPolicy::kPreferred);
}

struct BadCase {
  const char* name;
  Input input;
  std::vector<std::string> must_name;  // substrings the error message must contain
};

TEST(ParseGpuRequestTest, BadValuesAreErrorsNamingTheirSource) {
  const std::vector<BadCase> cases = {
      // linkfit.io/gpus
      {"count not a number", {{}, {{"linkfit.io/gpus", "two"}}, {}}, {"linkfit.io/gpus", "two"}},
      {"count empty", {{}, {{"linkfit.io/gpus", ""}}, {}}, {"linkfit.io/gpus"}},
      {"count zero", {{}, {{"linkfit.io/gpus", "0"}}, {}}, {"linkfit.io/gpus", "0"}},
      {"count 17", {{}, {{"linkfit.io/gpus", "17"}}, {}}, {"linkfit.io/gpus", "17"}},
      {"count negative", {{}, {{"linkfit.io/gpus", "-1"}}, {}}, {"linkfit.io/gpus"}},
      {"count fractional", {{}, {{"linkfit.io/gpus", "1.5"}}, {}}, {"linkfit.io/gpus"}},
      // closeness and policy
      {"bad closeness",
       {{{"nvidia.com/gpu", 2 * kOne}}, {{"linkfit.io/closeness", "fast"}}, {}},
       {"linkfit.io/closeness", "fast"}},
      {"closeness is case-sensitive",
       {{{"nvidia.com/gpu", 2 * kOne}}, {{"linkfit.io/closeness", "NVLink"}}, {}},
       {"linkfit.io/closeness"}},
      {"bad policy",
       {{{"nvidia.com/gpu", 2 * kOne}}, {{"linkfit.io/closeness-policy", "always"}}, {}},
       {"linkfit.io/closeness-policy", "always"}},
      // gpu-model
      {"empty model", {{}, {{"linkfit.io/gpu-model", ""}}, {}}, {"linkfit.io/gpu-model"}},
      {"empty model entry",
       {{}, {{"linkfit.io/gpu-model", "a100||h100"}}, {}},
       {"linkfit.io/gpu-model", "a100||h100"}},
      {"trailing comma", {{}, {{"linkfit.io/gpu-model", "a100, "}}, {}}, {"linkfit.io/gpu-model"}},
      // shares
      {"share annotation 0", {{}, {{"linkfit.io/gpu-share", "0"}}, {}}, {"linkfit.io/gpu-share"}},
      {"share annotation 1001",
       {{}, {{"linkfit.io/gpu-share", "1001"}}, {}},
       {"linkfit.io/gpu-share", "1001"}},
      {"share annotation text",
       {{}, {{"linkfit.io/gpu-share", "half"}}, {}},
       {"linkfit.io/gpu-share"}},
      {"share resource 1001",
       {{{"linkfit.io/gpu-share", 1001 * kOne}}, {}, {}},
       {"resource linkfit.io/gpu-share", "1001", "1 GPU"}},
      {"share resource uneven over its GPUs",
       {{{"linkfit.io/gpu-share", 500 * kOne}}, {{"linkfit.io/gpus", "3"}}, {}},
       {"resource linkfit.io/gpu-share", "500", "3 GPUs"}},
      {"share resource more than each GPU",
       {{{"linkfit.io/gpu-share", 2400 * kOne}}, {{"linkfit.io/gpus", "2"}}, {}},
       {"resource linkfit.io/gpu-share", "2400", "2 GPUs", "1200"}},
      {"per-GPU annotation is not the total",
       {{{"linkfit.io/gpu-share", 500 * kOne}},
        {{"linkfit.io/gpu-share", "500"}, {"linkfit.io/gpus", "2"}},
        {}},
       {"annotation linkfit.io/gpu-share (500", "resource linkfit.io/gpu-share (500 in all",
        "2 GPUs", "250 of each"}},
      {"share resource fractional",
       {{{"linkfit.io/gpu-share", 500}}, {}, {}},
       {"resource linkfit.io/gpu-share"}},
      {"share resource and annotation disagree",
       {{{"linkfit.io/gpu-share", 200 * kOne}}, {{"linkfit.io/gpu-share", "300"}}, {}},
       {"annotation linkfit.io/gpu-share", "resource linkfit.io/gpu-share"}},
      // MIG
      {"empty mig profile", {{}, {{"linkfit.io/mig-profile", ""}}, {}}, {"linkfit.io/mig-profile"}},
      {"two mig profiles",
       {{{"nvidia.com/mig-1g.5gb", kOne}, {"nvidia.com/mig-3g.20gb", kOne}}, {}, {}},
       {"1g.5gb", "3g.20gb"}},
      {"mig resource and annotation disagree",
       {{{"nvidia.com/mig-1g.5gb", kOne}}, {{"linkfit.io/mig-profile", "3g.20gb"}}, {}},
       {"linkfit.io/mig-profile", "nvidia.com/mig-1g.5gb"}},
      {"mig count and gpus annotation disagree",
       {{{"nvidia.com/mig-1g.5gb", 2 * kOne}}, {{"linkfit.io/gpus", "3"}}, {}},
       {"linkfit.io/gpus", "nvidia.com/mig-1g.5gb"}},
      {"fractional mig resource",
       {{{"nvidia.com/mig-1g.5gb", 500}}, {}, {}},
       {"nvidia.com/mig-1g.5gb"}},
      // whole GPUs
      {"fractional gpu resource", {{{"nvidia.com/gpu", 500}}, {}, {}}, {"nvidia.com/gpu"}},
      {"17 gpus", {{{"nvidia.com/gpu", 17 * kOne}}, {}, {}}, {"nvidia.com/gpu", "17"}},
      {"65 gpus", {{{"nvidia.com/gpu", 65 * kOne}}, {}, {}}, {"nvidia.com/gpu"}},
      {"gpus annotation disagrees with resource",
       {{{"nvidia.com/gpu", 4 * kOne}}, {{"linkfit.io/gpus", "2"}}, {}},
       {"linkfit.io/gpus", "nvidia.com/gpu"}},
      // mixing kinds
      {"whole and mig resources",
       {{{"nvidia.com/gpu", kOne}, {"nvidia.com/mig-1g.5gb", kOne}}, {}, {}},
       {"mixes", "nvidia.com/gpu", "nvidia.com/mig-1g.5gb"}},
      {"whole resource and share annotation",
       {{{"nvidia.com/gpu", kOne}}, {{"linkfit.io/gpu-share", "500"}}, {}},
       {"mixes", "nvidia.com/gpu", "linkfit.io/gpu-share"}},
      {"whole resource and mig annotation",
       {{{"nvidia.com/gpu", kOne}}, {{"linkfit.io/mig-profile", "1g.5gb"}}, {}},
       {"mixes", "nvidia.com/gpu", "linkfit.io/mig-profile"}},
      {"mig annotation and share resource",
       {{{"linkfit.io/gpu-share", 100 * kOne}}, {{"linkfit.io/mig-profile", "1g.5gb"}}, {}},
       {"mixes", "linkfit.io/mig-profile", "linkfit.io/gpu-share"}},
      // quantities the codec could not read
      {"pod quantity problem",
       {{}, {}, {"spec.containers[0].resources.limits[nvidia.com/gpu]: bad quantity \"2x\""}},
       {"ns/p", "nvidia.com/gpu", "2x"}},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    const auto request = ParseGpuRequest(Pod(c.input), RequestDefaults{});
    ASSERT_FALSE(request.has_value()) << "accepted: " << request->Describe();
    for (const std::string& needle : c.must_name) {
      EXPECT_NE(request.error().message.find(needle), std::string::npos)
          << "'" << request.error().message << "' does not name " << needle;
    }
  }
}

TEST(ParseGpuRequestTest, DescribeAndEquivalents) {
  GpuRequest whole;
  whole.kind = Kind::kWhole;
  whole.count = 4;
  whole.closeness = Closeness::kNvlink;
  whole.policy = ClosenessPolicy::kRequired;
  EXPECT_EQ(whole.Describe(), "4 GPUs, nvlink required");
  EXPECT_DOUBLE_EQ(whole.GpuEquivalents(), 4.0);
  GpuRequest shared;
  shared.kind = Kind::kShared;
  shared.count = 2;
  shared.share_milli = 300;
  EXPECT_EQ(shared.Describe(), "2 GPUs x 300/1000 shared");
  EXPECT_DOUBLE_EQ(shared.GpuEquivalents(), 0.6);
  GpuRequest mig;
  mig.kind = Kind::kMig;
  mig.count = 1;
  mig.mig_profile = "3g.20gb";
  EXPECT_EQ(mig.Describe(), "1x MIG 3g.20gb");
  EXPECT_EQ(GpuRequest{}.Describe(), "no GPUs");
}

TEST(ModelAllowedTest, CaseInsensitiveSubstrings) {
  GpuRequest request;
  EXPECT_TRUE(ModelAllowed(request, "anything"));
  request.gpu_models = {"a100", "h100"};
  EXPECT_TRUE(ModelAllowed(request, "NVIDIA A100-SXM4-40GB"));
  EXPECT_TRUE(ModelAllowed(request, "NVIDIA H100 80GB HBM3"));
  EXPECT_FALSE(ModelAllowed(request, "Tesla V100-SXM2-32GB"));
}

}  // namespace
}  // namespace linkfit::extender
