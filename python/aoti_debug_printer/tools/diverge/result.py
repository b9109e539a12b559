"""What diverge found: every value a kernel wrote, judged (a Match) or left
out with its code (an Unmatched), and the first divergence among them; and
what --bisect found behind it (a Bisection, its Cause)."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ...records import Reason, WrongInputRecord
from ...source_lines import SourceFrame
from ..dumps import Record
from ..numerics import Environment, Verdict

log = logging.getLogger(__name__)


class NotCompared(str, Enum):
    """Why diverge left out a value a kernel wrote that holds a node or has
    a formula. A value with neither is left out by its record's Reason."""

    NO_EAGER_TENSOR = "no_eager_tensor"
    NOT_SAVED = "not_saved"
    SAVE_FAILED = "save_failed"
    SIZE_DIFFERS = "size_differs"
    FORMULA_FAILED = "formula_failed"

    @property
    def text(self) -> str:
        return _NOT_COMPARED_TEXT[self]


_NOT_COMPARED_TEXT = {
    NotCompared.NO_EAGER_TENSOR: "the node has no tensor value in eager",
    NotCompared.NOT_SAVED: "no saved file: its inputs and value were not saved (compile at level 1)",
    NotCompared.SAVE_FAILED: "its snapshot could not be saved (a full or unwritable dump "
    "directory): the run's stderr said why",
    NotCompared.SIZE_DIFFERS: "the buffer and the node's (or formula's) value differ in size",
    NotCompared.FORMULA_FAILED: "its formula cannot be evaluated",
}


@dataclass(frozen=True)
class Unmatched:
    """A value a kernel wrote that diverge did not judge: `code` is a
    NotCompared or a Reason value."""

    record: Record
    code: str
    detail: str = ""

    @property
    def text(self) -> str:
        why = NotCompared(self.code) if self.code in _NOT_COMPARED_CODES else Reason(self.code)
        return why.text


_NOT_COMPARED_CODES = frozenset(c.value for c in NotCompared)


def left_out(r: Record) -> Unmatched:
    """A value that holds no node and has no formula, by its record's reason."""
    reason = r.tensor.reason
    code = reason.value if reason else Reason.NO_GRAPH_NODE.value
    return Unmatched(r, code, r.tensor.why.removeprefix(code).removeprefix(":"))


@dataclass
class Divergence:
    matches: list[Match]
    # Values kernels wrote that could not be held against eager, with why.
    unmatched: list[Unmatched] = field(default_factory=list)
    # The numerics settings of the compiled run the benchmark was made under.
    environment: Environment | None = None
    # The one-kernel repro written of the first divergence (`repro=`).
    repro: Any = None
    # The run's inputs are not what the package was compiled for (its check
    # before the first kernel stopped the run): nothing was judged.
    wrong_input: WrongInputRecord | None = None
    # Where the compile accepted fewer sizes than the program was exported
    # for, one line each (from diverge's own compile only).
    narrowed: tuple[str, ...] = ()
    # Where each judged node came from in the user's code (source_lines),
    # the innermost frame first.
    sources: dict[str, list[SourceFrame]] = field(default_factory=dict)

    def source_of(self, node: str) -> str:
        """The user's innermost line that made `node`, as people read it;
        "" where the program does not say."""
        frames = self.sources.get(node)
        return frames[0].text if frames else ""

    @property
    def first(self) -> Match | None:
        """The first kernel, in launch order, whose own error is beyond the bar."""
        return next((m for m in self.matches if m.own.diverged), None)

    @property
    def drift(self) -> Match | None:
        """The first value whose accumulated error is beyond the bar, where
        no kernel's own error is. Not a divergence: every kernel computed
        what its inputs allow in the run's settings; the run amplified their
        noise more than eager."""
        if self.first is not None:
            return None
        return next((m for m in self.matches if m.accumulated.diverged), None)

    def coverage(self) -> tuple[int, int, Counter]:
        """(values kernels wrote, of them compared, the rest by reason code)."""
        reasons = Counter(u.code for u in self.unmatched)
        return len(self.matches) + len(self.unmatched), len(self.matches), reasons


@dataclass
class Match:
    """One value a kernel wrote, judged twice: its own error (the node, or
    the nodes its kernel fuses, evaluated on the compiled run's own inputs)
    and the error accumulated from the model inputs."""

    record: Record
    node: str
    own: Verdict
    accumulated: Verdict
    # The nodes evaluated for the own error: this one and those between it
    # and the values the dump holds (the nodes its kernel fuses, or more
    # where the values before it were not saved).
    region: int = 1
    # Whether that region reaches back to the model inputs: no value before
    # it was saved, so its own error is its accumulated one.
    from_model_inputs: bool = False
    # Where its own error is beyond the bar: the float64 truth it was judged
    # by (on the compiled run's own inputs), for a repro's expected value.
    expected: Any = None

    @property
    def diverged(self) -> bool:
        return self.own.diverged


class Progress:
    """One line on stderr per long phase, with the seconds since the start:
    diverge runs for minutes on a large model."""

    def __init__(self, enabled: bool = False) -> None:
        import time

        self.enabled = enabled
        self.start = time.monotonic()

    def phase(self, what: str) -> None:
        import time

        if self.enabled:
            log.info("diverge: [%6.1fs] %s", time.monotonic() - self.start, what)


@dataclass
class RunsCheck:
    """Runs of one compile on the same inputs, each compared with the first
    bit for bit (see tools/compare)."""

    comparisons: list  # of compare.Comparison: run 0 against run k

    @property
    def first(self):
        """The first value that differs between run 0 and a later run, as
        a compare.Difference; None when every run gave the same bits."""
        return next(
            (c.first_different for c in self.comparisons if c.first_different is not None), None
        )

    @property
    def nondeterministic_kernel(self) -> bool:
        """A kernel that should be deterministic gave other bits."""
        first = self.first
        return first is not None and not first.nondeterministic_by_construction


class Stage(str, Enum):
    """Where in the compiler a cause was found."""

    DECOMPOSITION = "decomposition"
    JOINT_GRAPH_PASSES = "joint_graph_passes"
    POST_GRAD_PASSES = "post_grad_passes"
    CUSTOM_PASS = "custom_pass"
    LOWERING = "lowering"
    CONFIG = "config"
    NOT_THE_COMPILER = "not_the_compiler"


class Outcome(int, Enum):
    """diverge --bisect's exit codes."""

    NO_DIVERGENCE = 0
    CAUSE = 1
    NO_DECISION = 3


@dataclass(frozen=True, kw_only=True)
class Cause:
    stage: Stage
    decision: str  # the op, the pass, the node, the config, the user's op
    where: str = ""  # file:line of the decomposition, lowering or pass
    application: int = -1  # which application of the stage, from 0
    good: str = ""  # how to compile without it
    bad: str = ""  # how to compile with it (and without what follows)

    @property
    def text(self) -> str:
        at = f", registered at {self.where}" if self.where else ""
        nth = f" (application {self.application} of the stage)" if self.application >= 0 else ""
        match self.stage:
            case Stage.DECOMPOSITION:
                return f"the decomposition of {self.decision}{at}{nth}"
            case Stage.JOINT_GRAPH_PASSES | Stage.POST_GRAD_PASSES:
                kind = "joint-graph" if self.stage is Stage.JOINT_GRAPH_PASSES else "post-grad"
                defined = f", defined at {self.where}" if self.where else ""
                nth = f" (application {self.application} of the {kind} passes)"
                return f"the {kind} pass {self.decision}{nth}{defined}"
            case Stage.CUSTOM_PASS:
                return f"the custom pass {self.decision}{at}"
            case Stage.LOWERING:
                return (
                    f"the lowering of node {self.decision}{at}{nth}: falling back to ATen "
                    f"for node {self.decision} removes the divergence"
                )
            case Stage.CONFIG:
                return f"the config {self.decision}"
            case Stage.NOT_THE_COMPILER:
                defined = f" (defined at {self.where})" if self.where else ""
                return f"not the compiler: {self.decision}{defined}"


@dataclass
class Bisection:
    divergence: Divergence  # diverge's verdict on the default compile
    node: str = ""  # the node the oracle watches
    cause: Cause | None = None
    compiles: int = 0
    seconds: float = 0.0
    steps: list[str] = field(default_factory=list)  # one line per compile
    # Where no value diverges from eager but a kernel wrote NaN (what the
    # trap stops at; eager makes it too): that record, whose node the oracle
    # watches for NaN instead.
    non_finite: Record | None = None
    source: str = ""  # where the user's code made the watched node
    # What no compile decided, its compile having failed, where no cause
    # was found: (the decision, its file:line or "", why), in order.
    suspects: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def outcome(self) -> Outcome:
        if self.divergence.first is None and self.non_finite is None:
            return Outcome.NO_DIVERGENCE
        return Outcome.CAUSE if self.cause is not None else Outcome.NO_DECISION
