#include "harness/linkfit_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "linkfit/common/strings.h"

namespace linkfit::bench {
namespace {

constexpr std::string_view kReadyPrefix = "linkfit listening on http://";

}  // namespace

std::string TailOfFile(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  return all.size() <= max_bytes ? all : all.substr(all.size() - max_bytes);
}

Result<std::unique_ptr<LinkfitProcess>> LinkfitProcess::Start(const std::string& binary,
                                                              const std::string& config,
                                                              const std::string& cluster,
                                                              const std::string& log_path,
                                                              double timeout_s) {
  if (access(binary.c_str(), X_OK) != 0) {
    return MakeError("linkfit binary '" + binary + "' not found or not executable (--linkfit)");
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return MakeError("pipe2() failed");
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return MakeError(log_path + ": cannot open for the server log");
  std::vector<std::string> args = {binary,      "serve", "--config", config,
                                   "--cluster", cluster, "--listen", "127.0.0.1:0"};
  const pid_t pid = fork();
  if (pid < 0) return MakeError("fork() failed");
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  close(log_fd);
  std::unique_ptr<LinkfitProcess> process(new LinkfitProcess(pid, pipe_fds[0]));

  // Reads the first line within the deadline.
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int>(timeout_s * 1000));
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return MakeError("linkfit serve printed no ready line within " +
                       std::to_string(static_cast<int>(timeout_s)) +
                       " s; log: " + TailOfFile(log_path));
    }
    pollfd fd{process->stdout_fd_, POLLIN, 0};
    if (poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[512];
    const ssize_t n = read(process->stdout_fd_, buffer, sizeof(buffer));
    if (n <= 0) {
      return MakeError("linkfit serve exited before it was ready; log: " + TailOfFile(log_path));
    }
    line.append(buffer, static_cast<std::size_t>(n));
  }
  const std::string first = std::string(Trim(line.substr(0, line.find('\n'))));
  const std::size_t at = first.find(kReadyPrefix);
  const std::size_t colon = at == std::string::npos ? at : first.rfind(':');
  std::optional<std::int64_t> port;
  if (colon != std::string::npos && colon > at) {
    std::string_view rest = std::string_view(first).substr(colon + 1);
    const std::size_t slash = rest.find('/');
    port = ParseInt(rest.substr(0, slash));
  }
  if (!port || *port <= 0 || *port > 65535) {
    return MakeError("unexpected first line from linkfit serve: " + QuoteForMessage(first, 200));
  }
  process->port_ = static_cast<int>(*port);
  const int fd = process->stdout_fd_;
  process->drain_ = std::thread([fd] {
    char buffer[4096];
    while (read(fd, buffer, sizeof(buffer)) > 0) {
    }
  });
  return process;
}

bool LinkfitProcess::Alive() {
  if (reaped_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    return false;
  }
  return true;
}

LinkfitProcess::~LinkfitProcess() {
  if (!reaped_ && pid_ > 0) {
    kill(pid_, SIGTERM);
    int status = 0;
    bool exited = false;
    for (int i = 0; i < 500 && !exited; ++i) {
      exited = waitpid(pid_, &status, WNOHANG) == pid_;
      if (!exited) usleep(10000);
    }
    if (!exited) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
  }
  if (drain_.joinable()) drain_.join();
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

}  // namespace linkfit::bench
