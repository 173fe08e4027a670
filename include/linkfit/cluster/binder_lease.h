#pragma once

// BinderLease: only one linkfit process at a time may send Bindings, and a process that takes
// over waits until every Binding its predecessor could still have in flight has landed or been
// abandoned by the API server. This closes the window after a restart (SIGKILL, OOM, upgrade)
// and at a failover between replicas, where the predecessor's Bindings, delayed in the API
// server, could commit after the successor had handed the same GPUs to other pods.
//
// Two bounds make it hold without trusting any clock but each process's own steady clock:
//
//   1. Every Binding is sent with the API server's `timeout` query parameter (ApiBinder): the
//      server abandons it at that deadline, so a Binding sent at t lands before t + timeout, or
//      never (a write already handed to etcd may still commit moments later: `margin`). Its
//      horizon is t + timeout + margin.
//   2. A coordination.k8s.io/v1 Lease (default linkfit-system/linkfit-binder). The holder renews
//      it and counts its expiry from the moment it *sent* the renewal: expiry = sent + duration.
//      It sends a Binding only when the Binding's horizon ends before that expiry (Permit). A
//      process that wants the lease takes it only when it is free (absent, or released with an
//      empty holder) or when it has watched the same resourceVersion for a whole duration on its
//      own clock, counted from the first time it read that version. That read came after the
//      renewal landed, so after the holder's expiry, so after every horizon the holder granted.
//
//   holder:    acquire ---> holding --renew every duration/5--> holding
//                             |  no bind asked for idle_release and every horizon past
//                             +--> release (holder "") ---> not holding
//                             |  the lease was taken (409 + another holder): lost
//   successor: absent or released -> acquire now
//              held by another    -> watch its resourceVersion; unchanged for a duration -> take
//
// Cost: a clean stop or an idle holder releases the lease, so the next process binds at once;
// after a holder died without releasing, binds are held for up to one lease duration (15 s by
// default) after the successor first read the lease, which the successor does when it starts.
// Bind requests refused meanwhile answer an error that names the holder; kube-scheduler retries
// the pod. Costs one GET every duration/5 while not holding, one PATCH every duration/5 while
// holding.
//
// Thread-safety: Permit, status and Stop may be called from any thread; Start once.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "linkfit/common/metrics.h"
#include "linkfit/common/mutex.h"
#include "linkfit/common/result.h"
#include "linkfit/kube/api_client.h"

namespace linkfit::cluster {

struct BinderLeaseOptions {
  bool enabled = true;  // false: Permit always grants (a single replica that is never restarted)
  std::string lease_namespace = "linkfit-system";
  std::string name = "linkfit-binder";
  std::chrono::milliseconds duration{15000};
  // A holder asked for no Permit this long, with every granted horizon past, releases the lease
  // (so that a failover costs this, not a whole duration). 0: duration / 3.
  std::chrono::milliseconds idle_release{0};
  // This process's identity in spec.holderIdentity; empty: the pod (or host) name and a random
  // suffix, unique per process.
  std::string identity;
};

class BinderLease {
 public:
  using Clock = std::chrono::steady_clock;

  struct Status {
    bool enabled = false;
    bool holding = false;
    std::string identity;
    std::string holder;              // the holder last read ("" free or unknown)
    double expires_in_seconds = 0;   // holding: what is left of the lease
    double held_until_seconds = 0;   // not holding: until the holder's lease lapses, at most
    std::uint64_t binds_held = 0;    // Permits refused
    std::uint64_t acquisitions = 0;  // taken free
    std::uint64_t takeovers = 0;     // taken from a holder that stopped renewing
    double first_grant_after_start_seconds = -1;  // -1: none yet
  };

  // `client` and `metrics` must outlive the lease.
  BinderLease(kube::ApiClient& client, BinderLeaseOptions options, MetricsSink& metrics);
  ~BinderLease();
  BinderLease(const BinderLease&) = delete;
  BinderLease& operator=(const BinderLease&) = delete;

  // Starts the keeper, which reads the lease at once (a successor's wait starts then), then
  // keeps it: renews while holding, releases when idle, watches it while not holding.
  void Start();
  // Stops the keeper and releases the lease once every granted horizon is past (waiting for
  // them, at most `wait`); an unreleased lease lapses after its duration.
  void Stop(std::chrono::milliseconds wait = std::chrono::milliseconds(0));

  // Permission to send one write that may land up to `horizon` from now. Granted when this
  // process holds the lease with more than `horizon` left (then the lease is kept at least that
  // long); otherwise tries to take it (API calls) and, failing that, answers why binds are held.
  Result<void> Permit(std::chrono::milliseconds horizon);

  Status status() const;
  const std::string& identity() const { return options_.identity; }

 private:
  struct Read {
    bool ok = false;  // a definite answer (200 or 404)
    bool exists = false;
    std::string holder;
    std::string resource_version;
    std::int64_t transitions = 0;
    std::chrono::milliseconds duration{0};
    std::string error;
  };
  Read Get();
  // Writes the lease as held by this process (create when `read` says it is absent, else an
  // update conditional on its resourceVersion); true when it landed.
  bool WriteHolding(const Read& read, bool new_holder, Clock::time_point sent)
      LINKFIT_REQUIRES(api_mutex_);
  // One step of keeping the lease (API calls).
  void Refresh(bool want) LINKFIT_REQUIRES(api_mutex_);
  void Renew() LINKFIT_REQUIRES(api_mutex_);
  void Release() LINKFIT_REQUIRES(api_mutex_);
  void KeeperLoop();
  // Grants a Permit when this process holds the lease with more than `horizon` left.
  bool GrantLocked(Clock::time_point now, std::chrono::milliseconds horizon)
      LINKFIT_REQUIRES(mutex_);
  std::string HeldMessage() const LINKFIT_REQUIRES(mutex_);

  kube::ApiClient& client_;
  BinderLeaseOptions options_;
  MetricsSink& metrics_;
  const std::string path_;
  const Clock::time_point started_;

  Mutex api_mutex_;  // serialises the lease's API calls
  mutable Mutex mutex_;
  CondVar wake_;
  bool holding_ LINKFIT_GUARDED_BY(mutex_) = false;
  Clock::time_point expiry_ LINKFIT_GUARDED_BY(mutex_){};  // holding, by our clock
  Clock::time_point last_renew_sent_ LINKFIT_GUARDED_BY(mutex_){};
  std::string own_version_ LINKFIT_GUARDED_BY(mutex_);      // resourceVersion we wrote last
  Clock::time_point horizon_ LINKFIT_GUARDED_BY(mutex_){};  // the latest granted horizon
  Clock::time_point last_wanted_ LINKFIT_GUARDED_BY(mutex_){};
  Clock::time_point last_read_ LINKFIT_GUARDED_BY(mutex_){};   // not holding, the last GET
  Clock::time_point last_asked_ LINKFIT_GUARDED_BY(mutex_){};  // a refused Permit's last refresh
  // The other holder's lease as last read: its resourceVersion and when we first read it.
  std::string observed_holder_ LINKFIT_GUARDED_BY(mutex_);
  std::string observed_version_ LINKFIT_GUARDED_BY(mutex_);
  Clock::time_point observed_at_ LINKFIT_GUARDED_BY(mutex_){};
  std::chrono::milliseconds observed_duration_ LINKFIT_GUARDED_BY(mutex_){0};
  bool stopping_ LINKFIT_GUARDED_BY(mutex_) = false;
  std::string last_error_ LINKFIT_GUARDED_BY(mutex_);  // the last failed call
  std::uint64_t binds_held_ LINKFIT_GUARDED_BY(mutex_) = 0;
  std::uint64_t acquisitions_ LINKFIT_GUARDED_BY(mutex_) = 0;
  std::uint64_t takeovers_ LINKFIT_GUARDED_BY(mutex_) = 0;
  double first_grant_ LINKFIT_GUARDED_BY(mutex_) = -1;
  std::thread keeper_;
};

}  // namespace linkfit::cluster
