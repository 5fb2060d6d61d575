"""What the command-line tools need to know about a deployed environment (names only, from settings)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config import Settings, load_settings, read_cdk_json_context

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Deployment:
    settings: Settings
    account: str
    region: str

    def bucket(self, purpose: str) -> str:
        return self.settings.bucket_name(purpose, self.account, self.region)


def load_deployment(env_name: str, session: Any) -> Deployment:
    """Settings of `env_name` plus the account and region of the caller's AWS session (boto3)."""
    settings = load_settings({**read_cdk_json_context(ROOT / "cdk.json"), "env": env_name})
    account = session.client("sts").get_caller_identity()["Account"]
    region = settings.region or session.region_name
    if not region:
        raise SystemExit("error: no AWS region: set AWS_REGION or `region` in cdk.json")
    return Deployment(settings=settings, account=settings.account or account, region=region)
