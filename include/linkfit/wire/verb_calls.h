#pragma once

// Filter and prioritize between the wire and the extender: a decoded request's names found in the
// call's one snapshot (Candidates), the extender's verdicts written in the reply shape the request
// used, and the whole verb in process for callers that hold decoded arguments (tests, benches).
//
// Thread-safety: free functions on the caller's values; safe to call concurrently.

#include <cstddef>
#include <cstdint>
#include <forward_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/extender/extender.h"
#include "linkfit/wire/codec.h"

namespace linkfit::wire {

// Whether every node name `snapshot` knows is written in a reply as it is (none holds a byte the
// JSON writer escapes or checks; a Kubernetes node name, a DNS subdomain, never does): the names
// of a request are then read as sent, and those found in the snapshot trusted by their bytes.
bool KnownNamesWrittenAsIs(const state::Snapshot& snapshot);

// A request's candidate names as the extender reads them: decoded, each with its position in the
// call's snapshot. Move-only; views `args`' names, which must outlive it.
class Candidates {
 public:
  // Looks every name of `args` up in `snapshot`. Names read as sent (NameCheck::kByCaller)
  // are trusted by their bytes where linkfit knows them (while every known name is written as it
  // is); the others are looked at, and one that holds an escape is decoded on its own and looked
  // up again. An error only for a name that is not a JSON string's content (never, for arguments
  // the decoder gave).
  static Result<Candidates> Find(const state::Snapshot& snapshot, const ExtenderArgs& args);

  // The call to make of them.
  extender::VerbCall Call(const state::Snapshot& snapshot,
                          const Result<extender::GpuRequest>& request) const {
    return {snapshot, request, names_, positions_.get(), unknown_};
  }
  std::span<const std::string_view> names() const { return names_; }
  // Whether a reply may write every name as it is (no escape needed).
  bool names_escape_free() const { return names_escape_free_; }

 private:
  std::span<const std::string_view> names_;
  std::unique_ptr<std::uint32_t[]> positions_;
  std::size_t unknown_ = 0;
  bool names_escape_free_ = false;
  std::vector<std::string_view> decoded_names_;  // when a name needed decoding: every name
  std::forward_list<std::string> decoded_;       // stable; no allocation while empty
};

// Filter's reply: `verdicts` on `candidates` of `args`, in the reply shape the request used
// (ReplyListFor). A cache-mode request whose every name linkfit knows is written from the
// marks without lists (EncodeRankedFilterReply); any other from FilterResultOf's lists. The
// bytes are the same either way.
std::string EncodeFilterVerdicts(const ExtenderArgs& args, const Candidates& candidates,
                                 const extender::FilterVerdicts& verdicts);
// The verdicts as lists (the reasons, and the names decoded by `candidates`, kept in the result).
FilterResult FilterResultOf(const ExtenderArgs& args, const Candidates& candidates,
                            const extender::FilterVerdicts& verdicts);

// Filter and prioritize on arguments decoded in `snapshot`, the call's one snapshot (which must
// outlive the result, whose verdicts may view it): the candidates found, the pod parsed once and,
// for filter, shown to `memo` where one is given (standalone mode; PodMemo::Seen, so a retried
// request changes nothing), and the extender's verdicts. An error only where Candidates::Find
// gives one. The handler and the in-process calls below are these and an encoding.
struct FilterDecision {
  Candidates candidates;
  extender::FilterVerdicts verdicts;
};
Result<FilterDecision> DecideFilter(const extender::Extender& extender,
                                    const state::Snapshot& snapshot, const ExtenderArgs& args,
                                    extender::PodMemo* memo = nullptr);
struct PrioritizeDecision {
  Candidates candidates;
  std::vector<std::uint32_t> scores;  // scores[i] is candidates.names()[i]'s
};
Result<PrioritizeDecision> DecidePrioritize(const extender::Extender& extender,
                                            const state::Snapshot& snapshot,
                                            const ExtenderArgs& args);

// The verbs in process on decoded arguments, on the extender's current snapshot (a name that
// cannot be decoded makes an error result, and zero scores).
FilterResult RunFilter(const extender::Extender& extender, const ExtenderArgs& args);
std::string RunFilterReply(const extender::Extender& extender, const ExtenderArgs& args);
// scores[i] is args.node_names[i]'s.
std::vector<std::uint32_t> PrioritizeScores(const extender::Extender& extender,
                                            const ExtenderArgs& args);
std::vector<HostPriority> Priorities(const extender::Extender& extender, const ExtenderArgs& args);

}  // namespace linkfit::wire
