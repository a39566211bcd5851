"""The fine-tuning tasks, one module each, every one building a `Task` (`base.py`: what a task supplies to the run)
that `finetune.fine_tune` runs: GLUE, one's own text files, CAIL2019-SCM (sequence classification), named
entities, extractive question answering, multiple choice."""

from .base import Head, Inputs, SampleLimits, Task
from .cail import cail_task_data
from .glue import GlueSource, glue_task, glue_task_data
from .multiple_choice import ChoiceFiles, multiple_choice_task_data
from .question_answering import QuestionFiles, question_answering_task_data
from .sequence_classification import SentenceInputs, classification_head
from .text_classification import TextFiles, text_classification_task_data
from .token_classification import EntityFiles, token_classification_task_data


__all__ = [
    "ChoiceFiles",
    "EntityFiles",
    "GlueSource",
    "Head",
    "Inputs",
    "QuestionFiles",
    "SampleLimits",
    "SentenceInputs",
    "Task",
    "TextFiles",
    "cail_task_data",
    "classification_head",
    "glue_task",
    "glue_task_data",
    "multiple_choice_task_data",
    "question_answering_task_data",
    "text_classification_task_data",
    "token_classification_task_data",
]
