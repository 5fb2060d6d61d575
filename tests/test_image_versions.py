"""`make test-images`: each training image's venv pins that image's transformers and accelerate, and keeps every
other pin of the project (tests/image_versions.py)."""

from __future__ import annotations

from config.images import DEFAULT_TRAINING_IMAGES, VOLTA_TRAINING_IMAGE
from tests.conftest import ROOT
from tests.image_versions import REPINNED, image_requirements, package_name


def pins(text: str) -> dict[str, str]:
    return {package_name(line): line.strip() for line in text.splitlines() if package_name(line)}


def test_an_image_venv_pins_the_images_libraries_and_keeps_the_rest():
    for image in (*DEFAULT_TRAINING_IMAGES.values(), VOLTA_TRAINING_IMAGE):
        requirements, constraints = image_requirements(image)
        required = pins(requirements)
        assert required["transformers"] == f"transformers=={image.transformers_version}"
        assert required["accelerate"] == f"accelerate=={image.accelerate_version}"
        assert required["torch"] == "torch==2.13.0"  # the CPU stand-in, never an unpinned or CUDA torch
        assert f"-r {ROOT / 'requirements.txt'}" in requirements.splitlines()
        constrained = pins(constraints)
        assert not set(REPINNED) & set(constrained)
        project = pins((ROOT / "constraints.txt").read_text())
        assert {name: pin for name, pin in project.items() if name not in REPINNED} == constrained
    assert VOLTA_TRAINING_IMAGE.transformers_version == "4.49.0" and VOLTA_TRAINING_IMAGE.accelerate_version == "1.4.0"
