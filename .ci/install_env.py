"""`make install`'s package step, run by the venv's Python: the pinned torch and the project with its [dev] extra.

uv installs them where it can be installed itself (from the same sources pip is configured with: `pip config
list`, the machine's find-links, indexes and constraints; pip's resolution rule, the best version over every
index); pip otherwise, or if uv fails at any step (what uv installed stays; pip installs the rest). The same
packages either way: on the 2-core machine pip took ≈ 50 s of `make install`'s wall time, uv ≈ 12 s with its
own cache cold (benchmarks/RESULTS.md, "Set-up"). `TVERIFY_INSTALLER=pip` uses pip only.

Usage: python .ci/install_env.py TORCH_PIN
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

UV_SPEC = "uv>=0.4,<1"
BUILD = "setuptools>=64"  # the build backend pyproject names, installed beside torch (no build isolation)


def pip_sources() -> tuple[list[str], dict[str, str]]:
    """uv's arguments for the package sources pip is configured with, and the environment they need."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    args: list[str] = []
    env: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()
    for line in out.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        for item in shlex.split(value.strip().strip("'\"")) if value else []:
            if (name, item) in seen:
                continue
            seen.add((name, item))
            if name in ("find-links", "extra-index-url", "index-url"):
                args += [f"--{name}", item]
            elif name == "constraint" and Path(item).is_file():
                args += ["--constraint", item]
            elif name == "cert" and Path(item).is_file():
                env["SSL_CERT_FILE"] = item
    return args + ["--index-strategy", "unsafe-best-match"], env


def run(cmd: list[str], env: dict[str, str] | None = None) -> bool:
    return subprocess.run(cmd, env=None if env is None else {**os.environ, **env}).returncode == 0


def with_uv(torch_pin: str) -> bool:
    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        boot = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-compile", UV_SPEC],
                              capture_output=True, text=True)  # pip's notes on indexes without uv: not the user's concern
        if boot.returncode != 0:
            sys.stderr.write(boot.stderr[-2000:])
            return False
    sources, env = pip_sources()
    base = [str(uv), "pip", "install", "-q", "--python", sys.executable, *sources]
    return (run(base + [torch_pin, BUILD], env)
            and run(base + ["--no-build-isolation", "-e", ".[dev]"], env))


def with_pip(torch_pin: str) -> bool:
    base = [sys.executable, "-m", "pip", "install", "-q", "--no-compile"]
    return run(base + [torch_pin, BUILD]) and run(base + ["--no-build-isolation", "-e", ".[dev]"])


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python .ci/install_env.py TORCH_PIN", file=sys.stderr)
        return 2
    torch_pin = sys.argv[1]
    if os.environ.get("TVERIFY_INSTALLER") != "pip":
        if with_uv(torch_pin):
            return 0
        print("make install: uv could not install the environment; installing with pip", file=sys.stderr)
    return 0 if with_pip(torch_pin) else 1


if __name__ == "__main__":
    sys.exit(main())
