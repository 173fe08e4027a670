#pragma once

// The fake API server's test fixture: a started server, clients that trust its CA, and a watch
// reader. Shared by fake_api_server_test.cc and fake_api_server_lease_test.cc.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "kube/fake_api_server.h"

namespace linkfit::testing {

using json = nlohmann::json;
using milliseconds = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

inline constexpr char kToken[] = "fake-token";
inline constexpr char kUserAgent[] = "linkfit-test/0.1";
inline constexpr milliseconds kWait{5000};  // upper bound of every wait; they all end much sooner

// Returns the value of a store call, failing the test (and returning null) on an error.
inline json Must(const Result<json>& result) {
  EXPECT_TRUE(result.has_value()) << result.error().message;
  return result.has_value() ? *result : json();
}
inline json Must(const std::optional<json>& object) {
  EXPECT_TRUE(object.has_value());
  return object.value_or(json());
}

inline uint64_t Revision(const json& object) {
  return std::stoull(object["metadata"]["resourceVersion"].get<std::string>());
}

// Reads a watch stream on its own thread, one JSON object per line.
class WatchReader {
 public:
  WatchReader(std::unique_ptr<httplib::ClientImpl> client, std::string path)
      : client_(std::move(client)) {
    thread_ = std::thread([this, path = std::move(path)] {
      httplib::Result result = client_->Get(path, [this](const char* data, size_t length) {
        std::lock_guard<std::mutex> lock(mutex_);
        buffer_.append(data, length);
        for (size_t newline; (newline = buffer_.find('\n')) != std::string::npos;) {
          lines_.push_back(json::parse(buffer_.substr(0, newline)));
          buffer_.erase(0, newline + 1);
        }
        changed_.notify_all();
        return true;
      });
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = result.error();
      status_ = result ? result->status : 0;
      done_ = true;
      changed_.notify_all();
    });
  }
  ~WatchReader() {
    client_->stop();
    thread_.join();
  }

  // Returns the next event, or nullopt when none came within `timeout` or the stream ended.
  std::optional<json> Next(milliseconds timeout = kWait) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, timeout, [this] { return !lines_.empty() || done_; });
    if (lines_.empty()) return std::nullopt;
    json line = std::move(lines_.front());
    lines_.pop_front();
    return line;
  }
  // Returns the next event that is not a BOOKMARK.
  std::optional<json> NextChange() {
    for (std::optional<json> event = Next(); event; event = Next()) {
      if ((*event)["type"] != "BOOKMARK") return event;
    }
    return std::nullopt;
  }
  // Waits for the stream to end; returns false on timeout.
  bool WaitDone(milliseconds timeout = kWait) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [this] { return done_; });
  }
  httplib::Error error() {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }
  int status() {
    std::lock_guard<std::mutex> lock(mutex_);
    return status_;
  }
  void Close() { client_->stop(); }

 private:
  std::unique_ptr<httplib::ClientImpl> client_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string buffer_;
  std::deque<json> lines_;
  bool done_ = false;
  httplib::Error error_ = httplib::Error::Success;
  int status_ = 0;
};

class FakeApiServerTest : public ::testing::Test {
 protected:
  void Start(FakeApiServerOptions options = {}) {
    options.bookmark_interval = milliseconds(100);
    auto started = StartFakeApiServer(std::move(options));
    ASSERT_TRUE(started.has_value()) << started.error().message;
    server_ = std::move(*started);
  }
  void SetUp() override { Start(); }

  // A client that trusts the server's CA (and sends `token` when not empty).
  std::unique_ptr<httplib::ClientImpl> Client(const std::string& token = kToken) {
    std::unique_ptr<httplib::ClientImpl> client;
    if (server_->pki() != nullptr) {
      auto tls = std::make_unique<httplib::SSLClient>("127.0.0.1", server_->port());
      tls->set_ca_cert_path(server_->pki()->ca_cert_path());
      tls->enable_server_certificate_verification(true);
      client = std::move(tls);
    } else {
      client = std::make_unique<httplib::ClientImpl>("127.0.0.1", server_->port());
    }
    httplib::Headers headers = {{"User-Agent", kUserAgent}};
    if (!token.empty()) headers.emplace("Authorization", std::string("Bearer ") + token);
    client->set_default_headers(headers);
    client->set_connection_timeout(5, 0);
    client->set_read_timeout(5, 0);
    return client;
  }

  httplib::Result Get(const std::string& path) { return Client()->Get(path); }
  // One request of any method with a body ("" for none).
  httplib::Result Send(const std::string& method, const std::string& path,
                       const std::string& body = "",
                       const std::string& content_type = "application/json") {
    std::unique_ptr<httplib::ClientImpl> client = Client();
    if (method == "POST") return client->Post(path, body, content_type);
    if (method == "PUT") return client->Put(path, body, content_type);
    if (method == "PATCH") return client->Patch(path, body, content_type);
    if (method == "DELETE") {
      return body.empty() ? client->Delete(path) : client->Delete(path, body, content_type);
    }
    return client->Get(path);
  }
  httplib::Result Bind(const std::string& name, const json& binding) {
    return Client()->Post("/api/v1/namespaces/default/pods/" + name + "/binding", binding.dump(),
                          "application/json");
  }
  json Binding(const std::string& name, const std::string& node, const std::string& uid = "") {
    json binding = {{"apiVersion", "v1"},
                    {"kind", "Binding"},
                    {"metadata", {{"name", name}, {"namespace", "default"}}},
                    {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
    if (!uid.empty()) binding["metadata"]["uid"] = uid;
    return binding;
  }
  json AddPod(const std::string& name, const std::string& node = "") {
    auto added = server_->AddPod(MakeFakePod("default", name, node));
    EXPECT_TRUE(added.has_value()) << added.error().message;
    return added ? *added : json();
  }
  std::unique_ptr<WatchReader> Watch(const std::string& path, bool accept_gzip = false) {
    std::unique_ptr<httplib::ClientImpl> client = Client();
    if (accept_gzip) {
      client->set_default_headers({{"User-Agent", kUserAgent},
                                   {"Authorization", std::string("Bearer ") + kToken},
                                   {"Accept-Encoding", "gzip, deflate"}});
    }
    return std::make_unique<WatchReader>(std::move(client), path);
  }

  void ExpectDrops();

  FakeApiServerPtr server_;
};

}  // namespace linkfit::testing
