"""The models the tests and the benchmarks compile, in one package.

- `small`: the small models of the printer's own tests, with fixed inputs;
- `findings`: correct models of several architectures and planted bugs,
  for compare and diverge (silent on the one, naming the other);
- `gpu`: the CUDA models of the GPU tests and benchmarks;
- `real`: ResNet-18, GPT-2 and BERT architectures for whole-model benchmarks.

pytest puts test/ on the path (pyproject.toml, `pythonpath`); the bench
scripts do it themselves (bench/README: run them from the checkout).
"""
