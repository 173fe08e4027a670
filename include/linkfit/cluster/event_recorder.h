#pragma once

// EventRecorder: posts events.k8s.io/v1 Events about pods (what `kubectl describe pod` shows)
// from a queue on a thread of its own, so that the watch threads that notice something never
// wait on the API server. The queue is bounded (events beyond it are dropped and counted in the
// log); a failed post is logged, not retried: an Event is a courtesy, not state.
//
// Thread-safety: Record() from any thread; Start/Stop from one controlling thread.

#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "linkfit/common/mutex.h"
#include "linkfit/kube/api_client.h"

namespace linkfit::cluster {

struct PodEvent {
  std::string pod_namespace;
  std::string pod_name;
  std::string pod_uid;
  std::string type = "Warning";  // Normal | Warning
  std::string reason;            // CamelCase, e.g. "DeviceHandoffMismatch"
  std::string action;            // CamelCase, e.g. "Observe"
  std::string note;              // human-readable, at most 1 KiB is sent
};

// The Event object for `event` (exposed for tests). `now_rfc3339_micro`: eventTime.
std::string EncodePodEvent(const PodEvent& event, const std::string& reporting_instance,
                           const std::string& now_rfc3339_micro);

class EventRecorder {
 public:
  // `client` must outlive the recorder.
  EventRecorder(kube::ApiClient& client, std::string reporting_instance,
                std::size_t queue_limit = 1000);
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  void Start();
  void Stop();  // posts nothing more; idempotent
  void Record(PodEvent event);

  std::size_t posted() const;

 private:
  void Loop();

  kube::ApiClient& client_;
  const std::string instance_;
  const std::size_t limit_;
  mutable Mutex mutex_;
  CondVar wake_;
  std::deque<PodEvent> queue_ LINKFIT_GUARDED_BY(mutex_);
  bool stop_ LINKFIT_GUARDED_BY(mutex_) = false;
  std::size_t posted_ LINKFIT_GUARDED_BY(mutex_) = 0;
  std::size_t dropped_ LINKFIT_GUARDED_BY(mutex_) = 0;
  std::thread thread_;
};

}  // namespace linkfit::cluster
