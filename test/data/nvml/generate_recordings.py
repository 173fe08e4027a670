#!/usr/bin/env python3
"""Writes the fake NVML's recordings (test/agent/fake_nvml/) from the project's fixtures.

Each recording is what NVML would answer on one machine of config/topologies/<id>.json: per GPU
its name, UUID and PCI bus id (those of test/data/nvidia-smi/<id>.query.csv), memory, NUMA node,
MIG mode and GPU instances, its active NVLinks with their remote ends (a peer GPU's bus id, or an
NVSwitch's), pending Xid events and whether the GPU is lost; the pairwise PCIe common ancestor
(nvmlDeviceGetTopologyCommonAncestor) from the fixture's pcie_relation; the MIG profiles of the
GPU model from config/mig/. The format and the machines: README.md in this directory. Run from the
repository root and commit the output:  test/data/nvml/generate_recordings.py
"""
import csv
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LEVEL = {"PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50}
# nvmlDeviceGetNvLinkVersion answers an nvmlNvlinkVersion_t, not the generation: NVLink 3.0 is 4.
NVLINK_VERSION = {1: 1, 2: 2, 3: 4, 4: 6, 5: 7}


def query_rows(fixture_id):
    path = os.path.join(ROOT, "test/data/nvidia-smi", fixture_id + ".query.csv")
    with open(path) as f:
        rows = list(csv.reader(f, skipinitialspace=True))
    return {int(r[0]): r for r in rows[1:] if r}


def mig_profiles(set_id):
    if not set_id:
        return []
    with open(os.path.join(ROOT, "config/mig", set_id + ".json")) as f:
        mig = json.load(f)
    # NVML's memorySizeMB: the memory observed on a real GPU, else the profile's share of the
    # nominal total (memory slices / 8).
    def memory_mb(p):
        gib = p["memory_gib_observed"]
        if gib is None:
            gib = mig["total_memory_gib_nominal"] * p["memory_slices"] / 8
        return round(gib * 1024)
    return [{"profile": p["nvml_profile_index"], "id": p["nvidia_smi_profile_id"],
             "slices": p["compute_slices"], "memory_mb": memory_mb(p),
             "instance_count": p["max_instances"]} for p in mig["profiles"]]


def recording(fixture_id, mig=None, xids=None, lost=(), numa_unknown=False):
    with open(os.path.join(ROOT, "config/topologies", fixture_id + ".json")) as f:
        fixture = json.load(f)
    rows = query_rows(fixture_id)
    gpus = fixture["gpus"]
    n = len(gpus)
    fabric = fixture["nvlink_fabric"]
    devices = []
    for g in gpus:
        i = g["index"]
        devices.append({
            "name": rows[i][2], "uuid": rows[i][1], "bus_id": rows[i][4],
            "memory_mib": g["memory_mib"], "numa_node": None if numa_unknown else g["numa_node"],
            "pcie": {"max_generation": g["pcie_gen"], "max_width": 16},
            "lost": i in lost, "nvlinks": [], "xid": (xids or {}).get(i, []),
            "mig": None if not g.get("mig_capable") else {"current": 0, "pending": 0,
                                                           "instances": []},
        })
    version = NVLINK_VERSION.get(fabric.get("nvlink_generation"))
    ancestors = [[0] * n for _ in range(n)]
    for link in fixture["links"]:
        a, b = link["a"], link["b"]
        ancestors[a][b] = ancestors[b][a] = LEVEL[link["pcie_relation"]]
        if fabric["kind"] != "nvswitch":
            for _ in range(link.get("nvlink_count", 0)):
                devices[a]["nvlinks"].append({"remote_bus_id": devices[b]["bus_id"],
                                              "remote_type": "gpu", "version": version})
                devices[b]["nvlinks"].append({"remote_bus_id": devices[a]["bus_id"],
                                              "remote_type": "gpu", "version": version})
    if fabric["kind"] == "nvswitch":
        # Each GPU's links go round the NVSwitches of its baseboard: one baseboard on DGX A100
        # and H100 (every GPU reaches every switch), two of 8 GPUs and 6 switches on DGX-2.
        count = fabric["nvswitch_count"]
        per_board = min(count, fabric["links_per_gpu"])
        boards = count // per_board
        switches = ["00000000:%02X:00.0" % (0xC0 + s) for s in range(count)]
        for i, d in enumerate(devices):
            board = switches[(i * boards // n) * per_board:][:per_board]
            for link in range(fabric["links_per_gpu"]):
                d["nvlinks"].append({"remote_bus_id": board[link % per_board],
                                     "remote_type": "switch", "version": version})
    for i, (current, pending, instances) in (mig or {}).items():
        devices[i]["mig"] = {"current": current, "pending": pending, "instances": instances}
    return {"nvml_version": "12.550.54.15", "driver_version": "550.54.15",
            "mig_profiles": mig_profiles(gpus[0].get("mig_profile_set")),
            "devices": devices, "ancestors": ancestors}


def write(name, data):
    with open(os.path.join(ROOT, "test/data/nvml", name + ".json"), "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


# One plain recording per fixture machine: every GPU healthy, MIG disabled where supported. The
# cascaded-switch box's GPUs are a synthetic "generic-pcie-gen3-16GB" that no model table knows:
# NVML's PCIe answers alone describe it.
for plain in ("dgx1-v100", "dgx2-v100", "dgx-a100", "dgx-h100", "ws-4x-rtxa6000-nvlink-pairs",
              "pcie-8x-a100-nvlink-bridge-pairs", "pcie-8x-rtx4090-all-sys",
              "pcie-8x-cascaded-switch-2socket"):
    write(plain, recording(plain))
# The L40S box's NVML is older than nvmlDeviceGetNumaNodeId: NUMA nodes come from sysfs.
write("pcie-8x-l40s-2socket", recording("pcie-8x-l40s-2socket", numa_unknown=True))
# DGX A100 with GPU 6 in MIG mode (3g.20gb at 4, 2g.10gb at 0, 1g.5gb at 2) and GPU 7 switching
# to MIG mode at the next reset. Instance ids as nvidia-smi numbers them; profile = NVML index.
write("dgx-a100-mig", recording("dgx-a100", mig={
    6: (1, 1, [{"profile": 2, "start": 4, "size": 4, "id": 1,
                "uuid": "MIG-5a1f0d3c-6b2e-5a8e-9d4c-3f0e1b2a7c61"},
               {"profile": 1, "start": 0, "size": 2, "id": 5,
                "uuid": "MIG-0b7e2c91-3d4a-5f6b-8c9d-1e2f3a4b5c6d"},
               {"profile": 0, "start": 2, "size": 1, "id": 9,
                "uuid": "MIG-7c8d9e0f-1a2b-5c3d-9e4f-5a6b7c8d9e0f"}]),
    7: (0, 1, [])}))
# DGX H100 whose GPU 2 has a pending critical Xid (79, fallen off the bus) and an
# application-caused one (13, ignored), and whose GPU 5 NVML cannot open (GPU is lost).
write("dgx-h100-faulty", recording("dgx-h100", xids={2: [13, 79]}, lost=(5,)))
