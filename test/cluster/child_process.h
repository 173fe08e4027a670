#pragma once

// ServeChild: the real `linkfit serve` binary run as a child process of a test, for the tests
// that kill, restart and fail over linkfit against the fake API server (crash_restart_test,
// chaos_bind_test). The extender port (and the operations port when --ops-listen is given) is
// read from the one line `linkfit serve` writes to stdout; stderr, its log, is appended to a file.
//
// The child is forked from a test that runs many threads, so everything it needs (argv, envp, the
// log's descriptor) is prepared before fork() and the child only calls async-signal-safe
// functions (dup2, close_range, execve, _exit). It inherits no descriptor but stdout and stderr.
//
// Thread-safety: port(), ops_port(), pid() and log_path() are fixed once the constructor returns
// and may be read from any thread; Kill(), Terminate() and the destructor must not race each
// other (one owner stops the process).

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

namespace linkfit::testing {

struct ServeChildOptions {
  std::string binary = "";      // the `linkfit` executable
  std::string kubeconfig = "";  // --kubeconfig
  // The config file, passed as it is. Empty: `config_text` is written to log_path + ".yaml" and
  // passed (SmallPagesServeConfig() when `config_text` is empty too).
  std::string config_path = "";
  std::string config_text = "";
  std::string log_path = "";  // stderr is appended here
  std::vector<std::string> extra_args =
      {};  // after --config, --kubeconfig and --listen 127.0.0.1:0
  // "NAME=VALUE" entries set in the child's environment (the test's environment otherwise).
  std::vector<std::string> env = {};
  std::chrono::milliseconds start_timeout{20000};  // until the port line
};

// The config crash_restart_test has always given linkfit: the repository's MIG tables, 16 handler
// threads, 2 s API requests and list pages of 5 (so that a relist takes several pages).
std::string SmallPagesServeConfig();

class ServeChild {
 public:
  // Starts the process and waits for its port line (up to options.start_timeout). port() is 0
  // when it did not start or did not say where it listens; the log says why.
  explicit ServeChild(ServeChildOptions options);
  // SIGKILL, then reaped.
  ~ServeChild();
  ServeChild(const ServeChild&) = delete;
  ServeChild& operator=(const ServeChild&) = delete;

  int port() const { return port_; }
  int ops_port() const { return ops_port_; }  // 0 without --ops-listen
  pid_t pid() const { return pid_; }          // -1 when it did not start
  const std::string& log_path() const { return options_.log_path; }
  bool running() const { return pid_ > 0 && !reaped_; }

  // Polls GET /readyz (the operations port when there is one) until 200, or false at `timeout`.
  bool WaitReady(std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  // Sends `signal` and waits until the process has exited (blocking: a signal that does not end
  // it never returns). Returns the wait status, or -1 when no process was running.
  int Kill(int signal = SIGKILL);
  // A graceful stop: SIGTERM, then up to `grace` for the process to exit by itself (SIGKILL
  // after that). Returns true when it exited within `grace` with status 0.
  bool Terminate(std::chrono::milliseconds grace = std::chrono::seconds(10));

 private:
  void ReadPortLine();

  ServeChildOptions options_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int stdout_fd_ = -1;  // the read end of the child's stdout, kept open until it is reaped
  int port_ = 0;
  int ops_port_ = 0;
};

}  // namespace linkfit::testing
