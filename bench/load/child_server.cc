#include "child_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "linkfit/common/strings.h"

namespace linkfit::load {
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

}  // namespace

void ChildServer::KillAll() {
  for (volatile pid_t& slot : g_children) {
    const pid_t pid = slot;
    if (pid <= 0) continue;
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    slot = 0;
  }
}

Result<ChildServer> ChildServer::Start(const ChildServerOptions& options) {
  std::vector<std::string> argv;
  if (options.cpu >= 0) {
    argv = {"taskset", "-c", std::to_string(options.cpu)};
  }
  argv.insert(argv.end(), options.argv.begin(), options.argv.end());
  std::vector<char*> args;
  for (std::string& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return MakeError(std::string("pipe: ") + strerror(errno));
  const auto launched = std::chrono::steady_clock::now();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return MakeError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // The server goes when this process does, however it ends: the signal handlers stop the
    // children on SIGINT and SIGTERM, but a crash or a SIGKILL of the load client would leave
    // them running (holding its output pipe open). Kept across the exec (taskset, then the
    // server: neither is set-user-ID). A parent already gone before the prctl: exit now.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  Track(pid);
  ChildServer child;
  child.pid_ = pid;
  child.stdout_fd_ = pipe_fds[0];

  std::string seen;
  const auto deadline =
      launched + std::chrono::milliseconds(static_cast<long>(options.ready_timeout_s * 1000));
  for (;;) {
    const std::size_t marker = seen.find(kReadyMarker);
    if (marker != std::string::npos) {
      const std::size_t line_end = seen.find('\n', marker);
      if (line_end != std::string::npos) {
        child.startup_cpu_s_ = child.CpuSeconds();
        child.startup_wall_s_ =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - launched).count();
        const std::string address =
            seen.substr(marker + kReadyMarker.size(), line_end - marker - kReadyMarker.size());
        const std::size_t colon = address.rfind(':');
        const auto port = colon == std::string::npos
                              ? std::nullopt
                              : ParseInt(std::string_view(address).substr(colon + 1));
        if (!port) return MakeError("cannot read the address in: " + address);
        child.host_ = address.substr(0, colon);
        child.port_ = static_cast<int>(*port);
        return child;
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return MakeError(options.argv[0] + ": not ready in time");
    pollfd poll_fd{child.stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char chunk[4096];
    const ssize_t got = ::read(child.stdout_fd_, chunk, sizeof(chunk));
    if (got <= 0) {
      return MakeError(options.argv[0] + " exited before it was ready (see its stderr)");
    }
    seen.append(chunk, static_cast<std::size_t>(got));
  }
}

ChildServer::ChildServer(ChildServer&& other) noexcept
    : pid_(other.pid_),
      stdout_fd_(other.stdout_fd_),
      host_(std::move(other.host_)),
      port_(other.port_),
      startup_cpu_s_(other.startup_cpu_s_),
      startup_wall_s_(other.startup_wall_s_) {
  other.pid_ = -1;
  other.stdout_fd_ = -1;
}

ChildServer::~ChildServer() { Stop(); }

long long ChildServer::RssBytes() const {
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

namespace {

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

}  // namespace

double ChildServer::CpuSeconds() const {
  const std::vector<std::string> fields = StatFields(pid_);
  // utime and stime are fields 14 and 15.
  if (fields.size() < 13) return -1;
  const auto utime = ParseInt(fields[11]);
  const auto stime = ParseInt(fields[12]);
  if (!utime || !stime) return -1;
  return static_cast<double>(*utime + *stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

long long ChildServer::MinorFaults() const {
  const std::vector<std::string> fields = StatFields(pid_);
  // minflt is field 10.
  if (fields.size() < 8) return -1;
  const auto faults = ParseInt(fields[7]);
  return faults ? *faults : -1;
}

long long ChildServer::ContextSwitches() const {
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

void ChildServer::Stop() {
  if (pid_ > 0) {
    Untrack(pid_);
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdout_fd_ = -1;
}

}  // namespace linkfit::load
