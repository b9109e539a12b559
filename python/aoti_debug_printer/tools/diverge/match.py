"""A level-1 dump judged against the program: every value a kernel wrote
that holds a node, or has a formula, against the float64 truth beside the
benchmark, once from the model inputs and once on the compiled run's own
inputs."""

from __future__ import annotations

from typing import Any

from ...source_lines import node_sources
from ..dumps import Dump, Record, load_dump
from ..numerics import Environment, judge
from .evaluate import Evaluation, ProgramGraph, region_of
from .formulas import Formula, complete_nodes, convolution_formats, judge_formulas
from .program import ProgramError
from .result import Divergence, Match, NotCompared, Progress, Unmatched, left_out


def match_dump(
    dump_source,
    program,
    args: tuple,
    kwargs: dict,
    environment: Environment | None = None,
    progress=None,
) -> Divergence:
    """Judges every value a level-1 dump holds of `program`'s nodes against
    the float64 truth, beside the benchmark in the run's dtypes under the
    run's numerics settings (the dump's, else `environment`)."""
    import torch

    progress = progress or Progress()
    dump = dump_source if isinstance(dump_source, Dump) else load_dump(dump_source)
    if not dump.has_provenance:
        raise ProgramError(
            f"{dump.source} does not say what its buffers hold: compile the model "
            "with this version of aoti-debug-printer at level 1"
        )
    result = Divergence([])
    first_run = [r for r in dump.written_values() if r.run == 0]
    if not first_run:
        raise ProgramError(f"{dump.source} holds no value a kernel wrote (is it a level-1 dump?)")
    result.environment = dump.environment(0) or environment
    nodes = {n.name for n in program.graph.nodes}
    candidates: list[Record] = []
    formulas: list[tuple[Record, Formula]] = []
    compiled: dict[str, Any] = {}
    first_of: dict[str, Record] = {}
    for r in first_run:
        formula = None if r.node else r.formula
        if formula is not None and r.path is not None:
            formulas.append((r, Formula(formula)))
        elif not r.node:
            result.unmatched.append(left_out(r))
        elif r.node not in nodes:
            result.unmatched.append(Unmatched(r, NotCompared.NO_EAGER_TENSOR.value, r.node))
        elif r.path is None:
            lost = NotCompared.SAVE_FAILED if r.tensor.unsaved else NotCompared.NOT_SAVED
            result.unmatched.append(Unmatched(r, lost.value, r.tensor.unsaved))
        else:
            candidates.append(r)
            if r.node not in compiled:
                compiled[r.node] = r.load()
                first_of[r.node] = r
    device = next((r.tensor.device for r in first_run if r.tensor.device), "cpu")
    env = result.environment or Environment.current(device)
    graph = ProgramGraph(program)
    formats = convolution_formats(graph, candidates, formulas)
    bench_evaluation = Evaluation(program, truth=False, device=device, memory_formats=formats)
    complete_nodes(formulas, compiled, bench_evaluation, program, env)
    keep = set(compiled).union(*(f.nodes for _, f in formulas))
    progress.phase("the float64 truth, from the model inputs")
    truth_evaluation = Evaluation(program, truth=True)
    truth = truth_evaluation.run(args, kwargs, keep)
    progress.phase("the float64 truth of each kernel, on the compiled run's own inputs")
    own_truth_evaluation = Evaluation(program, truth=True)
    own_truth = own_truth_evaluation.run(args, kwargs, keep, compiled)
    with env.applied():
        progress.phase(f"the benchmark in the run's dtypes on {device}, from the model inputs")
        bench = bench_evaluation.run(args, kwargs, keep)
        progress.phase(
            f"the benchmark of each kernel on {device}, on the compiled run's own inputs"
        )
        own_bench = Evaluation(program, truth=False, device=device, memory_formats=formats).run(
            args, kwargs, keep, compiled
        )
    progress.phase(f"judging {len(candidates)} values")
    for r in candidates:
        t = truth.get(r.node)
        if not isinstance(t, torch.Tensor):
            result.unmatched.append(Unmatched(r, NotCompared.NO_EAGER_TENSOR.value, r.node))
            continue
        value = compiled[r.node] if first_of.get(r.node) is r else r.load()
        if value.numel() != t.numel():
            result.unmatched.append(Unmatched(r, NotCompared.SIZE_DIFFERS.value, r.node))
            continue
        # The node's value, kept in a buffer of another shape (reached
        # through a reshape): the same elements in the same order.
        value = value.reshape(t.shape)
        region, from_inputs = region_of(graph, r.node, compiled)
        own = judge(
            value, own_bench[r.node], own_truth[r.node], own_truth_evaluation.terms.get(r.node)
        )
        result.matches.append(
            Match(
                r,
                r.node,
                own,
                judge(value, bench[r.node], t, truth_evaluation.terms.get(r.node)),
                region,
                from_inputs,
                own_truth[r.node] if own.diverged else None,
            )
        )
    if formulas:
        progress.phase(f"judging {len(formulas)} values by their formulas")
        judge_formulas(
            result,
            formulas,
            program,
            args,
            kwargs,
            env,
            compiled,
            (truth_evaluation, bench_evaluation),
            (truth, own_truth, bench, own_bench),
            graph,
        )
        order = {id(r): i for i, r in enumerate(first_run)}
        result.matches.sort(key=lambda m: order[id(m.record)])
    result.sources = node_sources(program, {m.node for m in result.matches})
    progress.phase("judged")
    return result
