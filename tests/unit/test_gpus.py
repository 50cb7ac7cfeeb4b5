"""GPU discovery, health and usage against a fake NVML at the pynvml boundary.

The fake replaces pynvml's functions (not its error classes): errors are the real
``pynvml.NVMLError`` subclasses built from real NVML return codes.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace
from typing import Any

import pytest

from pslurm.core.config import GresConfLine
from pslurm.nodeagent.gpumon import GpuMonitor, UsageAccumulator
from pslurm.nodeagent.gpus import (
    GpuDevice,
    GpuDiscoveryError,
    check_inventory,
    cores_from_mask,
    discover_nvml,
    format_cpu_list,
    format_gres_conf,
    inventory_from_gres_conf,
    type_from_name,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    pynvml = pytest.importorskip("pynvml")

MB = 1024 * 1024


def err(code: int) -> Exception:
    return pynvml.NVMLError(code)  # maps to the subclass, e.g. NVMLError_NotSupported


class FakeGpu:
    def __init__(self, minor: int, bus: str, cores_mask: list[int], links: list[str], name: str) -> None:
        self.minor, self.bus, self.mask, self.links, self.name = minor, bus, cores_mask, links, name
        self.uuid = f"GPU-{minor:08d}-fake"
        self.lost = False
        self.ecc_uncorrected = 0
        self.util, self.used = 0, 0
        self.procs: list[Any] = []


class FakeNvml:
    """Enough of NVML for pslurm, with NVML's error behaviour."""

    def __init__(self, gpus: list[FakeGpu]) -> None:
        self.gpus = gpus
        self.inits = 0
        self.lib_missing = False
        self.events: list[tuple[FakeGpu, int]] = []
        self.registered: list[FakeGpu] = []

    def install(self, mp: pytest.MonkeyPatch) -> None:
        for name in dir(self):
            if name.startswith("nvml"):
                mp.setattr(pynvml, name, getattr(self, name))

    def _live(self, h: FakeGpu) -> FakeGpu:
        if self.inits <= 0:
            raise err(pynvml.NVML_ERROR_UNINITIALIZED)
        if h.lost:
            raise err(pynvml.NVML_ERROR_GPU_IS_LOST)
        return h

    def nvmlInit(self) -> None:
        if self.lib_missing:
            raise err(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        if self.inits <= 0:
            raise err(pynvml.NVML_ERROR_UNINITIALIZED)
        self.inits -= 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> FakeGpu:
        if not 0 <= i < len(self.gpus):
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.gpus[i]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> FakeGpu:
        for g in self.gpus:
            if g.uuid == uuid:
                return g
        raise err(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetName(self, h: FakeGpu) -> str:
        return self._live(h).name

    def nvmlDeviceGetUUID(self, h: FakeGpu) -> str:
        return self._live(h).uuid

    def nvmlDeviceGetMinorNumber(self, h: FakeGpu) -> int:
        return self._live(h).minor

    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu) -> Any:
        g = self._live(h)
        return SimpleNamespace(total=80 * 1024 * MB, used=g.used * MB, free=0)

    def nvmlDeviceGetPciInfo(self, h: FakeGpu) -> Any:
        return SimpleNamespace(busId=self._live(h).bus.encode())  # old pynvml returned bytes

    def nvmlDeviceGetCpuAffinity(self, h: FakeGpu, size: int) -> list[int]:
        return (self._live(h).mask + [0] * size)[:size]

    def nvmlDeviceGetNvLinkState(self, h: FakeGpu, link: int) -> int:
        g = self._live(h)
        if not g.links:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if link >= 12:  # A100 has 12 links
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return pynvml.NVML_FEATURE_ENABLED if link < len(g.links) else pynvml.NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: FakeGpu, link: int) -> Any:
        return SimpleNamespace(busId=self._live(h).links[link])

    def nvmlEventSetCreate(self) -> str:
        return "eventset"

    def nvmlDeviceRegisterEvents(self, h: FakeGpu, types: int, es: str) -> None:
        assert types & pynvml.nvmlEventTypeXidCriticalError
        self.registered.append(h)

    def nvmlEventSetWait(self, es: str, timeout_ms: int) -> Any:
        if not self.events:
            raise err(pynvml.NVML_ERROR_TIMEOUT)
        g, xid = self.events.pop(0)
        return SimpleNamespace(device=g, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=xid)

    def nvmlEventSetFree(self, es: str) -> None:
        pass

    def nvmlDeviceGetTotalEccErrors(self, h: FakeGpu, kind: int, counter: int) -> int:
        assert kind == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        return self._live(h).ecc_uncorrected

    def nvmlDeviceGetUtilizationRates(self, h: FakeGpu) -> Any:
        return SimpleNamespace(gpu=self._live(h).util, memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, h: FakeGpu) -> list[Any]:
        return self._live(h).procs


A0, A1 = "00000000:07:00.0", "00000000:0F:00.0"


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    # two NVLinked A100s: GPU0 near CPUs 0-15, GPU1 near CPUs 64-79 (second mask word)
    gpus = [
        FakeGpu(0, A0, [0xFFFF, 0], [A1, A1, "00000000:C0:00.0"], "NVIDIA A100-SXM4-80GB"),
        FakeGpu(1, A1, [0, 0xFFFF], [A0, A0], "NVIDIA A100-SXM4-80GB"),
    ]
    fake = FakeNvml(gpus)
    fake.install(monkeypatch)
    monkeypatch.setattr("pslurm.nodeagent.gpus._cpu_count", lambda: 128)
    return fake


def test_discovery_two_a100s_with_affinity_and_nvlink(nvml: FakeNvml) -> None:
    devs = discover_nvml()
    assert [d.index for d in devs] == [0, 1]
    d0, d1 = devs
    assert (d0.name, d0.type, d0.file, d0.minor) == ("NVIDIA A100-SXM4-80GB", "a100", "/dev/nvidia0", 0)
    assert d0.memory_mb == 80 * 1024 and d0.uuid == "GPU-00000000-fake"
    assert d0.pci_bus_id == "0000:07:00.0"
    assert d0.cores == tuple(range(16)) and d1.cores == tuple(range(64, 80))
    assert d0.links == (1,) and d1.links == (0,)  # the NVSwitch-like peer C0:00.0 is dropped
    assert nvml.inits == 0  # shut down again


def test_discovery_without_nvlink(nvml: FakeNvml) -> None:
    for g in nvml.gpus:
        g.links = []
    assert [d.links for d in discover_nvml()] == [(), ()]


def test_library_missing_is_one_line(nvml: FakeNvml) -> None:
    nvml.lib_missing = True
    with pytest.raises(GpuDiscoveryError) as exc:
        inventory_from_gres_conf([GresConfLine(name=None, autodetect="nvml")])
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg == "AutoDetect=nvml but the NVML library could not be loaded: NVML Shared Library Not Found"


def test_gpu_lost_during_discovery(nvml: FakeNvml) -> None:
    nvml.gpus[1].lost = True
    with pytest.raises(GpuDiscoveryError, match="GPU is lost"):
        discover_nvml()


def test_autodetect_with_type_override(nvml: FakeNvml) -> None:
    lines = [
        GresConfLine(name=None, autodetect="nvml"),
        GresConfLine(name="gpu", type="a100_80g", files=("/dev/nvidia1",), count=1),
        GresConfLine(name="gpu", node_names=("other",), type="v100", files=("/dev/nvidia0",), count=1),
    ]
    devs, auto = inventory_from_gres_conf(lines, node_name="c000")
    assert auto
    assert [d.type for d in devs] == ["a100", "a100_80g"]
    assert devs[1].cores == tuple(range(64, 80))


def test_static_gres_conf() -> None:
    lines = [
        GresConfLine(name="gpu", type="a100", files=("/dev/nvidia2", "/dev/nvidia3"), count=2, cores=(0, 1)),
        GresConfLine(name="gpu", count=2),
        GresConfLine(name="mps", count=100),
    ]
    devs, auto = inventory_from_gres_conf(lines)
    assert not auto
    assert [(d.index, d.file, d.minor, d.type) for d in devs] == [
        (0, "/dev/nvidia2", 2, "a100"),
        (1, "/dev/nvidia3", 3, "a100"),
        (2, None, None, None),
        (3, None, None, None),
    ]
    assert devs[0].cores == (0, 1)


def test_autodetect_off_wins_when_last() -> None:
    lines = [GresConfLine(name=None, autodetect="nvml"), GresConfLine(name="gpu", autodetect="off", count=1)]
    assert inventory_from_gres_conf(lines) == ([GpuDevice(0, "gpu", None, None, None)], False)


def test_check_inventory() -> None:
    one = [GpuDevice(0, "NVIDIA A100", "a100", "/dev/nvidia0", 0)]
    assert check_inventory(one, 2) == "gres/gpu count reported lower than configured (1 < 2)"
    assert check_inventory(one, 1) is None
    assert (
        check_inventory(one, 1, {"v100": 1}) == "gres/gpu:v100 count reported lower than configured (0 < 1)"
    )
    assert check_inventory(one, 1, {"a100": 1}) is None


@pytest.mark.parametrize(
    ("name", "type_"),
    [
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA A100-PCIE-40GB", "a100"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H100 NVL", "h100"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("NVIDIA RTX A6000", "rtxa6000"),
        ("NVIDIA L40S", "l40s"),
        (b"Tesla T4".decode(), "t4"),
    ],
)
def test_type_from_name(name: str, type_: str) -> None:
    assert type_from_name(name) == type_


def test_cpu_mask_and_list() -> None:
    assert cores_from_mask([0b1011, 1]) == (0, 1, 3, 64)
    assert format_cpu_list([3, 0, 1, 2, 8, 10, 11]) == "0-3,8,10-11"


def test_format_gres_conf(nvml: FakeNvml) -> None:
    text = format_gres_conf(discover_nvml())
    assert text == (
        "Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-15 Links=-1,1 UniqueId=GPU-00000000-fake\n"
        "Name=gpu Type=a100 File=/dev/nvidia1 Cores=64-79 Links=1,-1 UniqueId=GPU-00000001-fake\n"
    )
    static, _ = inventory_from_gres_conf([GresConfLine(name="gpu", files=("/dev/nvidia0",), count=1)])
    assert format_gres_conf(static) == "Name=gpu File=/dev/nvidia0\n"


def test_health_ok_then_xid(nvml: FakeNvml) -> None:
    mon = GpuMonitor(discover_nvml())
    assert mon.health() is None
    assert nvml.registered == nvml.gpus
    nvml.events.append((nvml.gpus[0], 13))  # application error: GPU still fine
    assert mon.health() is None
    nvml.events.append((nvml.gpus[1], 79))
    assert mon.health() == "gpu 1: Xid 79 critical error"
    assert mon.health() == "gpu 1: Xid 79 critical error"  # sticky until reported
    mon.forget_events()
    assert mon.health() is None  # an Xid is an event: once the drain is recorded, RESUME holds
    mon.close()
    assert nvml.inits == 0


def test_health_gpu_lost_and_ecc(nvml: FakeNvml) -> None:
    mon = GpuMonitor(discover_nvml())
    nvml.gpus[1].ecc_uncorrected = 2
    assert mon.health() == "gpu 1: 2 uncorrectable ECC error(s)"
    nvml.gpus[0].lost = True
    assert mon.health() == "gpu 0: GPU has fallen off the bus (NVML_ERROR_GPU_IS_LOST)"
    mon.close()


def test_sample_and_process_memory(nvml: FakeNvml) -> None:
    mon = GpuMonitor(discover_nvml())
    nvml.gpus[0].util, nvml.gpus[0].used = 50, 1000
    nvml.gpus[1].util, nvml.gpus[1].used = 100, 3000
    nvml.gpus[0].procs = [SimpleNamespace(pid=42, usedGpuMemory=500 * MB)]
    nvml.gpus[1].procs = [
        SimpleNamespace(pid=42, usedGpuMemory=700 * MB),
        SimpleNamespace(pid=7, usedGpuMemory=None),
    ]
    assert mon.sample([0, 1, 5]) == {0: (50.0, 1000), 1: (100.0, 3000)}
    assert mon.process_memory([0, 1]) == {42: 1200, 7: 0}
    nvml.gpus[1].lost = True
    assert mon.sample([0, 1]) == {0: (50.0, 1000)}
    mon.close()


def test_usage_accumulator() -> None:
    acc = UsageAccumulator(gpu_count=2, start=100.0)
    assert acc.peak_memory_mb is None and acc.mean_util is None  # nothing measured yet
    acc.add(110.0, {0: (50.0, 1000), 1: (100.0, 3000)})  # 10 s at mean 75 %
    acc.add(140.0, {0: (0.0, 500), 1: (0.0, 500)})  # 30 s at 0 %
    acc.add(150.0, {})  # nothing read: time counts for gpu_seconds, not for the mean
    assert acc.gpu_seconds == pytest.approx(2 * 50.0)
    assert acc.mean_util == pytest.approx(75 * 10 / 40)
    assert acc.peak_memory_mb == 4000
    acc.add(160.0, {0: (0.0, 9000), 1: (0.0, 9000)}, job_memory_mb=1200)  # its own processes, seen
    acc.add(170.0, {0: (0.0, 9000), 1: (0.0, 9000)})  # gone again (ending): still the process figure
    assert acc.peak_memory_mb == 1200
    usage = acc.result(elapsed=70.0)
    assert (usage.gpu_count, usage.gpu_seconds, usage.peak_gpu_memory_mb) == (2, 140.0, 1200)
