#pragma once

// Internal to module `kube`: the readers of Kubernetes value types (string maps, quantities,
// resource lists) on top of the common JSON reader (linkfit/common/json_reader.h), whose
// vocabulary this namespace brings in for kube's decoders.
//
// Thread-safety: a Ctx belongs to one decode call on one thread.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/json_reader.h"
#include "linkfit/common/result.h"
#include "linkfit/kube/types.h"

namespace linkfit::kube::json {

using namespace ::linkfit::json;  // NOLINT: the reader's vocabulary, shared by kube's decoders

// Reads an object of strings (null is empty; a null value reads as "").
bool ReadStringMap(Ctx& c, od::value& v, std::string_view where, StringMap* out);

// Reads a Kubernetes quantity into *milli: a JSON string (trimmed, as Quantity.UnmarshalJSON
// does), a bare number, or null (zero); *milli is an Error for a value that is not a quantity.
bool ReadQuantity(Ctx& c, od::value& v, std::string_view where, Result<std::int64_t>* milli);

// Reads a ResourceList (resource name -> quantity). A value that is not a quantity becomes a
// problem naming it, and that resource is left out.
bool ReadResources(Ctx& c, od::value& v, std::string_view where, ResourceMap* out,
                   std::vector<std::string>* problems);

}  // namespace linkfit::kube::json
