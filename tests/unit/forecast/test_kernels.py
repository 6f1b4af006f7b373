"""Whether a torch build carries kernels for a GPU: the arch lists of real builds against real
cards, torch's own compatibility table, and the fix that is suggested."""

from __future__ import annotations

import pytest
import torch

from trader.forecast.kernels import (
    ArchEntry,
    advice_for,
    cubin_runs_on,
    kernel_support,
    missing_kernels_message,
)

# torch.cuda.get_arch_list() of published wheels (x86_64).
CU124_26 = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")  # 2.6.0+cu124
CU126_27 = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")  # 2.7.0+cu126
CU128_27 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")  # 2.7.0+cu128
CU130_29 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")  # 2.9.0+cu130


@pytest.mark.parametrize(
    ("card", "capability", "arch_list", "cubins", "ptx"),
    [
        ("RTX 5090 / 5070 Ti, cu124 build", (12, 0), CU124_26, (), ()),
        ("RTX 5090, cu126 build", (12, 0), CU126_27, (), ()),
        ("RTX 5090, cu128 build", (12, 0), CU128_27, ("sm_120",), ("compute_120",)),
        ("RTX 5090, cu130 build", (12, 0), CU130_29, ("sm_120",), ()),
        ("RTX 3090 (sm_86) with sm_80 kernels only", (8, 6), ("sm_80",), ("sm_80",), ()),
        ("RTX 4090 (sm_89), cu124 build", (8, 9), CU124_26, ("sm_80", "sm_86"), ()),
        ("H100, cu124 build", (9, 0), CU124_26, ("sm_90",), ()),
        ("B200 (sm_100), cu124 build", (10, 0), CU124_26, (), ()),
        ("GTX 1080 (sm_61), cu128 build", (6, 1), CU128_27, (), ()),
        ("A100 with PTX only", (8, 0), ("compute_80",), (), ("compute_80",)),
        ("RTX 3090 with older PTX only", (8, 6), ("compute_80",), (), ("compute_80",)),
        ("RTX 5090 with sm_90 PTX: JIT forward", (12, 0), ("compute_90",), (), ("compute_90",)),
        ("RTX 3090 with newer PTX only", (8, 6), ("compute_90",), (), ()),
        ("H100 with arch-specific sm_90a PTX", (9, 0), ("compute_90a",), (), ("compute_90a",)),
        ("RTX 5090 with sm_90a PTX: not forward", (12, 0), ("compute_90a",), (), ()),
        ("Jetson Orin (sm_87) with dGPU kernels", (8, 7), ("sm_80", "sm_86"), (), ()),
        ("Jetson Orin with its own kernels", (8, 7), ("sm_87",), ("sm_87",), ()),
        ("sm_86 card with sm_90 kernels only", (8, 6), ("sm_90",), (), ()),
    ],
)
def test_the_kernels_a_build_carries_for_a_card(card, capability, arch_list, cubins, ptx):
    support = kernel_support(capability, arch_list)
    assert (support.cubins, support.ptx) == (cubins, ptx), card
    assert support.usable == bool(cubins or ptx)
    assert support.ptx_only == (not cubins and bool(ptx))


def test_the_description_says_which_kernels_serve_and_when_ptx_is_jit_compiled():
    assert "runs sm_120 kernels" in kernel_support((12, 0), CU128_27).describe()
    ptx = kernel_support((8, 6), ("compute_80",)).describe()
    assert "no cubins" in ptx
    assert "JIT-compiled" in ptx
    none = kernel_support((12, 0), CU124_26).describe()
    assert none == "no kernels for sm_120 (the build carries " + " ".join(CU124_26) + ")"


def test_sm_120_with_a_cu124_build_is_refused_with_the_fix():
    message = missing_kernels_message("2.6.0+cu124", kernel_support((12, 0), CU124_26))
    assert message.startswith(
        "torch 2.6.0+cu124 has no sm_120 kernels: install torch>=2.7 built for CUDA 12.8"
    )
    assert "pip install 'torch>=2.7' --index-url https://download.pytorch.org/whl/cu128" in message
    assert "driver >= 570" in message
    assert "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90" in message


@pytest.mark.parametrize(
    ("capability", "cuda"),
    [((12, 0), "12.8"), ((10, 0), "12.8"), ((9, 0), "12.8"), ((7, 5), "12.8"), ((6, 1), "12.6"),
     ((11, 0), "13.0")],
)  # fmt: skip
def test_the_build_advised_is_one_with_kernels_for_the_card(capability, cuda):
    assert advice_for(capability).cuda == cuda


def test_arch_entries_parse_cubins_ptx_and_suffixes_and_skip_others():
    assert ArchEntry.parse("sm_120") == ArchEntry("sm_120", False, 120, False)
    assert ArchEntry.parse("compute_90a") == ArchEntry("compute_90a", True, 90, True)
    assert ArchEntry.parse("sm_100f") == ArchEntry("sm_100f", False, 100, False)
    assert ArchEntry.parse("gfx90a") is None  # ROCm
    assert ArchEntry.parse("sm_x") is None


DEVICES = [10 * major + minor for major in range(5, 13) for minor in range(10)]


@pytest.mark.skipif(
    not hasattr(torch.cuda, "DEVICE_REQUIREMENT"), reason="this torch has no compatibility table"
)
def test_the_cubin_rule_is_torchs_own_table():
    """torch >= 2.9 states its rule as a table; ours must give the same answer everywhere."""
    for code in torch.cuda.DEVICE_REQUIREMENT:
        for device in DEVICES:
            expected = torch.cuda._code_compatible_with_device(device, code)
            assert cubin_runs_on(code, device) == expected, (code, device)
