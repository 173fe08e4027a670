#include "linkfit/app/cli.h"

#include <ostream>

namespace linkfit::app {
namespace {

constexpr const char* kUsage = R"(usage: linkfit <command> [flags]

commands:
  topo   --topology FILE [--json]
         GPUs, NUMA nodes, NVLink islands and the pair bandwidth matrix of one node
  place  --topology FILE --gpus K [--used I,J,...] [--closeness LEVEL] [--required] [--json]
  place  --topology FILE --mig-profile NAME [--mig-used GPU:PROFILE@START,...] [--json]
         where the exact allocator puts a request on one node
         LEVEL: nvlink | pcie-switch | numa | socket | node
  serve  --config FILE [--cluster FILE] [--listen ADDR:PORT] [--ops-listen ADDR:PORT]
         [--state-file FILE] [--kubeconfig FILE [--context NAME]]
         the kube-scheduler extender: standalone mode with a cluster file, cluster mode with
         --kubeconfig or kubernetes.enabled (in-cluster)
  explain --config FILE --pod POD.json [--cluster FILE] [--state-file FILE]
         one line per node: does the pod fit, on which devices, or why not (offline)
  explain NAMESPACE/POD [--kubeconfig FILE] [--context NAME] [--server URL]
         asks the running extender (--server, default http://127.0.0.1:9090) about a pod of
         the cluster; as a kubectl plugin: ln -s linkfit kubectl-linkfit
  agent  [--node-name NAME] [--kubeconfig FILE] [--once] [--print] ...
         the node agent (linkfit-agent): publishes this node's GPU topology, health, MIG
         layout and the devices pods hold on its Node; `linkfit agent --help` for its flags
  demo   [--config FILE]
         a guided tour: starts the extender on the demo cluster (default config/demo.yaml),
         schedules five pods over HTTP as kube-scheduler would and says what happened

FILE is a topology document (JSON) or `nvidia-smi topo -m` output, optionally followed by
`nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id --format=csv` output.
)";

}  // namespace

int RunServe(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? err : out) << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "topo") return RunTopo(rest, out, err);
  if (args[0] == "place") return RunPlace(rest, out, err);
  if (args[0] == "serve") return RunServe(rest, out, err);
  if (args[0] == "demo") return RunDemo(rest, out, err);
  if (args[0] == "explain") return RunExplain(rest, out, err);
  if (args[0] == "agent") return RunAgent(rest, out, err);
  err << "linkfit: unknown command \"" << args[0] << "\"\n" << kUsage;
  return 2;
}

}  // namespace linkfit::app
