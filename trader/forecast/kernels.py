"""Whether a torch build carries kernels a GPU can run, and which build to install when not.

A CUDA build of torch ships machine code (cubins, `sm_XY` in `torch.cuda.get_arch_list()`) for
some compute capabilities and sometimes PTX (`compute_XY`), which the driver compiles for newer
GPUs at first use. Without either for the GPU's capability, torch still detects the GPU and may
even run a matmul (cuBLAS ships its own kernels), then fails inside the network with "no kernel
image is available for execution on the device".

The cubin rule is torch's own (`torch.cuda.DEVICE_REQUIREMENT`, torch 2.13): code built for
X.Y runs on X.Z with Z >= Y, except on the embedded parts that stand alone (5.3, 6.2, 7.2, 8.7)
and 10.1 code, which runs on 10.1 and 11.0 only. PTX runs on any capability at least its own,
after a JIT compile (arch-specific `compute_XYa` PTX only on X.Y itself).

Pure: no torch, so the decision is tested against the tables of real builds.
"""

from __future__ import annotations

from dataclasses import dataclass

# Embedded capabilities that run only code built for themselves.
_STANDALONE = frozenset({53, 62, 72, 87})
# Code capability -> capabilities excluded from its major-version interval, as torch states it.
_EXCLUDED = {50: {53}, 52: {53}, 60: {62}, 61: {62}, 70: {72}, 80: {87}, 86: {87}, 100: {101}}
_SPECIAL = {101: frozenset({101, 110})}


@dataclass(frozen=True)
class ArchEntry:
    """One entry of `torch.cuda.get_arch_list()`: `sm_120` (cubin) or `compute_120` (PTX)."""

    text: str
    ptx: bool
    capability: int  # 10 * major + minor
    arch_specific: bool  # an `a` suffix: built for exactly this capability's features

    @classmethod
    def parse(cls, text: str) -> ArchEntry | None:
        kind, _, number = text.partition("_")
        if kind not in ("sm", "compute"):
            return None
        specific = number.endswith("a")
        digits = number.removesuffix("a").removesuffix("f")
        if not digits.isdigit():
            return None
        return cls(text, kind == "compute", int(digits), specific)

    def runs_on(self, device: int) -> bool:
        if self.ptx:
            return device == self.capability if self.arch_specific else device >= self.capability
        return cubin_runs_on(self.capability, device)


def cubin_runs_on(code: int, device: int) -> bool:
    """torch's rule for machine code built for capability `code` on a `device` capability."""
    if code in _SPECIAL:
        return device in _SPECIAL[code]
    if code in _STANDALONE:
        return device == code
    if device in _EXCLUDED.get(code, ()):
        return False
    return device // 10 == code // 10 and device % 10 >= code % 10


def sm(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def capability_text(capability: tuple[int, int]) -> str:
    return f"{capability[0]}.{capability[1]}"


@dataclass(frozen=True)
class KernelSupport:
    """What a build carries for one GPU: `usable` when a cubin or PTX entry covers it."""

    capability: tuple[int, int]
    arch_list: tuple[str, ...]
    cubins: tuple[str, ...]  # entries whose machine code runs on the GPU
    ptx: tuple[str, ...]  # PTX entries the driver can compile for it

    @property
    def usable(self) -> bool:
        return bool(self.cubins or self.ptx)

    @property
    def ptx_only(self) -> bool:
        return not self.cubins and bool(self.ptx)

    def describe(self) -> str:
        """One phrase: which kernels serve the GPU, or that none do."""
        target = sm(self.capability)
        if self.cubins:
            return f"{target} runs {', '.join(self.cubins)} kernels"
        if self.ptx:
            return (
                f"{target} has no cubins; PTX {', '.join(self.ptx)} is JIT-compiled by the "
                "driver at first use (slow first calls, cached afterwards)"
            )
        carried = " ".join(self.arch_list) or "nothing"
        return f"no kernels for {target} (the build carries {carried})"


def kernel_support(capability: tuple[int, int], arch_list: tuple[str, ...]) -> KernelSupport:
    device = 10 * capability[0] + capability[1]
    entries = [e for e in (ArchEntry.parse(a) for a in arch_list) if e is not None]
    cubins = tuple(e.text for e in entries if not e.ptx and e.runs_on(device))
    ptx = tuple(e.text for e in entries if e.ptx and e.runs_on(device))
    return KernelSupport(capability, tuple(arch_list), cubins, ptx)


@dataclass(frozen=True)
class BuildAdvice:
    """The torch build to install for a GPU: the first release and CUDA version with kernels
    for it among PyTorch's published wheels, and the driver that CUDA version needs."""

    torch: str
    cuda: str
    driver: str

    @property
    def index(self) -> str:
        return f"https://download.pytorch.org/whl/cu{self.cuda.replace('.', '')}"

    def command(self) -> str:
        return f"pip install 'torch>={self.torch}' --index-url {self.index}"

    def instruction(self) -> str:
        return f"install torch>={self.torch} built for CUDA {self.cuda} ({self.command()})"


def advice_for(capability: tuple[int, int]) -> BuildAdvice:
    """The package needs torch >= 2.7 in any case; CUDA 12.8 builds carry sm_75 to sm_120;
    older GPUs need the CUDA 12.6 builds, the last with sm_50 to sm_70; 11.x (Thor) needs 13.0."""
    major = capability[0]
    if major == 11:
        return BuildAdvice("2.9", "13.0", "580")
    if capability >= (7, 5):
        return BuildAdvice("2.7", "12.8", "570")
    return BuildAdvice("2.7", "12.6", "560")


def missing_kernels_message(torch_version: str, support: KernelSupport) -> str:
    """The reason and the fix, e.g. "torch 2.6.0+cu124 has no sm_120 kernels: install
    torch>=2.7 built for CUDA 12.8 (...)"."""
    advice = advice_for(support.capability)
    carried = " ".join(support.arch_list) or "no CUDA kernels"
    return (
        f"torch {torch_version} has no {sm(support.capability)} kernels: "
        f"{advice.instruction()}, with an NVIDIA driver >= {advice.driver}. "
        f"This build carries {carried}"
    )
