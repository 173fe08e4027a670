#include "cluster/child_process.h"

#include <fcntl.h>
#include <httplib.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "testing/fixtures.h"

extern char** environ;

namespace linkfit::testing {
namespace {

// The environment the child gets: the test's own, with `overrides` ("NAME=VALUE") replacing
// entries of the same name.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string value(*entry);
    const std::string name = value.substr(0, value.find('=') + 1);
    bool overridden = false;
    for (const std::string& o : overrides) overridden = overridden || o.starts_with(name);
    if (!overridden) env.push_back(value);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// The number after `prefix` in `line`, or 0.
int NumberAfter(const std::string& line, const std::string& prefix) {
  const auto at = line.find(prefix);
  return at == std::string::npos ? 0 : std::atoi(line.c_str() + at + prefix.size());
}

}  // namespace

std::string SmallPagesServeConfig() {
  return "mig_profiles_dir: " + SourcePath("config/mig") +
         "\nlimits: {threads: 16}\n"
         "kubernetes: {request_timeout_ms: 2000, list_page_size: 5}\n";
}

ServeChild::ServeChild(ServeChildOptions options) : options_(std::move(options)) {
  std::string config_path = options_.config_path;
  if (config_path.empty()) {
    config_path = options_.log_path + ".yaml";
    FILE* file = std::fopen(config_path.c_str(), "w");
    if (file == nullptr) return;
    const std::string text =
        options_.config_text.empty() ? SmallPagesServeConfig() : options_.config_text;
    std::fputs(text.c_str(), file);
    std::fclose(file);
  }
  std::vector<std::string> args = {options_.binary, "serve",        "--config",
                                   config_path,     "--kubeconfig", options_.kubeconfig,
                                   "--listen",      "127.0.0.1:0"};
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  std::vector<std::string> env = ChildEnvironment(options_.env);
  std::vector<char*> argv = Pointers(args);
  std::vector<char*> envp = Pointers(env);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  const int log_fd =
      open(options_.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_ = fork();
  if (pid_ == 0) {
    // Async-signal-safe calls only from here on: the test has other threads.
    dup2(fds[1], STDOUT_FILENO);
    if (log_fd >= 0) dup2(log_fd, STDERR_FILENO);
    close_range(3, ~0u, 0);  // no test socket leaks into linkfit
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  if (log_fd >= 0) close(log_fd);
  if (pid_ < 0) {
    close(fds[0]);
    return;
  }
  stdout_fd_ = fds[0];
  ReadPortLine();
}

ServeChild::~ServeChild() {
  Kill(SIGKILL);
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

void ServeChild::ReadPortLine() {
  std::string line;
  pollfd poll_fd{stdout_fd_, POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    if (poll(&poll_fd, 1, 100) <= 0) continue;
    char buffer[256];
    const ssize_t n = read(stdout_fd_, buffer, sizeof buffer);
    if (n <= 0) break;
    line.append(buffer, static_cast<std::size_t>(n));
  }
  port_ = NumberAfter(line, "linkfit listening on http://127.0.0.1:");
  ops_port_ = NumberAfter(line, "(operations on port ");
}

bool ServeChild::WaitReady(std::chrono::milliseconds timeout) const {
  if (port_ == 0) return false;
  httplib::Client client("127.0.0.1", ops_port_ != 0 ? ops_port_ : port_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto reply = client.Get("/readyz");
    if (reply && reply->status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int ServeChild::Kill(int signal) {
  if (!running()) return -1;
  ::kill(pid_, signal);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return status;
}

bool ServeChild::Terminate(std::chrono::milliseconds grace) {
  if (!running()) return false;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      reaped_ = true;
      return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Kill(SIGKILL);
  return false;
}

}  // namespace linkfit::testing
