"""The `hf-roformer` command line, including the README's demo command."""

import pytest

from hf_roformer.cli import main


def test_tour_runs_end_to_end(capsys):
    main(["tour"])
    output = capsys.readouterr().out
    assert "max |logit diff|" in output
    assert "fails (IndexError); hf_roformer ran" in output
    assert "RoFormer encodes positions by rotating" in output.split("greedy generate:")[1]
    assert "same generation: True" in output


def test_unknown_command_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["frobnicate"])
    assert "invalid choice" in capsys.readouterr().err
