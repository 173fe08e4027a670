#include "wake_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <string>
#include <thread>

namespace linkfit::load {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kRoundTripTimeout = std::chrono::seconds(5);

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

void PinThread(pthread_t thread, int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<std::size_t>(cpu), &set);
  ::pthread_setaffinity_np(thread, sizeof(set), &set);  // best effort: the figures say where
}

void SetNoDelay(int fd) {
  int yes = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
}

// Sends or receives exactly 4 bytes. `spin`: receives without blocking, polling until they come
// or the round trip's timeout passes.
bool SendWord(int fd, std::uint32_t word) {
  return ::send(fd, &word, sizeof(word), MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(word));
}

bool ReceiveWord(int fd, bool spin, std::uint32_t* word) {
  char* out = reinterpret_cast<char*>(word);
  std::size_t got = 0;
  const auto deadline = Clock::now() + kRoundTripTimeout;
  while (got < sizeof(*word)) {
    const ssize_t n = ::recv(fd, out + got, sizeof(*word) - got, spin ? MSG_DONTWAIT : 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && spin &&
               Clock::now() < deadline) {
      continue;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

// The answering side: each request names its delay in microseconds; the reply echoes it after a
// busy wait that long. Ends when the client closes.
void Answer(int fd, int cpu) {
  PinThread(::pthread_self(), cpu);
  std::uint32_t delay_us = 0;
  while (ReceiveWord(fd, false, &delay_us)) {
    const auto until = Clock::now() + std::chrono::microseconds(delay_us);
    while (Clock::now() < until) {
    }
    if (!SendWord(fd, delay_us)) return;
  }
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

std::optional<WakeStep> FindWakeStep(const std::vector<WakeCost>& costs) {
  if (costs.size() < 2) return std::nullopt;
  const WakeCost& shortest = costs.front();
  for (std::size_t i = 1; i < costs.size(); ++i) {
    const double block_rise = costs[i].block_extra_us - shortest.block_extra_us;
    const double spin_rise = costs[i].spin_extra_us - shortest.spin_extra_us;
    if (block_rise < kWakeStepMinimumUs || spin_rise > kWakeStepMinimumUs / 2) continue;
    std::vector<double> rises;
    for (std::size_t j = i; j < costs.size(); ++j) {
      rises.push_back(costs[j].block_extra_us - shortest.block_extra_us);
    }
    return WakeStep{costs[i].delay_us, Median(rises)};
  }
  return std::nullopt;
}

Result<std::vector<WakeCost>> ProbeWakeCost(int server_cpu, int client_cpu, int samples,
                                            const std::vector<int>& delays_us) {
  if (samples <= 0) return MakeError("the wake probe needs at least one sample per delay");
  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.get() < 0) return MakeError(Errno("wake probe: socket"));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener.get(), 1) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return MakeError(Errno("wake probe: listen on loopback"));
  }
  Fd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (client.get() < 0) return MakeError(Errno("wake probe: socket"));
  timeval limit{};
  limit.tv_sec = std::chrono::duration_cast<std::chrono::seconds>(kRoundTripTimeout).count();
  ::setsockopt(client.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  if (::connect(client.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return MakeError(Errno("wake probe: connect"));
  }
  Fd server(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (server.get() < 0) return MakeError(Errno("wake probe: accept"));
  SetNoDelay(client.get());
  SetNoDelay(server.get());

  cpu_set_t previous;
  const bool restore = ::pthread_getaffinity_np(::pthread_self(), sizeof(previous), &previous) == 0;
  PinThread(::pthread_self(), client_cpu);
  std::thread answering(Answer, server.get(), server_cpu);

  std::vector<WakeCost> costs;
  std::string failure;
  std::vector<double> extra(static_cast<std::size_t>(samples));
  const auto measure = [&](int delay_us, bool spin) -> std::optional<double> {
    const int warmup = std::max(3, samples / 10);
    for (int i = -warmup; i < samples; ++i) {
      const auto start = Clock::now();
      std::uint32_t echoed = 0;
      if (!SendWord(client.get(), static_cast<std::uint32_t>(delay_us)) ||
          !ReceiveWord(client.get(), spin, &echoed) ||
          echoed != static_cast<std::uint32_t>(delay_us)) {
        failure = "wake probe: a round trip with a " + std::to_string(delay_us) +
                  " µs delay failed or timed out";
        return std::nullopt;
      }
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (i >= 0) extra[static_cast<std::size_t>(i)] = seconds * 1e6 - delay_us;
    }
    return Median(extra);
  };
  for (const int delay_us : delays_us) {
    const auto block = measure(delay_us, false);
    const auto spin = block ? measure(delay_us, true) : std::nullopt;
    if (!spin) break;
    costs.push_back({delay_us, *block, *spin});
  }
  ::shutdown(client.get(), SHUT_RDWR);  // ends the answering thread's read
  answering.join();
  if (restore) ::pthread_setaffinity_np(::pthread_self(), sizeof(previous), &previous);
  if (!failure.empty()) return MakeError(failure);
  return costs;
}

std::string WakeReport(const std::vector<WakeCost>& costs, int samples) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  out << "\n### the client's wake-up on this machine (bench/load/wake_probe.h)\n\n";
  out << "A thread on the server's CPU answers a 4-byte request after busy-waiting for the delay "
         "given; the client measures the round trip less that delay (median of "
      << samples << "), waiting in read() and polling its socket.\n\n";
  if (const std::optional<WakeStep> step = FindWakeStep(costs)) {
    out << "**Waiting in read() costs " << step->extra_us << " µs more once the reply is "
        << step->from_delay_us
        << " µs or more away.** A blocking p50 ratio counts that against the slower server "
           "whenever the quicker one's replies come before the step and the slower one's do "
           "not; --client-wait spin measures without it.\n\n";
  } else {
    out << "No step: waiting in read() costs about the same at every delay measured, so "
           "blocking and polling ratios should agree.\n\n";
  }
  out << "| delay (µs) | extra, blocking (µs) | extra, polling (µs) |\n|---:|---:|---:|\n";
  for (const WakeCost& cost : costs) {
    out << "| " << cost.delay_us << " | " << cost.block_extra_us << " | " << cost.spin_extra_us
        << " |\n";
  }
  return out.str();
}

std::vector<int> DefaultWakeDelays() {
  return {0, 25, 50, 75, 100, 110, 120, 130, 140, 150, 160, 175, 200, 250, 300, 400};
}

}  // namespace linkfit::load
