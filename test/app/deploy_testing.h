#pragma once

// What the checks on the shipped manifests (deploy_test.cc, deploy_access_test.cc) read them
// with: the kustomization rendered into its documents, and the fields of workloads, containers,
// probes and service accounts.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "linkfit/app/config.h"

namespace linkfit::app {
namespace {

[[maybe_unused]] std::string SourcePath(const std::string& relative) {
  return std::string(LINKFIT_SOURCE_DIR) + "/" + relative;
}

[[maybe_unused]] std::string ReadFile(const std::string& relative) {
  std::ifstream file(SourcePath(relative));
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string Str(const YAML::Node& node) { return node ? node.as<std::string>() : std::string(); }

// Returns data[key] of the ConfigMap `name` in a multi-document manifest.
std::string ConfigMapData(const std::string& manifest, const std::string& name,
                          const std::string& key) {
  for (const YAML::Node& doc : YAML::LoadAll(ReadFile(manifest))) {
    if (doc["kind"] && doc["kind"].as<std::string>() == "ConfigMap" &&
        doc["metadata"]["name"].as<std::string>() == name) {
      return doc["data"][key].as<std::string>();
    }
  }
  ADD_FAILURE() << "no ConfigMap " << name << " in " << manifest;
  return "";
}

// One document of a manifest file listed in deploy/kustomization.yaml.
struct Manifest {
  std::string file;  // relative to the repository root
  YAML::Node doc;
};

[[maybe_unused]] std::vector<std::string> KustomizationResources() {
  std::vector<std::string> files;
  const YAML::Node root = YAML::Load(ReadFile("deploy/kustomization.yaml"));
  for (const YAML::Node& resource : root["resources"]) {
    files.push_back("deploy/" + resource.as<std::string>());
  }
  return files;
}

// Every document of every resource file (parse errors are reported by the test that checks them).
[[maybe_unused]] std::vector<Manifest> Rendered() {
  std::vector<Manifest> out;
  for (const std::string& file : KustomizationResources()) {
    try {
      for (const YAML::Node& doc : YAML::LoadAll(ReadFile(file))) out.push_back({file, doc});
    } catch (const YAML::Exception&) {
    }
  }
  return out;
}

[[maybe_unused]] std::vector<YAML::Node> OfKind(const std::vector<Manifest>& all,
                                                const std::string& kind) {
  std::vector<YAML::Node> out;
  for (const Manifest& m : all) {
    if (m.doc.IsMap() && Str(m.doc["kind"]) == kind) out.push_back(m.doc);
  }
  return out;
}

YAML::Node Find(const std::vector<Manifest>& all, const std::string& kind,
                const std::string& name) {
  for (const YAML::Node& doc : OfKind(all, kind)) {
    if (Str(doc["metadata"]["name"]) == name) return doc;
  }
  ADD_FAILURE() << "no " << kind << " " << name << " in the kustomization";
  return YAML::Node();
}

// The scheduler Deployment and its two processes.
constexpr const char* kDeployment = "linkfit-scheduler";
constexpr const char* kSchedulerProfile = "linkfit-scheduler";

[[maybe_unused]] YAML::Node Container(const YAML::Node& pod_spec, const std::string& name) {
  for (const char* list : {"containers", "initContainers"}) {
    for (const YAML::Node& container : pod_spec[list]) {
      if (Str(container["name"]) == name) return container;
    }
  }
  ADD_FAILURE() << "no container " << name;
  return YAML::Node();
}

// The value after `flag` in a container's args ("--flag value" or "--flag=value").
[[maybe_unused]] std::string FlagValue(const YAML::Node& container, const std::string& flag) {
  std::vector<std::string> args;
  for (const char* list : {"command", "args"}) {
    for (const YAML::Node& arg : container[list]) args.push_back(arg.as<std::string>());
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(flag + "=", 0) == 0) return args[i].substr(flag.size() + 1);
  }
  return "";
}

[[maybe_unused]] int PortOf(const std::string& host_port) {
  const auto colon = host_port.rfind(':');
  return colon == std::string::npos ? -1 : std::stoi(host_port.substr(colon + 1));
}

// A probe's port, resolving a named port against the container's ports.
[[maybe_unused]] int ProbePort(const YAML::Node& container, const YAML::Node& probe) {
  const YAML::Node port = probe["httpGet"]["port"];
  if (!port) return -1;
  const std::string text = port.as<std::string>();
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!text.empty() && std::all_of(text.begin(), text.end(), digit)) return std::stoi(text);
  for (const YAML::Node& declared : container["ports"]) {
    if (Str(declared["name"]) == text) return declared["containerPort"].as<int>();
  }
  ADD_FAILURE() << "probe names undeclared port " << text;
  return -1;
}

[[maybe_unused]] std::string ServiceAccountUser(const YAML::Node& workload) {
  return "system:serviceaccount:" + Str(workload["metadata"]["namespace"]) + ":" +
         Str(workload["spec"]["template"]["spec"]["serviceAccountName"]);
}

}  // namespace
}  // namespace linkfit::app
