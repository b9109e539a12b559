"""The `aoti-debug` command: from printed records to the kernel that went wrong.

aoti-debug compare A B [--rtol R] [--atol A] [--top N] [--strict]
aoti-debug compare DUMP --ranks [0,3]
aoti-debug compare SINGLE_DEVICE_DUMP TENSOR_PARALLEL_DUMP
aoti-debug report DUMP [-o report.html] [--against DUMP]
aoti-debug diverge PROGRAM.pt2 [--import MODULE]... [--inputs FILE] [--dump DUMP] [--quiet]
                   [--repro DIR [--package MODEL.pt2]] [--runs N] [--bisect]
aoti-debug repro DUMP --package MODEL.pt2 [--kernel NAME] [--launch N] [--call N] [-o DIR]
aoti-debug doctor
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings

log = logging.getLogger("aoti_debug_printer")
# torch warns at import where NumPy is not installed (CUDA wheels do not
# pull it in); nothing here uses NumPy, and our errors are one line.
warnings.filterwarnings("ignore", "Failed to initialize NumPy", UserWarning)


def _compare(args) -> int:
    from .tools.compare import compare, format_comparison
    from .tools.dumps import load_dump
    from .tools.parallel import single_and_parallel

    if args.ranks is not None:
        return _compare_ranks(args)
    if args.b is None:
        raise ValueError("compare needs two dumps, A and B, or one dump and --ranks")
    a, b = load_dump(args.a), load_dump(args.b)
    pair = single_and_parallel(a, b)
    if pair is not None:
        return _compare_parallel(args, *pair)
    c = compare(a, b, rtol=args.rtol, atol=args.atol)
    sys.stdout.write(format_comparison(c, top=args.top))
    if not c.compared:
        # No verdict over zero values.
        raise ValueError("compared nothing: no value of A has its match in B")
    # Across two compiles, values on one side only are expected (other
    # fusions): they fail the run only when asked.
    one_sided = bool(c.only_a or c.only_b)
    return 1 if c.diverged or (args.strict and one_sided) else 0


def _compare_parallel(args, single, parallel) -> int:
    """A single-device dump and one of several ranks: the ranks gathered."""
    from .tools.parallel import compare_parallel, format_parallel

    pc = compare_parallel(single, parallel, rtol=args.rtol, atol=args.atol)
    sys.stdout.write(format_parallel(pc))
    if not pc.gathered:
        raise ValueError("compared nothing: no value of the single-device run is on every rank")
    return 1 if pc.first is not None else 0


def _compare_ranks(args) -> int:
    from .tools.ranks import compare_ranks, format_ranks

    if args.b is not None or args.rtol is not None or args.atol is not None:
        raise ValueError("--ranks compares the ranks of one dump: no B, --rtol or --atol")
    ranks = None
    if args.ranks != "all":
        try:
            ranks = [int(k) for k in args.ranks.split(",")]
        except ValueError:
            raise ValueError(f"--ranks {args.ranks}: give ranks as 0,3 (or none for all)") from None
    rc = compare_ranks(args.a, ranks)
    sys.stdout.write(format_ranks(rc))
    return 1 if rc.first is not None else 0


def _report(args) -> int:
    from .tools.report import write_report

    out = write_report(args.dump, args.output, against=args.against)
    print(f"wrote {out}")
    return 0


def _diverge(args) -> int:
    from .tools.diverge import (
        first_difference_between_runs,
        first_divergence_from_eager,
        format_divergence,
        format_runs_check,
        load_inputs,
    )

    inputs = load_inputs(args.inputs) if args.inputs else None
    if args.bisect:
        from .tools.diverge import bisect_divergence, format_bisection

        if args.dump or args.runs is not None:
            raise ValueError("--bisect compiles the program itself: no --dump or --runs")
        b = bisect_divergence(
            args.program,
            inputs,
            tuple(args.imports),
            progress=not args.quiet,
            repro=args.repro,
            report=args.report,
        )
        sys.stdout.write(format_bisection(b))
        _wrote(args.report)
        return int(b.outcome)
    if args.runs is not None:
        if args.dump or args.repro or args.report:
            raise ValueError(
                "--runs compiles and runs the program itself: no --dump, --repro or --report"
            )
        check = first_difference_between_runs(
            args.program, inputs, args.runs, tuple(args.imports), progress=not args.quiet
        )
        sys.stdout.write(format_runs_check(check))
        return 1 if check.nondeterministic_kernel else 0
    if args.dump and args.repro and not args.package:
        raise ValueError("--repro with --dump needs --package: the .pt2 the dump's run loaded")
    result = first_divergence_from_eager(
        args.program,
        inputs,
        dump=args.dump,
        imports=tuple(args.imports),
        progress=not args.quiet,
        repro=args.repro,
        package=args.package,
        report=args.report,
    )
    sys.stdout.write(format_divergence(result))
    _wrote(args.report)
    return 1 if result.first is not None or result.wrong_input is not None else 0


def _wrote(report) -> None:
    if report is not None:
        print(f"wrote the report {report}")


def _repro(args) -> int:
    from .tools.repro import format_repro, write_repro

    repro = write_repro(
        args.dump,
        args.package,
        args.output,
        kernel=args.kernel,
        launch=args.launch,
        call=args.call,
        imports=tuple(args.imports),
    )
    sys.stdout.write(format_repro(repro))
    return 0


def add_import_option(parser, what: str) -> None:
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help=f"{what}; repeatable",
    )


def _doctor(args) -> int:
    from .tools.doctor import diagnose, format_checks

    checks = diagnose()
    sys.stdout.write(format_checks(checks))
    return 1 if any(c.problem for c in checks) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aoti-debug", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("compare", help="first kernel whose outputs differ between two dumps")
    p.add_argument("a", help="reference: a level-1 dump directory or a JSON-lines records file")
    p.add_argument(
        "b",
        nargs="?",
        help="the dump to check against A (of several ranks where A is of one device: "
        "a tensor-parallel run, its ranks gathered)",
    )
    p.add_argument(
        "--ranks",
        nargs="?",
        const="all",
        metavar="0,3",
        help="compare the ranks of dump A with each other (all, or those listed)",
    )
    p.add_argument("--rtol", type=float, help="relative tolerance (default: per dtype)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default: per dtype)")
    p.add_argument("--top", type=int, default=10, help="rows of the worst-offenders table")
    p.add_argument(
        "--strict",
        action="store_true",
        help="also fail (exit 1) when values are found on one side only",
    )
    p.set_defaults(run=_compare)

    p = sub.add_parser("report", help="a self-contained HTML page of a dump")
    p.add_argument("dump", help="a level-1 dump directory or a JSON-lines records file")
    p.add_argument("-o", "--output", default="aoti-debug-report.html")
    p.add_argument(
        "--against",
        metavar="DUMP",
        help="another run's dump of the same program: say whether the two differ bit for bit",
    )
    p.set_defaults(run=_report)

    p = sub.add_parser("diverge", help="first kernel where a compiled model differs from eager")
    p.add_argument(
        "program",
        help="an exported program (torch.export.save); it is compiled at level 1 and run once",
    )
    add_import_option(
        p, "import MODULE first (it registers custom ops, decompositions or lowerings)"
    )
    p.add_argument(
        "--inputs",
        metavar="FILE",
        help="a torch.save'd tuple of inputs, or an "
        "(args, kwargs) pair, to run instead of the program's example inputs",
    )
    p.add_argument(
        "--dump",
        help="instead of compiling: a level-1 dump of one run of the model "
        "compiled from PROGRAM, on the same inputs",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument(
        "--runs",
        type=int,
        metavar="N",
        help="instead of eager: run the compiled program N times on the same inputs and "
        "name the first kernel whose values differ bit for bit (exit 1 where that kernel "
        "should be deterministic)",
    )
    p.add_argument(
        "--bisect",
        action="store_true",
        help="after the first divergence, find the compiler decision that makes it appear "
        "(a decomposition, a pass, a lowering, a config) and print it on a line that begins "
        "'cause:'; exit 1 with a cause, 0 where nothing diverges, 3 where no compiler "
        "decision is found",
    )
    p.add_argument(
        "--repro",
        metavar="DIR",
        help="write a one-kernel repro of the first "
        "divergence into DIR (see `aoti-debug repro`)",
    )
    p.add_argument(
        "--package",
        metavar="MODEL.pt2",
        help="with --dump and --repro: the package the dump's run loaded",
    )
    p.add_argument(
        "--report",
        metavar="FILE.html",
        help="write the HTML report (`aoti-debug report`) of the dump judged, with this "
        "verdict, its first divergence marked and, with --bisect, its cause",
    )
    p.set_defaults(run=_diverge)

    p = sub.add_parser("repro", help="one kernel alone on its real inputs, from a finding")
    p.add_argument(
        "dump",
        help="a level-1 dump directory holding the finding (a trap, guard or "
        "CUDA error record), or the launch named by --kernel / --launch",
    )
    p.add_argument(
        "--package",
        required=True,
        metavar="MODEL.pt2",
        help="the AOTInductor package the dump's run loaded (its kernels' sources)",
    )
    p.add_argument("--kernel", help="the kernel to reproduce, instead of the dump's first finding")
    p.add_argument("--launch", type=int, help="the launch index to reproduce")
    p.add_argument("--call", type=int, help="with --kernel: which call of it (default 0)")
    add_import_option(p, "a module repro.py imports first (it registers the custom op)")
    p.add_argument(
        "-o",
        "--output",
        default="aoti-debug-repro",
        metavar="DIR",
        help="a new directory to write (default: ./aoti-debug-repro)",
    )
    p.set_defaults(run=_repro)

    p = sub.add_parser(
        "doctor",
        help="the environment as the printer sees it (torch, CUDA, the C++ compiler and "
        "runtime AOTInductor uses, the switches), each mismatch with its fix; exit 1 with one",
    )
    p.set_defaults(run=_doctor)

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        return args.run(args)
    except (FileNotFoundError, ValueError) as e:
        log.error("aoti-debug %s: %s", args.command, e)
        return 2
    except Exception as e:  # noqa: BLE001 - one line, never a traceback
        from .tools.dumps import first_line

        log.error("aoti-debug %s: %s: %s", args.command, type(e).__name__, first_line(e))
        return 2


if __name__ == "__main__":
    sys.exit(main())
