// Extender prioritize (extender.h): the scores of the nodes where the pod fits.

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

// What every score depends on: the candidates' kinds and the quality of each distinct fit among
// them (`by_fit[f + 1]`: the candidates with fit f). A fit is shared only by nodes of one kind, so
// each distinct fit's head (a few hundred) is read once, rather than every candidate's kind number
// by its position. The best ring and sum are maxima (of integers: the figures' doubles hold them
// exactly).
ScoreInputs InputsOf(const GpuRequest& request, const state::Snapshot& snapshot,
                     const FitTable& fits, const std::vector<std::uint32_t>& by_fit,
                     const Demand& demand) {
  ScoreInputs inputs{request.cpu_milli,
                     request.memory_bytes,
                     {},
                     0,
                     {},
                     std::vector<std::uint32_t>(snapshot.kinds().size()),
                     snapshot.shared_kinds(),
                     demand.Shapes(),
                     demand.MigWeights()};
  for (std::size_t f = 0; f < fits.fits.size(); ++f) {
    if (by_fit[f + 1] == 0) continue;  // the terms of fits no candidate has are not read
    const FitTerms& terms = fits.terms[f];
    inputs.candidates_by_kind[terms.kind] += by_fit[f + 1];
    inputs.best.ring_mbps = std::max(inputs.best.ring_mbps, terms.ring_mbps);
    inputs.best.sum_mbps = std::max(inputs.best.sum_mbps, terms.sum_mbps);
    std::uint32_t& kept = inputs.kept_by_level[terms.keeper_gpus_broken];
    kept = std::max(
        kept, RingRank(terms.ring_mbps, terms.ring_all_nvlink != 0, terms.nics_aligned != 0) + 1);
    if (terms.ring_all_nvlink != 0) {
      inputs.best_nvlink_ring = std::max(inputs.best_nvlink_ring, terms.ring_mbps);
    }
    inputs.nics_aligned = inputs.nics_aligned || terms.nics_aligned != 0;
  }
  return inputs;
}

// The cluster-wide figures the scores are relative to.
CandidateFigures FiguresOf(const ScoreInputs& inputs, const state::Snapshot& snapshot) {
  CandidateFigures figures(&snapshot.kinds());
  for (std::size_t kind = 0; kind < inputs.candidates_by_kind.size(); ++kind) {
    if (inputs.candidates_by_kind[kind] == 0) continue;
    figures.AddKind(static_cast<std::uint32_t>(kind), inputs.candidates_by_kind[kind]);
  }
  figures.AddQuality(inputs.best);  // the figures read the ring and sum
  figures.AddNvlinkRing(inputs.best_nvlink_ring);
  if (inputs.nics_aligned) figures.AddNicsAligned();
  for (std::size_t level = 0; level < inputs.kept_by_level.size(); ++level) {
    if (inputs.kept_by_level[level] != 0) {
      figures.AddKept(static_cast<int>(level), inputs.kept_by_level[level] - 1);
    }
  }
  return figures;
}

// Some candidate has no score in `table` (the table of this call's figures; none in steady
// state): every name is answered again from it, and the candidates without a kept score are
// listed for the scorer (it reads its list `to_score` only when scoring, so the list may grow
// after the scorer is made) and scored.
void AnswerAndScore(const state::Snapshot& snapshot, const FitTable& fits, ScoreTable& table,
                    const std::uint32_t* at, CandidateScorer& scorer,
                    std::vector<Candidate>& to_score, std::vector<std::uint32_t>& scores) {
  const std::size_t n = scores.size();
  std::uint32_t* const answer = scores.data();
  const FitRef* const kept_fits = fits.by_position.data();
  const std::size_t fit_positions = fits.by_position.positions();
  const KeptScore* const kept_scores = table.by_position.data();
  const std::size_t score_positions = table.by_position.positions();
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
    if (c + 16 < to_score.size()) snapshot.PrefetchNodeAt(at[to_score_index[c + 16]]);
    if (c + 8 < to_score.size()) __builtin_prefetch(snapshot.NodeAt(at[to_score_index[c + 8]]));
    const std::uint32_t position = at[to_score_index[c]];
    to_score[c].node = snapshot.NodeAt(position);
    const std::int64_t score = scorer.Score(c);
    table.by_position.Insert(position, KeptScore(score));
    answer[to_score_index[c]] = static_cast<std::uint32_t>(score);
  }
}

}  // namespace

std::vector<std::uint32_t> Extender::Prioritize(const VerbCall& call) const {
  const std::size_t n = call.names.size();
  std::vector<std::uint32_t> scores(n);  // 0 for every name that is no candidate
  if (!call.request) return scores;
  const GpuRequest* const request = &*call.request;
  const state::Snapshot* const snapshot = &call.snapshot;
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
  std::uint32_t* const answer = scores.data();
  std::uint32_t* const count = by_fit.data();
  const std::uint32_t* const at = call.positions;
  std::size_t missing = 0;   // known names without a kept fit
  std::size_t unscored = 0;  // candidates without a guessed score
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
  missing -= call.unknown;
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
  const ScoreInputs inputs = InputsOf(*request, *snapshot, fits, by_fit, pods_.demand());
  // Steady state: the last call's context, and every candidate's score guessed right.
  if (guess != nullptr && missing == 0 && unscored == 0 && inputs == fits.last_inputs) {
    return scores;
  }
  const ShapeList& shapes = inputs.shapes;
  const MigProfileWeightsPtr& mig_weights = inputs.mig_weights;
  std::vector<Candidate> to_score;
  CandidateScorer scorer(*request, to_score, *shapes, options_.weights, options_.score_range,
                         mig_weights, FiguresOf(inputs, *snapshot));
  std::string context = ScoreContext(signature, *request, scorer.figures(), shapes, mig_weights);
  ScoreTable* table = guess;
  if (guess == nullptr || context != fits.last_context) {
    table = &cache->Scores(context, shapes, mig_weights);  // may drop `guess`'s table
    fits.last_context = std::move(context);
  }
  fits.last_inputs = inputs;  // (a copy: the scorer reads the shapes `inputs` holds)
  table->by_position.Reserve(snapshot->size());
  if (table == guess && missing == 0 && unscored == 0) return scores;
  AnswerAndScore(*snapshot, fits, *table, call.positions, scorer, to_score, scores);
  return scores;
}

}  // namespace linkfit::extender
