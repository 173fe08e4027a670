// libFuzzer target: linkfit.io/devices-in-use (kube/annotations.h), which linkfit reads from
// every node event: whoever can patch a Node's annotations (the admission policy aside) controls
// its bytes.
//
// A report that decodes must encode and decode to itself.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "linkfit/kube/annotations.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto devices = linkfit::kube::DecodeDevicesInUse(text);
  if (!devices) return 0;
  const auto again = linkfit::kube::DecodeDevicesInUse(EncodeDevicesInUse(*devices));
  if (!again || !(*again == *devices)) std::abort();
  return 0;
}
