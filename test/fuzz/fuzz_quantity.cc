// libFuzzer target: resource quantities ("500m", "16Gi", "1e3", "0.5") as they arrive in pod
// specs, node capacities and linkfit's annotations, and the config's byte sizes ("64Mi").
//
// Invariants: nothing crashes (no overflow: UBSan aborts on signed overflow); a quantity that
// parses in thousandths also parses as a count, and the count is the thousandths rounded away
// from zero.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "linkfit/app/config.h"
#include "linkfit/kube/quantity.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto milli = linkfit::kube::ParseQuantityMilli(text);
  const auto value = linkfit::kube::ParseQuantityValue(text);
  if (milli && value) {
    const std::int64_t whole = *milli / 1000;
    const std::int64_t expected = *milli % 1000 == 0 ? whole : whole + (*milli > 0 ? 1 : -1);
    if (*value != expected) std::abort();
  }
  if (milli && !value) std::abort();
  (void)linkfit::app::ParseByteSize(text);
  return 0;
}
