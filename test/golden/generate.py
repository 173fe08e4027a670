#!/usr/bin/env python3
"""Writes the golden extender exchanges under test/golden/ (see README.md).

The expected responses are built here, independently of linkfit's C++ encoder, with a small
model of Go's encoding/json (go_marshal). Re-run after editing a case; review the diff.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def go_string_fixups(text):
    # Python's json.dumps(ensure_ascii=False) leaves these raw; Go escapes them.
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def go_marshal(value):
    """Compact JSON as Go's json.Marshal writes it (dict order is kept: sort maps yourself)."""
    return go_string_fixups(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def go_map(d):
    return dict(sorted(d.items(), key=lambda kv: kv[0].encode()))


def write(verb, case, request, response, decision=None):
    os.makedirs(os.path.join(HERE, verb), exist_ok=True)
    base = os.path.join(HERE, verb, case)
    with open(base + ".request.json", "w", encoding="utf-8") as f:
        f.write(request if isinstance(request, str) else go_marshal(request))
    with open(base + ".response.json", "w", encoding="utf-8") as f:
        f.write(response)
    if decision is not None:
        with open(base + ".decision.json", "w", encoding="utf-8") as f:
            f.write(json.dumps(decision, ensure_ascii=False, indent=2) + "\n")


POD = {
    "metadata": {"name": "trainer-0", "namespace": "ml", "uid": "6f1c2b7e-3a51-4c1e-9f0d-2b8e5d7c9a10",
                 "resourceVersion": "48213", "creationTimestamp": "2024-03-14T10:00:00Z",
                 "labels": {"app": "trainer"},
                 "annotations": {"linkfit.io/closeness": "nvlink", "note": "<b>fast</b> & \u2028 caf\u00e9"}},
    "spec": {"containers": [{"name": "main", "image": "registry.example/trainer:1.0",
                             "resources": {"limits": {"example.com/gpu": "2"},
                                           "requests": {"cpu": "500m", "example.com/gpu": "2", "memory": "1Gi"}}}],
             "restartPolicy": "Always", "schedulerName": "default-scheduler", "priority": 0,
             "enableServiceLinks": True},
    "status": {"phase": "Pending", "qosClass": "Burstable"},
}


def node(name, gpus):
    return {
        "metadata": {"name": name, "uid": "0b7d9c44-" + name, "labels": {"kubernetes.io/hostname": name},
                     "annotations": {"linkfit.io/topology": "{\"gpus\":%d,\"links\":\"<nvlink>\"}" % gpus},
                     "creationTimestamp": "2024-03-01T08:00:00Z"},
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110", "example.com/gpu": str(gpus)},
                   "allocatable": {"cpu": "15800m", "memory": "63Gi", "pods": "110", "example.com/gpu": str(gpus)},
                   "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2024-03-14T09:59:40Z",
                                   "lastTransitionTime": "2024-03-01T08:01:00Z", "reason": "KubeletReady",
                                   "message": "kubelet is posting ready status"}],
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                   "nodeInfo": {"machineID": "", "kubeletVersion": "v1.26.15", "operatingSystem": "linux",
                                "architecture": "amd64"}},
    }


def filter_response(nodes_json=None, names=None, failed=None, unresolvable=None, error=""):
    nodes = "null" if nodes_json is None else '{"metadata":{},"items":[' + ",".join(nodes_json) + "]}"
    names_json = "null" if names is None else go_marshal(names)
    return ('{"Nodes":' + nodes + ',"NodeNames":' + names_json + ',"FailedNodes":' +
            go_marshal(go_map(failed or {})) + ',"FailedAndUnresolvableNodes":' +
            go_marshal(go_map(unresolvable or {})) + ',"Error":' + go_marshal(error) + "}")


def main():
    failed = {"node-b": "example.com/gpu: 1 free, 2 requested"}
    unresolvable = {"node-c": "node has no example.com/gpu devices"}

    # filter, nodeCacheCapable: true (spec 6.2).
    write("filter", "cache_mode",
          {"Pod": POD, "Nodes": None, "NodeNames": ["node-a", "node-b", "node-c"]},
          filter_response(names=["node-a"], failed=failed, unresolvable=unresolvable),
          {"pass": ["node-a"], "failed": [["node-b", failed["node-b"]]],
           "unresolvable": [["node-c", unresolvable["node-c"]]]})

    # filter, nodeCacheCapable: false (spec 6.1): passing nodes are echoed byte for byte.
    nodes = [node("node-a", 8), node("node-b", 1), node("node-c", 0)]
    write("filter", "non_cache_mode",
          {"Pod": POD, "Nodes": {"metadata": {"resourceVersion": "912"}, "items": nodes}, "NodeNames": None},
          filter_response(nodes_json=[go_marshal(nodes[0])], failed=failed, unresolvable=unresolvable),
          {"pass": ["node-a"], "failed": [["node-b", failed["node-b"]]],
           "unresolvable": [["node-c", unresolvable["node-c"]]]})

    # Every node passes in non-cache mode, in request order.
    write("filter", "non_cache_mode_all_pass",
          {"Pod": POD, "Nodes": {"metadata": {}, "items": nodes[:2]}, "NodeNames": None},
          filter_response(nodes_json=[go_marshal(n) for n in nodes[:2]]),
          {"pass": ["node-a", "node-b"]})

    # The upstream compatibility test lowercases every key of the envelope.
    write("filter", "lowercase_envelope",
          {"pod": POD, "nodes": None, "nodenames": ["node-a", "node-b"]},
          filter_response(names=["node-b", "node-a"]),
          {"pass": ["node-b", "node-a"]})

    # Both lists null: nothing to pass; the reply has both lists null too.
    write("filter", "null_lists",
          {"Pod": POD, "Nodes": None, "NodeNames": None},
          filter_response(),
          {"pass": []})

    # Unicode and Go escapes: names arrive escaped (\u003c, \u00e9, a surrogate pair) and raw;
    # reasons carry <, >, &, U+2028 and quotes; map keys sort by bytes.
    request = ('{"Pod":' + go_marshal(POD) + ',"Nodes":null,"NodeNames":["gpu-\\u00e9t\\u00e9",'
               '"gpu-<1>","gpu-\\ud83d\\ude80","Gpu-Z","gpu-a&b"]}')
    reasons = [["gpu-été", "needs <2> GPUs & \"nvlink\"\u2028line"], ["Gpu-Z", "tab\there"],
               ["gpu-🚀", "ok?\u2029"]]
    write("filter", "unicode_escapes", request,
          filter_response(names=["gpu-<1>", "gpu-a&b"], failed=dict(reasons)),
          {"pass": ["gpu-<1>", "gpu-a&b"], "failed": reasons})

    # An error reply (spec 6.2).
    write("filter", "error",
          {"Pod": POD, "Nodes": None, "NodeNames": ["node-a"]},
          filter_response(error="device inventory unavailable"),
          {"error": "device inventory unavailable"})

    # prioritize (spec 6.3): a bare array, in the extender's order.
    write("prioritize", "cache_mode",
          {"Pod": POD, "Nodes": None, "NodeNames": ["node-a", "node-d"]},
          '[{"Host":"node-a","Score":8},{"Host":"node-d","Score":3}]',
          {"scores": [["node-a", 8], ["node-d", 3]]})
    write("prioritize", "non_cache_mode",
          {"Pod": POD, "Nodes": {"metadata": {}, "items": nodes[:2]}, "NodeNames": None},
          '[{"Host":"node-a","Score":10},{"Host":"node-b","Score":0}]',
          {"scores": [["node-a", 10], ["node-b", 0]]})
    write("prioritize", "empty",
          {"Pod": POD, "Nodes": None, "NodeNames": ["node-a", "node-b"]},
          "[]",
          {"scores": []})

    # bind (spec 6.4).
    bind_request = {"PodName": "trainer-0", "PodNamespace": "ml",
                    "PodUID": "6f1c2b7e-3a51-4c1e-9f0d-2b8e5d7c9a10", "Node": "node-a"}
    expect = {"pod_name": "trainer-0", "pod_namespace": "ml",
              "pod_uid": "6f1c2b7e-3a51-4c1e-9f0d-2b8e5d7c9a10", "node": "node-a"}
    write("bind", "ok", bind_request, '{"Error":""}', {"error": "", "expect": expect})
    write("bind", "error", bind_request, '{"Error":"binding rejected: node-a draining"}',
          {"error": "binding rejected: node-a draining", "expect": expect})
    write("bind", "lowercase_keys", {k.lower(): v for k, v in bind_request.items()}, '{"Error":""}',
          {"error": "", "expect": expect})

    # preempt, cache mode (spec 6.5): node-b is rejected by leaving it out.
    preemptor = json.loads(json.dumps(POD))
    preemptor["spec"]["priority"] = 1000
    meta = {"node-a": {"Pods": [{"UID": "0b7d9c44-1e2f-4a3b-8c5d-6e7f8a9b0c1d"}], "NumPDBViolations": 0},
            "node-b": {"Pods": [{"UID": "aa11bb22-cc33-dd44-ee55-ff6677889900"},
                                {"UID": "12345678-90ab-cdef-1234-567890abcdef"}], "NumPDBViolations": 1}}
    write("preempt", "cache_mode",
          {"Pod": preemptor, "NodeNameToVictims": None, "NodeNameToMetaVictims": meta},
          '{"NodeNameToMetaVictims":' + go_marshal({"node-a": meta["node-a"]}) + "}",
          {"keep": ["node-a"]})

    # preempt, non-cache mode: full victim pods in, UIDs out (always NodeNameToMetaVictims).
    def victim(name, uid, priority):
        v = json.loads(json.dumps(POD))
        v["metadata"].update({"name": name, "uid": uid})
        v["spec"]["priority"] = priority
        v["status"] = {"phase": "Running"}
        return v
    full = {"node-b": {"Pods": [victim("v2", "uid-v2", 500), victim("v3", "uid-v3", 100)], "NumPDBViolations": 2},
            "node-a": {"Pods": [victim("v1", "uid-v1", 0)], "NumPDBViolations": 0}}
    write("preempt", "non_cache_mode",
          {"Pod": preemptor, "NodeNameToVictims": full, "NodeNameToMetaVictims": None},
          '{"NodeNameToMetaVictims":{"node-a":{"Pods":[{"UID":"uid-v1"}],"NumPDBViolations":0},'
          '"node-b":{"Pods":[{"UID":"uid-v2"},{"UID":"uid-v3"}],"NumPDBViolations":2}}}',
          {"keep": ["node-b", "node-a"]})
    write("preempt", "none_kept",
          {"Pod": preemptor, "NodeNameToVictims": None, "NodeNameToMetaVictims": meta},
          '{"NodeNameToMetaVictims":{}}',
          {"keep": []})


if __name__ == "__main__":
    main()
