"""FSDP2 groups for models whose modules share parameters (tied weights).

torch >= 2.13 requires a parameter held by several modules to sit in one FSDP group ("Parameter ... is shared with a
parameter already managed by another FSDP group"). accelerate's FSDP2 preparation groups the input embedding with the
output projection, but RoFormer's masked and causal LM heads (like BERT's) also tie the projection's bias to
`cls.predictions.bias`, a parameter of the head module, which accelerate leaves to the root group. torch's grouping
drops a module whose ancestor is in the same group, so the projection cannot be both grouped with the head and a group
of its own, which accelerate then tries. `shard_with_tied_groups` therefore shards such a model itself, the way
accelerate does (its auto-wrap policy, activation checkpointing and `fully_shard` arguments) except for the tied
groups; accelerate leaves a model that is already sharded as it is. Models without shared parameters are left to
accelerate.
"""

import torch
from torch import nn


def tied_module_groups(model: nn.Module) -> list[list[nn.Module]]:
    """The modules holding parameters that other modules hold too, in groups that must be sharded together: two
    modules holding one parameter are in one group, transitively (a masked LM's word embeddings, its output
    projection, and the head that owns the projection's bias). Each group is in `named_modules` order (the input
    embedding first); a model without shared parameters has none."""
    modules = list(dict.fromkeys(module for _, module in model.named_modules(remove_duplicate=False)))
    holders: dict[int, list[int]] = {}
    for index, module in enumerate(modules):
        for parameter in module.parameters(recurse=False):
            holders.setdefault(id(parameter), []).append(index)
    parent = list(range(len(modules)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    shared = [indices for indices in holders.values() if len(indices) > 1]
    for indices in shared:
        for other in indices[1:]:
            parent[root(other)] = root(indices[0])
    groups: dict[int, list[int]] = {}
    for index in sorted({index for indices in shared for index in indices}):
        groups.setdefault(root(index), []).append(index)
    return [[modules[index] for index in members] for members in groups.values()]


def fully_shard_arguments(accelerator) -> dict:
    """The `fully_shard` keyword arguments accelerate gives every group: mesh, mixed precision, CPU offload."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    plugin = accelerator.state.fsdp_plugin
    mesh = getattr(accelerator, "torch_device_mesh", None)
    return {
        "offload_policy": plugin.cpu_offload,
        "mp_policy": plugin.mixed_precision_policy or MixedPrecisionPolicy(),
        "mesh": mesh[tuple(accelerator.parallelism_config.fsdp_dim_names)] if mesh is not None else None,
    }


def shard_with_tied_groups(model: nn.Module, accelerator) -> nn.Module:
    """Apply FSDP2 to `model` in place, as accelerate's preparation does (activation checkpointing first, float32
    parameters under mixed precision, one group per module the auto-wrap policy names, the root last), with each group
    of `tied_module_groups` as one FSDP group, sharded first and kept unsharded between forward and backward (as
    accelerate keeps its embedding/output group). The plugin's activation checkpointing is then marked done, so that
    accelerate does not apply it twice."""
    from accelerate.utils.fsdp_utils import fsdp2_apply_ac, fsdp2_prepare_auto_wrap_policy
    from accelerate.utils.other import get_module_children_bottom_up
    from torch.distributed.fsdp import FSDPModule, fully_shard

    plugin = accelerator.state.fsdp_plugin
    if plugin.cpu_ram_efficient_loading:
        raise ValueError(
            f"fsdp cpu_ram_efficient_loading=true is not supported for {type(model).__name__}, whose modules share "
            "weights (tied embeddings): set it to false."
        )
    plugin.set_auto_wrap_policy(model)
    if plugin.activation_checkpointing:
        model = fsdp2_apply_ac(accelerator, model)
        plugin.activation_checkpointing = False
    if accelerator.mixed_precision != "no":  # one dtype per group: float32 master weights, as accelerate keeps them
        for parameter in model.parameters():
            if parameter.requires_grad and parameter.dtype != torch.float32:
                parameter.data = parameter.data.to(torch.float32)
    arguments = fully_shard_arguments(accelerator)
    for group in tied_module_groups(model):
        fully_shard(group, reshard_after_forward=False, **arguments)
    policy = fsdp2_prepare_auto_wrap_policy(plugin, model)
    for module in get_module_children_bottom_up(model)[:-1]:
        if policy is not None and policy(module) and not isinstance(module, FSDPModule):
            fully_shard(module, reshard_after_forward=plugin.reshard_after_forward, **arguments)
    fully_shard(model, **arguments)  # the root; torch keeps it unsharded after forward
    return model
