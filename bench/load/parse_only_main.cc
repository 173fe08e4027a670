// linkfit-parse-only: the load client's baseline. The same HTTP server module (cpp-httplib,
// TCP_NODELAY, keep-alive, metrics per verb) and the same wire codec as `linkfit serve`, with a
// handler that only decodes each request and answers a minimal valid reply: filter passes every
// other node and fails the rest with one reason (as the hot-path issue's do-nothing server does:
// half the names pass; names in cache mode, the Node objects echoed otherwise), prioritize scores
// every node 0, bind succeeds. linkfit's latency over this one is what its own decisions cost.
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

#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"
#include "linkfit/kube/codec.h"
#include "linkfit/server/handler.h"
#include "linkfit/server/prometheus_metrics.h"
#include "linkfit/server/server.h"

namespace linkfit::load {
namespace {

server::HttpReply BadRequest(const std::string& message) {
  return server::HttpReply{400, kube::EncodeErrorBody(message)};
}

constexpr std::string_view kFailReason = "parse-only: every other node fails";

class ParseOnlyHandler final : public server::ExtenderHandler {
 public:
  server::HttpReply Filter(std::string_view body) override {
    auto args = kube::DecodeExtenderArgs(body);
    if (!args) return BadRequest(args.error().message);
    kube::FilterResult result;
    result.list = kube::ReplyListFor(*args);
    if (result.list == kube::NodeListKind::kObjects) {
      result.nodes_json.reserve(args->nodes.size());
      for (const kube::NodeItem& node : args->nodes) result.nodes_json.push_back(node.raw_json);
    } else {
      // Every other name fails. A do-nothing server writes the FailedNodes map in the request's
      // order (the order of a JSON object's keys means nothing to kube-scheduler's decoder), so
      // each failure's order is its index: the encoder then sorts nothing by name.
      result.names_escape_free = args->node_names_escape_free;
      result.node_names.reserve(args->node_names.size() / 2 + 1);
      result.failed_nodes.reserve(args->node_names.size() / 2);
      for (std::size_t i = 0; i < args->node_names.size(); ++i) {
        if (i % 2 == 0) {
          result.node_names.push_back(args->node_names[i]);
        } else {
          result.failed_nodes.push_back(
              {args->node_names[i], kFailReason, static_cast<std::uint32_t>(i)});
        }
      }
    }
    return server::HttpReply{200, kube::EncodeFilterResult(result)};
  }

  server::HttpReply Prioritize(std::string_view body) override {
    auto args = kube::DecodeExtenderArgs(body);
    if (!args) return BadRequest(args.error().message);
    std::vector<kube::HostPriority> priorities;
    priorities.reserve(args->node_names.size());
    for (std::string_view name : args->node_names) priorities.push_back({name, 0});
    return server::HttpReply{
        200, kube::EncodeHostPriorityList(priorities, args->node_names_escape_free)};
  }

  server::HttpReply Bind(std::string_view body) override {
    auto args = kube::DecodeBindingArgs(body);
    if (!args) return BadRequest(args.error().message);
    return server::HttpReply{200, kube::EncodeBindingResult("")};
  }

  server::HttpReply Preempt(std::string_view body) override {
    auto args = kube::DecodePreemptionArgs(body);
    if (!args) return BadRequest(args.error().message);
    return server::HttpReply{200, kube::EncodePreemptionResult(args->node_meta_victims)};
  }

  server::HttpReply Inspect(std::string_view) override {
    return server::HttpReply{404, kube::EncodeErrorBody("the parse-only server has no nodes")};
  }

  server::HttpReply Explain(std::string_view) override {
    return server::HttpReply{404, kube::EncodeErrorBody("the parse-only server has no nodes")};
  }

  bool Ready() const override { return true; }
};

int Run(int argc, char** argv) {
  server::ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--listen" && i + 1 < argc) {
      const std::string_view listen = argv[++i];
      const std::size_t colon = listen.rfind(':');
      const auto port =
          colon == std::string_view::npos ? std::nullopt : ParseInt(listen.substr(colon + 1));
      if (!port) {
        std::cerr << "linkfit-parse-only: --listen expects HOST:PORT\n";
        return 2;
      }
      options.host = std::string(listen.substr(0, colon));
      options.port = static_cast<int>(*port);
    } else {
      std::cerr << "usage: linkfit-parse-only [--listen HOST:PORT]\n";
      return 2;
    }
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
