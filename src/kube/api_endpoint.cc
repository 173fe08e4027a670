#include "kube/api_endpoint.h"

#include "linkfit/common/strings.h"

namespace linkfit::kube {

Result<Endpoint> ParseApiServerUrl(const std::string& url) {
  Endpoint endpoint;
  std::string rest;
  if (url.starts_with("https://")) {
    rest = url.substr(8);
  } else if (url.starts_with("http://")) {
    endpoint.tls = false;
    endpoint.port = 80;
    rest = url.substr(7);
  } else {
    return MakeError("API server " + QuoteForMessage(url) + ": expected https://host[:port]");
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find_first_of("/?#@") != std::string::npos) {
    return MakeError("API server " + QuoteForMessage(url) +
                     ": a path, query or user is not supported; expected https://host[:port]");
  }
  std::string host = rest;
  std::string port;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string::npos) {
      return MakeError("API server " + QuoteForMessage(url) + ": bad IPv6 host");
    }
    host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':')
        return MakeError("API server " + QuoteForMessage(url) + ": bad port");
      port = rest.substr(close + 2);
    }
  } else if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
    if (rest.find(':') != colon) {
      return MakeError("API server " + QuoteForMessage(url) + ": an IPv6 host needs brackets");
    }
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty()) return MakeError("API server " + QuoteForMessage(url) + ": no host");
  if (!port.empty()) {
    const auto number = ParseInt(port);
    if (!number || *number <= 0 || *number > 65535) {
      return MakeError("API server " + QuoteForMessage(url) + ": bad port");
    }
    endpoint.port = static_cast<int>(*number);
  }
  endpoint.host = host;
  endpoint.host_header = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (endpoint.port != (endpoint.tls ? 443 : 80)) {
    endpoint.host_header += ":" + std::to_string(endpoint.port);
  }
  return endpoint;
}

}  // namespace linkfit::kube
