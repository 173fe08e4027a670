// `linkfit explain`: one line per node saying whether and why a pod fits, computed offline from
// the same config and cluster/state files `linkfit serve` would load (no server needed). A
// running server answers the same question at POST /explain.

#include <fstream>
#include <ostream>
#include <sstream>

#include "app/service.h"
#include "linkfit/app/cli.h"
#include "linkfit/common/flags.h"
#include "linkfit/extender/extender.h"
#include "linkfit/standalone/standalone.h"
#include "linkfit/wire/codec.h"

namespace linkfit::app {

Result<Config> ConfigFromFlags(const Flags& flags);

namespace {

// A Binder for a read-only question: explain never binds.
class NoBinder final : public extender::Binder {
 public:
  extender::BindReply Bind(const extender::BindRequest&) override {
    return {state::BindEvent::kRefused, "explain does not bind"};
  }
  void Released(const std::string&) override {}
};

}  // namespace

int RunExplainRemote(const std::string& pod_ref, const std::vector<std::string>& args,
                     std::ostream& out, std::ostream& err);

int RunExplain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (!args.empty() && !args[0].starts_with("--")) {
    return RunExplainRemote(args[0], std::vector<std::string>(args.begin() + 1, args.end()), out,
                            err);
  }
  auto flags = Flags::Parse(args, {{"config"}, {"cluster"}, {"state-file"}, {"pod"}});
  if (!flags) {
    err << "linkfit explain: " << flags.error().message << "\n";
    return 2;
  }
  auto pod_path = flags->Require("pod");
  auto config = ConfigFromFlags(*flags);
  if (!pod_path || !config) {
    err << "linkfit explain: " << (!pod_path ? pod_path.error() : config.error()).message << "\n";
    return 2;
  }
  std::ifstream in(*pod_path);
  if (!in) {
    err << "linkfit explain: cannot read " << *pod_path << "\n";
    return 2;
  }
  std::stringstream pod_json;
  pod_json << in.rdbuf();
  const std::string envelope = R"({"Pod":)" + pod_json.str() + R"(,"Nodes":null,"NodeNames":[]})";
  auto decoded = wire::DecodeExtenderArgs(envelope);
  if (!decoded) {
    err << "linkfit explain: " << *pod_path << " is not a Pod: " << decoded.error().message << "\n";
    return 2;
  }
  if (!config->cluster_file) {
    err << "linkfit explain: no nodes: set cluster_file in the config (or --cluster)\n";
    return 2;
  }
  auto catalog = alloc::MigCatalog::LoadDirectory(config->mig_profiles_dir);
  if (!catalog) {
    err << "linkfit explain: " << catalog.error().message << "\n";
    return 1;
  }
  alloc::PlacementTableCache tables;
  NullMetrics metrics;
  state::ClusterCache cache(&metrics);
  auto bandwidth = BandwidthModelFrom(*config);
  if (!bandwidth) {
    err << "linkfit explain: " << bandwidth.error().message << "\n";
    return 2;
  }
  model::NodeModelFactory factory(tables, *catalog, *bandwidth);
  if (auto loaded = standalone::LoadClusterFile(*config->cluster_file, factory, cache); !loaded) {
    err << "linkfit explain: " << loaded.error().message << "\n";
    return 1;
  }
  if (config->state_file) {
    if (auto restored = standalone::LoadStateFile(*config->state_file, cache); !restored) {
      err << "linkfit explain: " << restored.error().message << "\n";
      return 1;
    }
  }
  auto options = ExtenderOptionsFrom(*config);
  if (!options) {
    err << "linkfit explain: " << options.error().message << "\n";
    return 2;
  }
  NoBinder binder;
  extender::PodMemo memo(options->defaults);
  memo.LearnHeld(cache);  // the pods already holding devices weigh in demand, as in `serve`
  extender::Extender extender(cache, std::move(*options), binder, memo, metrics);
  for (const std::string& line : extender.Explain(decoded->pod)) out << line << "\n";
  return 0;
}

}  // namespace linkfit::app
