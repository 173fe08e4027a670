#include "agent/run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "linkfit/agent/discovery.h"

extern char** environ;

namespace linkfit::agent {
namespace {

// Bytes of standard error kept for the message (only its first line is shown).
constexpr std::size_t kStderrKept = 4096;

std::string CommandLine(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) line += (line.empty() ? "" : " ") + arg;
  return "`" + line + "`";
}

// Closes both ends of a pipe on scope exit (those still open).
struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() = default;
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() {
    Close(0);
    Close(1);
  }
  void Close(int end) {
    if (fds[end] >= 0) close(fds[end]);
    fds[end] = -1;
  }
};

// posix_spawn's attribute and file-action objects, destroyed on scope exit.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
  }
};

// The child gets stdin from /dev/null, the pipes as stdout and stderr, its own process group (so
// a timeout kills whatever it started too), no blocked signals and default dispositions for the
// signals the agent may ignore or handle (ignored ones would survive exec).
void Prepare(SpawnSetup& setup, const Pipe& out, const Pipe& err) {
  posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, out.fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, err.fds[1], STDERR_FILENO);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&setup.attributes, &none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int signal_number : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) {
    sigaddset(&defaults, signal_number);
  }
  posix_spawnattr_setsigdefault(&setup.attributes, &defaults);
  posix_spawnattr_setpgroup(&setup.attributes, 0);
  posix_spawnattr_setflags(
      &setup.attributes,
      static_cast<short>(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF));
}

// What the child printed, and whether reading stopped early.
struct Collected {
  std::string stdout_text;
  std::string stderr_text;
  bool too_large = false;
  bool timed_out = false;
};

std::chrono::milliseconds Left(std::chrono::steady_clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now()));
}

// Reads both pipes until the child closes them, stdout passes `max_output` or the deadline.
// Standard error is drained past kStderrKept so that the child never blocks on it.
Collected Collect(int stdout_fd, int stderr_fd, std::size_t max_output,
                  std::chrono::steady_clock::time_point deadline) {
  Collected collected;
  pollfd fds[2] = {{stdout_fd, POLLIN, 0}, {stderr_fd, POLLIN, 0}};
  int open_fds = 2;
  char buffer[65536];
  while (open_fds > 0 && !collected.too_large) {
    const std::chrono::milliseconds left = Left(deadline);
    if (left.count() == 0) {
      collected.timed_out = true;
      break;
    }
    const int ready = poll(fds, 2, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      collected.timed_out = true;  // cannot wait for it any more: treat like a timeout
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = read(fds[i].fd, buffer, sizeof(buffer));
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      std::string& text = i == 0 ? collected.stdout_text : collected.stderr_text;
      const std::size_t limit = i == 0 ? max_output : kStderrKept;
      const std::size_t room = limit - std::min(limit, text.size());
      text.append(buffer, std::min(room, static_cast<std::size_t>(got)));
      if (i == 0 && static_cast<std::size_t>(got) > room) collected.too_large = true;
    }
  }
  return collected;
}

// Waits for the child until the deadline; returns false if it is still running then.
bool WaitUntil(pid_t pid, int& status, std::chrono::steady_clock::time_point deadline) {
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return true;
    if (done < 0 && errno != EINTR) return true;  // not our child any more: nothing to wait for
    if (Left(deadline).count() == 0) return false;
    std::this_thread::sleep_for(std::min(pause, Left(deadline)));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

// Kills the child's process group and reaps the child. The group id cannot have been reused:
// the unreaped child still holds it.
void KillAndReap(pid_t pid) {
  kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

Result<std::string> RunCommand(const std::vector<std::string>& argv, const RunLimits& limits) {
  if (argv.empty() || argv[0].empty()) return MakeError("no command to run");
  const std::string what = CommandLine(argv);
  Pipe out;
  Pipe err;
  if (pipe2(out.fds, O_CLOEXEC) != 0 || pipe2(err.fds, O_CLOEXEC) != 0) {
    return MakeError(what + ": pipe: " + std::strerror(errno));
  }
  SpawnSetup setup;
  Prepare(setup, out, err);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned =
      posix_spawnp(&pid, args[0], &setup.actions, &setup.attributes, args.data(), environ);
  if (spawned != 0) {
    return MakeError(what + ": " + (spawned == ENOENT ? "not found" : std::strerror(spawned)));
  }
  out.Close(1);
  err.Close(1);

  const auto deadline = std::chrono::steady_clock::now() + limits.timeout;
  const Collected collected = Collect(out.fds[0], err.fds[0], limits.max_output, deadline);
  int status = 0;
  // A child may close its output and keep running: the deadline holds for its exit too.
  const bool exited =
      !collected.timed_out && !collected.too_large && WaitUntil(pid, status, deadline);
  if (!exited) KillAndReap(pid);
  if (collected.too_large) {
    return MakeError(what + ": printed more than " + std::to_string(limits.max_output) + " bytes");
  }
  if (!exited) {
    return MakeError(what + ": killed after " + std::to_string(limits.timeout.count()) + " ms");
  }
  if (WIFSIGNALED(status)) {
    return MakeError(what + ": killed by signal " + std::to_string(WTERMSIG(status)));
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 0) return collected.stdout_text;
  if (code == 127 && collected.stdout_text.empty()) return MakeError(what + ": not found");
  // nvidia-smi prints some of its errors on stdout; the first line of either says what failed.
  std::string why = FirstLine(collected.stderr_text);
  if (why.empty()) why = FirstLine(collected.stdout_text);
  return MakeError(what + ": exit status " + std::to_string(code) +
                   (why.empty() ? "" : ": " + why));
}

CommandRunner SystemCommandRunner() {
  return [](const std::vector<std::string>& argv) { return RunCommand(argv, RunLimits{}); };
}

}  // namespace linkfit::agent
