"""The wheel tag the README claims is the one scripts/build_wheels.sh and cibuildwheel give."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_build_script_and_cibuildwheel_agree_on_the_wheel_tag() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    script = (ROOT / "scripts" / "build_wheels.sh").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    [claimed] = set(re.findall(r"tagged (manylinux_\d+_\d+)", readme))
    plat = f"{claimed}_x86_64"
    assert f'plat="{plat}"' in script
    # Exactly that tag: --only-plat, and the file name checked, not only auditwheel show.
    assert 'auditwheel" repair --plat "$plat" --only-plat' in script
    assert '*-"$plat".whl) ;;' in script
    assert f"auditwheel repair --plat {plat} --only-plat" in readme
    assert f'repair-wheel-command = "auditwheel repair --plat {plat} --only-plat' in pyproject
    assert f'manylinux-x86_64-image = "{claimed}"' in pyproject
    # The glibc the script compiles against is the tag's.
    glibc = claimed.removeprefix("manylinux_").replace("_", ".")
    assert f"glibc={glibc}" in script
