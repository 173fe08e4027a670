// `linkfit agent ...`: the node agent is a binary of its own (linkfit-agent links neither the
// extender nor the HTTP server); this runs it from beside the linkfit binary, or from PATH.

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "linkfit/app/cli.h"

namespace linkfit::app {

std::string AgentBinaryPath() {
  std::string self(4096, '\0');
  const ssize_t length = readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (length <= 0) return "linkfit-agent";
  self.resize(static_cast<std::size_t>(length));
  const std::size_t slash = self.rfind('/');
  const std::string beside = self.substr(0, slash + 1) + "linkfit-agent";
  // In a build tree the agent lives in src/agent/, beside src/app/.
  const std::string build_tree = self.substr(0, slash + 1) + "../agent/linkfit-agent";
  if (access(beside.c_str(), X_OK) == 0) return beside;
  if (access(build_tree.c_str(), X_OK) == 0) return build_tree;
  return "linkfit-agent";  // execvp searches PATH
}

int RunAgent(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  out.flush();
  err.flush();
  const std::string binary = AgentBinaryPath();
  std::vector<char*> argv;
  std::string name = "linkfit-agent";
  argv.push_back(name.data());
  std::vector<std::string> copies = args;
  for (std::string& arg : copies) argv.push_back(arg.data());
  argv.push_back(nullptr);
  execvp(binary.c_str(), argv.data());
  err << "linkfit: cannot run the node agent " << binary << ": " << std::strerror(errno)
      << " (it is installed beside linkfit as linkfit-agent)\n";
  return 127;
}

}  // namespace linkfit::app
