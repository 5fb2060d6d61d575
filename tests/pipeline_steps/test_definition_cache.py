"""The definition cache: a hit returns the built text without importing the SDK; any changed input misses."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from config import load_settings
from config.paths import UnsafeBuildDir
from pipeline_steps import definition_cache
from pipeline_steps.definition import definition_json
from tests.conftest import ROOT

LOOKUP = """
import sys
from pathlib import Path
from config import load_settings, read_cdk_json_context
from pipeline_steps.definition_cache import definition_json_cached
text = definition_json_cached(load_settings(read_cdk_json_context()), Path(sys.argv[1]))
print(len(text), "sagemaker" in sys.modules)
"""


def lookup_in_a_fresh_process(cache_dir) -> tuple[int, bool]:
    result = subprocess.run(
        [sys.executable, "-c", LOOKUP, str(cache_dir)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    length, imported = result.stdout.split()
    return int(length), imported == "True"


def test_a_miss_builds_and_stores_then_a_hit_skips_the_sdk(tmp_path, settings):
    cache = tmp_path / "cache"
    built_length, imported_on_miss = lookup_in_a_fresh_process(cache)
    entries = list(cache.iterdir())
    assert imported_on_miss
    assert [entry.suffix for entry in entries] == [".json"]
    assert entries[0].read_text() == definition_json(settings)
    assert built_length == len(entries[0].read_text())
    assert lookup_in_a_fresh_process(cache) == (built_length, False)


def test_a_damaged_entry_is_removed_and_rebuilt(tmp_path, settings):
    damaged = '{"Version": "2020-12-01", "Steps": ['
    entry = tmp_path / f"{definition_cache.inputs_digest(settings)}.{hashlib.sha256(damaged.encode()).hexdigest()}.json"
    entry.write_text(damaged)
    assert definition_cache.definition_json_cached(settings, tmp_path) == definition_json(settings)
    assert not entry.exists()
    [rebuilt] = tmp_path.glob("*.json")
    assert rebuilt.read_text() == definition_json(settings)


def test_a_cache_folder_others_may_write_to_is_refused(tmp_path, settings):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(UnsafeBuildDir, match="writable only by you"):
        definition_cache.definition_json_cached(settings, shared)


def test_deploy_and_diff_build_the_definition_in_the_same_run():
    """app.py asks `cache_dir_for(os.environ)`; the Makefile's deploy and diff recipes switch the cache off (for
    the CDK that tools/cdk_context.py then starts with the same environment)."""
    assert definition_cache.cache_dir_for({}) == definition_cache.DEFAULT_CACHE_DIR
    assert definition_cache.cache_dir_for({definition_cache.DISABLE_VARIABLE: "off"}) is None
    makefile = (ROOT / "Makefile").read_text()
    assert f"NO_DEFINITION_CACHE := {definition_cache.DISABLE_VARIABLE}=off" in makefile
    for verb in ("deploy", "diff"):
        assert f"$(NO_DEFINITION_CACHE) $(WITH_CONTEXT) $(CDK) {verb} " in makefile


def test_only_the_most_recently_used_entries_are_kept(tmp_path, monkeypatch, settings):
    monkeypatch.setattr(definition_cache, "MAX_ENTRIES", 2)
    for age, name in enumerate(["oldest", "older"]):
        stale = tmp_path / f"{name}.json"
        stale.write_text("{}")
        os.utime(stale, (1_000_000 + age, 1_000_000 + age))
    definition_cache.definition_json_cached(settings, tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 2
    assert (tmp_path / "older.json").exists()
    assert not (tmp_path / "oldest.json").exists()


def test_without_a_cache_dir_it_always_builds(settings):
    assert definition_cache.definition_json_cached(settings, None) == definition_json(settings)


def test_changed_settings_are_a_new_key(cdk_context, settings):
    other = load_settings({**cdk_context, "training.instance_type": "ml.p4d.24xlarge", "training.instance_count": 4})
    assert other.training.instance_count != settings.training.instance_count
    digest = definition_cache.inputs_digest
    assert digest(other) != digest(settings)


def test_changed_source_is_a_new_key(tmp_path, monkeypatch, settings):
    package = tmp_path / "pipeline_steps"
    package.mkdir()
    module = package / "steps.py"
    module.write_text("VALUE = 1\n")
    monkeypatch.setattr(definition_cache, "SOURCE_DIRS", (package,))
    before = definition_cache.inputs_digest(settings)
    assert definition_cache.inputs_digest(settings) == before
    module.write_text("VALUE = 2\n")
    assert definition_cache.inputs_digest(settings) != before


def test_changed_contract_file_is_a_new_key(tmp_path, monkeypatch, settings):
    contract = tmp_path / "training_code" / "qa" / "outputs.py"
    contract.parent.mkdir(parents=True)
    contract.write_text('STATS_FILE = "stats.json"\n')
    monkeypatch.setattr(definition_cache, "SOURCE_FILES", (contract,))
    before = definition_cache.inputs_digest(settings)
    contract.write_text('STATS_FILE = "statistics.json"\n')
    assert definition_cache.inputs_digest(settings) != before
