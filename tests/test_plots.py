"""The two RoPE figures render from the command line."""

from hf_roformer_cli import main


def test_plots_are_written(tmp_path, capsys):
    for figure in ("decay", "methods"):
        output = tmp_path / f"{figure}.png"
        main(["plot", figure, "--output", str(output), "--head-dim", "32"])
        data = output.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000, figure
        assert str(output) in capsys.readouterr().out
