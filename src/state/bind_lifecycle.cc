#include "linkfit/state/bind_lifecycle.h"

#include <optional>
#include <string>

namespace linkfit::state {
namespace {

using enum BindStage;
using enum BindEvent;

constexpr BindStep Step(BindStage stage, BindEffect effect, std::string_view outcome) {
  return BindStep{stage, effect, outcome, false};
}

// The stages in which the watch can end a bind (from kAssumed: another writer was first).
constexpr bool IsWatched(BindStage from) {
  return from == kAssumed || from == kWriting || from == kUnknown || from == kAccepted;
}

// The watch counts a bind it ends before linkfit had the Binding's answer (`writing`: the label
// the answer would have counted) or before the settler read the pod; an accepted bind was
// counted when it was accepted, and one not written yet is not linkfit's to count.
constexpr std::string_view WatchOutcome(BindStage from, std::string_view writing) {
  return from == kWriting ? writing : from == kUnknown ? "settled" : "";
}

// The diagram of bind_lifecycle.h, a case each; nullopt where it draws no arrow.
std::optional<BindStep> Arrow(BindStage from, BindEvent event) {
  constexpr BindEffect kNone = BindEffect::kNone;
  constexpr BindEffect kConfirm = BindEffect::kConfirm;
  constexpr BindEffect kForget = BindEffect::kForget;
  constexpr BindEffect kRemove = BindEffect::kRemove;
  switch (event) {
    case kWrite:
      if (from == kAssumed) return Step(kWriting, kNone, "");
      break;
    case kRecordTookDevices:
      if (from == kAssumed || from == kWriting || from == kUnknown) {
        return Step(kForgotten, kForget, "displaced");
      }
      break;
    case kRecorded:
      if (from == kWriting) return Step(kConfirmed, kConfirm, "bound");
      break;
    case kCreated:
    case kConflictSameRecord:
      if (from == kWriting) return Step(kAccepted, kNone, "bound");
      break;
    case kConflictOtherRecord:
      // The pod store applies the API's record when it knows the pod (then this comes late);
      // otherwise linkfit's plan is not what the pod holds, and nothing is.
      if (from == kWriting) return Step(kReplaced, kForget, "replaced");
      break;
    case kLeaseRefused:
      if (from == kWriting) return Step(kForgotten, kForget, "held");
      break;
    case kRefused:
      if (from == kWriting) return Step(kForgotten, kForget, "rejected");
      break;
    case kNoAnswer:
      if (from == kWriting) return Step(kUnknown, kNone, "unknown");
      break;
    case kReadSameRecord:
      if (from == kUnknown) return Step(kAccepted, kNone, "settled");
      break;
    case kReadOtherRecord:
      if (from == kUnknown) return Step(kReplaced, kForget, "settled");
      break;
    case kReadNotBound:
      if (from == kUnknown) return Step(kForgotten, kForget, "settled");
      break;
    case kReadFailed:
      if (from == kUnknown) return Step(kUnknown, kNone, "");
      break;
    case kWatchBoundSameRecord:
      if (IsWatched(from)) return Step(kConfirmed, kConfirm, WatchOutcome(from, "bound"));
      break;
    case kWatchBoundOtherRecord:
      // The store that saw the other record applies it itself.
      if (IsWatched(from)) return Step(kReplaced, kNone, WatchOutcome(from, "replaced"));
      break;
    case kWatchDeleted:
      if (IsWatched(from)) return Step(kForgotten, kRemove, WatchOutcome(from, "rejected"));
      break;
  }
  return std::nullopt;
}

}  // namespace

Result<BindStep> NextBindStep(BindStage from, BindEvent event) {
  if (BindEnded(from)) return BindStep{from, BindEffect::kNone, "", true};
  if (auto step = Arrow(from, event)) return *step;
  return MakeError("bind event " + std::string(EventName(event)) + " cannot happen in stage " +
                   std::string(StageName(from)));
}

std::string_view StageName(BindStage stage) {
  switch (stage) {
    case kAssumed:
      return "assumed";
    case kWriting:
      return "writing";
    case kAccepted:
      return "accepted";
    case kUnknown:
      return "unknown";
    case kConfirmed:
      return "confirmed";
    case kReplaced:
      return "replaced";
    case kForgotten:
      return "forgotten";
  }
  return "?";
}

std::string_view EventName(BindEvent event) {
  switch (event) {
    case kWrite:
      return "write";
    case kRecordTookDevices:
      return "record-took-devices";
    case kRecorded:
      return "recorded";
    case kCreated:
      return "created";
    case kConflictSameRecord:
      return "conflict-same-record";
    case kConflictOtherRecord:
      return "conflict-other-record";
    case kLeaseRefused:
      return "lease-refused";
    case kRefused:
      return "refused";
    case kNoAnswer:
      return "no-answer";
    case kReadSameRecord:
      return "read-same-record";
    case kReadOtherRecord:
      return "read-other-record";
    case kReadNotBound:
      return "read-not-bound";
    case kReadFailed:
      return "read-failed";
    case kWatchBoundSameRecord:
      return "watch-bound-same-record";
    case kWatchBoundOtherRecord:
      return "watch-bound-other-record";
    case kWatchDeleted:
      return "watch-deleted";
  }
  return "?";
}

}  // namespace linkfit::state
