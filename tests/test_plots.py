"""The two RoPE figures render from the command line."""

import pytest

from hf_roformer_cli import main


def test_plots_are_written(tmp_path, capsys):
    for figure in ("decay", "methods"):
        output = tmp_path / f"{figure}.png"
        main(["plot", figure, "--output", str(output), "--head-dim", "32"])
        data = output.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000, figure
        assert str(output) in capsys.readouterr().out


@pytest.mark.parametrize("figure", ["decay", "methods"])
def test_each_figure_has_its_own_help(figure, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["plot", figure, "--help"])
    printed = capsys.readouterr().out
    assert stopped.value.code == 0 and printed.startswith(f"usage: hf-roformer plot {figure} [-h] --output OUTPUT")
    assert ("--factor" in printed) == (figure == "methods"), printed
