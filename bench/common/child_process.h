#pragma once

// ChildProcess: a server under test started as a child of a bench tool (linkfit-bench's `linkfit
// serve`, linkfit-load's linkfit and parse-only servers), ready once it prints a line holding
// "listening on http://HOST:PORT" on stdout. Optionally pinned to one CPU with util-linux's
// `taskset -c CPU` (which execs in place, so the PID is the server's), its stderr appended to a
// log file (quoted in start-up errors) and its further stdout drained by a thread. The CPU time it
// used up to the ready line is its start-up cost. Stop() and the destructor stop it (SIGTERM,
// then SIGKILL after 5 s) and reap it.
//
// Thread-safety: one owner per ChildProcess; KillAll may run in a signal handler.

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::bench {

struct ChildProcessOptions {
  std::vector<std::string> argv;  // the server's command line (argv[0]: a path, or found in PATH)
  std::string name;               // for error messages; "" means argv[0]
  int cpu = -1;                   // pin with taskset to this CPU; -1 leaves it unpinned
  std::string stderr_log;         // append the child's stderr here; "" keeps this process's
  bool drain_stdout = false;      // read and drop what it prints after the ready line
  // SIGTERM to the child when the thread that started it ends, however it ends (a crash or a
  // SIGKILL of the bench tool would otherwise leave it running, holding the tool's output pipe).
  bool die_with_parent = false;
  double ready_timeout_s = 120;
};

class ChildProcess {
 public:
  // Starts the child and waits for its ready line.
  static Result<ChildProcess> Start(const ChildProcessOptions& options);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  // utime + stime of the whole process when the ready line was read, and the wall time from
  // launch to that line.
  double startup_cpu_s() const { return startup_cpu_s_; }
  double startup_wall_s() const { return startup_wall_s_; }

  // True while the child has not exited (reaps it when it has).
  bool Alive();
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

  // SIGTERM, then waits (SIGKILL after 5 s); idempotent.
  void Stop();

  // Kills every child still running (SIGKILL) and reaps it: for exit paths that skip destructors
  // (std::exit after an error, a signal). Safe to call from a signal handler.
  static void KillAll();

 private:
  ChildProcess() = default;

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string host_;
  int port_ = 0;
  double startup_cpu_s_ = 0;
  double startup_wall_s_ = 0;
  std::thread drain_;
};

// The last `max_bytes` of a file (a server log), for error messages.
std::string TailOfFile(const std::string& path, std::size_t max_bytes = 2000);

}  // namespace linkfit::bench
