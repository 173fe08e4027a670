#pragma once

// HostileClients: connections that occupy a server without ever asking it anything it can
// finish (issue 11, DESIGN.md §11 "hostile clients"), for linkfit-load --hostile:
//
//   - idle: half connect and never send a byte (a port scanner, a TCP probe); half send one
//     complete GET /healthz and then stay open without reading (a client that forgot its
//     keep-alive connection);
//   - slowloris: send a request header one byte per second and never finish it.
//
// A connection the server closes is reopened at once (as an attacker would), so that the count
// stays at its target for the whole measurement; reopened() tells how often the server closed
// one (a server that enforces its deadlines closes them; one that does not keeps them).
//
// Thread-safety: Start and Stop from one thread; the counters from any.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::load {

class HostileClients {
 public:
  // `count` connections to host:port (IPv4 literal): half idle, half slowloris.
  HostileClients(std::string host, int port, int count);
  HostileClients(const HostileClients&) = delete;
  HostileClients& operator=(const HostileClients&) = delete;
  ~HostileClients();

  // Opens every connection and starts the thread that trickles bytes and reopens closed ones.
  Result<void> Start();
  // Stops the thread and closes every connection.
  void Stop();

  int count() const { return static_cast<int>(sockets_.size()); }
  // How many connections the server has closed since Start.
  int reopened() const { return reopened_.load(); }

 private:
  enum class Kind { kSilent, kKeptAlive, kSlowloris };
  struct Socket {
    Kind kind = Kind::kSilent;
    int fd = -1;
    std::size_t sent = 0;  // slowloris: header bytes sent so far
  };

  Result<void> Open(Socket& socket);
  void Loop();

  const std::string host_;
  const int port_;
  std::vector<Socket> sockets_;  // owned by the loop thread between Start and Stop
  std::atomic<bool> stop_{false};
  std::atomic<int> reopened_{0};
  std::thread thread_;
};

// Raises the soft limit on open files to the hard limit (the hostile connections need one file
// descriptor each). Returns the limit now in force.
long RaiseOpenFileLimit();

}  // namespace linkfit::load
