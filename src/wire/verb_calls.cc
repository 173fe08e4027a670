#include "linkfit/wire/verb_calls.h"

#include "linkfit/common/json_escape.h"

#include <utility>

#include "linkfit/common/bit_marks.h"

namespace linkfit::wire {

static_assert(extender::FilterVerdicts::Pack(7, 0x7FFFFFFFu, true) ==
                      RankedFilterReply::AtRank(7, 0x7FFFFFFFu, true) &&
                  extender::FilterVerdicts::Pack(UINT32_MAX, 3, false) ==
                      RankedFilterReply::AtRank(UINT32_MAX, 3, false),
              "the verdicts' marks are the ranked reply's");

bool KnownNamesWrittenAsIs(const state::Snapshot& snapshot) {
  return !snapshot.name_bytes().Intersects(json::kBytesTheWriterLooksAt);
}

Result<Candidates> Candidates::Find(const state::Snapshot& snapshot, const ExtenderArgs& args) {
  Candidates found;
  const std::size_t n = args.node_names.size();
  found.names_ = args.node_names;
  found.positions_.reset(new std::uint32_t[n]);  // all written
  std::uint32_t* const at = found.positions_.get();
  found.unknown_ = snapshot.ForEachPosition(
      args.node_names, [at](std::size_t i, std::uint32_t position) { at[i] = position; });
  if (!args.node_names_as_sent) {
    found.names_escape_free_ = args.node_names_escape_free;
    return found;
  }
  // A name linkfit knows is one of its own: its bytes are a known name's, written as they are
  // while the snapshot says every name is. The others are looked at: none in the usual request.
  const bool known_as_is = KnownNamesWrittenAsIs(snapshot);
  if (known_as_is && found.unknown_ == 0) {  // the usual request: nothing to look at
    found.names_escape_free_ = true;
    return found;
  }
  bool as_is = true;
  for (std::size_t i = 0; i < n; ++i) {
    if (known_as_is && at[i] != state::NameIndex::kNoPosition) continue;
    switch (CheckNameAsSent(args.node_names[i])) {
      case NameAsSent::kWrittenAsIs:
        break;
      case NameAsSent::kNeedsEscape:
        as_is = false;
        break;
      case NameAsSent::kNeedsDecoding: {
        auto decoded = DecodeNameAsSent(args.node_names[i], i);
        if (!decoded) return tl::unexpected(decoded.error());
        if (found.decoded_names_.empty()) {
          found.decoded_names_.assign(args.node_names.begin(), args.node_names.end());
          found.names_ = found.decoded_names_;
        }
        const std::string_view name = found.decoded_.emplace_front(std::move(*decoded));
        found.decoded_names_[i] = name;
        found.unknown_ -= at[i] == state::NameIndex::kNoPosition ? 1 : 0;
        at[i] = snapshot.PositionOf(name);
        found.unknown_ += at[i] == state::NameIndex::kNoPosition ? 1 : 0;
        as_is = as_is && CheckNameAsSent(name) == NameAsSent::kWrittenAsIs;
        break;
      }
    }
  }
  found.names_escape_free_ = as_is;
  return found;
}

FilterResult FilterResultOf(const ExtenderArgs& args, const Candidates& candidates,
                            const extender::FilterVerdicts& verdicts) {
  using Failure = extender::FilterVerdicts::Failure;
  FilterResult result;
  result.list = ReplyListFor(args);
  result.names_escape_free = candidates.names_escape_free();
  // Names decoded here live in `candidates`: the result keeps its own copies of them, so that it
  // may outlive the candidates (as RunFilter's result does).
  const std::span<const std::string_view> decoded = candidates.names();
  const bool names_decoded_here = decoded.data() != args.node_names.data();
  std::vector<std::string_view> names(decoded.begin(), decoded.end());
  if (names_decoded_here) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i].data() != args.node_names[i].data())
        names[i] = result.Keep(std::string(names[i]));
    }
  }
  ForEachMarked(verdicts.passing(), [&](std::size_t i) {
    if (result.list == NodeListKind::kObjects) {
      result.nodes_json.push_back(args.nodes[i].raw_json);
    } else {
      result.node_names.push_back(names[i]);
    }
  });
  // Each reason kept once, when a failure first names it.
  const std::span<const std::string_view> reasons = verdicts.reasons();
  std::vector<std::string_view> kept(reasons.size());
  std::vector<bool> is_kept(reasons.size());
  const auto keep = [&](std::uint32_t reason) {
    if (!is_kept[reason]) {
      kept[reason] = result.Keep(std::string(reasons[reason]));
      is_kept[reason] = true;
    }
    return kept[reason];
  };
  ForEachMarked(verdicts.failing(), [&](std::size_t rank) {
    const Failure failure = extender::FilterVerdicts::Unpack(verdicts.at_rank()[rank]);
    auto& map = failure.unresolvable ? result.failed_and_unresolvable_nodes : result.failed_nodes;
    map.push_back({names[failure.index], keep(failure.reason), static_cast<std::uint32_t>(rank)});
  });
  for (const Failure& failure : verdicts.unranked()) {
    result.failed_and_unresolvable_nodes.push_back({names[failure.index], keep(failure.reason)});
  }
  return result;
}

std::string EncodeFilterVerdicts(const ExtenderArgs& args, const Candidates& candidates,
                                 const extender::FilterVerdicts& verdicts) {
  if (ReplyListFor(args) != NodeListKind::kNames || candidates.names().empty() ||
      !verdicts.unranked().empty()) {
    return EncodeFilterResult(FilterResultOf(args, candidates, verdicts));
  }
  RankedFilterReply reply;
  reply.names = candidates.names();
  reply.names_escape_free = candidates.names_escape_free();
  reply.passing = verdicts.passing();
  reply.failing = verdicts.failing();
  reply.at_rank = verdicts.at_rank();
  reply.reasons = verdicts.reasons();
  return EncodeRankedFilterReply(reply);
}

Result<FilterDecision> DecideFilter(const extender::Extender& extender,
                                    const state::Snapshot& snapshot, const ExtenderArgs& args,
                                    extender::PodMemo* memo) {
  Result<Candidates> candidates = Candidates::Find(snapshot, args);
  if (!candidates) return tl::unexpected(candidates.error());
  const Result<extender::GpuRequest> request = extender.ParseRequest(args.pod);  // once
  if (memo != nullptr && request) memo->Seen(args.pod, *request);
  extender::FilterVerdicts verdicts = extender.Filter(candidates->Call(snapshot, request));
  return FilterDecision{std::move(*candidates), std::move(verdicts)};
}

Result<PrioritizeDecision> DecidePrioritize(const extender::Extender& extender,
                                            const state::Snapshot& snapshot,
                                            const ExtenderArgs& args) {
  Result<Candidates> candidates = Candidates::Find(snapshot, args);
  if (!candidates) return tl::unexpected(candidates.error());
  const Result<extender::GpuRequest> request = extender.ParseRequest(args.pod);
  std::vector<std::uint32_t> scores = extender.Prioritize(candidates->Call(snapshot, request));
  return PrioritizeDecision{std::move(*candidates), std::move(scores)};
}

FilterResult RunFilter(const extender::Extender& extender, const ExtenderArgs& args) {
  const state::SnapshotPtr snapshot = extender.cache().Snapshot();
  const Result<FilterDecision> decision = DecideFilter(extender, *snapshot, args);
  if (!decision) {
    FilterResult refused;
    refused.list = NodeListKind::kNone;
    refused.error = decision.error().message;
    return refused;
  }
  return FilterResultOf(args, decision->candidates, decision->verdicts);
}

std::string RunFilterReply(const extender::Extender& extender, const ExtenderArgs& args) {
  const state::SnapshotPtr snapshot = extender.cache().Snapshot();
  const Result<FilterDecision> decision = DecideFilter(extender, *snapshot, args);
  if (!decision) return EncodeFilterError(decision.error().message);
  return EncodeFilterVerdicts(args, decision->candidates, decision->verdicts);
}

std::vector<std::uint32_t> PrioritizeScores(const extender::Extender& extender,
                                            const ExtenderArgs& args) {
  const state::SnapshotPtr snapshot = extender.cache().Snapshot();
  Result<PrioritizeDecision> decision = DecidePrioritize(extender, *snapshot, args);
  if (!decision) return std::vector<std::uint32_t>(args.node_names.size());
  return std::move(decision->scores);
}

std::vector<HostPriority> Priorities(const extender::Extender& extender, const ExtenderArgs& args) {
  const std::vector<std::uint32_t> scores = PrioritizeScores(extender, args);
  std::vector<HostPriority> priorities(scores.size());
  for (std::size_t i = 0; i < scores.size(); ++i) {
    priorities[i] = {args.node_names[i], scores[i]};
  }
  return priorities;
}

}  // namespace linkfit::wire
