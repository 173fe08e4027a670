// `linkfit explain NAMESPACE/POD`: asks the running extender why a pod of the cluster is pending.
// It reads the pod from the API server (kubeconfig: --kubeconfig, else $KUBECONFIG, else
// ~/.kube/config) and POSTs it to the extender's /explain (--server, default the operations port
// on localhost, e.g. through `kubectl port-forward -n linkfit-system deploy/linkfit-scheduler
// 9090`). Installed as a kubectl plugin by a symlink named kubectl-linkfit:
//
//   ln -s "$(command -v linkfit)" /usr/local/bin/kubectl-linkfit
//   kubectl linkfit explain ml/trainer-0

#include <cstdlib>
#include <ostream>

#include <nlohmann/json.hpp>

#include "linkfit/app/cli.h"
#include "linkfit/common/flags.h"
#include "linkfit/kube/api_client.h"
#include "linkfit/wire/extender_client.h"

namespace linkfit::app {

namespace {

std::string DefaultKubeconfig() {
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    const std::string value(env);
    return value.substr(0, value.find(':'));  // the first file of a list
  }
  if (const char* home = std::getenv("HOME"); home != nullptr) {
    return std::string(home) + "/.kube/config";
  }
  return "";
}

}  // namespace

int RunExplainRemote(const std::string& pod_ref, const std::vector<std::string>& args,
                     std::ostream& out, std::ostream& err) {
  auto flags = Flags::Parse(args, {{"kubeconfig"}, {"context"}, {"server"}});
  if (!flags) {
    err << "linkfit explain: " << flags.error().message << "\n";
    return 2;
  }
  const auto slash = pod_ref.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == pod_ref.size()) {
    err << "linkfit explain: expected NAMESPACE/POD, got \"" << pod_ref << "\"\n";
    return 2;
  }
  const std::string ns = pod_ref.substr(0, slash);
  const std::string name = pod_ref.substr(slash + 1);
  const std::string kubeconfig = flags->Get("kubeconfig").value_or(DefaultKubeconfig());
  auto config = kube::LoadKubeconfig(kubeconfig, flags->Get("context").value_or(""));
  if (!config) {
    err << "linkfit explain: " << config.error().message << "\n";
    return 2;
  }
  auto client = kube::NewApiClient(*config);
  if (!client) {
    err << "linkfit explain: " << client.error().message << "\n";
    return 2;
  }
  auto pod = (*client)->Get("/api/v1/namespaces/" + ns + "/pods/" + name, "get");
  if (!pod) {
    err << "linkfit explain: " << config->server << ": " << pod.error().message << "\n";
    return 1;
  }
  if (pod->status != 200) {
    err << "linkfit explain: pod " << pod_ref << ": " << kube::StatusMessage(pod->body) << " ("
        << pod->status << ")\n";
    return 1;
  }
  const nlohmann::json object = nlohmann::json::parse(pod->body, nullptr, false);
  if (object.is_object() && object.contains("spec") && object["spec"].contains("nodeName") &&
      object["spec"]["nodeName"].is_string()) {
    out << "pod " << pod_ref << " is already bound to node "
        << object["spec"]["nodeName"].get<std::string>() << "\n";
  }
  const std::string server = flags->Get("server").value_or("http://127.0.0.1:9090");
  wire::ExtenderClient extender(server, "", {.connect_seconds = 5, .read_seconds = 30});
  const auto reply = extender.Call("POST", "/explain", pod->body);
  if (!reply) {
    err << "linkfit explain: cannot reach the extender at " << server << " ("
        << reply.error().message
        << "); forward its operations port, e.g. kubectl port-forward -n linkfit-system "
           "deploy/linkfit-scheduler 9090\n";
    return 1;
  }
  const nlohmann::json lines = nlohmann::json::parse(reply->body, nullptr, false);
  if (reply->status != 200 || !lines.is_object() || !lines.contains("lines")) {
    err << "linkfit explain: the extender answered " << reply->status << ": " << reply->body
        << "\n";
    return 1;
  }
  for (const auto& line : lines["lines"]) {
    if (line.is_string()) out << line.get<std::string>() << "\n";
  }
  return 0;
}

}  // namespace linkfit::app
