"""A local model registry (SQLite): what RegisterModel steps would create in SageMaker."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
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
    metadata: dict[str, str] = field(default_factory=dict)  # CustomerMetadataProperties

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
        columns = [row[1] for row in self.connection.execute("PRAGMA table_info(model_packages)")]
        if "metadata" not in columns:  # a registry written before packages kept their metadata
            with self.connection:
                self.connection.execute("ALTER TABLE model_packages ADD COLUMN metadata TEXT DEFAULT '{}'")

    def register(
        self,
        group: str,
        approval_status: str,
        model_data: str,
        metrics: dict,
        execution_id: str,
        metadata: dict[str, str] | None = None,
    ) -> ModelPackage:
        with self.connection:
            (latest,) = self.connection.execute(
                "SELECT COALESCE(MAX(version), 0) FROM model_packages WHERE group_name = ?", (group,)
            ).fetchone()
            package = ModelPackage(
                group, latest + 1, approval_status, model_data, metrics, execution_id, dict(metadata or {})
            )
            self.connection.execute(
                "INSERT INTO model_packages (group_name, version, approval_status, model_data, metrics, execution_id,"
                " metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    group,
                    package.version,
                    approval_status,
                    model_data,
                    json.dumps(metrics),
                    execution_id,
                    json.dumps(package.metadata),
                ),
            )
        return package

    def packages(self, group: str) -> list[ModelPackage]:
        rows = self.connection.execute(
            "SELECT group_name, version, approval_status, model_data, metrics, execution_id, metadata"
            " FROM model_packages WHERE group_name = ? ORDER BY version",
            (group,),
        ).fetchall()
        return [ModelPackage(g, v, s, d, json.loads(m), e, json.loads(x or "{}")) for g, v, s, d, m, e, x in rows]

    def remove_registered_by(self, execution_id: str) -> list[ModelPackage]:
        """Delete the packages that an execution registered (or that `make register` made of its model); them."""
        groups = [g for (g,) in self.connection.execute("SELECT DISTINCT group_name FROM model_packages")]
        removed = [p for group in groups for p in self.packages(group) if p.execution_id == execution_id]
        with self.connection:
            self.connection.execute("DELETE FROM model_packages WHERE execution_id = ?", (execution_id,))
        return removed

    def model_data_in_use(self) -> set[str]:
        return {uri for (uri,) in self.connection.execute("SELECT model_data FROM model_packages")}

    def package(self, arn: str) -> ModelPackage | None:
        """The package a local ARN (arn:aws:sagemaker:local:...:model-package/<group>/<version>) names."""
        group, _, version = arn.rpartition(":model-package/")[2].rpartition("/")
        found = [p for p in self.packages(group) if str(p.version) == version]
        return found[0] if found and found[0].arn == arn else None
