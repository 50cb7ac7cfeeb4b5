"""What the LXC cluster needs from the host, and the host-side things it makes (bridge, fake devices).

Every check raises :class:`HostError` with one line saying what is missing, before anything is made.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path

from pslurm.lxc.plan import NVIDIA_MAJOR, NVIDIACTL_MINOR

CGROUP_ROOT = Path("/sys/fs/cgroup")
V1_HIERARCHIES = ("devices", "memory", "cpu", "cpuacct", "cpuset", "freezer", "blkio", "pids", "systemd",
                  "net_cls", "net_prio", "perf_event", "hugetlb", "rdma", "misc", "unified")


class HostError(RuntimeError):
    """The host cannot run the cluster, or a host-side step failed; one line for the user."""


def check_host() -> int:
    """Refuse (HostError) when not root, LXC missing or no usable cgroups; else the cgroup version to
    write device keys for (1: a v1 ``devices`` hierarchy, 2: a pure cgroup v2 host)."""
    if os.geteuid() != 0:
        raise HostError(f"LXC containers with device cgroups need root (running as uid {os.geteuid()})")
    missing = [tool for tool in ("lxc-start", "ip") if shutil.which(tool) is None]
    if missing:
        raise HostError(f"LXC is not installed: {' and '.join(missing)} not found "
                        "(apt-get install lxc python3-lxc iproute2)")
    from pslurm.lxc.bindings import BindingsMissing, load_lxc

    try:
        load_lxc()
    except BindingsMissing as exc:
        raise HostError(f"LXC is not installed: {exc}") from None
    return cgroup_version()


def cgroup_version(root: Path = CGROUP_ROOT) -> int:
    """1 when a v1 devices controller is mounted, 2 on a unified-only host; HostError otherwise."""
    if (root / "devices" / "devices.allow").exists():
        return 1
    controllers = root / "cgroup.controllers"
    if controllers.exists():
        return 2
    raise HostError(f"no usable cgroups: neither a v1 devices controller ({root}/devices) nor cgroup v2 "
                    f"({controllers}) is mounted")


def used_networks() -> list[ipaddress.IPv4Network]:
    """IPv4 networks the host has addresses or routes in (a new bridge subnet must overlap none)."""
    nets = []
    for args in (["-4", "-o", "addr", "show"], ["-4", "route", "show", "table", "all"]):
        out = _ip(*args, check=False)
        for m in re.finditer(r"(?:inet |^)(\d+\.\d+\.\d+\.\d+(?:/\d+)?)", out, re.M):
            try:
                nets.append(ipaddress.IPv4Network(m.group(1), strict=False))
            except ValueError:
                pass
    return nets


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def create_bridge(name: str, addr: str, prefixlen: int, broadcast: str) -> None:
    """A bridge of our own with the controller's address; no NAT and no forwarding are set up."""
    if link_exists(name):
        raise HostError(f"network interface {name} already exists (another cluster with --prefix? "
                        f"'pslurm lxc down' it first, or choose another --prefix)")
    _ip("link", "add", name, "type", "bridge")
    _ip("addr", "add", f"{addr}/{prefixlen}", "broadcast", broadcast, "dev", name)
    _ip("link", "set", name, "up")


def delete_link(name: str) -> bool:
    """Delete a network interface if it exists; True when it did."""
    if not link_exists(name):
        return False
    _ip("link", "del", name)
    return True


def host_gpu_devices(paths: list[str] | None = None) -> list[tuple[str, int]]:
    """(path, minor) of the host's NVIDIA GPU nodes: ``paths`` as given, or every /dev/nvidiaN."""
    if paths is None:
        paths = sorted((str(p) for p in Path("/dev").glob("nvidia[0-9]*") if p.name[6:].isdigit()),
                       key=lambda p: int(p[11:]))
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError as exc:
            raise HostError(f"--devices {path}: {exc.strerror}") from None
        if not stat.S_ISCHR(st.st_mode) or os.major(st.st_rdev) != NVIDIA_MAJOR:
            raise HostError(f"--devices {path}: not an NVIDIA GPU device (character device {NVIDIA_MAJOR}:N)")
        out.append((path, os.minor(st.st_rdev)))
    return out


def host_shared_devices() -> list[tuple[str, int, int]]:
    """(path, major, minor) of nvidiactl, nvidia-uvm and nvidia-uvm-tools where the host has them."""
    out = []
    for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        path = f"/dev/{name}"
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode):
            out.append((path, os.major(st.st_rdev), os.minor(st.st_rdev)))
    return out


def allows_devices(path: Path) -> bool:
    """Whether device nodes made under ``path`` (or its nearest existing parent) can be opened."""
    while not path.exists():
        path = path.parent
    return not os.statvfs(path).f_flag & os.ST_NODEV


def needs_bind(path: str) -> bool:
    """Whether ``path`` lies on another filesystem than /, so an overlay of / would not show it."""
    try:
        return os.stat(path).st_dev != os.stat("/").st_dev
    except OSError:
        return False


def make_fake_device(path: str) -> None:
    """``mknod path c 195 N`` (N from the name: nvidiaN, or 255 for nvidiactl)."""
    name = Path(path).name
    minor = NVIDIACTL_MINOR if name == "nvidiactl" else int(name.removeprefix("nvidia"))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if os.statvfs(Path(path).parent).f_flag & os.ST_NODEV:
        raise HostError(f"{Path(path).parent} is on a nodev filesystem: device nodes there cannot be opened; "
                        "choose another --state-dir")
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, minor))
    except FileExistsError:
        os.unlink(path)
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, minor))
    os.chmod(path, 0o666)


def wait_monitors_gone(lxcpath: str, names: list[str], timeout: float = 5.0) -> None:
    """Wait until LXC's monitor processes (``[lxc monitor] <lxcpath> <name>``) of these containers have
    exited: they hold their ``lxc.monitor.<name>`` cgroups until then."""
    wanted = {f"[lxc monitor] {lxcpath} {name}".encode() for name in names}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = False
        for proc in Path("/proc").iterdir():
            try:
                alive = proc.name.isdigit() and (proc / "cmdline").read_bytes().rstrip(b"\0") in wanted
            except OSError:
                continue
            if alive:
                break
        if not alive:
            return
        time.sleep(0.05)


def _hierarchies() -> list[Path]:
    return [CGROUP_ROOT, *(CGROUP_ROOT / h for h in V1_HIERARCHIES)]


def lxc_pivot_exists() -> bool:
    """Whether LXC's shared ``lxc.pivot`` cgroup (where its monitors go to die) exists already."""
    return any((h / "lxc.pivot").is_dir() for h in _hierarchies())


def remove_cgroups(names: list[str], pivot: bool = False) -> list[str]:
    """rmdir the empty cgroups LXC leaves behind for these containers (``lxc.monitor.<name>``,
    ``lxc.payload.<name>``) in every hierarchy, and ``lxc.pivot`` when ``pivot`` (only when it
    is empty: another LXC user may have it); returns those it removed."""
    wanted = [f"lxc.{kind}.{name}" for name in names for kind in ("monitor", "payload")]
    removed = []
    for hierarchy in _hierarchies():
        for cg in [hierarchy / w for w in wanted] + ([hierarchy / "lxc.pivot"] if pivot else []):
            if cg.is_dir():
                _rmdir_tree(cg)
                if not cg.exists():
                    removed.append(str(cg))
    return removed


def _rmdir_tree(path: Path) -> None:
    """Remove a cgroup and its (empty) children, deepest first; a busy one stays."""
    for child in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        try:
            child.rmdir()
        except OSError:
            pass
    for _ in range(20):  # an exiting monitor leaves its cgroup asynchronously
        try:
            path.rmdir()
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return
        time.sleep(0.05)


def _ip(*args: str, check: bool = True) -> str:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise HostError(f"ip {' '.join(args)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
    return proc.stdout
