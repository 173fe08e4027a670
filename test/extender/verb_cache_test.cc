// The verb cache's parts on their own: the memo of distinct GPU states within a call, the kept
// fit and score tables (bounds, what a call drops, positions, interned reasons) and the pool that
// lends a cache to one call at a time. Filter and prioritize over them: per_state_test.cc.

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "extender/gpu_state_memo.h"
#include "extender/verb_cache.h"
#include "testing/cluster.h"

namespace linkfit::extender {
namespace {

TEST(GpuStateMemoTest, ComputesOncePerDistinctStateAndExtra) {
  auto a =
      std::make_shared<const state::NodeState>(linkfit::testing::MakeNodeInfo("a", "dgx1-v100"));
  auto b =
      std::make_shared<const state::NodeState>(linkfit::testing::MakeNodeInfo("b", "dgx1-v100"));
  auto c =
      std::make_shared<const state::NodeState>(linkfit::testing::MakeNodeInfo("c", "dgx-a100"));
  GpuStateMemo<int> memo;
  int computed = 0;
  const auto value = [&] { return ++computed; };
  EXPECT_EQ(memo.Of(*a, {}, value), 1);
  EXPECT_EQ(memo.Of(*b, {}, value), 1);  // alike: a's value
  EXPECT_EQ(memo.Of(*c, {}, value), 2);
  EXPECT_EQ(memo.Of(*a, {1, 0, nullptr}, value), 3);  // another extra
  EXPECT_EQ(memo.Of(*b, {1, 0, nullptr}, value), 3);
  // Many distinct extras grow the table; earlier values stay where they were.
  const int& first = memo.Of(*a, {}, value);
  for (std::uint64_t e = 2; e < 2000; ++e) memo.Of(*c, {e, e, nullptr}, value);
  EXPECT_EQ(first, 1);
  EXPECT_EQ(memo.Of(*c, {1999, 1999, nullptr}, value), computed);
  EXPECT_EQ(memo.size(), 2001u);
}

TEST(VerbCacheTest, TablesAreBoundedAndTheLeastRecentlyUsedGoesFirst) {
  VerbCache cache;
  const auto unchanged = [](std::uint64_t, std::uint64_t, std::vector<std::uint32_t>&) {
    return true;
  };
  const NodeFit passing{};
  cache.BeginCall(1, unchanged);
  cache.Fits("kept").by_position.Insert(0, FitRef(0, passing));
  for (int i = 0; i < 40; ++i) {
    cache.BeginCall(1, unchanged);
    cache.Fits("kept");  // used every call: never the least recently used
    cache.Fits("shape-" + std::to_string(i)).by_position.Insert(3, FitRef(0, passing));
  }
  cache.BeginCall(1, unchanged);
  EXPECT_EQ(cache.Fits("kept").by_position.size(), 1u);
  EXPECT_EQ(cache.Fits("shape-39").by_position.size(), 1u);
  EXPECT_EQ(cache.Fits("shape-0").by_position.size(), 0u);  // evicted long ago: created afresh
  // A table that holds more fits than its bound is emptied when a call next asks for it.
  FitTable& big = cache.Fits("big");
  for (std::size_t i = 0; i <= VerbCache::kMaxFits; ++i) {
    big.Add(big.full_fits.emplace_back(), nullptr, 0);
  }
  big.by_position.Insert(0, FitRef(0, big.full_fits.front()));
  cache.BeginCall(1, unchanged);
  EXPECT_EQ(cache.Fits("big").fits.size(), 0u);
  EXPECT_FALSE(cache.Fits("big").by_position.Find(0).known());
  // Score tables hold the shapes they were built under.
  auto shapes = std::make_shared<const std::vector<Shape>>();
  std::weak_ptr<const std::vector<Shape>> watch = shapes;
  cache.Scores("context", shapes, nullptr);
  shapes.reset();
  EXPECT_FALSE(watch.expired());
}

// A call on a newer snapshot drops what the tables keep at the positions that changed since the
// last call's, and everything when the cluster cannot say which changed or the snapshot is older.
TEST(VerbCacheTest, ACallDropsWhatChangedSinceTheLastCall) {
  VerbCache cache;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> asked;
  bool answer = true;
  const auto changed = [&](std::uint64_t from, std::uint64_t to,
                           std::vector<std::uint32_t>& positions) {
    asked.emplace_back(from, to);
    positions = {2, 5, 2};
    return answer;
  };
  const NodeFit passing{};
  cache.BeginCall(4, changed);
  EXPECT_TRUE(asked.empty());  // nothing kept yet: nothing to ask
  for (std::uint32_t p = 0; p < 8; ++p) {
    cache.Fits("a").by_position.Insert(p, FitRef(p, passing));
    cache.Scores("c", nullptr, nullptr).by_position.Insert(p, KeptScore(p * 10));
  }
  cache.BeginCall(4, changed);  // the same snapshot: nothing changed
  EXPECT_TRUE(asked.empty());
  cache.BeginCall(7, changed);
  ASSERT_EQ(asked, (std::vector<std::pair<std::uint64_t, std::uint64_t>>{{4, 7}}));
  for (std::uint32_t p = 0; p < 8; ++p) {
    const bool dropped = p == 2 || p == 5;
    EXPECT_EQ(cache.Fits("a").by_position.Find(p).known(), !dropped) << p;
    const KeptScore score = cache.Scores("c", nullptr, nullptr).by_position.Find(p);
    EXPECT_EQ(score.known(), !dropped) << p;
    if (!dropped) {
      EXPECT_EQ(score.score(), p * 10);
    }
  }
  EXPECT_EQ(cache.Fits("a").by_position.size(), 6u);
  answer = false;  // the cluster cannot say: every table goes
  cache.BeginCall(9, changed);
  EXPECT_EQ(cache.Fits("a").by_position.size(), 0u);
  EXPECT_EQ(cache.Scores("c", nullptr, nullptr).by_position.size(), 0u);
  answer = true;
  cache.Fits("a").by_position.Insert(1, FitRef(0, passing));
  asked.clear();
  cache.BeginCall(8, changed);  // an older snapshot than the last call's: every table goes
  EXPECT_TRUE(asked.empty());
  EXPECT_EQ(cache.Fits("a").by_position.size(), 0u);
}

// A kept fit's verdict rides in its reference: what FitRef says is what the fit says, and the
// table gives the fit back unchanged, up to the largest index.
TEST(VerbCacheTest, AFitRefCarriesItsFitsVerdict) {
  FitTable table;
  for (int i = 0; i < 4; ++i) table.full_fits.emplace_back();
  table.full_fits[0].fits = true;
  table.full_fits[1].fits = false;
  table.full_fits[2].fits = false;
  table.full_fits[2].unresolvable = true;
  table.full_fits[3].fits = true;
  table.full_fits[3].unresolvable = true;  // not a combination FitOnNode makes; bits stay apart
  table.full_fits[3].quality.ring_mbps = 42;
  table.full_fits[3].quality.sum_mbps = 84;
  KeptReason reason{"why", 0, {}};
  for (const NodeFit& fit : table.full_fits) {
    const FitRef ref = table.Add(fit, &reason, 7);
    EXPECT_TRUE(ref.known());
    EXPECT_EQ(table[ref].fit, &fit);
    EXPECT_EQ(table[ref].reason, &reason);
    EXPECT_EQ(table.terms[ref.index()].kind, 7u);
    EXPECT_EQ(table.terms[ref.index()].ring_mbps, fit.quality.ring_mbps);
    EXPECT_EQ(table.terms[ref.index()].sum_mbps, fit.quality.sum_mbps);
    EXPECT_EQ(ref.fits(), fit.fits);
    EXPECT_EQ(ref.unresolvable(), fit.unresolvable);
  }
  for (const std::uint32_t index : {std::uint32_t{0}, std::uint32_t{12345}, FitRef::kMaxIndex}) {
    for (const NodeFit& fit : table.full_fits) {
      const FitRef ref(index, fit);
      EXPECT_TRUE(ref.known());
      EXPECT_EQ(ref.index(), index);
      EXPECT_EQ(ref.fits(), fit.fits);
      EXPECT_EQ(ref.unresolvable(), fit.unresolvable);
    }
  }
  EXPECT_FALSE(FitRef().known());
  EXPECT_FALSE(FitRef().fits());
}

// A table keeps one record per distinct reason text, at a stable address.
TEST(VerbCacheTest, ReasonsAreInternedPerTable) {
  FitTable table;
  KeptReason* four = table.Intern("3 free GPUs, 4 requested");
  KeptReason* eight = table.Intern("3 free GPUs, 8 requested");
  EXPECT_NE(four, eight);
  for (int i = 0; i < 1000; ++i) table.Intern("reason " + std::to_string(i));
  EXPECT_EQ(table.Intern(std::string("3 free GPUs, ") + "4 requested"), four);
  EXPECT_EQ(four->text, "3 free GPUs, 4 requested");
  EXPECT_EQ(table.reasons.size(), 1002u);
}

TEST(VerbCacheTest, APositionKeepsOneValue) {
  PositionMap<KeptScore> kept;
  EXPECT_FALSE(kept.Find(0).known());  // empty
  kept.Insert(5, KeptScore(0));        // a score of 0 is kept like any other
  ASSERT_TRUE(kept.Find(5).known());
  EXPECT_EQ(kept.Find(5).score(), 0);
  EXPECT_FALSE(kept.Find(4).known());
  EXPECT_FALSE(kept.Find(9).known());  // past the end
  kept.Insert(5, KeptScore(1000000));  // replaces
  EXPECT_EQ(kept.Find(5).score(), 1000000);
  EXPECT_EQ(kept.size(), 1u);
  kept.Reserve(100);
  kept.Insert(99, KeptScore(30));
  EXPECT_EQ(kept.size(), 2u);
  kept.Erase(5);
  kept.Erase(5);  // twice: nothing more
  kept.Erase(1000);
  EXPECT_FALSE(kept.Find(5).known());
  EXPECT_EQ(kept.Find(99).score(), 30);
  EXPECT_EQ(kept.size(), 1u);
}

TEST(VerbCacheTest, ThePoolLendsACacheToOneCallAtATime) {
  VerbCachePool pool;
  std::set<const VerbCache*> lent;
  {
    const VerbCachePool::Lease a = pool.Acquire();
    const VerbCachePool::Lease b = pool.Acquire();
    EXPECT_NE(&*a, &*b);  // two calls at once: two caches
    lent = {&*a, &*b};
  }
  // Returned caches are lent again (what they keep serves the next calls).
  const VerbCachePool::Lease c = pool.Acquire();
  const VerbCachePool::Lease d = pool.Acquire();
  EXPECT_EQ(lent.count(&*c), 1u);
  EXPECT_EQ(lent.count(&*d), 1u);
  EXPECT_NE(&*c, &*d);
}
}  // namespace
}  // namespace linkfit::extender
