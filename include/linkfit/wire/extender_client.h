#pragma once

// ExtenderClient: linkfit's HTTP API from the caller's side, as kube-scheduler calls the four
// verbs (under the configured URL prefix) and as operators call /explain, /inspect and
// /standalone/release. One client for every program that talks to a running linkfit: `linkfit
// demo`, `linkfit explain` against a cluster, and the benchmark harness. (The load tool keeps its
// own raw connection: it measures the server's latency to the microsecond.)
//
// Replies other than 200 and replies that are not the JSON asked for are errors naming the call
// ("POST /scheduler/filter: HTTP 400: ..."); Call gives the status and body as they came, for a
// caller that tells a refusal from an unreachable server.
//
// Thread-safety: one thread at a time (it keeps one connection alive).

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "linkfit/common/result.h"

namespace linkfit::wire {

class ExtenderClient {
 public:
  struct Timeouts {
    int connect_seconds = 5;
    int read_seconds = 10;
    int write_seconds = 10;
  };
  struct Reply {
    int status = 0;
    std::string body;
  };

  // `server`: "http://host:port"; `url_prefix`: where the verbs are served ("/scheduler").
  ExtenderClient(const std::string& server, std::string url_prefix, Timeouts timeouts);
  ExtenderClient(const std::string& server, std::string url_prefix)
      : ExtenderClient(server, std::move(url_prefix), Timeouts{}) {}
  ~ExtenderClient();
  ExtenderClient(const ExtenderClient&) = delete;
  ExtenderClient& operator=(const ExtenderClient&) = delete;

  // The request as it went: an error only when no reply came (connection refused, timeout).
  Result<Reply> Call(std::string_view method, std::string_view path, std::string_view body = {});

  // The body of a 200 reply.
  Result<std::string> Get(std::string_view path);
  Result<std::string> Post(std::string_view path, std::string_view body);
  // A verb under the URL prefix ("filter": POST <prefix>/filter).
  Result<std::string> Verb(std::string_view verb, std::string_view body);

  // The same, the reply parsed as JSON.
  Result<nlohmann::json> GetJson(std::string_view path);
  Result<nlohmann::json> PostJson(std::string_view path, std::string_view body);
  Result<nlohmann::json> VerbJson(std::string_view verb, std::string_view body);

  // Closes the connection (a later call opens another).
  void Stop();

  // Called after every 200 reply with the call and its round trip in milliseconds (the
  // harness's latency figures).
  using Observer = std::function<void(std::string_view method, std::string_view path, double ms)>;
  void set_observer(Observer observer) { observer_ = std::move(observer); }

  const std::string& url_prefix() const { return url_prefix_; }

 private:
  struct Connection;
  Result<std::string> Ok(std::string_view method, std::string_view path, std::string_view body);

  std::unique_ptr<Connection> connection_;
  std::string url_prefix_;
  Observer observer_;
};

// `text` parsed as JSON, or an error naming `what` ("POST /explain: reply is not JSON").
Result<nlohmann::json> ParseReply(std::string_view text, std::string_view what);

}  // namespace linkfit::wire
