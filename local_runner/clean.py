"""Remove all but the newest local runs: `make clean-runs [KEEP=3]`.

A removed run loses its folder (.local-runs/executions/<id>), the objects of the local S3 that only it wrote
(those with its execution id in their key: its model.tar.gz, evaluation, TensorBoard logs, their kept versions)
and the local registry's packages of its model (and their registry/<sha256>/ copies, unless a kept package names
the same copy); then every blob that no file links to any more goes (local_runner/blobs.py). A running run is
never removed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from qa.outputs import LOCAL_VERSIONS_DIR

from config.paths import LOCAL_RUNS
from local_runner.blobs import BlobStore
from local_runner.registry import REGISTRY_FILE, LocalModelRegistry, ModelPackage
from local_runner.store import STORE_DIR, LocalObjectStore
from reporting.local_runs import LocalRun, executions_dir, local_runs

DEFAULT_KEEP = 3


def disk_usage(folder: Path) -> int:
    """Bytes the folder's files take, each hard-linked content once."""
    seen: dict[tuple[int, int], int] = {}
    for path in folder.rglob("*") if folder.is_dir() else []:
        info = path.lstat()
        if path.is_file() and not path.is_symlink():
            seen[(info.st_dev, info.st_ino)] = info.st_size
    return sum(seen.values())


def written_by(store_root: Path, execution_id: str) -> list[Path]:
    """The store's folders and files whose name is the execution's id or starts with `<id>-` (its job names)."""
    found = []
    for path in sorted(store_root.rglob(f"{execution_id}*")) if store_root.is_dir() else []:
        if path.name == execution_id or path.name.startswith(f"{execution_id}-"):
            found.append(path)
    return found


def remove_run(run: LocalRun, store: LocalObjectStore, registry: LocalModelRegistry) -> list[ModelPackage]:
    """Remove the run's folder, its objects and its packages with their registry copies; the packages."""
    packages = registry.remove_registered_by(run.execution_id)
    in_use = registry.model_data_in_use()
    copies = [store.path(p.model_data).parent for p in packages if p.model_data not in in_use]
    kept_versions = [store.root / LOCAL_VERSIONS_DIR / copy.relative_to(store.root) for copy in copies]
    for path in [*written_by(store.root, run.execution_id), *copies, *kept_versions, run.folder]:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    return packages


def clean(work_dir: Path, keep: int) -> tuple[list[LocalRun], list[ModelPackage], int]:
    """Remove all but the newest `keep` runs (never a running one), their packages and the blobs nothing links to;
    the runs and packages removed and the bytes freed."""
    before = disk_usage(work_dir)
    runs = local_runs(executions_dir(work_dir))
    removed = [run for run in runs[keep:] if run.runner_pid is None]
    store, registry = LocalObjectStore(work_dir / STORE_DIR), LocalModelRegistry(work_dir / REGISTRY_FILE)
    packages = [package for run in removed for package in remove_run(run, store, registry)]
    for blob in BlobStore(work_dir).unreferenced():
        blob.unlink()
    return removed, packages, before - disk_usage(work_dir)


def non_negative(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: use a whole number of runs, 0 or more")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m local_runner.clean", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--work-dir", type=Path, default=LOCAL_RUNS, help="the local runs' folder (default: .local-runs)"
    )
    parser.add_argument(
        "--keep", type=non_negative, default=DEFAULT_KEEP, help=f"newest runs kept (default {DEFAULT_KEEP})"
    )
    args = parser.parse_args(argv)
    if not executions_dir(args.work_dir).is_dir():
        print(f"no local runs under {args.work_dir}: nothing to remove")
        return 0
    removed, packages, freed = clean(args.work_dir, args.keep)
    kept = local_runs(executions_dir(args.work_dir))
    print(f"removed {len(removed)} local run(s): {', '.join(r.execution_id for r in removed) or '-'}")
    print(f"removed {len(packages)} local model package(s): {', '.join(p.arn for p in packages) or '-'}")
    print(f"kept {len(kept)}: {', '.join(f'{r.execution_id} ({r.status})' for r in kept) or '-'}")
    print(f"freed {freed / 2**20:,.1f} MiB; {args.work_dir} now takes {disk_usage(args.work_dir) / 2**20:,.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
