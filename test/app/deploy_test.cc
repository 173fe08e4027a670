// Checks on the shipped manifests: the copies embedded in ConfigMaps match the files under
// config/, linkfit's ConfigMap is a valid linkfit config, and the KubeSchedulerConfiguration
// passes the checks kube-scheduler's validateExtenders makes.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "linkfit/app/config.h"

namespace linkfit::app {
namespace {

std::string ReadFile(const std::string& relative) {
  std::ifstream file(std::string(LINKFIT_SOURCE_DIR) + "/" + relative);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// Returns data[key] of the ConfigMap `name` in a multi-document manifest.
std::string ConfigMapData(const std::string& manifest, const std::string& name,
                          const std::string& key) {
  for (const YAML::Node& doc : YAML::LoadAll(ReadFile(manifest))) {
    if (doc["kind"] && doc["kind"].as<std::string>() == "ConfigMap" &&
        doc["metadata"]["name"].as<std::string>() == name) {
      return doc["data"][key].as<std::string>();
    }
  }
  ADD_FAILURE() << "no ConfigMap " << name << " in " << manifest;
  return "";
}

TEST(DeployTest, SchedulerConfigMapEmbedsTheConfigFileVerbatim) {
  EXPECT_EQ(ConfigMapData("deploy/kube-scheduler.yaml", "linkfit-scheduler-config",
                          "kube-scheduler-config.yaml"),
            ReadFile("config/kube-scheduler-config.yaml"))
      << "regenerate deploy/kube-scheduler.yaml's ConfigMap from config/ (deploy/README.md)";
}

TEST(DeployTest, LinkfitConfigMapIsAValidConfig) {
  auto config =
      ParseConfig(ConfigMapData("deploy/configmap.yaml", "linkfit-config", "linkfit.yaml"),
                  "/etc/linkfit", "deploy/configmap.yaml");
  ASSERT_TRUE(config.has_value()) << config.error().message;
  EXPECT_TRUE(config->kubernetes.enabled);
  EXPECT_EQ(config->listen_port, 8888);
  EXPECT_EQ(config->url_prefix, "/scheduler");
}

// The measured setting (bench/RESULTS.md): linkfit's score_range x the extender's weight = 140
// (one linkfit point = 10 in-tree points), in-tree NodeResourcesFit left at LeastAllocated
// (MostAllocated packs CPU and strands GPUs: 1.1 points less of the openb trace allocated).
TEST(DeployTest, ShippedScoresKeepTheMeasuredBalanceWithInTreePlugins) {
  auto linkfit =
      ParseConfig(ConfigMapData("deploy/configmap.yaml", "linkfit-config", "linkfit.yaml"));
  ASSERT_TRUE(linkfit.has_value()) << linkfit.error().message;
  auto example = ParseConfig(ReadFile("config/linkfit.yaml"));
  ASSERT_TRUE(example.has_value()) << example.error().message;
  for (const std::string& text :
       {ReadFile("config/kube-scheduler-config.yaml"),
        ConfigMapData("deploy/kube-scheduler.yaml", "linkfit-scheduler-config",
                      "kube-scheduler-config.yaml")}) {
    const YAML::Node root = YAML::Load(text);
    const int weight = root["extenders"][0]["weight"].as<int>();
    EXPECT_EQ(weight * linkfit->policy.score_range, 140);
    EXPECT_EQ(weight * example->policy.score_range, 140);
    for (const YAML::Node& plugin : root["profiles"][0]["pluginConfig"]) {
      if (plugin["name"].as<std::string>() != "NodeResourcesFit") continue;
      EXPECT_NE(plugin["args"]["scoringStrategy"]["type"].as<std::string>(), "MostAllocated");
    }
  }
}

TEST(DeployTest, KubeSchedulerConfigurationPassesExtenderValidation) {
  const YAML::Node root = YAML::Load(ReadFile("config/kube-scheduler-config.yaml"));
  EXPECT_EQ(root["apiVersion"].as<std::string>(), "kubescheduler.config.k8s.io/v1");
  EXPECT_EQ(root["profiles"][0]["schedulerName"].as<std::string>(), "linkfit");
  const YAML::Node extenders = root["extenders"];
  ASSERT_EQ(extenders.size(), 1u);
  const YAML::Node extender = extenders[0];
  EXPECT_EQ(extender["urlPrefix"].as<std::string>(),
            "http://linkfit.linkfit-system.svc:8888/scheduler");
  EXPECT_GT(extender["weight"].as<int>(), 0);  // required because prioritizeVerb is set
  EXPECT_TRUE(extender["nodeCacheCapable"].as<bool>());
  EXPECT_FALSE(extender["ignorable"].as<bool>());
  EXPECT_EQ(extender["bindVerb"].as<std::string>(), "bind");
  std::set<std::string> names;
  for (const YAML::Node& resource : extender["managedResources"]) {
    const std::string name = resource["name"].as<std::string>();
    EXPECT_TRUE(names.insert(name).second) << "duplicate managed resource " << name;
    EXPECT_NE(name.find('/'), std::string::npos) << name;
    EXPECT_EQ(name.find('+'), std::string::npos) << name;  // not a qualified name
    // Only the share resource is not advertised by a device plugin.
    EXPECT_EQ(resource["ignoredByScheduler"].as<bool>(), name == "linkfit.io/gpu-share") << name;
  }
  EXPECT_EQ(names.count("nvidia.com/gpu"), 1u);
}

}  // namespace
}  // namespace linkfit::app
