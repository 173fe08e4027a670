#pragma once

// The life of one pod through bind, in one table. Whoever learns something about a bind
// (Extender::Bind from the Binder's answer, ApiBinder's settler from reading the pod, the pod
// store from the watch or a committed record) turns it into a BindEvent and calls
// ClusterCache::Advance, which looks the step up here and carries out its effect atomically with
// the pod's stage. The transitions are nowhere else.
//
// The API's committed record is the truth; an assumption is only a promise.
//
//   Assumed --kWrite (handed to the Binder)--> Writing
//   Assumed, Writing, Unknown --kRecordTookDevices (a committed record names them)--> Forgotten
//
//   Writing --kRecorded (standalone: the state file has it) ---------------------> Confirmed
//           --kCreated (201) / kConflictSameRecord (409; the pod is bound here
//             with this very record) --------------------------------------------> Accepted
//           --kConflictOtherRecord (409; bound by an earlier write with another
//             plan, or elsewhere) -----------------------------------------------> Replaced
//           --kLeaseRefused (another replica binds) ----------------------------> Forgotten
//           --kRefused (other 4xx; 409 and the pod unbound; never sent) ---------> Forgotten
//           --kNoAnswer (5xx, 504, no reply after sending) ----------------------> Unknown
//   Unknown (once no Binding can land any more, the settler reads the pod)
//           --kReadSameRecord ---------------------------------------------------> Accepted
//           --kReadOtherRecord --------------------------------------------------> Replaced
//           --kReadNotBound (unbound, replaced by another pod, or gone) ---------> Forgotten
//           --kReadFailed (read again later; the Binding is never re-sent) ------> Unknown
//   Assumed, Writing, Unknown, Accepted (the pod watch, whenever it shows the pod first)
//           --kWatchBoundSameRecord ---------------------------------------------> Confirmed
//           --kWatchBoundOtherRecord (another record or node: the API's wins) ---> Replaced
//           --kWatchDeleted -----------------------------------------------------> Forgotten
//
// Confirmed, Replaced and Forgotten end the bind; from then on the pod store counts the pod from
// the API's object (a Replaced pod's record is applied by whoever read it). An event that
// arrives after the end (the watch was quicker than the Binding's reply) changes nothing. Any
// other pair is an error, not a silent change.
//
// Every step names the label it counts in linkfit_bind_outcomes_total (bound, replaced,
// rejected, held, displaced, unknown, settled), so that each bind counts once: a bind settled by
// the watch before its reply counts where the watch ended it.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <string_view>

#include "linkfit/common/result.h"

namespace linkfit::state {

enum class BindStage : std::uint8_t {
  kAssumed,    // devices reserved in the cache, nothing written
  kWriting,    // handed to the Binder
  kAccepted,   // the write was accepted; the watch has not shown the pod bound yet
  kUnknown,    // sent without an answer: settled by reading the pod, or by the watch
  kConfirmed,  // end: counted as bound with linkfit's record
  kReplaced,   // end: the API's own record of the pod counts
  kForgotten,  // end: the devices were released (also: a pod the cache does not hold)
};

enum class BindEvent : std::uint8_t {
  kWrite,
  kRecordTookDevices,
  kRecorded,
  kCreated,
  kConflictSameRecord,
  kConflictOtherRecord,
  kLeaseRefused,
  kRefused,
  kNoAnswer,
  kReadSameRecord,
  kReadOtherRecord,
  kReadNotBound,
  kReadFailed,
  kWatchBoundSameRecord,
  kWatchBoundOtherRecord,
  kWatchDeleted,
};

// What a step does to the pod in the ClusterCache.
enum class BindEffect : std::uint8_t {
  kNone,     // the stage changes only
  kConfirm,  // Assumed -> Added
  kForget,   // Assumed -> Initial, the devices released
  kRemove,   // the pod is gone: the devices released whatever its phase
};

struct BindStep {
  BindStage stage = BindStage::kForgotten;
  BindEffect effect = BindEffect::kNone;
  std::string_view outcome;  // the linkfit_bind_outcomes_total label, or empty
  bool late = false;         // the bind had already ended: nothing changed
};

constexpr bool BindEnded(BindStage stage) {
  return stage == BindStage::kConfirmed || stage == BindStage::kReplaced ||
         stage == BindStage::kForgotten;
}

// The step `event` leads to from `from`. From an ended stage: that stage, kNone, late. An error
// naming both when the pair is not in the diagram above.
Result<BindStep> NextBindStep(BindStage from, BindEvent event);

std::string_view StageName(BindStage stage);
std::string_view EventName(BindEvent event);

}  // namespace linkfit::state
