#pragma once

// A `linkfit serve` child process for the harness: started with a generated cluster file on
// 127.0.0.1:0, ready once it prints `linkfit listening on http://127.0.0.1:PORT` as its first
// stdout line; its further stdout is drained by a thread, its stderr goes to a log file. The
// destructor stops it (SIGTERM, then SIGKILL after 5 s) and reaps it.
//
// Thread-safety: one owner.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::bench {

class LinkfitProcess {
 public:
  // Starts `binary serve --config config --cluster cluster --listen 127.0.0.1:0` and waits up to
  // `timeout_s` for the ready line. stderr is appended to `log_path`.
  static Result<std::unique_ptr<LinkfitProcess>> Start(const std::string& binary,
                                                       const std::string& config,
                                                       const std::string& cluster,
                                                       const std::string& log_path,
                                                       double timeout_s);
  ~LinkfitProcess();
  LinkfitProcess(const LinkfitProcess&) = delete;
  LinkfitProcess& operator=(const LinkfitProcess&) = delete;

  int port() const { return port_; }
  int pid() const { return pid_; }
  // True while the child has not exited.
  bool Alive();

 private:
  LinkfitProcess(int pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}

  int pid_ = -1;
  int stdout_fd_ = -1;
  int port_ = 0;
  bool reaped_ = false;
  std::thread drain_;
};

// The last `max_bytes` of a log file, for error messages.
std::string TailOfFile(const std::string& path, std::size_t max_bytes = 2000);

}  // namespace linkfit::bench
