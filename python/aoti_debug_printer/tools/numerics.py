"""When a compiled value is wrong: the one criterion `diverge` and `compare`
judge by, and the numerics environment a run was made in.

A value is held against a float64 truth. Its error is compared with the
error of a benchmark: the same computation in the value's own dtype, under
the numerics settings of the run that made it (TF32, matmul precision,
reduced-precision reductions). Noise those settings allow shows up in the
benchmark exactly where it applies, so no blanket tolerance is needed. This
is the criterion of PyTorch's accuracy minifier (`torch._dynamo.utils.same`
with `fp64_ref`: RMSE against float64 within 2x (3x for half types) of the
eager RMSE, plus an absolute floor) and of the benchmark standard of Ascend
msprobe's API accuracy checker (RMSE ratio 2, maximum-error ratio 10).
docs/accuracy.md gives the constants below with the measurements behind
them."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, fields

from ..records import dtype_name

# k: a value diverges when its error is more than k times the benchmark's,
# plus the floor. RMSE as the minifier (2; 3 for half types, whose few
# mantissa bits make two correct roundings differ by more); the largest
# element error as msprobe (10: one element's error is noisier than a mean).
K_RMS = {"float16": 3.0, "bfloat16": 3.0}
K_RMS_DEFAULT = 2.0
K_MAX = 10.0

# The floor, relative to the truth's RMS (for RMSE) or largest magnitude
# (for the largest error): errors a few units in the last place of the
# dtype, which two correct orders of evaluation reach where the benchmark
# happens to round exactly (a copy, a ReLU, a fused multiply-add).
FLOOR = {
    "float64": 1e-12,
    "float32": 1e-6,  # 8 ulp (eps 1.19e-7)
    "float16": 2e-3,  # 2 ulp (eps 9.8e-4)
    "bfloat16": 1.6e-2,  # 2 ulp (eps 7.8e-3)
    "complex64": 2e-6,
    "complex128": 1e-12,
}
FLOOR_FLOAT8 = 2.5e-1

# compare: two runs held against each other, with no truth between them. A
# value introduces an error where its relative difference jumps beyond
# K_JUMP times the largest of its inputs' (what they carry in explains up to
# that much: a matmul or a normalization may amplify it), plus the noise two
# correct runs show in that dtype. Measured in docs/accuracy.md.
K_JUMP = 10.0
CROSS_FLOOR = {
    "float64": 1e-10,
    "float32": 2e-5,
    "float16": 4e-3,
    "bfloat16": 3.2e-2,
    "complex64": 2e-5,
    "complex128": 1e-10,
}
# float32 under TF32 (10 mantissa bits): what kernels that multiply matrices
# or convolve may differ by when either run allowed it.
TF32_FLOOR = 4e-3
# Kernels that multiply matrices, by the words Inductor and ATen name them
# with (cuDNN's convolutions are told by "conv").
TF32_MATMUL_WORDS = ("mm", "linear", "attention", "sdpa", "scaled_dot", "tem_fused")


def floor(dtype: str) -> float:
    if dtype in FLOOR:
        return FLOOR[dtype]
    return FLOOR_FLOAT8 if dtype.startswith("float8") else 0.0


def k_rms(dtype: str) -> float:
    return K_RMS.get(dtype, K_RMS_DEFAULT)


@dataclass
class Error:
    """How far a value is from a reference, over the finite elements both
    hold; `bad` counts elements non-finite in the value but finite in the
    reference (or the other way), `size` says the shapes differ."""

    rms: float = 0.0
    max: float = 0.0
    bad: int = 0
    problem: str = ""


def error_of(value, reference) -> Error:
    import torch

    if value.numel() != reference.numel():
        return Error(problem=f"{list(value.shape)} vs {list(reference.shape)}")
    wide = (
        torch.complex128 if value.dtype.is_complex or reference.dtype.is_complex else torch.float64
    )
    x = value.detach().to("cpu", wide).reshape(-1)
    y = reference.detach().to("cpu", wide).reshape(-1)
    fx, fy = torch.isfinite(x), torch.isfinite(y)
    # Non-finite where the reference is finite, or the reverse; the same
    # non-finite value in both is no error.
    bad = int((fx != fy).sum()) + int((~fx & ~fy & ~((x == y) | (x.isnan() & y.isnan()))).sum())
    both = fx & fy
    if not both.any():
        return Error(bad=bad)
    d = (x[both] - y[both]).abs()
    return Error(float(d.square().mean().sqrt()), float(d.max()), bad)


def scale_of(truth) -> tuple[float, float]:
    """(RMS, largest magnitude) of the finite elements of the truth."""
    import torch

    t = truth.detach().to("cpu").reshape(-1)
    t = t.to(torch.complex128 if t.dtype.is_complex else torch.float64)
    t = t[torch.isfinite(t)].abs()
    if t.numel() == 0:
        return 0.0, 0.0
    return float(t.square().mean().sqrt()), float(t.max())


@dataclass
class Verdict:
    """A value against the truth, beside the benchmark against the truth."""

    dtype: str
    value: Error
    benchmark: Error
    bar_rms: float
    bar_max: float
    exact: bool = False  # integers and bool: any difference is one

    @property
    def diverged(self) -> bool:
        if self.value.problem:
            return True
        if self.value.bad > self.benchmark.bad:
            return True
        if self.exact:
            return self.value.max > self.benchmark.max
        return self.value.rms > self.bar_rms or self.value.max > self.bar_max

    @property
    def ratio(self) -> float:
        """How far past the bar (above 1: diverged), by the worse of the two
        measures."""
        if self.value.problem or self.value.bad > self.benchmark.bad:
            return math.inf
        r = (
            self.value.rms / self.bar_rms
            if self.bar_rms > 0
            else (math.inf if self.value.rms else 0)
        )
        m = (
            self.value.max / self.bar_max
            if self.bar_max > 0
            else (math.inf if self.value.max else 0)
        )
        return max(r, m)


def judge(value, benchmark, truth, terms: tuple[float, float] | None = None) -> Verdict:
    """`value` (what the compiled run wrote) and `benchmark` (the same
    computation in the value's dtype) against `truth` (float64). `terms`:
    where the value is a sum or a mean, the scale (scale_of) of the terms it
    adds up. Its rounding is relative to them, not to a result that cancels
    (a layer norm's mean near zero), and another correct order of addition
    (a vectorised kernel's against ATen's cascade) differs by that much."""
    dtype = dtype_name(value.dtype)
    exact = not (value.dtype.is_floating_point or value.dtype.is_complex)
    err_value, err_bench = error_of(value, truth), error_of(benchmark, truth)
    rms, top = scale_of(truth)
    if terms is not None:
        rms, top = max(rms, terms[0]), max(top, terms[1])
    f = floor(dtype)
    return Verdict(
        dtype,
        err_value,
        err_bench,
        k_rms(dtype) * err_bench.rms + f * rms + _TINY,
        K_MAX * err_bench.max + f * top + _TINY,
        exact,
    )


# Below this, a difference is nothing (denormal noise of an all-zero value).
_TINY = 1e-30


@dataclass
class Difference:
    """Two runs' values of one node against each other: relative RMS and
    largest differences, relative to A's scale, and the largest absolute one."""

    rel_rms: float
    rel_max: float
    bad: int = 0
    abs_max: float = 0.0


def difference(a, b) -> Difference:
    e = error_of(b, a)
    rms, top = scale_of(a)
    return Difference(
        e.rms / rms if rms else (math.inf if e.rms else 0.0),
        e.max / top if top else (math.inf if e.max else 0.0),
        e.bad,
        e.max,
    )


def cross_floor(
    dtype: str, kernels: tuple[str, ...], envs: tuple[Environment | None, ...]
) -> float:
    """The relative difference two correct runs may show in a value of
    `dtype` written by `kernels`, in the environments they ran in: TF32's
    where a GPU run allowed it for what these kernels do (matmuls, or
    cuDNN's convolutions)."""
    base = CROSS_FLOOR.get(dtype, FLOOR_FLOAT8 if dtype.startswith("float8") else 0.0)
    if dtype != "float32":
        return base
    words = " ".join(kernels).lower()
    gpu = [e for e in envs if e is not None and e.device not in ("", "cpu")]
    convolves = "conv" in words
    multiplies = any(w in words for w in TF32_MATMUL_WORDS)
    if any((convolves and e.tf32_cudnn) or (multiplies and e.tf32_matmul_on) for e in gpu):
        return max(base, TF32_FLOOR)
    return base


@dataclass
class Environment:
    """The numerics settings a run was made in, as the printer records them
    (the `environment` record of a dump) and as `diverge` applies them to
    its benchmark."""

    torch: str = ""
    device: str = ""  # "cpu", or the GPU's name
    capability: str = ""  # "9.0"
    tf32_matmul: bool | None = None
    tf32_cudnn: bool | None = None
    matmul_precision: str = ""  # "highest", "high", "medium"
    bf16_reduction: bool | None = None
    fp16_reduction: bool | None = None
    deterministic: bool | None = None
    # 12 hex digits of the Inductor config the program was compiled with.
    inductor_config: str = ""

    @property
    def tf32_matmul_on(self) -> bool:
        """Whether float32 matmuls may use TF32 (the flag, or a matmul
        precision below "highest")."""
        return bool(self.tf32_matmul or self.matmul_precision in ("high", "medium"))

    @classmethod
    def from_record(cls, record) -> Environment:
        """From a dump's EnvironmentRecord (records)."""
        names = {f.name for f in fields(cls)}
        values = {f.name: getattr(record, f.name) for f in fields(record)}
        return cls(**{k: v for k, v in values.items() if k in names and v is not None})

    @classmethod
    def current(cls, device: str = "cpu") -> Environment:
        """This process's settings, for a run on `device`."""
        import torch

        matmul = torch.backends.cuda.matmul
        env = cls(
            torch=torch.__version__,
            device="cpu",
            tf32_matmul=bool(matmul.allow_tf32),
            tf32_cudnn=bool(torch.backends.cudnn.allow_tf32),
            matmul_precision=torch.get_float32_matmul_precision(),
            bf16_reduction=bool(matmul.allow_bf16_reduced_precision_reduction),
            fp16_reduction=bool(matmul.allow_fp16_reduced_precision_reduction),
            deterministic=torch.are_deterministic_algorithms_enabled(),
        )
        if str(device).startswith("cuda") and torch.cuda.is_available():
            index = torch.device(device).index
            index = torch.cuda.current_device() if index is None else index
            env.device = torch.cuda.get_device_name(index)
            major, minor = torch.cuda.get_device_capability(index)
            env.capability = f"{major}.{minor}"
        return env

    @contextlib.contextmanager
    def applied(self):
        """This environment's flags set in this process for a block, then
        restored: a benchmark computed under the settings of the run."""
        import torch

        matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
        saved = (
            matmul.allow_tf32,
            cudnn.allow_tf32,
            torch.get_float32_matmul_precision(),
            matmul.allow_bf16_reduced_precision_reduction,
            matmul.allow_fp16_reduced_precision_reduction,
        )
        try:
            # The precision first: setting it also sets allow_tf32, which the
            # recorded flag then overrides where it was recorded.
            if self.matmul_precision:
                torch.set_float32_matmul_precision(self.matmul_precision)
            if self.tf32_matmul is not None:
                matmul.allow_tf32 = self.tf32_matmul
            if self.tf32_cudnn is not None:
                cudnn.allow_tf32 = self.tf32_cudnn
            if self.bf16_reduction is not None:
                matmul.allow_bf16_reduced_precision_reduction = self.bf16_reduction
            if self.fp16_reduction is not None:
                matmul.allow_fp16_reduced_precision_reduction = self.fp16_reduction
            yield
        finally:
            torch.set_float32_matmul_precision(saved[2])
            matmul.allow_tf32, cudnn.allow_tf32 = saved[0], saved[1]
            matmul.allow_bf16_reduced_precision_reduction = saved[3]
            matmul.allow_fp16_reduced_precision_reduction = saved[4]

    def rows(self) -> list[tuple[str, str]]:
        """(setting, value) for printing, "-" where not recorded."""
        return [
            (
                f.name,
                "-" if v is None or v == "" else str(v).lower() if isinstance(v, bool) else str(v),
            )
            for f, v in ((f, getattr(self, f.name)) for f in fields(self))
        ]


def format_environments(named: list[tuple[str, Environment | None]]) -> list[str]:
    """Environments side by side, one setting a line; a `!` marks settings
    that differ."""
    cols = [(name, env.rows() if env else []) for name, env in named]
    keys = [f.name for f in fields(Environment)]
    width = max(12, *(len(n) for n, _ in named))
    lines = [f"  {'':<18}" + "".join(f"{name:<{width + 2}}" for name, _ in cols)]
    for key in keys:
        values = [
            dict(rows).get(key, "not recorded") if rows else "not recorded" for _, rows in cols
        ]
        mark = "!" if len(set(values)) > 1 else " "
        lines.append(f"{mark} {key:<18}" + "".join(f"{v:<{width + 2}}" for v in values))
    return lines
