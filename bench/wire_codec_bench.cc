// Microbenchmarks of the extender protocol's codec (module `wire`): decoding requests and encoding
// replies, in the two nodeCacheCapable modes (DESIGN.md section 11).
//
//   cmake --build build --target linkfit_wire_codec_bench && build/bench/linkfit_wire_codec_bench

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/extender_args.h"
#include "linkfit/wire/codec.h"

namespace linkfit::wire {
namespace {

// A realistic pod: one GPU container, labels, annotations and a few unrelated spec fields. The
// codec figures' fixed corpus (with NodeJson below), kept as measured: linkfit-load's pod and
// node objects differ in their fields.
std::string PodJson() {
  return R"({"metadata":{"name":"trainer-0","namespace":"ml","uid":"6f1c2b7e-3a51-4c1e-9f0d-)"
         R"(2b8e5d7c9a10","resourceVersion":"48213","creationTimestamp":"2024-03-14T10:00:00Z",)"
         R"("labels":{"app":"trainer","team":"vision"},"annotations":{"linkfit.io/closeness":)"
         R"("nvlink","linkfit.io/required":"true"}},"spec":{"volumes":[{"name":"kube-api-access",)"
         R"("projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":)"
         R"("token"}}],"defaultMode":420}}],"containers":[{"name":"main","image":)"
         R"("registry.example/trainer:1.0","command":["python","train.py"],"resources":)"
         R"({"limits":{"nvidia.com/gpu":"4"},"requests":{"cpu":"8","memory":"64Gi",)"
         R"("nvidia.com/gpu":"4"}},"volumeMounts":[{"name":"kube-api-access","readOnly":true,)"
         R"("mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}],)"
         R"("terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],)"
         R"("restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",)"
         R"("serviceAccountName":"default","schedulerName":"default-scheduler","tolerations":[)"
         R"({"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute",)"
         R"("tolerationSeconds":300}],"priority":0,"enableServiceLinks":true,)"
         R"("preemptionPolicy":"PreemptLowerPriority"},"status":{"phase":"Pending",)"
         R"("qosClass":"Burstable"}})";
}

std::string NodeName(std::size_t i) { return "gpu-node-" + std::to_string(10000 + i); }

std::string CacheModeBody(std::size_t nodes) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < nodes; ++i) names.push_back(NodeName(i));
  return bench::CacheModeArgs(PodJson(), names);
}

// A node object of about 20 KB, shaped like a real GPU node: labels, a topology annotation,
// capacity/allocatable, conditions and a long image list.
std::string NodeJson(std::size_t i) {
  const std::string name = NodeName(i);
  std::string node = R"({"metadata":{"name":")" + name + R"(","uid":"0b7d9c44-1e2f-4a3b-8c5d-)" +
                     std::to_string(100000000000 + i) +
                     R"(","resourceVersion":"912345","creationTimestamp":"2024-03-01T08:00:00Z",)"
                     R"("labels":{"beta.kubernetes.io/arch":"amd64","beta.kubernetes.io/os":)"
                     R"("linux","kubernetes.io/arch":"amd64","kubernetes.io/hostname":")" +
                     name +
                     R"(","kubernetes.io/os":"linux","node.kubernetes.io/instance-type":)"
                     R"("p4d.24xlarge","nvidia.com/gpu.product":"NVIDIA-A100-SXM4-40GB",)"
                     R"("nvidia.com/gpu.count":"8","topology.kubernetes.io/zone":"us-east-1a"},)"
                     R"("annotations":{"linkfit.io/topology":")";
  for (int g = 0; g < 8; ++g) {
    node += R"({\"gpu\":)" + std::to_string(g) +
            R"(,\"uuid\":\"GPU-6f1c2b7e-3a51-4c1e-9f0d-2b8e5d7c9a1)" + std::to_string(g) +
            R"(\",\"numa\":)" + std::to_string(g / 4) + R"(,\"links\":[)";
    for (int h = 0; h < 8; ++h) {
      if (h > 0) node += ',';
      node += R"({\"peer\":)" + std::to_string(h) + R"(,\"type\":\"NV12\",\"gbps\":300})";
    }
    node += "]}";
  }
  node += R"(","node.alpha.kubernetes.io/ttl":"0","volumes.kubernetes.io/controller-managed-)"
          R"(attach-detach":"true"}},"spec":{"podCIDR":"10.244.1.0/24","podCIDRs":)"
          R"(["10.244.1.0/24"],"providerID":"aws:///us-east-1a/i-0123456789abcdef0"},)"
          R"("status":{"capacity":{"cpu":"96","ephemeral-storage":"1967820Mi","hugepages-1Gi":)"
          R"("0","memory":"1176502388Ki","nvidia.com/gpu":"8","pods":"110"},"allocatable":)"
          R"({"cpu":"95690m","ephemeral-storage":"1857058683456","hugepages-1Gi":"0","memory":)"
          R"("1175385204Ki","nvidia.com/gpu":"8","pods":"110"},"conditions":[)";
  const char* conditions[] = {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"};
  for (int c = 0; c < 4; ++c) {
    if (c > 0) node += ',';
    node += R"({"type":")" + std::string(conditions[c]) +
            R"(","status":"False","lastHeartbeatTime":"2024-03-14T09:59:40Z",)"
            R"("lastTransitionTime":"2024-03-01T08:01:00Z","reason":"KubeletHasSufficient",)"
            R"("message":"kubelet has sufficient resources available"})";
  }
  node +=
      R"(],"addresses":[{"type":"InternalIP","address":"10.0.12.34"},{"type":"Hostname",)"
      R"("address":")" +
      name +
      R"("}],"daemonEndpoints":{"kubeletEndpoint":{"Port":10250}},"nodeInfo":{"machineID":)"
      R"("ec2a1b2c3d4e5f60718293a4b5c6d7e8","systemUUID":"ec2a1b2c-3d4e-5f60-7182-93a4b5c6d7e8",)"
      R"("bootID":"5c9e0d1f-2a3b-4c5d-6e7f-8091a2b3c4d5","kernelVersion":"5.10.210-201.852.)"
      R"(amzn2.x86_64","osImage":"Amazon Linux 2","containerRuntimeVersion":)"
      R"("containerd://1.7.11","kubeletVersion":"v1.26.15","kubeProxyVersion":"v1.26.15",)"
      R"("operatingSystem":"linux","architecture":"amd64"},"images":[)";
  for (int m = 0; node.size() < 19500; ++m) {
    if (m > 0) node += ',';
    node += R"({"names":["registry.example/ml/image-)" + std::to_string(m) +
            R"(@sha256:3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7081920",)"
            R"("registry.example/ml/image-)" +
            std::to_string(m) + R"(:v1.2.)" + std::to_string(m) + R"("],"sizeBytes":)" +
            std::to_string(1000000000 + m * 7919) + "}";
  }
  node += "]}}";
  return node;
}

std::string NonCacheModeBody(std::size_t nodes) {
  std::vector<std::string> objects;
  for (std::size_t i = 0; i < nodes; ++i) objects.push_back(NodeJson(i));
  return bench::NonCacheModeArgs(PodJson(), objects);
}

void BM_DecodeCacheMode(benchmark::State& state) {
  const std::string body = CacheModeBody(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    Result<ExtenderArgs> args = DecodeExtenderArgs(body);
    if (!args) state.SkipWithError(args.error().message.c_str());
    benchmark::DoNotOptimize(args);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(body.size()));
}
BENCHMARK(BM_DecodeCacheMode)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);

// Encodes a filter reply for a cache-mode request: 3/4 of the nodes pass, the rest fail.
void BM_EncodeCacheModeFilter(benchmark::State& state) {
  const std::string body = CacheModeBody(static_cast<std::size_t>(state.range(0)));
  Result<ExtenderArgs> args = DecodeExtenderArgs(body);
  for (auto _ : state) {
    FilterResult result;
    result.list = ReplyListFor(*args);
    for (std::size_t i = 0; i < args->node_names.size(); ++i) {
      if (i % 4 == 3) {
        result.failed_nodes.push_back({args->node_names[i], "nvidia.com/gpu: 2 free, 4 requested"});
      } else {
        result.node_names.push_back(args->node_names[i]);
      }
    }
    std::string reply = EncodeFilterResult(result);
    benchmark::DoNotOptimize(reply);
  }
}
BENCHMARK(BM_EncodeCacheModeFilter)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);

// Times `encode` (one reply a call) and reports the replies' bytes a second.
template <typename Encode>
void TimeReplies(benchmark::State& state, const Encode& encode) {
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string reply = encode();
    bytes = reply.size();
    benchmark::DoNotOptimize(reply);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}

// Encodes the filter reply the server sends when about half the candidates fail: names in a
// shuffled (but fixed) order, the failures sharing a few reasons kept by the FilterResult, as the
// filter handler builds them. Only the encoding is timed.
void BM_EncodeFilterHalfFailing(benchmark::State& state) {
  const std::string body = CacheModeBody(static_cast<std::size_t>(state.range(0)));
  Result<ExtenderArgs> args = DecodeExtenderArgs(body);
  std::vector<std::string_view> names = args->node_names;
  std::shuffle(names.begin(), names.end(), std::mt19937(42));
  FilterResult result;
  result.list = ReplyListFor(*args);
  const std::string_view reasons[] = {
      result.Keep("3 free GPUs, 4 requested"),
      result.Keep("1 free GPUs, 4 requested"),
      result.Keep("no 4 GPUs connected by NVLink (closeness nvlink required)"),
      result.Keep("node is cordoned"),
  };
  const std::string_view unresolvable = result.Keep("node has no nvidia.com/gpu devices");
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i % 2 == 0) {
      result.node_names.push_back(names[i]);
    } else if (i % 50 == 1) {
      result.failed_and_unresolvable_nodes.push_back({names[i], unresolvable});
    } else {
      result.failed_nodes.push_back({names[i], reasons[(i / 2) % 4]});
    }
  }
  TimeReplies(state, [&result] { return EncodeFilterResult(result); });
}
BENCHMARK(BM_EncodeFilterHalfFailing)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);

// The same reply as BM_EncodeFilterHalfFailing, given as the extender's filter gives it in steady
// state (RankedFilterReply): passing names marked by request index, failures by their name's rank
// (here: their place among the names sorted), each with its reason's number. Only the encoding is
// timed.
void BM_EncodeRankedFilterHalfFailing(benchmark::State& state) {
  const std::string body = CacheModeBody(static_cast<std::size_t>(state.range(0)));
  Result<ExtenderArgs> args = DecodeExtenderArgs(body);
  std::vector<std::string_view> names = args->node_names;
  std::shuffle(names.begin(), names.end(), std::mt19937(42));
  std::vector<std::string_view> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  const std::vector<std::string_view> reasons = {
      "3 free GPUs, 4 requested", "1 free GPUs, 4 requested",
      "no 4 GPUs connected by NVLink (closeness nvlink required)", "node is cordoned",
      "node has no nvidia.com/gpu devices"};
  std::vector<std::uint64_t> passing((names.size() + 63) / 64);
  std::vector<std::uint64_t> failing((sorted.size() + 63) / 64);
  std::vector<std::uint64_t> at_rank(sorted.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i % 2 == 0) {
      passing[i / 64] |= std::uint64_t{1} << (i % 64);
      continue;
    }
    const auto rank = static_cast<std::size_t>(
        std::lower_bound(sorted.begin(), sorted.end(), names[i]) - sorted.begin());
    const bool unresolvable = i % 50 == 1;
    failing[rank / 64] |= std::uint64_t{1} << (rank % 64);
    at_rank[rank] = RankedFilterReply::AtRank(
        static_cast<std::uint32_t>(i), static_cast<std::uint16_t>(unresolvable ? 4 : (i / 2) % 4),
        unresolvable);
  }
  RankedFilterReply reply;
  reply.names = names;
  reply.passing = passing;
  reply.failing = failing;
  reply.at_rank = at_rank.data();
  reply.reasons = reasons;
  TimeReplies(state, [&reply] { return EncodeRankedFilterReply(reply); });
}
BENCHMARK(BM_EncodeRankedFilterHalfFailing)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);

void BM_EncodePrioritize(benchmark::State& state) {
  const std::string body = CacheModeBody(static_cast<std::size_t>(state.range(0)));
  Result<ExtenderArgs> args = DecodeExtenderArgs(body);
  for (auto _ : state) {
    std::vector<HostPriority> priorities;
    priorities.reserve(args->node_names.size());
    for (std::size_t i = 0; i < args->node_names.size(); ++i) {
      priorities.push_back({args->node_names[i], static_cast<std::int64_t>(i % 11)});
    }
    std::string reply = EncodeHostPriorityList(priorities);
    benchmark::DoNotOptimize(reply);
  }
}
BENCHMARK(BM_EncodePrioritize)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);

void BM_DecodeNonCacheMode(benchmark::State& state) {
  const std::string body = NonCacheModeBody(static_cast<std::size_t>(state.range(0)));
  state.counters["body_MB"] = static_cast<double>(body.size()) / 1e6;
  for (auto _ : state) {
    Result<ExtenderArgs> args = DecodeExtenderArgs(body);
    if (!args) state.SkipWithError(args.error().message.c_str());
    benchmark::DoNotOptimize(args);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(body.size()));
}
BENCHMARK(BM_DecodeNonCacheMode)->Arg(1000)->Unit(benchmark::kMillisecond);

// Encodes the non-cache reply: every node passes and is echoed byte for byte.
void BM_EncodeNonCacheModeFilter(benchmark::State& state) {
  const std::string body = NonCacheModeBody(static_cast<std::size_t>(state.range(0)));
  Result<ExtenderArgs> args = DecodeExtenderArgs(body);
  for (auto _ : state) {
    FilterResult result;
    result.list = ReplyListFor(*args);
    for (const NodeItem& node : args->nodes) result.nodes_json.push_back(node.raw_json);
    std::string reply = EncodeFilterResult(result);
    benchmark::DoNotOptimize(reply);
  }
}
BENCHMARK(BM_EncodeNonCacheModeFilter)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace linkfit::wire

BENCHMARK_MAIN();
