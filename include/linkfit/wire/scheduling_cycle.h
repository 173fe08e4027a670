#pragma once

// kube-scheduler's cycle for one pod against linkfit, in cache mode (nodeCacheCapable), over an
// ExtenderClient: filter with the candidate names, prioritize the names that passed when two or
// more did, choose a node, bind. The one driver of `linkfit demo` and the benchmark harness; the
// choice is the caller's (kube-scheduler adds its in-tree scores to the extender's, score x
// weight x 10, and breaks ties at random: the harness does that, the demo takes the first best).
//
// Request bodies are written as kube-scheduler's Go encoder writes them (PascalCase keys in the
// struct's order); replies are read as kube-scheduler reads them (a node in both failure maps is
// unresolvable).
//
// Thread-safety: as the ExtenderClient it uses (one thread at a time).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/wire/extender_client.h"

namespace linkfit::wire {

// The pod of a cycle: its JSON object (as the Pod field of ExtenderArgs) and what a Binding
// names.
struct CyclePod {
  std::string json;
  std::string name;
  std::string pod_namespace;
  std::string uid;
};

struct FilterAnswer {
  std::vector<std::string> passed;  // NodeNames, in reply order
  // Each requested node that failed, in request order, with its reason; a node in both maps
  // counts as FailedAndUnresolvableNodes (and is in `unresolvable`).
  std::vector<std::pair<std::string, std::string>> failed;
  std::set<std::string> unresolvable;
  std::string error;  // the reply's Error: the whole filter call failed
};

struct HostScore {
  std::string host;
  std::int64_t score = 0;
};

struct CycleOutcome {
  FilterAnswer filter;
  std::vector<HostScore> scores;  // empty unless two or more passed
  std::string node;               // the node chosen; "" when none passed or filter failed
  std::string bind_error;         // the Binding result's Error; "" when bound (or not tried)
  bool bound() const { return !node.empty() && bind_error.empty() && filter.error.empty(); }
};

// Chooses among `passed` (two or more) given the extender's scores (one per host it scored).
using ChooseNode = std::function<std::string(const std::vector<std::string>& passed,
                                             const std::vector<HostScore>& scores)>;

// The first node with the highest extender score (kube-scheduler picks among ties at random).
std::string FirstBest(const std::vector<std::string>& passed, const std::vector<HostScore>& scores);

class SchedulingCycle {
 public:
  explicit SchedulingCycle(ExtenderClient& client) : client_(client) {}

  Result<FilterAnswer> Filter(const CyclePod& pod, const std::vector<std::string>& names);
  Result<std::vector<HostScore>> Prioritize(const CyclePod& pod,
                                            const std::vector<std::string>& names);
  // The Binding result's Error ("" when bound).
  Result<std::string> Bind(const CyclePod& pod, std::string_view node);

  // The whole cycle over `names`. An error only when a call got no valid reply.
  Result<CycleOutcome> Schedule(const CyclePod& pod, const std::vector<std::string>& names,
                                const ChooseNode& choose = FirstBest);

 private:
  ExtenderClient& client_;
};

// The request bodies, as kube-scheduler writes them. CacheModeBody's NodeNames are `count` names
// from names[first], wrapping around (a load tool's rotation); the two-argument form, every name.
std::string CacheModeBody(std::string_view pod_json, const std::vector<std::string>& names,
                          std::size_t count, std::size_t first = 0);
inline std::string CacheModeBody(std::string_view pod_json, const std::vector<std::string>& names) {
  return CacheModeBody(pod_json, names, names.size());
}
std::string BindingBody(std::string_view pod_name, std::string_view pod_namespace,
                        std::string_view uid, std::string_view node);

}  // namespace linkfit::wire
