"""Device isolation on cgroup v2: an eBPF device filter, built from an allow-list and attached
to a job's cgroup through the raw ``bpf(2)`` syscall (ctypes; no Python library does this).

cgroup v2 has no ``devices.allow``: on every open() and mknod() of a device node the kernel runs
the ``BPF_PROG_TYPE_CGROUP_DEVICE`` programs attached to the process's cgroup and its ancestors,
and the access is allowed only if every one of them returns 1 (an AND: a nested cgroup cannot
re-allow what its parent denies). A denied open() fails with EPERM.

The program's context, in r1, is ``struct bpf_cgroup_dev_ctx { u32 access_type; u32 major;
u32 minor; }`` with ``access_type = (access << 16) | dev_type`` (dev_type 1 block, 2 char; access
bits 1 mknod, 2 read, 4 write). The kernel's verifier refuses loads narrower than 4 bytes from it.

Instruction encoding (``struct bpf_insn``, 8 bytes, little-endian)::

    byte 0      opcode: class (low 3 bits: LDX 1, JMP 5, ALU64 7) | operation | source (K imm, X reg)
    byte 1      (src_reg << 4) | dst_reg       -- swapped, the verifier says "R2 !read_ok"
    bytes 2-3   off (s16): a jump's offset, counted from the instruction *after* the jump
    bytes 4-7   imm (s32)

The program :func:`build_program` emits (runc's device filter has the same shape)::

    r2 = *(u32 *)(r1 + 0); r2 &= 0xffff        device type
    r3 = *(u32 *)(r1 + 0); r3 >>= 16           access requested
    r4 = *(u32 *)(r1 + 4)                      major
    r5 = *(u32 *)(r1 + 8)                      minor
    for each rule, skipping the tests it does not need ("*" or "rwm"):
        if r2 != type  goto next_rule
        if r4 != major goto next_rule
        if r5 != minor goto next_rule
        r6 = r3; r6 &= allowed; if r6 != r3 goto next_rule     every requested access allowed
        r0 = 1; exit
    r0 = 0; exit                               r0 is set on every path, as the verifier demands

A rule with no test at all matches everything; nothing is emitted after it (the verifier also
refuses unreachable instructions). Attaching uses ``BPF_F_ALLOW_MULTI`` so that job and step
cgroups (and a parent's own program) can each have theirs. A program stays attached after its fd
is closed, until the cgroup is removed.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BPF_PROG_LOAD = 5
BPF_PROG_ATTACH = 8
BPF_PROG_TYPE_CGROUP_DEVICE = 15
BPF_CGROUP_DEVICE = 6  # attach type
BPF_F_ALLOW_MULTI = 2
SYSCALL_BPF = {"x86_64": 321, "aarch64": 280, "riscv64": 280}

# opcodes: class | op | source
LDX_MEM_W = 0x01 | 0x60 | 0x00  # r_dst = *(u32 *)(r_src + off)
ALU64_MOV_X, ALU64_MOV_K = 0x07 | 0xB0 | 0x08, 0x07 | 0xB0 | 0x00
ALU64_AND_K, ALU64_RSH_K = 0x07 | 0x50 | 0x00, 0x07 | 0x70 | 0x00
JMP_JNE_K, JMP_JNE_X = 0x05 | 0x50 | 0x00, 0x05 | 0x50 | 0x08
JMP_EXIT = 0x05 | 0x90

DEV_TYPES = {"b": 1, "c": 2}
ACCESS_BITS = {"m": 1, "r": 2, "w": 4}


class BpfError(OSError):
    """A device program could not be loaded or attached; ``str()`` is one line, errno is kept."""

    def __str__(self) -> str:
        return str(self.strerror) if self.strerror is not None else super().__str__()


@dataclass(frozen=True)
class Insn:
    """One ``struct bpf_insn``."""

    code: int
    dst: int = 0
    src: int = 0
    off: int = 0
    imm: int = 0

    def encode(self) -> bytes:
        return struct.pack("<BBhi", self.code, (self.src << 4) | self.dst, self.off, self.imm)


@dataclass(frozen=True)
class DeviceRule:
    """One allowed device, as a devices.allow line says it: ``c 195:0 rwm``, ``c 136:* rwm``."""

    type: str  # "c" char, "b" block, "a" any
    major: int | None  # None: any ("*")
    minor: int | None
    access: str = "rwm"

    def __str__(self) -> str:
        def num(n: int | None) -> str:
            return "*" if n is None else str(n)

        return f"{self.type} {num(self.major)}:{num(self.minor)} {self.access}"

    @property
    def access_bits(self) -> int:
        return sum(bit for ch, bit in ACCESS_BITS.items() if ch in self.access)


def build_program(rules: Iterable[DeviceRule]) -> list[Insn]:
    """The device filter that allows exactly ``rules`` (see the module docstring)."""
    prog = [
        Insn(LDX_MEM_W, dst=2, src=1, off=0), Insn(ALU64_AND_K, dst=2, imm=0xFFFF),
        Insn(LDX_MEM_W, dst=3, src=1, off=0), Insn(ALU64_RSH_K, dst=3, imm=16),
        Insn(LDX_MEM_W, dst=4, src=1, off=4),
        Insn(LDX_MEM_W, dst=5, src=1, off=8),
    ]  # fmt: skip
    for rule in rules:
        # each test is (instructions before its jump, the jump with its offset left to fill)
        tests: list[list[Insn]] = []
        if rule.type != "a":
            tests.append([Insn(JMP_JNE_K, dst=2, imm=DEV_TYPES[rule.type])])
        if rule.major is not None:
            tests.append([Insn(JMP_JNE_K, dst=4, imm=rule.major)])
        if rule.minor is not None:
            tests.append([Insn(JMP_JNE_K, dst=5, imm=rule.minor)])
        if rule.access_bits != 7:
            tests.append([Insn(ALU64_MOV_X, dst=6, src=3), Insn(ALU64_AND_K, dst=6, imm=rule.access_bits),
                          Insn(JMP_JNE_X, dst=6, src=3)])
        block = [insn for test in tests for insn in test] + [Insn(ALU64_MOV_K, dst=0, imm=1), Insn(JMP_EXIT)]
        # a failed test jumps past the end of this rule's block, to the next rule (or the deny)
        prog += [Insn(i.code, i.dst, i.src, len(block) - n - 1, i.imm) if i.code in (JMP_JNE_K, JMP_JNE_X) else i
                 for n, i in enumerate(block)]
        if not tests:
            return prog  # matches every access: what follows would be unreachable
    return prog + [Insn(ALU64_MOV_K, dst=0, imm=0), Insn(JMP_EXIT)]


def encode(prog: Sequence[Insn]) -> bytes:
    return b"".join(insn.encode() for insn in prog)


class _ProgLoadAttr(ctypes.Structure):
    """The BPF_PROG_LOAD part of ``union bpf_attr`` (fields up to expected_attach_type)."""

    _fields_ = [("prog_type", ctypes.c_uint32), ("insn_cnt", ctypes.c_uint32), ("insns", ctypes.c_uint64),
                ("license", ctypes.c_uint64), ("log_level", ctypes.c_uint32), ("log_size", ctypes.c_uint32),
                ("log_buf", ctypes.c_uint64), ("kern_version", ctypes.c_uint32), ("prog_flags", ctypes.c_uint32),
                ("prog_name", ctypes.c_char * 16), ("prog_ifindex", ctypes.c_uint32),
                ("expected_attach_type", ctypes.c_uint32)]  # fmt: skip


class _AttachAttr(ctypes.Structure):
    """The BPF_PROG_ATTACH part of ``union bpf_attr``."""

    _fields_ = [("target_fd", ctypes.c_uint32), ("attach_bpf_fd", ctypes.c_uint32), ("attach_type", ctypes.c_uint32),
                ("attach_flags", ctypes.c_uint32), ("replace_bpf_fd", ctypes.c_uint32)]  # fmt: skip


def _bpf(cmd: int, attr: ctypes.Structure, what: str) -> int:
    nr = SYSCALL_BPF.get(platform.machine())
    if nr is None:
        raise BpfError(errno.ENOSYS, f"bpf(): no syscall number known for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    ret = libc.syscall(ctypes.c_long(nr), ctypes.c_int(cmd), ctypes.byref(attr), ctypes.c_uint(ctypes.sizeof(attr)))
    if ret < 0:
        err = ctypes.get_errno()
        hint = " (needs CAP_SYS_ADMIN or CAP_BPF; a seccomp profile may block bpf())" if err == errno.EPERM else ""
        raise BpfError(err, f"bpf({what}): {os.strerror(err)}{hint}")
    return int(ret)


def load_program(prog: Sequence[Insn]) -> int:
    """Load a cgroup device program; its fd. BpfError (with the verifier's last words) if refused."""
    code = ctypes.create_string_buffer(encode(prog))
    license_ = ctypes.create_string_buffer(b"GPL")
    attr = _ProgLoadAttr(prog_type=BPF_PROG_TYPE_CGROUP_DEVICE, insn_cnt=len(prog),
                         insns=ctypes.addressof(code), license=ctypes.addressof(license_), prog_name=b"pslurm_devices")
    try:
        return _bpf(BPF_PROG_LOAD, attr, "BPF_PROG_LOAD")
    except BpfError as exc:
        if exc.errno not in (errno.EINVAL, errno.EACCES):
            raise
        # load again with the verifier's log, to say why
        log = ctypes.create_string_buffer(65536)
        attr.log_level, attr.log_size, attr.log_buf = 1, len(log), ctypes.addressof(log)
        try:
            return _bpf(BPF_PROG_LOAD, attr, "BPF_PROG_LOAD")
        except BpfError:
            lines = [ln for ln in log.value.decode(errors="replace").splitlines()
                     if ln.strip() and not ln.startswith("processed ")]  # the last is the verdict
            raise BpfError(exc.errno, f"{exc.strerror}: verifier: {lines[-1] if lines else 'no log'}") from None


def attach(cgroup_dir: str, rules: Iterable[DeviceRule]) -> None:
    """Allow only ``rules`` in the cgroup v2 directory ``cgroup_dir`` (and below it)."""
    prog_fd = load_program(build_program(rules))
    try:
        cg_fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            _bpf(BPF_PROG_ATTACH, _AttachAttr(target_fd=cg_fd, attach_bpf_fd=prog_fd, attach_type=BPF_CGROUP_DEVICE,
                                              attach_flags=BPF_F_ALLOW_MULTI), "BPF_PROG_ATTACH")
        finally:
            os.close(cg_fd)
    finally:
        os.close(prog_fd)  # the attachment holds the program now


def probe(parent_dir: str) -> str | None:
    """None when device programs can be attached below ``parent_dir`` (a cgroup v2 directory),
    else a one-line reason. Tries for real, on a throwaway child cgroup."""
    path = os.path.join(parent_dir, f"bpf_probe_{os.getpid()}")
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    except OSError as exc:
        return f"cannot create a cgroup in {parent_dir}: {exc.strerror}"
    try:
        attach(path, [DeviceRule("a", None, None)])
    except BpfError as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot attach a device program to {path}: {exc.strerror}"
    finally:
        try:
            os.rmdir(path)
        except OSError:
            pass
    return None
