"""GPU inventory: NVML (pynvml) or a static gres.conf, checked against pslurm.conf.

The only module in pslurm that imports ``pynvml`` (in :func:`load_nvml`, which
:mod:`pslurm.nodeagent.gpumon` uses for health and usage); it does so inside functions, so the
agent starts (and serves static gres.conf GPUs) on hosts without the NVML library.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pslurm.core.config import ConfigError, GresConfLine
from pslurm.core.confparse import SHARED_GRES as SHARED  # gres.conf names that share the node's GPUs out
from pslurm.core.gres import GresRequest
from pslurm.core.hostlists import int_ranges


@dataclass(frozen=True)
class GpuDevice:
    """One GPU of this node; ``index`` is its position in the node's inventory (0..n-1)."""

    index: int
    name: str
    type: str | None
    file: str | None  # "/dev/nvidia3"; None for Count= GPUs
    minor: int | None
    uuid: str | None = None
    memory_mb: int | None = None
    pci_bus_id: str | None = None
    cores: tuple[int, ...] | None = None
    links: tuple[int, ...] = ()  # indices of NVLink peers
    shards: int = 0  # gres.conf Name=shard: this GPU's shards (0: not shared by shards)
    mps: int = 0  # gres.conf Name=mps: this GPU's MPS count (0: no MPS)


class GpuDiscoveryError(Exception):
    """GPUs could not be discovered; the message is one line for the log and the node's reason."""


_NOISE = {"nvidia", "tesla", "geforce", "quadro", "titan"}
_FORM = re.compile(r"^(sxm\d*|pcie|pci|nvl|hbm\d*e?|\d+gb)$")


def type_from_name(name: str) -> str:
    """Lower-case GRES type from an NVML product name.

    Rule: split on spaces and ``-``, drop vendor/brand words (NVIDIA, Tesla, GeForce, Quadro),
    drop form-factor and memory words (SXM4, PCIe, NVL, HBM3, 80GB), join what is left.
    "NVIDIA A100-SXM4-80GB" -> "a100", "NVIDIA H100 80GB HBM3" -> "h100",
    "Tesla V100-SXM2-16GB" -> "v100", "NVIDIA GeForce RTX 4090" -> "rtx4090",
    "NVIDIA RTX A6000" -> "rtxa6000".
    """
    words = [w for w in re.split(r"[\s\-_]+", name.strip().lower()) if w]
    kept = [w for w in words if w not in _NOISE and not _FORM.match(w)]
    return "".join(kept) or "gpu"


def _text(value: str | bytes) -> str:
    # pynvml returned bytes before 11.5 and str since
    return value.decode() if isinstance(value, bytes) else value


def normal_bus_id(bus_id: str | bytes) -> str:
    """``00000000:07:00.0`` and ``0000:07:00.0`` name the same device: compare on a 4-digit domain."""
    text = _text(bus_id).strip().lower()
    domain, _, rest = text.partition(":")
    try:
        return f"{int(domain, 16):04x}:{rest}"
    except ValueError:
        return text


def cores_from_mask(words: Iterable[int], word_bits: int = 64) -> tuple[int, ...]:
    """CPU numbers set in an NVML affinity bitmask (array of unsigned longs, word 0 = CPUs 0..63)."""
    cores: list[int] = []
    for w, word in enumerate(words):
        word = int(word)
        for bit in range(word_bits):
            if word >> bit & 1:
                cores.append(w * word_bits + bit)
    return tuple(cores)


def load_nvml() -> Any:
    """Import pynvml and nvmlInit(), mapping every failure to a one-line GpuDiscoveryError."""
    try:
        with warnings.catch_warnings():
            # the deprecated "pynvml" PyPI shim warns on import; nvidia-ml-py provides the same module
            warnings.simplefilter("ignore", FutureWarning)
            import pynvml
    except ImportError as exc:
        raise GpuDiscoveryError(f"AutoDetect=nvml but pynvml is not installed: {exc}") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise GpuDiscoveryError(
            f"AutoDetect=nvml but the NVML library could not be loaded: {reason}"
        ) from None
    return pynvml


def _nvlink_peers(nv: Any, handle: Any) -> list[str]:
    """Bus ids at the far end of each active NVLink (empty where NVLink is not supported)."""
    peers: list[str] = []
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            if nv.nvmlDeviceGetNvLinkState(handle, link) != nv.NVML_FEATURE_ENABLED:
                continue
            peers.append(normal_bus_id(nv.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId))
        except (nv.NVMLError_NotSupported, nv.NVMLError_InvalidArgument):
            break  # past the last link of this GPU, or no NVLink at all
        except nv.NVMLError:
            continue
    return peers


def discover_nvml() -> list[GpuDevice]:
    """All GPUs NVML sees, in NVML order, with affinity and NVLink peers.

    Raises GpuDiscoveryError (one line) when the library is missing or a query fails.
    """
    nv = load_nvml()
    try:
        count = nv.nvmlDeviceGetCount()
        ncpu_words = max(1, (_cpu_count() + 63) // 64)
        raw: list[tuple[GpuDevice, list[str]]] = []
        for i in range(count):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            name = _text(nv.nvmlDeviceGetName(h))
            minor = int(nv.nvmlDeviceGetMinorNumber(h))
            try:
                cores: tuple[int, ...] | None = cores_from_mask(nv.nvmlDeviceGetCpuAffinity(h, ncpu_words))
            except nv.NVMLError_NotSupported:
                cores = None
            dev = GpuDevice(
                index=i,
                name=name,
                type=type_from_name(name),
                file=f"/dev/nvidia{minor}",
                minor=minor,
                uuid=_text(nv.nvmlDeviceGetUUID(h)),
                memory_mb=int(nv.nvmlDeviceGetMemoryInfo(h).total) // (1024 * 1024),
                pci_bus_id=normal_bus_id(nv.nvmlDeviceGetPciInfo(h).busId),
                cores=cores or None,
            )
            raw.append((dev, _nvlink_peers(nv, h)))
    except nv.NVMLError as exc:
        raise GpuDiscoveryError(f"NVML query failed during GPU discovery: {exc}") from None
    finally:
        try:
            nv.nvmlShutdown()
        except nv.NVMLError:
            pass
    by_bus = {d.pci_bus_id: d.index for d, _ in raw}
    # peers behind an NVSwitch have the switch's bus id, not a GPU's: those are dropped
    return [
        replace(d, links=tuple(sorted({by_bus[p] for p in peers if p in by_bus and by_bus[p] != d.index})))
        for d, peers in raw
    ]


def _cpu_count() -> int:
    import os

    return os.cpu_count() or 1


_TRAILING_DIGITS = re.compile(r"(\d+)$")


def _minor_of(path: str) -> int | None:
    m = _TRAILING_DIGITS.search(path)
    return int(m.group(1)) if m else None


def _applies(line: GresConfLine, node_name: str | None) -> bool:
    return line.node_names is None or node_name is None or node_name in line.node_names


def inventory_from_gres_conf(
    lines: list[GresConfLine], node_name: str | None = None
) -> tuple[list[GpuDevice], bool]:
    """The node's GPUs from gres.conf lines, and whether ``AutoDetect=nvml`` was asked.

    Lines for other nodes (NodeName=) are skipped when ``node_name`` is given. Without
    autodetection: ``File=`` gives one device per file (minor from the trailing digits of
    /dev/nvidiaN), ``Count=`` gives file-less devices; indices 0..n-1 in file order; ``Memory=``
    is their memory. With ``AutoDetect=nvml`` (the last applicable AutoDetect= wins): the NVML
    devices (with the memory NVML reports), where a line's ``Type=``/``Cores=`` override the
    detected ones for its ``File=`` devices, or for all devices when the line names no file.
    ``Name=shard`` and ``Name=mps`` lines share the devices out (:func:`share_out`).
    GpuDiscoveryError propagates from NVML; ConfigError for shard/mps lines that do not fit the GPUs.
    """
    mine = [ln for ln in lines if _applies(ln, node_name)]
    autodetect = False
    for ln in mine:
        if ln.autodetect is not None:
            autodetect = ln.autodetect.lower() == "nvml"
    gpu_lines = [ln for ln in mine if ln.name == "gpu"]
    if autodetect:
        return share_out(_override(discover_nvml(), gpu_lines), mine), True
    devices: list[GpuDevice] = []
    for ln in gpu_lines:
        for path in ln.files:
            devices.append(GpuDevice(len(devices), ln.type or "gpu", ln.type, path, _minor_of(path),
                                     memory_mb=ln.memory_mb, cores=ln.cores))
        if not ln.files:
            for _ in range(ln.count):
                devices.append(GpuDevice(len(devices), ln.type or "gpu", ln.type, None, None,
                                         memory_mb=ln.memory_mb, cores=ln.cores))
    return share_out(devices, mine), False


def split_evenly(count: int, parts: int) -> list[int]:
    """``count`` over ``parts`` as Slurm splits a shard or MPS Count= without File= over a node's
    GPUs (gres_c_s.c, _distribute_count): each takes what is left divided by those left, so the
    remainder goes to the last ones (10 over 4: 2, 2, 3, 3)."""
    out = []
    for left in range(parts, 0, -1):
        out.append(count // left)
        count -= out[-1]
    return out


def share_out(devices: list[GpuDevice], lines: Iterable[GresConfLine]) -> list[GpuDevice]:
    """The devices with their ``shards`` and ``mps`` from the node's ``Name=shard|mps`` lines, as
    Slurm reads them (gres_c_s.c): a line with File= gives each of its GPUs an equal part of its
    Count (Count // files: Slurm drops the rest); one line without File= is split over all the
    GPUs (:func:`split_evenly`). ConfigError (one line) for a File= that is none of the node's GPUs,
    two lines without File=, or lines with and without File= for one name (Slurm refuses those too).
    """
    out = list(devices)
    by_file = {d.file: i for i, d in enumerate(out) if d.file}
    for name in SHARED:
        mine = [ln for ln in lines if ln.name == name]
        bare = [ln for ln in mine if not ln.files]
        if bare and (len(bare) > 1 or len(mine) > 1):
            raise ConfigError(f"gres.conf: Name={name}: a line without File= must be the node's only {name} line")
        counts = [0] * len(out)
        if bare and out:
            counts = split_evenly(bare[0].count, len(out))
        for ln in mine:
            for path in ln.files:
                if path not in by_file:
                    raise ConfigError(f"gres.conf: Name={name} File={path}: no GPU of this node has that File")
                counts[by_file[path]] += ln.count // len(ln.files)
        out = [_with_share(d, name, c) for d, c in zip(out, counts, strict=True)] if mine else out
    return out


def share_count(device: GpuDevice, name: str) -> int:
    """The device's shards (``name`` "shard") or MPS units ("mps")."""
    return device.shards if name == "shard" else device.mps


def _with_share(device: GpuDevice, name: str, count: int) -> GpuDevice:
    return replace(device, shards=count) if name == "shard" else replace(device, mps=count)


def default_shares(devices: list[GpuDevice], node_gres: Iterable[GresRequest]) -> list[GpuDevice]:
    """Shards and MPS units pslurm.conf's ``Gres=`` gives the node (``Gres=gpu:2,shard:64``) where
    gres.conf shares none out: split over the GPUs as a Count= without File= (Slurm's first case)."""
    out = list(devices)
    for name in SHARED:
        total = sum(g.count for g in node_gres if g.name == name)
        if total and out and not any(share_count(d, name) for d in out):
            out = [_with_share(d, name, c) for d, c in zip(out, split_evenly(total, len(out)), strict=True)]
    return out


def _override(devices: list[GpuDevice], lines: list[GresConfLine]) -> list[GpuDevice]:
    out = list(devices)
    for ln in lines:
        files = set(ln.files)
        for i, d in enumerate(out):
            if files and d.file not in files:
                continue
            out[i] = replace(d, type=ln.type or d.type, cores=ln.cores if ln.cores is not None else d.cores)
    return out


def check_inventory(
    found: list[GpuDevice], configured: int, configured_types: Mapping[str, int] | None = None,
    configured_shares: Mapping[str, int] | None = None,
) -> str | None:
    """The DRAIN reason when fewer GPUs were found than slurm.conf's ``Gres=`` says, else None.

    ``configured_types`` maps a type to its configured count (``Gres=gpu:a100:2`` -> {"a100": 2});
    ``configured_shares`` the shards and MPS units (``Gres=gpu:2,shard:64`` -> {"shard": 64}).
    """
    if len(found) < configured:
        return f"gres/gpu count reported lower than configured ({len(found)} < {configured})"
    for type_, want in (configured_types or {}).items():
        have = sum(1 for d in found if d.type == type_)
        if have < want:
            return f"gres/gpu:{type_} count reported lower than configured ({have} < {want})"
    for name, want in (configured_shares or {}).items():
        have = sum(share_count(d, name) for d in found)
        if have < want:
            return f"gres/{name} count reported lower than configured ({have} < {want})"
    return None


format_cpu_list = int_ranges  # ``[0,1,2,3,8]`` -> ``"0-3,8"`` (the Cores= syntax)


def format_gres_conf(devices: list[GpuDevice]) -> str:
    """gres.conf lines for ``psd --print-gres`` (like ``slurmd -G``), one per device, then the
    shard and MPS lines (:func:`_shared_lines`).

    ``Links=`` follows Slurm: one entry per device in index order, -1 for itself, 1 for an
    NVLink peer, 0 otherwise; it is printed only when some device has NVLink peers. ``Memory=``
    only for GPUs NVML did not find (those have a UUID, and NVML tells their memory).
    """
    n = len(devices)
    any_links = any(d.links for d in devices)
    out: list[str] = []
    for d in devices:
        parts = ["Name=gpu"]
        if d.type:
            parts.append(f"Type={d.type}")
        parts.append(f"File={d.file}" if d.file else "Count=1")
        if d.cores:
            parts.append(f"Cores={format_cpu_list(d.cores)}")
        if any_links:
            parts.append(
                "Links=" + ",".join("-1" if j == d.index else str(int(j in d.links)) for j in range(n))
            )
        if d.memory_mb and not d.uuid:
            parts.append(f"Memory={d.memory_mb}M")
        if d.uuid:
            parts.append(f"UniqueId={d.uuid}")
        out.append(" ".join(parts))
    out.extend(_shared_lines(devices))
    return "\n".join(out) + ("\n" if out else "")


def _shared_lines(devices: list[GpuDevice]) -> list[str]:
    """``Name=shard|mps`` lines that give the devices their counts again: one per GPU when those
    that have any have a File=, else (file-less GPUs) one Count= for all of them, which
    :func:`split_evenly` splits back as it was split."""
    out: list[str] = []
    for name in SHARED:
        counts = [share_count(d, name) for d in devices]
        if not any(counts):
            continue
        if all(d.file for d, c in zip(devices, counts, strict=True) if c):
            out.extend(f"Name={name} Count={c} File={d.file}" for d, c in zip(devices, counts, strict=True) if c)
        else:
            out.append(f"Name={name} Count={sum(counts)}")
    return out
