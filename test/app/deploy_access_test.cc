// Checks on the shipped manifests (deploy/), continued from deploy_test.cc: RBAC grants exactly
// what linkfit and its agent use, the admission policies and NetworkPolicy guard what
// deploy/README.md says, and the examples, dashboard and Dockerfile match the product.

#include "app/deploy_testing.h"

namespace linkfit::app {
namespace {

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

// The agent serves its metrics (linkfit_agent_guessed_figures_total) where Prometheus finds them:
// --metrics-listen on the container's metrics port, the pod's scrape annotations naming that
// port, the agent's NetworkPolicy admitting only it, and the hand-off component keeping the flag.
std::string ListenPort(const YAML::Node& container) {
  for (std::size_t i = 0; i + 1 < container["args"].size(); ++i) {
    if (Str(container["args"][i]) == "--metrics-listen") {
      const std::string listen = Str(container["args"][i + 1]);
      return listen.substr(listen.rfind(':') + 1);
    }
  }
  return "";
}

TEST(DeployTest, NodeAgentServesItsMetricsToPrometheus) {
  const std::vector<Manifest> all = Rendered();
  const YAML::Node agent = Find(all, "DaemonSet", "linkfit-agent");
  ASSERT_TRUE(agent);
  const YAML::Node container = Container(agent["spec"]["template"]["spec"], "agent");
  const std::string port = ListenPort(container);
  ASSERT_FALSE(port.empty()) << "the agent runs without --metrics-listen";
  std::string container_port;
  for (const YAML::Node& p : container["ports"]) {
    if (Str(p["name"]) == "metrics") container_port = Str(p["containerPort"]);
  }
  EXPECT_EQ(container_port, port);
  const YAML::Node annotations = agent["spec"]["template"]["metadata"]["annotations"];
  EXPECT_EQ(Str(annotations["prometheus.io/scrape"]), "true");
  EXPECT_EQ(Str(annotations["prometheus.io/port"]), port);
  EXPECT_EQ(Str(annotations["prometheus.io/path"]), "/metrics");

  const YAML::Node labels = agent["spec"]["template"]["metadata"]["labels"];
  int selecting = 0;
  for (const YAML::Node& policy : OfKind(all, "NetworkPolicy")) {
    bool selects = true;
    for (const auto& selector : policy["spec"]["podSelector"]["matchLabels"]) {
      selects &= Str(labels[selector.first.as<std::string>()]) == selector.second.as<std::string>();
    }
    if (!selects) continue;
    ++selecting;
    ASSERT_EQ(policy["spec"]["ingress"].size(), 1u);
    const YAML::Node rule = policy["spec"]["ingress"][0];
    ASSERT_EQ(rule["ports"].size(), 1u);
    EXPECT_EQ(Str(rule["ports"][0]["port"]), port);
    EXPECT_GT(rule["from"].size(), 0u);
  }
  EXPECT_EQ(selecting, 1);

  const YAML::Node component = YAML::Load(ReadFile("deploy/handoff/kustomization.yaml"));
  const YAML::Node patch =
      YAML::Load(ReadFile("deploy/handoff/" + Str(component["patches"][0]["path"])));
  EXPECT_EQ(ListenPort(Container(patch["spec"]["template"]["spec"], "agent")), port)
      << "the hand-off component's argument list replaces the base's: it must keep the flag";
}

// The hand-off component patches that DaemonSet's container: the agent's device plugin and NRI
// flags, with their host directories mounted read-write, and the node's CDI spec directories
// read-only at the host's paths (read under --nic-cdi-kind).
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
  std::set<std::string> read_only;
  for (const YAML::Node& mount : container["volumeMounts"]) {
    EXPECT_EQ(host_paths[Str(mount["name"])], Str(mount["mountPath"]));
    if (mount["readOnly"] && mount["readOnly"].as<bool>())
      read_only.insert(Str(mount["mountPath"]));
  }
  EXPECT_EQ(host_paths.size(), 4u);
  EXPECT_EQ(read_only, (std::set<std::string>{"/etc/cdi", "/var/run/cdi"}));
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
