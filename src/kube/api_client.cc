// The parts of api_client.h that do not depend on the HTTP library: cancellation, the steady
// clock, and reading the message of an API Status body.

#include <thread>

#include "kube/json_reader.h"
#include "linkfit/common/mutex.h"
#include "linkfit/common/strings.h"
#include "linkfit/kube/api_client.h"

namespace linkfit::kube {
namespace {

class SteadyClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() const override {
    return std::chrono::steady_clock::now();
  }
  void SleepFor(std::chrono::nanoseconds duration) override {
    std::this_thread::sleep_for(duration);
  }
};

}  // namespace

void CancelToken::Cancel() {
  MutexLock lock(mutex_);
  if (cancelled_) return;
  cancelled_ = true;
  for (auto& entry : hooks_) entry.second();
  hooks_.clear();
}

bool CancelToken::cancelled() const {
  MutexLock lock(mutex_);
  return cancelled_;
}

std::uint64_t CancelToken::AddHook(std::function<void()> hook) {
  MutexLock lock(mutex_);
  if (cancelled_) {
    hook();
    return 0;
  }
  const std::uint64_t id = next_id_++;
  hooks_.emplace_back(id, std::move(hook));
  return id;
}

void CancelToken::RemoveHook(std::uint64_t id) {
  MutexLock lock(mutex_);
  std::erase_if(hooks_, [id](const auto& entry) { return entry.first == id; });
}

Clock& SystemClock() {
  static SteadyClock clock;
  return clock;
}

std::string StatusMessage(std::string_view body) {
  json::Scratch scratch;
  json::Ctx c;
  simdjson::ondemand::document doc;
  std::string message;
  const bool ok = json::Open(c, body, &doc, scratch, "Status") &&
                  json::ReadEnvelope(
                      c, doc,
                      [&](std::string_view key, simdjson::ondemand::value& value) {
                        if (key == "message") {
                          return json::ReadString(c, value, "message", &message);
                        }
                        return json::Skip(c, value, 0, "Status");
                      },
                      "Status");
  if (ok && !message.empty()) return message;
  std::string text(Trim(body));
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return text.empty() ? "(empty body)" : text;
}

}  // namespace linkfit::kube
