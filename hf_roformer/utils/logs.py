"""Scoped quiet for messages whose facts the caller reports itself: transformers' own (a load report whose missing and
unexpected keys the caller checks and reports in its own words), or the info lines of a part of this package whose
caller tells the same story its own way (the demo narrating a fine-tuning run)."""

import contextlib
import logging

from transformers.utils import logging as transformers_logging


@contextlib.contextmanager
def transformers_warnings_off():
    """transformers' logging at error level inside the block, restored after it."""
    previous = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(previous)


@contextlib.contextmanager
def info_lines_off(logger: logging.Logger):
    """`logger`'s info lines off inside the block (its warnings stay), restored after it."""
    previous = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(previous)


__all__ = ["info_lines_off", "transformers_warnings_off"]
