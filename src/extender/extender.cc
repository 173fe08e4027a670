#include "linkfit/extender/extender.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "extender/verb_cache.h"
#include "extender/verb_steps.h"
#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"

namespace linkfit::extender {
namespace {

constexpr const char* kUnknownNode =
    "node is unknown to linkfit (no GPU topology published for it)";

}  // namespace

Extender::Extender(state::ClusterCache& cache, ExtenderOptions options, Binder& binder,
                   PodSource& pods, MetricsSink& metrics)
    : cache_(cache),
      options_(std::move(options)),
      binder_(binder),
      pods_(pods),
      metrics_(metrics),
      caches_(std::make_unique<VerbCachePool>()) {}

Extender::~Extender() = default;

kube::FilterResult Extender::Filter(const kube::ExtenderArgs& args) const {
  std::optional<kube::FilterResult> result = FilterNamesAsSent(args);
  if (result) return std::move(*result);
  kube::FilterResult refused;
  refused.list = kube::NodeListKind::kNone;
  refused.error = "a node name holds a JSON escape that was not decoded";
  return refused;
}

std::optional<kube::FilterResult> Extender::FilterNamesAsSent(
    const kube::ExtenderArgs& args) const {
  kube::FilterResult result;
  result.list = kube::ReplyListFor(args);
  result.names_escape_free = args.node_names_escape_free;  // every name written is one of these
  // Room for every name either way: growing step by step copied each list about twice.
  if (result.list == kube::NodeListKind::kNames) {
    result.node_names.reserve(args.node_names.size());
  }
  const auto request = ParseGpuRequest(args.pod, options_.defaults);
  const auto pass = [&](std::size_t i) {
    if (result.list == kube::NodeListKind::kObjects) {
      result.nodes_json.push_back(args.nodes[i].raw_json);
    } else {
      result.node_names.push_back(args.node_names[i]);
    }
  };
  if (!request || request->kind == GpuRequest::Kind::kNone) {  // every name is written back
    const std::optional<bool> as_is = NamesWrittenAsIs(args, nullptr, nullptr, 0);
    if (!as_is) return std::nullopt;
    result.names_escape_free = *as_is;
  }
  if (!request) {
    // A bad hint is never ignored: nothing passes, every node says why.
    const std::string_view reason = result.Keep(request.error().message);
    for (std::string_view name : args.node_names) {
      result.failed_and_unresolvable_nodes.push_back({name, reason});
    }
    metrics_.CountFilterNodes(0, 0, args.node_names.size());
    return result;
  }
  if (request->kind == GpuRequest::Kind::kNone) {  // no GPUs: nothing for linkfit to refuse
    for (std::size_t i = 0; i < args.node_names.size(); ++i) pass(i);
    metrics_.CountFilterNodes(args.node_names.size(), 0, 0);
    return result;
  }
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  std::uint64_t failed = 0;
  std::uint64_t unresolvable = 0;
  const std::size_t n = args.node_names.size();
  const std::unique_ptr<std::uint32_t[]> positions(new std::uint32_t[n]);  // all written
  std::uint32_t* const at = positions.get();
  const std::size_t unknown_names = LookUp(*snapshot, args.node_names, at);
  const std::optional<bool> as_is = NamesWrittenAsIs(args, snapshot.get(), at, unknown_names);
  if (!as_is) return std::nullopt;
  result.names_escape_free = *as_is;
  const VerbCachePool::Lease cache = caches_->Acquire();
  const std::uint64_t call = cache->BeginCall(*snapshot, cache_);
  FitTable& fits = cache->Fits(RequestSignature(*request, options_.fit));
  fits.by_position.Reserve(snapshot->size());
  // Which names pass, each by its kept fit (4 bytes a node by position, the loads overlapping),
  // without a branch per name (pass or fail follows no pattern a predictor could learn): passing
  // indexes fill `order` from the front, failing ones from the back.
  const std::unique_ptr<std::uint32_t[]> order(new std::uint32_t[n]);  // all written
  std::size_t passing = 0;
  std::size_t failing = n;
  std::size_t never = 0;  // failing names that go to FailedAndUnresolvableNodes
  const auto sort_out = [&]() {
    const FitRef* const kept = fits.by_position.data();
    const std::size_t kept_positions = fits.by_position.positions();
    std::size_t unknown = 0;  // names without a kept fit, known to linkfit or not
    passing = 0;
    never = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t position = at[i];
      const FitRef fit = position < kept_positions ? kept[position] : FitRef();
      const std::size_t passes = fit.fits() ? 1 : 0;
      order[passing] = static_cast<std::uint32_t>(i);
      order[n - 1 - (i - passing)] = static_cast<std::uint32_t>(i);  // i - passing fail before it
      passing += passes;
      unknown += fit.unknown();
      never += fit.never();
    }
    failing = passing;
    return unknown - unknown_names;  // the known names whose fit is not kept yet
  };
  if (sort_out() > 0) {  // fits not kept yet: computed, then the names sorted out again
    ComputeMissingFits(fits, *request, *snapshot, at, n, options_.fit);
    sort_out();
  }
  for (std::size_t k = 0; k < passing; ++k) pass(order[k]);
  // The reply lists failing nodes in name order (as Go writes a map); each known one carries its
  // name's rank, read only for the names that fail.
  const std::uint32_t* ranks = failing < n ? snapshot->Ranks().data() : nullptr;
  const FitRef* const kept = fits.by_position.data();
  const std::size_t kept_positions = fits.by_position.positions();
  // Both lists sized once and written by index (a push_back per failure was a call each).
  const std::size_t fails_now = n - failing - never;
  std::vector<kube::NodeFailure>& now = result.failed_nodes;
  std::vector<kube::NodeFailure>& ever = result.failed_and_unresolvable_nodes;
  now.resize(fails_now);
  ever.resize(never);
  for (std::size_t k = n; k-- > failing;) {  // in request order
    const std::size_t i = order[k];
    const std::uint32_t position = at[i];
    const FitRef fit = position < kept_positions ? kept[position] : FitRef();
    if (!fit.known()) {
      const std::string* problem = snapshot->Problem(args.node_names[i]);
      ever[unresolvable++] = {args.node_names[i],
                              problem != nullptr ? result.Keep(*problem) : kUnknownNode};
      continue;
    }
    KeptReason& reason = *fits[fit].reason;
    if (reason.kept_call != call) {  // each reason is kept once per reply
      reason.kept = result.Keep(reason.text);
      reason.kept_call = call;
    }
    if (fit.unresolvable()) {
      ever[unresolvable++] = {args.node_names[i], reason.kept, ranks[position]};
    } else {
      now[failed++] = {args.node_names[i], reason.kept, ranks[position]};
    }
  }
  metrics_.CountFilterNodes(args.node_names.size() - failed - unresolvable, failed, unresolvable);
  return result;
}

}  // namespace linkfit::extender
