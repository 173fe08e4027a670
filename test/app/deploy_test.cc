// Checks on the shipped manifests (deploy/), the CI stand-in for applying them: every resource the
// kustomization lists exists and parses, every document is a real Kubernetes kind with a name,
// the copies embedded in ConfigMaps match the files under config/, linkfit's ConfigMap is a valid
// linkfit config, the KubeSchedulerConfiguration passes the checks kube-scheduler's
// validateExtenders makes (extender-protocol.md §4) and fits the sidecar design, and the
// Deployment says what deploy/README.md says it does (deploy_access_test.cc: the rest).

#include "app/deploy_testing.h"

namespace linkfit::app {
namespace {

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
      // Only the GPU share resource and the NIC resources are not advertised by a device plugin.
      const bool unadvertised = name == "linkfit.io/gpu-share" || name == "linkfit.io/rdma" ||
                                name == "linkfit.io/rdma-share";
      EXPECT_EQ(resource["ignoredByScheduler"].as<bool>(), unadvertised) << name;
    }
  }
  EXPECT_EQ(binders, 1);  // rule 2: at most one; linkfit is the binder
  EXPECT_EQ(names.count("nvidia.com/gpu"), 1u);
  EXPECT_EQ(names.count("linkfit.io/gpu-share"), 1u);
  EXPECT_EQ(names.count("linkfit.io/rdma"), 1u);
  EXPECT_EQ(names.count("linkfit.io/rdma-share"), 1u);

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

}  // namespace
}  // namespace linkfit::app
