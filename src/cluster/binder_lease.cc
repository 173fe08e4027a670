#include "linkfit/cluster/binder_lease.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <random>

#include <nlohmann/json.hpp>

#include "linkfit/common/log.h"
#include "linkfit/kube/micro_time.h"

namespace linkfit::cluster {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// metadata.resourceVersion of an API object, "" where it is missing or not a string (json's
// value() throws on a value of another type).
std::string ResourceVersionOf(const json& object) {
  if (!object.is_object()) return "";
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  const auto version = metadata->find("resourceVersion");
  return version != metadata->end() && version->is_string() ? version->get<std::string>() : "";
}

// A refused Permit reads the lease again at most this often (a storm of binds refused at
// start-up must not become a storm of GETs).
constexpr milliseconds kMinRefreshInterval{200};

std::string DefaultIdentity() {
  std::string name;
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') name = pod;
  if (name.empty()) {
    char host[256] = {};
    name = gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0' ? host : "linkfit";
  }
  std::random_device device;
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%08x%08x", device(), device());
  return name + "_" + suffix;
}

std::int64_t DurationSeconds(milliseconds duration) { return (duration.count() + 999) / 1000; }

double SecondsBetween(BinderLease::Clock::time_point from, BinderLease::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

BinderLease::BinderLease(kube::ApiClient& client, BinderLeaseOptions options, MetricsSink& metrics)
    : client_(client),
      options_(std::move(options)),
      metrics_(metrics),
      path_("/apis/coordination.k8s.io/v1/namespaces/" + options_.lease_namespace + "/leases"),
      started_(Clock::now()) {
  if (options_.identity.empty()) options_.identity = DefaultIdentity();
  if (options_.idle_release.count() <= 0) options_.idle_release = options_.duration / 3;
}

BinderLease::~BinderLease() { Stop(); }

void BinderLease::Start() {
  if (!options_.enabled) return;
  keeper_ = std::thread([this] { KeeperLoop(); });  // its first step reads the lease
}

void BinderLease::Stop(milliseconds wait) {
  {
    MutexLock lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.NotifyAll();
  if (keeper_.joinable()) keeper_.join();
  if (!options_.enabled) return;
  Clock::time_point horizon;
  {
    MutexLock lock(mutex_);
    if (!holding_) return;
    horizon = horizon_;
  }
  const Clock::time_point now = Clock::now();
  if (horizon > now) {
    if (horizon - now > wait) return;  // the lease lapses on its own
    std::this_thread::sleep_for(horizon - now);
  }
  MutexLock api(api_mutex_);
  Release();
}

BinderLease::Read BinderLease::Get() {
  Read read;
  auto reply = client_.Get(path_ + "/" + options_.name, "lease");
  if (!reply) {
    read.error = reply.error().message;
    return read;
  }
  if (reply->status == 404) {
    read.ok = true;
    return read;
  }
  if (reply->status != 200) {
    read.error = "reading the lease answered " + std::to_string(reply->status) + ": " +
                 kube::StatusMessage(reply->body);
    return read;
  }
  const json lease = json::parse(reply->body, nullptr, false);
  if (!lease.is_object() || !lease.contains("metadata") || !lease["metadata"].is_object()) {
    read.error = "the lease does not decode: " + kube::StatusMessage(reply->body);
    return read;
  }
  read.ok = true;
  read.exists = true;
  read.resource_version = ResourceVersionOf(lease);
  const json spec = lease.value("spec", json::object());
  if (spec.is_object()) {
    if (spec.contains("holderIdentity") && spec["holderIdentity"].is_string()) {
      read.holder = spec["holderIdentity"].get<std::string>();
    }
    if (spec.contains("leaseDurationSeconds") && spec["leaseDurationSeconds"].is_number_integer()) {
      read.duration = milliseconds(spec["leaseDurationSeconds"].get<std::int64_t>() * 1000);
    }
    if (spec.contains("leaseTransitions") && spec["leaseTransitions"].is_number_integer()) {
      read.transitions = spec["leaseTransitions"].get<std::int64_t>();
    }
  }
  return read;
}

bool BinderLease::WriteHolding(const Read& read, bool new_holder, Clock::time_point sent) {
  const std::string now = kube::MicroTimeNow();
  json spec = {{"holderIdentity", options_.identity},
               {"leaseDurationSeconds", DurationSeconds(options_.duration)},
               {"renewTime", now}};
  if (new_holder) {
    spec["acquireTime"] = now;
    spec["leaseTransitions"] = read.exists ? read.transitions + 1 : 0;
  }
  kube::ApiResult<kube::ApiResponse> reply;
  if (!read.exists) {
    const json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", options_.name}, {"namespace", options_.lease_namespace}}},
        {"spec", spec}};
    reply = client_.Post(path_, lease.dump(), "lease");
  } else {
    const json patch = {{"metadata", {{"resourceVersion", read.resource_version}}}, {"spec", spec}};
    reply = client_.Patch(path_ + "/" + options_.name, patch.dump(), "lease");
  }
  if (!reply || (reply->status != 200 && reply->status != 201)) {
    MutexLock lock(mutex_);
    last_error_ = !reply ? reply.error().message
                         : "writing the lease answered " + std::to_string(reply->status) + ": " +
                               kube::StatusMessage(reply->body);
    return false;
  }
  const json stored = json::parse(reply->body, nullptr, false);
  MutexLock lock(mutex_);
  own_version_ = ResourceVersionOf(stored);
  holding_ = true;
  last_error_.clear();
  expiry_ = sent + options_.duration;
  last_renew_sent_ = sent;
  observed_holder_ = options_.identity;
  return true;
}

void BinderLease::Refresh(bool want) {
  bool holding;
  {
    MutexLock lock(mutex_);
    holding = holding_;
  }
  if (holding) {
    if (want) Renew();  // Permit found too little left: renewals have been failing
    return;
  }
  const Clock::time_point sent = Clock::now();
  const Read read = Get();
  // The holder's last renewal had landed before the server answered: a holder counts its expiry
  // from before it sent that renewal, so an expiry counted from now is never earlier than its.
  const Clock::time_point answered = Clock::now();
  {
    MutexLock lock(mutex_);
    last_read_ = sent;
  }
  if (!read.ok) {
    MutexLock lock(mutex_);
    observed_holder_.clear();
    last_error_ = read.error;
    log::Warning("binder lease " + options_.lease_namespace + "/" + options_.name + ": " +
                 read.error);
    return;
  }
  bool take = false;
  bool takeover = false;
  {
    MutexLock lock(mutex_);
    if (!read.exists || read.holder.empty() || read.holder == options_.identity) {
      // Free (or ours already: a write whose reply was lost).
      observed_holder_ = read.holder;
      take = want || read.holder == options_.identity;
    } else if (read.resource_version != observed_version_ || read.holder != observed_holder_) {
      observed_holder_ = read.holder;
      observed_version_ = read.resource_version;
      observed_at_ = answered;
      observed_duration_ = std::max(options_.duration, read.duration);
    } else if (sent - observed_at_ >= observed_duration_) {
      take = want;
      takeover = true;
    }
  }
  if (!take) return;
  if (!WriteHolding(read, read.holder != options_.identity, sent)) return;
  MutexLock lock(mutex_);
  metrics_.SetBinderLeaseHeld(true);
  if (takeover) {
    ++takeovers_;
    metrics_.CountBinderLease("taken_over");
    log::Warning("took the binder lease " + options_.lease_namespace + "/" + options_.name +
                 " from " + read.holder + ", which had not renewed it for " +
                 std::to_string(observed_duration_.count()) + " ms");
  } else if (read.holder != options_.identity) {
    ++acquisitions_;
    metrics_.CountBinderLease("acquired");
    log::Info("holding the binder lease " + options_.lease_namespace + "/" + options_.name +
              " as " + options_.identity);
  }
}

void BinderLease::Renew() {
  for (int attempt = 0; attempt < 2; ++attempt) {
    Read read;
    {
      MutexLock lock(mutex_);
      if (!holding_) return;
      read.exists = true;
      read.resource_version = own_version_;
    }
    const Clock::time_point sent = Clock::now();
    if (WriteHolding(read, /*new_holder=*/false, sent)) return;
    // A conflict: our last write's reply was lost (the lease is still ours, at a newer version),
    // or another process took the lease. Read it to tell which.
    const Read current = Get();
    if (!current.ok) return;  // keep the old expiry; Permit stops granting before it
    MutexLock lock(mutex_);
    if (current.exists && current.holder == options_.identity) {
      own_version_ = current.resource_version;
      continue;
    }
    holding_ = false;
    metrics_.SetBinderLeaseHeld(false);
    metrics_.CountBinderLease("lost");
    observed_holder_ = current.holder;
    observed_version_ = current.resource_version;
    observed_at_ = Clock::now();
    observed_duration_ = std::max(options_.duration, current.duration);
    log::Error(
        "lost the binder lease " + options_.lease_namespace + "/" + options_.name + " to " +
        (current.holder.empty() ? std::string("nobody (deleted or released)") : current.holder) +
        "; binds are held until it is ours again");
    return;
  }
}

void BinderLease::Release() {
  std::string version;
  {
    MutexLock lock(mutex_);
    // A Permit granted since the caller looked keeps the lease until its horizon.
    if (!holding_ || Clock::now() < horizon_) return;
    holding_ = false;  // no Permit is granted from here on
    version = own_version_;
    observed_holder_.clear();
    metrics_.SetBinderLeaseHeld(false);
    metrics_.CountBinderLease("released");
  }
  const json patch = {{"metadata", {{"resourceVersion", version}}},
                      {"spec", {{"holderIdentity", ""}, {"renewTime", kube::MicroTimeNow()}}}};
  auto reply = client_.Patch(path_ + "/" + options_.name, patch.dump(), "lease");
  if (!reply || reply->status != 200) {
    log::Warning("releasing the binder lease failed (it lapses after its duration): " +
                 (reply ? kube::StatusMessage(reply->body) : reply.error().message));
  }
}

void BinderLease::KeeperLoop() {
  const milliseconds tick = std::max(milliseconds(50), options_.duration / 5);
  MutexLock lock(mutex_);
  for (bool first = true; !stopping_; first = false) {
    if (!first) wake_.WaitFor(mutex_, std::min(tick, milliseconds(250)));
    if (stopping_) break;
    const Clock::time_point now = Clock::now();
    const bool holding = holding_;
    const bool idle = now - last_wanted_ >= options_.idle_release && now >= horizon_;
    const bool renew_due = now - last_renew_sent_ >= tick;
    const bool read_due = first || now - last_read_ >= tick;
    lock.Unlock();
    {
      MutexLock api(api_mutex_);
      if (holding && idle) {
        Release();
      } else if (holding && renew_due) {
        Renew();
      } else if (!holding && read_due) {
        Refresh(/*want=*/false);  // a standby watches the lease, never takes it unasked
      }
    }
    lock.Lock();
  }
}

bool BinderLease::GrantLocked(Clock::time_point now, milliseconds horizon) {
  if (stopping_ || !holding_ || expiry_ - now <= horizon) return false;
  horizon_ = std::max(horizon_, now + horizon);
  last_wanted_ = now;
  if (first_grant_ < 0) first_grant_ = SecondsBetween(started_, now);
  return true;
}

Result<void> BinderLease::Permit(milliseconds horizon) {
  if (!options_.enabled) return {};
  {
    MutexLock lock(mutex_);
    const Clock::time_point now = Clock::now();
    if (GrantLocked(now, horizon)) return {};
    last_wanted_ = now;
  }
  {
    // One bind at a time asks the API server; the others wait for its answer.
    MutexLock api(api_mutex_);
    bool refresh;
    {
      MutexLock lock(mutex_);
      const Clock::time_point now = Clock::now();
      if (GrantLocked(now, horizon)) return {};
      refresh = holding_ || now - last_asked_ >= kMinRefreshInterval;
      if (refresh) last_asked_ = now;
    }
    if (refresh) Refresh(/*want=*/true);
  }
  MutexLock lock(mutex_);
  if (GrantLocked(Clock::now(), horizon)) return {};
  ++binds_held_;
  metrics_.CountBindHeld();
  return MakeError(HeldMessage());
}

std::string BinderLease::HeldMessage() const {
  const std::string lease = options_.lease_namespace + "/" + options_.name;
  if (holding_) {
    return "linkfit holds the binder lease " + lease +
           " but could not renew it in time; binds wait until it is renewed";
  }
  if (!observed_holder_.empty() && observed_holder_ != options_.identity) {
    const double left =
        std::max(0.0, SecondsBetween(Clock::now(), observed_at_ + observed_duration_));
    return "another linkfit (" + observed_holder_ + ") holds the binder lease " + lease +
           " and may still have Bindings in flight; binds wait until it releases the lease or "
           "stops renewing it (at most " +
           std::to_string(static_cast<int>(left + 0.999)) + " s more)";
  }
  return "linkfit could not take the binder lease " + lease + " (" +
         (last_error_.empty() ? std::string("another process took it first") : last_error_) +
         "); binds wait";
}

BinderLease::Status BinderLease::status() const {
  MutexLock lock(mutex_);
  Status status;
  status.enabled = options_.enabled;
  status.holding = holding_;
  status.identity = options_.identity;
  status.holder = observed_holder_;
  const Clock::time_point now = Clock::now();
  if (holding_) {
    status.expires_in_seconds = std::max(0.0, SecondsBetween(now, expiry_));
  } else if (!observed_holder_.empty()) {
    status.held_until_seconds =
        std::max(0.0, SecondsBetween(now, observed_at_ + observed_duration_));
  }
  status.binds_held = binds_held_;
  status.acquisitions = acquisitions_;
  status.takeovers = takeovers_;
  status.first_grant_after_start_seconds = first_grant_;
  return status;
}

}  // namespace linkfit::cluster
