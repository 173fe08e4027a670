#pragma once

// The server's routing and the text it writes itself, apart from the transport (server.cc):
// which route a request path names, which routes a listener serves, the path of a request
// target, and the JSON escaping of its own error replies.
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

// `text` as the inside of a JSON string (quotes, backslashes and control bytes escaped).
std::string EscapeJson(std::string_view text);

}  // namespace linkfit::server::routes
