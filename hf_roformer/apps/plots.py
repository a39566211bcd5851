"""Figures of RoPE's properties: the paper's long-term decay (appendix C, figure 3) and the rotation pattern of each
rope scaling method (position x dimension). Needs the `plot` extra (matplotlib)."""

from pathlib import Path

import torch

from ..remote_code.configuration_hf_roformer import HfRoFormerConfig
from ..remote_code.rotary_hf_roformer import rope_inverse_frequencies
from ..utils.extras import require_extra
from .rope_analysis import long_term_decay_bound


def _pyplot():
    require_extra("plot", "plotting")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    return pyplot


def plot_long_term_decay(
    output: str | Path, head_dim: int = 128, max_distance: int = 256, rope_theta: float = 10000.0
) -> Path:
    """Plot the relative upper bound (1/(d/2)) sum_j |S_j| against relative distance (paper, figure 3)."""
    pyplot = _pyplot()
    distances = torch.arange(0, max_distance + 1)
    bound = long_term_decay_bound(distances, head_dim=head_dim, rope_theta=rope_theta)
    figure, axes = pyplot.subplots(figsize=(6, 4))
    axes.plot(distances.numpy(), bound.numpy(), linewidth=1.2)
    axes.set_xlabel("relative distance m - n")
    axes.set_ylabel("relative upper bound")
    axes.set_title(f"Long-term decay of RoPE (d = {head_dim}, theta_i = {rope_theta:g}^(-2i/d))")
    axes.grid(alpha=0.3)
    return _save(figure, output)


def scaling_method_configs(head_dim: int, factor: float, original_length: int) -> dict[str, HfRoFormerConfig]:
    """One config per compared method, all extending `original_length` by `factor`."""
    yarn = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": original_length}
    methods = {
        "default (extrapolation)": {"rope_type": "default"},
        f"linear, s={factor:g}": {"rope_type": "linear", "factor": factor},
        f"ntk, s={factor:g}": {"rope_type": "ntk", "factor": factor},
        f"dynamic ntk, s={factor:g}": {"rope_type": "dynamic", "factor": factor},
        f"yarn, s={factor:g}": yarn,
    }
    return {
        name: HfRoFormerConfig(
            vocab_size=8,
            hidden_size=head_dim,
            num_attention_heads=1,
            num_hidden_layers=1,
            intermediate_size=8,
            max_position_embeddings=original_length,
            rope_parameters=parameters,
        )
        for name, parameters in methods.items()
    }


def plot_rope_methods(output: str | Path, head_dim: int = 64, factor: float = 4.0, original_length: int = 512) -> Path:
    """Heat maps of cos(m * theta_i) over position m (x) and dimension pair i (y) for default, linear, NTK-aware,
    dynamic NTK (at the extended length) and YaRN, with the original length marked."""
    pyplot = _pyplot()
    length = int(original_length * factor)
    positions = torch.arange(length, dtype=torch.float64)
    configs = scaling_method_configs(head_dim, factor, original_length)
    figure, all_axes = pyplot.subplots(len(configs), 1, figsize=(9, 2.1 * len(configs)), sharex=True)
    for axes, (name, config) in zip(all_axes, configs.items(), strict=True):
        inv_freq = rope_inverse_frequencies(config, torch.tensor(length)).reshape(-1)
        rotation = torch.cos(positions[None, :] * inv_freq[:, None])
        image = axes.imshow(
            rotation.numpy(), aspect="auto", origin="lower", cmap="coolwarm", vmin=-1, vmax=1, interpolation="nearest"
        )
        axes.axvline(original_length, color="black", linewidth=1, linestyle="--")
        axes.set_ylabel("dim pair i")
        axes.set_title(name, fontsize=9, loc="left")
    all_axes[-1].set_xlabel(f"position m (dashed: original length {original_length})")
    figure.colorbar(image, ax=all_axes, label="cos(m theta_i)", shrink=0.6)
    return _save(figure, output)


def _save(figure, output: str | Path) -> Path:
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=110, bbox_inches="tight")
    figure.clf()
    return output
