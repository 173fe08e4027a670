// libFuzzer target: linkfit.io/devices-in-use (kube/annotations.h), which linkfit reads from
// every Node on every node event: anyone who can patch a Node's annotations controls its bytes.
//
// A document that decodes must encode and decode to itself, and encode to the same bytes again
// (the node agent patches only on change, comparing encodings).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "linkfit/kube/annotations.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto devices = linkfit::kube::DecodeDevicesInUse(text);
  if (!devices) {
    if (devices.error().message.empty()) std::abort();  // every refusal names its problem
    return 0;
  }
  const std::string encoded = linkfit::kube::EncodeDevicesInUse(*devices);
  const auto again = linkfit::kube::DecodeDevicesInUse(encoded);
  if (!again || !(*again == *devices)) std::abort();
  if (linkfit::kube::EncodeDevicesInUse(*again) != encoded) std::abort();
  return 0;
}
