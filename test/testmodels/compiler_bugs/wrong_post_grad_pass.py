"""A custom post-grad pass that rewrites `h * 2.0` as `h * 2.04`."""

import torch


def scale_doublings(graph):
    for node in graph.nodes:
        if node.target is torch.ops.aten.mul.Tensor and node.args[1] == 2.0:
            node.args = (node.args[0], 2.04)


torch._inductor.config.post_grad_custom_post_pass = scale_doublings
