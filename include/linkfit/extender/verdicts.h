#pragma once

// What filter and prioritize are asked and what filter answers, in the extender's own terms: the
// candidate nodes of one call, each found in the snapshot the call reads, and a verdict for each
// (pass, or fail with a reason). The wire (wire/verb_calls.h) decodes a request into a VerbCall
// and writes the verdicts in the reply shape the request used; the extender knows nothing of
// JSON.
//
// Thread-safety: plain values; a FilterVerdicts is read by one thread at a time.

#include <cstddef>
#include <cstdint>
#include <forward_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/extender/gpu_request.h"
#include "linkfit/state/cluster_cache.h"

namespace linkfit::extender {

class VerbCache;
class VerbCachePool;

// One filter or prioritize call: the snapshot it reads (taken once, by the caller), the pod's
// request (parsed once, by the caller: Extender::ParseRequest) and the candidate names, each
// looked up in that snapshot. Everything is borrowed for the call.
struct VerbCall {
  const state::Snapshot& snapshot;
  const Result<GpuRequest>& request;
  // The candidates in request order (the names a reply writes, decoded).
  std::span<const std::string_view> names;
  // positions[i]: names[i]'s position in `snapshot`, or state::NameIndex::kNoPosition where
  // linkfit does not know it; `unknown` counts those.
  const std::uint32_t* positions = nullptr;
  std::size_t unknown = 0;
};

// Filter's verdict on every candidate of a VerbCall. Names that pass are marked by their index;
// known names that fail by their name's rank among the snapshot's names (state::Snapshot::Ranks:
// byte order, what a reply sorts failures by), each with how it fails; names linkfit does not
// know, which have no rank, are listed. The marks live in a cache the verdicts hold until they
// are destroyed (so that a call allocates none of them). Move-only.
class FilterVerdicts {
 public:
  // How a failing name fails: its index among the call's names, its reason's number in
  // reasons(), and whether it goes to FailedAndUnresolvableNodes (else FailedNodes).
  struct Failure {
    std::uint32_t index = 0;
    std::uint32_t reason = 0;
    bool unresolvable = false;
  };
  // The packed form of a Failure at a rank: bits 0-31 the index, 32-62 the reason, 63 set when
  // unresolvable. (A name sent twice has one rank: either index.)
  static constexpr std::uint64_t Pack(std::uint32_t index, std::uint32_t reason,
                                      bool unresolvable) {
    return std::uint64_t{index} | std::uint64_t{reason & 0x7FFFFFFFu} << 32 |
           std::uint64_t{unresolvable ? 1u : 0u} << 63;
  }
  static constexpr Failure Unpack(std::uint64_t packed) {
    return {static_cast<std::uint32_t>(packed),
            static_cast<std::uint32_t>(packed >> 32) & 0x7FFFFFFFu, (packed >> 63) != 0};
  }

  FilterVerdicts(FilterVerdicts&& other) noexcept;
  FilterVerdicts& operator=(FilterVerdicts&& other) = delete;
  FilterVerdicts(const FilterVerdicts&) = delete;
  FilterVerdicts& operator=(const FilterVerdicts&) = delete;
  ~FilterVerdicts();

  // Bit i % 64 of passing()[i / 64]: names[i] passes.
  std::span<const std::uint64_t> passing() const { return passing_; }
  // Bit r % 64 of failing()[r / 64]: the known name ranked r fails, as at_rank()[r] says
  // (Unpack). at_rank() is read only where a bit is set.
  std::span<const std::uint64_t> failing() const { return failing_; }
  const std::uint64_t* at_rank() const { return at_rank_; }
  // The failing names linkfit does not know (always unresolvable), in request order.
  std::span<const Failure> unranked() const { return unranked_; }
  // By number: the reasons failures name.
  std::span<const std::string_view> reasons() const { return reasons_; }

  // How many names pass, fail and fail for good (a name sent twice counted twice).
  std::size_t passed = 0;
  std::size_t failed = 0;
  std::size_t unresolvable = 0;

 private:
  friend class Extender;
  friend struct VerdictMarker;
  FilterVerdicts(VerbCachePool& pool, std::unique_ptr<VerbCache> cache);

  VerbCachePool* pool_;
  std::unique_ptr<VerbCache> cache_;  // where the marks and the kept reasons live
  std::span<const std::uint64_t> passing_;
  std::span<const std::uint64_t> failing_;
  const std::uint64_t* at_rank_ = nullptr;
  std::vector<Failure> unranked_;
  std::span<const std::string_view> reasons_;
  // Reasons the cache does not keep (a bad hint's, an unknown node's), and the list of every
  // reason's text when there are any.
  std::forward_list<std::string> own_texts_;  // stable; no allocation while empty
  std::vector<std::string_view> own_reasons_;
};

}  // namespace linkfit::extender
