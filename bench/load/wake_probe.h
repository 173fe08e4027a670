#pragma once

// WakeProbe: what waiting for a reply costs this machine's client, by how long it waits, so that
// a reader of linkfit-load's figures can tell the servers' cost from the client CPU's wake-up
// (bench/RESULTS.md, 27 Nov 2026).
//
// A thread pinned to the server's CPU answers 4-byte requests on a loopback TCP connection after
// busy-waiting for the time each asks for: it never idles, and its reply comes exactly that late.
// The client, on its own CPU, measures each round trip less that time, once waiting in read()
// and once polling the socket. Polling, the extra is the loopback's own cost at every wait.
// Blocking, a virtual machine adds a step: a virtual CPU that halted for longer than the
// hypervisor polls for it is woken by the host's scheduler, so every wait past some length costs
// tens of microseconds more than a shorter one (on this project's VM ~60 µs from ~140 µs on).
// A blocking ratio of a slower server to a quicker one then counts that step against the slower
// one whenever the quicker one's replies come before it and the slower one's do not.
//
// Thread-safety: ProbeWakeCost runs on the calling thread plus one of its own, and shares
// nothing; FindWakeStep is a pure function.

#include <optional>
#include <string>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::load {

// The median extra time of a round trip (the round trip less the reply's delay) for one delay.
struct WakeCost {
  int delay_us = 0;
  double block_extra_us = 0;  // waiting in read()
  double spin_extra_us = 0;   // polling the socket
};

// Where waiting in read() becomes dearer: the first delay whose blocking extra is at least
// `kWakeStepMinimumUs` above the shortest delay's while polling stays within half of that (so
// that the step is the wait's, not the loopback's), and how much dearer from there on (the median
// over the delays from the step on).
struct WakeStep {
  int from_delay_us = 0;
  double extra_us = 0;
};
inline constexpr double kWakeStepMinimumUs = 20.0;

// `costs` in increasing delay; nullopt where there is no step (bare metal, or a machine whose
// hypervisor polls longer than the longest delay).
std::optional<WakeStep> FindWakeStep(const std::vector<WakeCost>& costs);

// Measures `samples` round trips per delay and wait mode. A negative CPU leaves that side
// unpinned. Fails where the loopback connection cannot be made or a round trip fails.
Result<std::vector<WakeCost>> ProbeWakeCost(int server_cpu, int client_cpu, int samples,
                                            const std::vector<int>& delays_us);

// The probe's figures as a Markdown section (a heading, what the step means for the figures
// beside it, and the table), for linkfit-load's report.
std::string WakeReport(const std::vector<WakeCost>& costs, int samples);

// The delays linkfit-load probes: 0 to 400 µs, densest where the steps of the machines seen lie.
std::vector<int> DefaultWakeDelays();

}  // namespace linkfit::load
