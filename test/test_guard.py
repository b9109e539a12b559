"""The write guard: it names the kernel that changed memory it had no right
to change, and says nothing on correct models (test_findings runs it on
six architectures). Real AOTInductor compiles and runs, on CPU and, where
a GPU is present, on CUDA."""

from __future__ import annotations

import json

import pytest
import torch
from testmodels import small

import aoti_debug_printer

pytestmark = pytest.mark.slow

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
# The op's kernel in Python, on CPU and CUDA; in C++, on CPU.
FILL_ROWS_KERNELS = [("cpu", ""), pytest.param("cuda", "", marks=pytest.mark.gpu), ("cpu", "cpp_")]


@pytest.fixture
def load_kernel(cpp_build):
    def load(prefix: str) -> None:
        if prefix == "cpp_":
            torch.ops.load_library(str(cpp_build / "libadp_cpp_ops.so"))

    return load


def run_guarded(package_path, inputs, guard: int, output):
    runner = torch._inductor.aoti_load_package(str(package_path))
    with aoti_debug_printer.options(guard=guard, format="jsonl", output=output, max_values=0):
        return runner(*inputs)


def findings(output) -> list[dict]:
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    return [r for r in lines if r["event"] == "guard"]


@pytest.mark.parametrize("device", DEVICES)
def test_op_that_changes_an_input_it_only_reads_is_named(
    package, tmp_path, dump_dir, device, capfd
):
    path = package("undeclared_mutation", 2, device=device)
    _, (x, s) = small.build("undeclared_mutation", device)
    y = torch.relu(x) + 1
    # Off, the model runs on, silently.
    run_guarded(path, (x, s), 0, tmp_path / "off.jsonl")
    assert findings(tmp_path / "off.jsonl") == []

    capfd.readouterr()
    with pytest.raises(RuntimeError):  # the message is torch's; the record says why
        run_guarded(path, (x, s), 1, tmp_path / "on.jsonl")
    # The error the package's run ends with is the stop's own, as reported.
    err = capfd.readouterr().err
    stop = "write guard: kernel adp_models::scale_rows_sloppy (launch "
    assert f"[aoti-debug-printer] ERROR: {stop}" in err, err
    assert f"Error: aoti-debug-printer: {stop}" in err, err
    assert "; its record is above" not in err, err
    (found,) = findings(tmp_path / "on.jsonl")
    assert found["kind"] == "read_only_argument_changed"
    assert found["kernel"] == "adp_models::scale_rows_sloppy" and found["role"] == "read"
    assert (found["changed"], found["numel"], found["first_index"]) == (32, 32, 0)
    # Where the user's code made the value the op changed.
    assert found["source"][0].endswith("in forward: y = torch.relu(x) + 1"), found
    before = torch.load(found["files"]["before launch"], weights_only=True)
    after = torch.load(found["files"]["after launch"], weights_only=True)
    torch.testing.assert_close(before, y.cpu())
    torch.testing.assert_close(after, 2 * y.cpu())


@pytest.mark.xdist_group("cpp_build")  # beside test_cpp: one build of the C++ op
@pytest.mark.parametrize("device,kernel", FILL_ROWS_KERNELS)
def test_op_that_writes_past_its_output_into_a_live_neighbour_is_named(
    package, tmp_path, load_kernel, device, kernel
):
    """a and b are two halves of one tensor; the op declares that it writes
    a, and writes one row of b too. No fault: the row is inside a valid
    allocation. The guard finds b changed before its reader, and at guard 2
    names the op."""
    load_kernel(kernel)
    op = "adp_cpp::fill_rows_" if kernel else "adp_models::fill_rows_"
    path = package(f"{kernel}writes_past", 2, device=device)
    _, inputs = small.build(f"{kernel}writes_past", device)
    with pytest.raises(RuntimeError):  # the message is torch's; the record says why
        run_guarded(path, inputs, 1, tmp_path / "g1.jsonl")
    (found,) = findings(tmp_path / "g1.jsonl")
    assert found["kind"] == "overwritten_before_read" and found["phase"] == "before_launch"
    b = found["arg"]
    assert found["writer"] == f"the caller (model input {b})"
    assert any(k.startswith(f"{op} ") for k in found["between"])
    assert found["culprit"] == ""

    _, inputs = small.build(f"{kernel}writes_past", device)
    with pytest.raises(RuntimeError):  # the message is torch's; the record says why
        run_guarded(path, inputs, 2, tmp_path / "g2.jsonl")
    (found,) = findings(tmp_path / "g2.jsonl")
    assert found["arg"] == b and found["culprit"].startswith(f"{op} (launch ")


@pytest.mark.xdist_group("cpp_build")  # beside test_cpp: one build of the C++ op
@pytest.mark.parametrize("device,kernel", FILL_ROWS_KERNELS)
def test_the_same_op_writing_only_its_output_raises_no_alarm(
    package, tmp_path, load_kernel, device, kernel
):
    load_kernel(kernel)
    path = package(f"{kernel}fills_rows", 2, device=device)
    model, inputs = small.build(f"{kernel}fills_rows", device)
    expected = model(*[t.clone() for t in inputs])
    for guard in (0, 1, 2):
        _, inputs = small.build(f"{kernel}fills_rows", device)
        got = run_guarded(path, inputs, guard, tmp_path / f"g{guard}.jsonl")
        assert torch.equal(got, expected) and findings(tmp_path / f"g{guard}.jsonl") == []


def test_read_only_arguments_are_recorded_once(package, records):
    """Before launch only: an argument a kernel only reads is unchanged after
    it, unless the guard says otherwise. With roles off (for a role in
    doubt), every argument is recorded in full before and after launch."""
    runner = torch._inductor.aoti_load_package(str(package("mlp", 2)))
    _, inputs = small.build("mlp")

    def kernel_records() -> list[dict]:
        return [r for r in records() if r["event"] == "tensor" and r["kernel"]]

    runner(*inputs)
    with_roles = kernel_records()
    reads = [r for r in with_roles if r["role"] == "read"]
    assert reads and all(r["phase"] == "before_launch" for r in reads)
    writes = [r for r in with_roles if r["role"] == "write"]
    assert any(r["phase"] == "before_launch" and r["stats"] is None for r in writes)

    with aoti_debug_printer.options(roles=0):
        runner(*inputs)
    without = kernel_records()[len(with_roles) :]
    assert {r["role"] for r in without} == {""}
    phases = {(r["kernel"], r["arg"]): set() for r in without}
    for r in without:
        phases[(r["kernel"], r["arg"])].add(r["phase"])
        assert r["stats"] is not None
    assert all(p == {"before_launch", "after_launch"} for p in phases.values())
    assert len(without) > len(with_roles)


def test_guard_in_the_jit_wrapper_names_the_op(tmp_path):
    torch._dynamo.reset()
    aoti_debug_printer.install()
    model, (x, s) = small.build("undeclared_mutation")
    try:
        with torch._inductor.config.patch({"aot_inductor.debug_intermediate_value_printer": "2"}):
            compiled = torch.compile(model)
            with pytest.raises(RuntimeError):  # the message is torch's; the record says why
                with aoti_debug_printer.options(
                    guard=1, format="jsonl", output=tmp_path / "r.jsonl"
                ):
                    compiled(x, s)
    finally:
        torch._dynamo.reset()
    (found,) = findings(tmp_path / "r.jsonl")
    assert found["kernel"] == "adp_models::scale_rows_sloppy" and found["changed"] == 32


try:
    import triton
    import triton.language as tl

    @triton.jit
    def _add_one(x_ptr, out_ptr, n, past, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        value = tl.load(x_ptr + offs, mask=offs < n, other=0.0) + 1
        # `past` > 0: the wrong mask, `past` elements after its output.
        tl.store(out_ptr + offs, value, mask=offs < n + past)

    @torch.library.triton_op("adp_test::add_one_", mutates_args={"out"})
    def _add_one_op(out: torch.Tensor, x: torch.Tensor, past: int) -> None:
        n = out.numel()
        torch.library.wrap_triton(_add_one)[((n + 16 + 255) // 256,)](x, out, n, past, BLOCK=256)
except ImportError:  # no Triton: the CUDA tests below are skipped anyway
    pass


class TritonAddOne(torch.nn.Module):
    """A user Triton kernel fills input a in place; a kernel then reads a and
    b, which the caller passes as two halves of one tensor."""

    def __init__(self, past: int) -> None:
        super().__init__()
        self.past = past

    def forward(self, a, b, x):
        torch.ops.adp_test.add_one_(a, x, self.past)
        return a.sum() + b.sum() * 2


@pytest.mark.gpu
@pytest.mark.parametrize("past", [16, 0])
def test_triton_kernel_writing_past_its_output_is_named(tmp_path, past):
    halves = torch.randn(2 * 1024, device="cuda")
    x = torch.randn(1024, device="cuda")
    program = torch.export.export(TritonAddOne(past), (halves[:1024], halves[1024:], x))
    with aoti_debug_printer.enabled(level=2):
        path = torch._inductor.aoti_compile_and_package(
            program, package_path=str(tmp_path / "t.pt2")
        )
    if past == 0:
        # The same package with the printer off: a sum's order of addition
        # is the compiled kernel's, which eager need not share bit for bit.
        inputs = halves.clone()
        with aoti_debug_printer.options(level=0):
            expected = torch._inductor.aoti_load_package(str(path))(inputs[:1024], inputs[1024:], x)
        for guard in (1, 2):
            inputs = halves.clone()
            got = run_guarded(
                path, (inputs[:1024], inputs[1024:], x), guard, tmp_path / f"{guard}.jsonl"
            )
            assert torch.equal(got, expected) and findings(tmp_path / f"{guard}.jsonl") == []
        return
    inputs = halves.clone()
    with pytest.raises(RuntimeError):  # the message is torch's; the record says why
        run_guarded(path, (inputs[:1024], inputs[1024:], x), 2, tmp_path / "2.jsonl")
    (found,) = findings(tmp_path / "2.jsonl")
    assert found["kind"] == "overwritten_before_read"
    assert "add_one" in found["culprit"] and "(launch " in found["culprit"], found
