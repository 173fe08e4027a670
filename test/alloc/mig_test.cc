// MIG geometry: the shipped profile catalogues and their errors, a GPU's occupancy and its rules,
// and the planner's headroom and stranded-slice tables, exact against brute force on every
// reachable state (mig_planner_test.cc: the planner's choices).

#include "alloc/mig_testing.h"

namespace linkfit::alloc {
namespace {

TEST(MigCatalogTest, LoadsAllSets) {
  ASSERT_EQ(Catalog().planners().size(), 4U);
  for (const std::string& id : kSetIds) {
    const MigProfileSet* set = Catalog().FindSet(id);
    ASSERT_NE(set, nullptr) << id;
    EXPECT_EQ(set->profiles.size(), 7U);
    EXPECT_EQ(set->compute_slices, 7);
    EXPECT_EQ(set->max_gpu_instances, 7);
  }
  EXPECT_EQ(Catalog().FindSet("v100"), nullptr);
  const MigProfileSet& a100 = *Catalog().FindSet("a100-40gb");
  const MigProfile& three_g = a100.profiles[static_cast<std::size_t>(a100.FindProfile("3g.20gb"))];
  EXPECT_EQ(three_g.compute_slices, 3);
  EXPECT_EQ(three_g.size, 4);
  EXPECT_EQ(three_g.starts, (std::vector<int>{0, 4}));
  EXPECT_EQ(three_g.max_instances, 2);
  EXPECT_TRUE(
      a100.profiles[static_cast<std::size_t>(a100.FindProfile("1g.5gb+me"))].media_extensions);
}

TEST(MigCatalogTest, ProfileNamesCollideAcrossSets) {
  // "1g.10gb" is the double-memory 1g on the A100-40GB and the plain 1g elsewhere.
  auto refs = Catalog().FindProfile("1g.10gb");
  ASSERT_EQ(refs.size(), 3U);
  std::set<int> sizes;
  for (const auto& ref : refs) {
    sizes.insert(ref.planner->set().profiles[static_cast<std::size_t>(ref.profile)].size);
  }
  EXPECT_EQ(sizes, (std::set<int>{1, 2}));
  EXPECT_EQ(Catalog().FindProfile("7g.141gb").size(), 1U);
  EXPECT_TRUE(Catalog().FindProfile("9g.1tb").empty());
}

TEST(MigCatalogTest, MissingDirectoryIsAnError) {
  auto catalog = MigCatalog::LoadDirectory(kMigDir + "/does-not-exist");
  ASSERT_FALSE(catalog.has_value());
  EXPECT_NE(catalog.error().message.find("does-not-exist"), std::string::npos);
}

TEST(MigParseTest, RejectsBadDocumentsNamingTheField) {
  const json base = json::parse(ReadFile(kMigDir + "/a100-40gb.json"));
  struct Case {
    const char* name;
    std::function<void(json&)> mutate;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"schema", [](json& d) { d["schema"] = "mig-profile-set/v0"; }, "schema"},
      {"no id", [](json& d) { d.erase("id"); }, "id: missing"},
      {"start 8", [](json& d) { d["profiles"][0]["placements"]["starts"][6] = 8; },
       "profiles[0].placements.starts[6]: 8 is outside 0..7"},
      {"negative start", [](json& d) { d["profiles"][0]["placements"]["starts"][0] = -1; },
       "profiles[0].placements.starts[0]"},
      {"start+size>8", [](json& d) { d["profiles"][4]["placements"]["starts"][1] = 5; },
       "exceeds 8 memory slices"},
      {"size != memory", [](json& d) { d["profiles"][3]["placements"]["size"] = 3; },
       "profiles[3].placements.size"},
      {"compute > geometry", [](json& d) { d["profiles"][6]["compute_slices"] = 8; },
       "profiles[6].compute_slices"},
      {"string count", [](json& d) { d["profiles"][1]["max_instances"] = "1"; },
       "profiles[1].max_instances: expected an integer"},
      {"duplicate name", [](json& d) { d["profiles"][1]["name"] = "1g.5gb"; }, "duplicate"},
      {"duplicate start", [](json& d) { d["profiles"][2]["placements"]["starts"][1] = 0; },
       "ascending"},
      {"memory slices 16", [](json& d) { d["geometry"]["memory_slices"] = 16; },
       "geometry.memory_slices"},
      {"no profiles", [](json& d) { d["profiles"] = json::array(); }, "profiles"},
      {"profiles not array", [](json& d) { d["profiles"] = 3; }, "profiles: expected an array"},
      {"me not bool", [](json& d) { d["profiles"][1]["media_extensions_profile"] = 1; },
       "media_extensions_profile"},
  };
  for (const Case& c : cases) {
    json document = base;
    c.mutate(document);
    auto set = ParseMigProfileSet(document.dump());
    ASSERT_FALSE(set.has_value()) << c.name;
    EXPECT_NE(set.error().message.find(c.expected), std::string::npos)
        << c.name << ": " << set.error().message;
  }
  EXPECT_FALSE(ParseMigProfileSet("{").has_value());
  EXPECT_FALSE(ParseMigProfileSet("").has_value());
  EXPECT_FALSE(ParseMigProfileSet("[1,2]").has_value());
  EXPECT_TRUE(ParseMigProfileSet(base.dump()).has_value());
}

TEST(MigGpuStateTest, IsCompact) { EXPECT_LE(sizeof(MigGpuState), 8U); }

TEST(MigGpuStateTest, EnforcesEveryRule) {
  const MigPlanner& planner = Planner("a100-80gb");
  const MigProfileSet& set = planner.set();
  const int one_g = Profile(planner, "1g.10gb");
  const int one_g_me = Profile(planner, "1g.10gb+me");
  const int two_g = Profile(planner, "2g.20gb");
  const int three_g = Profile(planner, "3g.40gb");
  const int four_g = Profile(planner, "4g.40gb");
  const int seven_g = Profile(planner, "7g.80gb");

  MigGpuState state;
  EXPECT_FALSE(state.CanPlace(set, three_g, 2));  // not a legal start
  EXPECT_FALSE(state.CanPlace(set, one_g, 7));    // 1g starts are 0..6
  EXPECT_FALSE(state.CanPlace(set, -1, 0));
  EXPECT_FALSE(state.CanPlace(set, 7, 0));
  EXPECT_TRUE(state.Place(set, three_g, 4));
  EXPECT_FALSE(state.CanPlace(set, one_g, 5));  // overlaps [4,8)
  EXPECT_FALSE(state.CanPlace(set, seven_g, 0));
  EXPECT_TRUE(state.CanPlace(set, four_g, 0));
  EXPECT_TRUE(state.Place(set, one_g_me, 0));
  EXPECT_FALSE(state.CanPlace(set, one_g_me, 1));  // one +me per GPU
  EXPECT_TRUE(state.Place(set, two_g, 2));
  EXPECT_EQ(state.slice_mask(), 0xFD);
  EXPECT_EQ(state.compute_used(), 6);
  EXPECT_TRUE(state.Place(set, one_g, 1));
  EXPECT_EQ(state.compute_used(), 7);
  EXPECT_EQ(state.instance_count(), 4);
  EXPECT_EQ(planner.Headroom(state), 0);

  // Remove checks that such an instance can be there.
  EXPECT_FALSE(state.Remove(set, four_g, 0));
  EXPECT_FALSE(state.Remove(set, seven_g, 0));
  // The compact state cannot tell a 1g at 6 from part of the 3g at 4 (the caller keeps the
  // instance list); it only rejects what cannot be there.
  EXPECT_FALSE(state.Remove(set, one_g, 7));  // not a legal start
  EXPECT_TRUE(state.Remove(set, one_g_me, 0));
  EXPECT_FALSE(state.has_media_extensions());
  EXPECT_TRUE(state.CanPlace(set, one_g_me, 0));
  EXPECT_TRUE(state.Remove(set, three_g, 4));
  EXPECT_TRUE(state.Remove(set, two_g, 2));
  EXPECT_TRUE(state.Remove(set, one_g, 1));
  EXPECT_FALSE(state.Remove(set, one_g, 1));  // already removed
  EXPECT_TRUE(state.empty());
  EXPECT_EQ(state, MigGpuState());

  // Compute budget: four 1g.20gb use all memory slices; 7 plain 1g use all compute slices.
  MigGpuState ones;
  for (int start = 0; start < 7; ++start) EXPECT_TRUE(ones.Place(set, one_g, start));
  EXPECT_EQ(ones.slice_mask(), 0x7F);
  EXPECT_FALSE(ones.CanPlace(set, one_g, 0));
  EXPECT_EQ(planner.Headroom(ones), 0);  // slice 7 is free but no compute is left
}

TEST(MigGpuStateTest, FromInstancesReportsTheBadInstance) {
  const MigPlanner& planner = Planner("a100-40gb");
  const int three_g = Profile(planner, "3g.20gb");
  const int four_g = Profile(planner, "4g.20gb");
  std::vector<MigInstance> ok = {{three_g, 4}, {four_g, 0}};
  EXPECT_TRUE(MigGpuState::FromInstances(planner.set(), ok).has_value());
  std::vector<MigInstance> overlap = {{three_g, 0}, {four_g, 0}};
  auto state = MigGpuState::FromInstances(planner.set(), overlap);
  ASSERT_FALSE(state.has_value());
  EXPECT_NE(state.error().message.find("instance 1: 4g.20gb"), std::string::npos)
      << state.error().message;
  std::vector<MigInstance> bad = {{42, 0}};
  EXPECT_FALSE(MigGpuState::FromInstances(planner.set(), bad).has_value());
}

// Independently counts how many more instances of `profile` fit, by search with CanPlace.
int BruteForceRemaining(const MigProfileSet& set, MigGpuState state, int profile) {
  int best = 0;
  for (int start : set.profiles[static_cast<std::size_t>(profile)].starts) {
    MigGpuState next = state;
    if (next.Place(set, profile, start)) {
      best = std::max(best, 1 + BruteForceRemaining(set, next, profile));
    }
  }
  return best;
}

TEST(MigPlannerTest, HeadroomTableIsExactOnEveryReachableState) {
  for (const std::string& id : kSetIds) {
    const MigPlanner& planner = Planner(id);
    const MigProfileSet& set = planner.set();
    // Every state reachable from an empty GPU.
    std::vector<MigGpuState> frontier = {MigGpuState()};
    std::vector<MigGpuState> seen = frontier;
    while (!frontier.empty()) {
      MigGpuState state = frontier.back();
      frontier.pop_back();
      for (std::size_t p = 0; p < set.profiles.size(); ++p) {
        for (int start : set.profiles[p].starts) {
          MigGpuState next = state;
          if (!next.Place(set, static_cast<int>(p), start)) continue;
          if (std::find(seen.begin(), seen.end(), next) != seen.end()) continue;
          seen.push_back(next);
          frontier.push_back(next);
        }
      }
    }
    EXPECT_GT(seen.size(), 100U) << id;
    for (const MigGpuState& state : seen) {
      for (std::size_t p = 0; p < set.profiles.size(); ++p) {
        ASSERT_EQ(planner.RemainingInstances(state, static_cast<int>(p)),
                  BruteForceRemaining(set, state, static_cast<int>(p)))
            << id << " mask " << int{state.slice_mask()} << " profile " << set.profiles[p].name;
      }
    }
    EXPECT_EQ(planner.Headroom(MigGpuState()), 7 + 1 + 4 + 3 + 2 + 1 + 1) << id;
  }
}

// Independently counts the free slices no legal placement of any profile can cover, with CanPlace.
// Free slices no legal instance covers: of any profile (profile < 0) or of `profile`.
int BruteForceStranded(const MigProfileSet& set, const MigGpuState& state, int only = -1) {
  unsigned coverable = 0;
  for (std::size_t p = 0; p < set.profiles.size(); ++p) {
    if (only >= 0 && p != static_cast<std::size_t>(only)) continue;
    const MigProfile& profile = set.profiles[p];
    for (int start : profile.starts) {
      if (state.CanPlace(set, static_cast<int>(p), start)) {
        coverable |= ((1U << static_cast<unsigned>(profile.size)) - 1U)
                     << static_cast<unsigned>(start);
      }
    }
  }
  const unsigned free_slices = ~unsigned{state.slice_mask()} & 0xFFU;
  return std::popcount(free_slices & ~coverable);
}

TEST(MigPlannerTest, StrandedSlicesAreExactOnEveryReachableState) {
  for (const std::string& id : kSetIds) {
    const MigPlanner& planner = Planner(id);
    const MigProfileSet& set = planner.set();
    std::vector<MigGpuState> frontier = {MigGpuState()};
    std::vector<MigGpuState> seen = frontier;
    while (!frontier.empty()) {
      MigGpuState state = frontier.back();
      frontier.pop_back();
      ASSERT_EQ(planner.StrandedSlices(state), BruteForceStranded(set, state))
          << id << " mask " << int{state.slice_mask()} << " compute " << state.compute_used();
      for (int p = 0; p < static_cast<int>(set.profiles.size()); ++p) {
        ASSERT_EQ(planner.StrandedSlices(state, p), BruteForceStranded(set, state, p))
            << id << " profile " << set.profiles[static_cast<std::size_t>(p)].name << " mask "
            << int{state.slice_mask()};
      }
      for (std::size_t p = 0; p < set.profiles.size(); ++p) {
        for (int start : set.profiles[p].starts) {
          MigGpuState next = state;
          if (!next.Place(set, static_cast<int>(p), start)) continue;
          if (std::find(seen.begin(), seen.end(), next) != seen.end()) continue;
          seen.push_back(next);
          frontier.push_back(next);
        }
      }
    }
    EXPECT_GT(seen.size(), 100U) << id;
  }
}

TEST(MigPlannerTest, StrandedSlicesByHand) {
  const MigPlanner& planner = Planner("a100-40gb");
  const MigProfileSet& set = planner.set();
  const int one_g = Profile(planner, "1g.5gb");
  const int one_g_double = Profile(planner, "1g.10gb");
  const int two_g = Profile(planner, "2g.10gb");
  const int three_g = Profile(planner, "3g.20gb");
  const int four_g = Profile(planner, "4g.20gb");
  struct Case {
    std::vector<MigInstance> instances;
    int stranded;
  };
  const std::vector<Case> cases = {
      {{}, 0},
      // Slice 7 is covered only by 1g.10gb at 6, 3g at 4 and 7g at 0; 1g at 6 blocks all three.
      {{{one_g, 6}}, 1},
      {{{one_g, 4}}, 0},
      {{{one_g, 0}}, 0},
      // 1g.10gb at 6 covers slice 7 even with one compute slice left.
      {{{four_g, 0}, {two_g, 4}}, 0},
      {{{four_g, 0}, {two_g, 4}, {one_g, 6}}, 1},
      {{{three_g, 0}, {two_g, 4}, {one_g, 6}}, 1},
      {{{one_g_double, 6}, {one_g, 0}}, 0},
      // Compute slices all used: the one free slice left (7) is stranded.
      {{{four_g, 0}, {one_g, 4}, {one_g, 5}, {one_g, 6}}, 1},
      {{{one_g, 0}, {one_g, 1}, {one_g, 2}, {one_g, 3}, {one_g, 4}, {one_g, 5}, {one_g, 6}}, 1},
      // Full GPUs strand nothing: no slice is free.
      {{{three_g, 0}, {three_g, 4}}, 0},
      {{{four_g, 0}, {three_g, 4}}, 0},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto state = MigGpuState::FromInstances(set, cases[i].instances);
    ASSERT_TRUE(state.has_value()) << "case " << i << ": " << state.error().message;
    EXPECT_EQ(planner.StrandedSlices(*state), cases[i].stranded) << "case " << i;
  }
}

// On a fresh A100 40GB GPU, headroom alone puts 1g.5gb at slice 6 (it loses 4 instances there:
// 1g.5gb, 1g.10gb at 6, 3g at 4, 7g; at 4 or 5 it loses 5, also 2g at 4; at 0-3 it loses 6,
// also 4g at 0), which strands slice 7 for every profile. The planner takes the lowest start
// that strands nothing and loses least: 4. Then 5 (loses only 1g.5gb), then 0 (6 would strand
// slice 7; 0-3 each lose 1g.5gb, 1g.10gb, 2g, 3g and 4g at 0), 1 (loses only 1g.5gb; 2 and 3
// also lose 1g.10gb and 2g at 2), 2, 3, and last 6, the only free start left.
TEST(MigPlannerTest, KeepsSliceSevenUsable) {
  const MigPlanner& planner = Planner("a100-40gb");
  const MigProfileSet& set = planner.set();
  const int one_g = Profile(planner, "1g.5gb");
  std::vector<MigGpuView> gpus = {MigGpu(0)};
  std::vector<int> starts;
  for (int i = 0; i < 7; ++i) {
    auto decision = planner.Choose(gpus, one_g);
    ASSERT_TRUE(decision.has_value());
    ASSERT_TRUE(decision->fits) << decision->reason;
    EXPECT_EQ(decision->gpu, 0);
    starts.push_back(decision->start);
    ASSERT_TRUE(gpus[0].state.Place(set, one_g, decision->start));
    if (i < 6) {
      EXPECT_EQ(planner.StrandedSlices(gpus[0].state), 0) << "after " << i + 1;
    }
  }
  EXPECT_EQ(starts, (std::vector<int>{4, 5, 0, 1, 2, 3, 6}));

  // A request of two 1g.5gb on a fresh GPU: 4 and 5 (together they lose 1g.5gb twice, 1g.10gb,
  // 2g and 3g at 4, and 7g; 5 and 6, or 4 and 6, would lose one more and strand slice 7).
  const std::vector<MigGpuView> fresh = {MigGpu(0)};
  auto pair = planner.ChooseRequest(fresh, std::vector<int>{one_g, one_g});
  ASSERT_TRUE(pair.has_value()) << pair.error().message;
  ASSERT_TRUE(pair->fits);
  std::vector<int> pair_starts = {pair->instances[0].start, pair->instances[1].start};
  std::sort(pair_starts.begin(), pair_starts.end());
  EXPECT_EQ(pair_starts, (std::vector<int>{4, 5}));

  // 2g.10gb first on a fresh GPU goes to 4 (keeps 4g at 0 and 1g.10gb at 6 for slice 7).
  const int two_g = Profile(planner, "2g.10gb");
  auto two = planner.Choose(fresh, two_g);
  ASSERT_TRUE(two.has_value());
  ASSERT_TRUE(two->fits);
  EXPECT_EQ(two->start, 4);
}

// Between partly used GPUs, the one where the instance strands nothing wins over the one where
// it would strand a slice, even if that one loses less headroom.
TEST(MigPlannerTest, PrefersTheGpuWhereNothingIsStranded) {
  const MigPlanner& planner = Planner("a100-40gb");
  const MigProfileSet& set = planner.set();
  const int one_g = Profile(planner, "1g.5gb");
  const int one_g_double = Profile(planner, "1g.10gb");
  const int two_g = Profile(planner, "2g.10gb");
  const int three_g = Profile(planner, "3g.20gb");
  // GPU 0: 2g at 0, 2 and 4 (6 compute slices): slices 6-7 hold one 1g.5gb or one 1g.10gb.
  auto tight =
      MigGpuState::FromInstances(set, std::vector<MigInstance>{{two_g, 0}, {two_g, 2}, {two_g, 4}});
  ASSERT_TRUE(tight.has_value());
  // GPU 1: 3g at 0; slices 4-7 free.
  auto half = MigGpuState::FromInstances(set, std::vector<MigInstance>{{three_g, 0}});
  ASSERT_TRUE(half.has_value());
  const std::vector<MigGpuView> gpus = {MigGpu(0, *tight), MigGpu(1, *half), MigGpu(2)};
  // 1g.5gb at 6 on GPU 0 loses 3 instances (1g.5gb, 1g.5gb+me, 1g.10gb) but strands slice 7;
  // at 4 on GPU 1 it loses 4 (1g.5gb, 1g.10gb at 4, 2g at 4, 3g at 4) and strands nothing. The
  // headroom order alone would take GPU 0 (or 6 on GPU 1, which loses 3 and strands slice 7).
  auto decision = planner.Choose(gpus, one_g);
  ASSERT_TRUE(decision.has_value());
  ASSERT_TRUE(decision->fits);
  EXPECT_EQ(decision->gpu, 1);
  EXPECT_EQ(decision->start, 4);
  // 1g.10gb at 6 strands nothing on either GPU and loses 3 on both: the lower index wins.
  decision = planner.Choose(gpus, one_g_double);
  ASSERT_TRUE(decision.has_value());
  ASSERT_TRUE(decision->fits);
  EXPECT_EQ(decision->gpu, 0);
  EXPECT_EQ(decision->start, 6);
  // A request of the same two goes to GPU 1 alone, 1g.5gb at 4 and 1g.10gb at 6: nothing
  // stranded, 6 instances lost (all but one 1g.5gb and the +me). 1g.10gb on GPU 0 and 1g.5gb at
  // 4 on GPU 1 lose 3 + 4; 1g.5gb at 6 on GPU 0 strands slice 7; both on GPU 0 do not fit.
  auto both = planner.ChooseRequest(gpus, std::vector<int>{one_g, one_g_double});
  ASSERT_TRUE(both.has_value()) << both.error().message;
  ASSERT_TRUE(both->fits);
  ASSERT_EQ(both->instances.size(), 2U);
  EXPECT_EQ(both->instances[0].gpu, 1);
  EXPECT_EQ(both->instances[0].start, 4);
  EXPECT_EQ(both->instances[1].gpu, 1);
  EXPECT_EQ(both->instances[1].start, 6);
}

// Every fragmentation case of every profile set, as one request on one GPU.

}  // namespace
}  // namespace linkfit::alloc
