#include "common/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "linkfit/common/strings.h"

namespace linkfit::bench {
namespace {

constexpr std::string_view kReadyMarker = "listening on http://";

// Every child started and not yet stopped, for KillAll (a fixed table: signal-safe).
constexpr int kMaxChildren = 16;
volatile pid_t g_children[kMaxChildren] = {};

void Track(pid_t pid) {
  for (volatile pid_t& slot : g_children) {
    if (slot == 0) {
      slot = pid;
      return;
    }
  }
}

void Untrack(pid_t pid) {
  for (volatile pid_t& slot : g_children) {
    if (slot == pid) slot = 0;
  }
}

// Fields 3 onwards of /proc/PID/stat (those after the command name, which may contain spaces
// and ends at the last ')'): fields[0] is field 3 (state). Empty if unreadable.
std::vector<std::string> StatFields(int pid) {
  std::ifstream stat_file("/proc/" + std::to_string(pid) + "/stat");
  std::stringstream text;
  text << stat_file.rdbuf();
  const std::string stat = text.str();
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return {};
  std::vector<std::string> fields;
  for (std::string_view field : SplitWhitespace(std::string_view(stat).substr(close + 1))) {
    fields.emplace_back(field);
  }
  return fields;
}

// Forks and execs `args` with stdout to `stdout_fd` and, when `log_fd` >= 0, stderr to it.
// Returns the child's PID, or -1.
pid_t Spawn(std::vector<std::string>& args, int stdout_fd, int read_fd, int log_fd,
            bool die_with_parent) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (die_with_parent) {
    // Kept across the exec (taskset, then the server: neither is set-user-ID). A parent already
    // gone before the prctl: exit now.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
  }
  ::dup2(stdout_fd, STDOUT_FILENO);
  if (log_fd >= 0) ::dup2(log_fd, STDERR_FILENO);
  ::close(read_fd);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "exec %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

}  // namespace

std::string TailOfFile(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  return all.size() <= max_bytes ? all : all.substr(all.size() - max_bytes);
}

void ChildProcess::KillAll() {
  for (volatile pid_t& slot : g_children) {
    const pid_t pid = slot;
    if (pid <= 0) continue;
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    slot = 0;
  }
}

Result<ChildProcess> ChildProcess::Start(const ChildProcessOptions& options) {
  if (options.argv.empty()) return MakeError("no command to start");
  const std::string name = options.name.empty() ? options.argv[0] : options.name;
  std::vector<std::string> args;
  if (options.cpu >= 0) args = {"taskset", "-c", std::to_string(options.cpu)};
  args.insert(args.end(), options.argv.begin(), options.argv.end());
  const auto why = [&](const std::string& what) {
    return MakeError(name + " " + what +
                     (options.stderr_log.empty() ? " (see its stderr)"
                                                 : "; log: " + TailOfFile(options.stderr_log)));
  };

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return MakeError(std::string("pipe: ") + strerror(errno));
  int log_fd = -1;
  if (!options.stderr_log.empty()) {
    log_fd = ::open(options.stderr_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      ::close(pipe_fds[0]);
      ::close(pipe_fds[1]);
      return MakeError(options.stderr_log + ": cannot open for the server log");
    }
  }
  const auto launched = std::chrono::steady_clock::now();
  const pid_t pid = Spawn(args, pipe_fds[1], pipe_fds[0], log_fd, options.die_with_parent);
  const int fork_errno = errno;
  ::close(pipe_fds[1]);
  if (log_fd >= 0) ::close(log_fd);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    return MakeError(std::string("fork: ") + std::strerror(fork_errno));
  }
  Track(pid);
  ChildProcess child;
  child.pid_ = pid;
  child.stdout_fd_ = pipe_fds[0];

  std::string seen;
  const auto deadline =
      launched + std::chrono::milliseconds(static_cast<long>(options.ready_timeout_s * 1000));
  for (;;) {
    const std::size_t marker = seen.find(kReadyMarker);
    const std::size_t line_end =
        marker == std::string::npos ? std::string::npos : seen.find('\n', marker);
    if (line_end != std::string::npos) {
      child.startup_cpu_s_ = child.CpuSeconds();
      child.startup_wall_s_ =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - launched).count();
      std::string address = std::string(Trim(std::string_view(seen).substr(
          marker + kReadyMarker.size(), line_end - marker - kReadyMarker.size())));
      address = address.substr(0, address.find('/'));
      const std::size_t colon = address.rfind(':');
      const auto port = colon == std::string::npos
                            ? std::nullopt
                            : ParseInt(std::string_view(address).substr(colon + 1));
      if (!port || *port <= 0 || *port > 65535) {
        return MakeError("cannot read the address in " + name +
                         "'s ready line: " + QuoteForMessage(address, 200));
      }
      child.host_ = address.substr(0, colon);
      child.port_ = static_cast<int>(*port);
      if (options.drain_stdout) {
        child.drain_ = std::thread([fd = child.stdout_fd_] {
          char buffer[4096];
          while (::read(fd, buffer, sizeof(buffer)) > 0) {
          }
        });
      }
      return child;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return why("printed no ready line within " +
                 std::to_string(static_cast<int>(options.ready_timeout_s)) + " s");
    }
    pollfd poll_fd{child.stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, static_cast<int>(left.count()));
    if (ready <= 0) continue;  // EINTR or the deadline: checked above
    char chunk[4096];
    const ssize_t got = ::read(child.stdout_fd_, chunk, sizeof(chunk));
    if (got <= 0) return why("exited before it was ready");
    seen.append(chunk, static_cast<std::size_t>(got));
  }
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_),
      stdout_fd_(other.stdout_fd_),
      host_(std::move(other.host_)),
      port_(other.port_),
      startup_cpu_s_(other.startup_cpu_s_),
      startup_wall_s_(other.startup_wall_s_),
      drain_(std::move(other.drain_)) {
  other.pid_ = -1;
  other.stdout_fd_ = -1;
}

ChildProcess::~ChildProcess() { Stop(); }

bool ChildProcess::Alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    Untrack(pid_);
    pid_ = -1;
    return false;
  }
  return true;
}

long long ChildProcess::RssBytes() const {
  std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (StartsWith(line, "VmRSS:")) {
      const std::vector<std::string_view> fields = SplitWhitespace(line);
      if (fields.size() >= 2) {
        if (const auto kib = ParseInt(fields[1])) return *kib * 1024;
      }
    }
  }
  return -1;
}

double ChildProcess::CpuSeconds() const {
  const std::vector<std::string> fields = StatFields(pid_);
  // utime and stime are fields 14 and 15.
  if (fields.size() < 13) return -1;
  const auto utime = ParseInt(fields[11]);
  const auto stime = ParseInt(fields[12]);
  if (!utime || !stime) return -1;
  return static_cast<double>(*utime + *stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

long long ChildProcess::MinorFaults() const {
  const std::vector<std::string> fields = StatFields(pid_);
  // minflt is field 10.
  if (fields.size() < 8) return -1;
  const auto faults = ParseInt(fields[7]);
  return faults ? *faults : -1;
}

long long ChildProcess::ContextSwitches() const {
  std::error_code error;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid_) + "/task";
  long long total = 0;
  bool read_any = false;
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    std::ifstream status(task.path() / "status");
    std::string line;
    while (std::getline(status, line)) {
      if (!StartsWith(line, "voluntary_ctxt_switches:") &&
          !StartsWith(line, "nonvoluntary_ctxt_switches:")) {
        continue;
      }
      const std::vector<std::string_view> fields = SplitWhitespace(line);
      if (fields.size() < 2) continue;
      if (const auto count = ParseInt(fields[1])) {
        total += *count;
        read_any = true;
      }
    }
  }
  return error || !read_any ? -1 : total;
}

void ChildProcess::Stop() {
  if (pid_ > 0) {
    Untrack(pid_);
    ::kill(pid_, SIGTERM);
    int status = 0;
    bool exited = false;
    for (int i = 0; i < 500 && !exited; ++i) {
      exited = ::waitpid(pid_, &status, WNOHANG) == pid_;
      if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!exited) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
  // The drain thread ends at end of file: the child is gone (unless a grandchild holds its
  // stdout, which no server here starts).
  if (drain_.joinable()) drain_.join();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdout_fd_ = -1;
}

}  // namespace linkfit::bench
