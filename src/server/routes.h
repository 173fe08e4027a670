#pragma once

// The server's routing, apart from the transport (server.cc): which route a request path names,
// which routes a listener serves, and the path of a request target.
//
// Thread-safety: pure functions.

#include <string>
#include <string_view>

#include "linkfit/common/metrics.h"
#include "linkfit/server/server.h"

namespace linkfit::server::routes {

enum class Route { kNotFound, kVerb, kInspect, kExplain, kRelease, kHealthz, kReadyz, kMetrics };

struct RouteMatch {
  Route route = Route::kNotFound;
  Verb verb = Verb::kFilter;
  std::string_view node;  // for kInspect: empty means all nodes
  bool post = false;      // the route's method: POST, else GET (and HEAD)
};

// The route `path` names; the verbs live under `prefix` (ServerOptions::url_prefix).
RouteMatch MatchRoute(std::string_view path, std::string_view prefix);

// Whether a listener serving `routes` answers `route` (others are 404).
bool Serves(RouteSet routes, Route route);

// The request target's path: the query is dropped and %XX escapes are decoded (a malformed
// escape stays as it is), as cpp-httplib did.
std::string PathOf(std::string_view target);

}  // namespace linkfit::server::routes
