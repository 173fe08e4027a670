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

std::string DescribeDevices(const state::Assignment& a) {
  switch (a.kind) {
    case state::Assignment::Kind::kWhole:
      return "GPUs " + JoinInts(alloc::MaskToIndexes(a.gpus));
    case state::Assignment::Kind::kShared: {
      std::string out;
      for (const auto& slot : a.shares) {
        out += (out.empty() ? "" : ", ") + std::string("GPU ") + std::to_string(slot.gpu) + " (" +
               std::to_string(slot.milli) + "/1000)";
      }
      return out;
    }
    case state::Assignment::Kind::kMig: {
      std::string out;
      for (const auto& slot : a.mig) {
        out += (out.empty() ? "" : ", ") + std::string("GPU ") + std::to_string(slot.gpu) +
               " slice " + std::to_string(slot.instance.start);
      }
      return out;
    }
  }
  return "";
}

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

std::vector<kube::HostPriority> Extender::Prioritize(const kube::ExtenderArgs& args) const {
  const std::vector<std::uint32_t> scores = PrioritizeScores(args);
  std::vector<kube::HostPriority> priorities(scores.size());
  for (std::size_t i = 0; i < scores.size(); ++i) {
    priorities[i] = {args.node_names[i], scores[i]};
  }
  return priorities;
}

std::vector<std::uint32_t> Extender::PrioritizeScores(const kube::ExtenderArgs& args) const {
  std::optional<Scores> scores = PrioritizeNamesAsSent(args);
  if (scores) return std::move(scores->scores);
  return std::vector<std::uint32_t>(args.node_names.size());
}

std::optional<Extender::Scores> Extender::PrioritizeNamesAsSent(
    const kube::ExtenderArgs& args) const {
  const std::size_t n = args.node_names.size();
  std::optional<Scores> reply(Scores{std::vector<std::uint32_t>(n), false});
  std::vector<std::uint32_t>& scores = reply->scores;  // 0 for every name that is no candidate
  const auto request = ParseGpuRequest(args.pod, options_.defaults);
  if (!request) {
    const std::optional<bool> as_is = NamesWrittenAsIs(args, nullptr, nullptr, 0);
    if (!as_is) return std::nullopt;
    reply->names_escape_free = *as_is;
    return reply;
  }
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  FitOptions scoring_only = options_.fit;
  scoring_only.explain = false;  // prioritize never shows a reason
  const VerbCachePool::Lease cache = caches_->Acquire();
  cache->BeginCall(*snapshot, cache_);
  const std::string signature = RequestSignature(*request, scoring_only);
  FitTable& fits = cache->Fits(signature);
  fits.by_position.Reserve(snapshot->size());
  // In steady state, after the lookups, one loop answers every name: its kept fit, the
  // candidates counted by fit (what the scores' figures are made of) and its kept score, read
  // from the table of the last call's figures on the guess that they did not change (checked
  // below). Everything is 4 bytes a node by position, the loads overlapping.
  ScoreTable* const guess = cache->FindScores(fits.last_context);
  const FitRef* kept_fits = fits.by_position.data();
  std::size_t fit_positions = fits.by_position.positions();
  const KeptScore no_score;
  const KeptScore* const guessed_scores = guess != nullptr ? guess->by_position.data() : &no_score;
  const std::size_t guessed_positions = guess != nullptr ? guess->by_position.positions() : 0;
  // by_fit[0]: the names that are no candidate; by_fit[f + 1]: the candidates with fit f (a
  // small table, in cache; a count without a branch).
  std::vector<std::uint32_t> by_fit(fits.fits.size() + 1);
  const std::unique_ptr<std::uint32_t[]> positions(new std::uint32_t[n]);  // all written
  std::uint32_t* const answer = scores.data();
  std::uint32_t* const count = by_fit.data();
  std::uint32_t* const at = positions.get();
  std::size_t missing = 0;   // known names without a kept fit
  std::size_t unscored = 0;  // candidates without a guessed score
  const std::size_t unknown_names = LookUp(*snapshot, args.node_names, at);
  const std::optional<bool> as_is = NamesWrittenAsIs(args, snapshot.get(), at, unknown_names);
  if (!as_is) return std::nullopt;
  reply->names_escape_free = *as_is;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t position = at[i];
    const FitRef fit = position < fit_positions ? kept_fits[position] : FitRef();
    missing += fit.unknown();  // the unknown names are taken off below
    const bool candidate = fit.fits();
    ++count[candidate ? fit.index() + 1 : 0];
    // A name that is no candidate reads the first slot (in cache) rather than its own.
    const std::uint32_t slot = candidate ? position : 0;
    const KeptScore score = slot < guessed_positions ? guessed_scores[slot] : KeptScore();
    answer[i] = candidate && score.known() ? static_cast<std::uint32_t>(score.score()) : 0;
    unscored += (candidate && !score.known()) ? 1u : 0u;
  }
  missing -= unknown_names;
  if (missing > 0) {
    // Fits not kept yet; then the candidates are counted again.
    ComputeMissingFits(fits, *request, *snapshot, at, n, scoring_only);
    kept_fits = fits.by_position.data();
    fit_positions = fits.by_position.positions();
    by_fit.assign(fits.fits.size() + 1, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const FitRef fit = at[i] < fit_positions ? kept_fits[at[i]] : FitRef();
      ++by_fit[fit.fits() ? fit.index() + 1 : 0];
    }
  }
  // What every score depends on: the candidates' kinds and the quality of each distinct fit
  // among them. A fit is shared only by nodes of one kind, so each distinct fit's head (a few
  // hundred) is read once, rather than every candidate's kind number by its position. The best
  // ring and sum are maxima (of integers: the figures' doubles hold them exactly).
  ScoreInputs inputs{request->cpu_milli,
                     request->memory_bytes,
                     {},
                     {},
                     std::vector<std::uint32_t>(snapshot->kinds().size()),
                     snapshot->shared_kinds(),
                     pods_.demand().Shapes(),
                     pods_.demand().MigWeights()};
  for (std::size_t f = 0; f < fits.fits.size(); ++f) {
    if (by_fit[f + 1] == 0) continue;  // the terms of fits no candidate has are not read
    const FitTerms& terms = fits.terms[f];
    inputs.candidates_by_kind[terms.kind] += by_fit[f + 1];
    inputs.best.ring_mbps = std::max(inputs.best.ring_mbps, terms.ring_mbps);
    inputs.best.sum_mbps = std::max(inputs.best.sum_mbps, terms.sum_mbps);
    std::uint32_t& kept = inputs.kept_by_level[terms.keeper_gpus_broken];
    kept = std::max(kept, terms.ring_mbps + 1);
  }
  // Steady state: the last call's context, and every candidate's score guessed right.
  if (guess != nullptr && missing == 0 && unscored == 0 && inputs == fits.last_inputs) {
    return reply;
  }
  CandidateFigures figures(&snapshot->kinds());
  for (std::size_t kind = 0; kind < inputs.candidates_by_kind.size(); ++kind) {
    if (inputs.candidates_by_kind[kind] == 0) continue;
    figures.AddKind(static_cast<std::uint32_t>(kind), inputs.candidates_by_kind[kind]);
  }
  figures.AddQuality(inputs.best);  // the figures read the ring and sum
  for (std::size_t level = 0; level < inputs.kept_by_level.size(); ++level) {
    if (inputs.kept_by_level[level] != 0) {
      figures.AddKept(static_cast<int>(level), inputs.kept_by_level[level] - 1);
    }
  }
  const ShapeList& shapes = inputs.shapes;
  const MigProfileWeightsPtr& mig_weights = inputs.mig_weights;
  std::vector<Candidate> to_score;
  CandidateScorer scorer(*request, to_score, *shapes, options_.weights, options_.score_range,
                         mig_weights, std::move(figures));
  std::string context = ScoreContext(signature, *request, scorer.figures(), shapes, mig_weights);
  ScoreTable* table = guess;
  if (guess == nullptr || context != fits.last_context) {
    table = &cache->Scores(context, shapes, mig_weights);  // may drop `guess`'s table
    fits.last_context = std::move(context);
  }
  fits.last_inputs = inputs;  // (a copy: the scorer reads the shapes `inputs` holds)
  table->by_position.Reserve(snapshot->size());
  if (table == guess && missing == 0 && unscored == 0) return reply;
  // Some candidate has no score in the table of this call's figures (none in steady state):
  // every name is answered again from that table, and the candidates without a kept score are
  // listed for the scorer (it reads its list only when scoring, so the list may grow after the
  // scorer is made).
  const KeptScore* const kept_scores = table->by_position.data();
  const std::size_t score_positions = table->by_position.positions();
  std::vector<std::uint32_t> to_score_index;  // each one's index in the request
  for (std::size_t i = 0; i < n; ++i) {
    const FitRef fit = at[i] < fit_positions ? kept_fits[at[i]] : FitRef();
    const KeptScore score =
        fit.fits() && at[i] < score_positions ? kept_scores[at[i]] : KeptScore();
    answer[i] = score.known() ? static_cast<std::uint32_t>(score.score()) : 0;
    if (fit.fits() && !score.known()) {
      to_score.emplace_back(nullptr, fits[fit].fit);
      to_score_index.push_back(static_cast<std::uint32_t>(i));
    }
  }
  // Scoring reads the node's own state, a miss per node that dominated prioritize when no score
  // is kept (a new CPU request, new shapes): each node is loaded a few candidates ahead.
  for (std::size_t c = 0; c < to_score.size(); ++c) {
    if (c + 16 < to_score.size()) snapshot->PrefetchNodeAt(at[to_score_index[c + 16]]);
    if (c + 8 < to_score.size()) __builtin_prefetch(snapshot->NodeAt(at[to_score_index[c + 8]]));
    const std::uint32_t position = at[to_score_index[c]];
    to_score[c].node = snapshot->NodeAt(position);
    const std::int64_t score = scorer.Score(c);
    table->by_position.Insert(position, KeptScore(score));
    answer[to_score_index[c]] = static_cast<std::uint32_t>(score);
  }
  return reply;
}

namespace {

std::string PodKeyOf(const BindTarget& target) {
  return target.pod_namespace + "/" + target.pod_name;
}

// Bind's answer (empty: bound) once the lifecycle took `step` on the Binder's `reply`.
std::string BindAnswer(const BindTarget& target, const BindReply& reply,
                       const Result<state::BindStep>& step) {
  const std::string what = "bind of " + PodKeyOf(target) + " to " + target.node;
  if (!step) {
    log::Error(what + ": " + step.error().message);
    return what + " lost track of its own state: " + step.error().message;
  }
  switch (step->stage) {
    case state::BindStage::kAccepted:
    case state::BindStage::kConfirmed:
    case state::BindStage::kReplaced:
      if (reply.event == state::BindEvent::kConflictOtherRecord)
        log::Warning(what + ": " + reply.detail);
      // Bound where kube-scheduler asked is a success, whatever devices the record names; bound
      // elsewhere (the API's object may have ended the bind first) is not.
      return reply.bound_node.empty() || reply.bound_node == target.node ? "" : reply.detail;
    case state::BindStage::kUnknown:
      log::Warning(what +
                   ": outcome unknown, devices stay reserved until the API server settles it: " +
                   reply.detail);
      return "the outcome of binding pod " + PodKeyOf(target) + " to " + target.node +
             " is unknown (" + reply.detail +
             "); its devices stay reserved until the API server's state settles it";
    case state::BindStage::kForgotten:
      break;
    case state::BindStage::kAssumed:
    case state::BindStage::kWriting:
      return what + ": the binder answered " + std::string(state::EventName(reply.event)) +
             ", which does not end a write";
  }
  const std::string why =
      reply.detail.empty() ? "the pod is gone or its devices were taken meanwhile" : reply.detail;
  log::Warning(what + " failed, devices released: " + why);
  return why;
}

}  // namespace

std::string Extender::Bind(const kube::BindingArgs& args) {
  const BindTarget target{args.pod_name, args.pod_namespace, args.pod_uid, args.node};
  // A repeated bind of a pod already on `args.node` is a success once the first bind is
  // recorded. While the first is still in the binder its outcome is unknown (it may fail and be
  // forgotten), so a repeat must not claim success; kube-scheduler retries.
  const auto repeated = [&]() -> std::string {
    if (cache_.Phase(args.pod_uid) == state::PodPhase::kAdded) return "";
    if (cache_.BindDone(args.pod_uid)) return "";
    return "a bind of pod " + args.pod_namespace + "/" + args.pod_name + " to " + args.node +
           " is still in progress";
  };
  const std::optional<KnownPod> pending =
      pods_.ResolveForBind(args.pod_namespace, args.pod_name, args.pod_uid);
  if (!pending) {
    if (const auto existing = cache_.Find(args.pod_uid)) {
      return existing->node == args.node
                 ? repeated()
                 : "pod " + args.pod_uid + " is already bound to node " + existing->node;
    }
    return "linkfit has not seen pod " + args.pod_namespace + "/" + args.pod_name + " (" +
           args.pod_uid + ") " + pods_.where_pods_are_seen() + "; cannot bind it";
  }
  const bool gpu_less = pending->request.kind == GpuRequest::Kind::kNone;
  if (gpu_less && cache_.Snapshot()->Find(args.node) == nullptr) {
    // A pod without GPUs on a node linkfit does not model: nothing to count, so the lifecycle's
    // step is looked up here rather than carried out on the cache.
    const BindReply reply = binder_.Bind(BindRequest{target, {}, nullptr, nullptr});
    const Result<state::BindStep> step =
        state::NextBindStep(state::BindStage::kWriting, reply.event);
    if (step && !step->outcome.empty()) metrics_.CountBindOutcome(step->outcome);
    return BindAnswer(target, reply, step);
  }
  // A pod without GPUs is still recorded (an assignment holding no GPU) so that its CPU and
  // memory count against the node when scoring; it never fails for lack of them.
  state::NodeInfoPtr placed_on;
  auto assumed = cache_.Assume(
      args.pod_uid, args.node, [&](const state::NodeState& node) -> Result<state::Assignment> {
        state::Assignment assignment;
        if (gpu_less) {
          assignment.pod_uid = args.pod_uid;
          assignment.node = node.name();
        } else {
          NodeFit fit = FitOnNode(pending->request, node, options_.fit);
          if (!fit.fits) {
            return MakeError("pod no longer fits on " + args.node + ": " + fit.reason);
          }
          assignment = std::move(fit.assignment);
        }
        assignment.pod_namespace = args.pod_namespace;
        assignment.pod_name = args.pod_name;
        assignment.cpu_milli = pending->request.cpu_milli;
        assignment.memory_bytes = pending->request.memory_bytes;
        placed_on = node.info_ptr();
        return assignment;
      });
  if (!assumed) return assumed.error().message;
  if (assumed->already) return repeated();
  if (auto writing = cache_.Advance(args.pod_uid, state::BindEvent::kWrite);
      !writing || writing->late) {
    // The bind ended before it was written: the watch showed the pod bound (by an earlier
    // write), or a committed record took the devices.
    if (const auto bound = cache_.Find(args.pod_uid); bound && writing) {
      return bound->node == args.node
                 ? ""
                 : "pod " + args.pod_uid + " is already bound to node " + bound->node;
    }
    return "the devices planned for pod " + PodKeyOf(target) +
           " were taken by a pod whose committed record names them; not sent";
  }
  const BindReply reply = binder_.Bind(BindRequest{target, std::move(assumed->assignment),
                                                   std::move(placed_on), pending->containers});
  return BindAnswer(target, reply, cache_.Advance(args.pod_uid, reply.event));
}

std::vector<kube::NodeVictims> Extender::Preempt(const kube::PreemptionArgs& args) const {
  const std::vector<kube::NodeVictims>& candidates =
      args.meta_victims_given ? args.node_meta_victims : args.node_victims;
  std::vector<kube::NodeVictims> kept;
  const auto request = ParseGpuRequest(args.pod, options_.defaults);
  if (!request) {
    return kept;
  }
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  for (const kube::NodeVictims& victims : candidates) {
    if (victims.pods.empty()) continue;  // never keep a node without victims
    if (request->kind == GpuRequest::Kind::kNone) {
      kept.push_back(victims);
      continue;
    }
    const state::NodeState* node = snapshot->Find(victims.node);
    if (node == nullptr) continue;
    state::NodeStatePtr freed = std::make_shared<state::NodeState>(*node);
    for (const kube::Victim& victim : victims.pods) freed = freed->Remove(victim.uid);
    if (FitOnNode(*request, *freed, options_.fit).fits) kept.push_back(victims);
  }
  return kept;
}

std::string Extender::WholeMachineLoss(const state::NodeState& node, const NodeFit& fit,
                                       const std::vector<NodeFit>& fits,
                                       const state::Snapshot& snapshot, bool ring_decides) const {
  const int level = fit.keeper_gpus_broken;
  std::string what = "an intact NVLink island (" + std::to_string(level) + " free GPUs)";
  if (!fit.assignment.mig.empty()) {
    what = "a MIG GPU whose slices are all free (the largest MIG profile)";
  } else if (level == node.gpu_count()) {
    what = "an idle whole machine (" + std::to_string(level) + " GPUs)";
  }
  // The first node that breaks less and serves the pod as well: the one the rule keeps to.
  std::string keeper;
  for (std::size_t n = 0; n < fits.size() && keeper.empty(); ++n) {
    const NodeFit& other = fits[n];
    if (other.fits && other.keeper_gpus_broken < level &&
        (!ring_decides || other.quality.ring_mbps >= fit.quality.ring_mbps)) {
      keeper = snapshot.nodes()[n]->name();
    }
  }
  const auto points = std::lround(options_.weights.whole_machine_penalty * options_.score_range);
  return "loses " + std::to_string(points) + " of " + std::to_string(options_.score_range) +
         " points: it would break " + what + " while " + keeper + " serves the pod " +
         (ring_decides ? "with a ring as fast" : "without breaking one") +
         " (policy.whole_machines: " + std::string(ToString(options_.weights.whole_machines)) + ")";
}

state::RemoveOutcome Extender::Release(const std::string& pod_uid) {
  const state::RemoveOutcome outcome = cache_.RemoveBound(pod_uid);
  if (outcome == state::RemoveOutcome::kRemoved) binder_.Released(pod_uid);
  // A pod released without devices (never bound) leaves as well; one whose bind is in flight
  // stays.
  if (outcome != state::RemoveOutcome::kBindInFlight) pods_.PodLeft(pod_uid);
  return outcome;
}

std::vector<std::string> Extender::Explain(const kube::PodView& pod) const {
  std::vector<std::string> lines;
  const auto request = ParseGpuRequest(pod, options_.defaults);
  if (!request) {
    lines.push_back("pod cannot be placed anywhere: " + request.error().message);
    return lines;
  }
  lines.push_back("pod " + pod.pod_namespace + "/" + pod.name + " asks for " + request->Describe());
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  std::vector<NodeFit> fits;
  fits.reserve(snapshot->nodes().size());
  KeptAlternatives kept;
  for (const state::NodeStatePtr& node : snapshot->nodes()) {
    const NodeFit& fit = fits.emplace_back(FitOnNode(*request, *node, options_.fit));
    if (fit.fits) kept.Add(fit.keeper_gpus_broken, fit.quality.ring_mbps);
  }
  const KeptAlternatives::Rings below = kept.Below();
  const WholeMachinePolicy policy = options_.weights.whole_machines;
  const bool ring_decides = RingDecides(*request, policy);
  for (std::size_t n = 0; n < fits.size(); ++n) {
    const state::NodeState& node = *snapshot->nodes()[n];
    const NodeFit& fit = fits[n];
    std::string line = node.name() + ": ";
    if (fit.fits) {
      line += "fits on " + DescribeDevices(fit.assignment);
      if (fit.quality.ring_mbps > 0) {
        line += " (ring " + std::to_string(fit.quality.ring_mbps / 1000) + " GB/s)";
      }
      if (!fit.reason.empty()) line += "; preferred closeness missed: " + fit.reason;
      if (policy != WholeMachinePolicy::kOff &&
          LosesWholeMachinePoints(fit.keeper_gpus_broken, fit.quality.ring_mbps, below,
                                  ring_decides)) {
        line += "; " + WholeMachineLoss(node, fit, fits, *snapshot, ring_decides);
      }
    } else {
      line += std::string(fit.unresolvable ? "never fits: " : "does not fit now: ") + fit.reason;
    }
    lines.push_back(std::move(line));
  }
  if (const auto& problems = snapshot->problems()) {
    for (const auto& [name, problem] : *problems)
      lines.push_back(name + ": never fits: " + problem);
  }
  return lines;
}

}  // namespace linkfit::extender
