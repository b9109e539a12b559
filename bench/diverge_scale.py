"""What `diverge` costs on a decoder of about 1B parameters: a Llama-style
config of transformers (random weights), one sequence of 512 tokens.

    python bench/diverge_scale.py [--layers 16] [--hidden 2048] [--seq 512] [--dtype float32]
                                  [--heads N] [--kv-heads N] [--vocab V] [--plant-layer K]
    python bench/diverge_scale.py --llama3-8b [--plant-layer K]

`--llama3-8b` is Llama-3-8B's shape in bfloat16: 32 layers, hidden 4096,
MLP 14336, 32 heads of 128, 8 key-value heads, vocabulary 128256 (7.5B
parameters: the model is transformers' LlamaModel, without the head).

`--plant-layer K` plants one wrong activation: the output of layer K's MLP
goes through test/testmodels/findings.py's `planted` op, the identity in
eager, which Inductor lowers as 1.5 x + 0.25; diverge must name it, in
about the time it takes on the correct model. Prints the wall time of each phase (compile at level 1, the run that saves
what kernels write, the four evaluations and the judging), the peak host
memory (RSS), the peak GPU memory, the dump's size on disk, the coverage and
the verdict.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

import aoti_debug_printer
from aoti_debug_printer import format_divergence


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--intermediate", type=int, default=5632)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--heads", type=int, help="attention heads (default hidden/64)")
    parser.add_argument("--kv-heads", type=int, help="grouped-query heads (default hidden/256)")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--llama3-8b", action="store_true", help="Llama-3-8B's shape, bfloat16")
    parser.add_argument(
        "--plant-layer", type=int, help="plant a wrong activation after layer K's MLP"
    )
    args = parser.parse_args()
    if args.llama3_8b:
        args.layers, args.hidden, args.intermediate = 32, 4096, 14336
        args.heads, args.kv_heads, args.vocab, args.dtype = 32, 8, 128256, "bfloat16"
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
    from testmodels import findings
    from testmodels.real import llama_1b

    began = time.monotonic()
    torch.manual_seed(0)
    # Built on the device: random weights drawn there take seconds, where
    # 8B of them drawn on the host took about 100 s and 30 GB.
    with torch.device(args.device):
        model, inputs = llama_1b(
            args.layers,
            args.hidden,
            args.intermediate,
            args.seq,
            kv_heads=args.kv_heads,
            heads=args.heads,
            vocab=args.vocab,
        )
    planting = contextlib.nullcontext()
    if args.plant_layer is not None:
        mlp = model.model.layers[args.plant_layer].mlp
        mlp.register_forward_hook(lambda module, given, out: findings.planted(out))
        planting = findings.wrong_lowering("affine")
    dtype = getattr(torch, args.dtype)
    model = model.eval().to(args.device, dtype)
    params = sum(p.numel() for p in model.parameters())
    inputs = tuple(t.to(args.device) for t in inputs)
    print(
        f"# torch {torch.__version__}, {args.device}"
        + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else "")
        + f": Llama, {params / 1e9:.2f}B parameters, {args.layers} layers, "
        f"sequence {args.seq}, {args.dtype}"
        + (
            f", planted after layer {args.plant_layer}'s MLP"
            if args.plant_layer is not None
            else ""
        ),
        flush=True,
    )
    print(f"model built: {time.monotonic() - began:.0f}s", flush=True)
    start = time.monotonic()
    program = torch.export.export(model, inputs)
    print(f"export: {time.monotonic() - start:.0f}s", flush=True)
    with tempfile.TemporaryDirectory(prefix="diverge-scale-") as tmp:
        dump = Path(tmp) / "dump"
        start = time.monotonic()
        patch = {"aot_inductor.debug_intermediate_value_printer": "1"}
        with aoti_debug_printer.enabled(), torch._inductor.config.patch(patch), planting:
            package = torch._inductor.aoti_compile_and_package(
                program, package_path=str(Path(tmp) / "model.pt2")
            )
        compiled = time.monotonic()
        print(f"compile at level 1: {compiled - start:.0f}s", flush=True)
        with aoti_debug_printer.options(dump_dir=dump):
            torch._inductor.aoti_load_package(package)(*inputs)
        if args.device == "cuda":
            torch.cuda.synchronize()
        ran = time.monotonic()
        size = sum(p.stat().st_size for p in dump.iterdir())
        print(
            f"run, saving what kernels write: {ran - compiled:.0f}s, dump "
            f"{size / 2**30:.1f} GiB in {sum(1 for _ in dump.iterdir())} files",
            flush=True,
        )
        if args.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        found = aoti_debug_printer.first_divergence_from_eager(program, dump=dump, progress=True)
        judged = time.monotonic()
    text = format_divergence(found).splitlines()
    print("\n".join(text[:12]))
    print("\n".join(line for line in text if line.startswith("  not compared")))
    print(
        f"diverge on the dump: {judged - ran:.0f}s; compile to verdict: {judged - start:.0f}s; "
        f"process, model building included: {judged - began:.0f}s"
    )
    print(
        f"verdict: {'first divergence at ' + found.first.node if found.first else 'no divergence'}"
    )
    print(
        f"peak host memory (RSS): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GiB"
    )
    if args.device == "cuda":
        print(
            f"peak GPU memory during diverge's evaluations: "
            f"{torch.cuda.max_memory_allocated() / 2**30:.1f} GiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
