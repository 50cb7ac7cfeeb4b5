"""The cgroup v2 device filter's builder, without root: exact instructions and encoding for a small
allow-list, and its behaviour for every kind of access, run on a small interpreter of the eBPF
subset it uses (which also checks what the kernel's verifier would: r0 set, jumps in bounds)."""

from __future__ import annotations

import itertools
import struct

import pytest

from pslurm.nodeagent import bpfdev
from pslurm.nodeagent.bpfdev import DeviceRule, Insn, build_program, encode
from pslurm.nodeagent.cgroups import BASIC_DEVICES, device_rules

LDX, AND, RSH, MOV_X, MOV_K = (bpfdev.LDX_MEM_W, bpfdev.ALU64_AND_K, bpfdev.ALU64_RSH_K, bpfdev.ALU64_MOV_X,
                               bpfdev.ALU64_MOV_K)
JNE_K, JNE_X, EXIT = bpfdev.JMP_JNE_K, bpfdev.JMP_JNE_X, bpfdev.JMP_EXIT
CHAR, BLOCK = 2, 1
MKNOD, READ, WRITE = 1, 2, 4


def run(prog: list[Insn], dev_type: int, access: int, major: int, minor: int) -> int:
    """Interpret ``prog`` on one device access: what the kernel would return (1 allow, 0 deny)."""
    ctx = struct.pack("<III", (access << 16) | dev_type, major, minor)
    regs: dict[int, int] = {1: -1}  # r1: the context (only loads through it are allowed)
    pc, steps = 0, 0
    while True:
        assert 0 <= pc < len(prog), f"jump out of the program to {pc}"
        steps += 1
        assert steps < 10_000, "no loops in a device filter"
        i = prog[pc]
        pc += 1

        def reg(n: int, at: int = pc - 1) -> int:
            assert n in regs, f"R{n} !read_ok at {at}"
            return regs[n]

        if i.code == LDX:
            assert reg(i.src) == -1 and i.off in (0, 4, 8), "4-byte loads from the context only"
            regs[i.dst] = struct.unpack_from("<I", ctx, i.off)[0]
        elif i.code == AND:
            regs[i.dst] = reg(i.dst) & i.imm
        elif i.code == RSH:
            regs[i.dst] = reg(i.dst) >> i.imm
        elif i.code == MOV_X:
            regs[i.dst] = reg(i.src)
        elif i.code == MOV_K:
            regs[i.dst] = i.imm
        elif i.code in (JNE_K, JNE_X):
            other = i.imm if i.code == JNE_K else reg(i.src)
            if reg(i.dst) != other:
                pc += i.off  # counted from the next instruction
        elif i.code == EXIT:
            assert reg(0) in (0, 1), "R0 !read_ok"
            return reg(0)
        else:
            raise AssertionError(f"unexpected opcode {i.code:#x}")


def reference(rules: list[DeviceRule], dev_type: int, access: int, major: int, minor: int) -> int:
    for r in rules:
        if r.type != "a" and bpfdev.DEV_TYPES[r.type] != dev_type:
            continue
        if (r.major is not None and r.major != major) or (r.minor is not None and r.minor != minor):
            continue
        if access & ~r.access_bits:
            continue
        return 1
    return 0


def test_encoding_puts_src_in_the_high_nibble() -> None:
    assert Insn(LDX, dst=2, src=1, off=4).encode() == bytes([0x61, 0x12, 4, 0, 0, 0, 0, 0])
    assert Insn(JNE_K, dst=4, off=-3, imm=195).encode() == bytes([0x55, 0x04]) + struct.pack("<hi", -3, 195)
    assert Insn(EXIT).encode() == bytes([0x95, 0, 0, 0, 0, 0, 0, 0])
    assert len(encode(build_program(BASIC_DEVICES))) % 8 == 0


def test_the_program_for_a_small_allow_list() -> None:
    prog = build_program([DeviceRule("c", 195, 0), DeviceRule("c", 136, None), DeviceRule("c", 1, 8, "r")])
    assert prog == [
        Insn(LDX, dst=2, src=1, off=0), Insn(AND, dst=2, imm=0xFFFF),
        Insn(LDX, dst=3, src=1, off=0), Insn(RSH, dst=3, imm=16),
        Insn(LDX, dst=4, src=1, off=4), Insn(LDX, dst=5, src=1, off=8),
        # c 195:0 rwm: type, major, minor, allow
        Insn(JNE_K, dst=2, off=4, imm=CHAR), Insn(JNE_K, dst=4, off=3, imm=195), Insn(JNE_K, dst=5, off=2, imm=0),
        Insn(MOV_K, dst=0, imm=1), Insn(EXIT),
        # c 136:* rwm: no minor test
        Insn(JNE_K, dst=2, off=3, imm=CHAR), Insn(JNE_K, dst=4, off=2, imm=136),
        Insn(MOV_K, dst=0, imm=1), Insn(EXIT),
        # c 1:8 r: the requested access must be a subset of "r"
        Insn(JNE_K, dst=2, off=7, imm=CHAR), Insn(JNE_K, dst=4, off=6, imm=1), Insn(JNE_K, dst=5, off=5, imm=8),
        Insn(MOV_X, dst=6, src=3), Insn(AND, dst=6, imm=READ), Insn(JNE_X, dst=6, src=3, off=2),
        Insn(MOV_K, dst=0, imm=1), Insn(EXIT),
        # nothing matched: deny
        Insn(MOV_K, dst=0, imm=0), Insn(EXIT),
    ]  # fmt: skip


def test_a_match_all_rule_ends_the_program() -> None:
    # the verifier refuses unreachable instructions: nothing may follow a rule that matches everything
    prog = build_program([DeviceRule("c", 1, 3), DeviceRule("a", None, None), DeviceRule("c", 5, 0)])
    assert prog[-2:] == [Insn(MOV_K, dst=0, imm=1), Insn(EXIT)]
    assert len(prog) == 6 + 5 + 2
    assert all(run(prog, t, a, 9, 9) == 1 for t in (CHAR, BLOCK) for a in (READ, WRITE, MKNOD))


@pytest.mark.parametrize("rules", [
    [],
    list(BASIC_DEVICES),
    device_rules([1, 3], proc_devices="/nonexistent"),
    [DeviceRule("b", 8, None, "r"), DeviceRule("a", 195, 0, "rw"), DeviceRule("c", None, 7, "m")],
], ids=["empty", "basic", "two-gpus", "mixed"])  # fmt: skip
def test_the_program_decides_as_the_rules_say(rules: list[DeviceRule]) -> None:
    prog = build_program(rules)
    majors, minors = (1, 5, 8, 136, 195, 500), (0, 1, 2, 3, 7, 8, 254, 255)
    accesses = [sum(bits) for n in (1, 2, 3) for bits in itertools.combinations((MKNOD, READ, WRITE), n)]
    for dev_type, access, major, minor in itertools.product((CHAR, BLOCK), accesses, majors, minors):
        assert run(prog, dev_type, access, major, minor) == reference(rules, dev_type, access, major, minor), (
            dev_type, access, major, minor)


def test_gpu_rules() -> None:
    assert device_rules([], proc_devices="/nonexistent") == list(BASIC_DEVICES)
    rules = [str(r) for r in device_rules([2, 0, 2], proc_devices="/nonexistent")]
    assert rules[len(BASIC_DEVICES):] == ["c 195:0 rwm", "c 195:2 rwm", "c 195:255 rwm", "c 195:254 rwm"]
    assert "c 136:* rwm" in rules and "c 1:3 rwm" in rules


def test_uvm_majors_come_from_proc_devices(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc = tmp_path / "devices"
    proc.write_text("Character devices:\n  1 mem\n195 nvidia-frontend\n508 nvidia-uvm\n509 nvidia-uvm-tools\n\n"
                    "Block devices:\n510 nvidia-uvm\n")
    rules = [str(r) for r in device_rules([0], proc_devices=str(proc))]
    assert rules[-2:] == ["c 508:* rwm", "c 509:* rwm"]
