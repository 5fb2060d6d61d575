"""Issue 30, finding 4: an edited pipeline-definition cache entry never reaches a template. Before the fix, an entry
with `EnableNetworkIsolation: false` written under the inputs' digest was read back as long as it parsed as JSON."""

from __future__ import annotations

import json

import pytest

from config import load_settings
from pipeline_steps import definition_cache
from pipeline_steps.definition import definition_json

ISOLATED, NOT_ISOLATED = '"EnableNetworkIsolation":true', '"EnableNetworkIsolation":false'


@pytest.fixture(scope="module")
def settings(cdk_context):
    return load_settings(cdk_context)


def test_an_entry_edited_to_drop_network_isolation_is_rebuilt(tmp_path, settings):
    definition_cache.definition_json_cached(settings, tmp_path)
    [entry] = tmp_path.glob("*.json")
    poisoned = entry.read_text().replace(ISOLATED, NOT_ISOLATED)
    assert poisoned != entry.read_text() and json.loads(poisoned)
    entry.write_text(poisoned)
    # The same name, as an attacker who can write the folder but does not rename the entry would leave it.
    text = definition_cache.definition_json_cached(settings, tmp_path)
    assert text == definition_json(settings)
    assert NOT_ISOLATED not in text and ISOLATED in text


def test_a_symlinked_entry_is_not_followed(tmp_path, settings):
    definition_cache.definition_json_cached(settings, tmp_path)
    [entry] = tmp_path.glob("*.json")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-planted.json"
    elsewhere.write_text(entry.read_text())
    entry.unlink()
    entry.symlink_to(elsewhere)
    assert definition_cache.definition_json_cached(settings, tmp_path) == definition_json(settings)
    assert not entry.is_symlink()
