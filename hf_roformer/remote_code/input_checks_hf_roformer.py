"""Checks of model inputs at the entry of the base model and the heads, with errors naming the argument and its shape.

Types, ranks, shapes and dtypes are read from tensor metadata, which costs nothing. Checks of values (ids in range,
masks of 0 and 1, labels in range) read values on the host only for CPU tensors; for tensors on an accelerator they
become an asynchronous device assertion with the same message or are not made, so the forward never waits for the
device. Empty batches and empty sequences are refused with a `ValueError` (there is nothing to encode, and an empty
attention would otherwise fail deep inside a kernel).

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

import torch

from .releases_hf_roformer import assert_on_device


IGNORE_INDEX = -100  # labels transformers' losses skip


def traces_graph() -> bool:
    """Whether this forward is being recorded into a graph rather than run: `torch.compile`, `torch.export` (and the
    dynamo ONNX exporter) or the TorchScript tracer (`torch.onnx.export(..., dynamo=False)`). A recorded forward reads
    no values on the host (the graph would keep the example's answer) and builds no complex numbers (neither
    compilers nor ONNX take them)."""
    return torch.compiler.is_compiling() or torch.jit.is_tracing()


def reads_values_on_host(tensor: torch.Tensor) -> bool:
    """Whether checks may read `tensor`'s values on the host: CPU tensors (free), never accelerator tensors (a read
    waits for the device) nor while a graph is recorded (`traces_graph`)."""
    return tensor.device.type == "cpu" and not traces_graph()


def check_ids_in_range(ids: torch.Tensor, size: int, name: str, size_name: str) -> None:
    """Refuse ids outside `[0, size)` before an embedding lookup turns them into an opaque index error (CPU) or a
    device-side assert (CUDA): a `ValueError` naming the value on the host; an asynchronous device assertion with
    the same message elsewhere."""
    if traces_graph() or ids.numel() == 0:
        return
    message = (
        f"`{name}` contains {{value}}, outside the valid range [0, {size - 1}] given by `{size_name}`={size}; check "
        "that the tokenizer (or segment ids) match the model."
    )
    if not reads_values_on_host(ids):
        assert_on_device(((ids >= 0) & (ids < size)).all(), message.format(value="a value"))
        return
    low, high = (int(value) for value in torch.aminmax(ids))
    if low < 0 or high >= size:
        raise ValueError(message.format(value=low if low < 0 else high))


def _shape(tensor: torch.Tensor) -> tuple[int, ...]:
    return tuple(tensor.shape)


# The dtypes each kind of tensor argument accepts, in the words of the error (tested by `has_dtype_of_kind`).
EMBEDDING_INDEX_DTYPES = (torch.long, torch.int32)  # what `nn.Embedding` looks up
DTYPE_KINDS = {
    "ids": "dtype torch.long or torch.int32 (indices into an embedding table)",
    "integer": "an integer dtype (torch.long)",
    "targets": "dtype torch.long (class indices of a cross-entropy loss)",
    "floating": "a floating dtype",
    "mask": "0/1 values",
}


def has_dtype_of_kind(dtype: torch.dtype, kind: str) -> bool:
    """Whether `dtype` is one `kind` of argument accepts (see `DTYPE_KINDS`)."""
    if kind == "ids":
        return dtype in EMBEDDING_INDEX_DTYPES
    if kind == "targets":  # cross-entropy also takes uint8, but transformers' loss then infers multi-label
        return dtype == torch.long
    if kind == "integer":
        return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool
    if kind == "floating":
        return dtype.is_floating_point
    return not dtype.is_complex  # mask


def check_tensor(
    name: str, value, *, kind: str, dims: tuple[int, ...], shape: tuple[int | None, ...] | None = None
) -> None:
    """Refuse `value` unless it is a tensor of `kind` (a key of `DTYPE_KINDS`: "ids" for embedding lookups, "integer",
    "targets" for class labels, "floating", "mask": bool/integer/floating) with one of the ranks `dims` and, where
    given, the `shape` (None entries are free; 1 also matches a broadcast axis only where the caller allows it by
    passing None)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"`{name}` must be a torch.Tensor, got {type(value).__name__}; tokenizers return tensors with "
            "`return_tensors='pt'`."
        )
    if not has_dtype_of_kind(value.dtype, kind):
        raise TypeError(f"`{name}` must have {DTYPE_KINDS[kind]}, got {value.dtype}.")
    if value.dim() not in dims:
        ranks = " or ".join(str(rank) for rank in dims)
        raise ValueError(f"`{name}` must have {ranks} dimensions, got shape {_shape(value)}.")
    if shape is not None and value.dim() == len(shape):
        if any(expected is not None and size != expected for size, expected in zip(value.shape, shape, strict=True)):
            wanted = tuple("*" if expected is None else expected for expected in shape)
            raise ValueError(f"`{name}` has shape {_shape(value)}, expected {wanted}.")


def check_embeds_dtype(inputs_embeds: torch.Tensor, model_dtype: torch.dtype) -> None:
    """Refuse `inputs_embeds` of a dtype that would lift the embeddings past the model's dtype (float64 into a
    float32 model, float32 into a bfloat16 one): the norm after them would fail with torch's "mixed dtype". Dtypes
    that promote to the model's (bfloat16 into float32) are accepted, and so is anything under autocast on an
    accelerator, which casts the norm's inputs; autocast on CPU does not (measured), so there it is refused too."""
    if torch.promote_types(inputs_embeds.dtype, model_dtype) == model_dtype:
        return
    device = inputs_embeds.device.type
    if device != "cpu" and torch.is_autocast_enabled(device):
        return
    raise TypeError(
        f"`inputs_embeds` has dtype {inputs_embeds.dtype}, but the model's embeddings are {model_dtype}; pass "
        f"`inputs_embeds.to({model_dtype})`."
    )


def check_values(name: str, value: torch.Tensor, allowed: torch.Tensor, description: str) -> None:
    """Refuse `value` where the boolean tensor `allowed` is False (read on the host for CPU tensors only)."""
    if not reads_values_on_host(value) or bool(allowed.all()):
        return
    bad = value[~allowed][0].item()
    raise ValueError(f"`{name}` contains {bad!r}; {description}.")


def check_ids_or_embeds(input_ids, inputs_embeds, ids_rank: int = 2) -> torch.Tensor:
    """Exactly one of `input_ids` (integer, `ids_rank` dimensions) and `inputs_embeds` (floating, one more); returns
    the one given, whose leading dimensions give the batch layout."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("Pass exactly one of `input_ids` and `inputs_embeds`.")
    if input_ids is not None:
        check_tensor("input_ids", input_ids, kind="ids", dims=(ids_rank,))
        return input_ids
    check_tensor("inputs_embeds", inputs_embeds, kind="floating", dims=(ids_rank + 1,))
    return inputs_embeds


def check_model_inputs(
    config,
    *,
    input_ids,
    attention_mask,
    token_type_ids,
    position_ids,
    inputs_embeds,
    encoder_hidden_states,
    encoder_attention_mask,
    past_length: int,
) -> None:
    """Refuse inputs the base model cannot take, naming the argument and its shape, before any work."""
    given = check_ids_or_embeds(input_ids, inputs_embeds)
    if inputs_embeds is not None:
        embeds_shape = (None, None, config.embedding_size)
        check_tensor("inputs_embeds", inputs_embeds, kind="floating", dims=(3,), shape=embeds_shape)
    batch, seq_length = given.shape[:2]
    if batch == 0 or seq_length == 0:
        where = f"`{'input_ids' if input_ids is not None else 'inputs_embeds'}` has shape {_shape(given)}"
        raise ValueError(f"Nothing to encode: {where}; pass at least one row of at least one token.")
    if attention_mask is not None:
        check_tensor("attention_mask", attention_mask, kind="mask", dims=(2, 4))
        if attention_mask.dim() == 2:
            keys = past_length + seq_length
            if _shape(attention_mask) != (batch, keys):
                cached = f" ({past_length} cached + {seq_length} new tokens)" if past_length else ""
                raise ValueError(
                    f"`attention_mask` has shape {_shape(attention_mask)}, expected ({batch}, {keys}){cached}: one "
                    "entry per token, 1 for real tokens and 0 for padding."
                )
            if attention_mask.dtype != torch.bool:
                binary = (attention_mask == 0) | (attention_mask == 1)
                check_values("attention_mask", attention_mask, binary, "use 1 for real tokens and 0 for padding")
        elif attention_mask.shape[0] not in (1, batch) or attention_mask.shape[-2] != seq_length:
            raise ValueError(
                f"A 4D `attention_mask` must have shape ({batch}, heads or 1, {seq_length}, keys), got "
                f"{_shape(attention_mask)}."
            )
    if token_type_ids is not None:
        if token_type_ids.dim() == 1 and batch == 1:  # one row's ids without the batch dimension, as vLLM passes them
            check_tensor("token_type_ids", token_type_ids, kind="ids", dims=(1,), shape=(seq_length,))
        else:
            check_tensor("token_type_ids", token_type_ids, kind="ids", dims=(2,), shape=(batch, seq_length))
    if position_ids is not None:
        check_tensor("position_ids", position_ids, kind="integer", dims=(2,), shape=(None, seq_length))
        if position_ids.shape[0] not in (1, batch):
            raise ValueError(
                f"`position_ids` has shape {_shape(position_ids)}, expected ({batch}, {seq_length}) or "
                f"(1, {seq_length}) (one row of positions for every row of the batch)."
            )
    if encoder_hidden_states is not None:
        if not config.add_cross_attention:
            raise ValueError(
                "`encoder_hidden_states` were passed but the model has no cross-attention layers; build it with "
                "`is_decoder=True, add_cross_attention=True`."
            )
        encoder_shape = (batch, None, config.hidden_size)
        check_tensor("encoder_hidden_states", encoder_hidden_states, kind="floating", dims=(3,), shape=encoder_shape)
        if encoder_attention_mask is not None:
            encoder_shape = tuple(encoder_hidden_states.shape[:2])
            check_tensor("encoder_attention_mask", encoder_attention_mask, kind="mask", dims=(2,), shape=encoder_shape)


def check_labels(
    name: str,
    labels,
    *,
    kind: str,
    shape: tuple[int, ...],
    low: int = 0,
    high: int | None = None,
    ignore_index: bool = False,
) -> None:
    """Refuse `labels` of the wrong type, shape or (class index) range `[low, high)`; -100 allowed with
    `ignore_index`."""
    check_tensor(name, labels, kind=kind, dims=(len(shape),), shape=shape)
    if kind != "targets" or high is None:
        return
    allowed = (labels >= low) & (labels < high)
    if ignore_index:
        allowed |= labels == IGNORE_INDEX
    skipped = f" or {IGNORE_INDEX} (ignored)" if ignore_index else ""
    check_values(name, labels, allowed, f"labels must lie in [{low}, {high - 1}]{skipped}")


__all__ = [
    "check_embeds_dtype",
    "check_ids_in_range",
    "check_ids_or_embeds",
    "check_labels",
    "check_model_inputs",
    "check_tensor",
    "check_values",
    "reads_values_on_host",
    "traces_graph",
]
