#include "linkfit/cluster/event_recorder.h"

#include <chrono>
#include <ctime>

#include "linkfit/common/json_string.h"
#include "linkfit/common/log.h"
#include "linkfit/kube/micro_time.h"

namespace linkfit::cluster {
namespace {

void Field(std::string& out, const char* key, const std::string& value, bool first = false) {
  if (!first) out += ',';
  out += '"';
  out += key;
  out += "\":";
  json::AppendString(out, value);
}

}  // namespace

std::string EncodePodEvent(const PodEvent& event, const std::string& reporting_instance,
                           const std::string& now_rfc3339_micro) {
  std::string out = "{\"apiVersion\":\"events.k8s.io/v1\",\"kind\":\"Event\",\"metadata\":{";
  Field(out, "generateName", event.pod_name + ".", true);
  Field(out, "namespace", event.pod_namespace);
  out += "},\"regarding\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\"";
  Field(out, "namespace", event.pod_namespace);
  Field(out, "name", event.pod_name);
  Field(out, "uid", event.pod_uid);
  out += '}';
  Field(out, "eventTime", now_rfc3339_micro);
  Field(out, "reportingController", "linkfit.io/scheduler");
  Field(out, "reportingInstance", reporting_instance);
  Field(out, "action", event.action);
  Field(out, "reason", event.reason);
  Field(out, "type", event.type);
  Field(out, "note", event.note.substr(0, 1024));
  out += '}';
  return out;
}

EventRecorder::EventRecorder(kube::ApiClient& client, std::string reporting_instance,
                             std::size_t queue_limit)
    : client_(client), instance_(std::move(reporting_instance)), limit_(queue_limit) {}

EventRecorder::~EventRecorder() { Stop(); }

void EventRecorder::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void EventRecorder::Stop() {
  {
    MutexLock lock(mutex_);
    stop_ = true;
  }
  wake_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void EventRecorder::Record(PodEvent event) {
  {
    MutexLock lock(mutex_);
    if (stop_) return;
    if (queue_.size() >= limit_) {
      if (dropped_++ % 100 == 0) {
        log::Warning("events: queue full, dropping the event " + event.reason + " of pod " +
                     event.pod_namespace + "/" + event.pod_name);
      }
      return;
    }
    queue_.push_back(std::move(event));
  }
  wake_.NotifyOne();
}

std::size_t EventRecorder::posted() const {
  MutexLock lock(mutex_);
  return posted_;
}

void EventRecorder::Loop() {
  for (;;) {
    PodEvent event;
    {
      MutexLock lock(mutex_);
      while (!stop_ && queue_.empty()) wake_.Wait(mutex_);
      if (stop_) return;
      event = std::move(queue_.front());
      queue_.pop_front();
    }
    const std::string path = "/apis/events.k8s.io/v1/namespaces/" + event.pod_namespace + "/events";
    auto reply =
        client_.Post(path, EncodePodEvent(event, instance_, kube::MicroTimeNow()), "event");
    if (!reply || reply->status != 201) {
      log::Warning(
          "events: posting " + event.reason + " for pod " + event.pod_namespace + "/" +
          event.pod_name + " failed: " +
          (reply ? "HTTP " + std::to_string(reply->status) + ": " + kube::StatusMessage(reply->body)
                 : reply.error().message));
      continue;
    }
    MutexLock lock(mutex_);
    ++posted_;
  }
}

}  // namespace linkfit::cluster
