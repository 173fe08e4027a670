#pragma once

// metav1.MicroTime: RFC 3339 in UTC with microseconds ("2026-11-28T09:58:01.123456Z"), the format
// of an Event's eventTime and a Lease's acquireTime/renewTime.
//
// Thread-safety: a pure function of the wall clock.

#include <string>

namespace linkfit::kube {

// The wall clock now, as a MicroTime. For people and tools reading the objects: linkfit never
// compares wall clocks of two machines (see cluster/binder_lease.h).
std::string MicroTimeNow();

}  // namespace linkfit::kube
