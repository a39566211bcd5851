"""Scoped quiet for transformers' own messages where the caller reads the same facts itself (a load report whose
missing and unexpected keys the caller checks and reports in its own words)."""

import contextlib

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


__all__ = ["transformers_warnings_off"]
