#include "linkfit/wire/extender_client.h"

#include <httplib.h>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

namespace linkfit::wire {

struct ExtenderClient::Connection {
  explicit Connection(const std::string& server) : client(server) {}
  httplib::Client client;
};

ExtenderClient::ExtenderClient(const std::string& server, std::string url_prefix, Timeouts timeouts)
    : connection_(std::make_unique<Connection>(server)), url_prefix_(std::move(url_prefix)) {
  while (!url_prefix_.empty() && url_prefix_.back() == '/') url_prefix_.pop_back();
  httplib::Client& client = connection_->client;
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  client.set_connection_timeout(timeouts.connect_seconds, 0);
  client.set_read_timeout(timeouts.read_seconds, 0);
  client.set_write_timeout(timeouts.write_seconds, 0);
}

ExtenderClient::~ExtenderClient() = default;

Result<ExtenderClient::Reply> ExtenderClient::Call(std::string_view method, std::string_view path,
                                                   std::string_view body) {
  httplib::Client& client = connection_->client;
  const std::string target(path);
  if (method != "GET" && method != "POST") {
    return MakeError("ExtenderClient: method " + std::string(method) + " is not used by linkfit");
  }
  httplib::Result response =
      method == "GET" ? client.Get(target)
                      : client.Post(target, body.data(), body.size(), "application/json");
  if (!response) {
    return MakeError(std::string(method) + " " + target + ": " +
                     httplib::to_string(response.error()));
  }
  return Reply{response->status, std::move(response->body)};
}

Result<std::string> ExtenderClient::Ok(std::string_view method, std::string_view path,
                                       std::string_view body) {
  const auto start = std::chrono::steady_clock::now();
  Reply reply;
  LINKFIT_ASSIGN_OR_RETURN(reply, Call(method, path, body));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (reply.status != 200) {
    return MakeError(std::string(method) + " " + std::string(path) + ": HTTP " +
                     std::to_string(reply.status) + ": " + reply.body.substr(0, 300));
  }
  if (observer_) observer_(method, path, ms);
  return std::move(reply.body);
}

Result<std::string> ExtenderClient::Get(std::string_view path) { return Ok("GET", path, {}); }

Result<std::string> ExtenderClient::Post(std::string_view path, std::string_view body) {
  return Ok("POST", path, body);
}

Result<std::string> ExtenderClient::Verb(std::string_view verb, std::string_view body) {
  return Post(url_prefix_ + "/" + std::string(verb), body);
}

Result<nlohmann::json> ParseReply(std::string_view text, std::string_view what) {
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
  if (parsed.is_discarded()) return MakeError(std::string(what) + ": reply is not JSON");
  return parsed;
}

Result<nlohmann::json> ExtenderClient::GetJson(std::string_view path) {
  std::string body;
  LINKFIT_ASSIGN_OR_RETURN(body, Get(path));
  return ParseReply(body, "GET " + std::string(path));
}

Result<nlohmann::json> ExtenderClient::PostJson(std::string_view path, std::string_view body) {
  std::string reply;
  LINKFIT_ASSIGN_OR_RETURN(reply, Post(path, body));
  return ParseReply(reply, "POST " + std::string(path));
}

Result<nlohmann::json> ExtenderClient::VerbJson(std::string_view verb, std::string_view body) {
  return PostJson(url_prefix_ + "/" + std::string(verb), body);
}

void ExtenderClient::Stop() { connection_->client.stop(); }

}  // namespace linkfit::wire
