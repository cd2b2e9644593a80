"""`python -m pipeline.packaging` (`make emr-package`): what EMR Serverless runs, in one directory.

main.py, hourglass_pipeline.zip (hourglass + pipeline) and pyenv.tar.gz, a relocatable Python.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
ENTRY_POINT = "main.py"
CODE_ZIP = "hourglass_pipeline.zip"
RUNTIME = "pyenv.tar.gz"
# The archive's fragment: Spark unpacks it as ./environment in the driver's and each executor's directory.
ENVIRONMENT = "environment"
PYTHON = f"./{ENVIRONMENT}/bin/python"
# What the jobs import beyond the standard library and PySpark (which the cluster's Spark provides).
RUNTIME_PACKAGES = ("boto3", "matplotlib")
# Stdlib parts the jobs never load; leaving them out halves the archive.
_STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "site-packages", "__pycache__"}
_SKIP_SUFFIXES = (".pyc", ".a")
# A shell wrapper: the interpreter finds its libpython next to it, wherever the archive was unpacked.
_WRAPPER = """#!/bin/sh
here=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/%s" "$@"
"""


def submit_parameters(code: str) -> str:
    """The `sparkSubmitParameters` of start-job-run, for the package uploaded under `code` (a URL prefix)."""
    conf = {
        "spark.archives": f"{code}/{RUNTIME}#{ENVIRONMENT}",
        "spark.submit.pyFiles": f"{code}/{CODE_ZIP}",
        "spark.pyspark.python": PYTHON,
        "spark.pyspark.driver.python": PYTHON,
        "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON": PYTHON,
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": PYTHON,
        "spark.executorEnv.PYSPARK_PYTHON": PYTHON,
    }
    return " ".join(f"--conf {key}={value}" for key, value in conf.items())


def build(out: Path, python: str = sys.executable) -> Path:
    """Writes the entry point, the code zip and the runtime archive into `out`; returns `out`."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO_ROOT / "pipeline" / "__main__.py", out / ENTRY_POINT)
    code_zip(out / CODE_ZIP)
    runtime(out / RUNTIME, python)
    return out


def code_zip(path: Path) -> None:
    """hourglass (lambdas/hourglass) and pipeline, as importable top-level packages."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for root, package in ((REPO_ROOT / "lambdas", "hourglass"), (REPO_ROOT, "pipeline")):
            for source in sorted((root / package).rglob("*.py")):
                relative = source.relative_to(root)
                if "__pycache__" not in relative.parts and relative.parts[:2] != ("pipeline", "out"):
                    archive.write(source, str(relative))


def pinned(names: Sequence[str] = RUNTIME_PACKAGES) -> list[str]:
    """`name==version` of each package as requirements*.txt pin it, so the cluster runs what the tests ran."""
    pins: dict[str, str] = {}
    for requirements in ("requirements.txt", "requirements-dev.txt"):
        for line in (REPO_ROOT / requirements).read_text().splitlines():
            match = re.match(r"^([A-Za-z0-9_.-]+)(\[[^\]]*\])?==(\S+)", line.strip())
            if match:
                pins[match.group(1).lower()] = f"{match.group(1)}=={match.group(3)}"
    return [pins.get(name, name) for name in names]


def runtime(path: Path, python: str = sys.executable) -> None:
    """A Python prefix that runs from any directory: bin/, lib/libpython*, lib/pythonX.Y with site-packages.

    No pyvenv.cfg: the interpreter finds its stdlib next to itself, so the archive works wherever
    Spark unpacks it (a venv-pack archive needs --python-prefix set to that place in advance).
    """
    layout = _layout(python)
    with tempfile.TemporaryDirectory(prefix="hourglass-runtime-") as scratch:
        prefix = Path(scratch, ENVIRONMENT)
        version = layout["version"]
        stdlib = prefix / layout["stdlib"]
        shutil.copytree(layout["stdlib_source"], stdlib, ignore=_stdlib_ignore)
        if layout["platstdlib_source"] != layout["stdlib_source"]:
            shutil.copytree(layout["platstdlib_source"], prefix / layout["platstdlib"], ignore=_stdlib_ignore)
        (prefix / "bin").mkdir()
        binary = f"python{version}"
        shutil.copy2(layout["executable"], prefix / "bin" / binary)
        for name in ("python", "python3"):
            wrapper = prefix / "bin" / name
            wrapper.write_text(_WRAPPER % binary)
            wrapper.chmod(0o755)
        (prefix / "lib").mkdir(exist_ok=True)
        for library in layout["libraries"]:
            shutil.copy2(library, prefix / "lib" / Path(library).name)
        site = prefix / layout["purelib"]
        subprocess.run(
            [python, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(site), *pinned()],
            check=True,
        )
        _check(prefix)
        with tarfile.open(path, "w:gz", compresslevel=6) as archive:
            for entry in sorted(prefix.iterdir()):
                archive.add(entry, entry.name)


def _layout(python: str) -> dict[str, str]:
    """Where `python`'s interpreter, stdlib and libpython are, and the same places relative to a prefix."""
    probe = """
import json, os, sys, sysconfig
base = sys.base_prefix
paths = sysconfig.get_paths(vars={"base": base, "platbase": base, "installed_base": base, "installed_platbase": base})
lib = sysconfig.get_config_var("LDLIBRARY") or ""
libdir = sysconfig.get_config_var("LIBDIR") or ""
shared = sysconfig.get_config_var("Py_ENABLE_SHARED")
libraries = [os.path.join(libdir, n) for n in os.listdir(libdir) if n.startswith(lib)] if shared and lib else []
binary = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
rel = lambda p: os.path.relpath(p, base)
print(json.dumps({
    "version": f"{sys.version_info[0]}.{sys.version_info[1]}",
    "executable": binary,
    "stdlib_source": paths["stdlib"], "stdlib": rel(paths["stdlib"]),
    "platstdlib_source": paths["platstdlib"], "platstdlib": rel(paths["platstdlib"]),
    "purelib": rel(paths["purelib"]),
    "libraries": libraries,
}))
"""
    answer = subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True).stdout
    layout: dict[str, str] = json.loads(answer)
    return layout


def _stdlib_ignore(directory: str, names: list[str]) -> set[str]:
    top = Path(directory).name.startswith("python")
    return {
        name
        for name in names
        if name == "__pycache__" or name.endswith(_SKIP_SUFFIXES) or (top and name in _STDLIB_SKIP)
    }


def _check(prefix: Path) -> None:
    """The packed interpreter starts with an empty environment and imports what the jobs need from itself."""
    script = (
        "import sys, boto3, matplotlib, ssl, json, zlib;"
        f"assert sys.prefix == {str(prefix)!r}, sys.prefix;"
        f"assert boto3.__file__.startswith({str(prefix)!r}), boto3.__file__"
    )
    subprocess.run([str(prefix / "bin" / "python"), "-c", script], check=True, env={"PATH": "/usr/bin:/bin"})


def members(archive: Path) -> Iterator[str]:
    with tarfile.open(archive) as tar:
        yield from tar.getnames()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pipeline.packaging", description=__doc__.splitlines()[0])
    p.add_argument("--out", default="dist/emr", help="directory to write main.py, the code zip and the runtime to")
    p.add_argument("--python", default=sys.executable, help="interpreter to pack (the cluster's Python version)")
    p.add_argument("--code-only", action="store_true", help="rebuild main.py and the zip, keep the runtime")
    p.add_argument("--submit-parameters", metavar="CODE_URL", help="print the sparkSubmitParameters and exit")
    args = p.parse_args(argv)
    if args.submit_parameters:
        print(submit_parameters(args.submit_parameters.rstrip("/")))
        return 0
    out = Path(args.out)
    if args.code_only:
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / "pipeline" / "__main__.py", out / ENTRY_POINT)
        code_zip(out / CODE_ZIP)
    else:
        build(out, args.python)
    for name in (ENTRY_POINT, CODE_ZIP, RUNTIME):
        file = out / name
        size = f"{file.stat().st_size / 1e6:.1f} MB" if file.exists() else "missing"
        print(f"{file}  {size}")
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
