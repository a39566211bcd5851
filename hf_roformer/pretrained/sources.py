"""Where a model or tokenizer comes from, decided before anything is loaded: a shipped checkpoint (`shipped:NAME`),
a local directory, or a Hub id; and whether the Hugging Face Hub can be reached for it.

transformers' `from_pretrained` answers a mistyped local path with a Hub id validation error, and a Hub id without a
network after retrying for a minute. Here a name that cannot be a Hub id is a path, and a missing path is said to be
missing; a Hub id is checked with one short request (`HfApi.model_info`), and without an answer the Hub cache is used
when it holds the model, else the error says how to work offline (`HF_HUB_OFFLINE=1`).
"""

from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import HfApi, constants, try_to_load_from_cache
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import validate_repo_id

from ..utils.errors import HubError, ModelSourceError, UsageError
from . import SHIPPED_PREFIX, is_shipped_name, pretrained_checkpoint


HUB_TIMEOUT_SECONDS = 10.0  # one request: a reachable Hub answers well within it


@dataclass(frozen=True)
class ModelSource:
    """A resolved model name: what to pass to `from_pretrained` (`path`) and with which keyword arguments
    (`load_kwargs`: `local_files_only=True` when only the Hub cache can serve it); `local` for shipped checkpoints
    and directories."""

    name: str
    path: str
    local: bool
    load_kwargs: dict = field(default_factory=dict)


def hub_offline() -> bool:
    """Whether `HF_HUB_OFFLINE` asks for no network access (as huggingface_hub reads it)."""
    return constants.is_offline_mode()


def _is_hub_id(name: str) -> bool:
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def _cached(repo_id: str, revision: str | None, cache_dir: str | None) -> bool:
    found = try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir, revision=revision)
    return isinstance(found, str)


def hub_unreachable_reason(repo_id: str | None = None, token: str | None = None) -> str | None:
    """Why the Hub gives no answer (one request, no retries), or None when it answers. With `repo_id`, a missing or
    inaccessible repository raises `ModelSourceError`."""
    try:
        if repo_id is None:
            HfApi(token=token).whoami(token=token)
        else:
            HfApi(token=token).model_info(repo_id, token=token, timeout=HUB_TIMEOUT_SECONDS)
    except GatedRepoError:
        raise ModelSourceError(f"{repo_id!r} is a gated model on the Hub: accept its terms and pass a token") from None
    except (RepositoryNotFoundError, RevisionNotFoundError):
        raise ModelSourceError(
            f"{repo_id!r} is neither a local directory nor a model on the Hub (check the name; a private model needs "
            "a token)"
        ) from None
    except HfHubHTTPError as error:  # the Hub answered
        if repo_id is None:  # whoami: it refused the token
            raise HubError(f"the Hub refused the token ({error})") from None
        return None  # another HTTP error, which the loader reports in full
    except Exception as error:  # no HTTP answer at all (DNS, refused connection, timeout, proxy): the client's errors
        return f"{type(error).__name__}: {error}"
    return None


def resolve_model_source(
    name: str, flag: str = "--model_name_or_path", revision: str | None = None, cache_dir: str | None = None,
    token: str | None = None,
) -> ModelSource:  # fmt: skip
    """Resolve `name` (given with `flag`) before loading anything:

    - `shipped:NAME`: the package's checkpoint (an unknown name lists the shipped ones);
    - an existing directory: itself; an existing file is refused (a model is a directory);
    - a name that cannot be a Hub id (`./model`, `/data/m`, `a/b/c`, ...): refused as a missing directory;
    - a Hub id: with `HF_HUB_OFFLINE` set, only from the Hub cache; otherwise one request checks the Hub knows it, and
      when the Hub cannot be reached the cache serves it or the error says so.
    """
    text = str(name)
    if is_shipped_name(text):
        try:
            return ModelSource(text, str(pretrained_checkpoint(text.removeprefix(SHIPPED_PREFIX))), True)
        except ModelSourceError as error:
            raise UsageError(f"{flag} {text}: {error}") from None
    path = Path(text).expanduser()
    if path.is_dir():
        return ModelSource(text, str(path), True)
    if path.exists():
        raise UsageError(f"{flag} {text}: a file; give the directory that holds the model's config.json")
    if not _is_hub_id(text):
        raise UsageError(f"{flag} {text}: no such directory")
    cached = _cached(text, revision, cache_dir)
    if hub_offline():
        if cached:
            return ModelSource(text, text, False, {"local_files_only": True})
        raise ModelSourceError(
            f"{flag} {text}: not a local directory, and HF_HUB_OFFLINE is set while the Hub cache does not hold it; "
            "download it once with network access, or give a local directory"
        )
    reason = hub_unreachable_reason(text, token)
    if reason is None:
        return ModelSource(text, text, False)
    if cached:
        return ModelSource(text, text, False, {"local_files_only": True})
    raise ModelSourceError(
        f"{flag} {text}: not a local directory, and the Hub ({constants.ENDPOINT}) cannot be reached to download it "
        f"({reason}); check the network, or set HF_HUB_OFFLINE=1 to work from local files and the Hub cache only"
    )


TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "vocab.txt")  # what `save_pretrained` writes


def load_tokenizer(source: ModelSource, flag: str, tokenizer_flag: str, **kwargs):
    """`AutoTokenizer.from_pretrained` for `source` (given with `flag`), with `kwargs`; a local directory that holds
    no tokenizer files (weights saved alone), on which the tokenizer class fails with a message of its own, raises
    `ModelSourceError` naming the directory and the option that gives the tokenizer (`tokenizer_flag`)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source.path, **kwargs, **source.load_kwargs)
    except (ValueError, OSError, TypeError):
        directory = Path(source.path)
        if source.local and not any((directory / name).exists() for name in TOKENIZER_FILES):
            raise ModelSourceError(
                f"{flag} {source.name}: {directory} holds no tokenizer files ({', '.join(TOKENIZER_FILES)}); give the "
                f"tokenizer with {tokenizer_flag} (a directory or Hub id)"
            ) from None
        raise


def check_hub_upload(flag: str = "--push_to_hub", token: str | None = None) -> None:
    """Refuse an upload that cannot happen, before any work: offline mode, no token, or a Hub out of reach."""
    if hub_offline():
        raise UsageError(f"{flag}: HF_HUB_OFFLINE is set, so nothing can be uploaded; unset it or drop {flag}")
    from huggingface_hub import get_token

    if (token or get_token()) is None:
        raise UsageError(f"{flag}: no Hub token; log in with `hf auth login` or pass --hub_token")
    reason = hub_unreachable_reason(None, token)
    if reason is not None:
        raise HubError(
            f"{flag}: the Hub ({constants.ENDPOINT}) cannot be reached ({reason}); check the network, or drop {flag} "
            "and upload the output directory later with `hf upload`"
        )


__all__ = [
    "ModelSource",
    "check_hub_upload",
    "hub_offline",
    "hub_unreachable_reason",
    "load_tokenizer",
    "resolve_model_source",
]
