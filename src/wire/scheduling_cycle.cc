#include "linkfit/wire/scheduling_cycle.h"

#include <map>
#include <string>
#include <utility>

#include "linkfit/common/json_string.h"

namespace linkfit::wire {
namespace {

// The string at object[key], or "" when absent or not a string.
std::string StringAt(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A failure map of a filter reply: node -> reason (a map that is absent or null is empty).
Result<std::map<std::string, std::string>> FailureMap(const nlohmann::json& reply,
                                                      const char* key) {
  std::map<std::string, std::string> failures;
  const auto it = reply.find(key);
  if (it == reply.end() || it->is_null()) return failures;
  if (!it->is_object()) return MakeError(std::string("filter reply: ") + key + " is not a map");
  for (const auto& [node, reason] : it->items()) {
    if (!reason.is_string()) {
      return MakeError(std::string("filter reply: ") + key + "[" + node + "] is not a string");
    }
    failures.emplace(node, reason.get<std::string>());
  }
  return failures;
}

}  // namespace

std::string CacheModeBody(std::string_view pod_json, const std::vector<std::string>& names,
                          std::size_t count, std::size_t first) {
  std::string body = R"({"Pod":)";
  body.append(pod_json);
  body += R"(,"Nodes":null,"NodeNames":[)";
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) body += ',';
    json::AppendString(body, names[(first + i) % names.size()]);
  }
  body += "]}";
  return body;
}

std::string BindingBody(std::string_view pod_name, std::string_view pod_namespace,
                        std::string_view uid, std::string_view node) {
  return R"({"PodName":)" + json::Quote(pod_name) + R"(,"PodNamespace":)" +
         json::Quote(pod_namespace) + R"(,"PodUID":)" + json::Quote(uid) + R"(,"Node":)" +
         json::Quote(node) + "}";
}

std::string FirstBest(const std::vector<std::string>& passed,
                      const std::vector<HostScore>& scores) {
  std::string best = passed.empty() ? std::string() : passed.front();
  std::int64_t best_score = -1;
  for (const HostScore& entry : scores) {
    if (entry.score > best_score) {
      best_score = entry.score;
      best = entry.host;
    }
  }
  return best;
}

Result<FilterAnswer> SchedulingCycle::Filter(const CyclePod& pod,
                                             const std::vector<std::string>& names) {
  nlohmann::json reply;
  LINKFIT_ASSIGN_OR_RETURN(reply, client_.VerbJson("filter", CacheModeBody(pod.json, names)));
  if (!reply.is_object()) return MakeError("filter reply is not an object");
  FilterAnswer answer;
  answer.error = StringAt(reply, "Error");
  if (const auto it = reply.find("NodeNames"); it != reply.end() && !it->is_null()) {
    if (!it->is_array()) return MakeError("filter reply: NodeNames is not a list");
    for (const auto& name : *it) {
      if (!name.is_string()) return MakeError("filter reply: a NodeNames entry is not a string");
      answer.passed.push_back(name.get<std::string>());
    }
  }
  std::map<std::string, std::string> failed;
  std::map<std::string, std::string> unresolvable;
  LINKFIT_ASSIGN_OR_RETURN(failed, FailureMap(reply, "FailedNodes"));
  LINKFIT_ASSIGN_OR_RETURN(unresolvable, FailureMap(reply, "FailedAndUnresolvableNodes"));
  for (const std::string& node : names) {
    if (const auto it = unresolvable.find(node); it != unresolvable.end()) {
      answer.failed.emplace_back(node, it->second);
      answer.unresolvable.insert(node);
    } else if (const auto other = failed.find(node); other != failed.end()) {
      answer.failed.emplace_back(node, other->second);
    }
  }
  return answer;
}

Result<std::vector<HostScore>> SchedulingCycle::Prioritize(const CyclePod& pod,
                                                           const std::vector<std::string>& names) {
  nlohmann::json reply;
  LINKFIT_ASSIGN_OR_RETURN(reply, client_.VerbJson("prioritize", CacheModeBody(pod.json, names)));
  if (!reply.is_array()) return MakeError("prioritize reply is not a list");
  std::vector<HostScore> scores;
  for (const auto& entry : reply) {
    const auto host = entry.is_object() ? entry.find("Host") : entry.end();
    const auto score = entry.is_object() ? entry.find("Score") : entry.end();
    if (host == entry.end() || !host->is_string() || score == entry.end() ||
        !score->is_number_integer()) {
      return MakeError("prioritize reply: an entry is not {Host, Score}: " + entry.dump());
    }
    scores.push_back({host->get<std::string>(), score->get<std::int64_t>()});
  }
  return scores;
}

Result<std::string> SchedulingCycle::Bind(const CyclePod& pod, std::string_view node) {
  nlohmann::json reply;
  LINKFIT_ASSIGN_OR_RETURN(
      reply, client_.VerbJson("bind", BindingBody(pod.name, pod.pod_namespace, pod.uid, node)));
  if (!reply.is_object()) return MakeError("bind reply is not an object");
  return StringAt(reply, "Error");
}

Result<CycleOutcome> SchedulingCycle::Schedule(const CyclePod& pod,
                                               const std::vector<std::string>& names,
                                               const ChooseNode& choose) {
  CycleOutcome outcome;
  LINKFIT_ASSIGN_OR_RETURN(outcome.filter, Filter(pod, names));
  if (!outcome.filter.error.empty() || outcome.filter.passed.empty()) return outcome;
  outcome.node = outcome.filter.passed.front();
  if (outcome.filter.passed.size() >= 2) {
    LINKFIT_ASSIGN_OR_RETURN(outcome.scores, Prioritize(pod, outcome.filter.passed));
    outcome.node = choose(outcome.filter.passed, outcome.scores);
  }
  LINKFIT_ASSIGN_OR_RETURN(outcome.bind_error, Bind(pod, outcome.node));
  return outcome;
}

}  // namespace linkfit::wire
