"""Publishing converted checkpoints on the Hub through huggingface_hub."""

from pathlib import Path

from huggingface_hub import HfApi


def push_folder(folder: str | Path, repo_id: str, token: str | None = None, private: bool = False, api=None) -> str:
    """Create `repo_id` if needed and upload a converted folder (weights, config with `auto_map`, code files,
    tokenizer files, model card) in one commit. Returns the commit URL."""
    api = api or HfApi(token=token)
    api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    commit = api.upload_folder(
        folder_path=str(folder),
        repo_id=repo_id,
        repo_type="model",
        commit_message="Upload RoFormer converted with hf_roformer",
    )
    return str(getattr(commit, "commit_url", commit))
