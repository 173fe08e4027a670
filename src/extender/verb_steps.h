#pragma once

// The steps filter and prioritize share (extender.cc, ranked_filter.cc): looking up a request's
// names, computing the fits a cache does not keep yet, and deciding whether a reply may write
// the names as they were sent.
//
// Thread-safety: each works on the caller's tables alone (a leased VerbCache's).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "extender/verb_cache.h"
#include "linkfit/extender/gpu_request.h"
#include "linkfit/kube/codec.h"
#include "linkfit/state/cluster_cache.h"

namespace linkfit::extender {

// Writes each name's position to at[i] (kNoPosition where linkfit does not know it) and returns
// how many names are unknown. Both verbs read their tables by position in a loop of their own
// afterwards: in the lookups' loop each of those loads would wait for its name's lookup.
std::size_t LookUp(const state::Snapshot& snapshot, const std::vector<std::string_view>& names,
                   std::uint32_t* at);

// Computes the fit of every node of `positions` (a request's names, looked up: kNoPosition where
// linkfit does not know one) that `table` keeps none for yet, in the request's order: none in
// steady state; the first call for a request, or the nodes that changed since the last call.
void ComputeMissingFits(FitTable& table, const GpuRequest& request, const state::Snapshot& snapshot,
                        const std::uint32_t* positions, std::size_t n, const FitOptions& options);

// Whether a reply may write every name of `args` as it is (kube::FilterResult::names_escape_free),
// or nullopt when a name read as sent (kube::NameCheck::kByCaller) holds an escape and the request
// must be decoded with kAtDecode. A name linkfit knows (at[i], a position) is one of its own: its
// bytes are a known name's, written as they are while the snapshot says every name is. The
// others (every name, without `at`) are looked at here: none in the usual request.
std::optional<bool> NamesWrittenAsIs(const kube::ExtenderArgs& args,
                                     const state::Snapshot* snapshot, const std::uint32_t* at,
                                     std::size_t unknown_names);

}  // namespace linkfit::extender
