from tests.training_code.conftest import pretrained_dir  # noqa: F401  (shared model fixture)
