"""Sharded training (FSDP2, DeepSpeed ZeRO) through accelerate and the Trainer, on GPUs and on CPU processes (gloo).

The Trainer takes the engines' settings from its own flags (`--fsdp --fsdp_config '{...}'`, `--deepspeed ds.json`) or
from `accelerate launch --config_file` (`ACCELERATE_USE_FSDP`/`FSDP_*` in the environment), and accelerate applies
them when the Trainer prepares the model. What that leaves to the training script, supplied here as hooks:

- `start_deepspeed_communication(training_args)`, before the model is built: ZeRO-3 partitions the weights while
  `from_pretrained` loads them, reading the world size from DeepSpeed's communication layer, which accelerate starts
  on GPUs only (with `--use_cpu` the world size reads 1 and DeepSpeed refuses the batch sizes).
- `prepare_distributed_training(trainer)`, after building the Trainer and before `train()`: accelerate applies FSDP
  to accelerator devices only (with `--use_cpu` it prepares plain data parallelism and drops the FSDP settings
  without a word), so on CPU processes the prepared state is switched to FSDP the way accelerate sets it up on GPUs;
  models whose modules share weights are sharded with those modules in one group (`fsdp_groups`); settings that
  could not write the final model are refused before training.
- `save_full_model(trainer, output_dir)`, on every process where the script saves its model: `Trainer.save_model`
  writing the whole model as an ordinary safetensors checkpoint also when checkpoints are sharded
  (`state_dict_type: SHARDED_STATE_DICT`), where the Trainer alone writes no weights.
- `trained_model(trainer, saved_dir)`: the trained model as a plain module, to train further or save again.
"""

import contextlib
import os

import torch
import transformers
from accelerate.state import PartialState
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin
from torch import nn

from ...remote_code.releases_hf_roformer import (
    active_deepspeed_config,
    keep_used_weight_conversions,
    mirror_distributed_type,
)
from ...utils.errors import UsageError
from .fsdp_groups import shard_with_tied_groups, tied_module_groups


def fsdp_requested(args: transformers.TrainingArguments) -> bool:
    """Whether the run asks for FSDP: the Trainer's `--fsdp` flags or an `accelerate launch` FSDP configuration."""
    from_flags = getattr(args, "fsdp_plugin_args", None) is not None
    return from_flags or os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"


def start_deepspeed_communication(training_args: transformers.TrainingArguments) -> bool:
    """Start DeepSpeed's communication layer on the process group of a CPU run with `--deepspeed` (accelerate starts
    it on GPUs); call it before building the model, which ZeRO-3 partitions while it loads. Returns whether it
    started it."""
    if not getattr(training_args, "deepspeed", None) or not torch.distributed.is_initialized():
        return False
    from deepspeed import comm

    if comm.is_initialized():
        return False
    comm.init_distributed(dist_backend=torch.distributed.get_backend(), auto_mpi_discovery=False)
    return True


def enable_fsdp_on_cpu(trainer: transformers.Trainer) -> bool:
    """Apply the run's FSDP settings to a Trainer whose processes run on CPU, which accelerate prepared as plain data
    parallelism (`MULTI_CPU`); returns whether it switched. The plugin is built as the Trainer builds it (from its
    flags), or as `Accelerator` builds it from the environment of `accelerate launch`."""
    state = trainer.accelerator.state
    if state.distributed_type != DistributedType.MULTI_CPU or not fsdp_requested(trainer.args):
        return False
    flags = getattr(trainer.args, "fsdp_plugin_args", None)
    plugin = FullyShardedDataParallelPlugin(**flags) if flags is not None else FullyShardedDataParallelPlugin()
    if state.mixed_precision != "no":
        plugin.set_mixed_precision(state.mixed_precision)
    if plugin.activation_checkpointing and (
        getattr(trainer.args, "activation_checkpointing", False) or trainer.args.gradient_checkpointing
    ):
        raise UsageError(
            "fsdp activation_checkpointing and --gradient_checkpointing are both set: keep one (FSDP's own is the "
            "one to use with FSDP)."
        )
    switch_to_fsdp(trainer.accelerator, plugin)
    trainer.is_fsdp_enabled = True
    return True


def switch_to_fsdp(accelerator, plugin: FullyShardedDataParallelPlugin) -> None:
    """Make `accelerator` (prepared for plain data parallelism on CPU processes) prepare models with FSDP under
    `plugin`, as it is set up on GPUs."""
    accelerator.state.distributed_type = DistributedType.FSDP
    accelerator.state.fsdp_plugin = plugin
    mirror_distributed_type(PartialState, DistributedType.FSDP)  # accelerate keeps both states in step


def check_deepspeed_saves_whole_model(trainer: transformers.Trainer) -> None:
    """Refuse a ZeRO-3 configuration under which the Trainer cannot write the final model (it would leave only
    DeepSpeed's partitioned checkpoint), before any training time is spent."""
    if not trainer.is_deepspeed_enabled:
        return
    zero = trainer.accelerator.state.deepspeed_plugin.deepspeed_config.get("zero_optimization", {})
    if zero.get("stage") == 3 and not zero.get("stage3_gather_16bit_weights_on_model_save", False):
        raise UsageError(
            "DeepSpeed ZeRO-3 configuration: zero_optimization.stage3_gather_16bit_weights_on_model_save is "
            f"{zero.get('stage3_gather_16bit_weights_on_model_save')!r}; set it to true so that the trained model is "
            "written as a whole safetensors checkpoint."
        )


def prepare_distributed_training(trainer: transformers.Trainer) -> None:
    """Make a Trainer apply the run's FSDP or DeepSpeed settings as given: FSDP on CPU processes too, FSDP2 with modules
    that share weights in one group, and a DeepSpeed configuration that can write the final model. Call it after
    building the Trainer and before `train()`; without FSDP or DeepSpeed it does nothing."""
    enable_fsdp_on_cpu(trainer)
    if trainer.is_fsdp_enabled and trainer.accelerator.is_fsdp2 and tied_module_groups(trainer.model):
        shard_with_tied_groups(trainer.model, trainer.accelerator)
    check_deepspeed_saves_whole_model(trainer)
    if trainer.is_deepspeed_enabled:
        keep_used_weight_conversions(trainer.model)


def save_full_model(trainer: transformers.Trainer, output_dir: str | None = None) -> None:
    """`trainer.save_model(output_dir)`, always writing the whole model as an ordinary safetensors checkpoint: under
    FSDP with sharded checkpoints the weights are gathered for this save. Every process must call it (gathering is
    collective); the main process writes."""
    plugin = getattr(trainer.accelerator.state, "fsdp_plugin", None)
    if not trainer.is_fsdp_enabled or plugin is None or "FULL_STATE_DICT" in str(plugin.state_dict_type):
        trainer.save_model(output_dir)
        return
    sharded = plugin.state_dict_type
    plugin.set_state_dict_type("FULL_STATE_DICT")
    try:
        trainer.save_model(output_dir)
    finally:
        plugin.set_state_dict_type(sharded)


def trained_model(trainer: transformers.Trainer, saved_dir: str) -> nn.Module:
    """The trained model as a plain module: `trainer.model`, or after FSDP or DeepSpeed (whose model holds shards),
    the checkpoint `save_full_model` wrote to `saved_dir`, loaded by every process once the main one has written it."""
    if not (trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled):
        return trainer.model
    trainer.accelerator.wait_for_everyone()
    wrapper = type(trainer.model)  # FSDP2 made it `FSDP<model class>`, defined in a torch module
    model_class = next(cls for cls in wrapper.__mro__ if not cls.__module__.startswith("torch."))
    with zero3_loading_disabled():  # whole weights on every process, as a plain module holds them
        return model_class.from_pretrained(saved_dir)


@contextlib.contextmanager
def zero3_loading_disabled():
    """Within it, `from_pretrained` loads whole weights even while a DeepSpeed ZeRO-3 configuration is active (which
    makes transformers partition them at load)."""
    from transformers.integrations import deepspeed as integration

    active = active_deepspeed_config(integration)
    if active is None:
        yield
        return
    integration.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        integration.set_hf_deepspeed_config(active)
