"""The bundled sample dataset (data/sample-squad) is what tools/make_sample_dataset.py generates, byte for byte."""

from __future__ import annotations

from config.paths import SAMPLE_DATASET
from tools.make_sample_dataset import generate


def test_the_generator_reproduces_the_bundled_sample(tmp_path):
    generate(tmp_path)
    bundled = sorted(p.relative_to(SAMPLE_DATASET) for p in SAMPLE_DATASET.rglob("*") if p.is_file())
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert generated == bundled
    for relative in bundled:
        assert (tmp_path / relative).read_bytes() == (SAMPLE_DATASET / relative).read_bytes(), relative
