// libFuzzer target: PCI VPD images through VpdVendorUniqueId() (src/agent/sysfs_nics.h), the one
// binary format the agent reads from sysfs (a Data Direct function's and a NIC's `vpd` file).
//
// Besides "no crash, no sanitizer report": the id found is a part of the image, and an image
// that is a prefix of another never yields an id the longer one does not (a truncated read
// cannot invent one).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/sysfs_nics.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view image(reinterpret_cast<const char*>(data), size);
  const std::string id = linkfit::agent::VpdVendorUniqueId(image);
  if (id.size() > image.size()) std::abort();
  if (!id.empty() && image.find(id) == std::string_view::npos) std::abort();
  const std::string whole = id;
  const std::string prefix = linkfit::agent::VpdVendorUniqueId(image.substr(0, size / 2));
  if (!prefix.empty() && prefix != whole) std::abort();
  return 0;
}
