// The linkfit.io/devices-in-use codec: a golden string, round trips, and strict rejections that
// name the problem.

#include <gtest/gtest.h>

#include "linkfit/kube/annotations.h"

namespace linkfit::kube {
namespace {

DevicesInUse Sample() {
  DevicesInUse devices;
  devices.pods = {{"u-1", "ml/train", {{"train", {4, 5}, {}, {}, {}}, {"setup", {4}, {}, {}, {}}}},
                  {"u-2", "ml/infer", {{"main", {}, {{0, "3g.40gb", 4, "MIG-a"}}, {}, {}}}},
                  {"u-3", "", {{"nb", {}, {}, {{2, 3}}, {}}}}};
  return devices;
}

TEST(DevicesInUse, GoldenEncoding) {
  EXPECT_EQ(EncodeDevicesInUse(Sample()),
            R"({"v":1,"pods":[{"uid":"u-1","pod":"ml/train","containers":[)"
            R"({"name":"train","gpus":[4,5]},{"name":"setup","gpus":[4]}]},)"
            R"({"uid":"u-2","pod":"ml/infer","containers":[{"name":"main","mig":[)"
            R"({"gpu":0,"profile":"3g.40gb","start":4,"uuid":"MIG-a"}]}]},)"
            R"({"uid":"u-3","containers":[{"name":"nb","shares":[{"gpu":2,"replicas":3}]}]}]})");
  EXPECT_EQ(EncodeDevicesInUse({}), R"({"v":1,"pods":[]})");
}

TEST(DevicesInUse, RoundTrips) {
  for (const DevicesInUse& devices : {Sample(), DevicesInUse{}}) {
    auto decoded = DecodeDevicesInUse(EncodeDevicesInUse(devices));
    ASSERT_TRUE(decoded) << decoded.error().message;
    EXPECT_EQ(*decoded, devices);
  }
}

TEST(DevicesInUse, NicsEncodeAsNamesAndRoundTrip) {
  DevicesInUse devices;
  DevicesInUse::Container train;
  train.name = "train";
  train.gpus = {0};
  train.nics = {"mlx5_0", "mlx5_1"};
  DevicesInUse::Container sidecar;
  sidecar.name = "net";
  sidecar.nics = {"mlx5_2"};
  devices.pods = {{"u-1", "ml/train", {sidecar, train}}};
  const std::string text = EncodeDevicesInUse(devices);
  EXPECT_EQ(text, R"({"v":1,"pods":[{"uid":"u-1","pod":"ml/train","containers":[)"
                  R"({"name":"net","nics":["mlx5_2"]},)"
                  R"({"name":"train","gpus":[0],"nics":["mlx5_0","mlx5_1"]}]}]})");
  auto decoded = DecodeDevicesInUse(text);
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(*decoded, devices);
  // Reports without NICs are unchanged.
  EXPECT_EQ(EncodeDevicesInUse(*DecodeDevicesInUse(EncodeDevicesInUse(Sample()))),
            EncodeDevicesInUse(Sample()));
}

struct Bad {
  const char* json;
  const char* message;
};

class BadDevicesInUse : public ::testing::TestWithParam<Bad> {};

TEST_P(BadDevicesInUse, IsRefusedNamingTheProblem) {
  auto decoded = DecodeDevicesInUse(GetParam().json);
  ASSERT_FALSE(decoded) << GetParam().json;
  EXPECT_NE(decoded.error().message.find(GetParam().message), std::string::npos)
      << decoded.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadDevicesInUse,
    ::testing::Values(
        Bad{"", "devices-in-use"}, Bad{"[]", "devices-in-use"},
        Bad{R"({"v":2,"pods":[]})", "version 2"}, Bad{R"({"pods":[]})", "version 0"},
        Bad{R"({"v":1,"pods":[],"extra":1})", "unknown key \"extra\""},
        Bad{R"({"v":1,"pods":[{"pod":"a/b"}]})", "pods[0].uid: missing"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","nics":["m","m"]}]}]})",
            "pods[0].containers[0].nics: NIC m appears twice"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","nics":[""]}]}]})",
            "pods[0].containers[0].nics[0]: empty NIC name"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","nics":[3]}]}]})",
            "pods[0].containers[0].nics[0]"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","nics":"m"}]}]})",
            "pods[0].containers[0].nics"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"gpus":[1]}]}]})", "name: missing"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","gpus":[16]}]}]})",
            "pods[0].containers[0].gpus[0]"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","gpus":[1,1]}]}]})",
            "GPU 1 appears twice"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","shares":[{"gpu":1,"replicas":0}]}]}]})",
            "replicas"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","mig":[{"gpu":1,"start":8,"profile":"1g.5gb"}]}]}]})",
            "mig[0].start"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","mig":[{"gpu":1,"start":0}]}]}]})",
            "profile: expected"},
        Bad{R"({"v":1,"pods":[{"uid":"u"},{"uid":"u"}]})", "pod u appears twice"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","gpus":"0"}]}]})", "gpus"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","gpus":[-1]}]}]})",
            "pods[0].containers[0].gpus[0]"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","gpus":[1.5]}]}]})",
            "pods[0].containers[0].gpus[0]"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","mig":[{"gpu":1,"start":-1,"profile":"1g.5gb"}]}]}]})",
            "mig[0].start"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","mig":[{"gpu":16,"start":0,"profile":"1g.5gb"}]}]}]})",
            "mig[0].gpu"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","mig":[{"gpu":1,"start":0,"profile":"1g.5gb"},{"gpu":1,"start":0,"profile":"1g.5gb"}]}]}]})",
            "the instance on GPU 1 at 0 appears twice"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","shares":[{"gpu":1,"replicas":-2}]}]}]})",
            "shares[0].replicas"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","shares":[{"gpu":16,"replicas":1}]}]}]})",
            "shares[0].gpu"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","shares":[{"gpu":1,"replicas":1},{"gpu":1,"replicas":2}]}]}]})",
            "shares: GPU 1 appears twice"},
        Bad{R"({"v":1,"pods":[{"uid":"u","node":"n"}]})", "pods[0]: unknown key \"node\""},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","init":true}]}]})",
            "pods[0].containers[0]: unknown key \"init\""},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","mig":[{"gpu":1,"start":0,"profile":"1g.5gb","size":1}]}]}]})",
            "unknown key \"size\""},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","shares":[{"gpu":1,"milli":300}]}]}]})",
            "unknown key \"milli\""},
        Bad{R"({"v":"1","pods":[]})", "v"}, Bad{R"({"v":1,"pods":{}})", "pods"},
        Bad{R"({"v":1,"pods":[{"uid":7}]})", "pods[0].uid"},
        Bad{R"({"v":1,"pods":[]} trailing)", "devices-in-use"},
        Bad{R"({"v":1,"pods":[{"uid":"u","containers":[{"name":"c","gpus":[1)", "devices-in-use"}));

TEST(DevicesInUse, StringsNeedingEscapesRoundTrip) {
  DevicesInUse devices;
  devices.pods = {{"u\"1\\",
                   "ns/na\u00efve\n",
                   {{"c\t", {0}, {{15, "7g.80gb", 0, "MIG-\x01"}}, {{15, 1 << 20}}, {}}}}};
  auto decoded = DecodeDevicesInUse(EncodeDevicesInUse(devices));
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(*decoded, devices);
}

}  // namespace
}  // namespace linkfit::kube
