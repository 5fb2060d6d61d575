"""The project's CloudWatch Logs groups: encrypted with the project key, kept as long as configured."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from config import Settings
from config.aws_locations import LOG_RETENTION_DAYS, log_retention_days
from stacks.data import removal_policy


@dataclass(frozen=True)
class LogGroupSettings:
    """A log group's lifetime: logs kept at least `retention_days` days; `removal`: what deleting the stack does;
    `name_root`: the folder every project log group is named under (the project key serves only those);
    `function_folder`: the folder under it of one pipeline's Lambda functions (Settings.function_log_folder)."""

    retention_days: int
    removal: RemovalPolicy
    name_root: str
    function_folder: str

    @classmethod
    def of(cls, settings: Settings) -> LogGroupSettings:
        """The lifetime and names that an environment's settings give every log group of the project."""
        return cls(
            retention_days=settings.log_retention_days,
            removal=removal_policy(settings.removal_policy),
            name_root=settings.log_group_root,
            function_folder=settings.function_log_folder,
        )

    def name(self, purpose: str) -> str:
        """The log group of `purpose` (e.g. functions/ClaimManifest), under `name_root`."""
        return self.name_root + purpose


def log_retention(days: int) -> logs.RetentionDays:
    """The shortest CloudWatch Logs retention that keeps logs at least `days` days."""
    return _RETENTION_BY_DAYS[log_retention_days(days)]


_RETENTION_BY_DAYS = dict(
    zip(
        LOG_RETENTION_DAYS,
        (
            logs.RetentionDays.ONE_WEEK,
            logs.RetentionDays.TWO_WEEKS,
            logs.RetentionDays.ONE_MONTH,
            logs.RetentionDays.THREE_MONTHS,
            logs.RetentionDays.SIX_MONTHS,
            logs.RetentionDays.ONE_YEAR,
            logs.RetentionDays.TWO_YEARS,
            logs.RetentionDays.FIVE_YEARS,
            logs.RetentionDays.TEN_YEARS,
        ),
        strict=True,
    )
)


def encrypted_log_group(
    scope: Construct, construct_id: str, *, lifetime: LogGroupSettings, key: kms.IKey, purpose: str
) -> logs.LogGroup:
    """The log group of `purpose`, encrypted with `key` (whose policy lets CloudWatch Logs use it for the log groups
    under `lifetime.name_root` only) and kept for `lifetime`."""
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=lifetime.name(purpose),
        encryption_key=key,
        retention=log_retention(lifetime.retention_days),
        removal_policy=lifetime.removal,
    )
