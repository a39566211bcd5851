"""The `hf-roformer` command line: one module per command over the library's functions, the anchor being
transformers' `cli/`.

Arguments are parsed before torch or transformers is imported (this package imports neither, nor the `hf_roformer`
package, whose import registers the models with transformers), so `--help` and mistakes answer at once; a command
imports what it needs when it runs, after checking that its extra is installed. Options are spelled with underscores,
as transformers' `HfArgumentParser` spells them (`--output_dir`); the same name with dashes is accepted everywhere.
Foreseeable failures print one line, `error: ...`; `HF_ROFORMER_TRACEBACK=1` shows the traceback instead.
"""

import sys

from . import convert, demo, finetune, plot, pretrain, similar, tour
from .output import configure_output, quiet_libraries, report_failure
from .parsing import HelpFormatter, Parser


COMMANDS = (demo, tour, finetune, pretrain, convert, similar, plot)
# Commands whose options include every TrainingArguments option, passed through to transformers' parser.
PASSES_THROUGH = (finetune.run, pretrain.run)


def build_parser() -> Parser:
    """The parser of every command."""
    parser = Parser(
        prog="hf-roformer",
        description="RoFormer for Hugging Face Transformers. `hf-roformer COMMAND --help` describes a command.\n\n"
        "Failures print one line, `error: ...`; set HF_ROFORMER_TRACEBACK=1 to see the traceback instead.",
        formatter_class=HelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def run(argv: list[str]):
    """Parse `argv` and run its command; returns what the command's library function returned (the metrics of a
    training run, a conversion report, ...). Failures propagate as the library raises them; command-line mistakes exit
    with status 2 and a one-line message."""
    parser = build_parser()
    args, passed_through = parser.parse_known_args(argv)
    if passed_through and args._run not in PASSES_THROUGH:
        parser.error(f"unrecognized arguments: {' '.join(passed_through)}")
    quiet_libraries()
    return args._run(args, passed_through)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `hf-roformer` console script: parse, run the command, exit with its status (0 done, 1 a
    foreseen failure, 2 a command-line mistake, 130 Ctrl-C). Under torchrun the process then ends as
    `end_launched_process` says."""
    configure_output()
    status = 1  # also for an exit nobody foresaw, on its way through
    try:
        run(sys.argv[1:] if argv is None else argv)
        status = 0
    except (Exception, KeyboardInterrupt) as error:
        status = report_failure(error)
    finally:
        end_launched_process(status)
    if status:
        sys.exit(status)


def end_launched_process(status: int) -> None:
    """Under torchrun (a process group is open): close the group, then end the process with `status` without the
    interpreter's teardown, where the group's threads could still abort a run that finished
    (`releases_hf_roformer.exit_without_teardown` says how). Without a process group it returns at once."""
    if close_process_group(succeeded=status == 0):
        from hf_roformer.remote_code import releases_hf_roformer

        releases_hf_roformer.exit_without_teardown(status)


def close_process_group(succeeded: bool) -> bool:
    """Under torchrun, tear down the process group the Trainer opened before the process exits (left open, torch warns
    at exit); returns whether there was one.

    After a command that succeeded (`succeeded`; under torchrun every process runs the same command), the processes
    first wait for each other, so that none tears its connections down and exits while another still writes its outputs
    or communicates (a process that did so was seen to abort, once in many runs). After a failure they do not
    wait: another process may be stopped inside a collective, which a barrier would then wrongly join."""
    distributed = sys.modules.get("torch.distributed")  # not imported: no group (and `--help` stays fast)
    if distributed is None or not distributed.is_available() or not distributed.is_initialized():
        return False
    if succeeded:
        distributed.barrier()
    distributed.destroy_process_group()
    return True


__all__ = ["build_parser", "end_launched_process", "main", "run"]
