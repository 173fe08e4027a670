#include "linkfit/agent/node_publisher.h"

#include "linkfit/common/json_string.h"
#include "linkfit/common/log.h"
#include "linkfit/kube/object_json.h"

namespace linkfit::agent {

std::string AnnotationPatch(const std::map<std::string, std::string>& current,
                            const WantedAnnotations& wanted) {
  std::string fields;
  for (const auto& [key, value] : wanted) {
    const auto it = current.find(key);
    const bool present = it != current.end();
    if (value ? present && it->second == *value : !present) continue;
    fields += fields.empty() ? "" : ",";
    json::AppendString(fields, key);
    fields += ':';
    if (value) {
      json::AppendString(fields, *value);
    } else {
      fields += "null";
    }
  }
  if (fields.empty()) return "";
  return "{\"metadata\":{\"annotations\":{" + fields + "}}}";
}

NodePublisher::NodePublisher(kube::ApiClient& client, std::string node_name)
    : client_(client), node_name_(std::move(node_name)), path_("/api/v1/nodes/" + node_name_) {}

Result<void> NodePublisher::Remember(const std::string& node_json) {
  auto node = kube::DecodeNode(node_json);
  if (!node) return WithContext(node.error(), "node " + node_name_ + " as the server returned it");
  if (node->name != node_name_) {
    return MakeError("the server returned node " + node->name + " for " + node_name_);
  }
  annotations_.clear();
  for (const auto& [key, value] : node->annotations) annotations_.emplace(key, value);
  known_ = true;
  return {};
}

Result<void> NodePublisher::Refresh() {
  auto reply = client_.Get(path_, "get");
  if (!reply) return MakeError("GET " + path_ + ": " + reply.error().message);
  if (reply->status != 200) {
    return MakeError("GET " + path_ + ": HTTP " + std::to_string(reply->status) + ": " +
                     kube::StatusMessage(reply->body));
  }
  return Remember(reply->body);
}

Result<bool> NodePublisher::Publish(const WantedAnnotations& wanted) {
  if (!known_) {
    if (auto read = Refresh(); !read) return tl::unexpected(read.error());
  }
  const std::string patch = AnnotationPatch(annotations_, wanted);
  if (patch.empty()) return false;
  auto reply = client_.Patch(path_, patch, "patch");
  if (!reply) {
    known_ = false;  // the patch may or may not have landed: read before deciding again
    return MakeError("PATCH " + path_ + ": " + reply.error().message);
  }
  if (reply->status != 200) {
    known_ = false;
    return MakeError("PATCH " + path_ + ": HTTP " + std::to_string(reply->status) + ": " +
                     kube::StatusMessage(reply->body));
  }
  if (auto remembered = Remember(reply->body); !remembered) {
    known_ = false;
    return tl::unexpected(remembered.error());
  }
  ++patches_;
  return true;
}

}  // namespace linkfit::agent
