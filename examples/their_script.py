"""An ordinary AOTInductor script: nothing in it knows about the printer.

    AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=2 python examples/their_script.py

prints a record for every tensor argument before and after every kernel.
"""

import argparse
import tempfile
from pathlib import Path

import torch


class SmallModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc2(torch.relu(self.fc1(x))), dim=-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--package", type=Path, help="where to write the .pt2 (default: a temp dir)"
    )
    args = parser.parse_args()

    torch.manual_seed(0)
    model = SmallModel().eval()
    x = torch.randn(2, 8)
    exported = torch.export.export(model, (x,))
    with tempfile.TemporaryDirectory() as tmp:
        path = str(args.package or Path(tmp) / "model.pt2")
        torch._inductor.aoti_compile_and_package(exported, package_path=path)
        compiled = torch._inductor.aoti_load_package(path)
        out = compiled(x)
    print("max |compiled - eager| =", (out - model(x)).abs().max().item())


if __name__ == "__main__":
    main()
