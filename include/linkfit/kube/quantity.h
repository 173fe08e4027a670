#pragma once

// Kubernetes resource quantities (resource.Quantity in k8s.io/apimachinery), parsed exactly into
// integers. linkfit keeps every resource amount as an int64 count of thousandths ("milli"), the
// unit kube-scheduler itself compares CPU in, so `500m` CPU is 500 and `2` GPUs are 2000.
//
// Grammar (mirrors apimachinery's parseQuantityString and its suffixer):
//
//   <quantity>        ::= <sign>? <numeric> <suffix>
//   <numeric>         ::= <digits> | <digits> "." <digits>? | "." <digits>
//   <suffix>          ::= "" | <decimalSI> | <binarySI> | ("e" | "E") <sign>? <digits>
//   <decimalSI>       ::= "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E"
//   <binarySI>        ::= "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei"
//
// No whitespace is allowed anywhere (Kubernetes rejects " 1" and "1 "; its JSON unmarshaller trims
// the quoted text first, and the pod reader in object_json.h does the same). At least one digit is
// required, so "Gi", "-" and "." are rejected (apimachinery's hand-written parser happens to read
// "Gi" as 0; the documented grammar, which linkfit follows, does not allow it).
//
// Rounding: values finer than the target unit round away from zero, exactly as Quantity's
// MilliValue() and Value() do (they scale with "rounding up"): `0.0001` is 1 milli, `-0.0001` is
// -1 milli, `1.5m` is 2 milli, `0.1` has Value() 1. Results that do not fit in int64 are errors
// (Kubernetes would silently wrap or clamp them).
//
// Thread-safety: pure functions.

#include <cstdint>
#include <string_view>

#include "linkfit/common/result.h"

namespace linkfit::kube {

// Returns the quantity in thousandths of its unit (`2` -> 2000, `500m` -> 500, `1Ki` -> 1024000).
// The error message names the text and what is wrong with it.
Result<std::int64_t> ParseQuantityMilli(std::string_view text);

// Returns the quantity as an integer count, rounded away from zero like Quantity.Value()
// (`1500m` -> 2, `16Gi` -> 17179869184).
Result<std::int64_t> ParseQuantityValue(std::string_view text);

}  // namespace linkfit::kube
