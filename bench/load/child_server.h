#pragma once

// ChildServer: a server process under test, started as a child of the load client (optionally
// pinned to one CPU with util-linux's `taskset -c CPU`, which execs in place so the PID is the
// server's), ready when it prints "... listening on http://HOST:PORT" on stdout. The CPU time it
// used up to that moment is its start-up cost.
//
// Thread-safety: none (one thread starts and stops children; KillAll may run in a signal
// handler).

#include <sys/types.h>

#include <string>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::load {

struct ChildServerOptions {
  std::vector<std::string> argv;  // the server's command line (argv[0] is its path)
  int cpu = -1;                   // pin with taskset to this CPU; -1 leaves it unpinned
  double ready_timeout_s = 120;
};

class ChildServer {
 public:
  // Starts the child and waits for its "listening on" line.
  static Result<ChildServer> Start(const ChildServerOptions& options);

  ChildServer(ChildServer&& other) noexcept;
  ChildServer& operator=(ChildServer&&) = delete;
  ChildServer(const ChildServer&) = delete;
  ChildServer& operator=(const ChildServer&) = delete;
  ~ChildServer();

  pid_t pid() const { return pid_; }
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  // utime + stime of the whole process when the ready line was read, and the wall time from
  // launch to that line.
  double startup_cpu_s() const { return startup_cpu_s_; }
  double startup_wall_s() const { return startup_wall_s_; }

  // Resident set size now (VmRSS), in bytes; -1 if unreadable.
  long long RssBytes() const;
  // utime + stime so far, in seconds; -1 if unreadable.
  double CpuSeconds() const;
  // Context switches so far, voluntary and not, summed over the process's threads now running;
  // -1 if unreadable.
  long long ContextSwitches() const;
  // Minor page faults so far (the whole process; a page the allocator handed back to the kernel
  // and touches again faults once more); -1 if unreadable.
  long long MinorFaults() const;

  // SIGTERM, then waits (SIGKILL after a few seconds).
  void Stop();

  // Kills every child still running (SIGKILL) and reaps it: for exit paths that skip destructors
  // (std::exit after an error, a signal). Safe to call from a signal handler.
  static void KillAll();

 private:
  ChildServer() = default;

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string host_;
  int port_ = 0;
  double startup_cpu_s_ = 0;
  double startup_wall_s_ = 0;
};

}  // namespace linkfit::load
