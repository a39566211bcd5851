"""What several tasks declare alike: the options naming their three files, and the classification recipe's
defaults (no torch imported)."""

from ..run.command_options import Option


# The paper's recipe for sentence and pair classification: 3 epochs, learning rate 2e-5, batch 32, evaluated after
# every epoch.
CLASSIFICATION_DEFAULTS = dict(
    num_train_epochs=3.0,
    learning_rate=2e-5,
    per_device_train_batch_size=32,
    eval_strategy="epoch",
    save_strategy="epoch",
    report_to="none",
)


def split_files(train: str, validation: str, test: str, train_required: bool = True) -> tuple[Option, ...]:
    """`--train_file` (required unless `train_required` is false: the task then checks it is given to train),
    `--validation_file` (required) and `--test_file` (optional), each with what it holds."""
    return (
        Option("train_file", train, required=train_required),
        Option("validation_file", validation, required=True),
        Option("test_file", test),
    )


__all__ = ["CLASSIFICATION_DEFAULTS", "split_files"]
