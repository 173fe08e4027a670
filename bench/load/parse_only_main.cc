// linkfit-parse-only: the load client's baseline. The same HTTP server module (event-driven,
// Asio/Beast; TCP_NODELAY, keep-alive, metrics per verb) and the same wire codec as `linkfit
// serve`, with a handler that only decodes each request and answers a minimal valid reply: filter
// passes every other node and fails the rest with one reason (as the hot-path issue's do-nothing
// server does: half the names pass; names in cache mode, the Node objects echoed otherwise),
// prioritize scores every node 0, bind succeeds. linkfit's latency over this one is what its own
// decisions cost.
//
//   linkfit-parse-only [--listen 127.0.0.1:0]
//
// Prints "linkfit-parse-only listening on http://HOST:PORT" when ready; stops on SIGINT/SIGTERM.

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>

#include "common/flags.h"
#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"
#include "linkfit/server/prometheus_metrics.h"
#include "linkfit/server/server.h"
#include "parse_only_handler.h"

namespace linkfit::load {
namespace {

int Run(int argc, char** argv) {
  server::ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  bench::Flags flags;
  flags.Value("--listen", [&options](const std::string& listen) {
    const std::size_t colon = listen.rfind(':');
    const auto port = colon == std::string::npos
                          ? std::nullopt
                          : ParseInt(std::string_view(listen).substr(colon + 1));
    if (!port) return false;
    options.host = listen.substr(0, colon);
    options.port = static_cast<int>(*port);
    return true;
  });
  if (auto parsed = flags.Parse(argc, argv); !parsed) {
    std::cerr << "linkfit-parse-only: " << parsed.error().message
              << "\nusage: linkfit-parse-only [--listen HOST:PORT]\n";
    return 2;
  }
  log::SetLevel(log::Level::kWarning);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  ParseOnlyHandler handler;
  server::PrometheusMetrics metrics;
  auto created = server::NewServer(options, handler, metrics);
  if (!created) {
    std::cerr << "linkfit-parse-only: " << created.error().message << "\n";
    return 1;
  }
  server::Server& http = **created;
  if (auto started = http.Start(); !started) {
    std::cerr << "linkfit-parse-only: " << started.error().message << "\n";
    return 1;
  }
  std::cout << "linkfit-parse-only listening on http://" << options.host << ":" << http.port()
            << std::endl;
  std::thread waiter([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    http.Stop();
  });
  http.Wait();
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  return 0;
}

}  // namespace
}  // namespace linkfit::load

int main(int argc, char** argv) { return linkfit::load::Run(argc, argv); }
