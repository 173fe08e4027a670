// `linkfit serve`: runs the extender until SIGINT or SIGTERM.

#include <pthread.h>
#include <signal.h>

#include <ostream>
#include <thread>

#include "app/service.h"
#include "linkfit/common/flags.h"
#include "linkfit/common/log.h"
#include "linkfit/common/malloc_settings.h"

namespace linkfit::app {
namespace {

// Applies --listen by parsing it exactly as the config's `listen` key.
Result<void> OverrideListen(Config& config, const std::string& listen) {
  std::string quoted;
  for (char c : listen) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  auto parsed = ParseConfig("listen: \"" + quoted + "\"", "", "--listen");
  if (!parsed) return tl::unexpected(parsed.error());
  config.listen = parsed->listen;
  config.listen_host = parsed->listen_host;
  config.listen_port = parsed->listen_port;
  return {};
}

}  // namespace

Result<Config> ConfigFromFlags(const Flags& flags) {
  Config config;
  if (auto path = flags.Get("config")) {
    LINKFIT_ASSIGN_OR_RETURN(config, LoadConfig(*path));
  } else {
    LINKFIT_ASSIGN_OR_RETURN(config, ParseConfig(""));
  }
  if (auto cluster = flags.Get("cluster")) config.cluster_file = *cluster;
  if (auto state_file = flags.Get("state-file")) config.state_file = *state_file;
  if (auto listen = flags.Get("listen")) {
    if (auto ok = OverrideListen(config, *listen); !ok) return tl::unexpected(ok.error());
  }
  if (auto ops = flags.Get("ops-listen")) {
    auto parsed = ParseConfig("ops_listen: \"" + *ops + "\"", "", "--ops-listen");
    if (!parsed) return tl::unexpected(parsed.error());
    config.ops_listen = parsed->ops_listen;
    config.ops_listen_host = parsed->ops_listen_host;
    config.ops_listen_port = parsed->ops_listen_port;
  }
  if (auto kubeconfig = flags.Get("kubeconfig")) {
    config.kubernetes.kubeconfig = *kubeconfig;
    config.kubernetes.enabled = true;
  }
  if (auto context = flags.Get("context")) config.kubernetes.context = *context;
  return config;
}

int RunServe(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto flags = Flags::Parse(args, {{"config"},
                                   {"cluster"},
                                   {"listen"},
                                   {"ops-listen"},
                                   {"state-file"},
                                   {"kubeconfig"},
                                   {"context"}});
  if (!flags) {
    err << "linkfit serve: " << flags.error().message << "\n";
    return 2;
  }
  auto config = ConfigFromFlags(*flags);
  if (!config) {
    err << "linkfit serve: " << config.error().message << "\n";
    return 2;
  }
  if (config->log_level == "debug") log::SetLevel(log::Level::kDebug);
  if (config->log_level == "warning") log::SetLevel(log::Level::kWarning);
  if (config->log_level == "error") log::SetLevel(log::Level::kError);
  if (config->log_level == "off") log::SetLevel(log::Level::kOff);

  // Block the stop signals in every thread; one thread waits for them and stops the server.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Loading builds and frees large temporaries (the YAML trees of the cluster and state files, the
  // API server's list pages): they are mmapped while loading, and handed back once the state is
  // loaded, so that the resident size is what serving needs (DESIGN.md §11, malloc_settings.h).
  UseStartUpMallocSettings();
  auto service = Service::Start(*config, [] { UseServingMallocSettings(); });
  if (!service) {
    err << "linkfit serve: " << service.error().message << "\n";
    return 1;
  }
  out << "linkfit listening on http://" << (*service)->host() << ":" << (*service)->port();
  if ((*service)->ops_port() != 0) out << " (operations on port " << (*service)->ops_port() << ")";
  if ((*service)->cluster_mode()) out << "; cluster mode, ready once the API server is listed";
  out << std::endl;
  std::thread waiter([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    (*service)->Stop();
  });
  (*service)->Wait();
  pthread_kill(waiter.native_handle(), SIGTERM);  // wakes the waiter if the server stopped itself
  waiter.join();
  log::Info("linkfit: stopped");
  return 0;
}

}  // namespace linkfit::app
