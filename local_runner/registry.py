"""A local model registry (SQLite): what RegisterModel steps would create in SageMaker."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REGISTRY_FILE = "model-registry.sqlite"  # under the local runs' folder (.local-runs)


@dataclass(frozen=True)
class ModelPackage:
    group: str
    version: int
    approval_status: str
    model_data: str
    metrics: dict[str, Any]
    execution_id: str

    @property
    def arn(self) -> str:
        return f"arn:aws:sagemaker:local:000000000000:model-package/{self.group}/{self.version}"


class LocalModelRegistry:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.connection = sqlite3.connect(path)
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS model_packages (group_name TEXT, version INTEGER, approval_status TEXT,"
            " model_data TEXT, metrics TEXT, execution_id TEXT, PRIMARY KEY (group_name, version))"
        )

    def register(
        self, group: str, approval_status: str, model_data: str, metrics: dict, execution_id: str
    ) -> ModelPackage:
        with self.connection:
            (latest,) = self.connection.execute(
                "SELECT COALESCE(MAX(version), 0) FROM model_packages WHERE group_name = ?", (group,)
            ).fetchone()
            package = ModelPackage(group, latest + 1, approval_status, model_data, metrics, execution_id)
            self.connection.execute(
                "INSERT INTO model_packages VALUES (?, ?, ?, ?, ?, ?)",
                (group, package.version, approval_status, model_data, json.dumps(metrics), execution_id),
            )
        return package

    def packages(self, group: str) -> list[ModelPackage]:
        rows = self.connection.execute(
            "SELECT group_name, version, approval_status, model_data, metrics, execution_id FROM model_packages"
            " WHERE group_name = ? ORDER BY version",
            (group,),
        ).fetchall()
        return [ModelPackage(g, v, s, d, json.loads(m), e) for g, v, s, d, m, e in rows]
