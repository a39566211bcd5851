"""`hf-roformer finetune cail2019-scm`: the task's declaration to the command line (no torch imported)."""

from ...run.command_options import Option, TaskDeclaration


# The original CAIL2019-SCM recipe: Adam lr 6e-6, batch 8 pairs, 20 epochs, the best checkpoint on valid.
CAIL_DEFAULTS = dict(
    num_train_epochs=20.0,
    learning_rate=6e-6,
    weight_decay=0.0,
    per_device_train_batch_size=8,
    eval_strategy="epoch",
    save_strategy="epoch",
    load_best_model_at_end=True,
    metric_for_best_model="triplet_accuracy",
    greater_is_better=True,
    save_total_limit=2,
    report_to="none",
)


def load(args, limits):
    """The data directory; its triplets read when the run asks."""
    from .task import cail_task_data

    return (lambda: cail_task_data(args.data_dir, limits)), {"data directory": args.data_dir}


TASK = TaskDeclaration(
    name="cail2019-scm",
    summary="fine-tune on CAIL2019-SCM (similar-case matching of long legal documents), the original recipe",
    details="Each triplet (A, B, C) becomes the pairs (A, B) and (A, C); masked mean pooling, a sigmoid, learning "
    "rate 6e-6, batch 8, 20 epochs, the best checkpoint on valid; the metric is the triplet accuracy.",
    usage="--model_name_or_path MODEL --data_dir DIR --output_dir DIR [options]",
    defaults=CAIL_DEFAULTS,
    options=(Option("data_dir", "directory holding train.json, valid.json and (optionally) test.json", required=True),),
    loader=f"{__name__}:load",
    examples="triplets",
)
