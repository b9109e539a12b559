"""torch.compile without AOT: the Python wrapper calls the same shim."""

from __future__ import annotations

import pytest
import torch
from conftest import custom_op_output_record
from testmodels import small

import aoti_debug_printer

pytestmark = pytest.mark.slow


def f(x, w, scale: float):
    return torch.relu(x @ w).sum(1) * scale


@pytest.fixture
def compiled_at(request):
    def compile_at(level: int, kernels: str | None = None, cpp_wrapper: bool = False):
        torch._dynamo.reset()
        aoti_debug_printer.install()
        patch = {
            "aot_inductor.debug_intermediate_value_printer": str(level),
            "aot_inductor.filtered_kernel_names": kernels,
            "cpp_wrapper": cpp_wrapper,
        }
        with torch._inductor.config.patch(patch):
            fn = torch.compile(f, dynamic=False)
            x, w = torch.randn(4, 8), torch.randn(8, 3)
            return fn(x, w, 2.0), f(x, w, 2.0)

    yield compile_at
    torch._dynamo.reset()


def test_level2_records_extern_and_cpp_kernels(compiled_at, records):
    got, want = compiled_at(2)
    torch.testing.assert_close(got, want)
    recs = records()
    assert [r["event"] for r in recs[:1]] == ["tensor"]
    kernels = {r["kernel"] for r in recs if r["event"] == "tensor" and r["kernel"]}
    assert "extern_kernels.mm" in kernels
    assert any(k.startswith("cpp_fused_") for k in kernels)
    inputs = [r for r in recs if r["phase"] == "model_input"]
    assert len(inputs) == 2 and all(r["run"] == inputs[0]["run"] >= 0 for r in recs)
    mm_after = [
        r for r in recs if r["kernel"] == "extern_kernels.mm" and r["phase"] == "after_launch"
    ]
    assert any(r["shape"] == [4, 3] for r in mm_after)


def test_level3_names_kernels_through_the_shim(compiled_at, records):
    compiled_at(3)
    events = [(r["phase"], r["kernel"]) for r in records() if r["event"] == "launch"]
    names = [k for p, k in events if p == "before_launch"]
    assert names[0] == "extern_kernels.mm" and names[1].startswith("cpp_fused_")
    assert events == [(p, k) for k in names for p in ("before_launch", "after_launch")]


def test_filter_and_level1_in_jit(compiled_at, dump_dir):
    compiled_at(1, kernels="cpp_fused_*")
    aoti_debug_printer.wait_for_saves()  # the saver's thread writes behind the model
    manifest = (dump_dir / "manifest.jsonl").read_text().splitlines()
    records = [__import__("json").loads(line) for line in manifest]
    kernels = {r["kernel"] for r in records if r["event"] == "tensor"}
    assert kernels - {""} and all(k.startswith("cpp_fused_") for k in kernels - {""})


def test_jit_cpp_wrapper_goes_through_the_same_shim(compiled_at, records):
    got, want = compiled_at(2, cpp_wrapper=True)
    torch.testing.assert_close(got, want)
    recs = records()
    kernels = [r["kernel"] for r in recs if r["event"] == "tensor" and r["phase"] == "after_launch"]
    assert "aoti_torch_cpu_mm_out" in kernels and any(k.startswith("cpp_fused_") for k in kernels)
    assert {r["run"] for r in recs} == {recs[0]["run"]} and recs[0]["phase"] == "model_input"


@pytest.mark.parametrize("cpp_wrapper", [False, True], ids=["python_wrapper", "cpp_wrapper"])
def test_custom_op_in_the_jit_wrappers_is_recorded(records, cpp_wrapper):
    """The Python wrapper calls a custom op as `bufN = op(...)`, the C++
    wrapper through the dispatcher: either way it gets a launch named after
    the op, its inputs before launch, its output after."""
    torch._dynamo.reset()
    aoti_debug_printer.install()
    model, (x, s) = small.build("custom_op")
    patch = {"aot_inductor.debug_intermediate_value_printer": "2", "cpp_wrapper": cpp_wrapper}
    with torch._inductor.config.patch(patch):
        got = torch.compile(model)(x, s)
    torch._dynamo.reset()
    torch.testing.assert_close(got, model(x, s))
    custom_op_output_record(records(), x, s)


@pytest.mark.parametrize("kept_in_call", [None, "extern"], ids=["all_partitioned", "mm_in_call"])
def test_graph_partitions_write_the_records_of_the_unpartitioned_call(
    records, monkeypatch, kept_in_call
):
    """With CUDA graphs (mode="reduce-overhead"), Inductor puts a graph's
    kernels into partition functions, which cudagraph trees capture, and
    leaves the rest in the call. Here CPU kernels are partitioned as GPU
    kernels would be: the records are those of the unpartitioned call, in
    one run that the call begins, with each model input recorded once."""
    from torch._inductor import scheduler

    x, w = torch.randn(4, 8), torch.randn(8, 3)

    def run(partitioned: bool) -> list[dict]:
        torch._dynamo.reset()
        aoti_debug_printer.install()
        with torch._inductor.config.patch({"aot_inductor.debug_intermediate_value_printer": "2"}):
            with monkeypatch.context() as m:
                if partitioned:
                    m.setattr(
                        scheduler.Scheduler,
                        "should_partition",
                        lambda self, node: "kept" if kept_in_call in str(node.node) else None,
                    )
                got = torch.compile(f, dynamic=False)(x, w, 2.0)
        torch.testing.assert_close(got, f(x, w, 2.0))
        torch._dynamo.reset()
        return [r for r in records() if r["event"] == "tensor"]

    def key(r: dict) -> dict:
        return {k: v for k, v in r.items() if k not in ("run", "pid", "process", "thread")}

    unpartitioned = run(False)
    both = run(True)
    partitioned = both[len(unpartitioned) :]
    assert [key(r) for r in partitioned] == [key(r) for r in unpartitioned]
    assert len({r["run"] for r in partitioned}) == 1
    assert [r["arg"] for r in partitioned if r["phase"] == "model_input"] == ["arg0_1", "arg1_1"]


def mask_and_attend(s):
    """An attention-style additive mask, -inf on purpose where a score is
    masked (never the diagonal), and the softmax over it: finite."""
    allowed = torch.eye(s.shape[0], dtype=torch.bool) | (s > 0)
    mask = torch.where(allowed, 0.0, float("-inf"))
    return torch.softmax(s + mask, -1), mask


@pytest.mark.parametrize(
    "trap,stops", [("1", "infinities only"), ("nan", None)], ids=["nan_and_inf", "nan_only"]
)
def test_the_trap_on_a_mask_of_minus_inf_made_on_purpose(records, trap, stops):
    """AOTI_DEBUG_PRINTER_TRAP=1 stops at the kernel that made the mask's
    -inf, and says how to trap NaN only; =nan lets the model run, and still
    stops at a kernel that makes NaN."""
    torch._dynamo.reset()
    aoti_debug_printer.install()
    s = torch.randn(6, 6)
    level = {"aot_inductor.debug_intermediate_value_printer": "2"}
    with torch._inductor.config.patch(level), aoti_debug_printer.options(trap=trap):
        compiled = torch.compile(mask_and_attend, dynamic=False)
        if stops:
            with pytest.raises(RuntimeError, match=stops + r".*AOTI_DEBUG_PRINTER_TRAP=nan"):
                compiled(s)
        else:
            got, _ = compiled(s)
            torch.testing.assert_close(got, mask_and_attend(s)[0])
            torch._dynamo.reset()
            with pytest.raises(RuntimeError, match="made NaN/Inf in"):
                torch.compile(lambda x: torch.log(x - 10), dynamic=False)(s)
    torch._dynamo.reset()
    traps = [r for r in records() if r["event"] == "trap"]
    assert len(traps) == 1
    assert (traps[0]["nan"] == 0 and traps[0]["neg_inf"] > 0) == bool(stops), traps
