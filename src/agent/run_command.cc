#include "agent/run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "linkfit/agent/discovery.h"

extern char** environ;

namespace linkfit::agent {
namespace {

std::string CommandLine(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) line += (line.empty() ? "" : " ") + arg;
  return "`" + line + "`";
}

// Closes both ends of a pipe on scope exit (those still open).
struct Pipe {
  int fds[2] = {-1, -1};
  ~Pipe() {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }
  void Close(int end) {
    if (fds[end] >= 0) close(fds[end]);
    fds[end] = -1;
  }
};

}  // namespace

Result<std::string> RunCommand(const std::vector<std::string>& argv, const RunLimits& limits) {
  if (argv.empty()) return MakeError("no command to run");
  const std::string what = CommandLine(argv);
  Pipe out;
  Pipe err;
  if (pipe2(out.fds, O_CLOEXEC) != 0 || pipe2(err.fds, O_CLOEXEC) != 0) {
    return MakeError(what + ": pipe: " + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out.fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    return MakeError(what + ": " + (spawned == ENOENT ? "not found" : std::strerror(spawned)));
  }
  out.Close(1);
  err.Close(1);

  std::string stdout_text;
  std::string stderr_text;
  bool too_large = false;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + limits.timeout;
  pollfd fds[2] = {{out.fds[0], POLLIN, 0}, {err.fds[0], POLLIN, 0}};
  int open_fds = 2;
  char buffer[65536];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int ready = poll(fds, 2, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = read(fds[i].fd, buffer, sizeof(buffer));
      if (got <= 0) {
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      std::string& text = i == 0 ? stdout_text : stderr_text;
      const std::size_t limit = i == 0 ? limits.max_output : 4096;
      if (text.size() + static_cast<std::size_t>(got) > limit) {
        if (i == 0) too_large = true;
        text.append(buffer, limit - std::min(limit, text.size()));
      } else {
        text.append(buffer, static_cast<std::size_t>(got));
      }
    }
    if (too_large) break;
  }
  if (timed_out || too_large) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return MakeError(what + ": killed after " + std::to_string(limits.timeout.count()) + " ms");
  }
  if (too_large) {
    return MakeError(what + ": printed more than " + std::to_string(limits.max_output) + " bytes");
  }
  if (WIFSIGNALED(status)) {
    return MakeError(what + ": killed by signal " + std::to_string(WTERMSIG(status)));
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 127 && stdout_text.empty()) return MakeError(what + ": not found");
  if (code != 0) {
    const std::string first = stderr_text.substr(0, stderr_text.find('\n'));
    const std::string stdout_first = stdout_text.substr(0, stdout_text.find('\n'));
    return MakeError(
        what + ": exit status " + std::to_string(code) +
        (first.empty() ? (stdout_first.empty() ? "" : ": " + stdout_first) : ": " + first));
  }
  return stdout_text;
}

CommandRunner SystemCommandRunner() {
  return [](const std::vector<std::string>& argv) { return RunCommand(argv, RunLimits{}); };
}

}  // namespace linkfit::agent
