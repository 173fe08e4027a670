// Checks on the shipped manifests (deploy/), the CI stand-in for applying them: every resource the
// kustomization lists exists and parses, every document is a real Kubernetes kind with a name,
// the copies embedded in ConfigMaps match the files under config/, linkfit's ConfigMap is a valid
// linkfit config, the KubeSchedulerConfiguration passes the checks kube-scheduler's
// validateExtenders makes (extender-protocol.md §4) and fits the sidecar design, and the
// Deployment, RBAC, admission policies, NetworkPolicy, DaemonSet, examples and dashboard say what
// deploy/README.md says they do.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <regex>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "linkfit/app/config.h"

namespace linkfit::app {
namespace {

std::string SourcePath(const std::string& relative) {
  return std::string(LINKFIT_SOURCE_DIR) + "/" + relative;
}

std::string ReadFile(const std::string& relative) {
  std::ifstream file(SourcePath(relative));
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string Str(const YAML::Node& node) { return node ? node.as<std::string>() : std::string(); }

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

// One document of a manifest file listed in deploy/kustomization.yaml.
struct Manifest {
  std::string file;  // relative to the repository root
  YAML::Node doc;
};

std::vector<std::string> KustomizationResources() {
  std::vector<std::string> files;
  const YAML::Node root = YAML::Load(ReadFile("deploy/kustomization.yaml"));
  for (const YAML::Node& resource : root["resources"]) {
    files.push_back("deploy/" + resource.as<std::string>());
  }
  return files;
}

// Every document of every resource file (parse errors are reported by the test that checks them).
std::vector<Manifest> Rendered() {
  std::vector<Manifest> out;
  for (const std::string& file : KustomizationResources()) {
    try {
      for (const YAML::Node& doc : YAML::LoadAll(ReadFile(file))) out.push_back({file, doc});
    } catch (const YAML::Exception&) {
    }
  }
  return out;
}

std::vector<YAML::Node> OfKind(const std::vector<Manifest>& all, const std::string& kind) {
  std::vector<YAML::Node> out;
  for (const Manifest& m : all) {
    if (m.doc.IsMap() && Str(m.doc["kind"]) == kind) out.push_back(m.doc);
  }
  return out;
}

YAML::Node Find(const std::vector<Manifest>& all, const std::string& kind,
                const std::string& name) {
  for (const YAML::Node& doc : OfKind(all, kind)) {
    if (Str(doc["metadata"]["name"]) == name) return doc;
  }
  ADD_FAILURE() << "no " << kind << " " << name << " in the kustomization";
  return YAML::Node();
}

// The scheduler Deployment and its two processes.
constexpr const char* kDeployment = "linkfit-scheduler";
constexpr const char* kSchedulerProfile = "linkfit-scheduler";

YAML::Node Container(const YAML::Node& pod_spec, const std::string& name) {
  for (const char* list : {"containers", "initContainers"}) {
    for (const YAML::Node& container : pod_spec[list]) {
      if (Str(container["name"]) == name) return container;
    }
  }
  ADD_FAILURE() << "no container " << name;
  return YAML::Node();
}

// The value after `flag` in a container's args ("--flag value" or "--flag=value").
std::string FlagValue(const YAML::Node& container, const std::string& flag) {
  std::vector<std::string> args;
  for (const char* list : {"command", "args"}) {
    for (const YAML::Node& arg : container[list]) args.push_back(arg.as<std::string>());
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(flag + "=", 0) == 0) return args[i].substr(flag.size() + 1);
  }
  return "";
}

int PortOf(const std::string& host_port) {
  const auto colon = host_port.rfind(':');
  return colon == std::string::npos ? -1 : std::stoi(host_port.substr(colon + 1));
}

// A probe's port, resolving a named port against the container's ports.
int ProbePort(const YAML::Node& container, const YAML::Node& probe) {
  const YAML::Node port = probe["httpGet"]["port"];
  if (!port) return -1;
  const std::string text = port.as<std::string>();
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!text.empty() && std::all_of(text.begin(), text.end(), digit)) return std::stoi(text);
  for (const YAML::Node& declared : container["ports"]) {
    if (Str(declared["name"]) == text) return declared["containerPort"].as<int>();
  }
  ADD_FAILURE() << "probe names undeclared port " << text;
  return -1;
}

std::string ServiceAccountUser(const YAML::Node& workload) {
  return "system:serviceaccount:" + Str(workload["metadata"]["namespace"]) + ":" +
         Str(workload["spec"]["template"]["spec"]["serviceAccountName"]);
}

// ---------------------------------------------------------------------------------------------
// The kustomization and its documents.

TEST(DeployTest, EveryKustomizationResourceExistsAndParses) {
  const std::vector<std::string> files = KustomizationResources();
  ASSERT_FALSE(files.empty());
  for (const std::string& file : files) {
    ASSERT_TRUE(std::filesystem::is_regular_file(SourcePath(file))) << file;
    EXPECT_NO_THROW(YAML::LoadAll(ReadFile(file))) << file;
  }
  // The generated dashboard ConfigMap's file exists and is JSON (YAML's superset parses it).
  const YAML::Node root = YAML::Load(ReadFile("deploy/kustomization.yaml"));
  for (const YAML::Node& generator : root["configMapGenerator"]) {
    for (const YAML::Node& entry : generator["files"]) {
      std::string path = entry.as<std::string>();
      path = path.substr(path.find('=') + 1);
      ASSERT_TRUE(std::filesystem::is_regular_file(SourcePath("deploy/" + path))) << path;
      EXPECT_NO_THROW(YAML::Load(ReadFile("deploy/" + path))) << path;
    }
  }
  // The examples are for users to apply one by one, not part of the installation.
  for (const std::string& file : files) EXPECT_EQ(file.find("examples/"), std::string::npos);
}

TEST(DeployTest, EveryDocumentIsARealKindWithAName) {
  const std::set<std::pair<std::string, std::string>> allowed = {
      {"v1", "Namespace"},
      {"v1", "ServiceAccount"},
      {"v1", "ConfigMap"},
      {"v1", "Service"},
      {"apps/v1", "Deployment"},
      {"apps/v1", "DaemonSet"},
      {"rbac.authorization.k8s.io/v1", "ClusterRole"},
      {"rbac.authorization.k8s.io/v1", "ClusterRoleBinding"},
      {"rbac.authorization.k8s.io/v1", "Role"},
      {"rbac.authorization.k8s.io/v1", "RoleBinding"},
      {"policy/v1", "PodDisruptionBudget"},
      {"networking.k8s.io/v1", "NetworkPolicy"},
      {"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"},
      {"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"},
  };
  const std::set<std::string> cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding",
                                                "ValidatingAdmissionPolicy",
                                                "ValidatingAdmissionPolicyBinding"};
  const std::vector<Manifest> all = Rendered();
  ASSERT_GT(all.size(), 10u);
  std::set<std::string> seen;
  for (const Manifest& m : all) {
    ASSERT_TRUE(m.doc.IsMap()) << m.file << ": a document that is not a mapping";
    const std::string kind = Str(m.doc["kind"]);
    EXPECT_EQ(allowed.count({Str(m.doc["apiVersion"]), kind}), 1u)
        << m.file << ": " << Str(m.doc["apiVersion"]) << " " << kind;
    const std::string name = Str(m.doc["metadata"]["name"]);
    EXPECT_FALSE(name.empty()) << m.file << ": " << kind << " without metadata.name";
    // The kustomization sets no namespace: every namespaced object names its own.
    const std::string ns = Str(m.doc["metadata"]["namespace"]);
    EXPECT_EQ(ns.empty(), cluster_scoped.count(kind) == 1) << m.file << ": " << kind << " " << name;
    EXPECT_TRUE(seen.insert(kind + "/" + ns + "/" + name).second)
        << "duplicate " << kind << " " << name;
  }
}

// ---------------------------------------------------------------------------------------------
// Configuration copies.

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
  // The extender verbs listen on loopback only: kube-scheduler is in the same pod.
  EXPECT_EQ(config->listen_host, "127.0.0.1");
  EXPECT_EQ(config->listen_port, 8888);
  EXPECT_EQ(config->url_prefix, "/scheduler");
  EXPECT_FALSE(config->cluster_file.has_value());  // cluster mode, not standalone
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
    EXPECT_EQ(root["percentageOfNodesToScore"].as<int>(), 100);
    for (const YAML::Node& plugin : root["profiles"][0]["pluginConfig"]) {
      if (plugin["name"].as<std::string>() != "NodeResourcesFit") continue;
      EXPECT_NE(plugin["args"]["scoringStrategy"]["type"].as<std::string>(), "MostAllocated");
    }
  }
}

// extender-protocol.md §4's validateExtenders rules, and what the sidecar design needs.
TEST(DeployTest, KubeSchedulerConfigurationPassesExtenderValidation) {
  const YAML::Node root = YAML::Load(ReadFile("config/kube-scheduler-config.yaml"));
  EXPECT_EQ(root["apiVersion"].as<std::string>(), "kubescheduler.config.k8s.io/v1");
  EXPECT_EQ(root["kind"].as<std::string>(), "KubeSchedulerConfiguration");
  ASSERT_EQ(root["profiles"].size(), 1u);
  EXPECT_EQ(root["profiles"][0]["schedulerName"].as<std::string>(), kSchedulerProfile);
  const YAML::Node extenders = root["extenders"];
  ASSERT_EQ(extenders.size(), 1u);
  int binders = 0;
  std::set<std::string> names;  // unique across all extenders
  for (const YAML::Node& extender : extenders) {
    if (!Str(extender["prioritizeVerb"]).empty()) {
      EXPECT_GT(extender["weight"].as<int>(), 0);  // rule 1
    }
    if (!Str(extender["bindVerb"]).empty()) ++binders;
    for (const YAML::Node& resource : extender["managedResources"]) {
      const std::string name = resource["name"].as<std::string>();
      EXPECT_TRUE(names.insert(name).second) << "duplicate managed resource " << name;  // rule 4
      // Rule 3: a domain-prefixed extended resource name, not kubernetes.io/, not requests.*,
      // and a qualified name ('+' as in MIG's "+me" profiles is not allowed).
      EXPECT_NE(name.find('/'), std::string::npos) << name;
      EXPECT_EQ(name.find('+'), std::string::npos) << name;
      EXPECT_EQ(name.find("kubernetes.io/"), std::string::npos) << name;
      EXPECT_NE(name.rfind("requests.", 0), 0u) << name;
      // Only the share resource is not advertised by a device plugin.
      EXPECT_EQ(resource["ignoredByScheduler"].as<bool>(), name == "linkfit.io/gpu-share") << name;
    }
  }
  EXPECT_EQ(binders, 1);  // rule 2: at most one; linkfit is the binder
  EXPECT_EQ(names.count("nvidia.com/gpu"), 1u);
  EXPECT_EQ(names.count("linkfit.io/gpu-share"), 1u);

  const YAML::Node extender = extenders[0];
  // The sidecar on the pod's loopback interface, at linkfit's url_prefix.
  EXPECT_EQ(extender["urlPrefix"].as<std::string>(), "http://127.0.0.1:8888/scheduler");
  EXPECT_EQ(extender["filterVerb"].as<std::string>(), "filter");
  EXPECT_EQ(extender["prioritizeVerb"].as<std::string>(), "prioritize");
  EXPECT_EQ(extender["preemptVerb"].as<std::string>(), "preempt");
  EXPECT_EQ(extender["bindVerb"].as<std::string>(), "bind");
  EXPECT_EQ(extender["weight"].as<int>(), 1);
  EXPECT_FALSE(Str(extender["httpTimeout"]).empty());
  EXPECT_TRUE(extender["nodeCacheCapable"].as<bool>());
  EXPECT_FALSE(extender["ignorable"].as<bool>());

  // Leader election on a lease of its own (not the default scheduler's "kube-scheduler").
  const YAML::Node election = root["leaderElection"];
  EXPECT_TRUE(election["leaderElect"].as<bool>());
  EXPECT_EQ(Str(election["resourceName"]), "linkfit-scheduler");
  EXPECT_EQ(Str(election["resourceNamespace"]), "linkfit-system");
}

// Every MIG profile with a table in config/mig/ reaches linkfit through managedResources.
TEST(DeployTest, EverySupportedMigProfileIsAManagedResource) {
  const YAML::Node root = YAML::Load(ReadFile("config/kube-scheduler-config.yaml"));
  std::set<std::string> managed;
  for (const YAML::Node& resource : root["extenders"][0]["managedResources"]) {
    managed.insert(resource["name"].as<std::string>());
  }
  int profiles = 0;
  for (const auto& entry : std::filesystem::directory_iterator(SourcePath("config/mig"))) {
    if (entry.path().extension() != ".json") continue;
    const YAML::Node table = YAML::LoadFile(entry.path().string());
    for (const YAML::Node& profile : table["profiles"]) {
      const std::string name = profile["name"].as<std::string>();
      if (name.find('+') != std::string::npos) continue;  // not a valid resource name
      ++profiles;
      EXPECT_EQ(managed.count("nvidia.com/mig-" + name), 1u) << entry.path() << ": " << name;
    }
  }
  EXPECT_GT(profiles, 0);
}

// ---------------------------------------------------------------------------------------------
// The scheduler Deployment: kube-scheduler + linkfit sidecar.

TEST(DeployTest, SchedulerDeploymentRunsTwoReplicasWithTheSidecar) {
  const std::vector<Manifest> all = Rendered();
  const YAML::Node deployment = Find(all, "Deployment", kDeployment);
  ASSERT_TRUE(deployment);
  EXPECT_EQ(deployment["spec"]["replicas"].as<int>(), 2);
  const YAML::Node pod = deployment["spec"]["template"]["spec"];
  // The pod's labels select it (Deployment, PDB, NetworkPolicy, Service use the same labels).
  const YAML::Node labels = deployment["spec"]["template"]["metadata"]["labels"];
  for (const auto& selector : deployment["spec"]["selector"]["matchLabels"]) {
    EXPECT_EQ(Str(labels[selector.first.as<std::string>()]), selector.second.as<std::string>());
  }
  // The replicas are spread by anti-affinity on the hostname.
  const YAML::Node anti = pod["affinity"]["podAntiAffinity"];
  ASSERT_TRUE(anti);
  bool by_host = false;
  for (const YAML::Node& term : anti["preferredDuringSchedulingIgnoredDuringExecution"]) {
    by_host |= Str(term["podAffinityTerm"]["topologyKey"]) == "kubernetes.io/hostname";
  }
  for (const YAML::Node& term : anti["requiredDuringSchedulingIgnoredDuringExecution"]) {
    by_host |= Str(term["topologyKey"]) == "kubernetes.io/hostname";
  }
  EXPECT_TRUE(by_host);

  // kube-scheduler: the ConfigMap's file, its secure port's probes.
  const YAML::Node scheduler = Container(pod, "kube-scheduler");
  ASSERT_TRUE(scheduler);
  EXPECT_EQ(Str(scheduler["image"]).rfind("registry.k8s.io/kube-scheduler:v1.30.", 0), 0u);
  const std::string config_path = FlagValue(scheduler, "--config");
  EXPECT_EQ(config_path, "/etc/kubernetes/linkfit/kube-scheduler-config.yaml");
  for (const char* probe : {"livenessProbe", "readinessProbe"}) {
    EXPECT_EQ(ProbePort(scheduler, scheduler[probe]), 10259) << probe;
    EXPECT_EQ(Str(scheduler[probe]["httpGet"]["scheme"]), "HTTPS") << probe;
  }

  // linkfit: verbs on loopback where the urlPrefix points, probes on the ops port.
  const YAML::Node linkfit = Container(pod, "linkfit");
  ASSERT_TRUE(linkfit);
  EXPECT_EQ(FlagValue(linkfit, "--config"), "/etc/linkfit/linkfit.yaml");
  EXPECT_EQ(FlagValue(linkfit, "--listen"), "127.0.0.1:8888");
  const std::string ops = FlagValue(linkfit, "--ops-listen");
  ASSERT_FALSE(ops.empty());
  const int ops_port = PortOf(ops);
  EXPECT_EQ(ops_port, 9090);
  EXPECT_EQ(Str(linkfit["livenessProbe"]["httpGet"]["path"]), "/healthz");
  EXPECT_EQ(ProbePort(linkfit, linkfit["livenessProbe"]), ops_port);
  EXPECT_EQ(Str(linkfit["readinessProbe"]["httpGet"]["path"]), "/readyz");
  EXPECT_EQ(ProbePort(linkfit, linkfit["readinessProbe"]), ops_port);
  if (linkfit["startupProbe"]) {
    EXPECT_EQ(ProbePort(linkfit, linkfit["startupProbe"]), ops_port);
  }
  // As an init container it must be a native sidecar, or kube-scheduler would never start.
  for (const YAML::Node& init : pod["initContainers"]) {
    if (Str(init["name"]) == "linkfit") {
      EXPECT_EQ(Str(init["restartPolicy"]), "Always");
    }
  }
  // Nothing declares the extender port: it is not reachable from outside the pod.
  for (const YAML::Node& container : {scheduler, linkfit}) {
    for (const YAML::Node& port : container["ports"]) {
      EXPECT_NE(port["containerPort"].as<int>(), 8888);
    }
  }

  // Each --config file comes from its ConfigMap.
  std::map<std::string, std::string> volume_config_maps;
  for (const YAML::Node& volume : pod["volumes"]) {
    volume_config_maps[Str(volume["name"])] = Str(volume["configMap"]["name"]);
  }
  const auto mounted_from = [&](const YAML::Node& container, const std::string& file) {
    for (const YAML::Node& mount : container["volumeMounts"]) {
      if (file.rfind(Str(mount["mountPath"]) + "/", 0) == 0) {
        return volume_config_maps[Str(mount["name"])];
      }
    }
    return std::string();
  };
  EXPECT_EQ(mounted_from(scheduler, config_path), "linkfit-scheduler-config");
  EXPECT_EQ(mounted_from(linkfit, "/etc/linkfit/linkfit.yaml"), "linkfit-config");
}

TEST(DeployTest, ContainersAreHardenedAndSized) {
  const std::vector<Manifest> all = Rendered();
  const YAML::Node pod = Find(all, "Deployment", kDeployment)["spec"]["template"]["spec"];
  ASSERT_TRUE(pod);
  EXPECT_TRUE(pod["securityContext"]["runAsNonRoot"].as<bool>());
  EXPECT_EQ(Str(pod["securityContext"]["seccompProfile"]["type"]), "RuntimeDefault");
  int containers = 0;
  for (const char* list : {"containers", "initContainers"}) {
    for (const YAML::Node& container : pod[list]) {
      ++containers;
      const std::string name = Str(container["name"]);
      const YAML::Node security = container["securityContext"];
      EXPECT_TRUE(security["readOnlyRootFilesystem"].as<bool>()) << name;
      EXPECT_FALSE(security["allowPrivilegeEscalation"].as<bool>()) << name;
      ASSERT_EQ(security["capabilities"]["drop"].size(), 1u) << name;
      EXPECT_EQ(Str(security["capabilities"]["drop"][0]), "ALL") << name;
      EXPECT_TRUE(container["resources"]["requests"]["cpu"]) << name;
      EXPECT_TRUE(container["resources"]["requests"]["memory"]) << name;
      EXPECT_TRUE(container["resources"]["limits"]["memory"]) << name;
    }
  }
  EXPECT_EQ(containers, 2);
}

TEST(DeployTest, DisruptionBudgetKeepsOneSchedulerUp) {
  const std::vector<Manifest> all = Rendered();
  const YAML::Node deployment = Find(all, "Deployment", kDeployment);
  const std::vector<YAML::Node> budgets = OfKind(all, "PodDisruptionBudget");
  ASSERT_EQ(budgets.size(), 1u);
  EXPECT_EQ(budgets[0]["spec"]["minAvailable"].as<int>(), 1);
  const YAML::Node labels = deployment["spec"]["template"]["metadata"]["labels"];
  for (const auto& selector : budgets[0]["spec"]["selector"]["matchLabels"]) {
    EXPECT_EQ(Str(labels[selector.first.as<std::string>()]), selector.second.as<std::string>());
  }
}

// ---------------------------------------------------------------------------------------------
// RBAC.

using Grants = std::map<std::pair<std::string, std::string>, std::set<std::string>>;

Grants GrantsOf(const YAML::Node& role) {
  Grants grants;
  for (const YAML::Node& rule : role["rules"]) {
    for (const YAML::Node& group : rule["apiGroups"]) {
      for (const YAML::Node& resource : rule["resources"]) {
        for (const YAML::Node& verb : rule["verbs"]) {
          grants[{group.as<std::string>(), resource.as<std::string>()}].insert(
              verb.as<std::string>());
        }
      }
    }
  }
  return grants;
}

// Whether a (Cluster)RoleBinding binds `role_kind`/`role` to the service account `user`.
bool Binds(const std::vector<Manifest>& all, const std::string& role_kind, const std::string& role,
           const std::string& user) {
  for (const char* kind : {"ClusterRoleBinding", "RoleBinding"}) {
    for (const YAML::Node& binding : OfKind(all, kind)) {
      if (Str(binding["roleRef"]["kind"]) != role_kind || Str(binding["roleRef"]["name"]) != role)
        continue;
      for (const YAML::Node& subject : binding["subjects"]) {
        if (Str(subject["kind"]) == "ServiceAccount" &&
            "system:serviceaccount:" + Str(subject["namespace"]) + ":" + Str(subject["name"]) ==
                user) {
          return true;
        }
      }
    }
  }
  return false;
}

TEST(DeployTest, NoRoleGrantsWildcards) {
  const std::vector<Manifest> all = Rendered();
  for (const char* kind : {"ClusterRole", "Role"}) {
    for (const YAML::Node& role : OfKind(all, kind)) {
      for (const auto& [key, verbs] : GrantsOf(role)) {
        const std::string where = Str(role["metadata"]["name"]) + ": " + key.second;
        EXPECT_NE(key.first, "*") << where;
        EXPECT_NE(key.second, "*") << where;
        EXPECT_EQ(key.second.find("/*"), std::string::npos) << where;
        EXPECT_EQ(verbs.count("*"), 0u) << where;
      }
    }
  }
}

TEST(DeployTest, LinkfitIsGrantedExactlyWhatClusterModeUses) {
  const std::vector<Manifest> all = Rendered();
  const Grants expected = {
      {{"", "pods"}, {"get", "list", "watch"}},
      {{"", "pods/binding"}, {"create"}},
      {{"", "nodes"}, {"get", "list", "watch"}},
      {{"events.k8s.io", "events"}, {"create"}},
  };
  EXPECT_EQ(GrantsOf(Find(all, "ClusterRole", "linkfit")), expected);
  const std::string user = ServiceAccountUser(Find(all, "Deployment", kDeployment));
  EXPECT_TRUE(Binds(all, "ClusterRole", "linkfit", user));
  // kube-scheduler's stock roles, and the client-CA reader for its secure port.
  EXPECT_TRUE(Binds(all, "ClusterRole", "system:kube-scheduler", user));
  EXPECT_TRUE(Binds(all, "ClusterRole", "system:volume-scheduler", user));
  EXPECT_TRUE(Binds(all, "Role", "extension-apiserver-authentication-reader", user));
  for (const YAML::Node& binding : OfKind(all, "RoleBinding")) {
    if (Str(binding["roleRef"]["name"]) == "extension-apiserver-authentication-reader") {
      EXPECT_EQ(Str(binding["metadata"]["namespace"]), "kube-system");
    }
  }
}

TEST(DeployTest, LeaderElectionLeaseIsGrantedByName) {
  const std::vector<Manifest> all = Rendered();
  const YAML::Node config = YAML::Load(ReadFile("config/kube-scheduler-config.yaml"));
  const std::string lease = Str(config["leaderElection"]["resourceName"]);
  const std::string lease_ns = Str(config["leaderElection"]["resourceNamespace"]);
  const YAML::Node deployment = Find(all, "Deployment", kDeployment);
  EXPECT_EQ(lease_ns, Str(deployment["metadata"]["namespace"]));
  const std::string user = ServiceAccountUser(deployment);
  bool granted = false;
  for (const YAML::Node& role : OfKind(all, "Role")) {
    if (Str(role["metadata"]["namespace"]) != lease_ns) continue;
    for (const YAML::Node& rule : role["rules"]) {
      if (Str(rule["apiGroups"][0]) != "coordination.k8s.io" || !rule["resourceNames"]) continue;
      std::set<std::string> verbs, names;
      for (const YAML::Node& verb : rule["verbs"]) verbs.insert(verb.as<std::string>());
      for (const YAML::Node& name : rule["resourceNames"]) names.insert(name.as<std::string>());
      if (names == std::set<std::string>{lease} && verbs.count("get") && verbs.count("update") &&
          Binds(all, "Role", Str(role["metadata"]["name"]), user)) {
        granted = true;
      }
    }
  }
  EXPECT_TRUE(granted) << "no Role in " << lease_ns << " grants get/update of lease " << lease
                       << " (by resourceNames) to " << user;
}

TEST(DeployTest, NodeAgentMayOnlyGetAndPatchNodesAndReadPods) {
  const std::vector<Manifest> all = Rendered();
  const Grants expected = {{{"", "nodes"}, {"get", "patch"}},
                           {{"", "pods"}, {"get", "list", "watch"}}};
  EXPECT_EQ(GrantsOf(Find(all, "ClusterRole", "linkfit-agent")), expected);
  const YAML::Node agent = Find(all, "DaemonSet", "linkfit-agent");
  ASSERT_TRUE(agent);
  EXPECT_TRUE(Binds(all, "ClusterRole", "linkfit-agent", ServiceAccountUser(agent)));
  const YAML::Node pod = agent["spec"]["template"]["spec"];
  EXPECT_EQ(Str(pod["nodeSelector"]["nvidia.com/gpu.present"]), "true");
  EXPECT_EQ(Str(pod["runtimeClassName"]), "nvidia");
  const YAML::Node container = Container(pod, "agent");
  EXPECT_EQ(Str(container["command"][0]), "/usr/local/bin/linkfit-agent");
  EXPECT_EQ(Str(container["args"][0]), "--node-name");
  bool pod_resources = false;
  for (const YAML::Node& mount : container["volumeMounts"]) {
    if (Str(mount["mountPath"]) == "/var/lib/kubelet/pod-resources") {
      pod_resources = true;
      EXPECT_TRUE(mount["readOnly"].as<bool>());
    }
  }
  EXPECT_TRUE(pod_resources);
}

// The hand-off component patches that DaemonSet's container: the agent's device plugin and NRI
// flags, with their host directories mounted read-write.
TEST(DeployTest, HandoffComponentAddsTheDevicePluginAndNriToTheAgent) {
  const YAML::Node component = YAML::Load(ReadFile("deploy/handoff/kustomization.yaml"));
  EXPECT_EQ(Str(component["kind"]), "Component");
  ASSERT_EQ(component["patches"].size(), 1u);
  const YAML::Node patch =
      YAML::Load(ReadFile("deploy/handoff/" + Str(component["patches"][0]["path"])));
  EXPECT_EQ(Str(patch["kind"]), "DaemonSet");
  EXPECT_EQ(Str(patch["metadata"]["name"]), "linkfit-agent");
  const YAML::Node agent = Find(Rendered(), "DaemonSet", "linkfit-agent");
  ASSERT_TRUE(agent);
  EXPECT_EQ(Str(patch["metadata"]["namespace"]), Str(agent["metadata"]["namespace"]));
  const YAML::Node container = Container(patch["spec"]["template"]["spec"], "agent");
  ASSERT_TRUE(container);
  std::map<std::string, std::string> flags;
  for (std::size_t i = 0; i + 1 < container["args"].size(); i += 2) {
    flags[Str(container["args"][i])] = Str(container["args"][i + 1]);
  }
  EXPECT_EQ(flags["--node-name"], "$(NODE_NAME)");  // the base's arguments are kept
  EXPECT_EQ(flags["--device-plugin-dir"], "/var/lib/kubelet/device-plugins");
  EXPECT_EQ(flags["--nri-socket"], "/var/run/nri/nri.sock");
  std::map<std::string, std::string> host_paths;
  for (const YAML::Node& volume : patch["spec"]["template"]["spec"]["volumes"]) {
    host_paths[Str(volume["name"])] = Str(volume["hostPath"]["path"]);
  }
  for (const YAML::Node& mount : container["volumeMounts"]) {
    EXPECT_EQ(host_paths[Str(mount["name"])], Str(mount["mountPath"]));
    EXPECT_FALSE(mount["readOnly"] && mount["readOnly"].as<bool>()) << Str(mount["name"]);
  }
  EXPECT_EQ(host_paths.size(), 2u);
}

// ---------------------------------------------------------------------------------------------
// Admission policies and the NetworkPolicy.

std::string Joined(const YAML::Node& node) {
  YAML::Emitter out;
  out << node;
  return out.c_str();
}

TEST(DeployTest, AdmissionPoliciesAreBoundAndMatchWhatTheyGuard) {
  const std::vector<Manifest> all = Rendered();
  std::map<std::string, YAML::Node> bindings;
  for (const YAML::Node& binding : OfKind(all, "ValidatingAdmissionPolicyBinding")) {
    bindings[Str(binding["spec"]["policyName"])] = binding;
  }
  for (const YAML::Node& policy : OfKind(all, "ValidatingAdmissionPolicy")) {
    const std::string name = Str(policy["metadata"]["name"]);
    ASSERT_EQ(bindings.count(name), 1u) << name << " has no binding";
    EXPECT_EQ(Str(bindings[name]["spec"]["validationActions"][0]), "Deny") << name;
    EXPECT_EQ(Str(policy["spec"]["failurePolicy"]), "Fail") << name;
    EXPECT_GT(policy["spec"]["validations"].size(), 0u) << name;
  }

  // The allocation annotation: pods (create, update) and Bindings, linkfit exempt by name.
  const YAML::Node allocation =
      Find(all, "ValidatingAdmissionPolicy", "linkfit-allocation-annotation");
  std::map<std::string, std::set<std::string>> operations;  // resource -> operations
  for (const YAML::Node& rule : allocation["spec"]["matchConstraints"]["resourceRules"]) {
    for (const YAML::Node& resource : rule["resources"]) {
      for (const YAML::Node& op : rule["operations"]) {
        operations[resource.as<std::string>()].insert(op.as<std::string>());
      }
    }
  }
  EXPECT_EQ(operations["pods"], (std::set<std::string>{"CREATE", "UPDATE"}));
  EXPECT_EQ(operations["pods/binding"].count("CREATE"), 1u);
  EXPECT_EQ(operations["bindings"].count("CREATE"), 1u);
  const std::string linkfit_user = ServiceAccountUser(Find(all, "Deployment", kDeployment));
  EXPECT_NE(Joined(allocation["spec"]["matchConditions"]).find("'" + linkfit_user + "'"),
            std::string::npos);
  const std::string checks = Joined(allocation["spec"]);
  EXPECT_NE(checks.find("linkfit.io/allocation"), std::string::npos);
  EXPECT_NE(checks.find("oldObject"), std::string::npos);

  // The node agent: its own Node (from the token's node-name extra), two annotations.
  const YAML::Node own_node = Find(all, "ValidatingAdmissionPolicy", "linkfit-agent-own-node");
  const std::string agent_user = ServiceAccountUser(Find(all, "DaemonSet", "linkfit-agent"));
  EXPECT_NE(Joined(own_node["spec"]["matchConditions"]).find("'" + agent_user + "'"),
            std::string::npos);
  const std::string node_checks = Joined(own_node["spec"]);
  for (const char* needle : {"authentication.kubernetes.io/node-name", "linkfit.io/topology",
                             "linkfit.io/devices-in-use", "object.metadata.name"}) {
    EXPECT_NE(node_checks.find(needle), std::string::npos) << needle;
  }
}

TEST(DeployTest, NetworkPolicyAdmitsOnlyTheOpsPort) {
  const std::vector<Manifest> all = Rendered();
  const YAML::Node labels =
      Find(all, "Deployment", kDeployment)["spec"]["template"]["metadata"]["labels"];
  int selecting = 0;
  for (const YAML::Node& policy : OfKind(all, "NetworkPolicy")) {
    bool selects = true;
    for (const auto& selector : policy["spec"]["podSelector"]["matchLabels"]) {
      selects &= Str(labels[selector.first.as<std::string>()]) == selector.second.as<std::string>();
    }
    if (!selects) continue;
    ++selecting;
    EXPECT_EQ(Str(policy["spec"]["policyTypes"][0]), "Ingress");
    ASSERT_GT(policy["spec"]["ingress"].size(), 0u);
    for (const YAML::Node& rule : policy["spec"]["ingress"]) {
      ASSERT_EQ(rule["ports"].size(), 1u);  // an ingress rule without ports admits every port
      EXPECT_EQ(rule["ports"][0]["port"].as<int>(), 9090);
      EXPECT_GT(rule["from"].size(), 0u);  // ... and one without `from` every source
    }
  }
  EXPECT_EQ(selecting, 1);
}

// ---------------------------------------------------------------------------------------------
// Examples, dashboard, image.

TEST(DeployTest, ExamplePodsUseTheSchedulerAndManagedResources) {
  const YAML::Node config = YAML::Load(ReadFile("config/kube-scheduler-config.yaml"));
  std::set<std::string> managed;
  for (const YAML::Node& resource : config["extenders"][0]["managedResources"]) {
    managed.insert(resource["name"].as<std::string>());
  }
  std::set<std::string> asked;
  for (const auto& entry : std::filesystem::directory_iterator(SourcePath("deploy/examples"))) {
    if (entry.path().extension() != ".yaml") continue;
    const YAML::Node pod = YAML::LoadFile(entry.path().string());
    const std::string file = entry.path().filename().string();
    EXPECT_EQ(Str(pod["apiVersion"]), "v1") << file;
    EXPECT_EQ(Str(pod["kind"]), "Pod") << file;
    EXPECT_EQ(Str(pod["spec"]["schedulerName"]), kSchedulerProfile) << file;
    // kube-scheduler only sends pods that name a managed resource to linkfit.
    int managed_resources = 0;
    for (const YAML::Node& container : pod["spec"]["containers"]) {
      for (const char* kind : {"requests", "limits"}) {
        for (const auto& resource : container["resources"][kind]) {
          const std::string name = resource.first.as<std::string>();
          if (name.find('/') == std::string::npos) continue;  // cpu, memory
          EXPECT_EQ(managed.count(name), 1u) << file << ": " << name;
          managed_resources += static_cast<int>(managed.count(name));
          asked.insert(name);
        }
      }
    }
    EXPECT_GT(managed_resources, 0) << file;
  }
  // The three shapes: whole GPUs, a MIG instance, a share.
  EXPECT_EQ(asked.count("nvidia.com/gpu"), 1u);
  EXPECT_EQ(asked.count("nvidia.com/mig-3g.40gb"), 1u);
  EXPECT_EQ(asked.count("linkfit.io/gpu-share"), 1u);
}

TEST(DeployTest, DashboardShowsEverySeries) {
  const std::string json = ReadFile("deploy/grafana/linkfit-dashboard.json");
  const YAML::Node dashboard = YAML::Load(json);
  EXPECT_GT(dashboard["panels"].size(), 0u);
  for (const char* series :
       {"linkfit_request_duration_seconds_bucket", "linkfit_requests_total",
        "linkfit_filter_nodes_total", "linkfit_cache_nodes", "linkfit_cache_pods", "linkfit_gpus",
        "linkfit_fragmentation_ratio", "linkfit_watch_events_total", "linkfit_relists_total",
        "linkfit_api_calls_total", "linkfit_bind_outcomes_total", "linkfit_estimated_pods",
        "linkfit_reported_pods", "linkfit_handoff_mismatch_total", "linkfit_nodes_by_handoff_mode",
        "linkfit_time_to_ready_seconds"}) {
    EXPECT_NE(json.find(series), std::string::npos) << series;
  }
  // Every series the dashboard queries is one linkfit registers (a renamed or invented metric
  // would leave a panel silently empty).
  const std::string registered = ReadFile("src/server/prometheus_metrics.cc");
  const std::regex name("linkfit_[a-z_]+");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), name); it != std::sregex_iterator();
       ++it) {
    std::string series = it->str();
    for (const char* suffix : {"_bucket", "_count", "_sum"}) {
      const std::string_view tail(suffix);
      if (series.size() > tail.size() &&
          series.compare(series.size() - tail.size(), tail.size(), tail) == 0) {
        series.resize(series.size() - tail.size());
      }
    }
    if (series == "linkfit_dashboard") continue;  // the dashboard's own file name
    EXPECT_NE(registered.find("\"" + series + "\""), std::string::npos)
        << series << " is queried by the dashboard but not registered";
  }
}

TEST(DeployTest, DockerfileBuildsANonRootRuntimeImage) {
  const std::string dockerfile = ReadFile("deploy/Dockerfile");
  for (const char* needle :
       {"FROM debian:bookworm AS build", "cmake --preset release", "--target linkfit",
        "FROM debian:bookworm-slim", "USER 65532", "ENTRYPOINT [\"/usr/local/bin/linkfit\"]",
        "/usr/share/linkfit/", "/etc/linkfit/"}) {
    EXPECT_NE(dockerfile.find(needle), std::string::npos) << needle;
  }
  // The ConfigMap's mig_profiles_dir is where the image puts config/mig.
  auto config = ParseConfig(
      ConfigMapData("deploy/configmap.yaml", "linkfit-config", "linkfit.yaml"), "/etc/linkfit");
  ASSERT_TRUE(config.has_value()) << config.error().message;
  EXPECT_EQ(config->mig_profiles_dir, "/usr/share/linkfit/mig");
  EXPECT_NE(dockerfile.find("COPY config/ /usr/share/linkfit/"), std::string::npos);
}

}  // namespace
}  // namespace linkfit::app
