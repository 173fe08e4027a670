#include "server/routes.h"

#include "linkfit/common/strings.h"

namespace linkfit::server::routes {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

RouteMatch MatchRoute(std::string_view path, std::string_view prefix) {
  if (path.size() > prefix.size() && StartsWith(path, prefix) && path[prefix.size()] == '/') {
    const std::string_view verb = path.substr(prefix.size() + 1);
    if (verb == "filter") return {Route::kVerb, Verb::kFilter, {}, true};
    if (verb == "prioritize") return {Route::kVerb, Verb::kPrioritize, {}, true};
    if (verb == "bind") return {Route::kVerb, Verb::kBind, {}, true};
    if (verb == "preempt") return {Route::kVerb, Verb::kPreempt, {}, true};
  }
  if (path == "/inspect") return {Route::kInspect, Verb::kFilter, {}, false};
  if (StartsWith(path, "/inspect/")) {
    return {Route::kInspect, Verb::kFilter, path.substr(std::string_view("/inspect/").size()),
            false};
  }
  if (path == "/explain") return {Route::kExplain, Verb::kFilter, {}, true};
  if (path == "/standalone/release") return {Route::kRelease, Verb::kFilter, {}, true};
  if (path == "/healthz") return {Route::kHealthz, Verb::kFilter, {}, false};
  if (path == "/readyz") return {Route::kReadyz, Verb::kFilter, {}, false};
  if (path == "/metrics") return {Route::kMetrics, Verb::kFilter, {}, false};
  return {};
}

bool Serves(RouteSet routes, Route route) {
  switch (routes) {
    case RouteSet::kAll:
      return true;
    case RouteSet::kExtender:
      return route == Route::kVerb || route == Route::kRelease || route == Route::kHealthz ||
             route == Route::kReadyz;
    case RouteSet::kOperations:
      return route == Route::kHealthz || route == Route::kReadyz || route == Route::kMetrics ||
             route == Route::kInspect || route == Route::kExplain;
  }
  return true;
}

std::string PathOf(std::string_view target) {
  target = target.substr(0, target.find('?'));
  std::string path;
  path.reserve(target.size());
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (target[i] == '%' && i + 2 < target.size()) {
      const int high = HexValue(target[i + 1]);
      const int low = HexValue(target[i + 2]);
      if (high >= 0 && low >= 0) {
        path += static_cast<char>(high * 16 + low);
        i += 2;
        continue;
      }
    }
    path += target[i];
  }
  return path;
}

}  // namespace linkfit::server::routes
