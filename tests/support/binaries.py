import pytest


def require_binary(path: str) -> str:
    """Skip when a Debian tool is missing locally; in CI (ROOTPROOF_CI=1) a missing tool fails."""
    import os
    import shutil

    found = shutil.which(path)
    if found:
        return found
    if os.environ.get("ROOTPROOF_CI") == "1":
        pytest.fail(f"{path} is required in CI but is not installed")
    pytest.skip(f"{path} is not installed")
