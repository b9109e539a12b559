"""The first kernel where an AOT-compiled model differs from eager execution
of the same exported program, judged against a float64 truth.

The compiled side is a level-1 dump. The codegen tags a value a kernel
wrote with the exported program's node it holds only where that is exact
(see inductor/provenance): the kernel stored it, and it is where the node's
decomposition ends. The program is evaluated node by node four times
(evaluate): the truth (float64) and the benchmark (the program's dtypes,
under the compiled run's numerics settings), each once from the model
inputs (the accumulated error) and once with every node the dump holds
replaced by the compiled value (each kernel's own error, on its real
inputs). tools/numerics decides, from the two, whether a value is wrong
(match; values no node holds: formulas). The first divergence is the first
kernel, in launch order, whose own error is beyond the bar. What cannot be
compared is counted by reason, so the coverage is stated (result).

Rooms, by job: program (loading programs and inputs), evaluate (the FX
evaluator), match (judging a dump), formulas, run (compiling and running),
format (the printed lines), bisect (the compiler decision behind a
divergence)."""

from .bisect import bisect_divergence
from .evaluate import eager_values
from .format import format_bisection, format_divergence, format_runs_check
from .match import match_dump
from .program import ProgramError, load_inputs, load_program
from .result import Bisection, Cause, Divergence, Match, NotCompared, RunsCheck, Unmatched
from .run import first_difference_between_runs, first_divergence_from_eager

__all__ = [
    "Bisection",
    "Cause",
    "Divergence",
    "Match",
    "NotCompared",
    "ProgramError",
    "RunsCheck",
    "Unmatched",
    "bisect_divergence",
    "eager_values",
    "first_difference_between_runs",
    "first_divergence_from_eager",
    "format_bisection",
    "format_divergence",
    "format_runs_check",
    "load_inputs",
    "load_program",
    "match_dump",
]
