#include "linkfit/node/nri_messages.h"

#include <optional>

#include "linkfit/node/proto_wire.h"

namespace linkfit::node {
namespace {

// Reads every field of `bytes`, calling `on_field`; a malformed message is an error naming `what`.
template <typename OnField>
Result<void> ForEachField(std::string_view bytes, const char* what, OnField&& on_field) {
  ProtoReader reader(bytes);
  for (;;) {
    auto field = reader.Next();
    if (!field) return WithContext(field.error(), what);
    if (!*field) return {};
    if (auto ok = on_field(**field); !ok) return WithContext(ok.error(), what);
  }
}

Result<std::string> Text(const ProtoField& field) {
  if (field.wire_type != 2) {
    return MakeError("field " + std::to_string(field.number) + " is not length-delimited");
  }
  return std::string(field.bytes);
}

// A map<string, string> entry {key = 1, value = 2}.
Result<void> MapEntry(const ProtoField& field, std::map<std::string, std::string>& out) {
  if (field.wire_type != 2) return MakeError("map entry is not a message");
  std::string key;
  std::string value;
  auto read = ForEachField(field.bytes, "map entry", [&](const ProtoField& part) -> Result<void> {
    if (part.number == 1) LINKFIT_ASSIGN_OR_RETURN(key, Text(part));
    if (part.number == 2) LINKFIT_ASSIGN_OR_RETURN(value, Text(part));
    return {};
  });
  if (!read) return read;
  out[std::move(key)] = std::move(value);
  return {};
}

void WriteMap(ProtoWriter& out, int field, const std::map<std::string, std::string>& map) {
  for (const auto& [key, value] : map) {
    ProtoWriter entry;
    entry.BytesIfSet(1, key);
    entry.BytesIfSet(2, value);
    out.Bytes(field, entry.data());
  }
}

Result<PodSandbox> DecodePodSandbox(std::string_view bytes) {
  PodSandbox pod;
  auto read = ForEachField(bytes, "PodSandbox", [&](const ProtoField& f) -> Result<void> {
    switch (f.number) {
      case 1:
        LINKFIT_ASSIGN_OR_RETURN(pod.id, Text(f));
        break;
      case 2:
        LINKFIT_ASSIGN_OR_RETURN(pod.name, Text(f));
        break;
      case 3:
        LINKFIT_ASSIGN_OR_RETURN(pod.uid, Text(f));
        break;
      case 4:
        LINKFIT_ASSIGN_OR_RETURN(pod.pod_namespace, Text(f));
        break;
      case 5:
        return MapEntry(f, pod.labels);
      case 6:
        return MapEntry(f, pod.annotations);
      default:
        break;
    }
    return {};
  });
  if (!read) return tl::unexpected(read.error());
  return pod;
}

Result<Container> DecodeContainer(std::string_view bytes) {
  Container container;
  auto read = ForEachField(bytes, "Container", [&](const ProtoField& f) -> Result<void> {
    switch (f.number) {
      case 1:
        LINKFIT_ASSIGN_OR_RETURN(container.id, Text(f));
        break;
      case 2:
        LINKFIT_ASSIGN_OR_RETURN(container.pod_sandbox_id, Text(f));
        break;
      case 3:
        LINKFIT_ASSIGN_OR_RETURN(container.name, Text(f));
        break;
      case 6:
        return MapEntry(f, container.annotations);
      case 8: {
        std::string entry;
        LINKFIT_ASSIGN_OR_RETURN(entry, Text(f));
        container.env.push_back(std::move(entry));
        break;
      }
      default:
        break;
    }
    return {};
  });
  if (!read) return tl::unexpected(read.error());
  return container;
}

}  // namespace

std::string EncodeRegisterPlugin(std::string_view name, std::string_view index) {
  ProtoWriter out;
  out.BytesIfSet(1, name);
  out.BytesIfSet(2, index);
  return out.Take();
}

Result<ConfigureRequest> DecodeConfigureRequest(std::string_view bytes) {
  ConfigureRequest request;
  auto read = ForEachField(bytes, "ConfigureRequest", [&](const ProtoField& f) -> Result<void> {
    switch (f.number) {
      case 1:
        LINKFIT_ASSIGN_OR_RETURN(request.config, Text(f));
        break;
      case 2:
        LINKFIT_ASSIGN_OR_RETURN(request.runtime_name, Text(f));
        break;
      case 3:
        LINKFIT_ASSIGN_OR_RETURN(request.runtime_version, Text(f));
        break;
      default:
        break;
    }
    return {};
  });
  if (!read) return tl::unexpected(read.error());
  return request;
}

std::string EncodeConfigureRequest(const ConfigureRequest& request) {
  ProtoWriter out;
  out.BytesIfSet(1, request.config);
  out.BytesIfSet(2, request.runtime_name);
  out.BytesIfSet(3, request.runtime_version);
  return out.Take();
}

std::string EncodeConfigureResponse(std::int32_t events) {
  ProtoWriter out;
  out.VarintIfSet(2, static_cast<std::uint64_t>(static_cast<std::uint32_t>(events)));
  return out.Take();
}

Result<SynchronizeRequest> DecodeSynchronizeRequest(std::string_view bytes) {
  SynchronizeRequest request;
  auto read = ForEachField(bytes, "SynchronizeRequest", [&](const ProtoField& f) -> Result<void> {
    if (f.number == 1) {
      if (f.wire_type != 2) return MakeError("pods is not a message");
      PodSandbox pod;
      LINKFIT_ASSIGN_OR_RETURN(pod, DecodePodSandbox(f.bytes));
      request.pods.push_back(std::move(pod));
    } else if (f.number == 2) {
      if (f.wire_type != 2) return MakeError("containers is not a message");
      Container container;
      LINKFIT_ASSIGN_OR_RETURN(container, DecodeContainer(f.bytes));
      request.containers.push_back(std::move(container));
    } else if (f.number == 3) {
      request.more = f.varint != 0;
    }
    return {};
  });
  if (!read) return tl::unexpected(read.error());
  return request;
}

std::string EncodeSynchronizeResponse(bool more) {
  ProtoWriter out;
  out.VarintIfSet(2, more ? 1 : 0);
  return out.Take();
}

Result<ContainerEvent> DecodeContainerEvent(std::string_view bytes) {
  ContainerEvent event;
  bool has_pod = false;
  bool has_container = false;
  auto read = ForEachField(bytes, "container event", [&](const ProtoField& f) -> Result<void> {
    if (f.number == 1 && f.wire_type == 2) {
      LINKFIT_ASSIGN_OR_RETURN(event.pod, DecodePodSandbox(f.bytes));
      has_pod = true;
    } else if (f.number == 2 && f.wire_type == 2) {
      LINKFIT_ASSIGN_OR_RETURN(event.container, DecodeContainer(f.bytes));
      has_container = true;
    }
    return {};
  });
  if (!read) return tl::unexpected(read.error());
  if (!has_pod || !has_container) return MakeError("container event: without pod or container");
  return event;
}

Result<PodSandbox> DecodePodSandboxEvent(std::string_view bytes) {
  std::optional<PodSandbox> pod;
  auto read = ForEachField(bytes, "pod sandbox event", [&](const ProtoField& f) -> Result<void> {
    if (f.number == 1) {
      if (f.wire_type != 2) return MakeError("pod is not a message");
      LINKFIT_ASSIGN_OR_RETURN(pod, DecodePodSandbox(f.bytes));
    }
    return {};
  });
  if (!read) return tl::unexpected(read.error());
  if (!pod) return MakeError("pod sandbox event: without pod");
  return std::move(*pod);
}

std::string EncodePodSandboxEvent(const PodSandbox& pod) {
  ProtoWriter out;
  out.Bytes(1, EncodePodSandbox(pod));
  return out.Take();
}

Result<StateChange> DecodeStateChange(std::string_view bytes) {
  StateChange change;
  auto read = ForEachField(bytes, "StateChangeEvent", [&](const ProtoField& f) -> Result<void> {
    if (f.number == 1 && f.wire_type == 0) change.event = static_cast<int>(f.varint);
    if (f.number == 2 && f.wire_type == 2) {
      LINKFIT_ASSIGN_OR_RETURN(change.pod, DecodePodSandbox(f.bytes));
    }
    if (f.number == 3 && f.wire_type == 2) {
      LINKFIT_ASSIGN_OR_RETURN(change.container, DecodeContainer(f.bytes));
    }
    return {};
  });
  if (!read) return tl::unexpected(read.error());
  return change;
}

std::string EncodeStateChange(const StateChange& change) {
  ProtoWriter out;
  out.VarintIfSet(1, static_cast<std::uint64_t>(change.event));
  out.Bytes(2, EncodePodSandbox(change.pod));
  if (!change.container.name.empty()) out.Bytes(3, EncodeContainer(change.container));
  return out.Take();
}

std::string EncodeCreateContainerResponse(const ContainerAdjustment& adjust) {
  ProtoWriter adjustment;
  WriteMap(adjustment, 2, adjust.annotations);
  for (const auto& [key, value] : adjust.env) {
    ProtoWriter pair;
    pair.BytesIfSet(1, key);
    pair.BytesIfSet(2, value);
    adjustment.Bytes(4, pair.data());
  }
  if (!adjust.devices.empty()) {
    ProtoWriter linux_adjustment;
    for (const LinuxDevice& device : adjust.devices) {
      ProtoWriter entry;
      entry.BytesIfSet(1, device.path);
      entry.BytesIfSet(2, device.type);
      entry.VarintIfSet(3, static_cast<std::uint64_t>(device.major));
      entry.VarintIfSet(4, static_cast<std::uint64_t>(device.minor));
      if (device.file_mode != 0) {
        ProtoWriter mode;
        mode.Varint(1, device.file_mode);
        entry.Bytes(5, mode.data());
      }
      linux_adjustment.Bytes(1, entry.data());
    }
    adjustment.Bytes(6, linux_adjustment.data());
  }
  for (const std::string& name : adjust.cdi_devices) {
    ProtoWriter device;
    device.BytesIfSet(1, name);
    adjustment.Bytes(8, device.data());
  }
  ProtoWriter out;
  out.Bytes(1, adjustment.data());
  return out.Take();
}

Result<ContainerAdjustment> DecodeCreateContainerResponse(std::string_view bytes) {
  ContainerAdjustment adjust;
  auto read = ForEachField(bytes, "CreateContainerResponse", [&](const ProtoField& f) {
    if (f.number != 1 || f.wire_type != 2) return Result<void>{};
    return ForEachField(f.bytes, "ContainerAdjustment", [&](const ProtoField& a) -> Result<void> {
      if (a.number == 2) return MapEntry(a, adjust.annotations);
      if (a.number == 4 && a.wire_type == 2) {
        std::map<std::string, std::string> pair;
        if (auto ok = MapEntry(a, pair); !ok) return ok;
        for (auto& [key, value] : pair) adjust.env.emplace_back(key, value);
      }
      if (a.number == 6 && a.wire_type == 2) {
        return ForEachField(a.bytes, "LinuxContainerAdjustment", [&](const ProtoField& l) {
          if (l.number != 1 || l.wire_type != 2) return Result<void>{};
          LinuxDevice& device = adjust.devices.emplace_back();
          device.type.clear();
          return ForEachField(l.bytes, "LinuxDevice", [&](const ProtoField& d) -> Result<void> {
            if (d.number == 1 && d.wire_type == 2) device.path = std::string(d.bytes);
            if (d.number == 2 && d.wire_type == 2) device.type = std::string(d.bytes);
            if (d.number == 3 && d.wire_type == 0)
              device.major = static_cast<std::int64_t>(d.varint);
            if (d.number == 4 && d.wire_type == 0)
              device.minor = static_cast<std::int64_t>(d.varint);
            if (d.number == 5 && d.wire_type == 2) {
              return ForEachField(d.bytes, "OptionalFileMode", [&](const ProtoField& m) {
                if (m.number == 1 && m.wire_type == 0) {
                  device.file_mode = static_cast<std::uint32_t>(m.varint);
                }
                return Result<void>{};
              });
            }
            return {};
          });
        });
      }
      if (a.number == 8 && a.wire_type == 2) {
        std::map<std::string, std::string> device;  // {name = 1}: read as a one-field entry
        if (auto ok = MapEntry(a, device); !ok) return ok;
        for (auto& [name, ignored] : device) adjust.cdi_devices.push_back(name);
      }
      return {};
    });
  });
  if (!read) return tl::unexpected(read.error());
  return adjust;
}

std::string EncodePodSandbox(const PodSandbox& pod) {
  ProtoWriter out;
  out.BytesIfSet(1, pod.id);
  out.BytesIfSet(2, pod.name);
  out.BytesIfSet(3, pod.uid);
  out.BytesIfSet(4, pod.pod_namespace);
  WriteMap(out, 5, pod.labels);
  WriteMap(out, 6, pod.annotations);
  return out.Take();
}

std::string EncodeContainer(const Container& container) {
  ProtoWriter out;
  out.BytesIfSet(1, container.id);
  out.BytesIfSet(2, container.pod_sandbox_id);
  out.BytesIfSet(3, container.name);
  WriteMap(out, 6, container.annotations);
  for (const std::string& entry : container.env) out.Bytes(8, entry);
  return out.Take();
}

std::string EncodeContainerEvent(const ContainerEvent& event) {
  ProtoWriter out;
  out.Bytes(1, EncodePodSandbox(event.pod));
  out.Bytes(2, EncodeContainer(event.container));
  return out.Take();
}

std::string EncodeSynchronizeRequest(const SynchronizeRequest& request) {
  ProtoWriter out;
  for (const PodSandbox& pod : request.pods) out.Bytes(1, EncodePodSandbox(pod));
  for (const Container& container : request.containers) out.Bytes(2, EncodeContainer(container));
  out.VarintIfSet(3, request.more ? 1 : 0);
  return out.Take();
}

}  // namespace linkfit::node
