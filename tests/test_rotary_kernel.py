"""The fused Triton RoPE kernel equals the PyTorch reference of eq. 34, forward and backward. On CUDA it runs on the
GPU; without one it runs through Triton's interpreter (skipped only when Triton is not installed)."""

import math

import pytest
import torch
from conftest import tiny_config

import hf_roformer
from hf_roformer.remote_code import rotary_hf_roformer, rotary_kernels_hf_roformer
from hf_roformer.remote_code.rotary_hf_roformer import rope_inverse_frequencies, rotate_interleaved, rotation_cos_sin


pytestmark = pytest.mark.skipif(not rotary_kernels_hf_roformer.TRITON_AVAILABLE, reason="Triton is not installed")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SHAPES = [(2, 17, 3, 32), (1, 5, 4, 64), (2, 9, 2, 128)]  # batch, seq (odd lengths), heads, head dim


def angles(batch, seq, dim, scaled=False):
    """cos/sin of random per-token positions, optionally with YaRN-scaled frequencies."""
    config = tiny_config(hidden_size=dim * 2, num_attention_heads=2)
    if scaled:
        config = tiny_config(
            hidden_size=dim * 2,
            num_attention_heads=2,
            rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
        )
    positions = torch.randint(0, 5000, (batch, seq))
    cos, sin = rotation_cos_sin(positions, rope_inverse_frequencies(config))
    return cos.to(DEVICE), sin.to(DEVICE)


def projections(batch, seq, heads, dim, dtype, count):
    """`count` tensors laid out as attention sees them: transposed, non-contiguous views of (batch, seq, heads, dim)."""
    return [
        torch.randn(batch, seq, heads, dim, device=DEVICE, dtype=dtype).transpose(1, 2).requires_grad_()
        for _ in range(count)
    ]


# The kernel's two entries: eager calls, and the operator compiled and exported graphs hold, run as it is.
ENTRIES = {
    "eager": rotary_kernels_hf_roformer.rotate_with_kernel,
    "operator": lambda tensors, cos, sin: torch.ops.hf_roformer.rotate_interleaved(tensors, cos, sin, 1.0),
}


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scaled", [False, True])
@pytest.mark.parametrize("with_value", [False, True])
def test_fp32_forward_and_gradients_equal_reference(entry, shape, scaled, with_value):
    """Queries and keys (the kernel's third slot unused) or values too, through either entry."""
    batch, seq, heads, dim = shape
    cos, sin = angles(batch, seq, dim, scaled)
    tensors = projections(batch, seq, heads, dim, torch.float32, 3 if with_value else 2)
    assert not tensors[0].is_contiguous()
    outputs = ENTRIES[entry](tensors, cos, sin)
    weights = [torch.randn_like(output) for output in outputs]
    sum((output * weight).sum() for output, weight in zip(outputs, weights, strict=True)).backward()
    kernel_grads = [tensor.grad.clone() for tensor in tensors]
    for tensor in tensors:
        tensor.grad = None
    references = [rotate_interleaved(tensor, cos, sin) for tensor in tensors]
    sum((ref * weight).sum() for ref, weight in zip(references, weights, strict=True)).backward()
    for output, reference, kernel_grad, tensor in zip(outputs, references, kernel_grads, tensors, strict=True):
        assert output.stride() == tensor.stride()  # the layout is kept
        torch.testing.assert_close(output, reference, atol=1e-6, rtol=0)
        torch.testing.assert_close(kernel_grad, tensor.grad, atol=1e-6, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_within_rounding_of_float32(dtype):
    batch, seq, heads, dim = SHAPES[0]
    cos, sin = angles(batch, seq, dim)
    tensors = projections(batch, seq, heads, dim, dtype, 2)
    outputs = rotary_kernels_hf_roformer.rotate_with_kernel(tensors, cos, sin)
    for output, tensor in zip(outputs, tensors, strict=True):
        assert output.dtype == dtype
        exact = rotate_interleaved(tensor.detach().float(), cos, sin)
        torch.testing.assert_close(output.float(), exact, atol=2e-2, rtol=2e-2)
    outputs[0].float().sum().backward()
    assert tensors[0].grad.dtype == dtype and torch.isfinite(tensors[0].grad).all()


@pytest.mark.parametrize("with_value", [False, True])
def test_in_place_inference_overwrites_the_inputs_with_the_reference(with_value):
    """Inference rotates the fresh projections where they lie (strided views included); with autograd recording, the
    same call leaves its inputs alone and returns new tensors."""
    batch, seq, heads, dim = SHAPES[0]
    cos, sin = angles(batch, seq, dim)
    tensors = [tensor.detach() for tensor in projections(batch, seq, heads, dim, torch.float32, 3 if with_value else 2)]
    references = [rotate_interleaved(tensor, cos, sin) for tensor in tensors]
    with torch.no_grad():
        outputs = rotary_kernels_hf_roformer.rotate_with_kernel(tensors, cos, sin, in_place=True)
    for output, tensor, reference in zip(outputs, tensors, references, strict=True):
        assert output.data_ptr() == tensor.data_ptr() and output.stride() == tensor.stride()
        torch.testing.assert_close(tensor, reference, atol=1e-6, rtol=0)
    recorded = projections(batch, seq, heads, dim, torch.float32, 2)
    before = [tensor.detach().clone() for tensor in recorded]
    outputs = rotary_kernels_hf_roformer.rotate_with_kernel(recorded, cos, sin, in_place=True)
    for output, tensor, kept in zip(outputs, recorded, before, strict=True):
        assert output.data_ptr() != tensor.data_ptr()
        torch.testing.assert_close(tensor.detach(), kept, atol=0, rtol=0)
        torch.testing.assert_close(output.detach(), rotate_interleaved(kept, cos, sin), atol=1e-6, rtol=0)


@pytest.mark.parametrize("rank", [0, 1])
def test_a_tensor_parallel_ranks_heads_rotate_as_those_heads_of_the_whole(rank):
    """Under tensor parallelism each rank projects, and the kernel rotates, only its share of the heads: the kernel
    reads the head count from the tensors, so a rank's heads come out as the same heads of the whole model's."""
    batch, seq, heads, dim = 2, 9, 4, 32
    cos, sin = angles(batch, seq, dim)
    whole = [torch.randn(batch, seq, heads * dim, device=DEVICE) for _ in range(3)]
    local = slice(rank * heads // 2 * dim, (rank + 1) * heads // 2 * dim)  # a colwise shard of the projection
    split = [tensor.view(batch, seq, -1, dim).transpose(1, 2) for tensor in whole]
    split_local = [tensor[..., local].view(batch, seq, -1, dim).transpose(1, 2) for tensor in whole]
    with torch.no_grad():
        expected = rotary_kernels_hf_roformer.rotate_with_kernel(split, cos, sin)
        outputs = rotary_kernels_hf_roformer.rotate_with_kernel(split_local, cos, sin)
    heads_of_rank = slice(rank * heads // 2, (rank + 1) * heads // 2)
    for output, reference in zip(outputs, expected, strict=True):
        assert output.shape == (batch, heads // 2, seq, dim)
        torch.testing.assert_close(output, reference[:, heads_of_rank], atol=0, rtol=0)


def test_model_with_the_kernel_equals_the_reference_path(monkeypatch, batch):
    """The model dispatches rotations to the kernel (forced here for CPU tensors) with identical outputs and grads."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config(rotary_value=True)).to(DEVICE)
    inputs = {key: value.to(DEVICE) for key, value in batch.items()}
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    reference = model(**inputs, labels=labels)
    reference.loss.backward()
    reference_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    decisions, launches = [], []
    kernel = rotary_hf_roformer.rotate_with_kernel

    def always(tensor):
        decisions.append(tensor.shape)
        return True

    monkeypatch.setattr(rotary_hf_roformer, "kernel_applies", always)
    monkeypatch.setattr(rotary_hf_roformer, "rotate_with_kernel", lambda *a, **k: launches.append(1) or kernel(*a, **k))
    output = model(**inputs, labels=labels)
    output.loss.backward()
    assert len(decisions) == 1  # decided once per forward, by the plan's rotation
    assert len(launches) == model.config.num_hidden_layers  # one launch per layer for q, k and v
    torch.testing.assert_close(output.logits, reference.logits, atol=1e-5, rtol=0)
    for name, grad in reference_grads.items():
        torch.testing.assert_close(dict(model.named_parameters())[name].grad, grad, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_kernel_is_used_automatically_on_cuda_and_compiles():
    model = hf_roformer.HfRoFormerModel(tiny_config()).cuda().eval()
    assert rotary_hf_roformer.kernel_applies(torch.zeros(1, device="cuda"))
    compiled = torch.compile(model, fullgraph=True)
    input_ids = torch.randint(1, 99, (2, 33), device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(compiled(input_ids).last_hidden_state, model(input_ids).last_hidden_state)
    assert math.isfinite(float(model(input_ids).last_hidden_state.sum()))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("rotary_value", [False, True])
def test_compiled_training_with_the_kernel_gives_the_eager_gradients_on_cuda(rotary_value):
    """Inductor launches the kernel itself (the operator is a `triton_op`): a compiled masked-LM step gives the eager
    loss and gradients, rotating queries and keys (one kernel slot unused) or values too."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config(rotary_value=rotary_value)).cuda().train()
    input_ids = torch.randint(1, 99, (2, 33), device="cuda")

    def loss_and_gradients(forward):
        model.zero_grad(set_to_none=True)
        loss = forward(input_ids=input_ids, labels=input_ids).loss
        loss.backward()
        return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    eager_loss, eager = loss_and_gradients(model)
    compiled_loss, compiled = loss_and_gradients(torch.compile(model, fullgraph=True))
    torch.testing.assert_close(compiled_loss, eager_loss, atol=1e-5, rtol=1e-5)
    assert compiled.keys() == eager.keys()
    for name, grad in eager.items():
        torch.testing.assert_close(compiled[name], grad, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_compiled_forward_with_dynamic_lengths_on_cuda():
    """With `dynamic=True` the kernel's grid is computed from symbolic lengths: one graph serves lengths it was not
    recorded with, and each equals the eager forward."""
    model = hf_roformer.HfRoFormerModel(tiny_config()).cuda().eval()
    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    for length in (17, 40, 65):
        input_ids = torch.randint(1, 99, (3, length), device="cuda")
        with torch.no_grad():
            torch.testing.assert_close(
                compiled(input_ids).last_hidden_state, model(input_ids).last_hidden_state, atol=1e-5, rtol=1e-5
            )
