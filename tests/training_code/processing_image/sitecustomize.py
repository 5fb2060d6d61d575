"""Put this folder on PYTHONPATH to run Python as on the processing image: no `datasets`, no `pyarrow`.

huggingface-pytorch-inference:2.6.0-transformers5.5.3-cpu (its Dockerfile.cpu in aws/deep-learning-containers)
installs neither. Importing them raises ModuleNotFoundError, and `importlib.util.find_spec` says they are not
there, as libraries probing for optional packages (transformers, accelerate) then see it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys

ABSENT = ("datasets", "pyarrow")


def _absent(name: str) -> bool:
    return name.split(".", 1)[0] in ABSENT


class _Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if _absent(fullname):
            raise ModuleNotFoundError(f"No module named {fullname!r} (not on the processing image)", name=fullname)
        return None


_find_spec = importlib.util.find_spec


def _find_spec_without(name: str, package: str | None = None) -> importlib.machinery.ModuleSpec | None:
    return None if _absent(name) else _find_spec(name, package)


sys.meta_path.insert(0, _Absent())
importlib.util.find_spec = _find_spec_without
