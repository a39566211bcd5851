"""The error of a conversion that cannot proceed (a source or output problem, named in the message)."""

from ..utils.errors import HfRoFormerError


class ConversionError(HfRoFormerError, ValueError):
    """A source checkpoint that does not match its family's layout, a malformed `bert_config.json` or `vocab.txt`, or
    an output that cannot be written; the message names the file, tensors or values concerned."""


__all__ = ["ConversionError"]
