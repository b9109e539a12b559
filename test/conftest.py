"""Shared fixtures: compiled packages, the shim's output, the C++ test build."""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib.metadata
import importlib.util
import io
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# Everything a test run writes outside pytest's own tmp_path goes under one
# directory, made by the first process (the pytest-xdist workers inherit the
# variables below) and removed by it when the run ends (pytest_unconfigure):
# each run otherwise left gigabytes of Inductor cache in /tmp. A directory
# given in ADP_TESTS_RUN_DIR is kept.
RUN_DIRECTORY = None
if "ADP_TESTS_RUN_DIR" not in os.environ:
    RUN_DIRECTORY = Path(tempfile.mkdtemp(prefix="adp-tests-"))
    os.environ["ADP_TESTS_RUN_DIR"] = str(RUN_DIRECTORY)


def _in_the_run_directory(name: str) -> str:
    path = Path(os.environ["ADP_TESTS_RUN_DIR"]) / name
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


# One fresh Inductor cache for the session, set before torch is imported, so
# every compile below is a real one and runs never see another's code.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", _in_the_run_directory("inductor"))
# pytest-xdist keeps every core busy with a test process: Inductor's pool of
# compile workers would only start one more process per test process (and
# per child a test starts). It changes how kernels are compiled, not what.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
# The wrapper's C++ (AOTInductor's runtime interface and the calls around
# kernels; not the kernels, which keep -O3) at -O0 instead of Inductor's -O1:
# about 2 of the 9 s g++ spends on each wrapper, however small the model,
# and its precompiled header is built at the same level. What the wrapper
# does is the same at either level.
os.environ.setdefault("AOT_INDUCTOR_COMPILE_WRAPPER_OPT_LEVEL", "O0")
# What every pytest-xdist worker of this run shares (not AOTI_DEBUG_PRINTER_*:
# the shim names a variable of its prefix it does not know): compiled packages and
# the CMake build are made once, by the first worker that asks
# (testmodels/shared.py).
os.environ.setdefault("ADP_TESTS_SHARED_DIR", _in_the_run_directory("shared"))
# Snapshots a test does not send elsewhere (the guard's, a level-1 run's) go
# to a temporary directory, never into the checkout (upstream's default is
# ./tmp/aoti_torch/).
os.environ.setdefault("AOTI_DEBUG_PRINTER_DUMP_DIR", _in_the_run_directory("dumps"))

import pytest  # noqa: E402
import torch  # noqa: E402
from testmodels import small  # noqa: E402  (test/ is on the path: pyproject's pythonpath)
from testmodels.shared import shared  # noqa: E402

import aoti_debug_printer  # noqa: E402
from aoti_debug_printer._cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# Where this Python's torch is installed (what patches/check.sh checks).
SITE_PACKAGES = Path(torch.__file__).parents[1]


def _probe_inductor_vector_isas_once() -> None:
    """Inductor probes every vector ISA the CPU claims once per process, at
    its first CPU compile: a build (cached) and a child Python that imports
    torch to load it; 14.6 s for four with a cold cache, 3.3 s with a warm
    one. Every pytest-xdist worker and every child that compiles paid it, a
    sixth of a run's CPU (docs/testing.md).
    The run's first process probes them here, side by side; where every
    claimed ISA passes, Inductor's pick is the same with the probe skipped
    (TORCHINDUCTOR_VEC_ISA_OK=1), which the workers and their children
    inherit. Where one fails, each process probes for itself as usual."""
    if "TORCHINDUCTOR_VEC_ISA_OK" in os.environ or "PYTEST_XDIST_WORKER" in os.environ:
        return
    if platform.machine() != "x86_64":
        return
    from torch._inductor import cpu_vec_isa

    flags = cpu_vec_isa.x86_isa_checker()
    claimed = [
        isa
        for isa in cpu_vec_isa.supported_vec_isa_list
        if all(flag in flags for flag in str(isa).split())
    ]
    with concurrent.futures.ThreadPoolExecutor(max(len(claimed), 1)) as pool:
        if all(pool.map(bool, claimed)):
            os.environ["TORCHINDUCTOR_VEC_ISA_OK"] = "1"


_probe_inductor_vector_isas_once()


def torch_has_the_hooks() -> bool:
    """Whether the installed torch was built with patches/ (it has Inductor's
    debug-printer hooks): `AOTI_DEBUG_PRINTER_PATCHED=1 bash scripts/test.sh`
    runs the suite on one."""
    from aoti_debug_printer.inductor import install as _install

    return importlib.util.find_spec(_install._HOOKS_MODULE) is not None


@pytest.fixture(autouse=True)
def _no_method_wrap_where_the_hooks_are_required():
    """On a patched torch's run (AOTI_DEBUG_PRINTER_HOOKS=require) no test
    leaves a wrapped Inductor method, or Inductor without our hooks, behind
    for the tests after it."""
    yield
    from aoti_debug_printer.inductor import install as _install

    if _install.hooks_wanted() == "require":
        assert not _install.originals, f"left wrapped: {sorted(_install.originals)}"
        if _install.is_installed() and "torch._inductor.codegen.wrapper" in sys.modules:
            assert _install.uses_inductor_hooks(), "left Inductor without our hooks"


@pytest.fixture(autouse=True)
def _diverge_compiles_once_per_program(request):
    """diverge's own compile at level 1 (tools/diverge/run.py) goes through
    compiled_at_level_1, as the tests' compiles do: a program compiled
    before in the test run, by a test or by diverge, is not compiled again.
    A test marked compiles_afresh gets the library's compile itself. (A
    MonkeyPatch of its own: the test's `monkeypatch`, set up here, would be
    undone only after the fixtures that check what a test left behind.)"""
    if request.node.get_closest_marker("compiles_afresh"):
        yield
        return
    from testmodels import findings

    from aoti_debug_printer.tools.diverge import run

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            run,
            "compile_at_level_1",
            lambda program, package: str(findings.compiled_at_level_1(program, package)),
        )
        yield


@pytest.fixture
def stock_way_in(monkeypatch):
    """The stock way into Inductor, method wraps, for one test on any torch
    (AOTI_DEBUG_PRINTER_HOOKS=0); afterwards the package is installed again
    the way this torch takes."""
    from aoti_debug_printer.inductor import install as _install

    monkeypatch.setenv("AOTI_DEBUG_PRINTER_HOOKS", "0")
    yield
    monkeypatch.undo()
    _install.uninstall()
    _install.install()


def pytest_unconfigure(config):
    if RUN_DIRECTORY is not None and not hasattr(config, "workerinput"):
        shutil.rmtree(RUN_DIRECTORY, ignore_errors=True)


def pytest_runtest_setup(item):
    """Tests that share a compile (an xdist_group) must run on one worker:
    pytest-xdist marks them by a suffix of their ids, which some pytest
    releases drop (pytest-xdist#1386), and every worker would then compile
    the group's programs again. The run stops at the first such test."""
    config = item.config
    if (
        hasattr(config, "workerinput")
        and config.getoption("loadgroup", False)
        and item.get_closest_marker("xdist_group")
        and "@" not in item.nodeid
    ):
        why = (
            f"pytest-xdist {importlib.metadata.version('pytest-xdist')} does not group tests "
            f"under pytest {pytest.__version__}: install the pytest release "
            "scripts/python_env.sh names"
        )
        item.session.shouldstop = why
        pytest.fail(why, pytrace=False)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def compile_package(
    model_name: str,
    level: int,
    path: Path,
    kernels: str | None = None,
    device: str = "cpu",
    source_only: bool = False,
) -> Path:
    """A .pt2 of `model_name` at `level`; with `source_only`, Inductor's
    generated C++ alone (`package_cpp_only`), for tests that only read the
    code: no g++, about 8 s less for each."""
    model, inputs = small.build(model_name, device)
    patch = {
        "aot_inductor.debug_intermediate_value_printer": str(level),
        "aot_inductor.filtered_kernel_names": kernels,
        "aot_inductor.package_cpp_only": source_only or None,
    }
    dynamic = {"x": {0: torch.export.Dim("batch", min=2)}} if model_name == "dynamic" else None
    collectives = model_name in small.TENSOR_PARALLEL
    job = one_process_group() if collectives else contextlib.nullcontext()
    with torch._inductor.config.patch(patch), job:
        exported = torch.export.export(model, inputs, dynamic_shapes=dynamic)
        return Path(torch._inductor.aoti_compile_and_package(exported, package_path=str(path)))


@contextlib.contextmanager
def one_process_group():
    """A job of one process while a program with collectives compiles:
    Inductor asks the group the program names ("0", the job's default
    group, which the ranks that run the package have) for its size."""
    import torch.distributed as dist

    if dist.is_initialized():
        yield
        return
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="session")
def package():
    """package(model, level, kernels=None, device="cpu", source_only=False)
    -> path of a .pt2, compiled once per test run with our printer installed
    (compile_package)."""

    def get(
        model_name: str,
        level: int,
        kernels: str | None = None,
        device: str = "cpu",
        source_only: bool = False,
    ) -> Path:
        name = f"{model_name}-L{level}.pt2"

        def make(directory: Path) -> None:
            aoti_debug_printer.install()
            compile_package(model_name, level, directory / name, kernels, device, source_only)

        key = f"pt2-{model_name}-{level}-{kernels}-{device}" + ("-source" if source_only else "")
        return shared(key, make) / name

    return get


def wrapper_source(package_path: Path) -> str:
    with zipfile.ZipFile(package_path) as z:
        names = [n for n in z.namelist() if n.endswith(".wrapper.cpp")]
        assert len(names) == 1, names
        return z.read(names[0]).decode()


def level1_lines(dump: Path) -> list[dict]:
    """A level-1 dump's tensor lines, each with its snapshot's bytes, less
    what tells two runs apart (run, file name, the wait)."""
    out = []
    for r in map(json.loads, (dump / "manifest.jsonl").read_text().splitlines()):
        if r["event"] != "tensor":
            continue
        if "file" in r:
            r["bytes"] = (
                torch.load(dump / r.pop("file"), weights_only=True)
                .view(-1)
                .view(torch.uint8)
                .tolist()
            )
        for key in ("run", "save_waited_ms"):
            r.pop(key, None)
        out.append(r)
    return out


@pytest.fixture
def records(tmp_path):
    """Sends the shim's output to a JSON-lines file; calling the fixture's
    value reads the records written so far."""
    out = tmp_path / "records.jsonl"

    def read() -> list[dict]:
        if not out.exists():
            return []
        return [json.loads(line) for line in out.read_text().splitlines()]

    with aoti_debug_printer.options(output=out, format="jsonl"):
        yield read


@pytest.fixture
def dump_dir(tmp_path):
    d = tmp_path / "dump"
    with aoti_debug_printer.options(dump_dir=d):
        yield d


@pytest.fixture(scope="session")
def cpp_build() -> Path:
    """The Catch2 tests, the C++ package loader and the C++ custom op, built
    by CMake once per test run. The Catch2 tests link the installed library,
    the one Python and compiled models load, rather than a second build of
    it."""

    def make(build: Path) -> None:
        subprocess.run(
            [
                "cmake",
                "-S",
                ROOT,
                "-B",
                build,
                f"-DPython3_EXECUTABLE={sys.executable}",
                "-DAOTI_DEBUG_PRINTER_BUILD_TESTS=ON",
                f"-DAOTI_DEBUG_PRINTER_TEST_LIBRARY={aoti_debug_printer.library_path()}",
            ],
            check=True,
            capture_output=True,
        )
        jobs = str(os.cpu_count() or 1)
        result = subprocess.run(
            ["cmake", "--build", build, "-j", jobs, "--target", "test_programs"],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]

    return shared("cmake", make)


def cli(*args) -> subprocess.CompletedProcess:
    """`aoti-debug ARGS` in this process: the entry point's main(), its exit
    code and what it writes to stdout and stderr, as a child would give them
    (argparse's exits included). A child costs an import of torch; tests
    where the fresh process is the point (the installed command, --import of
    a user's module) start one, and test_install runs the entry point."""
    stdout, stderr = io.StringIO(), io.StringIO()
    # main()'s logging.basicConfig does nothing where pytest has given the
    # root logger its handlers: the package's logger writes as it would.
    logger = logging.getLogger("aoti_debug_printer")
    handler = logging.StreamHandler(stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    was = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = main([str(a) for a in args])
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 2
    finally:
        logger.removeHandler(handler)
        logger.setLevel(was[0])
        logger.propagate = was[1]
    return subprocess.CompletedProcess(args, code, stdout.getvalue(), stderr.getvalue())


def custom_op_output_record(recs: list[dict], x, s) -> dict:
    """The records of a call of models.py's adp_models::scale_rows: both
    inputs before launch (read), and the output, which the call makes, after
    it, holding the op's node and the op's statistics. Returns the output's
    after-launch record."""
    recs = [r for r in recs if r["event"] == "tensor" and r["kernel"] == "adp_models::scale_rows"]
    before = {r["arg"]: r for r in recs if r["phase"] == "before_launch"}
    after = {r["arg"]: r for r in recs if r["phase"] == "after_launch"}
    assert len(before) == 2 and {r["role"] for r in before.values()} == {"read"}
    (made,) = set(after) - set(before)
    assert after[made]["role"] == "write" and after[made]["node"] == "scale_rows"
    expected = aoti_debug_printer.stats(((torch.relu(x) + 1) * s[:, None]).cpu())
    for key in ("min", "max", "mean", "std"):
        assert after[made]["stats"][key] == pytest.approx(expected[key], rel=1e-5)
    return after[made]


def fx_graph_cache_counts(argv: list, cache_dir: Path, autoload: str) -> list[list[str]]:
    """Runs a child Python (`argv` after the interpreter) that compiles, and
    after each compile prints "cache HITS MISSES" of Inductor's FX graph
    cache, with the package's autoload on ("1") or off ("0"); returns
    [HITS, MISSES] of each compile."""
    done = subprocess.run(
        [sys.executable, *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **os.environ,
            "TORCHINDUCTOR_CACHE_DIR": str(cache_dir),
            "AOTI_DEBUG_PRINTER_AUTOLOAD": autoload,
        },
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("cache ")]
