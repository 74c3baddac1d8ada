"""What tests that render real pages need: Chromium and the offline Tailwind cache, or a skip."""

from __future__ import annotations

import shutil

import pytest

from sweet_rl.rendering import assets as page_assets
from sweet_rl.rendering.processes import find_binary


def require_chromium() -> None:
    if find_binary("SWEET_RL_CHROMEDRIVER", ("/usr/bin/chromedriver",), "chromedriver") is None:
        pytest.skip("chromedriver not installed")
    if find_binary("SWEET_RL_CHROMIUM", ("/usr/bin/chromium",), "chromium") is None:
        pytest.skip("chromium not installed")


def tailwind_assets_dir(tmp_path_factory) -> str:
    """The user's filled asset cache, else one filled now with npm into a temporary folder."""
    try:
        return str(page_assets.tailwind_path().parent)
    except page_assets.AssetsMissing:
        pass
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: cannot fill the Tailwind asset cache")
    cache = tmp_path_factory.mktemp("assets")
    try:
        page_assets.fetch_tailwind(str(cache), timeout=120)
    except Exception as exc:  # registry unreachable, npm broken, ...
        pytest.skip(f"cannot fetch Tailwind with npm pack: {exc}")
    return str(cache)
