"""The `hf-roformer` command line: the tour, argument parsing before heavy imports, spellings, unknown names."""

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


def test_help_answers_without_importing_torch_or_transformers():
    """The console script parses its arguments before importing anything heavy: `--help` imports neither torch,
    transformers nor the hf_roformer package (whose import registers the models)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    script = (
        "import sys, hf_roformer_cli\n"
        "for argv in (['--help'], ['demo', '--help'], ['finetune', '--help']):\n"
        "    try:\n"
        "        hf_roformer_cli.main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = sorted(name for name in ('torch', 'transformers', 'hf_roformer', 'numpy') if name in sys.modules)\n"
        "print('imported:', heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env={"PYTHONPATH": str(root), "PATH": ""}, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "imported: []" in result.stdout and "usage: hf-roformer demo" in result.stdout, result.stdout


def test_options_take_underscores_and_dashes():
    from hf_roformer_cli import build_parser

    parser = build_parser()
    for spelling in ("--output_dir", "--output-dir"):
        assert parser.parse_args(["demo", spelling, "x"]).output_dir == "x"
    for spelling in ("--from_scratch", "--from-scratch"):
        assert parser.parse_args(["demo", spelling]).from_scratch
    for spelling in ("--head_dim", "--head-dim"):
        assert parser.parse_args(["plot", "decay", "--output", "p.png", spelling, "64"]).head_dim == 64


def test_unknown_finetune_task_is_refused_with_a_suggestion(capsys):
    with pytest.raises(SystemExit):
        main(["finetune", "text-clasification"])
    error = capsys.readouterr().err
    assert "unknown finetune task 'text-clasification'. Did you mean 'text-classification'?" in error
    assert "Valid: glue, text-classification, cail2019-scm." in error and "Traceback" not in error
