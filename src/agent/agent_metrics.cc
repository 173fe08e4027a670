// AgentMetrics and its endpoint (agent_metrics.h): prometheus-cpp's registry and text serializer,
// cpp-httplib's server.

#include "linkfit/agent/agent_metrics.h"

#include <httplib.h>

#include <cstdlib>
#include <mutex>
#include <thread>

#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace linkfit::agent {

struct AgentMetrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& guessed =
      prometheus::BuildCounter()
          .Name("linkfit_agent_guessed_figures_total")
          .Help(
              "Discoveries in which a figure (nvlink, nvlink_rate, pcie, mig) of a GPU model was "
              "not told by "
              "the machine and came from linkfit's GPU model table or a default")
          .Register(*registry);
};

AgentMetrics::AgentMetrics() : impl_(std::make_unique<Impl>()) {}
AgentMetrics::~AgentMetrics() = default;

void AgentMetrics::CountGuessedFigure(const std::string& figure, const std::string& model) {
  // prometheus-cpp's Family::Add and Counter::Increment are thread-safe.
  impl_->guessed.Add({{"figure", figure}, {"model", model}}).Increment();
}

std::string AgentMetrics::Render() const {
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

namespace {

class HttplibMetricsEndpoint : public MetricsEndpoint {
 public:
  HttplibMetricsEndpoint(const AgentMetrics& metrics, int port) : port_(port) {
    server_.Get("/metrics", [&metrics](const httplib::Request&, httplib::Response& response) {
      response.set_content(metrics.Render(), "text/plain; version=0.0.4; charset=utf-8");
    });
  }
  ~HttplibMetricsEndpoint() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  httplib::Server& server() { return server_; }
  void Start() {
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  int port() const override { return port_; }
  void set_port(int port) { port_ = port; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<MetricsEndpoint>> ServeMetrics(const std::string& address,
                                                      const AgentMetrics& metrics) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return MakeError("--metrics-listen " + address + ": expected HOST:PORT");
  }
  const std::string host = address.substr(0, colon);
  const std::string port_text = address.substr(colon + 1);
  char* end = nullptr;
  const long port = std::strtol(port_text.c_str(), &end, 10);
  if (port_text.empty() || *end != '\0' || port < 0 || port > 65535) {
    return MakeError("--metrics-listen " + address + ": port must be 0..65535");
  }
  auto endpoint = std::make_unique<HttplibMetricsEndpoint>(metrics, static_cast<int>(port));
  if (port == 0) {
    const int bound = endpoint->server().bind_to_any_port(host);
    if (bound < 0) return MakeError("--metrics-listen " + address + ": cannot bind");
    endpoint->set_port(bound);
  } else if (!endpoint->server().bind_to_port(host, static_cast<int>(port))) {
    return MakeError("--metrics-listen " + address + ": cannot bind");
  }
  endpoint->Start();
  return std::unique_ptr<MetricsEndpoint>(std::move(endpoint));
}

}  // namespace linkfit::agent
