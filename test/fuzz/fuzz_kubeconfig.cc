// libFuzzer target: kubeconfig files (`linkfit serve` outside a cluster, `linkfit-agent
// --kubeconfig`), parsed as LoadKubeconfig parses them, then the server URL as the client parses
// it. The files a kubeconfig names are looked up below a directory that does not exist (absolute
// paths are read; reads stop at 4 MiB).
//
// Invariant: an error message is never empty.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kube/api_endpoint.h"
#include "linkfit/kube/api_client.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto config =
      linkfit::kube::ParseKubeconfig(text, "/nonexistent/linkfit-fuzz/kubeconfig", "");
  if (!config) {
    if (config.error().message.empty()) std::abort();
    return 0;
  }
  const auto endpoint = linkfit::kube::ParseApiServerUrl(config->server);
  if (!endpoint && endpoint.error().message.empty()) std::abort();
  return 0;
}
