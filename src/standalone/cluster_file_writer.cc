#include <cstdio>
#include <fstream>
#include <sstream>

#include "linkfit/standalone/cluster_file.h"

namespace linkfit::standalone {
namespace {

// A YAML double-quoted scalar: backslash and quote escaped, control characters as \xHH.
std::string Quote(const std::string& text) {
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", static_cast<unsigned>(c));
      quoted += escaped;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

template <typename T, typename Write>
void List(std::ostream& out, const std::vector<T>& items, Write write) {
  out << "[";
  const char* separator = "";
  for (const T& item : items) {
    out << separator;
    write(item);
    separator = ", ";
  }
  out << "]";
}

void EncodeNode(std::ostream& out, const ClusterFileNode& node) {
  if (!node.name.empty()) {
    out << "  - name: " << Quote(node.name) << "\n";
  } else {
    out << "  - name_prefix: " << Quote(node.name_prefix) << "\n    count: " << node.count << "\n";
  }
  out << "    topology: " << Quote(node.topology) << "\n";
  if (!node.labels.empty()) {
    out << "    labels: {";
    const char* separator = "";
    for (const auto& [key, value] : node.labels) {
      out << separator << Quote(key) << ": " << Quote(value);
      separator = ", ";
    }
    out << "}\n";
  }
  if (node.mig_all) {
    out << "    mig: all\n";
  } else if (!node.mig_gpus.empty()) {
    out << "    mig: ";
    List(out, node.mig_gpus, [&](int gpu) { out << gpu; });
    out << "\n";
  }
  if (!node.cpu.empty()) out << "    cpu: " << Quote(node.cpu) << "\n";
  if (!node.memory.empty()) out << "    memory: " << Quote(node.memory) << "\n";
}

void EncodeAllocation(std::ostream& out, const ClusterFileAllocation& a) {
  out << "  - {pod: " << Quote(a.pod) << ", uid: " << Quote(a.uid) << ", node: " << Quote(a.node);
  if (!a.gpus.empty()) {
    out << ", gpus: ";
    List(out, a.gpus, [&](int gpu) { out << gpu; });
  }
  if (!a.mig.empty()) {
    out << ", mig: ";
    List(out, a.mig, [&](const ClusterFileAllocation::Mig& m) {
      out << "{gpu: " << m.gpu << ", profile: " << Quote(m.profile) << ", start: " << m.start
          << "}";
    });
  }
  if (!a.shares.empty()) {
    out << ", shares: ";
    List(out, a.shares, [&](const ClusterFileAllocation::Share& s) {
      out << "{gpu: " << s.gpu << ", milli: " << s.milli << "}";
    });
  }
  if (!a.cpu.empty()) out << ", cpu: " << Quote(a.cpu);
  if (!a.memory.empty()) out << ", memory: " << Quote(a.memory);
  out << "}\n";
}

}  // namespace

std::string EncodeClusterFile(const ClusterFile& file) {
  std::ostringstream out;
  if (!file.comment.empty()) {
    std::istringstream lines(file.comment);
    for (std::string line; std::getline(lines, line);) out << "# " << line << "\n";
  }
  out << "nodes:\n";
  for (const ClusterFileNode& node : file.nodes) EncodeNode(out, node);
  out << "allocations:" << (file.allocations.empty() ? " []\n" : "\n");
  for (const ClusterFileAllocation& allocation : file.allocations) {
    EncodeAllocation(out, allocation);
  }
  return out.str();
}

Result<void> WriteClusterFile(const std::string& path, const ClusterFile& file) {
  std::ofstream out(path, std::ios::trunc);
  out << EncodeClusterFile(file);
  out.close();
  if (!out) return MakeError(path + ": cannot write");
  return {};
}

}  // namespace linkfit::standalone
