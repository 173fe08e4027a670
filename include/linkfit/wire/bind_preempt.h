#pragma once

// Bind and preempt between the wire and the extender: the decoded arguments in the extender's
// terms, and preempt's answer as the reply lists it.
//
// Thread-safety: free functions on the caller's values; safe to call concurrently.

#include <vector>

#include "linkfit/extender/extender.h"
#include "linkfit/wire/codec.h"

namespace linkfit::wire {

// The pod and node of a bind request.
extender::BindTarget BindTargetOf(const BindingArgs& args);

// Preempt on decoded arguments: the nodes the extender keeps of those the request offered (its
// NodeNameToMetaVictims in cache mode, NodeNameToVictims otherwise), each with its victims and
// PDB violations as sent, in request order.
std::vector<NodeVictims> KeptVictims(const extender::Extender& extender,
                                     const PreemptionArgs& args);

}  // namespace linkfit::wire
