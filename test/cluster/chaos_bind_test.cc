// Exactly-once binding under chaos: no GPU is ever held by two pods in the API server. Twelve
// kube-scheduler stand-ins schedule a stream of pods through the real `linkfit serve` binary
// (filter, prioritize, bind; backoff on errors) while the serving process is SIGKILLed with
// Bindings in flight and restarted, a second process takes over from a live first one, and the
// fake API server fails, drops, throttles and delays Bindings, cuts watches and compacts its
// history. A sampler reads the API's pods every 25 ms and checks their allocation records; once
// the storm is over every live linkfit's /inspect must equal those records within 1 s.
//
// Short form (CI): one seed, a 20 s storm, 12 nodes, 250 pods. Long form, for example:
//   LINKFIT_CHAOS_SEEDS=1-20 LINKFIT_CHAOS_SECONDS=90 LINKFIT_CHAOS_NODES=40
//     LINKFIT_CHAOS_PODS=1500 build/dev/test/cluster/linkfit_cluster_chaos_test
// LINKFIT_CHAOS_OLD_CONFIG=1 leaves the exactly-once keys out of linkfit's config (for a binary
// that does not know them); LINKFIT_CHAOS_BINARY runs another `linkfit` than this build tree's.
// Each run prints one "CHAOS seed=..." line.

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cluster/chaos_bind_support.h"
#include "cluster/child_process.h"
#include "cluster/cluster_testing.h"
#include "kube/fake_api_server.h"
#include "testing/fixtures.h"

#ifdef LINKFIT_SERVE_BINARY

namespace linkfit::cluster {
namespace {

using chaos::Clock;
using chaos::SecondsBetween;
using linkfit::testing::DropMode;
using linkfit::testing::RequestMatch;
using linkfit::testing::ServeChild;
using linkfit::testing::ServeChildOptions;
using nlohmann::json;
using std::chrono::milliseconds;

constexpr int kStandIns = 12;
constexpr int kMembers = 3;  // a (killed), b (its restart, then failed over), c (the successor)
constexpr milliseconds kSampleInterval{25};
constexpr milliseconds kBindingDelay{2000};
const RequestMatch kBindingPost{"POST", "/binding"};

struct ChaosParams {
  uint32_t seed = 1;
  int seconds = chaos::EnvInt("LINKFIT_CHAOS_SECONDS", 20);
  int nodes = chaos::EnvInt("LINKFIT_CHAOS_NODES", 12);
  int pods = chaos::EnvInt("LINKFIT_CHAOS_PODS", 250);
  bool exactly_once_keys = chaos::EnvInt("LINKFIT_CHAOS_OLD_CONFIG", 0) != 1;
  std::string binary = std::getenv("LINKFIT_CHAOS_BINARY") != nullptr
                           ? std::getenv("LINKFIT_CHAOS_BINARY")
                           : LINKFIT_SERVE_BINARY;
};

// After the last bind call, the time by which every Binding sent has landed or never will: the
// Binding's deadline and settle margin, or (without them) the API server's longest injected delay.
milliseconds LandingBound(bool exactly_once_keys) {
  return exactly_once_keys ? milliseconds(3500) : kBindingDelay + milliseconds(500);
}

// One linkfit process of a run. port and started are written before the member is published as
// the current one (an atomic store) and read only after loading it.
struct Member {
  std::string name;
  std::unique_ptr<ServeChild> child;  // the controller thread's (and the test's after the join)
  int port = 0;
  Clock::time_point started{};
  std::atomic<int> binds_in_flight{0};
  std::atomic<int64_t> first_bind_ms{-1};  // from its start to its first successful bind
};

// A stand-in's HTTP client, which the controller may cut (stop()) at a failover.
struct Caller {
  std::mutex mutex;
  std::shared_ptr<httplib::Client> client;
  int member = -1;
};

// The shared state of one run: the fake API server, the linkfit processes, the pending pods.
struct ChaosRun {
  explicit ChaosRun(ChaosParams p) : params(std::move(p)) {}

  ChaosParams params;
  linkfit::testing::FakeApiServerPtr fake;
  std::string kubeconfig;
  std::string log_dir;  // the processes' logs and configs; removed when the run passes
  std::vector<std::string> node_names;
  int gpus = 0;
  std::atomic<int> pods_created{0};
  Clock::time_point start = Clock::now();
  std::atomic<bool> stop{false};
  chaos::PodQueue queue;
  std::array<Member, kMembers> members;
  std::atomic<int> current{-1};
  std::array<Caller, kStandIns> callers;
  std::mutex mutex;  // guards what follows
  std::map<std::string, int> faults;
  std::vector<std::string> events;  // the timeline, for the failure message
  std::vector<std::string> errors;
  std::map<std::string, std::string> bound_through;  // pod -> the member that answered success
  int kills = 0;
  int failovers = 0;

  void Note(const std::string& what, std::vector<std::string>* into = nullptr) {
    char at[32];
    std::snprintf(at, sizeof at, "%.2fs ", SecondsBetween(start, Clock::now()));
    std::lock_guard<std::mutex> lock(mutex);
    (into != nullptr ? *into : events).push_back(at + what);
  }
  void CountFault(const std::string& kind) {
    std::lock_guard<std::mutex> lock(mutex);
    ++faults[kind];
  }

  // Starts member `index` with the run's config and waits until it is ready.
  bool StartMember(int index) {
    Member& member = members[static_cast<std::size_t>(index)];
    member.name = std::string(1, static_cast<char>('a' + index));
    member.started = Clock::now();
    member.child = std::make_unique<ServeChild>(
        ServeChildOptions{.binary = params.binary,
                          .kubeconfig = kubeconfig,
                          .config_text = chaos::LinkfitConfig(params.exactly_once_keys),
                          .log_path = log_dir + "/linkfit-" + member.name + ".log",
                          .env = {"POD_NAME=linkfit-" + member.name}});
    member.port = member.child->port();
    const bool ready = member.port > 0 && member.child->WaitReady();
    Note("linkfit-" + member.name + (ready ? " ready" : " did not start, see ") +
             (ready ? "" : member.child->log_path()),
         ready ? nullptr : &errors);
    return ready;
  }

  // The stand-in's client for member `index` (a new one when the member changed).
  std::shared_ptr<httplib::Client> ClientFor(int stand_in, int index) {
    Caller& caller = callers[static_cast<std::size_t>(stand_in)];
    std::lock_guard<std::mutex> lock(caller.mutex);
    if (caller.member != index || caller.client == nullptr) {
      caller.client = std::make_shared<httplib::Client>(
          "127.0.0.1", members[static_cast<std::size_t>(index)].port);
      caller.client->set_connection_timeout(1);
      caller.client->set_read_timeout(5);  // kube-scheduler's default extender httpTimeout
      caller.member = index;
    }
    return caller.client;
  }

  // Cuts the stand-ins' connections to member `index`; their calls in flight fail.
  void CutCallers(int index) {
    for (Caller& caller : callers) {
      std::lock_guard<std::mutex> lock(caller.mutex);
      if (caller.member == index && caller.client != nullptr) caller.client->stop();
    }
  }
};

// The reply's JSON when linkfit answered 200, else null.
json Answer(const httplib::Result& reply) {
  return reply && reply->status == 200 ? json::parse(reply->body, nullptr, false) : json();
}

// kube-scheduler's filter and prioritize for `pod`; returns the chosen node, "" when none fits
// or linkfit does not answer.
std::string PickNode(httplib::Client& client, const json& pod, const std::vector<std::string>& all,
                     std::mt19937& rng) {
  const std::string filter_args = json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", all}}.dump();
  const json result = Answer(client.Post("/scheduler/filter", filter_args, "application/json"));
  if (!result.is_object() || !result.value("Error", "").empty() ||
      !result.value("NodeNames", json()).is_array() || result["NodeNames"].empty()) {
    return "";
  }
  const auto passing = result["NodeNames"].get<std::vector<std::string>>();
  std::vector<std::string> best = passing;
  if (passing.size() > 1) {  // one feasible node is taken without prioritize, as upstream
    const std::string args = json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", passing}}.dump();
    const json scores = Answer(client.Post("/scheduler/prioritize", args, "application/json"));
    int64_t top = -1;
    for (const json& host : scores.is_array() ? scores : json::array()) {
      if (!host.is_object()) continue;
      const int64_t score = host.value("Score", int64_t{0});
      if (score > top) best.clear();
      if (score >= top) best.push_back(host.value("Host", ""));
      top = std::max(top, score);
    }
    if (best.empty()) best = passing;  // a prioritize error only costs the scores
  }
  return best[std::uniform_int_distribution<std::size_t>(0, best.size() - 1)(rng)];
}

// One kube-scheduler stand-in: take a pending pod, filter, prioritize and bind it through the
// current linkfit; on any failure put it back with a backoff.
void StandIn(ChaosRun& run, int index) {
  std::mt19937 rng(run.params.seed * 1000 + static_cast<uint32_t>(index));
  while (!run.stop) {
    auto entry = run.queue.Take();
    if (!entry) {
      std::this_thread::sleep_for(milliseconds(5));
      continue;
    }
    // The informer's view: a pod already bound (an earlier Binding landed) or gone is dropped.
    const auto pod = run.fake->GetPod("ml", entry->name);
    if (!pod || (*pod)["spec"].contains("nodeName")) continue;
    const int m = run.current.load();
    Member& member = run.members[static_cast<std::size_t>(m)];
    const auto client = run.ClientFor(index, m);
    const std::string node = PickNode(*client, *pod, run.node_names, rng);
    bool bound = false;
    if (!node.empty()) {
      const std::string body = json{
          {"PodName", entry->name},
          {"PodNamespace", "ml"},
          {"PodUID", (*pod)["metadata"]["uid"]},
          {"Node", node}}.dump();
      ++member.binds_in_flight;
      const json reply = Answer(client->Post("/scheduler/bind", body, "application/json"));
      --member.binds_in_flight;
      bound = reply.is_object() && reply.value("Error", "x").empty();
    }
    if (!bound) {
      run.queue.Backoff(std::move(*entry));
      continue;
    }
    int64_t none = -1;
    const auto since_start =
        std::chrono::duration_cast<milliseconds>(Clock::now() - member.started);
    member.first_bind_ms.compare_exchange_strong(none, since_start.count());
    std::lock_guard<std::mutex> lock(run.mutex);
    run.bound_through[entry->name] = member.name;
  }
}

// Pods arrive over the first 70% of the storm (1, 2, 4 or 8 GPUs); a bound pod starts Running
// and, after its lifetime, Succeeds or is deleted. Lifetimes keep the demand near 110% of the
// GPUs, so that pods wait and GPUs are reused.
void Lifecycle(ChaosRun& run) {
  std::mt19937 rng(run.params.seed * 7919);
  const double arrival_s = 0.7 * run.params.seconds;
  const double mean_lifetime = std::clamp(1.1 * run.gpus * arrival_s / (run.params.pods * 2.6), 0.5,
                                          30.0);  // 2.6: the mean size
  std::discrete_distribution<int> size_of({40, 30, 20, 10});
  std::uniform_real_distribution<double> lifetime(0.5 * mean_lifetime, 1.5 * mean_lifetime);
  std::map<std::string, std::pair<double, double>> lives;  // name -> {lifetime, bound at}
  int created = 0;
  while (!run.stop) {
    const double now = SecondsBetween(run.start, Clock::now());
    const int due = std::min(run.params.pods, static_cast<int>(run.params.pods * now / arrival_s));
    for (; created < due; ++created) {
      const std::string name = "p" + std::to_string(created);
      const int gpus = 1 << size_of(rng);
      if (!run.fake->AddPod(testing::PodObject({.name = name, .gpus = gpus, .phase = "Pending"}))) {
        run.Note("AddPod " + name + " failed", &run.errors);
      }
      lives[name] = {lifetime(rng), -1};
      run.queue.Add(name);
      ++run.pods_created;
    }
    for (const json& pod : run.fake->Pods()) {
      const std::string name = pod["metadata"]["name"];
      if (!pod["spec"].contains("nodeName") || pod["status"]["phase"] == "Succeeded") continue;
      auto& [life, bound_at] = lives[name];
      if (bound_at < 0) {
        bound_at = now;
        run.fake->SetPodPhase("ml", name, "Running");
      } else if (now - bound_at >= life) {
        const bool remove = rng() % 2 == 0;
        const auto done = remove ? run.fake->DeletePod("ml", name)
                                 : run.fake->SetPodPhase("ml", name, "Succeeded");
        if (done) run.CountFault(remove ? "pods_deleted" : "pods_succeeded");
      }
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
}

// The fault injector and the process events of one run, on one thread: random faults about
// once a second; a SIGKILL of the serving process with Bindings in flight (during a binding
// delay) and its restart; a failover to a second process while the first is alive with Bindings
// in flight, and later the first one's stop (SIGTERM or SIGKILL).
class Controller {
 public:
  explicit Controller(ChaosRun& run) : run_(run), rng_(run.params.seed) {}

  void Loop() {
    const double storm = run_.params.seconds;
    // With the binder lease a restart after a SIGKILL binds only after one lease duration (6 s)
    // and a successor once the old holder has gone idle (about 3.5 s): the events come early
    // enough that the successor binds well before the storm ends.
    const double kill_at = storm * Uniform(0.06, 0.1);
    const double failover_at = storm * Uniform(0.4, 0.45);
    while (!run_.stop) {
      const double now = Now();
      if (Uniform(0, 1) < 0.08) RandomFault();
      if (delay_until_ && Clock::now() > *delay_until_) {
        run_.fake->SetBindingDelay(milliseconds(0));
        delay_until_.reset();
      }
      if (run_.kills == 0 && now >= kill_at) KillAndRestart();
      const bool serving = run_.members[1].first_bind_ms >= 0 || now >= storm - 6;
      if (run_.kills == 1 && run_.failovers == 0 && now >= failover_at && serving) Failover();
      if (stop_old_at_ && now >= *stop_old_at_) StopOld();
      std::this_thread::sleep_for(milliseconds(100));
    }
    if (stop_old_at_) StopOld();
  }

 private:
  double Now() const { return SecondsBetween(run_.start, Clock::now()); }
  double Uniform(double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng_);
  }
  int Count(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }

  // Every Binding is delayed by 2 s for `length` (episodes may overlap and extend each other).
  void DelayBindings(milliseconds length) {
    run_.fake->SetBindingDelay(kBindingDelay);
    const auto until = Clock::now() + length;
    delay_until_ = delay_until_ ? std::max(*delay_until_, until) : until;
  }

  void RandomFault() {
    switch (Count(0, 5)) {
      case 0:
        run_.fake->FailNext(Count(1, 3), 500, kBindingPost);
        return run_.CountFault("fail500");
      case 1:
        run_.fake->DropNext(Count(1, 2), DropMode::kAfterApply, kBindingPost);
        return run_.CountFault("drop_after_apply");
      case 2:
        run_.fake->FailNext(Count(1, 3), 429, kBindingPost, 1);
        return run_.CountFault("throttle429");
      case 3:
        DelayBindings(milliseconds(Count(2000, 4000)));
        return run_.CountFault("binding_delay");
      case 4:
        run_.fake->CutWatches();
        return run_.CountFault("cut_watches");
      default:
        run_.fake->Compact();
        return run_.CountFault("compact");
    }
  }

  // Waits (up to 3 s) until `member` has a bind in flight that the API server is delaying.
  void AwaitBindsInFlight(const Member& member) {
    const auto since = Clock::now();
    while (Clock::now() - since < std::chrono::seconds(3) &&
           (member.binds_in_flight == 0 || Clock::now() - since < milliseconds(400))) {
      std::this_thread::sleep_for(milliseconds(5));
    }
  }

  void KillAndRestart() {
    const int old = run_.current.load();
    Member& member = run_.members[static_cast<std::size_t>(old)];
    DelayBindings(milliseconds(3000));
    AwaitBindsInFlight(member);
    const int in_flight = member.binds_in_flight;
    member.child->Kill(SIGKILL);
    run_.Note("SIGKILL linkfit-" + member.name + " with " + std::to_string(in_flight) +
              " binds in flight");
    ++run_.kills;
    if (run_.StartMember(old + 1)) run_.current = old + 1;
  }

  void Failover() {
    const int old = run_.current.load();
    ++run_.failovers;
    if (!run_.StartMember(old + 1)) return;
    const Member& from = run_.members[static_cast<std::size_t>(old)];
    DelayBindings(milliseconds(3000));
    AwaitBindsInFlight(from);
    const int in_flight = from.binds_in_flight;
    run_.current = old + 1;
    run_.CutCallers(old);
    run_.Note("failover linkfit-" + from.name + " -> linkfit-" +
              run_.members[static_cast<std::size_t>(old + 1)].name + " with " +
              std::to_string(in_flight) + " binds in flight at linkfit-" + from.name);
    stop_old_ = old;
    stop_old_at_ = Now() + Uniform(4, 5);
  }

  void StopOld() {
    Member& member = run_.members[static_cast<std::size_t>(stop_old_)];
    const bool graceful = rng_() % 2 == 0;
    if (graceful) {
      const bool clean = member.child->Terminate();
      run_.Note("SIGTERM linkfit-" + member.name + (clean ? ": exited" : ": killed after 10 s"));
    } else {
      member.child->Kill(SIGKILL);
      run_.Note("SIGKILL linkfit-" + member.name + " (the failed-over one)");
    }
    run_.CountFault(graceful ? "old_stopped_sigterm" : "old_stopped_sigkill");
    stop_old_at_.reset();
  }

  ChaosRun& run_;
  std::mt19937 rng_;
  std::optional<Clock::time_point> delay_until_;
  int stop_old_ = -1;
  std::optional<double> stop_old_at_;
};

// Adds the nodes (every third a 16-GPU DGX-2, the others 8-GPU DGX H100s).
bool AddNodes(ChaosRun& run) {
  for (int i = 0; i < run.params.nodes; ++i) {
    const bool big = i % 3 == 2;
    const std::string name = (big ? "dgx2-" : "h100-") + std::to_string(i);
    auto added = run.fake->AddNode(
        testing::NodeObject(name, testing::TopologyDocument(big ? "dgx2-v100" : "dgx-h100")));
    if (!added) return false;
    run.node_names.push_back(name);
    run.gpus += big ? 16 : 8;
  }
  return true;
}

std::string Report(const ChaosRun& run, const chaos::Sampler& sampler,
                   const std::string& cache_equal) {
  std::ostringstream line;
  line << "CHAOS seed=" << run.params.seed
       << " config=" << (run.params.exactly_once_keys ? "exactly-once" : "old")
       << " storm_s=" << run.params.seconds << " nodes=" << run.params.nodes << " gpus=" << run.gpus
       << " pods=" << run.params.pods << " pods_created=" << run.pods_created
       << " pods_bound=" << sampler.pods_bound() << " bindings_sent=" << run.fake->Bindings().size()
       << " faults=";
  for (const auto& [kind, count] : run.faults) line << kind << ":" << count << ",";
  line << " kills=" << run.kills << " failovers=" << run.failovers
       << " samples=" << sampler.samples() << " violation_samples=" << sampler.violation_samples()
       << " violations=" << sampler.violations().size() << " held_after_start=";
  for (const Member& member : run.members) {
    if (member.child == nullptr) continue;
    const int64_t ms = member.first_bind_ms.load();
    line << member.name << ":" << (ms < 0 ? "none" : std::to_string(ms) + "ms") << ",";
  }
  line << " cache_equal_after_quiet=" << cache_equal;
  return line.str();
}

// The failure message for violations: each one with the Bindings of its two pods.
std::string ExplainViolations(const ChaosRun& run, const chaos::Sampler& sampler) {
  std::map<std::string, std::string> attempts;  // pod -> " #index:status ..."
  const auto bindings = run.fake->Bindings();
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    attempts[bindings[i].pod_name] +=
        " #" + std::to_string(i) + ":" + std::to_string(bindings[i].status);
  }
  std::ostringstream out;
  for (const auto& [key, violation] : sampler.violations()) {
    out << violation << "\n";
    const auto first = key.find('|');
    const auto second = key.find('|', first + 1);
    if (second == std::string::npos) continue;  // a pod without a good record
    for (const std::string& pod :
         {key.substr(0, first), key.substr(first + 1, second - first - 1)}) {
      const auto through = run.bound_through.find(pod);
      out << "  " << pod << ": Bindings (#order:status, 0 = reply dropped)" << attempts[pod] << "; "
          << (through == run.bound_through.end()
                  ? "no linkfit answered success"
                  : "linkfit-" + through->second + " answered success")
          << "\n";
    }
  }
  return out.str();
}

// What happened when, and where the logs are (kept when the run fails).
std::string Timeline(const ChaosRun& run) {
  std::ostringstream out;
  out << "timeline (seconds from the first linkfit's start):\n";
  for (const std::string& event : run.events) out << "  " << event << "\n";
  out << "logs:";
  for (const Member& member : run.members) {
    if (member.child != nullptr) out << " " << member.child->log_path();
  }
  return out.str();
}

class ChaosBindTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(ChaosBindTest, NoGpuIsEverHeldByTwoPods) {
  ChaosParams params;
  params.seed = GetParam();
  ChaosRun run(params);
  linkfit::testing::FakeApiServerOptions options;
  options.bookmark_interval = milliseconds(200);
  auto fake = linkfit::testing::StartFakeApiServer(options);
  ASSERT_TRUE(fake.has_value()) << fake.error().message;
  run.fake = std::move(*fake);
  auto kubeconfig = run.fake->WriteKubeconfig();
  ASSERT_TRUE(kubeconfig.has_value());
  run.kubeconfig = *kubeconfig;
  ASSERT_TRUE(AddNodes(run));
  run.log_dir = ::testing::TempDir() + "linkfit-chaos-" + std::to_string(getpid()) + "-seed-" +
                std::to_string(params.seed);
  std::filesystem::create_directories(run.log_dir);
  run.start = Clock::now();
  ASSERT_TRUE(run.StartMember(0)) << run.members[0].child->log_path();
  run.current = 0;

  chaos::Sampler sampler(run.start);
  std::atomic<bool> sampling{true};
  std::thread sampler_thread([&] {
    while (sampling) {
      sampler.Sample(run.fake->Pods());
      std::this_thread::sleep_for(kSampleInterval);
    }
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < kStandIns; ++i) threads.emplace_back(StandIn, std::ref(run), i);
  threads.emplace_back(Lifecycle, std::ref(run));
  Controller controller(run);
  threads.emplace_back([&] { controller.Loop(); });
  std::this_thread::sleep_for(std::chrono::seconds(params.seconds));
  // A slow machine (a sanitizer build) may reach the end before the successor's first bind:
  // the storm goes on, up to 30 s more, until it has bound one.
  for (int i = 0; i < 300 && run.members[2].first_bind_ms.load() < 0; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  run.stop = true;
  for (std::thread& thread : threads) thread.join();

  // Quiet: no faults, no bind calls; once every Binding sent has landed or never will, each live
  // linkfit must show exactly the API's records.
  run.fake->ClearFaults();
  run.fake->SetBindingDelay(milliseconds(0));
  std::this_thread::sleep_for(LandingBound(params.exactly_once_keys));
  std::string cache_equal;
  std::vector<std::string> late;
  for (const Member& member : run.members) {
    if (member.child == nullptr || !member.child->running()) continue;
    std::string difference;
    const auto took =
        chaos::CacheEqualAfter(*run.fake, member.port, std::chrono::seconds(10), &difference);
    cache_equal += member.name + ":" + (took ? std::to_string(*took).substr(0, 5) + "s" : "never");
    if (!took || *took > 1.0) {
      late.push_back("linkfit-" + member.name +
                     (took ? " took " + std::to_string(*took) + " s" : " never was (10 s)") +
                     "; the last difference: " + difference);
    }
  }
  sampling = false;
  sampler_thread.join();
  sampler.Sample(run.fake->Pods());

  std::printf("%s\n", Report(run, sampler, cache_equal).c_str());
  std::fflush(stdout);
  for (const std::string& error : run.errors) ADD_FAILURE() << error;
  EXPECT_EQ(run.kills, 1);
  EXPECT_EQ(run.failovers, 1);
  EXPECT_GT(sampler.pods_bound(), 0u);
  EXPECT_GE(run.members[2].first_bind_ms.load(), 0) << "the successor never bound a pod";
  for (const std::string& difference : late) {
    ADD_FAILURE() << "not equal to the API's records within 1 s of quiet: " << difference;
  }
  EXPECT_EQ(sampler.violations().size(), 0u) << ExplainViolations(run, sampler);
  if (HasFailure()) {
    std::printf("%s\n", Timeline(run).c_str());
  } else {
    std::filesystem::remove_all(run.log_dir);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, ChaosBindTest, ::testing::ValuesIn(chaos::SeedsFromEnv()),
                         [](const ::testing::TestParamInfo<uint32_t>& seed_info) {
                           return "seed_" + std::to_string(seed_info.param);
                         });

}  // namespace
}  // namespace linkfit::cluster

#endif  // LINKFIT_SERVE_BINARY
