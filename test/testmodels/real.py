"""Three real architectures for the whole-model benchmarks, with random
weights and small configurations: torchvision's ResNet-18 (batch 8,
224x224), and the GPT-2 and BERT architectures of transformers (4 layers,
d=512, 8 heads, 4 sequences of 128 tokens). Each is built on the GPU and
returns one tensor, so that torch.export and AOTInductor take it as is."""

from __future__ import annotations

import torch

NAMES = ("resnet18", "gpt2", "bert")


class LastHiddenState(torch.nn.Module):
    """A transformers model's last hidden state, as a plain tensor."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


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
    else:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(NAMES)}")
    return model.eval().to(device), tuple(t.to(device) for t in inputs)
