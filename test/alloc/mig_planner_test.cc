// The MIG planner on fragmentation cases: best fit against first fit, packing onto partly used
// GPUs, reasons and reconfiguration hints, bad requests, exact multi-GPU distribution within its
// budget (mig_test.cc: catalogues, GPU state, the headroom table).

#include "alloc/mig_testing.h"

namespace linkfit::alloc {
namespace {

TEST(MigPlannerTest, ReproducesFragmentationCases) {
  int checked = 0;
  for (const std::string& id : kSetIds) {
    const MigPlanner& planner = Planner(id);
    const MigProfileSet& set = planner.set();
    const json document = json::parse(ReadFile(kMigDir + "/" + id + ".json"));
    int case_index = 0;
    for (const json& c : document.at("fragmentation_cases")) {
      const std::string label = id + " case " + std::to_string(case_index++);
      std::vector<MigInstance> occupied;
      for (const json& o : c.at("occupied")) {
        occupied.push_back(
            {Profile(planner, o.at("profile").get<std::string>()), o.at("start").get<int>()});
      }
      auto state = MigGpuState::FromInstances(set, occupied);
      ASSERT_TRUE(state.has_value()) << label << ": " << state.error().message;
      std::vector<int> request;
      for (const json& name : c.at("request")) {
        request.push_back(Profile(planner, name.get<std::string>()));
      }
      const std::vector<MigGpuView> gpus = {MigGpu(0, *state)};
      auto decision = planner.ChooseRequest(gpus, request);
      ASSERT_TRUE(decision.has_value()) << label << ": " << decision.error().message;
      ASSERT_EQ(decision->fits, c.at("feasible").get<bool>())
          << label << ": " << c.at("why").get<std::string>() << " / " << decision->reason;
      ++checked;
      if (!decision->fits) {
        EXPECT_FALSE(decision->reason.empty()) << label;
        continue;
      }
      ASSERT_EQ(decision->instances.size(), request.size()) << label;
      MigGpuState placed = *state;
      for (std::size_t i = 0; i < request.size(); ++i) {
        EXPECT_EQ(decision->instances[i].gpu, 0) << label;
        EXPECT_TRUE(placed.Place(set, request[i], decision->instances[i].start))
            << label << ": instance " << i << " at " << decision->instances[i].start;
      }
      if (request.size() == 1) {
        // A single instance through Choose agrees with ChooseRequest.
        auto single = planner.Choose(gpus, request[0]);
        ASSERT_TRUE(single.has_value());
        EXPECT_TRUE(single->fits);
        EXPECT_EQ(single->start, decision->instances[0].start) << label;
      }
    }
  }
  EXPECT_EQ(checked, 28);
}

TEST(MigPlannerTest, BestFitBeatsFirstFit) {
  const MigPlanner& planner = Planner("a100-80gb");
  const MigProfileSet& set = planner.set();
  const int three_g = Profile(planner, "3g.40gb");
  const int four_g = Profile(planner, "4g.40gb");

  // First fit: lowest legal start that fits.
  MigGpuState first_fit;
  for (int start : set.profiles[static_cast<std::size_t>(three_g)].starts) {
    if (first_fit.Place(set, three_g, start)) break;
  }
  bool four_fits = false;
  for (int start : set.profiles[static_cast<std::size_t>(four_g)].starts) {
    four_fits = four_fits || first_fit.CanPlace(set, four_g, start);
  }
  EXPECT_FALSE(four_fits) << "first fit strands 4g.40gb";

  // Best fit, one instance after the other.
  std::vector<MigGpuView> gpus = {MigGpu(0)};
  auto first = planner.Choose(gpus, three_g);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(first->fits);
  EXPECT_EQ(first->start, 4);
  ASSERT_TRUE(gpus[0].state.Place(set, three_g, first->start));
  auto second = planner.Choose(gpus, four_g);
  ASSERT_TRUE(second.has_value());
  ASSERT_TRUE(second->fits) << second->reason;
  EXPECT_EQ(second->start, 0);
}

TEST(MigPlannerTest, PacksOntoPartiallyUsedGpus) {
  const MigPlanner& planner = Planner("h100-80gb");
  const MigProfileSet& set = planner.set();
  const int one_g = Profile(planner, "1g.10gb");
  const int three_g = Profile(planner, "3g.40gb");
  MigGpuState used;
  ASSERT_TRUE(used.Place(set, three_g, 0));
  // GPU 0 idle (MIG mode, no instances), GPU 1 half used.
  const std::vector<MigGpuView> gpus = {MigGpu(0), MigGpu(1, used)};
  auto decision = planner.Choose(gpus, three_g);
  ASSERT_TRUE(decision.has_value());
  ASSERT_TRUE(decision->fits);
  EXPECT_EQ(decision->gpu, 1);
  EXPECT_EQ(decision->start, 4);
  decision = planner.Choose(gpus, one_g);
  ASSERT_TRUE(decision.has_value());
  ASSERT_TRUE(decision->fits);
  EXPECT_EQ(decision->gpu, 1);
  // 3g at slice 4 leaves slices 0-3: the next 3g completes that GPU instead of opening GPU 0,
  // although opening GPU 0 would lose less summed headroom (1g instances count most there).
  MigGpuState upper;
  ASSERT_TRUE(upper.Place(set, three_g, 4));
  const std::vector<MigGpuView> half_used = {MigGpu(0), MigGpu(1, upper)};
  decision = planner.Choose(half_used, three_g);
  ASSERT_TRUE(decision.has_value());
  ASSERT_TRUE(decision->fits);
  EXPECT_EQ(decision->gpu, 1);
  EXPECT_EQ(decision->start, 0);
  // Lowest index among equals.
  const std::vector<MigGpuView> twins = {MigGpu(3, used), MigGpu(2, used)};
  decision = planner.Choose(twins, three_g);
  ASSERT_TRUE(decision.has_value());
  EXPECT_EQ(decision->gpu, 2);
}

TEST(MigPlannerTest, ExplainsWhyNothingFitsAndSuggestsReconfiguration) {
  const MigPlanner& planner = Planner("a100-80gb");
  const MigProfileSet& set = planner.set();
  const int one_g = Profile(planner, "1g.10gb");
  const int three_g = Profile(planner, "3g.40gb");
  const int four_g = Profile(planner, "4g.40gb");
  MigGpuState half;
  ASSERT_TRUE(half.Place(set, three_g, 0));
  MigGpuState holes;
  for (int start : {0, 1, 5}) ASSERT_TRUE(holes.Place(set, one_g, start));

  MigGpuView whole_busy;  // MIG disabled, used by a pod
  whole_busy.index = 2;
  whole_busy.pods = 1;
  MigGpuView whole_idle;  // MIG disabled, idle
  whole_idle.index = 3;
  const std::vector<MigGpuView> gpus = {MigGpu(0, half), MigGpu(1, holes), whole_busy, whole_idle,
                                        MigGpu(4, holes, /*pods=*/0)};
  auto decision = planner.Choose(gpus, four_g);
  ASSERT_TRUE(decision.has_value());
  EXPECT_FALSE(decision->fits);
  EXPECT_NE(decision->reason.find("no MIG-enabled GPU has a free 4g.40gb window"),
            std::string::npos)
      << decision->reason;
  EXPECT_NE(decision->reason.find("GPU 1 slices 0-1,5 used"), std::string::npos)
      << decision->reason;
  EXPECT_NE(decision->reason.find("GPU 0 slices 0-3 used"), std::string::npos) << decision->reason;
  EXPECT_NE(decision->reason.find("idle GPU 3 could be switched to MIG mode for 4g.40gb"),
            std::string::npos)
      << decision->reason;
  EXPECT_EQ(decision->reconfigurable_gpus, (std::vector<int>{3, 4}));

  std::vector<int> request = {three_g, four_g};
  auto multi = planner.ChooseRequest(gpus, request);
  ASSERT_TRUE(multi.has_value());
  EXPECT_FALSE(multi->fits);
  EXPECT_NE(multi->reason.find("cannot hold 3g.40gb + 4g.40gb together"), std::string::npos)
      << multi->reason;
  EXPECT_EQ(multi->reconfigurable_gpus, (std::vector<int>{3, 4}));

  const std::vector<MigGpuView> none = {whole_busy};
  decision = planner.Choose(none, one_g);
  ASSERT_TRUE(decision.has_value());
  EXPECT_FALSE(decision->fits);
  EXPECT_EQ(decision->reason, "no GPU is in MIG mode");
  EXPECT_TRUE(decision->reconfigurable_gpus.empty());
}

TEST(MigPlannerTest, RejectsBadRequests) {
  const MigPlanner& planner = Planner("a100-40gb");
  const std::vector<MigGpuView> gpus = {MigGpu(0)};
  EXPECT_FALSE(planner.Choose(gpus, -1).has_value());
  EXPECT_FALSE(planner.Choose(gpus, 7).has_value());
  EXPECT_FALSE(planner.ChooseRequest(gpus, std::vector<int>{}).has_value());
  EXPECT_FALSE(planner.ChooseRequest(gpus, std::vector<int>{0, 99}).has_value());
  EXPECT_FALSE(planner.ChooseRequest(gpus, std::vector<int>(65, 0)).has_value());
  // An empty node is not an error: nothing fits.
  auto empty = planner.Choose({}, 0);
  ASSERT_TRUE(empty.has_value());
  EXPECT_FALSE(empty->fits);
}

// Naive exhaustive search without memoisation or symmetry breaking.
bool NaiveFeasible(const MigProfileSet& set, std::vector<MigGpuState>& states,
                   const std::vector<int>& items, std::size_t next) {
  if (next == items.size()) return true;
  for (MigGpuState& state : states) {
    for (int start : set.profiles[static_cast<std::size_t>(items[next])].starts) {
      const MigGpuState saved = state;
      if (!state.Place(set, items[next], start)) continue;
      const bool ok = NaiveFeasible(set, states, items, next + 1);
      state = saved;
      if (ok) return true;
    }
  }
  return false;
}

TEST(MigPlannerTest, MultiGpuRequestsAreExact) {
  const MigPlanner& planner = Planner("h200-141gb");
  const MigProfileSet& set = planner.set();
  std::mt19937 rng(7);
  int feasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<MigGpuView> gpus;
    for (int g = 0; g < 3; ++g) {
      MigGpuState state;
      const int fill = static_cast<int>(rng() % 4);
      for (int i = 0; i < fill; ++i) {
        const int p = static_cast<int>(rng() % set.profiles.size());
        const auto& starts = set.profiles[static_cast<std::size_t>(p)].starts;
        state.Place(set, p, starts[rng() % starts.size()]);
      }
      gpus.push_back(MigGpu(g, state));
    }
    std::vector<int> request(1 + rng() % 5);
    for (int& p : request) p = static_cast<int>(rng() % set.profiles.size());
    std::vector<MigGpuState> states;
    for (const MigGpuView& gpu : gpus) states.push_back(gpu.state);
    const bool expected = NaiveFeasible(set, states, request, 0);
    auto decision = planner.ChooseRequest(gpus, request);
    ASSERT_TRUE(decision.has_value()) << decision.error().message;
    ASSERT_EQ(decision->fits, expected) << "trial " << trial;
    if (!expected) continue;
    ++feasible;
    for (std::size_t i = 0; i < request.size(); ++i) {
      const MigDecision& d = decision->instances[i];
      ASSERT_TRUE(d.gpu >= 0 && d.gpu < 3);
      ASSERT_TRUE(gpus[static_cast<std::size_t>(d.gpu)].state.Place(set, request[i], d.start))
          << "trial " << trial << " instance " << i;
    }
  }
  EXPECT_GT(feasible, 50);
}

TEST(MigPlannerTest, LargeRequestsStayWithinBudget) {
  const MigPlanner& planner = Planner("a100-80gb");
  const int one_g = Profile(planner, "1g.10gb");
  std::vector<MigGpuView> gpus;
  for (int g = 0; g < 8; ++g) gpus.push_back(MigGpu(g));
  // 56 single-slice instances fill 8 GPUs exactly; the 57th does not fit.
  auto full = planner.ChooseRequest(gpus, std::vector<int>(56, one_g));
  ASSERT_TRUE(full.has_value()) << full.error().message;
  EXPECT_TRUE(full->fits);
  auto over = planner.ChooseRequest(gpus, std::vector<int>(57, one_g));
  ASSERT_TRUE(over.has_value()) << over.error().message;
  EXPECT_FALSE(over->fits);
  // A huge mixed request on 16 GPUs is answered or refused as too large, never a crash.
  for (int g = 8; g < 16; ++g) gpus.push_back(MigGpu(g));
  std::vector<int> mixed;
  for (int i = 0; i < 60; ++i) mixed.push_back(i % 6);
  auto answer = planner.ChooseRequest(gpus, mixed);
  if (!answer.has_value()) {
    EXPECT_NE(answer.error().message.find("too large"), std::string::npos);
  }
}

}  // namespace
}  // namespace linkfit::alloc
