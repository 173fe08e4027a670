#pragma once

// The API server's address as a kubeconfig or the in-cluster environment gives it
// (https://host[:port], http:// for tests), parsed once into what a connection needs.
//
// Thread-safety: plain values and a pure function.

#include <string>

#include "linkfit/common/result.h"

namespace linkfit::kube {

struct Endpoint {
  bool tls = true;
  std::string host;  // without brackets
  int port = 443;
  std::string host_header;  // host[:port], IPv6 bracketed, the port left out when the default
};

// Returns the endpoint of `url`, or an error naming what is wrong with it (a path, query or
// user, an IPv6 host without brackets, a bad port, no host).
Result<Endpoint> ParseApiServerUrl(const std::string& url);

}  // namespace linkfit::kube
