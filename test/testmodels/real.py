"""Real architectures for the whole-model benchmarks, with random weights:
torchvision's ResNet-18 (batch 8, 224x224), the GPT-2 and BERT architectures
of transformers in small configurations (4 layers, d=512, 8 heads, 4
sequences of 128 tokens), and a Llama of 1.1B parameters (llama_1b: 16
layers, d=2048, one sequence of 512 tokens; bench/diverge_scale.py's too).
Each is built on the GPU and returns one tensor, so that torch.export and
AOTInductor take it as is."""

from __future__ import annotations

import torch

NAMES = ("resnet18", "gpt2", "bert", "llama")


class LastHiddenState(torch.nn.Module):
    """A transformers model's last hidden state, as a plain tensor."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


def llama_1b(
    layers: int = 16,
    hidden: int = 2048,
    intermediate: int = 5632,
    seq: int = 512,
    kv_heads: int | None = None,
    heads: int | None = None,
    vocab: int = 32000,
) -> tuple[torch.nn.Module, tuple[torch.Tensor]]:
    """A Llama-style decoder of transformers (grouped-query SDPA), on the default device,
    without its language-model head: about 1.1B parameters as configured by
    default; Llama-3-8B's shape (7.5B without the head) with layers=32,
    hidden=4096, intermediate=14336, heads=32, kv_heads=8, vocab=128256."""
    import transformers

    config = transformers.LlamaConfig(
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads or hidden // 64,
        num_key_value_heads=kv_heads or hidden // 256,
        vocab_size=vocab,
        max_position_embeddings=seq,
        attn_implementation="sdpa",
        use_cache=False,
    )
    return LastHiddenState(transformers.LlamaModel(config)), (torch.randint(0, vocab, (1, seq)),)


def build(name: str, device: str = "cuda"):
    """(model, inputs); ImportError when torchvision or transformers is missing."""
    torch.manual_seed(0)
    if name == "resnet18":
        import torchvision

        model = torchvision.models.resnet18(weights=None)
        inputs = (torch.randn(8, 3, 224, 224),)
    elif name in ("gpt2", "bert"):
        import transformers

        if name == "gpt2":
            config = transformers.GPT2Config(n_layer=4, n_embd=512, n_head=8, n_positions=128)
            model = LastHiddenState(transformers.GPT2Model(config))
        else:
            config = transformers.BertConfig(
                num_hidden_layers=4,
                hidden_size=512,
                num_attention_heads=8,
                intermediate_size=2048,
                max_position_embeddings=128,
            )
            model = LastHiddenState(transformers.BertModel(config))
        inputs = (torch.randint(0, config.vocab_size, (4, 128)),)
    elif name == "llama":
        model, inputs = llama_1b()
    else:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(NAMES)}")
    return model.eval().to(device), tuple(t.to(device) for t in inputs)
