// The agent's command runner (src/agent/run_command.h, SystemCommandRunner): real programs run
// without a shell, their output comes back, failures name the command, its exit status and the
// first line of its standard error; a timeout kills the child and what it started; output past
// the limit is refused; no child is left unreaped and no descriptor left open.

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "agent/run_command.h"
#include "linkfit/agent/discovery.h"

namespace linkfit::agent {
namespace {

using std::chrono::milliseconds;

int OpenDescriptors() {
  int count = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (readdir(dir) != nullptr) ++count;
  closedir(dir);
  return count;
}

// No child of this process exists any more, running or zombie.
bool NoChildren() { return waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD; }

RunLimits Quick(milliseconds timeout) {
  RunLimits limits;
  limits.timeout = timeout;
  return limits;
}

TEST(CommandRunner, ReturnsStandardOutputWithoutAShell) {
  const int descriptors = OpenDescriptors();
  auto echo = SystemCommandRunner()({"/bin/echo", "hello", "$HOME", "a  b"});
  ASSERT_TRUE(echo) << echo.error().message;
  EXPECT_EQ(*echo, "hello $HOME a  b\n");  // arguments reach the program untouched
  auto on_path = RunCommand({"printf", "%s|", "x", "y"}, {});
  ASSERT_TRUE(on_path) << on_path.error().message;
  EXPECT_EQ(*on_path, "x|y|");
  auto stderr_only = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2"}, {});
  ASSERT_TRUE(stderr_only) << stderr_only.error().message;
  EXPECT_EQ(*stderr_only, "out\n");  // standard error is not mixed in
  auto stdin_closed = RunCommand({"/bin/cat"}, Quick(milliseconds(5000)));
  ASSERT_TRUE(stdin_closed) << stdin_closed.error().message;  // stdin is /dev/null, not ours
  EXPECT_EQ(*stdin_closed, "");
  EXPECT_TRUE(NoChildren());
  EXPECT_EQ(OpenDescriptors(), descriptors);
}

TEST(CommandRunner, NonZeroExitNamesCommandStatusAndFirstStderrLine) {
  auto failed =
      RunCommand({"/bin/sh", "-c", "echo partial; echo oops >&2; echo more >&2; exit 3"}, {});
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().message,
            "`/bin/sh -c echo partial; echo oops >&2; echo more >&2; exit 3`: exit status 3: oops");
  auto quiet = RunCommand({"/bin/sh", "-c", "exit 3"}, {});
  ASSERT_FALSE(quiet);
  EXPECT_EQ(quiet.error().message, "`/bin/sh -c exit 3`: exit status 3");
  // nvidia-smi prints some errors on stdout: with nothing on stderr, stdout's first line says it.
  auto on_stdout = RunCommand({"/bin/sh", "-c", "echo 'No devices were found'; exit 6"}, {});
  ASSERT_FALSE(on_stdout);
  EXPECT_EQ(on_stdout.error().message,
            "`/bin/sh -c echo 'No devices were found'; exit 6`: exit status 6: "
            "No devices were found");
  auto signalled = RunCommand({"/bin/sh", "-c", "kill -TERM $$"}, {});
  ASSERT_FALSE(signalled);
  EXPECT_NE(signalled.error().message.find("killed by signal 15"), std::string::npos)
      << signalled.error().message;
  EXPECT_TRUE(NoChildren());
}

TEST(CommandRunner, MissingProgramIsNamed) {
  auto missing = SystemCommandRunner()({"linkfit-no-such-program", "topo", "-m"});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "`linkfit-no-such-program topo -m`: not found");
  auto absolute = RunCommand({"/nonexistent/nvidia-smi"}, {});
  ASSERT_FALSE(absolute);
  EXPECT_EQ(absolute.error().message, "`/nonexistent/nvidia-smi`: not found");
  auto empty = RunCommand({}, {});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().message, "no command to run");
  EXPECT_TRUE(NoChildren());
}

TEST(CommandRunner, TimeoutKillsTheChild) {
  const auto start = std::chrono::steady_clock::now();
  auto slow = RunCommand({"sleep", "30"}, Quick(milliseconds(200)));
  ASSERT_FALSE(slow);
  EXPECT_EQ(slow.error().message, "`sleep 30`: killed after 200 ms");
  // A child that closes its output and keeps running is still bound by the timeout.
  auto detached =
      RunCommand({"/bin/sh", "-c", "exec >&- 2>&-; sleep 30"}, Quick(milliseconds(200)));
  ASSERT_FALSE(detached);
  EXPECT_NE(detached.error().message.find("killed after 200 ms"), std::string::npos)
      << detached.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(NoChildren());
}

TEST(CommandRunner, TimeoutKillsWhatTheChildStarted) {
  const std::string pid_file = ::testing::TempDir() + "/linkfit_runner_grandchild.pid";
  std::remove(pid_file.c_str());
  auto slow = RunCommand({"/bin/sh", "-c", "sleep 30 & echo $! > " + pid_file + "; wait"},
                         Quick(milliseconds(300)));
  ASSERT_FALSE(slow);
  std::ifstream in(pid_file);
  pid_t grandchild = 0;
  ASSERT_TRUE(in >> grandchild) << "no pid in " << pid_file;
  // Gone, or a zombie waiting for its new parent to reap it: not running either way.
  bool running = true;
  for (int attempt = 0; attempt < 200 && running; ++attempt) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string pid_text, name, state;
    running = static_cast<bool>(stat >> pid_text >> name >> state) && state != "Z";
    if (running) usleep(10000);
  }
  EXPECT_FALSE(running) << "grandchild " << grandchild << " still runs";
  std::remove(pid_file.c_str());
  EXPECT_TRUE(NoChildren());
}

TEST(CommandRunner, OutputPastTheLimitIsRefused) {
  RunLimits small;
  small.max_output = 1000;
  auto exact = RunCommand({"head", "-c", "1000", "/dev/zero"}, small);
  ASSERT_TRUE(exact) << exact.error().message;
  EXPECT_EQ(exact->size(), 1000u);
  auto over = RunCommand({"head", "-c", "1001", "/dev/zero"}, small);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().message, "`head -c 1001 /dev/zero`: printed more than 1000 bytes");
  // A program that would print forever is killed once past the limit, long before its timeout.
  const auto start = std::chrono::steady_clock::now();
  auto endless = RunCommand({"yes"}, small);
  ASSERT_FALSE(endless);
  EXPECT_NE(endless.error().message.find("printed more than 1000 bytes"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // Endless standard error is drained, not a reason to block.
  auto noisy = RunCommand({"/bin/sh", "-c", "head -c 1000000 /dev/zero >&2; echo done"}, small);
  ASSERT_TRUE(noisy) << noisy.error().message;
  EXPECT_EQ(*noisy, "done\n");
  // The default limit holds 16 MiB.
  auto large = SystemCommandRunner()({"head", "-c", "3000000", "/dev/zero"});
  ASSERT_TRUE(large) << large.error().message;
  EXPECT_EQ(large->size(), 3000000u);
  EXPECT_TRUE(NoChildren());
}

// The mask of a /proc/<pid>/status line such as "SigIgn:\t0000000000001000".
unsigned long long StatusMask(const std::string& status, const std::string& key) {
  const std::size_t at = status.find(key + ":");
  if (at == std::string::npos) return ~0ull;
  return std::stoull(status.substr(at + key.size() + 1), nullptr, 16);
}

TEST(CommandRunner, IgnoredAndBlockedSignalsDoNotReachTheChild) {
  // The agent may ignore SIGPIPE and block signals in its threads; its children start clean.
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction previous = {};
  sigaction(SIGPIPE, &ignore, &previous);
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  sigset_t previous_mask;
  pthread_sigmask(SIG_BLOCK, &blocked, &previous_mask);
  auto status = RunCommand({"cat", "/proc/self/status"}, {});
  pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
  sigaction(SIGPIPE, &previous, nullptr);
  ASSERT_TRUE(status) << status.error().message;
  const unsigned long long sigpipe_bit = 1ull << (SIGPIPE - 1);
  const unsigned long long sigterm_bit = 1ull << (SIGTERM - 1);
  EXPECT_EQ(StatusMask(*status, "SigIgn") & sigpipe_bit, 0u) << *status;
  EXPECT_EQ(StatusMask(*status, "SigBlk") & sigterm_bit, 0u) << *status;
}

}  // namespace
}  // namespace linkfit::agent
