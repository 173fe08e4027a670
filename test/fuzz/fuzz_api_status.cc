// libFuzzer target: the bodies of the API server's error answers (metav1.Status), which linkfit
// reads for their message on every failed call and for 410/Expired on a watch's ERROR event.
// Proxies and load balancers in front of an API server answer with anything (HTML, truncated
// JSON, nothing), so the readers must take any bytes.
//
// Invariants: nothing crashes; the message is never empty (an empty body reads "(empty body)")
// and never longer than the body plus the "..." of a shortened one.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kube/watch_event.h"
#include "linkfit/kube/api_client.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const std::string message = linkfit::kube::StatusMessage(body);
  if (message.empty()) std::abort();
  if (message.size() > body.size() + 12) std::abort();  // "(empty body)" is 12 bytes
  (void)linkfit::kube::StatusIsGone(body);
  return 0;
}
