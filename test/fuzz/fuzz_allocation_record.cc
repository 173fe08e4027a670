// libFuzzer target: the allocation record (linkfit.io/allocation, kube/annotations.h), which
// cluster mode reads from every bound pod: anyone who can write a pod's annotations (the
// admission policy aside) controls its bytes.
//
// A record that decodes must encode and decode to itself (the restart rebuild relies on it).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "linkfit/kube/annotations.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto record = linkfit::kube::DecodeAllocationRecord(text);
  if (!record) return 0;
  const auto again = linkfit::kube::DecodeAllocationRecord(EncodeAllocationRecord(*record));
  if (!again || !(*again == *record)) std::abort();
  return 0;
}
