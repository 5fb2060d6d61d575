"""A person's decision recorded on a model package (`make register`): its CustomerMetadataProperties keys and the
rule every value must meet, shared by the local registry's registration and the AWS one.

CustomerMetadataProperties: at most 50 entries, keys of 1-128 and values of 1-256 characters, each a letter,
number, separator (space) or one of `_.:/=+-@` (the pattern [\\p{L}\\p{Z}\\p{N}_.:\\/=+\\-@]*); ApprovalDescription: at
most 1024 characters. https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModelPackage.html
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime

METADATA_VALUE_MAX = 256
METADATA_ENTRIES_MAX = 50
METADATA_PUNCTUATION = set("_.:/=+-@")
REGISTERED_BY, REGISTERED_AT, REASON, SOURCE = (
    "registered_by",
    "registered_at",
    "registration_reason",
    "registered_from",
)
PENDING = "PendingManualApproval"


def metadata_value_problem(value: str) -> str | None:
    """Why `value` cannot be a CustomerMetadataProperties value, or None."""
    if not 1 <= len(value) <= METADATA_VALUE_MAX:
        return f"has {len(value)} characters; a model package's metadata value has 1 to {METADATA_VALUE_MAX}"
    bad = sorted({c for c in value if unicodedata.category(c)[0] not in "LNZ" and c not in METADATA_PUNCTUATION})
    if bad:
        return f"has {''.join(bad)!r}: only letters, numbers, spaces and _.:/=+-@ may be stored"
    return None


def decision(who: str, reason: str, source: str) -> dict[str, str]:
    """The person's decision as CustomerMetadataProperties; ValueError naming the value that cannot be stored."""
    values = {
        REGISTERED_BY: who,
        REGISTERED_AT: datetime.now(UTC).isoformat(timespec="seconds"),
        REASON: reason,
        SOURCE: source,
    }
    for key, value in values.items():
        if (problem := metadata_value_problem(value)) is not None:
            raise ValueError(f"REASON {problem}" if key == REASON else f"{key} {value!r} {problem}")
    return values
