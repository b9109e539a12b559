"""Correct models of several architectures, each able to carry one planted
bug at a position. A planted bug is a custom op that eager computes right
and that is wrong in the compiled model only:

- "affine": `planted(x)`, the identity in eager, whose Inductor lowering
  computes 1.5x + 0.25 (a gross error);
- "tanh_gelu": `planted_gelu(x)`, the exact GELU in eager, lowered as the
  tanh approximation (errors up to 4.7e-4, about 1e-4 of the value);
- "gelu_constant": `planted_gelu_constant(x)`, the exact GELU too, lowered
  as the exact formula with 1/sqrt(2) written 0.707 (errors near 4e-5 of
  the value);
- "bf16_reduction": `planted_center(x)` = x - mean(x) over the last
  dimension, lowered with the mean reduced in bfloat16: from the input
  rounded to bfloat16, to a bfloat16 result (about 1e-3 of the value);
- "half_kernel": `planted_softsign(x)` = x / (1 + |x|), whose CPU kernel
  is right and whose CUDA kernel computes in half precision (about 5e-4):
  the compiled model calls the same kernel eager does, so only a reference
  that does not trust the op's CUDA kernel finds it.

No test was tuned to these models; a finding tool must stay silent on them
and name the planted op's kernel when one is planted."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import shutil
from pathlib import Path

import torch
import torch.nn.functional as F

import aoti_debug_printer

from .real import LastHiddenState
from .shared import compile_key, shared


def _planted_op(name: str, eager, **options):
    """A custom op adp_findings::NAME that computes `eager` in eager mode
    (a function of one tensor, annotated, as torch.library needs), its
    output shaped like its input."""
    op = torch.library.custom_op(f"adp_findings::{name}", eager, mutates_args=(), **options)
    op.register_fake(lambda x: torch.empty_like(x))
    return op


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


def _exact_gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x)


def _center(x: torch.Tensor) -> torch.Tensor:
    return x - x.mean(dim=-1, keepdim=True)


def _softsign(x: torch.Tensor) -> torch.Tensor:
    return x / (1 + x.abs())


planted = _planted_op("planted", _identity)
planted_gelu = _planted_op("planted_gelu", _exact_gelu)
planted_gelu_constant = _planted_op("planted_gelu_constant", _exact_gelu)
planted_center = _planted_op("planted_center", _center)
planted_softsign = _planted_op("planted_softsign", _softsign, device_types="cpu")


@planted_softsign.register_kernel("cuda")
def _(x):
    h = x.half()
    return (h / (1 + h.abs())).to(x.dtype)


PLANTED_OPS = {
    "affine": torch.ops.adp_findings.planted.default,
    "tanh_gelu": torch.ops.adp_findings.planted_gelu.default,
    "gelu_constant": torch.ops.adp_findings.planted_gelu_constant.default,
    "bf16_reduction": torch.ops.adp_findings.planted_center.default,
    "half_kernel": torch.ops.adp_findings.planted_softsign.default,
}


def compiled_at_level_1(program, package: Path, config: dict | None = None) -> Path:
    """`program` compiled at level 1 with `config` (Inductor options), as a
    package at `package`: made once per test run for each program, config,
    numerics setting and planted lowering (testmodels.shared), whether a
    test or diverge's own compile asks (conftest)."""
    patch = {
        "aot_inductor.debug_intermediate_value_printer": "1",
        "aot_inductor.filtered_kernel_names": None,
        **(config or {}),
    }
    with aoti_debug_printer.enabled(), torch._inductor.config.patch(patch):
        key = compile_key(program, _planted_lowering)

        def make(directory: Path) -> None:
            torch._inductor.aoti_compile_and_package(
                program, package_path=str(directory / "model.pt2")
            )

        compiled = shared(f"level1-{key}", make) / "model.pt2"
    return Path(shutil.copyfile(compiled, package))


def compile_and_dump(program, inputs, dump: Path, config: dict | None = None) -> Path:
    """Compiles at level 1 with `config` (compiled_at_level_1), runs once
    into the dump directory `dump`; the package is `dump` with suffix .pt2."""
    package = compiled_at_level_1(program, dump.with_suffix(".pt2"), config)
    with aoti_debug_printer.options(dump_dir=dump):
        torch._inductor.aoti_load_package(str(package))(*inputs)
    return dump


def _wrong_lowering(kind: str):
    from torch._inductor import lowering

    L, aten, prims = lowering.lowerings, torch.ops.aten, torch.ops.prims
    if kind == "affine":
        return lambda x: L[aten.add.Tensor](L[aten.mul.Tensor](x, 1.5), 0.25)
    if kind == "tanh_gelu":

        def tanh_gelu(x):  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            cube = L[aten.mul.Tensor](L[aten.mul.Tensor](x, x), x)
            inner = L[aten.mul.Tensor](
                L[aten.add.Tensor](x, L[aten.mul.Tensor](cube, 0.044715)), 0.7978845608028654
            )
            return L[aten.mul.Tensor](
                L[aten.mul.Tensor](x, 0.5), L[aten.add.Tensor](L[aten.tanh.default](inner), 1.0)
            )

        return tanh_gelu
    if kind == "gelu_constant":
        return lambda x: L[aten.mul.Tensor](
            L[aten.mul.Tensor](x, 0.5),
            L[aten.add.Tensor](L[aten.erf.default](L[aten.mul.Tensor](x, 0.707)), 1.0),
        )

    if kind == "bf16_reduction":

        def center(x):
            # The mean as a bfloat16 matrix product with a column of 1/n: its
            # input and result stored in bfloat16 (an extern kernel's buffers,
            # which no fusion keeps in float), where eager rounds only once.
            n = int(x.get_size()[-1])
            low = L[prims.convert_element_type.default](x, torch.bfloat16)
            rows = L[aten.reshape.default](low, [-1, n])
            column = L[aten.full.default](
                [n, 1], 1.0 / n, dtype=torch.bfloat16, device=x.get_device()
            )
            mean = L[aten.reshape.default](
                L[aten.mm.default](rows, column), [*x.get_size()[:-1], 1]
            )
            return L[aten.sub.Tensor](x, L[prims.convert_element_type.default](mean, x.get_dtype()))

        return center
    raise KeyError(kind)


# The kinds whose wrong lowerings are active (wrong_lowering), which a
# compile key must hold: Inductor's config does not say it.
_planted_lowering: tuple[str, ...] = ()


@contextlib.contextmanager
def wrong_lowering(*kinds: str):
    """Inductor lowers the planted op of each kind wrong while this is active
    (default "affine"; "half_kernel" needs nothing: its CUDA kernel is the
    bug). Each kind has an op of its own, so a program may hold them all."""
    from torch._inductor import lowering

    global _planted_lowering
    kinds = kinds or ("affine",)
    lowered = [kind for kind in kinds if kind != "half_kernel"]
    for kind in lowered:
        lowering.register_lowering(PLANTED_OPS[kind])(_wrong_lowering(kind))
    _planted_lowering = tuple(sorted(kinds))
    try:
        # Inductor's caches key on the graph, not on the lowerings: a graph
        # compiled before with the right lowering would come back right.
        with torch._inductor.config.patch(force_disable_caches=True):
            yield
    finally:
        _planted_lowering = ()
        for kind in lowered:
            lowering.lowerings.pop(PLANTED_OPS[kind], None)


class UnfusedAddmm(torch._inductor.custom_graph_pass.CustomGraphPass):
    """Inductor's post-grad unfuse_bias_add_to_pointwise, on any device: an
    addmm whose users are all pointwise becomes mm, then add of the bias
    (fused into the next kernel). Inductor does it on the GPU only; as a
    custom post-grad pass, a CPU compile has the GPU's kernels there."""

    def __call__(self, graph) -> None:
        from torch._inductor.fx_passes.post_grad import is_pointwise_use

        aten = torch.ops.aten
        for n in list(graph.nodes):
            if n.target is not aten.addmm.default or n.kwargs or len(n.args) != 3:
                continue
            if not all(is_pointwise_use(u) for u in n.users):
                continue
            bias, a, b = n.args
            with graph.inserting_before(n):
                mm = graph.call_function(aten.mm.default, (a, b))
                add = graph.call_function(aten.add.Tensor, (mm, bias))
            for new in (mm, add):
                # The same provenance as the addmm: both are parts of its linear.
                new.meta.update(n.meta)
            n.replace_all_uses_with(add)
            graph.erase_node(n)

    def uuid(self) -> str:
        return "aoti-debug-printer-tests-unfused-addmm-1"


class _Plantable(torch.nn.Module):
    def __init__(self, plant_at: int | None) -> None:
        super().__init__()
        self.plant_at = plant_at
        self.plant_kind = "affine"

    def maybe_plant(self, position: int, x):
        return PLANTED_OPS[self.plant_kind](x) if position == self.plant_at else x


class PostLNResidualMLP(_Plantable):
    """x = LayerNorm(x + MLP(x)), four times."""

    def __init__(self, plant_at=None, d=32, n=4) -> None:
        super().__init__(plant_at)
        self.fc1 = torch.nn.ModuleList(torch.nn.Linear(d, 2 * d) for _ in range(n))
        self.fc2 = torch.nn.ModuleList(torch.nn.Linear(2 * d, d) for _ in range(n))
        self.ln = torch.nn.ModuleList(torch.nn.LayerNorm(d) for _ in range(n))

    def forward(self, x):
        for i, (fc1, fc2, ln) in enumerate(zip(self.fc1, self.fc2, self.ln)):
            h = self.maybe_plant(i, F.gelu(fc1(x)))
            x = ln(x + fc2(h))
        return x


class PreLNTransformer(_Plantable):
    """Two pre-LN blocks: attention through scaled_dot_product_attention,
    then an MLP; heads split and merged by views and transposes."""

    def __init__(self, plant_at=None, d=32, heads=4, n=2) -> None:
        super().__init__(plant_at)
        self.heads = heads
        self.ln1 = torch.nn.ModuleList(torch.nn.LayerNorm(d) for _ in range(n))
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(d, 3 * d) for _ in range(n))
        self.proj = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(n))
        self.ln2 = torch.nn.ModuleList(torch.nn.LayerNorm(d) for _ in range(n))
        self.mlp = torch.nn.ModuleList(
            torch.nn.Sequential(
                torch.nn.Linear(d, 2 * d), torch.nn.GELU(), torch.nn.Linear(2 * d, d)
            )
            for _ in range(n)
        )

    def forward(self, x):
        b, t, d = x.shape
        for i in range(len(self.qkv)):
            q, k, v = self.qkv[i](self.ln1[i](x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            a = self.maybe_plant(2 * i, a.transpose(1, 2).reshape(b, t, d))
            x = x + self.proj[i](a)
            x = x + self.maybe_plant(2 * i + 1, self.mlp[i](self.ln2[i](x)))
        return x


class ConvBNResidual(_Plantable):
    """conv-BN-ReLU residual blocks in eval mode, running statistics that are
    not the identity, then pooling and a linear head."""

    def __init__(self, plant_at=None, c=8, n=2) -> None:
        super().__init__(plant_at)
        self.stem = torch.nn.Conv2d(3, c, 3, padding=1)
        self.conv = torch.nn.ModuleList(torch.nn.Conv2d(c, c, 3, padding=1) for _ in range(2 * n))
        self.bn = torch.nn.ModuleList(torch.nn.BatchNorm2d(c) for _ in range(2 * n))
        for bn in self.bn:
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.2, 0.2)
        self.head = torch.nn.Linear(c, 5)

    def forward(self, x):
        x = self.stem(x)
        for i in range(0, len(self.conv), 2):
            h = F.relu(self.bn[i](self.conv[i](x)))
            h = self.maybe_plant(i // 2, h)
            x = F.relu(x + self.bn[i + 1](self.conv[i + 1](h)))
        return self.head(x.mean(dim=(2, 3)))


class InPlaceAndViews(_Plantable):
    """In-place ops (add_, relu_, mul_), and reshapes and transposes between
    kernels."""

    def __init__(self, plant_at=None, d=24) -> None:
        super().__init__(plant_at)
        self.a = torch.nn.Linear(d, d)
        self.b = torch.nn.Linear(d, d)

    def forward(self, x):
        h = self.a(x)
        h.add_(1.0).relu_()
        h = self.maybe_plant(0, h)
        h = h.reshape(h.shape[0], 4, -1).transpose(1, 2).contiguous()
        h = h.reshape(h.shape[0], -1)
        h.mul_(torch.sigmoid(h))
        return self.b(h) + x.transpose(0, 1).transpose(0, 1)


class ReuseChain(torch.nn.Module):
    """A long chain of same-shaped temporaries: the memory planner reuses
    buffers throughout."""

    def __init__(self, d=16, n=8) -> None:
        super().__init__()
        self.w = torch.nn.ParameterList(
            torch.nn.Parameter(torch.randn(d, d) / d**0.5) for _ in range(n)
        )

    def forward(self, x):
        for w in self.w:
            x = torch.tanh(x @ w) + 0.5 * x
            x = x * torch.sigmoid(x.sum(dim=-1, keepdim=True))
        return x


class ScatterAccumulate(_Plantable):
    """Rows accumulated into a buffer by index (index_add: float atomics on
    CUDA, an accumulating loop on CPU), then normalised and projected."""

    def __init__(self, plant_at=None, d=16, rows=8) -> None:
        super().__init__(plant_at)
        self.rows = rows
        self.a = torch.nn.Linear(d, d)
        self.ln = torch.nn.LayerNorm(d)
        self.b = torch.nn.Linear(d, d)

    def forward(self, x, index):
        h = self.maybe_plant(0, torch.tanh(self.a(x)))
        pooled = torch.zeros(self.rows, x.shape[-1], device=x.device).index_add(0, index, h)
        return self.b(self.maybe_plant(1, self.ln(pooled)))


class BufferUpdate(_Plantable):
    """A module buffer changed in place by every call (a running statistic:
    mul_ then add_), which the output reads back."""

    def __init__(self, plant_at=None, d=16) -> None:
        super().__init__(plant_at)
        self.a = torch.nn.Linear(d, d)
        self.register_buffer("running", torch.linspace(0.5, 1.5, d))

    def forward(self, x):
        h = torch.tanh(self.a(x))
        self.running.mul_(0.9).add_(0.1 * self.maybe_plant(0, h.mean(dim=0)))
        return x * self.running + self.maybe_plant(1, h)


class StaticKVDecode(_Plantable):
    """One decode step with a static KV cache: the new token's keys and
    values go into cache buffers with index_copy_, and attention reads the
    whole cache. Position 0 plants into the keys before the cache update."""

    def __init__(self, plant_at=None, d=32, heads=4, length=16) -> None:
        super().__init__(plant_at)
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        shape = (1, heads, length, d // heads)
        self.register_buffer("k_cache", torch.randn(shape))
        self.register_buffer("v_cache", torch.randn(shape))

    def forward(self, x, position):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        self.k_cache.index_copy_(2, position, self.maybe_plant(0, k))
        self.v_cache.index_copy_(2, position, v)
        a = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache)
        return self.proj(self.maybe_plant(1, a.transpose(1, 2).reshape(b, t, d)))


class AtomicPool(torch.nn.Module):
    """Many rows added into a few by index: enough contention that the
    float atomics of index_add land in another order run after run, on two
    CPU threads as on a GPU."""

    def forward(self, x, index):
        pooled = torch.zeros(4, x.shape[-1], device=x.device).index_add(0, index, x)
        return torch.tanh(pooled * 0.01)


def atomic_pool(device: str = "cpu", rows: int = 200_000):
    """(AtomicPool, inputs)."""
    torch.manual_seed(0)
    inputs = (torch.randn(rows, 64), torch.randint(0, 4, (rows,)))
    return AtomicPool(), tuple(t.to(device) for t in inputs)


class _Activation(torch.nn.Module):
    """Where a transformers layer's activation was: the planted GELU."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.op = PLANTED_OPS[kind]

    def forward(self, x):
        return self.op(x)


def transformers_model(
    name: str, plant_at: int | None = None, kind: str = "tanh_gelu", plain_output: bool = True
):
    """(model, inputs): a 4-layer GPT-2 or BERT from transformers, random
    weights; with `plant_at`, that layer's activation is the planted GELU."""
    import transformers

    if name == "gpt2":
        config = transformers.GPT2Config(
            n_layer=4,
            n_embd=64,
            n_head=4,
            n_positions=64,
            vocab_size=512,
            attn_implementation="eager",
        )
        model = transformers.GPT2Model(config)
        layers = [block.mlp for block in model.h]
    elif name == "llama":
        # The 1.1B decoder's architecture (bench/diverge_scale.py) in small:
        # RMSNorm, rotary embeddings, grouped-query SDPA, a SiLU-gated MLP.
        config = transformers.LlamaConfig(
            hidden_size=64,
            intermediate_size=176,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=512,
            max_position_embeddings=64,
            attn_implementation="sdpa",
            use_cache=False,
        )
        model = transformers.LlamaModel(config)
        layers = [layer.mlp for layer in model.layers]
    else:
        config = transformers.BertConfig(
            num_hidden_layers=4,
            hidden_size=64,
            num_attention_heads=4,
            intermediate_size=128,
            vocab_size=512,
            max_position_embeddings=64,
            attn_implementation="eager",
        )
        model = transformers.BertModel(config, add_pooling_layer=False)
        layers = [layer.intermediate for layer in model.encoder.layer]
    if plant_at is not None:
        target = layers[plant_at]
        if hasattr(target, "act_fn"):
            target.act_fn = _Activation(kind)
        elif hasattr(target, "act"):
            target.act = _Activation(kind)
        else:
            target.intermediate_act_fn = _Activation(kind)
    inputs = (torch.randint(0, 512, (2, 16)),)
    return (LastHiddenState(model) if plain_output else model), inputs


def build(name: str, plant_at: int | None = None, device: str = "cpu", kind: str = "affine"):
    """(model, example inputs, dynamic_shapes) with fixed weights."""
    torch.manual_seed(0)
    dynamic = None
    dtype = None
    if name.endswith(("_bf16", "_fp16")):
        name, dtype = name[:-5], torch.bfloat16 if name.endswith("_bf16") else torch.float16
    if name in ("gpt2", "bert", "llama"):
        model, inputs = transformers_model(name, plant_at, kind)
    elif name == "post_ln_mlp":
        model, inputs = PostLNResidualMLP(plant_at), (torch.randn(6, 32),)
    elif name == "pre_ln_transformer":
        model, inputs = PreLNTransformer(plant_at), (torch.randn(2, 8, 32),)
    elif name == "conv_bn":
        model, inputs = ConvBNResidual(plant_at), (torch.randn(2, 3, 8, 8),)
    elif name == "dynamic_batch":
        model, inputs = PostLNResidualMLP(plant_at, n=2), (torch.randn(5, 32),)
        dynamic = {"x": {0: torch.export.Dim("batch", min=2, max=64)}}
    elif name == "inplace_views":
        model, inputs = InPlaceAndViews(plant_at), (torch.randn(5, 24),)
    elif name == "resnet18":
        import torchvision

        model, inputs = torchvision.models.resnet18(num_classes=10), (torch.randn(2, 3, 32, 32),)
    elif name == "reuse_chain":
        model, inputs = ReuseChain(), (torch.randn(7, 16),)
    elif name == "scatter_accumulate":
        model = ScatterAccumulate(plant_at)
        inputs = (torch.randn(12, 16), torch.randint(0, 8, (12,)))
    elif name == "buffer_update":
        model, inputs = BufferUpdate(plant_at), (torch.randn(6, 16),)
    elif name == "kv_decode":
        model, inputs = StaticKVDecode(plant_at), (torch.randn(1, 1, 32), torch.tensor([5]))
    else:
        raise KeyError(name)
    if isinstance(model, _Plantable):
        model.plant_kind = kind
    model = model.eval().to(device)
    inputs = tuple(t.to(device) for t in inputs)
    if dtype is not None:
        model = model.to(dtype)
        inputs = tuple(t.to(dtype) if t.is_floating_point() else t for t in inputs)
    return model, inputs, dynamic


class Parts(torch.nn.Module):
    """Independent models as the parts of one program: each part takes its
    own inputs and gives its own output, and no value flows between parts.
    An AOTInductor compile costs about 9 s of g++ on its wrapper whatever
    the model (docs/testing.md), so the suite compiles the correct models,
    and the planted bugs of one kind, as one program each; every part is
    then judged on its own values (`PartsOfProgram`)."""

    def __init__(self, parts: dict[str, tuple[torch.nn.Module, int]]) -> None:
        super().__init__()
        self.parts = torch.nn.ModuleDict({key: model for key, (model, _) in parts.items()})
        self.arity = [n for _, n in parts.values()]

    def forward(self, *inputs):
        outputs, start = [], 0
        for part, n in zip(self.parts.values(), self.arity):
            outputs.append(part(*inputs[start : start + n]))
            start += n
        return tuple(outputs)


def build_parts(cases: dict[str, dict], device: str = "cpu"):
    """(Parts, inputs, dynamic_shapes) of `cases`: part key -> build()'s
    arguments. Each part is what build() makes of its case, same weights."""
    models, inputs, dynamic = {}, [], []
    for key, arguments in cases.items():
        model, part_inputs, part_dynamic = build(**arguments, device=device)
        models[key] = (model, len(part_inputs))
        inputs += part_inputs
        names = list(inspect.signature(model.forward).parameters)[: len(part_inputs)]
        dynamic += [(part_dynamic or {}).get(name) for name in names]
    shapes = (tuple(dynamic),) if any(dynamic) else None
    return Parts(models).eval().to(device), tuple(inputs), shapes


class PartsOfProgram:
    """Which part of a Parts program each value of a dump belongs to: a node
    by the module it was traced in (`parts.KEY`), a value no node names by
    its launch where that launch is of one part (any node its records name,
    or weight it reads, says which; Inductor may fuse ops of two parts into
    one kernel)."""

    def __init__(self, program, dump) -> None:
        self.of_node: dict[str, str] = {}
        for n in program.graph.nodes:
            for path, _ in (n.meta.get("nn_module_stack") or {}).values():
                head, _, rest = path.partition(".")
                if head == "parts" and rest:
                    self.of_node[n.name] = rest.split(".")[0]
                    break
        # The wrapper names a weight or buffer by its name with "_" for ".".
        of_constant = {
            name.replace(".", "_"): name.split(".")[1]
            for name in {**program.state_dict, **program.constants}
            if name.startswith("parts.")
        }
        self.of_launch: dict[tuple, set[str]] = {}
        for r in aoti_debug_printer.load_dump(dump).records:
            part = self.of_node.get((r.node or "").split("/")[0], of_constant.get(r.arg))
            if part is not None:
                self.of_launch.setdefault((r.rank, r.run, r.launch), set()).add(part)

    def of(self, record, node: str | None = None, by_launch: bool = True) -> str | None:
        """The part `record` (judged as `node`, where given) belongs to, or
        None where that is not known for sure. `by_launch`: the record is of
        the dump this was made with."""
        for name in (node, record.node):
            if name and name.split("/")[0] in self.of_node:
                return self.of_node[name.split("/")[0]]
        if not by_launch:
            return None
        parts = self.of_launch.get((record.rank, record.run, record.launch), set())
        return next(iter(parts)) if len(parts) == 1 else None

    def divergence(self, found, key: str):
        """`found` (of the whole program) restricted to part `key`'s values."""
        return aoti_debug_printer.Divergence(
            [m for m in found.matches if self.of(m.record, m.node) == key],
            [u for u in found.unmatched if self.of(u.record) == key],
            found.environment,
        )

    def unattributed(self, found) -> list:
        """The records of the values of `found` no part can be told for."""
        return [m.record for m in found.matches if self.of(m.record, m.node) is None] + [
            u.record for u in found.unmatched if self.of(u.record) is None
        ]

    def comparison(self, c, key: str):
        """A Comparison (matched by node) restricted to part `key`'s values."""
        return dataclasses.replace(
            c,
            compared=[d for d in c.compared if self.of(d.a, by_launch=False) == key],
            only_a=[r for r in c.only_a if self.of(r, by_launch=False) == key],
            only_b=[r for r in c.only_b if self.of(r, by_launch=False) == key],
        )


def numerics(setting: str):
    """A numerics setting users have on, for a compile and its run:
    "matmul_high" (float32_matmul_precision "high": TF32 matmuls on CUDA)
    or "cudnn_tf32" (cuDNN's TF32 convolutions, on by default). The flags
    are set, and restored, as diverge sets a recorded run's."""
    from aoti_debug_printer import Environment

    settings = {
        "matmul_high": Environment(matmul_precision="high"),
        "cudnn_tf32": Environment(tf32_cudnn=True),
    }
    return settings[setting].applied()


CORRECT = (
    "post_ln_mlp",
    "pre_ln_transformer",
    "conv_bn",
    "dynamic_batch",
    "inplace_views",
    "reuse_chain",
    "post_ln_mlp_bf16",
    "pre_ln_transformer_fp16",
    "gpt2",
    "bert",
    "llama",
    # Values changed in place: accumulated by index, a buffer's mul_/add_,
    # a KV cache's index_copy_.
    "scatter_accumulate",
    "buffer_update",
    "kv_decode",
    # torchvision's, where it imports (beside torch 2.14.1: scripts/python_env.sh).
    "resnet18",
)
# (model, position, kind): each planted bug at several places in several models.
PLANTED = (
    ("post_ln_mlp", 0, "affine"),
    ("post_ln_mlp", 3, "affine"),
    ("pre_ln_transformer", 1, "affine"),
    ("conv_bn", 1, "affine"),
    ("inplace_views", 0, "affine"),
    ("post_ln_mlp", 1, "tanh_gelu"),
    ("pre_ln_transformer", 3, "tanh_gelu"),
    ("conv_bn", 0, "tanh_gelu"),
    ("post_ln_mlp", 2, "gelu_constant"),
    ("gpt2", 2, "gelu_constant"),
    ("llama", 1, "tanh_gelu"),
    ("post_ln_mlp", 0, "bf16_reduction"),
    ("pre_ln_transformer", 2, "bf16_reduction"),
    # In the accumulating kernel, the buffer update and the cache update.
    ("scatter_accumulate", 0, "affine"),
    ("buffer_update", 0, "affine"),
    ("kv_decode", 0, "tanh_gelu"),
)
# Bugs only a CUDA run has: the op's CUDA kernel.
PLANTED_CUDA = (("post_ln_mlp", 1, "half_kernel"), ("pre_ln_transformer", 0, "half_kernel"))
