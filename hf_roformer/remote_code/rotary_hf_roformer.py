"""Rotary position embedding (RoPE) in RoFormer's interleaved layout (paper eq. 34): the frequencies of every rope
type, the cos/sin of each forward, and the rotation of queries, keys (and values).

RoFormer rotates consecutive feature pairs (x0, x1), (x2, x3), ... of each head by the angle `m * theta_i` of the
token's position `m`. This differs from the "rotate-half" layout of Llama-style models, so transformers'
`apply_rotary_pos_emb` cannot be reused. The layout changes how frequencies are applied, not which: the scaled types
are those of transformers' rope utilities (`ROPE_INIT_FUNCTIONS`: linear, yarn, llama3, longrope, ...), reused as
they are (what the rope parameters accept: `config_rules_hf_roformer`). Written here are only what transformers lacks
or gets in a way that breaks long inputs: `default` and static `ntk` (base * s^(d/(d-2))) in float64, so angles stay
exact at long positions, and `dynamic` NTK vectorized over lengths.

Rope types whose frequencies depend on the input length (dynamic NTK, LongRoPE) give each decoder query the frequencies
of the prefix it sees, so decoding with a key/value cache computes exactly what a forward over the whole sequence does;
such decoders cache keys unrotated and rotate them per query (`PerQueryRotation.rotate_for_queries`).

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

from typing import NamedTuple

import torch
from torch import nn
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from .config_rules_hf_roformer import is_length_dependent, ntk_base, original_length
from .releases_hf_roformer import traces_graph
from .rotary_kernels_hf_roformer import KERNEL_ENABLED, TRITON_AVAILABLE, rotate_with_kernel


def angle_dtype(device: torch.device) -> torch.dtype:
    """Dtype in which frequencies and rotation angles are computed: float64 where the device has it.

    Angles grow with the position; in float32 `m * theta` has an absolute error of ~1e-2 rad at m = 1e5, so cos/sin of
    long positions would be wrong whatever dtype the model runs in. MPS has no float64 and falls back to float32.
    """
    return torch.float32 if device.type == "mps" else torch.float64


def default_inverse_frequencies(
    head_dim: int, rope_theta: float = 10000.0, device: torch.device | None = None
) -> torch.Tensor:
    """The paper's frequencies theta_i = rope_theta^(-2i/d), i = 0 .. d/2 - 1 (eq. 15), in float64."""
    device = torch.device("cpu") if device is None else torch.device(device)
    exponents = torch.arange(0, head_dim, 2, dtype=angle_dtype(device), device=device) / head_dim
    return rope_theta**-exponents


def rope_inverse_frequencies(
    config, lengths: torch.Tensor | None = None, device: torch.device | None = None
) -> torch.Tensor:
    """Inverse frequencies for `config.rope_parameters`, in float64 (float32 on MPS).

    Static types return shape `(head_dim // 2,)`. Length-dependent types (`dynamic`, `longrope`) return
    `(*lengths.shape, head_dim // 2)`: the frequencies for an input of each given length (`lengths=None` means the
    original length, i.e. unscaled).
    """
    device = torch.device("cpu") if device is None else torch.device(device)
    parameters = config.rope_parameters
    rope_type = parameters.get("rope_type", "default")
    head_dim = config.head_dim
    base = parameters["rope_theta"]
    if rope_type == "default":
        return default_inverse_frequencies(head_dim, base, device)
    if rope_type == "ntk":
        return default_inverse_frequencies(head_dim, ntk_base(base, parameters["factor"], head_dim), device)
    if rope_type == "dynamic":
        return _dynamic_inverse_frequencies(config, lengths, device)
    if rope_type == "longrope":
        return _longrope_inverse_frequencies(config, lengths, device)
    inv_freq, _ = ROPE_INIT_FUNCTIONS[rope_type](config, device)
    return inv_freq.to(angle_dtype(device))


def _dynamic_inverse_frequencies(config, lengths: torch.Tensor | None, device: torch.device) -> torch.Tensor:
    """Dynamic NTK: for an input of length L' > L the base becomes base * ((s * L' / L) - (s - 1))^(d / (d - 2));
    up to L the original frequencies are used.

    Hand-written rather than transformers' function because that one takes one scalar length and always uses
    `max_position_embeddings` as L; here every length of a batch (or every query of a decoder) gets its own set.
    """
    parameters = config.rope_parameters
    head_dim, base, factor = config.head_dim, parameters["rope_theta"], parameters["factor"]
    trained = original_length(config)
    dtype = angle_dtype(device)
    if lengths is None:
        lengths = torch.tensor(trained, device=device)
    lengths = lengths.to(device=device, dtype=dtype).clamp(min=trained)
    bases = base * ((factor * lengths / trained) - (factor - 1)) ** (head_dim / (head_dim - 2))
    exponents = torch.arange(0, head_dim, 2, dtype=dtype, device=device) / head_dim
    return bases[..., None] ** -exponents


def _longrope_inverse_frequencies(config, lengths: torch.Tensor | None, device: torch.device) -> torch.Tensor:
    """LongRoPE from transformers: the short factors up to the original length, the long factors beyond it."""
    compute = ROPE_INIT_FUNCTIONS["longrope"]
    trained = original_length(config)
    short, _ = compute(config, device, seq_len=None)
    if lengths is None:
        return short.to(angle_dtype(device))
    long, _ = compute(config, device, seq_len=trained + 1)
    dtype = angle_dtype(device)
    use_long = (lengths.to(device) > trained)[..., None]
    return torch.where(use_long, long.to(dtype), short.to(dtype))


class PerQueryRotation(NamedTuple):
    """Rotation state of a decoder whose frequencies depend on the length each query sees.

    Keys and values stay unrotated (also in the cache); each query rotates them with its own frequencies.
    """

    cos: torch.Tensor  # (batch, seq, d/2): the queries' own rotations
    sin: torch.Tensor
    inv_freq: torch.Tensor  # (batch, seq, d/2): each query's frequencies
    key_positions: torch.Tensor  # (batch, keys): positions of cached + current keys
    key_cos: torch.Tensor | None  # (batch, keys, d/2) when every query shares one frequency set, else None
    key_sin: torch.Tensor | None
    allowed: torch.Tensor  # (batch, seq, keys) bool: causal and padding mask

    keys_cached_rotated = False  # keys (and values) enter the cache unrotated

    def rotates_in_halves(self, rotate_value: bool, keys_cached: bool) -> bool:
        """Never: each query rotates the keys itself, in the paper's layout (`TokenRotation.rotates_in_halves`)."""
        return False

    @property
    def shared_by_queries(self) -> bool:
        """Whether every query has the same frequencies, so keys can be rotated once for all of them."""
        return self.key_cos is not None

    def rotate_with_query_frequencies(self, query, key, value, rotate_value: bool = False) -> tuple[torch.Tensor, ...]:
        """Rotate `(batch, heads, seq, d)` queries and the cached + current keys (and values with `rotate_value`) where
        the queries share one frequency set; otherwise return them as they are, for the per-query attention, which
        rotates the keys with each query's own frequencies (`rotate_for_queries`)."""
        if not self.shared_by_queries:
            return query, key, value
        query = rotate_interleaved(query, self.cos, self.sin)
        key = rotate_interleaved(key, self.key_cos, self.key_sin)
        if rotate_value:
            value = rotate_interleaved(value, self.key_cos, self.key_sin)
        return query, key, value

    def rotate_for_queries(
        self, queries: slice, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The queries `queries` of `(batch, heads, seq, d)` rotated with their own frequencies, and for each of them
        the unrotated keys (and values, unless None) `(batch, heads, keys, d)` rotated with the same frequencies:
        `(batch, heads, chunk, d)` and `(batch, heads, chunk, keys, d)`, so `score(t, j) = (R(F_t, p_t) q_t) .
        (R(F_t, p_j) k_j)`."""
        rotated_query = rotate_interleaved(query[:, :, queries], self.cos[:, queries], self.sin[:, queries])
        key_cos, key_sin = rotation_cos_sin(self.key_positions[:, None, :], self.inv_freq[:, queries, None, :])
        rotation = torch.complex(key_cos, key_sin)[:, None]
        rotated_value = None if value is None else _rotate_complex(value[:, :, None], rotation)
        return rotated_query, _rotate_complex(key[:, :, None], rotation), rotated_value


class HfRoFormerRotaryEmbedding(nn.Module):
    """Computes cos/sin of the RoPE angles of given token positions, once per forward, shared by all layers.

    The module holds no parameters and no buffers: frequencies are a pure function of the config, computed on the
    positions' device in float64 (d/2 numbers). This keeps them out of the state dict, of `model.to(torch.bfloat16)`
    casts and of meta-device initialization, and makes any length work. Eager forwards keep a static type's
    frequencies for the next forward (a plain attribute, keyed by the device and the rope parameters, so a changed
    config or device computes them anew); recorded graphs compute them as operators of the graph.
    """

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.kept_frequencies: tuple[tuple, torch.Tensor] | None = None  # (what they were computed for, frequencies)

    @property
    def depends_on_length(self) -> bool:
        """Whether the frequencies depend on the input length (dynamic NTK, LongRoPE)."""
        return is_length_dependent(self.config)

    @torch.no_grad()
    def forward(
        self, position_ids: torch.LongTensor, lengths: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Float32 `(cos, sin)`, each `(batch, seq_len, head_dim // 2)`, for `position_ids` `(batch, seq_len)`.

        `lengths` (broadcastable to `position_ids`) are the input lengths the frequencies of length-dependent rope types
        are computed for; static types ignore them.
        """
        if lengths is not None and self.depends_on_length:
            inv_freq = rope_inverse_frequencies(self.config, lengths, position_ids.device)
        else:
            inv_freq = self.static_frequencies(position_ids.device)
        return rotation_cos_sin(position_ids, inv_freq)

    def static_frequencies(self, device: torch.device) -> torch.Tensor:
        """The frequencies that depend on no input length, on `device`. Eager forwards reuse those of the last forward
        on the same device with the same rope parameters (four operators fewer per forward); a recorded graph computes
        them with its own operators."""
        if traces_graph():
            return rope_inverse_frequencies(self.config, None, device)
        key = (device, self.config.head_dim, tuple(self.config.rope_parameters.items()))
        kept = self.kept_frequencies  # read once: another thread may replace it
        if kept is not None and kept[0] == key:
            return kept[1]
        inv_freq = rope_inverse_frequencies(self.config, None, device)
        self.kept_frequencies = (key, inv_freq)
        return inv_freq

    def for_rows(
        self, position_ids: torch.LongTensor, attention_mask: torch.Tensor | None, past_length: int = 0
    ) -> "TokenRotation | PerQueryRotation":
        """The rotations of a batch of rows: per token, or per query for length-dependent rope types in decoders (so
        cached decoding equals a full forward). Encoders give length-dependent types each row's number of real tokens
        (from the 2D padding mask)."""
        padding_mask = attention_mask if attention_mask is not None and attention_mask.dim() == 2 else None
        if not self.depends_on_length:
            return TokenRotation(*self(position_ids))
        if self.config.is_decoder:
            return self.per_query(position_ids, past_length, padding_mask)
        if padding_mask is None:
            lengths = torch.full((1, 1), position_ids.shape[-1], device=position_ids.device)
        else:
            lengths = padding_mask[:, -position_ids.shape[-1] :].sum(dim=-1, keepdim=True)
        return TokenRotation(*self(position_ids, lengths=lengths))

    def for_packed_row(
        self, position_ids: torch.LongTensor, sequence_ids: torch.Tensor
    ) -> "TokenRotation | PerQueryRotation":
        """The rotations of one row of packed sequences (`sequence_ids` `(1, tokens)`): the given positions;
        length-dependent types see each sequence's own length (decoders: the prefix each query sees, keys restricted to
        its own sequence)."""
        positions = position_ids.expand(1, sequence_ids.shape[1])
        if not self.depends_on_length:
            return TokenRotation(*self(positions))
        if self.config.is_decoder:
            same_sequence = sequence_ids[0, :, None] == sequence_ids[0, None, :]
            return self.per_query(positions, 0, None, allowed_keys=same_sequence[None])
        ones = torch.ones_like(sequence_ids[0])
        counts = torch.zeros_like(sequence_ids[0]).index_add_(0, sequence_ids[0], ones)
        return TokenRotation(*self(positions, lengths=counts[sequence_ids]))

    @torch.no_grad()
    def per_query(
        self,
        position_ids: torch.LongTensor,
        past_length: int,
        attention_mask: torch.Tensor | None,
        allowed_keys: torch.Tensor | None = None,
    ) -> PerQueryRotation:
        """Rotation state for a decoder with a length-dependent rope type: each query uses the frequencies of the
        prefix it sees (its position + 1), and keys (cached and new) are rotated per query.

        `attention_mask` is the 2D padding mask over cached + current tokens; `allowed_keys` `(batch, seq, keys)`
        restricts the keys further (packed rows: each query's own sequence). Cached keys are assumed to sit at
        consecutive positions ending where the current ones start, as in `generate`.
        """
        if torch.jit.is_tracing():  # torch.export refuses the value read below by itself
            raise NotImplementedError(
                f"A decoder with rope_type {self.config.rope_parameters['rope_type']!r} rotates keys per query and "
                "picks how from its frequencies' values, which a traced graph would fix to the example's: it cannot "
                "be exported; export the encoder or a model with a static rope type."
            )
        batch, seq_len = position_ids.shape[0], position_ids.shape[1]
        if attention_mask is not None:
            batch = max(batch, attention_mask.shape[0])
        position_ids = position_ids.expand(batch, -1)
        device = position_ids.device
        num_keys = past_length + seq_len
        key_positions = key_positions_with_cache(position_ids, past_length, attention_mask)

        inv_freq = rope_inverse_frequencies(self.config, position_ids + 1, device)
        cos, sin = rotation_cos_sin(position_ids, inv_freq)

        query_index = torch.arange(past_length, num_keys, device=device)
        allowed = torch.arange(num_keys, device=device)[None, :] <= query_index[:, None]
        allowed = allowed[None].expand(batch, -1, -1)
        if attention_mask is not None:
            allowed = allowed & attention_mask[:, None, :num_keys].bool()
        if allowed_keys is not None:
            allowed = allowed & allowed_keys

        key_cos = key_sin = None
        if bool((inv_freq == inv_freq[:1, :1]).all()):
            key_cos, key_sin = rotation_cos_sin(key_positions, inv_freq[:1, :1])
        return PerQueryRotation(cos, sin, inv_freq, key_positions, key_cos, key_sin, allowed)


def key_positions_with_cache(
    position_ids: torch.LongTensor, past_length: int, attention_mask: torch.Tensor | None
) -> torch.LongTensor:
    """Positions of all keys (cached + current) for a decoder that caches unrotated keys.

    The cache does not store positions: cached keys are taken to be consecutive, ending right before the current
    tokens (what `generate` produces, also with left padding). A current chunk that breaks this raises.
    """
    if past_length == 0:
        return position_ids
    seq_len = position_ids.shape[1]
    offsets = position_ids[:, -1:] - (past_length + seq_len - 1)
    key_positions = torch.arange(past_length + seq_len, device=position_ids.device)[None, :] + offsets
    current = key_positions[:, past_length:]
    consistent = current == position_ids
    if attention_mask is not None:
        consistent = consistent | ~attention_mask[:, past_length : past_length + seq_len].bool()
    if not bool(consistent.all()):
        raise ValueError(
            "`position_ids` must continue the cached positions consecutively when a length-dependent rope type "
            "(dynamic, longrope) decodes with a cache."
        )
    return key_positions


def rotation_cos_sin(position_ids: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Float32 cos/sin of the angles `position * inv_freq`, multiplied in float64 (float32 on MPS).

    `inv_freq` is `(d/2,)`, or carries leading dimensions broadcastable to `position_ids`. Under `torch.compile` they
    are computed by an operator the compiler calls as it is (`_COMPILED_COS_SIN`): left to it, it inlines the float64
    cos/sin into every layer's rotation kernel and evaluates them once per head and layer instead of once per forward
    (at base size in bf16 on CPU that made the compiled model 24% slower than the eager one; see docs/speed.md).
    """
    if torch.compiler.is_compiling() and not torch.compiler.is_exporting():
        return _COMPILED_COS_SIN(position_ids, inv_freq)
    return _cos_sin(position_ids, inv_freq)


def _cos_sin(position_ids: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    angles = position_ids[..., None].to(inv_freq.dtype) * inv_freq
    return angles.cos().float(), angles.sin().float()


def _compiled_cos_sin_operator():
    """`torch.ops.hf_roformer.rotation_cos_sin`, registered once per process (the package and a checkpoint's copy of
    this file share it). Exported graphs (torch.export, ONNX) keep the plain operations instead: their consumers know
    no operator of ours."""
    namespace = torch.ops.hf_roformer
    if hasattr(namespace, "rotation_cos_sin"):
        return namespace.rotation_cos_sin

    @torch.library.custom_op("hf_roformer::rotation_cos_sin", mutates_args=())
    def compiled_cos_sin(position_ids: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _cos_sin(position_ids, inv_freq)

    @compiled_cos_sin.register_fake
    def _(position_ids: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        shape = torch.broadcast_shapes((*position_ids.shape, 1), inv_freq.shape)
        return position_ids.new_empty(shape, dtype=torch.float32), position_ids.new_empty(shape, dtype=torch.float32)

    return namespace.rotation_cos_sin


_COMPILED_COS_SIN = _compiled_cos_sin_operator()


def rotate_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each feature pair (x[2i], x[2i+1]) of `x` `(batch, heads, seq, d)` by the angle whose cos/sin are given.

    `cos`/`sin` have shape `(batch, seq, d // 2)`. Math runs in float32 and the result has the dtype of `x`. This is
    the reference implementation of paper eq. 34 and the CPU path.
    """
    if traces_graph():
        return _rotate_pairs(x, cos.unsqueeze(1), sin.unsqueeze(1))
    return _rotate_complex(x, torch.complex(cos, sin).unsqueeze(1))


def _rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Eq. 34 in real arithmetic, for recorded graphs: compilers fuse it into one kernel (they generate no code for
    complex math) and ONNX has no complex type (`aten::complex` does not export). The pairs keep their axis (slices
    and a concatenation, no unbind or stack): ExecuTorch's XNNPACK backend runs an unsqueeze or squeeze as a reshape,
    which cannot size two dynamic axes (batch and length) at run time."""
    pairs = x.float().unflatten(-1, (-1, 2))
    even, odd = pairs[..., :1], pairs[..., 1:]
    cos, sin = cos.unflatten(-1, (-1, 1)), sin.unflatten(-1, (-1, 1))
    rotated = torch.cat((even * cos - odd * sin, odd * cos + even * sin), dim=-1)
    return rotated.flatten(-2).to(x.dtype)


def in_halves(tensor: torch.Tensor, head_dim: int, dim: int) -> torch.Tensor:
    """`tensor` with the features of each head along `dim` (heads of `head_dim` one after another) reordered: its
    even features first, then its odd ones. Applied to a projection's weight rows and bias (`dim=0`) it gives the
    projection of reordered features."""
    dim = dim % tensor.dim()
    return tensor.unflatten(dim, (-1, head_dim // 2, 2)).transpose(dim + 1, dim + 2).flatten(dim, dim + 2)


def _rotate_split_halves(heads: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Eq. 34 on heads `(batch, heads, seq, d)` whose features come reordered, the even ones x[0], x[2], ... first,
    then the odd ones, by `cos`/`sin` `(batch or 1, 1, seq, d)` repeated over both halves: the rotate-half form of
    Llama-style models, value for value what `_rotate_pairs` computes (-(b * s) is b * -1 * s exactly), in the
    reordered layout. The product by -1 (not a negation) is the form OpenVINO fuses into one RoPE operation."""
    x = heads if heads.dtype == torch.float32 else heads.float()
    half = x.shape[-1] // 2
    rotated = x * cos + torch.cat((x[..., half:] * -1.0, x[..., :half]), dim=-1) * sin
    return rotated if heads.dtype == torch.float32 else rotated.to(heads.dtype)


def _rotate_complex(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """Eq. 34 as a complex product (x[2i] + 1j * x[2i+1]) * e^(1j * m * theta_i) (the paper's eq. 33 form).

    In eager mode this is one fused kernel, an order of magnitude faster than the real-valued form's separate ops; the
    views around it cost no copies (the pairs are the contiguous last axis) and float32 inputs skip the casts.
    """
    pairs = x if x.dtype == torch.float32 else x.float()
    pairs = torch.view_as_complex(pairs.view(*x.shape[:-1], -1, 2))
    rotated = torch.view_as_real(pairs * rotation).flatten(-2)  # the rotation may broadcast x to a larger shape
    return rotated if x.dtype == torch.float32 else rotated.to(x.dtype)


def kernel_applies(query: torch.Tensor) -> bool:
    """Whether the fused kernel (`rotary_kernels_hf_roformer`) serves this call: Triton present, enabled, and CUDA
    tensors, except in graphs for ONNX or the TorchScript tracer, which cannot hold a Triton kernel (`torch.compile`
    and `torch.export` keep it as an op)."""
    if not (TRITON_AVAILABLE and KERNEL_ENABLED and query.is_cuda):
        return False
    return not (torch.jit.is_tracing() or torch.onnx.is_in_onnx_export())


class TokenRotation:
    """The rotation of every token of one forward, prepared once and applied by every layer (paper eq. 34).

    It holds float32 cos/sin `(batch or 1, seq, d/2)` and, for the path this forward takes, their form ready to use:
    the fused kernel reads cos/sin as they are (CUDA with Triton); eager PyTorch multiplies by the complex rotation
    e^(i m theta), `(batch or 1, seq, 1, d/2)` for projections `(batch, seq, heads, d/2)` and its `(batch or 1, 1, seq,
    d/2)` view for heads; recorded graphs (compiled, exported, ONNX) use real cos/sin with a head axis (`traces_graph`).
    Layers thus pay one fused operation per tensor and no per-layer setup. It unpacks as `cos, sin`, the
    `position_embeddings` of transformers' rotary models.
    """

    keys_cached_rotated = True  # keys enter the cache rotated, as the paper's attention reads them

    def __init__(self, cos: torch.Tensor, sin: torch.Tensor):
        self.cos, self.sin = cos, sin
        self.uses_kernel = kernel_applies(cos)
        self.traced = traces_graph()
        # TorchScript traces (OpenVINO's `convert_model`, the TorchScript ONNX exporter) run in other runtimes.
        self.traced_by_torchscript = torch.jit.is_tracing() and not self.uses_kernel
        self.halves_cos = self.halves_sin = None
        if self.traced_by_torchscript:  # `_rotate_split_halves`' form, made once per forward
            self.halves_cos, self.halves_sin = (torch.cat((t, t), dim=-1).unsqueeze(1) for t in (cos, sin))
        self.complex = self.complex_tokens = None
        if not self.uses_kernel and not self.traced:
            self.complex_tokens = torch.complex(cos, sin).unsqueeze(2)
            self.complex = self.complex_tokens.transpose(1, 2)

    def __iter__(self):
        return iter((self.cos, self.sin))

    def rotates_in_halves(self, rotate_value: bool, keys_cached: bool) -> bool:
        """Whether attention takes queries and keys with each head's features reordered, even ones first (then odd
        ones; `in_halves`), and rotates them in that layout (`_rotate_split_halves`): in a TorchScript trace whose
        keys live only in the attention call (no cache keeps them) and whose values are not rotated. Attention reads
        queries and keys only through products q . k, which one reordering of both leaves unchanged (up to the order
        of a sum's terms). OpenVINO, the trace's main consumer, runs the rotation of that layout as one fused
        operation, where the pairs' split and stack took reference kernels (docs/speed.md gives the throughput)."""
        return self.traced_by_torchscript and not rotate_value and not keys_cached

    def rotate_heads(
        self,
        head_dim: int,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        rotate_value: bool = False,
        projected_in_halves: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`(batch, seq, heads * head_dim)` projections as heads `(batch, heads, seq, head_dim)`, queries and keys (and
        values with `rotate_value`) rotated; fresh projections nobody else reads, so inference rotates them in place.
        `projected_in_halves`: the query and key projections come with each head's features in halves
        (`rotates_in_halves`) and are rotated in that layout."""
        if projected_in_halves:
            heads = [states.unflatten(-1, (-1, head_dim)).transpose(1, 2) for states in (query, key, value)]
            rotated = [_rotate_split_halves(states, self.halves_cos, self.halves_sin) for states in heads[:2]]
            return rotated[0], rotated[1], heads[2]
        projections = (query, key, value) if rotate_value else (query, key)
        rotated = list(self.rotate_projections(head_dim, *projections, in_place=True))
        if not rotate_value:
            rotated.append(value.view(*value.shape[:-1], -1, head_dim).transpose(1, 2))
        return rotated[0], rotated[1], rotated[2]

    def rotate(self, *tensors: torch.Tensor, in_place: bool = False) -> list[torch.Tensor]:
        """Rotate each `(batch, heads, seq, d)` tensor (queries, keys, values) by its tokens' angles; the kernel
        rotates them all in one launch, in place when `in_place` and no gradient is recorded."""
        if self.uses_kernel:
            return rotate_with_kernel(list(tensors), self.cos, self.sin, in_place=in_place)
        if self.traced:
            cos, sin = self.cos.unsqueeze(1), self.sin.unsqueeze(1)
            return [_rotate_pairs(tensor, cos, sin) for tensor in tensors]
        rotation = self.complex
        if tensors[0].dtype == torch.float32:  # the common CPU case, written out: at short lengths the time is Python's
            return [
                torch.view_as_real(torch.view_as_complex(x.view(*x.shape[:-1], -1, 2)) * rotation).view(x.shape)
                for x in tensors
            ]
        return [_rotate_complex(tensor, rotation) for tensor in tensors]

    def rotate_projections(self, head_dim: int, *projections: torch.Tensor, in_place: bool = False) -> list:
        """Split `(batch, seq, heads * head_dim)` projections into heads and rotate them: `(batch, heads, seq,
        head_dim)` each, as `rotate` of the split heads gives.

        On the eager path (CPU, every precision) and in recorded graphs the rotation runs on the projections' own
        layout, with fewer operators than splitting first; eagerly in place when `in_place` and no gradient is
        recorded: no new tensor per rotation (on CPU a fresh large tensor costs page faults), and the projection's
        memory is reused.
        """
        if self.traced and not self.uses_kernel:
            # As eager, on the projections' layout: heads stay views of `(batch, seq, heads, d)` memory, so attention
            # returns that layout and merging heads back tests no strides (which would fix a length of 1 or not 1).
            cos, sin = self.cos.unsqueeze(2), self.sin.unsqueeze(2)
            heads = [projection.unflatten(-1, (-1, head_dim)) for projection in projections]
            return [_rotate_pairs(states, cos, sin).transpose(1, 2) for states in heads]
        first = projections[0]
        rotation = self.complex_tokens
        if rotation is None or rotation.shape[0] > first.shape[0]:
            heads = [projection.unflatten(-1, (-1, head_dim)).transpose(1, 2) for projection in projections]
            return self.rotate(*heads, in_place=in_place)
        pairs = (*first.shape[:-1], -1, head_dim // 2, 2)
        heads = (*first.shape[:-1], -1, head_dim)
        in_place = in_place and not (torch.is_grad_enabled() and any(p.requires_grad for p in projections))
        if first.dtype != torch.float32:
            # No complex half-precision type on CPU: the product runs on a float32 copy (the precision of the
            # reference), written back into the projection when in place.
            rotated = [torch.view_as_complex(states.view(pairs).float()).mul_(rotation) for states in projections]
            if in_place:
                for projection, product in zip(projections, rotated, strict=True):
                    projection.view(pairs).copy_(torch.view_as_real(product))
                return [projection.view(heads).transpose(1, 2) for projection in projections]
            return [torch.view_as_real(product).to(first.dtype).view(heads).transpose(1, 2) for product in rotated]
        if in_place:
            for projection in projections:
                torch.view_as_complex(projection.view(pairs)).mul_(rotation)
            return [projection.view(heads).transpose(1, 2) for projection in projections]
        return [
            torch.view_as_real(torch.view_as_complex(projection.view(pairs)) * rotation).view(heads).transpose(1, 2)
            for projection in projections
        ]


def apply_rotary_pos_emb(
    query: torch.Tensor,
    key: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    value: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Rotate queries and keys (and values when given, for `rotary_value`) by their positions' angles: the functional
    form of `TokenRotation`, for callers holding cos/sin `(batch, seq, d/2)`."""
    rotated = TokenRotation(cos, sin).rotate(query, key, *([] if value is None else [value]))
    return rotated[0], rotated[1], rotated[2] if value is not None else None


__all__ = [
    "HfRoFormerRotaryEmbedding",
    "PerQueryRotation",
    "TokenRotation",
    "angle_dtype",
    "apply_rotary_pos_emb",
    "default_inverse_frequencies",
    "in_halves",
    "kernel_applies",
    "rope_inverse_frequencies",
    "rotate_interleaved",
    "rotation_cos_sin",
]
