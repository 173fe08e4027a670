// The server's routing and its own JSON escaping, apart from the transport (server/routes.h).

#include "server/routes.h"

#include <gtest/gtest.h>

#include <string>

namespace linkfit::server::routes {
namespace {

TEST(RoutesTest, VerbsLiveUnderThePrefixAndNothingElseMatchesThem) {
  const RouteMatch filter = MatchRoute("/scheduler/filter", "/scheduler");
  EXPECT_EQ(filter.route, Route::kVerb);
  EXPECT_EQ(filter.verb, Verb::kFilter);
  EXPECT_TRUE(filter.post);
  EXPECT_EQ(MatchRoute("/scheduler/prioritize", "/scheduler").verb, Verb::kPrioritize);
  EXPECT_EQ(MatchRoute("/scheduler/bind", "/scheduler").verb, Verb::kBind);
  EXPECT_EQ(MatchRoute("/scheduler/preempt", "/scheduler").verb, Verb::kPreempt);
  EXPECT_EQ(MatchRoute("/x/filter", "/x").route, Route::kVerb);  // another prefix
  for (const char* miss : {"/scheduler/filterx", "/schedulerfilter", "/scheduler/", "/scheduler",
                           "/filter", "/scheduler/filter/", "/Scheduler/filter", ""}) {
    EXPECT_EQ(MatchRoute(miss, "/scheduler").route, Route::kNotFound) << miss;
  }
}

TEST(RoutesTest, InspectNamesItsNodeAndTheOtherRoutesAreExact) {
  EXPECT_EQ(MatchRoute("/inspect", "/scheduler").route, Route::kInspect);
  EXPECT_EQ(MatchRoute("/inspect", "/scheduler").node, "");
  const RouteMatch one = MatchRoute("/inspect/dgx-a100-n1", "/scheduler");
  EXPECT_EQ(one.route, Route::kInspect);
  EXPECT_EQ(one.node, "dgx-a100-n1");
  EXPECT_FALSE(one.post);
  EXPECT_EQ(MatchRoute("/explain", "/scheduler").route, Route::kExplain);
  EXPECT_TRUE(MatchRoute("/explain", "/scheduler").post);
  EXPECT_EQ(MatchRoute("/standalone/release", "/scheduler").route, Route::kRelease);
  EXPECT_EQ(MatchRoute("/healthz", "/scheduler").route, Route::kHealthz);
  EXPECT_EQ(MatchRoute("/readyz", "/scheduler").route, Route::kReadyz);
  EXPECT_EQ(MatchRoute("/metrics", "/scheduler").route, Route::kMetrics);
  EXPECT_EQ(MatchRoute("/healthz/", "/scheduler").route, Route::kNotFound);
  EXPECT_EQ(MatchRoute("/metricsx", "/scheduler").route, Route::kNotFound);
}

TEST(RoutesTest, EachListenerServesItsRoutes) {
  for (Route route : {Route::kVerb, Route::kRelease, Route::kHealthz, Route::kReadyz}) {
    EXPECT_TRUE(Serves(RouteSet::kExtender, route));
  }
  for (Route route : {Route::kMetrics, Route::kInspect, Route::kExplain}) {
    EXPECT_FALSE(Serves(RouteSet::kExtender, route));
    EXPECT_TRUE(Serves(RouteSet::kOperations, route));
  }
  EXPECT_FALSE(Serves(RouteSet::kOperations, Route::kVerb));
  EXPECT_FALSE(Serves(RouteSet::kOperations, Route::kRelease));
  EXPECT_TRUE(Serves(RouteSet::kOperations, Route::kHealthz));
  EXPECT_TRUE(Serves(RouteSet::kAll, Route::kVerb));
  EXPECT_TRUE(Serves(RouteSet::kAll, Route::kMetrics));
}

TEST(RoutesTest, PathDropsTheQueryAndDecodesWellFormedEscapesOnly) {
  EXPECT_EQ(PathOf("/scheduler/filter"), "/scheduler/filter");
  EXPECT_EQ(PathOf("/inspect/a%2Fb?verbose=1"), "/inspect/a/b");
  EXPECT_EQ(PathOf("/inspect/node%2d1"), "/inspect/node-1");
  EXPECT_EQ(PathOf("/inspect/%zz"), "/inspect/%zz");  // malformed: kept
  EXPECT_EQ(PathOf("/inspect/%4"), "/inspect/%4");    // cut short: kept
  EXPECT_EQ(PathOf("/a%41%42"), "/aAB");
  EXPECT_EQ(PathOf("?only=query"), "");
  EXPECT_EQ(PathOf(""), "");
}

}  // namespace
}  // namespace linkfit::server::routes
