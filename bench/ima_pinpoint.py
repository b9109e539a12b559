"""Which kernel does each printer name when one kernel of an AOTI model
writes far out of bounds? Ours at level 3 against PyTorch's built-in
level 3, both without CUDA_LAUNCH_BLOCKING, on the same model
(test/testmodels/gpu.py: FarWrite, a correct kernel before and after a faulty
user-defined Triton kernel).

    python bench/ima_pinpoint.py
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

TEST = Path(__file__).resolve().parents[1] / "test"
sys.path.insert(0, str(TEST))
FAR = 1 << 38


def compile_far_write(ours: bool, path: str) -> str:
    import torch
    from testmodels import gpu

    import aoti_debug_printer

    (aoti_debug_printer.install if ours else aoti_debug_printer.uninstall)()
    model, inputs = gpu.build("far_write")
    with torch._inductor.config.patch({"aot_inductor.debug_intermediate_value_printer": "3"}):
        ep = torch.export.export(model, inputs)
        return torch._inductor.aoti_compile_and_package(ep, package_path=path)


def run(path: str, far: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_LAUNCH_BLOCKING"}
    return subprocess.run(
        [
            sys.executable,
            str(TEST / "testmodels" / "gpu.py"),
            "run",
            path,
            "far_write",
            "--far",
            str(far),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def main() -> None:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    ).parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ctx = multiprocessing.get_context("spawn")
        with futures.ProcessPoolExecutor(2, mp_context=ctx) as pool:
            ours_job = pool.submit(compile_far_write, True, f"{tmp}/ours.pt2")
            stock_job = pool.submit(compile_far_write, False, f"{tmp}/stock.pt2")
            ours, stock = ours_job.result(), stock_job.result()

        clean = run(ours, 0)
        kernels = re.findall(r"before_launch (\S+) ", clean.stdout)
        faulty = next(k for k in kernels if "shifted_copy" in k)
        print(f"kernels in launch order: {kernels}")
        print(f"the faulty kernel:       {faulty}\n")

        mine = run(ours, FAR)
        named = re.findall(r"CUDA ERROR at \w+ (\S+):", mine.stdout)
        print(f"ours, level 3 (exit {mine.returncode}): names {named[0] if named else None}")
        for line in mine.stdout.splitlines():
            if "CUDA ERROR" in line or line.startswith("    "):
                print("   |", line)

        theirs = run(stock, FAR)
        printed = re.findall(r"^\[ (\w+): (\S+) \]$", theirs.stdout, re.M)
        last = printed[-1] if printed else None
        print(
            f"\nbuilt-in, level 3 (exit {theirs.returncode}): last line printed "
            f"{f'[ {last[0]}: {last[1]} ]' if last else None}"
        )
        print(f"   | {len(printed)} kernel-name lines; the error surfaces at:")
        for line in (theirs.stdout + theirs.stderr).splitlines():
            if re.search(r"illegal memory access|CUDA error|Error", line):
                print("   |", line[:200])
                break
        print(
            f"   is the built-in's last printed kernel the faulty one? "
            f"{'yes' if last and last[1] == faulty else 'no'}"
        )


if __name__ == "__main__":
    main()
